//===- ScheduleGeluGrad.cpp - tess-schedule-gelu-grad ---------------------===//
//
// Autodiff emits a linear layer's input gradient, then its weight and bias
// gradients, and only then the gradient of the GELU that fed the layer. The
// input gradient and the GELU's gradient are one call (one GEMM with
// cuBLASLt's DGELU epilogue; tess-fuse-epilogues makes the pair
// tess.linear_gelu_grad) when they are adjacent: this pass moves each such gelu_grad up, right after the linear
// that computes its dy. Both of its operands exist there, so only the order
// changes.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_SCHEDULEGELUGRAD
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

struct ScheduleGeluGradPass
    : tessera::impl::ScheduleGeluGradBase<ScheduleGeluGradPass> {
  void runOnOperation() override {
    getOperation().walk([](tess::GeluGradOp grad) {
      auto linear = grad.getDy().getDefiningOp<tess::LinearOp>();
      if (!linear || linear.getBias() || !linear.getResult().hasOneUse() ||
          linear->getBlock() != grad->getBlock())
        return;
      // The GELU's input is a forward activation: it must already exist.
      Operation *input = grad.getInput().getDefiningOp();
      if (input && input->getBlock() == grad->getBlock() &&
          !input->isBeforeInBlock(linear))
        return;
      grad->moveAfter(linear);
    });
  }
};

} // namespace
