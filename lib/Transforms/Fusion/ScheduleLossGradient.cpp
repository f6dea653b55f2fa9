//===- ScheduleLossGradient.cpp - tess-schedule-loss-gradient -------------===//
//
// The loss and its gradient over the same logits are one kernel (the fused
// cross-entropy, which reads each row of logits once for both) and, where
// the logits are large, one block of rows at a time (tess-chunk-loss-head):
// both rewrites take the pair only when the gradient directly follows the
// loss (tess::CrossEntropyOp::fusedGradient). Partitioned for a mesh, the
// step computes between them the loss's mean over the ranks' tokens (the
// all-reduced count of targets, the scale of the gradient) and the
// all-reduce of the loss itself. This pass moves the loss down to right
// before its gradient and what reads the loss's value to right after it:
// the gradient never reads the loss's value, so only the order changes.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace tessera {
#define GEN_PASS_DEF_SCHEDULELOSSGRADIENT
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// The first gradient of `loss` after it in its block: the op
/// fusedGradient would take if it were adjacent.
tess::CrossEntropyGradOp laterGradient(tess::CrossEntropyOp loss) {
  tess::CrossEntropyGradOp first;
  for (Operation *user : loss.getLogits().getUsers()) {
    auto grad = llvm::dyn_cast<tess::CrossEntropyGradOp>(user);
    if (grad && grad->getBlock() == loss->getBlock() &&
        loss->isBeforeInBlock(grad) && loss.isGradient(grad) &&
        (!first || grad->isBeforeInBlock(first)))
      first = grad;
  }
  return first;
}

/// Moves `loss` to right before `grad` and the ops between them that read
/// its value, directly or not, to right after `grad`, in their order.
/// Fails, changing nothing, when the gradient reads the loss's value.
LogicalResult scheduleNextTo(tess::CrossEntropyOp loss,
                             tess::CrossEntropyGradOp grad) {
  Block *block = loss->getBlock();
  llvm::SetVector<Operation *> readers;
  readers.insert(loss);
  for (Operation *op = loss->getNextNode(); op != grad;
       op = op->getNextNode()) {
    bool reads = false;
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (Operation *definer = operand.getDefiningOp())
          if (Operation *owner = block->findAncestorOpInBlock(*definer);
              owner && readers.contains(owner))
            reads = true;
    });
    if (reads)
      readers.insert(op);
  }
  for (Value operand : grad->getOperands())
    if (Operation *definer = operand.getDefiningOp(); definer &&
        readers.contains(block->findAncestorOpInBlock(*definer)))
      return failure();
  loss->moveBefore(grad);
  Operation *after = grad;
  for (Operation *reader : readers.getArrayRef().drop_front()) {
    reader->moveAfter(after);
    after = reader;
  }
  return success();
}

struct ScheduleLossGradientPass
    : tessera::impl::ScheduleLossGradientBase<ScheduleLossGradientPass> {
  void runOnOperation() override {
    llvm::SmallVector<tess::CrossEntropyOp> losses;
    getOperation().walk(
        [&](tess::CrossEntropyOp loss) { losses.push_back(loss); });
    for (tess::CrossEntropyOp loss : losses)
      if (!loss.fusedGradient())
        if (tess::CrossEntropyGradOp grad = laterGradient(loss))
          (void)scheduleNextTo(loss, grad);
  }
};

} // namespace
