//===- Losses.cpp - kernel calls of the loss ------------------------------===//
//
// The cross-entropy ops on the logits viewed as rows [N, V] and the targets
// as [N], as the kernels take them; the loss fused with its gradient is one
// pass over the logits.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

using namespace mlir;
namespace tess = tessera::tess;

namespace tessera::lowering {

void populateLossKernelCalls(KernelCallPatterns &patterns) {
  patterns.add<tess::CrossEntropyOp>(
      [](tess::CrossEntropyOp crossEntropy, KernelCallContext &c) {
        // The kernels take rows: logits [N, V], targets [N].
        Value logits = c.rowsView(crossEntropy.getLogits());
        Value targets = c.flatView(crossEntropy.getTargets());
        return c.call("cross_entropy", [&](CallArguments &a) {
          a.value(logits)
              .value(targets)
              .optional(c.in(crossEntropy.getAllTargets()))
              .value(c.out(crossEntropy))
              .i64(crossEntropy.getIgnoreIndex());
        });
      });
  patterns.add<tess::CrossEntropyGradOp>(
      [](tess::CrossEntropyGradOp grad, KernelCallContext &c) {
        Value logits = c.rowsView(grad.getLogits());
        Value targets = c.flatView(grad.getTargets());
        Value dlogits = c.rowsView(grad.getResult());
        return c.call("cross_entropy_grad", [&](CallArguments &a) {
          a.value(logits)
              .value(targets)
              .optional(c.in(grad.getAllTargets()))
              .value(c.in(grad.getDloss()))
              .value(dlogits)
              .i64(grad.getIgnoreIndex());
        });
      });
  patterns.add<tess::CrossEntropyWithGradOp>(
      [](tess::CrossEntropyWithGradOp loss, KernelCallContext &c) {
        Value logits = c.rowsView(loss.getLogits());
        Value targets = c.flatView(loss.getTargets());
        Value dlogits = c.rowsView(loss.getDlogits());
        return c.call("cross_entropy_with_grad", [&](CallArguments &a) {
          a.value(logits)
              .value(targets)
              .optional(c.in(loss.getAllTargets()))
              .value(c.in(loss.getDloss()))
              .value(c.out(loss, 0))
              .value(dlogits)
              .i64(loss.getIgnoreIndex());
        });
      });
}

} // namespace tessera::lowering
