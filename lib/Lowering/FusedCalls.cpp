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

tess::AddOp residualAddAfterLinear(tess::LinearOp linear) {
  auto add = llvm::dyn_cast_or_null<tess::AddOp>(linear->getNextNode());
  Value result = linear.getResult();
  if (!add || !result.hasOneUse() ||
      (add.getLhs() != result && add.getRhs() != result) ||
      add.getLhs().getType() != add.getType() ||
      add.getRhs().getType() != add.getType())
    return {};
  return add;
}

Value residualOf(tess::AddOp add, tess::LinearOp linear) {
  return add.getLhs() == linear.getResult() ? add.getRhs() : add.getLhs();
}

/// The norm gradient's dx: the first result of either op.
static Value normGradientDx(Operation *grad) {
  if (!llvm::isa_and_nonnull<tess::LayerNormGradOp, tess::RmsNormGradOp>(grad))
    return {};
  return grad->getResult(0);
}

tess::AddOp residualAddAfterNormGrad(Operation *grad) {
  Value dx = normGradientDx(grad);
  if (!dx)
    return {};
  auto add = llvm::dyn_cast_or_null<tess::AddOp>(grad->getNextNode());
  if (!add || !dx.hasOneUse() || (add.getLhs() != dx && add.getRhs() != dx) ||
      add.getLhs().getType() != add.getType() ||
      add.getRhs().getType() != add.getType())
    return {};
  return add;
}

Value residualOf(tess::AddOp add, Operation *grad) {
  Value dx = normGradientDx(grad);
  return add.getLhs() == dx ? add.getRhs() : add.getLhs();
}

bool joinsPreviousCall(Operation &op) {
  Operation *previous = op.getPrevNode();
  if (residualAddAfterNormGrad(previous) == &op)
    return true;
  auto linear = llvm::dyn_cast_or_null<tess::LinearOp>(previous);
  if (!linear)
    return false;
  return geluAfterLinear(linear) == &op || geluGradAfterLinear(linear) == &op ||
         residualAddAfterLinear(linear) == &op;
}

} // namespace tessera::lowering
