/*===- cpu_kernels.h - Tessera's reference kernels (C ABI) ----------------===*
 *
 * The CPU backend: one function per `tess` op (forward) and per gradient op,
 * written for clarity and checked against PyTorch. The lowered training
 * program (and the tess interpreter that tests it) calls exactly these; the
 * CUDA backend implements the same ABI with fast kernels.
 *
 * Conventions
 * - Tensors are dense, row-major, described by tessera_tensor. The caller
 *   owns all memory; kernels never allocate outputs (scratch is internal).
 * - Shapes are static and already checked by the compiler; kernels still
 *   check what user data can break (token ids out of range) and return
 *   nonzero with a message in tessera_cpu_last_error().
 * - Floating point: storage may be f32, bf16 or f16; arithmetic is f32
 *   (f64 accumulation for reductions over long axes), rounded once to the
 *   output's storage type.
 * - Broadcasting (binary ops, where) is numpy's: shapes right-aligned, size-1
 *   dims stretch. Gradients of broadcasting are the compiler's business
 *   (reduce_sum in IR), not the kernels'.
 * - Random numbers (dropout) are a pure function of (seed, element index):
 *   a counter-based generator, so a backward kernel regenerates the forward
 *   mask from the same seed instead of storing it. The generator is
 *   SplitMix64 read at position i (every backend must reproduce it):
 *     mix(z)  = z ^= z >> 30, z *= 0xBF58476D1CE4E5B9,
 *               z ^= z >> 27, z *= 0x94D049BB133111EB, z ^ (z >> 31)
 *     bits(i) = mix(mix(seed) + (i + 1) * 0x9E3779B97F4A7C15)   (mod 2^64)
 *     element i is kept iff (bits(i) >> 40) >= floor(rate * 2^24)
 *   where i is the row-major index in the dropped tensor. Attention's
 *   weights [B, Hq, Sq, Skv] are indexed with a fixed head stride instead,
 *   weight (b, h, i, j) at ((b * TESSERA_ATTENTION_DROPOUT_HEADS + h) * Sq
 *   + i) * Skv + j, so that a block of heads (a tensor-parallel rank's) is,
 *   like a block of batch rows, the whole op's stream advanced by a count
 *   (tessera_advance_seed) whatever the other dims' blocks.
 * - Gradient outputs are overwritten, never accumulated into.
 *===----------------------------------------------------------------------===*/

#ifndef TESSERA_RUNTIME_CPU_KERNELS_H
#define TESSERA_RUNTIME_CPU_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSERA_MAX_RANK 8
/* The head stride of attention's dropout index (above): at most this many
 * query heads per attention with dropout. */
#define TESSERA_ATTENTION_DROPOUT_HEADS 65536

typedef enum tessera_dtype {
  TESSERA_F32 = 0,
  TESSERA_BF16 = 1,
  TESSERA_F16 = 2,
  TESSERA_F64 = 3,
  TESSERA_I64 = 4,
  TESSERA_I32 = 5,
  TESSERA_I8 = 6,
  TESSERA_I16 = 7,
  TESSERA_BOOL = 8 /* one byte per element, 0 or 1 */
} tessera_dtype;

typedef struct tessera_tensor {
  void *data;
  int32_t dtype; /* tessera_dtype */
  int32_t rank;
  int64_t shape[TESSERA_MAX_RANK];
} tessera_tensor;

/* Message of the last failing call on this thread ("" if none); a successful
 * call leaves it unchanged. Messages start with the kernel's name. */
const char *tessera_cpu_last_error(void);

/*--- Elementwise ---------------------------------------------------------*/

typedef enum tessera_unary_op {
  TESSERA_NEG, TESSERA_ABS, TESSERA_EXP, TESSERA_LOG, TESSERA_SQRT,
  TESSERA_RSQRT, TESSERA_RECIPROCAL, TESSERA_TANH, TESSERA_ERF,
  TESSERA_SIGMOID, TESSERA_RELU, TESSERA_SILU, TESSERA_GELU_ERF,
  TESSERA_GELU_TANH, TESSERA_COS, TESSERA_SIN, TESSERA_LOGICAL_NOT
} tessera_unary_op;

typedef enum tessera_binary_op {
  TESSERA_ADD, TESSERA_SUB, TESSERA_MUL, TESSERA_DIV, TESSERA_POW,
  TESSERA_MAXIMUM, TESSERA_MINIMUM, TESSERA_LOGICAL_AND, TESSERA_LOGICAL_OR,
  TESSERA_EQ, TESSERA_NE, TESSERA_LT, TESSERA_LE, TESSERA_GT, TESSERA_GE
} tessera_binary_op;

int tessera_cpu_unary(int32_t op, const tessera_tensor *x, tessera_tensor *y);
/* dx = dy * d op(x)/dx, for the differentiable unary ops. */
int tessera_cpu_unary_grad(int32_t op, const tessera_tensor *x,
                           const tessera_tensor *dy, tessera_tensor *dx);
/* a and b share one dtype. Comparisons and logical ops write BOOL; the others
 * write a's dtype. Integer ops follow C semantics (div truncates; division by
 * zero is an error); float maximum/minimum propagate NaN. */
int tessera_cpu_binary(int32_t op, const tessera_tensor *a,
                       const tessera_tensor *b, tessera_tensor *y);
int tessera_cpu_where(const tessera_tensor *condition,
                      const tessera_tensor *on_true,
                      const tessera_tensor *on_false, tessera_tensor *y);
/* Any dtype to any dtype: float->int truncates, ->BOOL is "not zero". */
int tessera_cpu_cast(const tessera_tensor *x, tessera_tensor *y);
/* y = dropout(x): zero with probability `rate`, else x / (1 - rate). The mask
 * of element i is a function of (seed, i) only. */
int tessera_cpu_dropout(const tessera_tensor *x, tessera_tensor *y,
                        double rate, uint64_t seed);

/*--- Contractions --------------------------------------------------------*/

/* y = op(a) @ op(b) over the last two dims, batch dims broadcast. Float
 * storage (f32, bf16, f16, f64); f32 accumulation. */
int tessera_cpu_matmul(const tessera_tensor *a, const tessera_tensor *b,
                       tessera_tensor *y, int32_t transpose_a,
                       int32_t transpose_b);
/* y[..., n] = x[..., k] W[k, n] (+ bias[n]); W is [n, k] when
 * transpose_weight. bias may be NULL. */
/* y = op(a) @ b of matrices and dbias[n] = sum over k of b[k, n]: a weight
 * gradient and its bias gradient in one call (b, the output gradient, is
 * read once where the GEMM's epilogue can sum it). b is not transposed. */
int tessera_cpu_matmul_bias_grad(
    const tessera_tensor *a, const tessera_tensor *b, tessera_tensor *y,
    tessera_tensor *dbias, int32_t transpose_a, int32_t transpose_b);
/* y = op(a) @ op(b) + addend, addend of y's shape and dtype; y may be the
 * addend's own storage (a sum accumulated in place). (CUDA: one GEMM, the
 * addend as its C with beta = 1.) */
int tessera_cpu_matmul_add(const tessera_tensor *a, const tessera_tensor *b,
                           const tessera_tensor *addend, tessera_tensor *y,
                           int32_t transpose_a, int32_t transpose_b);
int tessera_cpu_linear(const tessera_tensor *x, const tessera_tensor *weight,
                       const tessera_tensor *bias, tessera_tensor *y,
                       int32_t transpose_weight);
/* A linear layer and the tanh GELU after it: pre = x W (+ bias) and
 * y = gelu_tanh(pre), both of tessera_cpu_linear's y shape. pre is what
 * the GELU's gradient reads. (CUDA: one GEMM with cuBLASLt's GELU_AUX
 * epilogue for bf16/f16.) */
int tessera_cpu_linear_gelu(const tessera_tensor *x,
                            const tessera_tensor *weight,
                            const tessera_tensor *bias, tessera_tensor *pre,
                            tessera_tensor *y, int32_t transpose_weight);
/* A linear layer and the residual add after it: y = x W (+ bias) +
 * residual, residual of y's shape and dtype. (CUDA: one GEMM, the residual
 * as its C with beta = 1, for bf16/f16/f32.) */
int tessera_cpu_linear_add(const tessera_tensor *x,
                           const tessera_tensor *weight,
                           const tessera_tensor *bias,
                           const tessera_tensor *residual, tessera_tensor *y,
                           int32_t transpose_weight);
/* The input gradient of a linear layer whose input is gelu_tanh(pre), taken
 * through the GELU: dx = (dy W^T or dy W) * gelu_tanh'(pre), dx of pre's
 * shape. (CUDA: one GEMM with the DGELU epilogue for bf16/f16.) */
int tessera_cpu_linear_dgelu(const tessera_tensor *dy,
                             const tessera_tensor *weight,
                             const tessera_tensor *pre, tessera_tensor *dx,
                             int32_t transpose_weight);

/*--- Transformer layers --------------------------------------------------*/

/* Normalized over dims [axis, rank) (axis already non-negative). scale and
 * bias may be NULL. */
int tessera_cpu_layer_norm(const tessera_tensor *x, const tessera_tensor *scale,
                           const tessera_tensor *bias, tessera_tensor *y,
                           int64_t axis, double epsilon);
/* dscale/dbias may be NULL (no scale/bias, or not needed); dscale needs
 * scale. The statistics are recomputed from x. */
int tessera_cpu_layer_norm_grad(const tessera_tensor *x,
                                const tessera_tensor *scale,
                                const tessera_tensor *dy, tessera_tensor *dx,
                                tessera_tensor *dscale, tessera_tensor *dbias,
                                int64_t axis, double epsilon);
/* dx = residual + layer_norm's input gradient, rounded once: the backward's
 * residual-stream add after each norm, fused. */
int tessera_cpu_layer_norm_grad_add(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, const tessera_tensor *residual,
    tessera_tensor *dx, tessera_tensor *dscale, tessera_tensor *dbias,
    int64_t axis, double epsilon);
/* tess.swiglu: y = silu(gate) * up; tess.swiglu_grad: dgate = dy * up *
 * silu'(gate), dup = dy * silu(gate). Every tensor has gate's shape and
 * dtype. */
int tessera_cpu_swiglu(const tessera_tensor *gate, const tessera_tensor *up,
                       tessera_tensor *y);
int tessera_cpu_swiglu_grad(const tessera_tensor *gate,
                            const tessera_tensor *up, const tessera_tensor *dy,
                            tessera_tensor *dgate, tessera_tensor *dup);
/* tess.packed_swiglu and tess.packed_swiglu_grad: the same on `input`
 * [.., 2F], each row's gate then up halves: y [.., F]; dinput [.., 2F] holds
 * dgate then dup in each row and may be `input` itself. */
int tessera_cpu_packed_swiglu(const tessera_tensor *input, tessera_tensor *y);
int tessera_cpu_packed_swiglu_grad(const tessera_tensor *input,
                                   const tessera_tensor *dy,
                                   tessera_tensor *dinput);
/* tess.rotary: y[.., i] = x[.., i] cos[.., i] - x[.., i + h] sin[.., i] and
 * y[.., i + h] = x[.., i + h] cos[.., i + h] + x[.., i] sin[.., i + h] over the
 * last dim (h = D / 2); cos and sin have x's rank and broadcast to it. With
 * `adjoint`, the transposed rotation (the gradient with respect to x).
 * `rotated_heads` > 0 rotates only the entries of dim -2 below it and copies
 * the rest (a packed q/k/v's value heads); 0 rotates all. */
int tessera_cpu_rotary(const tessera_tensor *x, const tessera_tensor *cos,
                       const tessera_tensor *sin, tessera_tensor *y,
                       int32_t adjoint, int64_t rotated_heads);
int tessera_cpu_rms_norm(const tessera_tensor *x, const tessera_tensor *scale,
                         tessera_tensor *y, int64_t axis, double epsilon);
int tessera_cpu_rms_norm_grad(const tessera_tensor *x,
                              const tessera_tensor *scale,
                              const tessera_tensor *dy, tessera_tensor *dx,
                              tessera_tensor *dscale, int64_t axis,
                              double epsilon);
int tessera_cpu_rms_norm_grad_add(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, const tessera_tensor *residual,
    tessera_tensor *dx, tessera_tensor *dscale, int64_t axis,
    double epsilon);
int tessera_cpu_softmax(const tessera_tensor *x, tessera_tensor *y,
                        int64_t axis);
/* From the softmax output y: dx = y * (dy - sum(dy * y)). */
int tessera_cpu_softmax_grad(const tessera_tensor *y, const tessera_tensor *dy,
                             tessera_tensor *dx, int64_t axis);
/* q [B,Hq,Sq,D], k/v [B,Hkv,Skv,D(v)], mask (NULL or broadcastable to
 * [B,Hq,Sq,Skv], added to the scores), causal hides j > i + Skv - Sq (and
 * needs Sq <= Skv). Query head h reads K/V head h / (Hq / Hkv). A query
 * whose scores are all -inf attends to nothing (output 0, as PyTorch's
 * scaled_dot_product_attention). Dropout on the attention weights
 * with (rate, seed); weight (b, h, i, j) has dropout index
 * ((b * TESSERA_ATTENTION_DROPOUT_HEADS + h) * Sq + i) * Skv + j. */
int tessera_cpu_attention(const tessera_tensor *q, const tessera_tensor *k,
                          const tessera_tensor *v, const tessera_tensor *mask,
                          tessera_tensor *y, int32_t causal, double scale,
                          double dropout, uint64_t seed);
/* Recomputes the forward internally; dmask is not produced. dk and dv sum
 * over the query heads that share a K/V head. */
int tessera_cpu_attention_grad(const tessera_tensor *q, const tessera_tensor *k,
                               const tessera_tensor *v,
                               const tessera_tensor *mask,
                               const tessera_tensor *dy, tessera_tensor *dq,
                               tessera_tensor *dk, tessera_tensor *dv,
                               int32_t causal, double scale, double dropout,
                               uint64_t seed);
/* tessera_cpu_attention, causal, with a sliding window (Mistral's): query i
 * sees only keys i + Skv - Sq - window < j <= i + Skv - Sq; window >= 1.
 * Only the band is computed, so the cost is O(Sq * window), not O(Sq Skv). */
int tessera_cpu_sliding_window_attention(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, tessera_tensor *y, int64_t window, double scale,
    double dropout, uint64_t seed);
int tessera_cpu_sliding_window_attention_grad(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, const tessera_tensor *dy, tessera_tensor *dq,
    tessera_tensor *dk, tessera_tensor *dv, int64_t window, double scale,
    double dropout, uint64_t seed);
/* tessera_cpu_attention with Gemma-2's logit softcap: the scaled score s
 * becomes softcap * tanh(s / softcap) before the mask is added and the
 * softmax taken; softcap > 0 (0, none, is the entry points above). window
 * is 0 (none) or, with causal, tessera_cpu_sliding_window_attention's band.
 * The gradient multiplies each score's gradient by 1 - tanh^2(s / softcap). */
int tessera_cpu_softcapped_attention(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, tessera_tensor *y, int32_t causal,
    int64_t window, double scale, double softcap, double dropout,
    uint64_t seed);
int tessera_cpu_softcapped_attention_grad(
    const tessera_tensor *q, const tessera_tensor *k, const tessera_tensor *v,
    const tessera_tensor *mask, const tessera_tensor *dy, tessera_tensor *dq,
    tessera_tensor *dk, tessera_tensor *dv, int32_t causal, int64_t window,
    double scale, double softcap, double dropout, uint64_t seed);
/* QKV-packed attention (FlashAttention's qkvpacked layout, which is GPT-2's
 * fused c_attn output): qkv [B, T, (Hq + 2 Hkv) D] holds, per token, Hq query
 * heads, then Hkv key heads, then Hkv value heads, each D wide. y [B, T, Hq D]
 * (each token's heads side by side: what the output projection reads);
 * lse [B, Hq, T] f32, the natural-log sum over the visible keys of
 * exp(scale * q . k) (-inf for a query that sees no key). Same semantics as
 * tessera_cpu_attention on the unpacked [B, H, T, D] views (causal with
 * Sq = Skv; query head h reads K/V head h / (Hq / Hkv)); no mask, no dropout.
 * qkv and y share one float dtype. */
int tessera_cpu_packed_attention(const tessera_tensor *qkv, tessera_tensor *y,
                                 tessera_tensor *lse, int64_t query_heads,
                                 int64_t key_heads, int32_t causal,
                                 double scale);
/* dqkv [B, T, (Hq + 2 Hkv) D]: dq, dk, dv in qkv's layout. y and lse are the
 * forward's results: the CUDA kernel reads them instead of rerunning the
 * forward; this reference checks their shapes and recomputes. dy and dqkv
 * have qkv's dtype. */
int tessera_cpu_packed_attention_grad(const tessera_tensor *qkv,
                                      const tessera_tensor *y,
                                      const tessera_tensor *lse,
                                      const tessera_tensor *dy,
                                      tessera_tensor *dqkv, int64_t query_heads,
                                      int64_t key_heads, int32_t causal,
                                      double scale);
/* y[i..., :] = table[ids[i...], :]; an id outside [0, rows) is an error
 * naming the id, its position and the table size. */
int tessera_cpu_embedding(const tessera_tensor *table, const tessera_tensor *ids,
                          tessera_tensor *y);
/* dtable = scatter-add of dy rows at ids (dtable is overwritten). */
int tessera_cpu_embedding_grad(const tessera_tensor *ids,
                               const tessera_tensor *dy, tessera_tensor *dtable);
/* A vocabulary-parallel rank's block of the above (rows_axis): `table` and
 * `dtable` hold rows [first_row, first_row + their rows) of a table of
 * `total_rows`. An id in the block reads (adds into) its row; any other id
 * in [0, total_rows) gives zeros (adds nothing); an id outside the whole
 * table is the error it is above. */
int tessera_cpu_embedding_rows(const tessera_tensor *table,
                               const tessera_tensor *ids, tessera_tensor *y,
                               int64_t first_row, int64_t total_rows);
int tessera_cpu_embedding_grad_rows(const tessera_tensor *ids,
                                    const tessera_tensor *dy,
                                    tessera_tensor *dtable, int64_t first_row,
                                    int64_t total_rows);
/* ONNX Gather along `axis` (non-negative); negative indices count back; an
 * index outside [-size, size) is an error naming it and its position. */
int tessera_cpu_gather(const tessera_tensor *x, const tessera_tensor *indices,
                       tessera_tensor *y, int64_t axis);
int tessera_cpu_gather_grad(const tessera_tensor *indices,
                            const tessera_tensor *dy, tessera_tensor *dx,
                            int64_t axis);
/* logits [N, V], targets [N] (I64 or I32): loss (rank 0) = mean over the
 * targets != ignore_index of -log softmax(logits)[target]. A target outside
 * [0, V) that is not ignore_index is an error. With every target ignored the
 * loss is NaN (0/0, as in PyTorch) and the gradient below is 0.
 * count_targets, when not NULL, holds the targets whose counted ones the
 * sum is divided by instead (of the targets' type, any shape): the rows are
 * a block of that larger batch (tess.cross_entropy's count_over), and a
 * block without counted rows has loss 0. */
int tessera_cpu_cross_entropy(const tessera_tensor *logits,
                              const tessera_tensor *targets,
                              const tessera_tensor *count_targets,
                              tessera_tensor *loss, int64_t ignore_index);
/* dlogits = dloss * (softmax(logits) - onehot(target)) / count, 0 on ignored
 * rows; dloss is rank 0; count from count_targets when not NULL. */
int tessera_cpu_cross_entropy_grad(const tessera_tensor *logits,
                                   const tessera_tensor *targets,
                                   const tessera_tensor *count_targets,
                                   const tessera_tensor *dloss,
                                   tessera_tensor *dlogits,
                                   int64_t ignore_index);
/* Both of the above from one call, as the lowering emits them when the
 * gradient follows the loss (the backward's first op): the same loss and
 * dlogits. The CUDA kernel reads the logits once for both. */
int tessera_cpu_cross_entropy_with_grad(const tessera_tensor *logits,
                                        const tessera_tensor *targets,
                                        const tessera_tensor *count_targets,
                                        const tessera_tensor *dloss,
                                        tessera_tensor *loss,
                                        tessera_tensor *dlogits,
                                        int64_t ignore_index);

/*--- Data movement -------------------------------------------------------*/

/* Same elements, any shape (a copy; the lowering aliases when it can). */
int tessera_cpu_copy(const tessera_tensor *x, tessera_tensor *y);
int tessera_cpu_transpose(const tessera_tensor *x, tessera_tensor *y,
                          const int64_t *permutation);
/* numpy broadcast of x to y's shape. */
int tessera_cpu_broadcast(const tessera_tensor *x, tessera_tensor *y);
/* y[i] = x[starts + i * strides] per dim (y's shape gives the count). */
int tessera_cpu_slice(const tessera_tensor *x, tessera_tensor *y,
                      const int64_t *starts, const int64_t *strides);
/* The adjoint of slice: dx = 0, then dx[starts + i * strides] = dy[i]. */
int tessera_cpu_slice_grad(const tessera_tensor *dy, tessera_tensor *dx,
                           const int64_t *starts, const int64_t *strides);
int tessera_cpu_concat(const tessera_tensor *const *inputs, int32_t count,
                       tessera_tensor *y, int64_t axis);
int tessera_cpu_split(const tessera_tensor *x, tessera_tensor *const *outputs,
                      int32_t count, int64_t axis);

/*--- Reductions ----------------------------------------------------------*/

typedef enum tessera_reduce_op {
  TESSERA_REDUCE_SUM, TESSERA_REDUCE_MEAN, TESSERA_REDUCE_MAX,
  TESSERA_REDUCE_MIN
} tessera_reduce_op;

/* dims non-negative and distinct; y's rank tells whether dims were kept.
 * Floats accumulate in f64, integers in int64; max/min propagate NaN. */
int tessera_cpu_reduce(int32_t op, const tessera_tensor *x, tessera_tensor *y,
                       const int64_t *dims, int32_t dim_count);

/*--- Optimizer -----------------------------------------------------------*/

/* Sum of squares of every element, added into *accumulator (f64): the
 * global gradient norm is sqrt of the total over all gradients. */
int tessera_cpu_sum_squares(const tessera_tensor *x, double *accumulator);
/* One AdamW step in place (PyTorch's torch.optim.AdamW semantics, step >= 1):
 *   param *= 1 - lr * weight_decay
 *   m = beta1 m + (1 - beta1) g * grad_scale; v = beta2 v + (1 - beta2) (g * grad_scale)^2
 *   param -= lr * (m / (1 - beta1^step)) / (sqrt(v / (1 - beta2^step)) + eps)
 * param may be f32, bf16 or f16 storage; m and v are f32. grad_scale folds in
 * clipping and loss-scale division. */
int tessera_cpu_adamw(tessera_tensor *param, const tessera_tensor *grad,
                      tessera_tensor *m, tessera_tensor *v, int64_t step,
                      double lr, double beta1, double beta2, double eps,
                      double weight_decay, double grad_scale);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_CPU_KERNELS_H */
