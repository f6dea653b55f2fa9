//===- TessTrainingOps.cpp - rules of the loss, gradient, optimizer ops ---===//
//
// Verifiers and result types of the ops in TessTrainingOps.td. A gradient op
// repeats its forward op's rules (through TessInference.h) so that it cannot
// describe a gradient of something the forward op could not compute.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"
#include "TessInference.h"

#include <cmath>

using namespace mlir;
using namespace tessera::tess;
using tessera::tess::detail::shapeString;

namespace {

RankedTensorType rankedType(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

/// C4 and C6 of the norm gradients: the cotangent, and the residual added
/// to dx when there is one, have the input's type.
LogicalResult checkCotangent(std::optional<Location> location, Value input,
                             Value dy, Value residual) {
  if (input.getType() != dy.getType())
    return emitOptionalError(location, "C4: dy ", dy.getType(),
                             " must have the input's type ", input.getType());
  if (residual && residual.getType() != input.getType())
    return emitOptionalError(location, "C6: residual ", residual.getType(),
                             " must have the input's type ", input.getType());
  return success();
}

/// The normalized (trailing) part of a norm's input type, the type of its
/// scale and bias gradients. The axis has been checked.
RankedTensorType normalizedType(Value input, int64_t axis) {
  RankedTensorType type = rankedType(input);
  int64_t start = *normalizeAxis(axis, type.getRank());
  return RankedTensorType::get(type.getShape().drop_front(start),
                               type.getElementType());
}

LogicalResult checkEpsilon(Operation *op, double epsilon) {
  // Written so that NaN fails too.
  if (!(epsilon >= 0))
    return op->emitOpError("C3: epsilon must be >= 0, got ") << epsilon;
  return success();
}

LogicalResult checkGradientCount(Operation *op, size_t expected,
                                 StringRef which) {
  if (op->getNumResults() != expected)
    return op->emitOpError("C5: expected ")
           << expected << " results (" << which << "), got "
           << op->getNumResults();
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

LogicalResult tessera::tess::detail::checkLogitsAndTargets(
    std::optional<Location> location, Value logits, Value targets,
    Value allTargets) {
  RankedTensorType logitsType = rankedType(logits);
  if (logitsType.getRank() < 1)
    return emitOptionalError(location, "C1: logits must have rank >= 1");
  ArrayRef<int64_t> rows = logitsType.getShape().drop_back();
  ArrayRef<int64_t> targetShape = rankedType(targets).getShape();
  if (targetShape != rows)
    return emitOptionalError(location, "C2: targets of shape ",
                             shapeString(targetShape),
                             " do not match the logits' rows ",
                             shapeString(rows));
  if (!allTargets)
    return success();
  RankedTensorType allType = rankedType(allTargets);
  if (allType.getElementType() != rankedType(targets).getElementType())
    return emitOptionalError(location, "C3: count_over targets of type ",
                             allType, " must have the targets' element type ",
                             rankedType(targets).getElementType());
  if (allType.hasStaticShape() && rankedType(targets).hasStaticShape() &&
      allType.getNumElements() < rankedType(targets).getNumElements())
    return emitOptionalError(
        location, "C3: count_over targets of shape ",
        shapeString(allType.getShape()), " have fewer elements than the ",
        "targets ", shapeString(targetShape));
  return success();
}

LogicalResult tessera::tess::detail::inferCrossEntropy(
    std::optional<Location> location, Value logits, Value targets,
    Value allTargets, SmallVectorImpl<Type> &inferred) {
  if (failed(checkLogitsAndTargets(location, logits, targets, allTargets)))
    return failure();
  inferred.push_back(
      RankedTensorType::get({}, Float32Type::get(logits.getContext())));
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  return detail::inferCrossEntropy(location, adaptor.getLogits(),
                                   adaptor.getTargets(),
                                   adaptor.getAllTargets(), inferred);
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  if (failed(detail::checkLogitsAndTargets(location, adaptor.getLogits(),
                                           adaptor.getTargets(),
                                           adaptor.getAllTargets())))
    return failure();
  inferred.push_back(adaptor.getLogits().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

LogicalResult LayerNormGradOp::verifyBeforeInference() {
  size_t expected = 1 + (getScale() ? 1 : 0) + (getBiasGrad() ? 1 : 0);
  return checkGradientCount(*this, expected,
                            "dx, then dscale with a scale, then dbias with "
                            "bias_grad");
}

LogicalResult PackedSwigluGradOp::verify() {
  if (failed(detail::checkPackedGating(getLoc(), getInput().getType(),
                                       getDy().getType(), "dy")))
    return failure();
  if (getDinput().getType() != getInput().getType())
    return emitOpError("C3: the result type ")
           << getDinput().getType() << " is not the input's "
           << getInput().getType();
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  return checkEpsilon(*this, getEpsilon().convertToDouble());
}

LogicalResult LayerNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  Value input = adaptor.getInput();
  int64_t axis = adaptor.getAxis();
  if (failed(detail::inferNorm(location, input, axis, adaptor.getScale(),
                               Value(), inferred)) ||
      failed(checkCotangent(location, input, adaptor.getDy(),
                            adaptor.getResidual())))
    return failure();
  if (adaptor.getScale())
    inferred.push_back(normalizedType(input, axis));
  if (adaptor.getBiasGrad())
    inferred.push_back(normalizedType(input, axis));
  return success();
}

LogicalResult RmsNormGradOp::verifyBeforeInference() {
  return checkGradientCount(*this, getScale() ? 2 : 1,
                            "dx, then dscale with a scale");
}

LogicalResult RmsNormGradOp::verify() {
  return checkEpsilon(*this, getEpsilon().convertToDouble());
}

LogicalResult RmsNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  Value input = adaptor.getInput();
  int64_t axis = adaptor.getAxis();
  if (failed(detail::inferNorm(location, input, axis, adaptor.getScale(),
                               Value(), inferred)) ||
      failed(checkCotangent(location, input, adaptor.getDy(),
                            adaptor.getResidual())))
    return failure();
  if (adaptor.getScale())
    inferred.push_back(normalizedType(input, axis));
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  int64_t rank = getOutput().getType().getRank();
  // I64Attr's getter returns the bits unsigned; the axis is signed.
  int64_t axis = static_cast<int64_t>(getAxis());
  if (!normalizeAxis(axis, rank))
    return emitOpError("C1: axis ")
           << axis << " is out of range for rank " << rank;
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  SmallVector<Type, 1> output;
  if (failed(detail::inferAttention(
          location, adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(),
          adaptor.getMask(), adaptor.getCausal(),
          adaptor.getScale().convertToDouble(),
          adaptor.getDropout().convertToDouble(),
          static_cast<int64_t>(adaptor.getWindow()),
          adaptor.getSoftcap().convertToDouble(), output)))
    return failure();
  if (adaptor.getDy().getType() != output.front())
    return emitOptionalError(location, "C11: dy ", adaptor.getDy().getType(),
                             " must have the attention's result type ",
                             output.front());
  inferred.push_back(adaptor.getQuery().getType());
  inferred.push_back(adaptor.getKey().getType());
  inferred.push_back(adaptor.getValue().getType());
  return success();
}

bool CrossEntropyOp::isGradient(CrossEntropyGradOp grad) {
  return grad.getLogits() == getLogits() && grad.getTargets() == getTargets() &&
         grad.getIgnoreIndex() == getIgnoreIndex() &&
         grad.getAllTargets() == getAllTargets();
}

CrossEntropyGradOp CrossEntropyOp::fusedGradient() {
  auto grad = llvm::dyn_cast_or_null<CrossEntropyGradOp>((*this)->getNextNode());
  if (!grad || !isGradient(grad))
    return {};
  return grad;
}

LogicalResult PackedAttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  SmallVector<Type, 2> forward;
  if (failed(detail::inferPackedAttention(
          location, adaptor.getQkv(),
          static_cast<int64_t>(adaptor.getQueryHeads()),
          static_cast<int64_t>(adaptor.getKeyHeads()),
          adaptor.getScale().convertToDouble(), forward)))
    return failure();
  if (adaptor.getY().getType() != forward[0] ||
      adaptor.getLse().getType() != forward[1])
    return emitOptionalError(location, "C5: y ", adaptor.getY().getType(),
                             " and lse ", adaptor.getLse().getType(),
                             " must be the forward's ", forward[0], " and ",
                             forward[1]);
  if (adaptor.getDy().getType() != forward[0])
    return emitOptionalError(location, "C6: dy ", adaptor.getDy().getType(),
                             " must have y's type ", forward[0]);
  inferred.push_back(adaptor.getQkv().getType());
  return success();
}

LogicalResult LinearWeightGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  RankedTensorType input = rankedType(adaptor.getInput());
  RankedTensorType dy = rankedType(adaptor.getDy());
  if (input.getRank() < 1 || input.getRank() != dy.getRank() ||
      input.getShape().drop_back() != dy.getShape().drop_back())
    return emitOptionalError(location, "C1: the input ", input, " and dy ",
                             dy, " must have rank >= 1 and the same leading "
                             "dims (the rows)");
  if (input.getElementType() != dy.getElementType())
    return emitOptionalError(location, "C2: the input ", input, " and dy ",
                             dy, " must have one element type");
  int64_t in = input.getShape().back(), out = dy.getShape().back();
  SmallVector<int64_t> shape = adaptor.getTransposeWeight()
                                   ? SmallVector<int64_t>{out, in}
                                   : SmallVector<int64_t>{in, out};
  inferred.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingGradOp::verify() {
  RankedTensorType table = getDtable().getType();
  RankedTensorType dy = getDy().getType();
  if (table.getRank() != 2 || table.getElementType() != dy.getElementType())
    return emitOpError("C1: the result must be a rank-2 table of ")
           << dy.getElementType() << ", got " << table;
  SmallVector<int64_t> expected(getIndices().getType().getShape());
  expected.push_back(table.getDimSize(1));
  if (dy.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("C2: dy must have shape ")
           << shapeString(expected) << " (ids, then the row width), got "
           << shapeString(dy.getShape());
  return verifyMeshAxisAttr(*this, "rows_axis", getRowsAxis(), "C3");
}

LogicalResult GatherGradOp::verify() {
  RankedTensorType result = getDx().getType();
  RankedTensorType dy = getDy().getType();
  int64_t rawAxis = static_cast<int64_t>(getAxis());
  auto axis = normalizeAxis(rawAxis, result.getRank());
  if (!axis)
    return emitOpError("C1: axis ")
           << rawAxis << " is out of range for rank " << result.getRank();
  SmallVector<int64_t> expected(result.getShape().take_front(*axis));
  llvm::append_range(expected, getIndices().getType().getShape());
  llvm::append_range(expected, result.getShape().drop_front(*axis + 1));
  if (dy.getElementType() != result.getElementType() ||
      dy.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("C2: dy must be ")
           << RankedTensorType::get(expected, result.getElementType())
           << ", got " << dy;
  return success();
}

LogicalResult SliceGradOp::verify() {
  RankedTensorType result = getDx().getType();
  RankedTensorType dy = getDy().getType();
  ArrayRef<int64_t> starts = getStarts(), strides = getStrides();
  int64_t rank = result.getRank();
  if (dy.getRank() != rank || dy.getElementType() != result.getElementType() ||
      static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return emitOpError("C1: dy, starts and strides need the result's rank ")
           << rank << " and dy its element type";
  for (int64_t i = 0; i < rank; ++i) {
    if (starts[i] < 0 || strides[i] < 1)
      return emitOpError("C2: dim ")
             << i << " needs start >= 0 and stride >= 1";
    int64_t count = dy.getDimSize(i), dim = result.getDimSize(i);
    // Division instead of start + (count - 1) * stride, which can overflow.
    bool inside = count == 0
                      ? starts[i] <= dim
                      : starts[i] < dim &&
                            (count - 1) <= (dim - 1 - starts[i]) / strides[i];
    if (!inside)
      return emitOpError("C3: dim ")
             << i << ": " << count << " elements from " << starts[i]
             << " by " << strides[i] << " do not fit in " << dim;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

LogicalResult AdamWOp::verify() {
  ArrayRef<int64_t> shape = getParam().getType().getShape();
  for (Value operand : {getGrad(), getM(), getV()})
    if (rankedType(operand).getShape() != shape)
      return emitOpError("C1: grad, m and v must have the parameter's shape ")
             << shapeString(shape) << ", got "
             << shapeString(rankedType(operand).getShape());
  for (double beta : {getBeta1().convertToDouble(),
                      getBeta2().convertToDouble()})
    if (!(beta >= 0 && beta < 1))
      return emitOpError("C3: beta1 and beta2 must be in [0, 1), got ")
             << beta;
  double epsilon = getEpsilon().convertToDouble();
  double weightDecay = getWeightDecay().convertToDouble();
  if (!(epsilon > 0) || std::isinf(epsilon) || !(weightDecay >= 0))
    return emitOpError("C4: epsilon must be positive and weight_decay >= 0, "
                       "got ")
           << epsilon << " and " << weightDecay;
  return success();
}

LogicalResult AdamWOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location>,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  inferred.push_back(adaptor.getParam().getType());
  inferred.push_back(adaptor.getM().getType());
  inferred.push_back(adaptor.getV().getType());
  return success();
}

LogicalResult AttentionGradOp::verify() {
  return verifyAttentionStreamAxes(*this, getStreamAxis(), getHeadStreamAxis(),
                                   getDropout().convertToDouble());
}
