//===- ScheduleResidualAdds.cpp - tess-schedule-residual-adds -------------===//
//
// Where a tensor feeds two linear layers (q, k and v of one norm's output;
// gate and up of the MLP's), autodiff sums the layers' input gradients:
// linear, weight-gradient matmul, linear, matmul, add. A linear and the add
// right after it of its result are one call, the sum in the GEMM's C
// (tess-fuse-epilogues makes the pair tess.linear_add), but only when they
// are adjacent. This pass moves each such add up, right after the later of its
// linear operands, when the other operand already exists there: the
// separate elementwise pass over the gradient (a read of two [tokens, d]
// tensors and a write of one, per add) goes. Only the order changes.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_SCHEDULERESIDUALADDS
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// Whether `value` exists before `op` in `op`'s block.
bool definedBefore(Value value, Operation *op) {
  Operation *definition = value.getDefiningOp();
  if (!definition)
    return true; // a block argument
  return definition->getBlock() == op->getBlock() &&
         definition->isBeforeInBlock(op);
}

/// Whether `add` already runs as one call with the op before it: a norm
/// gradient's residual add (tessera_*_norm_grad_add) stays there.
bool joinsNormGradient(tess::AddOp add) {
  Operation *previous = add->getPrevNode();
  if (!llvm::isa_and_nonnull<tess::LayerNormGradOp, tess::RmsNormGradOp>(
          previous))
    return false;
  Value dx = previous->getResult(0);
  return add.getLhs() == dx || add.getRhs() == dx;
}

/// The linear whose result `value` is, used only by the add, or null.
tess::LinearOp soleLinear(Value value) {
  auto linear = value.getDefiningOp<tess::LinearOp>();
  return linear && value.hasOneUse() ? linear : tess::LinearOp();
}

struct ScheduleResidualAddsPass
    : tessera::impl::ScheduleResidualAddsBase<ScheduleResidualAddsPass> {
  void runOnOperation() override {
    getOperation().walk([](tess::AddOp add) {
      // One call computes linear + residual only for one type throughout.
      if (add.getLhs().getType() != add.getType() ||
          add.getRhs().getType() != add.getType() || joinsNormGradient(add))
        return;
      tess::LinearOp target;
      for (auto [mine, other] : {std::pair(add.getLhs(), add.getRhs()),
                                 std::pair(add.getRhs(), add.getLhs())}) {
        tess::LinearOp linear = soleLinear(mine);
        if (!linear || linear->getBlock() != add->getBlock() ||
            !definedBefore(other, linear))
          continue;
        // The later linear, so that the other operand exists.
        if (!target || target->isBeforeInBlock(linear))
          target = linear;
      }
      if (target && target->getNextNode() != add.getOperation())
        add->moveAfter(target);
    });
  }
};

} // namespace
