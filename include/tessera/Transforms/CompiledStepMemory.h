//===- CompiledStepMemory.h - the step a forward compiles to --*- C++ -*-===//
//
// The decisions taken before the training step exists (tess-fit-memory's
// recomputation and offload, tess-search-sharding's calibration) are about
// the step the compile will build from the forward, as the lowering will
// plan it: the training phase (q/k/v packed on one device), the
// recomputation and the lowering preparation, run here on a copy, then the
// one memory analysis (tessera/Analysis/StepMemory.h). tesserac's --summary
// and the pipeline planner read the same, so that every path measures one
// program.
//
// Errors are diagnostics on the module, as the passes' own (a pass that
// failed without saying why gets a line naming the stage that failed).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_COMPILEDSTEPMEMORY_H
#define TESSERA_TRANSFORMS_COMPILEDSTEPMEMORY_H

#include "tessera/Analysis/StepMemory.h"
#include "tessera/Pipeline/Remat.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <string>

namespace tessera {

struct BuildTrainingOptions;

/// How the compile builds the step from the forward: tess-build-training's
/// objective, precision and head padding, and the lowering preparation's
/// largest block of the head's logits (the compile phases' options of the
/// same names).
struct CompiledStepOptions {
  std::string loss = "causal-lm";
  std::string precision = "fp32";
  int64_t vocabularyMultiple = 64;
  int64_t logitsBlockBytes = int64_t(1) << 30;
};

/// Copies the step's options (`loss`, `precision`, `vocabulary-multiple`,
/// `logits-block-bytes`) from `from` to `to`, any two of the option structs
/// that name them alike: CompiledStepOptions, the compile phases', and those
/// of the passes that measure the step (tess-fit-memory and the searches).
/// Returns `to`.
template <typename To, typename From>
To &copyStepOptions(To &to, const From &from) {
  to.loss = from.loss;
  to.precision = from.precision;
  to.vocabularyMultiple = from.vocabularyMultiple;
  to.logitsBlockBytes = from.logitsBlockBytes;
  return to;
}

/// Adds the compile's training phase to `pm`: each attention's q/k/v packed
/// into one projection when `packQkv` (one device: the sharding search
/// plans them apart), then buildTrainingPipeline with `options`.
void buildTrainingStepPipeline(mlir::OpPassManager &pm,
                               const BuildTrainingOptions &options,
                               bool packQkv);

/// Builds the training step from the forward function in `module`, in
/// place, q/k/v packed when `packQkv`. Failure after a diagnostic.
mlir::LogicalResult buildTrainingStep(mlir::ModuleOp module,
                                      const CompiledStepOptions &options,
                                      bool packQkv);

/// The memory of the training step in `step` (changed: prepared for the
/// lowering, as the lowering will plan it) trained with `microBatches`
/// micro-batches a step. Failure after a diagnostic.
mlir::FailureOr<StepMemory>
preparedStepMemory(mlir::ModuleOp step, const CompiledStepOptions &options,
                   int64_t microBatches = 1);

/// The memory of the one-device step compiled from the forward function in
/// `module` (left as it is) recomputing `remat` in every layer's backward:
/// the training step with q/k/v packed, tess-rematerialize and the lowering
/// preparation on a copy without the module's plan (the mode is `remat`,
/// whatever a plan there says), then the arena analysis. Failure after a
/// diagnostic.
mlir::FailureOr<StepMemory>
compiledStepMemory(mlir::ModuleOp module, pipeline::RematMode remat,
                   const CompiledStepOptions &options,
                   int64_t microBatches = 1);

} // namespace tessera

#endif // TESSERA_TRANSFORMS_COMPILEDSTEPMEMORY_H
