/*===- cuda_optimizer.h - the driver's GPU kernels around the step ---------===*
 *
 * What the training driver runs on the GPU between calls of forward_backward,
 * over the flat per-parameter buffers of a run (tensor_chunks.h: one buffer
 * per kind, the same element offsets in each):
 * - tessera_cuda_accumulate_gradients: the f32 sum of the micro-batches'
 *   compute-precision gradients (cast and add in one pass);
 * - tessera_cuda_chunk_sum_squares: the gradient's sum of squares, one f64
 *   per chunk, with no atomics, so the driver's global norm (the per-chunk
 *   sums added on the host in order) is the same number every run;
 * - tessera_cuda_multi_tensor_adamw: AdamW over every parameter in one
 *   launch, one block per chunk, with tessera_cuda_adamw's arithmetic.
 * `chunks` is a device array. Every function checks its arguments, launches
 * on `stream` and returns 0, or nonzero with tessera_cuda_last_error() set.
 *===----------------------------------------------------------------------===*/

#ifndef TESSERA_RUNTIME_CUDA_OPTIMIZER_H
#define TESSERA_RUNTIME_CUDA_OPTIMIZER_H

#include "tessera/runtime/cuda_kernels.h"
#include "tessera/runtime/tensor_chunks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* accumulator[i] = (first ? 0 : accumulator[i]) + gradient[i] for i < count;
 * gradient is f32, bf16 or f16. */
int tessera_cuda_accumulate_gradients(float *accumulator, const void *gradient,
                                      int32_t gradient_dtype, int64_t count,
                                      int32_t first, cudaStream_t stream);

/* partial_sums[c] = sum over chunk c of x[i]^2, in f64 (x: f32, bf16 or
 * f16); every partial_sums[0 .. chunk_count) is written. */
int tessera_cuda_chunk_sum_squares(const void *x, int32_t dtype,
                                   const tessera_tensor_chunk *chunks,
                                   int32_t chunk_count, double *partial_sums,
                                   cudaStream_t stream);

/* One AdamW step of every chunk: params, m, v f32; grad f32, bf16 or f16.
 * Weight decay applies to the chunks whose weight_decay flag is set. With
 * `copies` (may be null), each chunk whose copy_offset is >= 0 also stores
 * its updated parameters there, rounded to nearest even to `copy_dtype`
 * (f32, bf16 or f16): the compute copies the step reads.
 * `nonfinite` (device memory, may be null) is zeroed on `stream`, then set
 * to chunk_count - c for the first chunk c whose update left a parameter or
 * a moment non-finite (0: every value is finite): the driver reads it back
 * with the step's other scalars instead of passing over the weights again. */
int tessera_cuda_multi_tensor_adamw(
    float *params, const void *grad, int32_t grad_dtype, float *m, float *v,
    void *copies, int32_t copy_dtype, const tessera_tensor_chunk *chunks,
    int32_t chunk_count, int64_t step, double lr, double beta1, double beta2,
    double eps, double weight_decay, double grad_scale, int32_t *nonfinite,
    cudaStream_t stream);

/* copies[chunk.copy_offset + k] = params[chunk.offset + k] rounded to
 * nearest even to `copy_dtype`, for every chunk with copy_offset >= 0: the
 * compute copies made from the masters alone. */
int tessera_cuda_round_chunk_copies(const float *params, void *copies,
                                    int32_t copy_dtype,
                                    const tessera_tensor_chunk *chunks,
                                    int32_t chunk_count, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_CUDA_OPTIMIZER_H */
