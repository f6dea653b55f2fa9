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

bool joinsPreviousCall(Operation &op) {
  auto linear = llvm::dyn_cast_or_null<tess::LinearOp>(op.getPrevNode());
  if (!linear)
    return false;
  return geluAfterLinear(linear) == &op || geluGradAfterLinear(linear) == &op ||
         residualAddAfterLinear(linear) == &op;
}

} // namespace tessera::lowering
