/*===- host_optimizer.h - AdamW over the driver's flat buffers on the host -===*
 *
 * The CPU twin of cuda_optimizer.h's tessera_cuda_multi_tensor_adamw, for a
 * run whose optimizer state lives in host memory (`--offload optimizer`:
 * the fp32 masters and both moments pinned on the host, the GPU keeping
 * only what the step reads). Same table of chunks (tensor_chunks.h), same
 * flat buffers, tessera_cpu_adamw's arithmetic bit for bit, and the compute
 * copies rounded to nearest even as tessera_cpu_cast rounds. The function
 * is single-threaded and touches only its chunks, so the driver's thread
 * pool runs disjoint sub-tables of one update in parallel.
 *===----------------------------------------------------------------------===*/

#ifndef TESSERA_RUNTIME_HOST_OPTIMIZER_H
#define TESSERA_RUNTIME_HOST_OPTIMIZER_H

#include "tessera/runtime/tensor_chunks.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One AdamW step of every chunk of `chunks[0 .. chunk_count)`: params, m, v
 * f32; grad f32, bf16 or f16 (all host memory, indexed by chunk.offset).
 * Weight decay applies to the chunks whose weight_decay flag is set. With
 * `copies` (may be null), each chunk whose copy_offset is >= 0 also stores
 * its updated parameters there, rounded to `copy_dtype` (bf16 or f16).
 * `nonfinite` (may be null) is set to the index of the first chunk whose
 * update left a parameter or a second moment non-finite, or -1.
 * Returns 0, or nonzero with tessera_cpu_last_error() set (on the calling
 * thread). */
int tessera_cpu_chunk_adamw(
    float *params, const void *grad, int32_t grad_dtype, float *m, float *v,
    void *copies, int32_t copy_dtype, const tessera_tensor_chunk *chunks,
    int32_t chunk_count, int64_t step, double lr, double beta1, double beta2,
    double eps, double weight_decay, double grad_scale, int32_t *nonfinite);

/* copies[chunk.copy_offset + k] = params[chunk.offset + k] rounded to
 * `copy_dtype` (bf16 or f16), for every chunk with copy_offset >= 0: the
 * compute copies made from the masters alone (at load and resume). */
int tessera_cpu_round_chunk_copies(const float *params, void *copies,
                                   int32_t copy_dtype,
                                   const tessera_tensor_chunk *chunks,
                                   int32_t chunk_count);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_HOST_OPTIMIZER_H */
