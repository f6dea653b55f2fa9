//===- TessFusedOps.cpp - result types of the fused ops -------------------===//
//
// Result types of the ops in TessFusedOps.td. Each repeats the rules of the
// ops it fuses (TessInference.h), so a fused op can only describe what the
// pair it replaces could compute, plus the rule tying the pair together.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"
#include "TessInference.h"

using namespace mlir;
using namespace tessera::tess;

namespace {

/// The rule that the second op's operand has the first op's result type.
LogicalResult checkSameType(std::optional<Location> location,
                            StringRef rule, StringRef what, Value value,
                            Type expected) {
  if (value.getType() != expected)
    return emitOptionalError(location, rule, ": ", what, " ", value.getType(),
                             " must have the product's type ", expected);
  return success();
}

/// The rules of the tess.linear a fused op is built on, with its bias.
template <typename Adaptor>
LogicalResult inferDenseLayer(std::optional<Location> location,
                              Adaptor adaptor,
                              SmallVectorImpl<Type> &inferred) {
  return tessera::tess::detail::inferLinear(
      location, adaptor.getInput(), adaptor.getWeight(), adaptor.getBias(),
      adaptor.getTransposeWeight(), inferred);
}

} // namespace

LogicalResult LinearAddOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  if (failed(inferDenseLayer(location, adaptor, inferred)))
    return failure();
  return checkSameType(location, "C5", "addend", adaptor.getAddend(),
                       inferred.back());
}

LogicalResult LinearGeluOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> location,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  if (failed(inferDenseLayer(location, adaptor, inferred)))
    return failure();
  // The pre-activation, then GELU of it.
  inferred.push_back(inferred.back());
  return success();
}

LogicalResult LinearGeluGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  if (failed(detail::inferLinear(location, adaptor.getInput(),
                                 adaptor.getWeight(), /*bias=*/Value(),
                                 adaptor.getTransposeWeight(), inferred)))
    return failure();
  return checkSameType(location, "C4", "preactivation",
                       adaptor.getPreactivation(), inferred.back());
}

LogicalResult MatmulAddOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  if (failed(detail::inferMatmul(location, adaptor.getLhs(), adaptor.getRhs(),
                                 adaptor.getTransposeLhs(),
                                 adaptor.getTransposeRhs(), inferred)))
    return failure();
  return checkSameType(location, "C5", "addend", adaptor.getAddend(),
                       inferred.back());
}

LogicalResult
MatmulBiasGradOp::inferReturnTypes(MLIRContext *,
                                   std::optional<Location> location,
                                   Adaptor adaptor,
                                   SmallVectorImpl<Type> &inferred) {
  auto lhs = llvm::cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = llvm::cast<RankedTensorType>(adaptor.getRhs().getType());
  // The kernels take matrices: the bias gradient sums rhs's rows.
  if (lhs.getRank() != 2 || rhs.getRank() != 2)
    return emitOptionalError(location, "C1: operands must have rank 2");
  if (failed(detail::inferMatmul(location, adaptor.getLhs(), adaptor.getRhs(),
                                 adaptor.getTransposeLhs(),
                                 /*transposeRhs=*/false, inferred)))
    return failure();
  inferred.push_back(
      RankedTensorType::get({rhs.getDimSize(1)}, rhs.getElementType()));
  return success();
}

LogicalResult CrossEntropyWithGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  if (failed(detail::inferCrossEntropy(location, adaptor.getLogits(),
                                       adaptor.getTargets(),
                                       adaptor.getAllTargets(), inferred)))
    return failure();
  // The loss, then dlogits of the logits' type.
  inferred.push_back(adaptor.getLogits().getType());
  return success();
}
