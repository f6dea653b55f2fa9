//===- FusedCalls.cpp - Adjacent ops the lowering runs as one call --------===//

#include "tessera/Lowering/FusedCalls.h"

using namespace mlir;

namespace tessera::lowering {

tess::GeluOp geluAfterLinear(tess::LinearOp linear) {
  auto gelu = llvm::dyn_cast_or_null<tess::GeluOp>(linear->getNextNode());
  if (!gelu || gelu.getInput() != linear.getResult() ||
      gelu.getApproximation() != tess::GeluApproximation::tanh)
    return {};
  return gelu;
}

tess::GeluGradOp geluGradAfterLinear(tess::LinearOp linear) {
  auto grad = llvm::dyn_cast_or_null<tess::GeluGradOp>(linear->getNextNode());
  if (!grad || linear.getBias() || grad.getDy() != linear.getResult() ||
      !linear.getResult().hasOneUse() ||
      grad.getApproximation() != tess::GeluApproximation::tanh)
    return {};
  return grad;
}

/// The add right after `value`'s defining op whose one operand is `value`
/// (its only use) and the other of the same type, or null.
static tess::AddOp residualAddOf(Value value) {
  if (!value)
    return {};
  auto add = llvm::dyn_cast_or_null<tess::AddOp>(
      value.getDefiningOp()->getNextNode());
  if (!add || !value.hasOneUse() ||
      (add.getLhs() != value && add.getRhs() != value) ||
      add.getLhs().getType() != add.getType() ||
      add.getRhs().getType() != add.getType())
    return {};
  return add;
}

/// That add's operand other than `value`.
static Value otherOperand(tess::AddOp add, Value value) {
  return add.getLhs() == value ? add.getRhs() : add.getLhs();
}

tess::AddOp residualAddAfterLinear(tess::LinearOp linear) {
  return residualAddOf(linear.getResult());
}

Value residualOf(tess::AddOp add, tess::LinearOp linear) {
  return otherOperand(add, linear.getResult());
}

tess::AddOp residualAddAfterMatmul(tess::MatmulOp matmul) {
  return residualAddOf(matmul.getResult());
}

Value residualOf(tess::AddOp add, tess::MatmulOp matmul) {
  return otherOperand(add, matmul.getResult());
}

/// The norm gradient's dx: the first result of either op.
static Value normGradientDx(Operation *grad) {
  if (!llvm::isa_and_nonnull<tess::LayerNormGradOp, tess::RmsNormGradOp>(grad))
    return {};
  return grad->getResult(0);
}

tess::AddOp residualAddAfterNormGrad(Operation *grad) {
  return residualAddOf(normGradientDx(grad));
}

Value residualOf(tess::AddOp add, Operation *grad) {
  return otherOperand(add, normGradientDx(grad));
}

tess::ReduceSumOp biasGradAfterMatmul(tess::MatmulOp matmul) {
  auto reduce =
      llvm::dyn_cast_or_null<tess::ReduceSumOp>(matmul->getNextNode());
  if (!reduce || matmul.getTransposeRhs())
    return {};
  auto lhsType = llvm::dyn_cast<RankedTensorType>(matmul.getLhs().getType());
  auto rhsType = llvm::dyn_cast<RankedTensorType>(matmul.getRhs().getType());
  auto dyType = llvm::dyn_cast<RankedTensorType>(reduce.getInput().getType());
  auto sumType = llvm::dyn_cast<RankedTensorType>(reduce.getType());
  if (!lhsType || !rhsType || !dyType || !sumType || lhsType.getRank() != 2 ||
      rhsType.getRank() != 2 || !rhsType.hasStaticShape() ||
      !dyType.hasStaticShape() || dyType.getRank() < 1)
    return {};
  // b is dy itself, or dy with its leading dims flattened.
  Value rhs = matmul.getRhs();
  if (auto reshape = rhs.getDefiningOp<tess::ReshapeOp>())
    rhs = reshape.getOperand();
  int64_t columns = dyType.getShape().back();
  if (rhs != reduce.getInput() || rhsType.getShape()[1] != columns ||
      rhsType.getElementType() != dyType.getElementType())
    return {};
  // The sum over every dim but the last, to [columns].
  llvm::SmallVector<int64_t> dims;
  for (int64_t dim : reduce.getDims())
    dims.push_back(dim < 0 ? dim + dyType.getRank() : dim);
  llvm::sort(dims);
  llvm::SmallVector<int64_t> leading;
  for (int64_t dim = 0; dim + 1 < dyType.getRank(); ++dim)
    leading.push_back(dim);
  if (dims != leading || sumType.getShape() != llvm::ArrayRef<int64_t>{columns})
    return {};
  return reduce;
}

bool joinsPreviousCall(Operation &op) {
  Operation *previous = op.getPrevNode();
  if (residualAddAfterNormGrad(previous) == &op)
    return true;
  if (auto matmul = llvm::dyn_cast_or_null<tess::MatmulOp>(previous))
    if (biasGradAfterMatmul(matmul) == &op ||
        residualAddAfterMatmul(matmul) == &op)
      return true;
  auto linear = llvm::dyn_cast_or_null<tess::LinearOp>(previous);
  if (!linear)
    return false;
  return geluAfterLinear(linear) == &op || geluGradAfterLinear(linear) == &op ||
         residualAddAfterLinear(linear) == &op;
}

} // namespace tessera::lowering
