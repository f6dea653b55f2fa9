/*===- cuda_kernels.h - Tessera's CUDA kernels (C ABI) ---------------------===*
 *
 * The GPU backend: the same operations as cpu_kernels.h, with the same
 * argument lists and the same semantics, plus a `cudaStream_t stream` last
 * argument. Everything in cpu_kernels.h's "Conventions" holds, with these
 * differences:
 * - Tensors' `data` are device pointers; descriptors (tessera_tensor, the
 *   int64_t arrays of permutations, starts, dims) live in host memory.
 * - Kernels are asynchronous: a call checks shapes and dtypes on the host,
 *   launches on `stream` and returns. A nonzero return means nothing was
 *   launched (or a launch failed); the message is in tessera_cuda_last_error().
 * - Errors that only the data can reveal (a token id out of range, an integer
 *   division by zero) are recorded on the device by the kernel that meets
 *   them (the first one wins; the output holds zeros there) and reported by
 *   tessera_cuda_check_device_errors(stream), which synchronizes the stream:
 *   call it once a step, not after each kernel.
 * - tessera_cuda_sum_squares adds into a device f64 (`accumulator` is a
 *   device pointer), so a global gradient norm needs no host round trip.
 * - Supported storage: float kernels take f32, bf16 and f16 (matmul and
 *   linear f64 too); data movement, cast, binary ops and reductions take
 *   every tessera_dtype.
 * - Scratch (the cuBLASLt workspace, f32 accumulators of gradients stored in
 *   bf16/f16, loss sums) is allocated the first time a (device, stream) needs
 *   it and kept: after the first step no kernel allocates.
 *===----------------------------------------------------------------------===*/

#ifndef TESSERA_RUNTIME_CUDA_KERNELS_H
#define TESSERA_RUNTIME_CUDA_KERNELS_H

#include "tessera/runtime/cpu_kernels.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Message of the last failing call on this thread ("" if none). */
const char *tessera_cuda_last_error(void);
/* Synchronizes `stream`; returns 1 (message in tessera_cuda_last_error) if a
 * kernel on the current device recorded a data error since the last check,
 * and clears the record; 0 otherwise. Also reports asynchronous CUDA errors. */
int tessera_cuda_check_device_errors(cudaStream_t stream);
/* Frees the scratch, cuBLASLt handles and error records of every device. */
void tessera_cuda_release_resources(void);

/*--- Elementwise ---------------------------------------------------------*/
int tessera_cuda_unary(int32_t op, const tessera_tensor *x, tessera_tensor *y,
                       cudaStream_t stream);
int tessera_cuda_unary_grad(int32_t op, const tessera_tensor *x,
                            const tessera_tensor *dy, tessera_tensor *dx,
                            cudaStream_t stream);
int tessera_cuda_binary(int32_t op, const tessera_tensor *a,
                        const tessera_tensor *b, tessera_tensor *y,
                        cudaStream_t stream);
int tessera_cuda_where(const tessera_tensor *condition,
                       const tessera_tensor *on_true,
                       const tessera_tensor *on_false, tessera_tensor *y,
                       cudaStream_t stream);
int tessera_cuda_cast(const tessera_tensor *x, tessera_tensor *y,
                      cudaStream_t stream);
int tessera_cuda_dropout(const tessera_tensor *x, tessera_tensor *y,
                         double rate, uint64_t seed, cudaStream_t stream);

/*--- Contractions --------------------------------------------------------*/
/* Every later product's algorithm is the fastest of cuBLASLt's heuristic
 * candidates, timed on its shape's first eager call (enabled != 0), or the
 * heuristic's first (0, the default: the same bits every run). Plans made
 * before the call keep their algorithm. */
void tessera_cuda_set_gemm_autotune(int32_t enabled);
/* Every later attention shape that cuDNN serves runs the fastest of the
 * engine configurations its heuristics (A and B) offer, timed on the
 * shape's first eager call (enabled != 0), or the heuristic's first (0, the
 * default: the same bits every run). Shapes built before the call keep
 * their configuration. */
void tessera_cuda_set_attention_autotune(int32_t enabled);
/* enabled != 0: kernels whose reduction order is not fixed use a fixed one,
 * so a run computes the same bits every time (PyTorch's
 * use_deterministic_algorithms): cuDNN's attention backward, which adds dq
 * across key blocks atomically by default, is built deterministic (slower).
 * Where cuDNN does not run a backward, Tessera's flash kernels still add dq
 * atomically: the first such shape says so on stderr. Off by default. */
void tessera_cuda_set_deterministic(int32_t enabled);
int tessera_cuda_matmul(const tessera_tensor *a, const tessera_tensor *b,
                        tessera_tensor *y, int32_t transpose_a,
                        int32_t transpose_b, cudaStream_t stream);
/* y = op(a) @ b of matrices and dbias[n] = sum over k of b[k, n]: a weight
 * gradient and its bias gradient in one call (b, the output gradient, is
 * read once where the GEMM's epilogue can sum it). b is not transposed. */
int tessera_cuda_matmul_bias_grad(
    const tessera_tensor *a, const tessera_tensor *b, tessera_tensor *y,
    tessera_tensor *dbias, int32_t transpose_a, int32_t transpose_b,
    cudaStream_t stream);
/* As the CPU kernel: y = op(a) @ op(b) + addend, y may be the addend. */
int tessera_cuda_matmul_add(const tessera_tensor *a, const tessera_tensor *b,
                            const tessera_tensor *addend, tessera_tensor *y,
                            int32_t transpose_a, int32_t transpose_b,
                            cudaStream_t stream);
int tessera_cuda_linear(const tessera_tensor *x, const tessera_tensor *weight,
                        const tessera_tensor *bias, tessera_tensor *y,
                        int32_t transpose_weight, cudaStream_t stream);
/* A linear layer and the tanh GELU after it: pre = x W (+ bias) and
 * y = gelu_tanh(pre), both of tessera_cuda_linear's y shape. pre is what
 * the GELU's gradient reads. (CUDA: one GEMM with cuBLASLt's GELU_AUX
 * epilogue for bf16/f16.) */
int tessera_cuda_linear_gelu(const tessera_tensor *x,
                             const tessera_tensor *weight,
                             const tessera_tensor *bias, tessera_tensor *pre,
                             tessera_tensor *y, int32_t transpose_weight, cudaStream_t stream);
/* A linear layer and the residual add after it: y = x W (+ bias) +
 * residual, residual of y's shape and dtype. (CUDA: one GEMM, the residual
 * as its C with beta = 1, for bf16/f16/f32.) */
int tessera_cuda_linear_add(const tessera_tensor *x,
                            const tessera_tensor *weight,
                            const tessera_tensor *bias,
                            const tessera_tensor *residual, tessera_tensor *y,
                            int32_t transpose_weight, cudaStream_t stream);
/* The input gradient of a linear layer whose input is gelu_tanh(pre), taken
 * through the GELU: dx = (dy W^T or dy W) * gelu_tanh'(pre), dx of pre's
 * shape. (CUDA: one GEMM with the DGELU epilogue for bf16/f16.) */
int tessera_cuda_linear_dgelu(const tessera_tensor *dy,
                              const tessera_tensor *weight,
                              const tessera_tensor *pre, tessera_tensor *dx,
                              int32_t transpose_weight, cudaStream_t stream);

/*--- Transformer layers --------------------------------------------------*/
int tessera_cuda_layer_norm(const tessera_tensor *x, const tessera_tensor *scale,
                            const tessera_tensor *bias, tessera_tensor *y,
                            int64_t axis, double epsilon, cudaStream_t stream);
int tessera_cuda_layer_norm_grad(const tessera_tensor *x,
                                 const tessera_tensor *scale,
                                 const tessera_tensor *dy, tessera_tensor *dx,
                                 tessera_tensor *dscale, tessera_tensor *dbias,
                                 int64_t axis, double epsilon,
                                 cudaStream_t stream);
/* dx = residual + layer_norm's input gradient, rounded once: the backward's
 * residual-stream add after each norm, fused. */
int tessera_cuda_layer_norm_grad_add(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, const tessera_tensor *residual,
    tessera_tensor *dx, tessera_tensor *dscale, tessera_tensor *dbias,
    int64_t axis, double epsilon,
    cudaStream_t stream);
/* tess.swiglu and tess.swiglu_grad (see tessera_cpu_swiglu). */
int tessera_cuda_swiglu(const tessera_tensor *gate, const tessera_tensor *up,
                        tessera_tensor *y, cudaStream_t stream);
int tessera_cuda_swiglu_grad(const tessera_tensor *gate,
                             const tessera_tensor *up, const tessera_tensor *dy,
                             tessera_tensor *dgate, tessera_tensor *dup,
                             cudaStream_t stream);
/* tess.packed_swiglu and tess.packed_swiglu_grad (see
 * tessera_cpu_packed_swiglu). */
int tessera_cuda_packed_swiglu(const tessera_tensor *input, tessera_tensor *y,
                               cudaStream_t stream);
int tessera_cuda_packed_swiglu_grad(const tessera_tensor *input,
                                    const tessera_tensor *dy,
                                    tessera_tensor *dinput,
                                    cudaStream_t stream);
/* tess.rotary (see tessera_cpu_rotary). */
int tessera_cuda_rotary(const tessera_tensor *x, const tessera_tensor *cos,
                        const tessera_tensor *sin, tessera_tensor *y,
                        int32_t adjoint, int64_t rotated_heads,
                        cudaStream_t stream);
int tessera_cuda_rms_norm(const tessera_tensor *x, const tessera_tensor *scale,
                          tessera_tensor *y, int64_t axis, double epsilon,
                          cudaStream_t stream);
int tessera_cuda_rms_norm_grad(const tessera_tensor *x,
                               const tessera_tensor *scale,
                               const tessera_tensor *dy, tessera_tensor *dx,
                               tessera_tensor *dscale, int64_t axis,
                               double epsilon, cudaStream_t stream);
int tessera_cuda_rms_norm_grad_add(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, const tessera_tensor *residual,
    tessera_tensor *dx, tessera_tensor *dscale, int64_t axis,
    double epsilon,
    cudaStream_t stream);
int tessera_cuda_softmax(const tessera_tensor *x, tessera_tensor *y,
                         int64_t axis, cudaStream_t stream);
int tessera_cuda_softmax_grad(const tessera_tensor *y, const tessera_tensor *dy,
                              tessera_tensor *dx, int64_t axis,
                              cudaStream_t stream);
int tessera_cuda_attention(const tessera_tensor *q, const tessera_tensor *k,
                           const tessera_tensor *v, const tessera_tensor *mask,
                           tessera_tensor *y, int32_t causal, double scale,
                           double dropout, uint64_t seed, cudaStream_t stream);
int tessera_cuda_attention_grad(const tessera_tensor *q, const tessera_tensor *k,
                                const tessera_tensor *v,
                                const tessera_tensor *mask,
                                const tessera_tensor *dy, tessera_tensor *dq,
                                tessera_tensor *dk, tessera_tensor *dv,
                                int32_t causal, double scale, double dropout,
                                uint64_t seed, cudaStream_t stream);
/* tessera_cpu_sliding_window_attention(_grad) on the GPU: causal attention
 * in which query i sees only keys i + Skv - Sq - window < j <= i + Skv - Sq
 * (window >= 1). On cuDNN's fused engines (a diagonal band, the tiles
 * outside it skipped) where they apply (bf16/f16, no mask, no dropout);
 * elsewhere the general kernels, over the band only. */
int tessera_cuda_sliding_window_attention(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, tessera_tensor *y, int64_t window,
    double scale, double dropout, uint64_t seed, cudaStream_t stream);
int tessera_cuda_sliding_window_attention_grad(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, const tessera_tensor *dy, tessera_tensor *dq,
    tessera_tensor *dk, tessera_tensor *dv, int64_t window, double scale,
    double dropout, uint64_t seed, cudaStream_t stream);
/* tessera_cpu_softcapped_attention(_grad) on the GPU: Gemma-2's logit
 * softcap (softcap > 0) on the scaled scores before the mask, with an
 * optional causal window. On cuDNN's fused engines with its Softcap score
 * modifier where they apply (bf16/f16, no mask, no dropout, and a cuDNN
 * that builds the graph); elsewhere the general kernels. */
int tessera_cuda_softcapped_attention(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, tessera_tensor *y, int32_t causal,
    int64_t window, double scale, double softcap, double dropout,
    uint64_t seed, cudaStream_t stream);
int tessera_cuda_softcapped_attention_grad(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, const tessera_tensor *dy, tessera_tensor *dq,
    tessera_tensor *dk, tessera_tensor *dv, int32_t causal, int64_t window,
    double scale, double softcap, double dropout, uint64_t seed,
    cudaStream_t stream);
/* tess.packed_attention and its gradient: the layouts and semantics of
 * tessera_cpu_packed_attention(_grad). The backward reads the forward's y
 * and lse instead of rerunning the forward. */
int tessera_cuda_packed_attention(const tessera_tensor *qkv, tessera_tensor *y,
                                  tessera_tensor *lse, int64_t query_heads,
                                  int64_t key_heads, int32_t causal,
                                  double scale, cudaStream_t stream);
int tessera_cuda_packed_attention_grad(
    const tessera_tensor *qkv, const tessera_tensor *y,
    const tessera_tensor *lse, const tessera_tensor *dy, tessera_tensor *dqkv,
    int64_t query_heads, int64_t key_heads, int32_t causal, double scale,
    cudaStream_t stream);
int tessera_cuda_embedding(const tessera_tensor *table,
                           const tessera_tensor *ids, tessera_tensor *y,
                           cudaStream_t stream);
int tessera_cuda_embedding_grad(const tessera_tensor *ids,
                                const tessera_tensor *dy, tessera_tensor *dtable,
                                cudaStream_t stream);
/* The vocabulary-parallel block forms (cpu_kernels.h's _rows). */
int tessera_cuda_embedding_rows(const tessera_tensor *table,
                                const tessera_tensor *ids, tessera_tensor *y,
                                int64_t first_row, int64_t total_rows,
                                cudaStream_t stream);
int tessera_cuda_embedding_grad_rows(const tessera_tensor *ids,
                                     const tessera_tensor *dy,
                                     tessera_tensor *dtable, int64_t first_row,
                                     int64_t total_rows, cudaStream_t stream);
int tessera_cuda_gather(const tessera_tensor *x, const tessera_tensor *indices,
                        tessera_tensor *y, int64_t axis, cudaStream_t stream);
int tessera_cuda_gather_grad(const tessera_tensor *indices,
                             const tessera_tensor *dy, tessera_tensor *dx,
                             int64_t axis, cudaStream_t stream);
/* As the CPU kernels (count_targets may be NULL). */
int tessera_cuda_cross_entropy(const tessera_tensor *logits,
                               const tessera_tensor *targets,
                               const tessera_tensor *count_targets,
                               tessera_tensor *loss, int64_t ignore_index,
                               cudaStream_t stream);
int tessera_cuda_cross_entropy_grad(const tessera_tensor *logits,
                                    const tessera_tensor *targets,
                                    const tessera_tensor *count_targets,
                                    const tessera_tensor *dloss,
                                    tessera_tensor *dlogits,
                                    int64_t ignore_index, cudaStream_t stream);
int tessera_cuda_cross_entropy_with_grad(const tessera_tensor *logits,
                                         const tessera_tensor *targets,
                                         const tessera_tensor *count_targets,
                                         const tessera_tensor *dloss,
                                         tessera_tensor *loss,
                                         tessera_tensor *dlogits,
                                         int64_t ignore_index,
                                         cudaStream_t stream);

/*--- Data movement -------------------------------------------------------*/
int tessera_cuda_copy(const tessera_tensor *x, tessera_tensor *y,
                      cudaStream_t stream);
int tessera_cuda_transpose(const tessera_tensor *x, tessera_tensor *y,
                           const int64_t *permutation, cudaStream_t stream);
int tessera_cuda_broadcast(const tessera_tensor *x, tessera_tensor *y,
                           cudaStream_t stream);
int tessera_cuda_slice(const tessera_tensor *x, tessera_tensor *y,
                       const int64_t *starts, const int64_t *strides,
                       cudaStream_t stream);
int tessera_cuda_slice_grad(const tessera_tensor *dy, tessera_tensor *dx,
                            const int64_t *starts, const int64_t *strides,
                            cudaStream_t stream);
int tessera_cuda_concat(const tessera_tensor *const *inputs, int32_t count,
                        tessera_tensor *y, int64_t axis, cudaStream_t stream);
int tessera_cuda_split(const tessera_tensor *x, tessera_tensor *const *outputs,
                       int32_t count, int64_t axis, cudaStream_t stream);

/*--- Reductions ----------------------------------------------------------*/
int tessera_cuda_reduce(int32_t op, const tessera_tensor *x, tessera_tensor *y,
                        const int64_t *dims, int32_t dim_count,
                        cudaStream_t stream);

/*--- Optimizer -----------------------------------------------------------*/
/* `accumulator` is a device pointer to one f64. */
int tessera_cuda_sum_squares(const tessera_tensor *x, double *accumulator,
                             cudaStream_t stream);
int tessera_cuda_adamw(tessera_tensor *param, const tessera_tensor *grad,
                       tessera_tensor *m, tessera_tensor *v, int64_t step,
                       double lr, double beta1, double beta2, double eps,
                       double weight_decay, double grad_scale,
                       cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_CUDA_KERNELS_H */
