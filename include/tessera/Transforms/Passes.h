//===- Passes.h - Tessera's passes -----------------------------*- C++ -*-===//
#ifndef TESSERA_TRANSFORMS_PASSES_H
#define TESSERA_TRANSFORMS_PASSES_H

#include "Tess/IR/TessOps.h"
#include "tessera/CostModel/TrainingStepEstimate.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

#include <memory>
#include <optional>
#include <string>

namespace tessera {

namespace sharding {
struct TrainingShardingPlan;
} // namespace sharding

std::unique_ptr<mlir::Pass> createFuseActivationsPass();
std::unique_ptr<mlir::Pass> createFuseAttentionPass();
std::unique_ptr<mlir::Pass> createFuseLinearPass();
std::unique_ptr<mlir::Pass> createFuseNormsPass();
std::unique_ptr<mlir::Pass> createFuseRotaryPass();

/// Adds the passes that turn a freshly imported forward graph into its
/// Transformer-level form: canonicalize, fuse, canonicalize, CSE.
void buildImportCleanupPipeline(mlir::OpPassManager &pm);

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "tessera/Transforms/Passes.h.inc"

/// What tess-fit-memory does to `module`: its decision written as the
/// module's #tess.plan (`remat`, `offload`), for a caller that says itself
/// why the plan offloads (tesserac's note, the pass's remark). Returns that
/// reason, empty when the optimizer state stays on the device or its
/// offload was pinned; failure after an error on the module.
mlir::FailureOr<std::string> fitMemory(mlir::ModuleOp module,
                                       const FitMemoryOptions &options);

/// The numbers tess-search-sharding scales its per-op model to: those of
/// the step compiled for one device from the module's @forward (its
/// `calibration` option, else measured: CompiledStepMemory.h's step,
/// recomputing what the module's #tess.plan says, priced by the cost
/// model), and the cost model's estimate of that unsharded step when
/// measured (what tesserac --explain prints above the plan).
struct ShardingCalibration {
  double trainingComputeSeconds = 0;
  double optimizerSecondsPerElement = 0;
  double activationPeakBytes = 0;
  /// Of those, what the forward keeps for the backward
  /// (StepMemory::savedForBackwardBytes; 0: not measured, the whole peak
  /// scales).
  double activationSavedBytes = 0;
  double fixedMemoryBytes = 0;
  std::optional<cost::TrainingStepEstimate> estimate;
};

/// tess-search-sharding's calibration for `module` and `options`. Failure
/// after an error on the module (an option that does not parse, no
/// @forward, a step that cannot be built or measured).
mlir::FailureOr<ShardingCalibration>
calibrateSharding(mlir::ModuleOp module, const SearchShardingOptions &options);

/// What tess-search-sharding does to `module` once calibrated (the search
/// on its @forward, the plan written on the forward's ops), for a caller
/// that also reports the plan itself (tesserac --explain) and weighs a
/// search that finds no plan (the error) against other meshes'. Errors are
/// the pass's.
llvm::Expected<sharding::TrainingShardingPlan>
searchSharding(mlir::ModuleOp module, const SearchShardingOptions &options,
               const ShardingCalibration &calibration);

/// Adds the passes that turn the forward function into the training step:
/// tess-build-training with `options`, then canonicalize and CSE (which a
/// later tess-rematerialize must follow, not precede: CSE would merge its
/// clones back into the forward).
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const BuildTrainingOptions &options);

/// The options of the lowering preparation (tess-lowering-preparation).
struct LoweringPreparationOptions
    : mlir::PassPipelineOptions<LoweringPreparationOptions> {
  Option<int64_t> logitsBlockBytes{
      *this, "logits-block-bytes",
      llvm::cl::desc("The most bytes one block of the head's logits may take "
                     "(tess-chunk-loss-head; 0: never split)"),
      llvm::cl::init(int64_t(1) << 30)};
};

/// Adds what runs on the finished training step right before the lowering
/// (and before --summary plans its memory): the chunked loss head, the
/// attention layout fusions, the schedules that put fusable pairs next to
/// each other, then tess-fuse-epilogues.
void buildLoweringPreparationPipeline(
    mlir::OpPassManager &pm, const LoweringPreparationOptions &options);

} // namespace tessera

#endif // TESSERA_TRANSFORMS_PASSES_H
