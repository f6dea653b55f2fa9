//===- DataMovementVjps.cpp - VJPs of shape ops, gathers and reductions --===//
//
// Data movement is linear, so each VJP is its adjoint: the inverse
// permutation, the reverse reshape, the scatter of a gather or slice, the
// broadcast of a reduction. Max/min reductions send the cotangent to every
// element equal to the extremum.
//
//===----------------------------------------------------------------------===//

#include "VjpBuilder.h"

using namespace mlir;
using namespace tessera::tess;
using namespace tessera::tess::vjp;

LogicalResult ReshapeOp::buildVjp(OpBuilder &builder,
                                  ArrayRef<Value> resultCotangents,
                                  SmallVectorImpl<Value> &operandCotangents) {
  if (Value dy = beginVjp(*this, resultCotangents, operandCotangents))
    operandCotangents[0] = VjpBuilder(builder, getLoc())
                               .reshape(dy, getInput().getType().getShape());
  return success();
}

LogicalResult TransposeOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultCotangents,
                                    SmallVectorImpl<Value> &operandCotangents) {
  Value dy = beginVjp(*this, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  ArrayRef<int64_t> permutation = getPermutation();
  SmallVector<int64_t> inverse(permutation.size());
  for (auto [index, dim] : llvm::enumerate(permutation))
    inverse[dim] = static_cast<int64_t>(index);
  operandCotangents[0] = TransposeOp::create(builder, getLoc(), dy, inverse);
  return success();
}

LogicalResult BroadcastOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultCotangents,
                                    SmallVectorImpl<Value> &operandCotangents) {
  if (Value dy = beginVjp(*this, resultCotangents, operandCotangents))
    operandCotangents[0] = VjpBuilder(builder, getLoc())
                               .sumToShape(dy, getInput().getType());
  return success();
}

LogicalResult SliceOp::buildVjp(OpBuilder &builder,
                                ArrayRef<Value> resultCotangents,
                                SmallVectorImpl<Value> &operandCotangents) {
  if (Value dy = beginVjp(*this, resultCotangents, operandCotangents))
    operandCotangents[0] =
        SliceGradOp::create(builder, getLoc(), getInput().getType(), dy,
                            getStarts(), getStrides());
  return success();
}

LogicalResult SplitOp::buildVjp(OpBuilder &builder,
                                ArrayRef<Value> resultCotangents,
                                SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(1, Value());
  if (llvm::all_of(resultCotangents, [](Value dy) { return !dy; }))
    return success();
  // Pieces without a cotangent contribute zeros.
  VjpBuilder b(builder, getLoc());
  SmallVector<Value> pieces;
  for (auto [result, dy] : llvm::zip_equal(getResults(), resultCotangents))
    pieces.push_back(dy ? dy : b.zeros(tensorType(result)));
  operandCotangents[0] = ConcatOp::create(builder, getLoc(), pieces, getAxis());
  return success();
}

LogicalResult ConcatOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultCotangents,
                                 SmallVectorImpl<Value> &operandCotangents) {
  Value dy = beginVjp(*this, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  RankedTensorType type = getType();
  int64_t axis = *normalizeAxis(getAxis(), type.getRank());
  SmallVector<int64_t> starts(type.getRank(), 0);
  SmallVector<int64_t> limits(type.getShape());
  SmallVector<int64_t> strides(type.getRank(), 1);
  int64_t offset = 0;
  for (auto [index, input] : llvm::enumerate(getInputs())) {
    int64_t size = tensorType(input).getDimSize(axis);
    starts[axis] = offset;
    limits[axis] = offset + size;
    operandCotangents[index] =
        SliceOp::create(builder, getLoc(), dy, starts, limits, strides);
    offset += size;
  }
  return success();
}

LogicalResult GatherOp::buildVjp(OpBuilder &builder,
                                 ArrayRef<Value> resultCotangents,
                                 SmallVectorImpl<Value> &operandCotangents) {
  // The indices carry no gradient.
  Value dy = beginVjp(*this, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  if (!llvm::isa<FloatType>(getType().getElementType()))
    return notDifferentiable(*this, "its input is not a float tensor");
  operandCotangents[0] =
      GatherGradOp::create(builder, getLoc(), getInput().getType(),
                           getIndices(), dy, getAxis());
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

namespace {

/// The reduction's result shape with the reduced dims kept as size 1.
SmallVector<int64_t> keptShape(RankedTensorType input, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> shape(input.getShape());
  for (int64_t dim : dims)
    shape[*normalizeAxis(dim, input.getRank())] = 1;
  return shape;
}

/// Number of elements each output of the reduction summarizes.
int64_t reducedCount(RankedTensorType input, ArrayRef<int64_t> dims) {
  int64_t count = 1;
  for (int64_t dim : dims)
    count *= input.getDimSize(*normalizeAxis(dim, input.getRank()));
  return count;
}

/// Sum and mean: every input element receives the cotangent of its output
/// (scaled by 1/count for the mean).
template <typename ReductionOp>
LogicalResult spreadVjp(ReductionOp op, OpBuilder &builder,
                        ArrayRef<Value> resultCotangents,
                        SmallVectorImpl<Value> &operandCotangents,
                        bool mean) {
  Value dy = beginVjp(op, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  RankedTensorType input = op.getInput().getType();
  if (!llvm::isa<FloatType>(input.getElementType()))
    return notDifferentiable(op, "its input is not a float tensor");
  VjpBuilder b(builder, op.getLoc());
  Value kept = b.reshape(dy, keptShape(input, op.getDims()));
  if (mean)
    kept = b.mul(kept, b.scalarLike(kept,
                                    1.0 / static_cast<double>(reducedCount(
                                              input, op.getDims()))));
  operandCotangents[0] = BroadcastOp::create(builder, op.getLoc(), input, kept);
  return success();
}

/// Max and min: the cotangent goes to every element equal to the extremum.
template <typename ReductionOp>
LogicalResult extremumVjp(ReductionOp op, OpBuilder &builder,
                          ArrayRef<Value> resultCotangents,
                          SmallVectorImpl<Value> &operandCotangents) {
  Value dy = beginVjp(op, resultCotangents, operandCotangents);
  if (!dy)
    return success();
  RankedTensorType input = op.getInput().getType();
  if (!llvm::isa<FloatType>(input.getElementType()))
    return notDifferentiable(op, "its input is not a float tensor");
  VjpBuilder b(builder, op.getLoc());
  SmallVector<int64_t> shape = keptShape(input, op.getDims());
  Value extremum = b.reshape(op.getResult(), shape);
  Value isExtremum =
      b.compare(ComparisonPredicate::eq, op.getInput(), extremum);
  operandCotangents[0] = b.selectOrZero(isExtremum, b.reshape(dy, shape));
  return success();
}

} // namespace

LogicalResult ReduceSumOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultCotangents,
                                    SmallVectorImpl<Value> &operandCotangents) {
  return spreadVjp(*this, builder, resultCotangents, operandCotangents,
                   /*mean=*/false);
}

LogicalResult ReduceMeanOp::buildVjp(OpBuilder &builder,
                                     ArrayRef<Value> resultCotangents,
                                     SmallVectorImpl<Value> &operandCotangents) {
  return spreadVjp(*this, builder, resultCotangents, operandCotangents,
                   /*mean=*/true);
}

LogicalResult ReduceMaxOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultCotangents,
                                    SmallVectorImpl<Value> &operandCotangents) {
  return extremumVjp(*this, builder, resultCotangents, operandCotangents);
}

LogicalResult ReduceMinOp::buildVjp(OpBuilder &builder,
                                    ArrayRef<Value> resultCotangents,
                                    SmallVectorImpl<Value> &operandCotangents) {
  return extremumVjp(*this, builder, resultCotangents, operandCotangents);
}
