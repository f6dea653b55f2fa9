//===- PipelinePlan.h - tess-search-pipeline's decision --------*- C++ -*-===//
//
// What tess-search-pipeline decides for a module, for the pass and for a
// caller that reports the decision itself (tesserac --explain --pipeline
// prints the stages, their costs and memory, from the decision and the
// module's #tess.plan the decision wrote), so that what --explain prints is
// what compiles: the pipeline search (lib/Pipeline: stages, their submeshes'
// DP x TP and ZeRO-1, micro-batches, schedule, remat per stage) on the
// training program built from the module's @forward (the compile's training
// phase, q/k/v apart, as the stages' meshes plan the projections), its
// activations scaled to the step the compile measures (CompiledStepMemory.h)
// and, on one device, the fit decided by that step; and its result as the
// module's #tess.plan, the one decision every later phase reads.
//
// The search prices every candidate at any micro-batch from the program at
// two batches (UnitProfile.h), so it takes the module's forward, whose
// batch is the step's global batch, to other batches.
//
// The plan's translation: the compiled driver runs every stage on one stage
// mesh with one strategy (`mesh`, dp/tp), the stage split given as the
// plan's chunks (#tess.chunk), each stage's recomputation on its chunks where
// the stages differ (the plan's remat is the first stage with layers'), and
// ZeRO-1 inside the stage mesh as the plan's zero = 1 (runtime/train/
// StageZero.h). What the driver cannot run is no #tess.plan but the reason,
// naming the flag that pins a plan it can. Its inverse, for --explain --plan,
// gives the search's pins that return a pipelined #tess.plan and its
// prediction.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_PIPELINEPLAN_H
#define TESSERA_TRANSFORMS_PIPELINEPLAN_H

#include "Tess/IR/TessOps.h"
#include "tessera/Analysis/StepMemory.h"
#include "tessera/CostModel/Cluster.h"
#include "tessera/Pipeline/CompiledPipelineMemory.h"
#include "tessera/Pipeline/InterOpSearch.h"
#include "tessera/Transforms/CompiledStepMemory.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// tess-search-pipeline's decision for a module.
struct PipelinePlanDecision {
  /// The cluster searched, its device memory the pass's `memory-limit`.
  cost::Cluster cluster;
  /// The search's pins from the pass's options, the global batch the
  /// module's.
  pipeline::SearchOptions search;
  /// The program the search priced: its units and their costs at any
  /// micro-batch.
  pipeline::ProgramProfile profile;
  /// The searched plan: its stages with their costs and memory, the
  /// schedule, the predicted step and the search's statistics.
  pipeline::PipelinePlan plan;
  /// The step the plan's program is built with.
  CompiledStepOptions step;
  /// A plan on one device: its compiled step's memory, which decided it.
  std::optional<StepMemory> compiled;
  /// A plan on several devices: each device's memory of the pipelined
  /// program compiled for it, which decided it (the searches that led to
  /// it are the plan's compiledSearches).
  std::vector<pipeline::PipelineDeviceMemory> compiledDevices;
  /// Why the compiled driver cannot run `plan`, naming the flag that pins a
  /// plan it can; empty when it can, the module's #tess.plan then `plan`.
  std::string notCompiled;
};

/// The stage mesh of a pipelined #tess.plan as the compile partitions every
/// stage over it: the mesh as tess-annotate-sharding's `mesh` spells it
/// ("dp=2,tp=2", "dp=4", "tp=2") and its strategy (dp, tp, dp-tp); both
/// empty for one device a stage.
struct StageMeshStrategy {
  std::string mesh, strategy;
};
StageMeshStrategy stageMeshStrategy(tess::PlanAttr plan);

/// What tess-search-pipeline does to `module` (see its description): the
/// options read, the plan searched on @forward at its batch, the step built
/// and measured with the options' loss, precision, vocabulary multiple and
/// logits block, and written as the module's #tess.plan. Errors are
/// diagnostics on the module (an option out of range, no @forward or no
/// batch, the search's own, which names the pin at fault), failure; but a
/// plan the compiled driver cannot run leaves the module without a plan and
/// says why in the decision's `notCompiled`, for the caller to say in its
/// own terms (the pass's error, --explain's "Not compiled" line). With
/// `unfit`, no plan under the pins is no error either: its reason goes
/// there, the module left as it was, and the result is failure (a caller
/// weighing another search's plan, TrainingPlan.h). A plan on several
/// devices is checked against the pipelined program compiled for it (each
/// device's memory, CompiledPipelineMemory.h), as one device's is against
/// its compiled step.
mlir::FailureOr<PipelinePlanDecision>
decidePipelinePlan(mlir::ModuleOp module, const SearchPipelineOptions &options,
                   std::string *unfit = nullptr);

/// Checks `decision`'s plan, if on several devices, against the pipelined
/// program the compile builds for it from the module's forward (at any
/// batch): its largest device's compiled memory
/// (CompiledPipelineMemory.h) decides the fit. Where that misses the
/// limit, the search runs again under the plan's prediction scaled down by
/// the miss, and the plan that fits replaces it, with `compiledDevices`
/// and the plan's `compiledSearches` filled. A plan the driver cannot run is left
/// unchecked (its `notCompiled` says why). Failure after an error on the
/// module, or with `unfit` after its reason there.
mlir::LogicalResult checkCompiledPipeline(mlir::ModuleOp module,
                                          PipelinePlanDecision &decision,
                                          std::string *unfit = nullptr);

/// The search's pins that make it return the plan `attribute` describes
/// (a pipelined #tess.plan): stages, micro-batches, schedule, remat (left
/// to the search where chunks say their own: with the stage boundaries
/// pinned it chooses the same per stage again), the devices (stages x the
/// stage mesh), the stage mesh's tensor-parallel degree, ZeRO-1 or not,
/// and the stage boundaries (the chunks' units per device). Errors: a plan
/// the compile never writes (mixed ZeRO, zero = 1 without dp replicas).
llvm::Expected<pipeline::SearchOptions>
pipelineSearchPins(tess::PlanAttr attribute);

} // namespace tessera

#endif // TESSERA_TRANSFORMS_PIPELINEPLAN_H
