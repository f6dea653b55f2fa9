//===- OperandChecks.cpp - Op argument checks shared by CPU and CUDA ------===//
//
// See OperandChecks.h. Every message here is the one both backends report.
//
//===----------------------------------------------------------------------===//

#include "OperandChecks.h"

#include "DataTypes.h"
#include "Errors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace tessera::cpu {

void requireCopyOperands(const tessera_tensor &x, const tessera_tensor &y) {
  requireSameDtype(x, "x", y, "y");
  if (elementCount(x) != elementCount(y))
    fail("x " + formatShape(shapeOf(x)) + " and y " + formatShape(shapeOf(y)) +
         " have different element counts");
}

Shape transposeStrides(const tessera_tensor &x, const tessera_tensor &y,
                       const int64_t *permutation) {
  requireSameDtype(x, "x", y, "y");
  if (x.rank != y.rank)
    fail("x and y have different ranks");
  if (x.rank > 0 && !permutation)
    fail("permutation must not be null");
  Shape xStrides = rowMajorStrides(shapeOf(x));
  Shape expected(x.rank), permutedStrides(x.rank);
  std::vector<bool> used(x.rank, false);
  for (int32_t dim = 0; dim < x.rank; ++dim) {
    int64_t source = permutation[dim];
    if (source < 0 || source >= x.rank || used[source])
      fail("permutation is not a permutation of [0, " + std::to_string(x.rank) +
           ")");
    used[source] = true;
    expected[dim] = x.shape[source];
    permutedStrides[dim] = xStrides[source];
  }
  requireShape(y, expected, "y");
  return permutedStrides;
}

Shape sliceStrides(const tessera_tensor &x, const Shape &sliceShape,
                   const int64_t *starts, const int64_t *strides,
                   int64_t &baseOffset) {
  if (x.rank > 0 && (!starts || !strides))
    fail("starts and strides must not be null");
  Shape xShape = shapeOf(x);
  Shape xStrides = rowMajorStrides(xShape);
  Shape steps(xShape.size());
  baseOffset = 0;
  for (size_t dim = 0; dim < xShape.size(); ++dim) {
    int64_t last = starts[dim] + (sliceShape[dim] - 1) * strides[dim];
    if (strides[dim] < 1 || starts[dim] < 0 || starts[dim] > xShape[dim] ||
        (sliceShape[dim] > 0 && last >= xShape[dim]))
      fail("dim " + std::to_string(dim) + ": " +
           std::to_string(sliceShape[dim]) + " elements from " +
           std::to_string(starts[dim]) + " in steps of " +
           std::to_string(strides[dim]) + " do not fit in size " +
           std::to_string(xShape[dim]) + " (full shape " + formatShape(xShape) +
           ")");
    baseOffset += starts[dim] * xStrides[dim];
    steps[dim] = strides[dim] * xStrides[dim];
  }
  return steps;
}

namespace {

/// Checks that `piece` matches `whole` in rank, dtype and every dim but
/// `axis`.
void requireJoinable(const tessera_tensor &piece, const std::string &name,
                     const tessera_tensor &whole, int64_t axis) {
  Shape expected = shapeOf(whole);
  if (piece.rank == whole.rank)
    expected[axis] = piece.shape[axis];
  requireShape(piece, expected, name.c_str());
  requireSameDtype(piece, name.c_str(), whole, "the joined tensor");
}

} // namespace

JoinLayout requireJoin(const char *op, const char *pieceKind,
                       const tessera_tensor *const *pieces, int32_t count,
                       const tessera_tensor &whole, const char *wholeName,
                       int64_t axis) {
  requireAxis(axis, whole.rank, "axis");
  if (count < 1 || !pieces)
    fail(std::string(op) + " needs at least one " + pieceKind);
  int64_t joinedLength = 0;
  for (int32_t k = 0; k < count; ++k) {
    std::string name = std::string(pieceKind) + " " + std::to_string(k);
    requireJoinable(requireTensor(pieces[k], name.c_str()), name, whole, axis);
    joinedLength += pieces[k]->shape[axis];
  }
  if (joinedLength != whole.shape[axis])
    fail(std::string("the ") + pieceKind + "s' sizes along axis " +
         std::to_string(axis) + " sum to " + std::to_string(joinedLength) +
         ", but " + wholeName + " " + formatShape(shapeOf(whole)) + " has " +
         std::to_string(whole.shape[axis]));
  Shape shape = shapeOf(whole);
  return {product(shape, 0, static_cast<size_t>(axis)),
          product(shape, static_cast<size_t>(axis) + 1, shape.size())};
}

ReducedDims requireReduction(int32_t op, const tessera_tensor &x,
                             const tessera_tensor &y, const int64_t *dims,
                             int32_t dimCount) {
  if (op < TESSERA_REDUCE_SUM || op > TESSERA_REDUCE_MIN)
    fail("unknown reduce op " + std::to_string(op));
  requireSameDtype(x, "x", y, "y");
  if (dimCount < 0 || (dimCount > 0 && !dims))
    fail("dims must list dim_count dims");
  std::vector<bool> reduced(static_cast<size_t>(x.rank), false);
  for (int32_t k = 0; k < dimCount; ++k) {
    requireAxis(dims[k], x.rank, "reduced dim");
    if (reduced[dims[k]])
      fail("dim " + std::to_string(dims[k]) + " is listed twice");
    reduced[dims[k]] = true;
  }
  bool keepDims = y.rank == x.rank;
  if (!keepDims && y.rank != x.rank - dimCount)
    fail("y's rank " + std::to_string(y.rank) + " is neither " +
         std::to_string(x.rank) + " (dims kept) nor " +
         std::to_string(x.rank - dimCount) + " (dims dropped)");
  Shape expected;
  for (int32_t dim = 0; dim < x.rank; ++dim)
    if (!reduced[dim] || keepDims)
      expected.push_back(reduced[dim] ? 1 : x.shape[dim]);
  requireShape(y, expected, "y");
  return {std::move(reduced), keepDims};
}

void requireGatedOperands(
    const tessera_tensor *gate, const tessera_tensor *up,
    std::initializer_list<std::pair<const tessera_tensor *, const char *>>
        others) {
  const tessera_tensor &gateTensor = requireTensor(gate, "gate");
  requireFloatType(gateTensor, "gate");
  requireLike(requireTensor(up, "up"), "up", gateTensor, "gate");
  for (auto [tensor, name] : others)
    requireLike(requireTensor(tensor, name), name, gateTensor, "gate");
}

int64_t requirePackedGatedOperands(
    const tessera_tensor *input, const tessera_tensor *halved,
    const char *halvedName,
    std::initializer_list<std::pair<const tessera_tensor *, const char *>>
        others) {
  const tessera_tensor &packed = requireTensor(input, "input");
  requireFloatType(packed, "input");
  Shape shape = shapeOf(packed);
  if (shape.empty() || shape.back() % 2 != 0)
    fail("input " + formatShape(shape) +
         ": the last dim must be even (gate then up)");
  const tessera_tensor &half = requireTensor(halved, halvedName);
  requireSameDtype(half, halvedName, packed, "input");
  Shape expected = shape;
  expected.back() /= 2;
  if (shapeOf(half) != expected)
    fail(std::string(halvedName) + " " + formatShape(shapeOf(half)) +
         " must be " + formatShape(expected) +
         ": input's shape with the last dim halved");
  for (auto [tensor, name] : others)
    requireLike(requireTensor(tensor, name), name, packed, "input");
  return expected.back();
}

RotaryOperands requireRotaryOperands(const tessera_tensor *x,
                                     const tessera_tensor *cos,
                                     const tessera_tensor *sin,
                                     tessera_tensor *y, int64_t rotated_heads) {
  const tessera_tensor &input = requireTensor(x, "x");
  const tessera_tensor &cosine = requireTensor(cos, "cos");
  const tessera_tensor &sine = requireTensor(sin, "sin");
  tessera_tensor &output = requireTensor(y, "y");
  requireFloatType(input, "x");
  Shape shape = shapeOf(input);
  if (shape.empty() || shape.back() < 2 || shape.back() % 2 != 0)
    fail("x " + formatShape(shape) +
         ": the last dim must be even and at least 2");
  for (const tessera_tensor *angle : {&cosine, &sine}) {
    const char *name = angle == &cosine ? "cos" : "sin";
    requireSameDtype(*angle, name, input, "x");
    if (angle->rank != input.rank)
      fail(std::string(name) + " " + formatShape(shapeOf(*angle)) +
           " must have x's rank " + std::to_string(input.rank));
  }
  requireLike(output, "y", input, "x");
  int64_t heads = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  if (rotated_heads != 0 &&
      (shape.size() < 2 || rotated_heads < 0 || rotated_heads > heads))
    fail("rotated_heads " + std::to_string(rotated_heads) +
         " must be 0 or in [1, dim(-2)] of x " + formatShape(shape));
  return {broadcastStrides(cosine, "cos", shape),
          broadcastStrides(sine, "sin", shape), heads,
          rotated_heads == 0 ? heads : rotated_heads};
}

void requireBinaryOperands(int32_t op, const tessera_tensor &a,
                           const tessera_tensor &b, const tessera_tensor &y) {
  if (op < TESSERA_ADD || op > TESSERA_GE)
    fail("unknown binary op " + std::to_string(op));
  requireSameDtype(a, "a", b, "b");
  if (op >= TESSERA_LOGICAL_AND) {
    if (y.dtype != TESSERA_BOOL)
      fail(std::string("comparisons and logical ops write bool, not ") +
           dtypeName(y.dtype));
  } else {
    requireSameDtype(a, "a", y, "y");
  }
}

void requireUnaryOperands(int32_t op, const tessera_tensor &x,
                          const tessera_tensor &y) {
  requireShape(y, shapeOf(x), "y");
  if (op < 0 || op > TESSERA_LOGICAL_NOT)
    fail("unknown unary op " + std::to_string(op));
  if (op == TESSERA_LOGICAL_NOT) {
    if (y.dtype != TESSERA_BOOL)
      fail(std::string("logical_not writes bool, not ") + dtypeName(y.dtype));
    return;
  }
  requireSameDtype(x, "x", y, "y");
}

void requireUnaryGradOperands(const tessera_tensor &x, const tessera_tensor &dy,
                              const tessera_tensor &dx) {
  requireFloatType(x, "x");
  requireFloatType(dy, "dy");
  requireFloatType(dx, "dx");
  requireShape(dy, shapeOf(x), "dy");
  requireShape(dx, shapeOf(x), "dx");
}

void requireCountTargets(const tessera_tensor *countTargets,
                         const tessera_tensor &targets) {
  if (countTargets && countTargets->dtype != targets.dtype)
    fail("count_targets must have the targets' dtype");
}

ClassLayout requireLossOperands(const tessera_tensor &logits,
                                const tessera_tensor &targets) {
  if (logits.rank != 2)
    fail("logits must have rank 2 ([N, V]), got " +
         formatShape(shapeOf(logits)));
  requireIndexType(targets, "targets");
  requireShape(targets, {logits.shape[0]}, "targets");
  return {logits.shape[0], logits.shape[1]};
}

ClassLayout requireLossGradOperands(const tessera_tensor &logits,
                                    const tessera_tensor &targets,
                                    const tessera_tensor &dloss,
                                    const tessera_tensor &dlogits) {
  ClassLayout layout = requireLossOperands(logits, targets);
  requireShape(dloss, {}, "dloss");
  requireShape(dlogits, shapeOf(logits), "dlogits");
  return layout;
}

LinearLayout requireMatmulBiasGradOperands(
    const tessera_tensor &a, const tessera_tensor &b, const tessera_tensor &y,
    const tessera_tensor &dbias, int32_t transposeA, int32_t transposeB) {
  if (a.rank != 2 || b.rank != 2 || y.rank != 2)
    fail("a, b and y must be matrices, got a " + formatShape(shapeOf(a)) +
         ", b " + formatShape(shapeOf(b)) + ", y " + formatShape(shapeOf(y)));
  if (transposeB)
    fail("dbias sums b's rows: b must not be transposed");
  int64_t rows = a.shape[transposeA ? 1 : 0];
  int64_t inner = a.shape[transposeA ? 0 : 1];
  if (b.shape[0] != inner)
    fail("contracted dims differ: a " + formatShape(shapeOf(a)) + " and b " +
         formatShape(shapeOf(b)));
  int64_t columns = b.shape[1];
  requireShape(y, {rows, columns}, "y");
  requireShape(dbias, {columns}, "dbias");
  return {rows, inner, columns};
}

LinearLayout requireLinearOperands(const tessera_tensor &x,
                                   const tessera_tensor &weight,
                                   const tessera_tensor *bias,
                                   const tessera_tensor &y,
                                   int32_t transposeWeight) {
  if (x.rank < 1 || weight.rank != 2)
    fail("x needs rank >= 1 and weight rank 2, got x " +
         formatShape(shapeOf(x)) + " and weight " +
         formatShape(shapeOf(weight)));
  int64_t inner = x.shape[x.rank - 1];
  int64_t columns = weight.shape[transposeWeight ? 0 : 1];
  if (weight.shape[transposeWeight ? 1 : 0] != inner)
    fail("x " + formatShape(shapeOf(x)) + " does not match weight " +
         formatShape(shapeOf(weight)) +
         (transposeWeight ? " ([out, in])" : " ([in, out])"));
  Shape expected = shapeOf(x);
  expected.back() = columns;
  requireShape(y, expected, "y");
  if (bias)
    requireShape(requireTensor(bias, "bias"), {columns}, "bias");
  return {elementCount(y) / std::max<int64_t>(columns, 1), inner, columns};
}

void requireAttentionOptions(bool causal, int64_t window, double softcap,
                             double scale, double dropout,
                             int64_t queryHeads) {
  if (window < 0)
    fail("window " + std::to_string(window) + " is negative");
  if (window > 0 && !causal)
    fail("window " + std::to_string(window) + " needs causal attention");
  if (!(softcap >= 0.0) || !std::isfinite(softcap))
    fail("softcap " + std::to_string(softcap) +
         " must be 0 (none) or positive and finite");
  if (!(scale > 0.0) || !std::isfinite(scale))
    fail("scale " + std::to_string(scale) + " must be positive and finite");
  if (!(dropout >= 0.0 && dropout < 1.0))
    fail("dropout " + std::to_string(dropout) + " is outside [0, 1)");
  if (dropout != 0.0 && queryHeads > TESSERA_ATTENTION_DROPOUT_HEADS)
    fail("dropout over " + std::to_string(queryHeads) +
         " query heads: at most " +
         std::to_string(TESSERA_ATTENTION_DROPOUT_HEADS) +
         " (the head stride of the dropout index)");
}

void requireSlidingWindow(int64_t window) {
  if (window < 1)
    fail("window " + std::to_string(window) + " must be at least 1");
}

void requireSoftcap(double softcap) {
  if (!(softcap > 0.0) || !std::isfinite(softcap))
    fail("softcap " + std::to_string(softcap) + " must be positive and finite");
}

PackedAttentionLayout requirePackedAttentionOperands(const tessera_tensor &qkv,
                                                     const tessera_tensor &y,
                                                     const tessera_tensor &lse,
                                                     int64_t queryHeads,
                                                     int64_t keyHeads,
                                                     double scale) {
  requireFloatType(qkv, "qkv");
  if (qkv.rank != 3)
    fail("qkv needs rank 3 ([batch, seq, (query_heads + 2 key_heads) "
         "head_dim]), got " +
         formatShape(shapeOf(qkv)));
  if (queryHeads < 1)
    fail("query_heads " + std::to_string(queryHeads) + " must be >= 1");
  if (keyHeads < 1)
    fail("key_heads " + std::to_string(keyHeads) + " must be >= 1");
  if (queryHeads % keyHeads != 0)
    fail("query_heads " + std::to_string(queryHeads) +
         " is not a multiple of key_heads " + std::to_string(keyHeads));
  // Guards the sum below; no real head count comes near it.
  if (keyHeads > (std::numeric_limits<int64_t>::max() - queryHeads) / 2)
    fail("query_heads " + std::to_string(queryHeads) + " and key_heads " +
         std::to_string(keyHeads) + " are too many heads");
  int64_t packedHeads = queryHeads + 2 * keyHeads;
  if (qkv.shape[2] % packedHeads != 0)
    fail("qkv's last dim " + std::to_string(qkv.shape[2]) +
         " is not divisible by query_heads + 2 key_heads = " +
         std::to_string(packedHeads));
  if (!(scale > 0.0) || !std::isfinite(scale))
    fail("scale " + std::to_string(scale) + " must be positive and finite");
  PackedAttentionLayout layout{qkv.shape[0], qkv.shape[1],
                               qkv.shape[2] / packedHeads, queryHeads,
                               keyHeads};
  requireSameDtype(y, "y", qkv, "qkv");
  requireShape(y, layout.outputShape(), "y");
  requireShape(lse, layout.lseShape(), "lse");
  // f32 whatever qkv's storage: a log-domain statistic that bf16 would
  // round to a few digits.
  if (lse.dtype != TESSERA_F32)
    fail(std::string("lse must be f32, not ") + dtypeName(lse.dtype));
  return layout;
}

PackedAttentionLayout requirePackedAttentionGradOperands(
    const tessera_tensor &qkv, const tessera_tensor &y,
    const tessera_tensor &lse, const tessera_tensor &dy,
    const tessera_tensor &dqkv, int64_t queryHeads, int64_t keyHeads,
    double scale) {
  PackedAttentionLayout layout =
      requirePackedAttentionOperands(qkv, y, lse, queryHeads, keyHeads, scale);
  requireSameDtype(dy, "dy", qkv, "qkv");
  requireShape(dy, layout.outputShape(), "dy");
  requireSameDtype(dqkv, "dqkv", qkv, "qkv");
  requireShape(dqkv, shapeOf(qkv), "dqkv");
  return layout;
}

} // namespace tessera::cpu
