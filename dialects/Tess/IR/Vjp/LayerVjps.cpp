//===- LayerVjps.cpp - VJPs of contractions, layers and the loss ---------===//
//
// Contractions differentiate into contractions (with the transposes folded
// into the ops' flags, so no tess.transpose is materialized); norms,
// softmax, attention, embedding and the loss into their gradient ops, which
// recompute what they need from the forward's operands.
//
//===----------------------------------------------------------------------===//

#include "VjpBuilder.h"

using namespace mlir;
using namespace tessera::tess;
using namespace tessera::tess::vjp;

LogicalResult MatmulOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultCotangents,
                                 SmallVectorImpl<Value> &operandCotangents) {
  Value dy = beginVjp(*this, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  if (!llvm::isa<FloatType>(getType().getElementType()))
    return notDifferentiable(*this, "its operands are not float tensors");
  VjpBuilder b(builder, getLoc());
  Value lhs = getLhs(), rhs = getRhs();
  bool transposeLhs = getTransposeLhs(), transposeRhs = getTransposeRhs();
  // With A = op(lhs), B = op(rhs): dA = dy B^T and dB = A^T dy. Each is
  // written in terms of the stored lhs/rhs, moving the transposes into the
  // flags; a transposed operand receives the transposed product.
  Value dlhs = transposeLhs ? b.matmul(rhs, dy, transposeRhs, true)
                            : b.matmul(dy, rhs, false, !transposeRhs);
  Value drhs = transposeRhs ? b.matmul(dy, lhs, true, transposeLhs)
                            : b.matmul(lhs, dy, !transposeLhs, false);
  // Batch dims broadcast like elementwise operands.
  operandCotangents[0] = b.sumToShape(dlhs, getLhs().getType());
  operandCotangents[1] = b.sumToShape(drhs, getRhs().getType());
  return success();
}

LogicalResult LinearOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultCotangents,
                                 SmallVectorImpl<Value> &operandCotangents) {
  Value dy = beginVjp(*this, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  if (!llvm::isa<FloatType>(getType().getElementType()))
    return notDifferentiable(*this, "its operands are not float tensors");
  Location loc = getLoc();
  Value input = getInput(), weight = getWeight();
  bool transposed = getTransposeWeight();

  // dx = dy W^T: a linear by the same weight read the other way round.
  operandCotangents[0] =
      LinearOp::create(builder, loc, dy, weight, Value(), !transposed);

  // dW sums the outer products of every row, the rows' dims kept (a split
  // of any of them is then a partial sum of dW).
  operandCotangents[1] =
      LinearWeightGradOp::create(builder, loc, input, dy, transposed);

  if (getBias()) {
    int64_t rank = getType().getRank();
    SmallVector<int64_t> leading;
    for (int64_t i = 0; i + 1 < rank; ++i)
      leading.push_back(i);
    operandCotangents[2] =
        leading.empty() ? dy
                        : Value(ReduceSumOp::create(builder, loc, dy, leading));
  }
  return success();
}

LogicalResult LayerNormOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultCotangents,
                                    SmallVectorImpl<Value> &operandCotangents) {
  Value dy = beginVjp(*this, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  Value scale = getScale();
  bool hasBias = static_cast<bool>(getBias());
  auto gradient =
      LayerNormGradOp::create(builder, getLoc(), getInput(), scale, dy,
                              /*residual=*/Value(), getEpsilon(), getAxis(),
                              hasBias);
  // Operands are [input, scale?, bias?].
  unsigned next = 0;
  operandCotangents[next++] = gradient.getDx();
  if (scale)
    operandCotangents[next++] = gradient.getDscale();
  if (hasBias)
    operandCotangents[next++] = gradient.getDbias();
  return success();
}

LogicalResult RmsNormOp::buildVjp(OpBuilder &builder,
                                  ArrayRef<Value> resultCotangents,
                                  SmallVectorImpl<Value> &operandCotangents) {
  Value dy = beginVjp(*this, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  auto gradient = RmsNormGradOp::create(builder, getLoc(), getInput(),
                                        getScale(), dy, /*residual=*/Value(),
                                        getEpsilon(), getAxis());
  operandCotangents[0] = gradient.getDx();
  if (getScale())
    operandCotangents[1] = gradient.getDscale();
  return success();
}

LogicalResult SoftmaxOp::buildVjp(OpBuilder &builder,
                                  ArrayRef<Value> resultCotangents,
                                  SmallVectorImpl<Value> &operandCotangents) {
  if (Value dy = beginVjp(*this, resultCotangents, operandCotangents))
    operandCotangents[0] =
        SoftmaxGradOp::create(builder, getLoc(), getResult(), dy, getAxis());
  return success();
}

LogicalResult RotaryOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultCotangents,
                                 SmallVectorImpl<Value> &operandCotangents) {
  // A rotation's transpose is the inverse rotation; cos and sin are
  // constants of the step (tess-fuse-rotary makes sure of it).
  if (Value dy = beginVjp(*this, resultCotangents, operandCotangents))
    operandCotangents[0] =
        RotaryOp::create(builder, getLoc(), dy.getType(), dy, getCos(),
                         getSin(), !getAdjoint(), getRotatedHeads());
  return success();
}

LogicalResult AttentionOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultCotangents,
                                    SmallVectorImpl<Value> &operandCotangents) {
  // Operands are [query, key, value, mask?]; the mask is a constant.
  Value dy = beginVjp(*this, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  auto gradient = AttentionGradOp::create(
      builder, getLoc(), getQuery(), getKey(), getValue(), getMask(), dy,
      getCausal(), getScale(), getDropout(), getSeed(), getWindow(),
      getSoftcap(), getStreamAxisAttr(), getHeadStreamAxisAttr());
  operandCotangents[0] = gradient.getDq();
  operandCotangents[1] = gradient.getDk();
  operandCotangents[2] = gradient.getDv();
  return success();
}

LogicalResult EmbeddingOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultCotangents,
                                    SmallVectorImpl<Value> &operandCotangents) {
  // The ids carry no gradient.
  if (Value dy = beginVjp(*this, resultCotangents, operandCotangents))
    operandCotangents[0] =
        EmbeddingGradOp::create(builder, getLoc(), getTable().getType(),
                                getIndices(), dy, getRowsAxisAttr());
  return success();
}

LogicalResult CrossEntropyOp::buildVjp(
    OpBuilder &builder, ArrayRef<Value> resultCotangents,
    SmallVectorImpl<Value> &operandCotangents) {
  // The targets carry no gradient.
  if (Value dloss = beginVjp(*this, resultCotangents, operandCotangents))
    operandCotangents[0] =
        CrossEntropyGradOp::create(builder, getLoc(), getLogits(),
                                   getTargets(), dloss, getAllTargets(),
                                   getIgnoreIndex());
  return success();
}
