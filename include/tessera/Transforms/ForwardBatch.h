//===- ForwardBatch.h - @forward at another batch ---------------*- C++ -*-===//
//
// The searches plan a module's @forward at the step's global batch, and the
// pipeline search prices its candidates from the program at other batches
// (UnitProfile.h); a pipelined plan's step is built at one micro-batch. The
// importer writes the forward at any batch of 2 or more with the batch as
// the leading dim of every value computed from the inputs, so another batch
// is that dim rewritten: the weights and the constants (rotary tables,
// masks) keep theirs.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_FORWARDBATCH_H
#define TESSERA_TRANSFORMS_FORWARDBATCH_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"

namespace tessera {

/// The batch of the module's @forward: the leading dim its inputs share.
/// Failure after an error on the module (no @forward, inputs without one
/// leading dim).
mlir::FailureOr<int64_t> forwardBatch(mlir::ModuleOp module);

/// A copy of `module`, without its #tess.plan, with @forward at `batch`
/// samples: every value computed from the inputs has the batch as its
/// leading dim, which becomes `batch` (and, where the forward needs it, a
/// splat constant of as many rows: an input the importer folded, a BERT's
/// token types). Failure after an error on the module (a value computed
/// from the inputs without that leading dim, a forward that no longer
/// verifies).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
forwardAtBatch(mlir::ModuleOp module, int64_t batch);

} // namespace tessera

#endif // TESSERA_TRANSFORMS_FORWARDBATCH_H
