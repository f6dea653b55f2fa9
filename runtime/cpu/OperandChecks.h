//===- OperandChecks.h - Argument checks of CPU and CUDA ops --*- C++ -*-===//
//
// The host-side half of an op that does not depend on where the op runs: its
// argument checks (with their messages) and the index layouts they derive.
// runtime/cpu and runtime/cuda both call these, so the two backends reject
// the same calls with the same words and agree on every offset; only the
// loops that move or compute elements differ.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_OPERANDCHECKS_H
#define TESSERA_RUNTIME_CPU_OPERANDCHECKS_H

#include "TensorAccess.h"

#include <initializer_list>
#include <utility>
#include <vector>

namespace tessera::cpu {

/// copy: x and y share a dtype and an element count (shapes may differ).
void requireCopyOperands(const tessera_tensor &x, const tessera_tensor &y);

/// transpose: y is x with dims permuted (y dim d is x dim permutation[d]).
/// Returns x's strides permuted, which read x at y's positions.
Shape transposeStrides(const tessera_tensor &x, const tessera_tensor &y,
                       const int64_t *permutation);

/// slice: the offset of `starts` in x, and x's strides scaled by the slice
/// steps, after checking that every selected position lies inside x.
Shape sliceStrides(const tessera_tensor &x, const Shape &sliceShape,
                   const int64_t *starts, const int64_t *strides,
                   int64_t &baseOffset);

/// Around `axis`, a joined tensor is [outer, length * inner]: each piece owns
/// a run of length_k * inner elements in every outer row.
struct JoinLayout {
  int64_t outer;
  int64_t inner;
};

/// concat and split: checks that `count` pieces (named "<pieceKind> k") have
/// `whole`'s rank and dtype and its dims except along `axis`, where their
/// sizes add up to whole's. `op` and `wholeName` name the op and `whole` in
/// the messages.
JoinLayout requireJoin(const char *op, const char *pieceKind,
                       const tessera_tensor *const *pieces, int32_t count,
                       const tessera_tensor &whole, const char *wholeName,
                       int64_t axis);

/// Which dims of x a reduction folds, and whether y keeps them as size 1.
struct ReducedDims {
  std::vector<bool> reduced;
  bool keepDims;
};

/// reduce: checks the op code, the dtypes, `dims` (each a dim of x, listed
/// once) and y's shape (x's with the reduced dims kept as 1 or dropped).
ReducedDims requireReduction(int32_t op, const tessera_tensor &x,
                             const tessera_tensor &y, const int64_t *dims,
                             int32_t dimCount);

/// binary: checks the op code and the dtypes (a's and b's agree; comparisons
/// and logical ops write bool, the others a's dtype).
/// swiglu and swiglu_grad: gate float; up and every other tensor named in
/// `others` like gate (shape, then dtype).
void requireGatedOperands(
    const tessera_tensor *gate, const tessera_tensor *up,
    std::initializer_list<std::pair<const tessera_tensor *, const char *>>
        others);

/// packed_swiglu and packed_swiglu_grad: `input` float with an even last
/// dim 2F (gate then up in each row); `halved` (y or dy, named `halvedName`)
/// of input's dtype and shape with the last dim F; every tensor in `others`
/// like input. Returns F.
int64_t requirePackedGatedOperands(
    const tessera_tensor *input, const tessera_tensor *halved,
    const char *halvedName,
    std::initializer_list<std::pair<const tessera_tensor *, const char *>>
        others);

/// rotary: x float with an even last dim of at least 2; cos and sin of x's
/// rank and dtype, broadcasting to x (their strides over x's shape); y like
/// x.
/// `rotated_heads` is 0 (all) or in [1, x.dim(-2)]; `heads` is x.dim(-2)
/// (1 for rank 1) and `rotatedHeads` the count rotated (heads for 0).
struct RotaryOperands {
  Shape cosStrides, sinStrides;
  int64_t heads = 1, rotatedHeads = 1;
};
RotaryOperands requireRotaryOperands(const tessera_tensor *x,
                                     const tessera_tensor *cos,
                                     const tessera_tensor *sin,
                                     tessera_tensor *y, int64_t rotated_heads);

void requireBinaryOperands(int32_t op, const tessera_tensor &a,
                           const tessera_tensor &b, const tessera_tensor &y);

/// unary: checks the op code, y's shape (x's) and y's dtype (bool for
/// logical_not, x's otherwise). Which ops accept integers is the caller's.
void requireUnaryOperands(int32_t op, const tessera_tensor &x,
                          const tessera_tensor &y);

/// unary_grad: checks that x, dy and dx are float tensors of one shape.
void requireUnaryGradOperands(const tessera_tensor &x,
                              const tessera_tensor &dy,
                              const tessera_tensor &dx);

/// cross_entropy: logits [N, V] and integer targets [N]; returns N and V.
struct ClassLayout {
  int64_t rows;
  int64_t classes;
};
ClassLayout requireLossOperands(const tessera_tensor &logits,
                                const tessera_tensor &targets);

/// The loss kernels' count_targets (may be null): the targets' dtype.
void requireCountTargets(const tessera_tensor *countTargets,
                         const tessera_tensor &targets);

/// cross_entropy_grad: the loss operands, a rank-0 dloss and dlogits of the
/// logits' shape.
ClassLayout requireLossGradOperands(const tessera_tensor &logits,
                                    const tessera_tensor &targets,
                                    const tessera_tensor &dloss,
                                    const tessera_tensor &dlogits);

/// linear: x [..., in], weight [in, out] (or [out, in] when
/// `transposeWeight`), y [..., out], bias (may be null) [out]; returns the
/// rows, in and out. Dtypes are the caller's.
struct LinearLayout {
  int64_t rows, inner, columns;
};
LinearLayout requireLinearOperands(const tessera_tensor &x,
                                   const tessera_tensor &weight,
                                   const tessera_tensor *bias,
                                   const tessera_tensor &y,
                                   int32_t transposeWeight);

/// matmul_bias_grad: a [K, M] (or [M, K] without `transposeA`), b [K, N]
/// (not transposed: dbias sums its rows), y [M, N], dbias [N]; returns M,
/// K and N. Dtypes are the caller's.
LinearLayout requireMatmulBiasGradOperands(const tessera_tensor &a,
                                           const tessera_tensor &b,
                                           const tessera_tensor &y,
                                           const tessera_tensor &dbias,
                                           int32_t transposeA,
                                           int32_t transposeB);

/// The options of an attention call, tess.attention's rules: a window is 0
/// (none) or, with causal, the band's length; a softcap is 0 (none) or
/// positive and finite; the scale is positive and finite; dropout is in
/// [0, 1), and a nonzero one needs at most TESSERA_ATTENTION_DROPOUT_HEADS
/// query heads (its index's head stride).
void requireAttentionOptions(bool causal, int64_t window, double softcap,
                             double scale, double dropout,
                             int64_t queryHeads);
/// The sliding-window entry points' window: at least 1 (0, none, is the
/// plain entries').
void requireSlidingWindow(int64_t window);
/// The softcapped entry points' cap: positive (0, none, is the plain
/// entries').
void requireSoftcap(double softcap);

/// packed_attention: qkv [B, T, (Hq + 2 Hkv) D] holds each token's query,
/// key and value heads; y is [B, T, Hq D] of qkv's dtype, lse f32
/// [B, Hq, T].
struct PackedAttentionLayout {
  int64_t batch, seq, headDim, queryHeads, keyHeads;
  int64_t width() const { return (queryHeads + 2 * keyHeads) * headDim; }
  Shape outputShape() const { return {batch, seq, queryHeads * headDim}; }
  Shape lseShape() const { return {batch, queryHeads, seq}; }
};
PackedAttentionLayout requirePackedAttentionOperands(
    const tessera_tensor &qkv, const tessera_tensor &y,
    const tessera_tensor &lse, int64_t queryHeads, int64_t keyHeads,
    double scale);

/// packed_attention_grad: the forward's operands and results, dy of y's
/// shape and dtype, dqkv of qkv's.
PackedAttentionLayout requirePackedAttentionGradOperands(
    const tessera_tensor &qkv, const tessera_tensor &y,
    const tessera_tensor &lse, const tessera_tensor &dy,
    const tessera_tensor &dqkv, int64_t queryHeads, int64_t keyHeads,
    double scale);

} // namespace tessera::cpu

#endif // TESSERA_RUNTIME_CPU_OPERANDCHECKS_H
