//===- VjpBuilder.cpp - building blocks of the tess VJPs -----------------===//

#include "VjpBuilder.h"

using namespace mlir;
using namespace tessera::tess;
using namespace tessera::tess::vjp;

Value VjpBuilder::scalar(Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute element;
  if (auto floatType = llvm::dyn_cast<FloatType>(elementType))
    element = FloatAttr::get(floatType, value);
  else
    element = IntegerAttr::get(elementType, static_cast<int64_t>(value));
  return ConstantOp::create(builder, location, type,
                            DenseElementsAttr::get(type, element));
}

Value VjpBuilder::zeros(RankedTensorType type) {
  Type elementType = type.getElementType();
  Attribute zero = llvm::isa<FloatType>(elementType)
                       ? Attribute(FloatAttr::get(elementType, 0.0))
                       : Attribute(IntegerAttr::get(elementType, 0));
  return ConstantOp::create(builder, location, type,
                            DenseElementsAttr::get(type, zero));
}

Value VjpBuilder::scalarLike(Value like, double value) {
  return scalar(tensorType(like).getElementType(), value);
}

Value VjpBuilder::add(Value lhs, Value rhs) {
  return AddOp::create(builder, location, lhs, rhs);
}

Value VjpBuilder::sub(Value lhs, Value rhs) {
  return SubOp::create(builder, location, lhs, rhs);
}

Value VjpBuilder::mul(Value lhs, Value rhs) {
  return MulOp::create(builder, location, lhs, rhs);
}

Value VjpBuilder::div(Value lhs, Value rhs) {
  return DivOp::create(builder, location, lhs, rhs);
}

Value VjpBuilder::neg(Value value) {
  return NegOp::create(builder, location, value);
}

Value VjpBuilder::selectOrZero(Value condition, Value value) {
  return WhereOp::create(builder, location, condition, value,
                         scalarLike(value, 0.0));
}

Value VjpBuilder::zeroOrSelect(Value condition, Value value) {
  return WhereOp::create(builder, location, condition, scalarLike(value, 0.0),
                         value);
}

Value VjpBuilder::compare(ComparisonPredicate predicate, Value lhs,
                          Value rhs) {
  return CompareOp::create(builder, location, predicate, lhs, rhs);
}

Value VjpBuilder::reshape(Value value, ArrayRef<int64_t> shape) {
  RankedTensorType type = tensorType(value);
  if (type.getShape() == shape)
    return value;
  return ReshapeOp::create(builder, location,
                           RankedTensorType::get(shape, type.getElementType()),
                           value);
}

Value VjpBuilder::matmul(Value lhs, Value rhs, bool transposeLhs,
                         bool transposeRhs) {
  return MatmulOp::create(builder, location, lhs, rhs, transposeLhs,
                          transposeRhs);
}

Value VjpBuilder::sumToShape(Value gradient, RankedTensorType target) {
  RankedTensorType type = tensorType(gradient);
  if (type.getShape() == target.getShape())
    return gradient;
  // Broadcasting right-aligns the shapes: the leading `offset` dims were
  // added, and a target dim of 1 facing a larger one was stretched.
  int64_t offset = type.getRank() - target.getRank();
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (i < offset || (target.getDimSize(i - offset) == 1 &&
                       type.getDimSize(i) != 1))
      dims.push_back(i);
  Value summed = gradient;
  if (!dims.empty())
    summed = ReduceSumOp::create(builder, location, gradient, dims,
                                 /*keep_dims=*/true);
  return reshape(summed, target.getShape());
}

Value tessera::tess::vjp::beginVjp(Operation *op,
                                   ArrayRef<Value> resultCotangents,
                                   SmallVectorImpl<Value> &operandCotangents) {
  operandCotangents.assign(op->getNumOperands(), Value());
  return resultCotangents[0];
}

LogicalResult tessera::tess::vjp::notDifferentiable(Operation *op,
                                                    StringRef reason) {
  return op->emitOpError("cannot be differentiated: ") << reason;
}
