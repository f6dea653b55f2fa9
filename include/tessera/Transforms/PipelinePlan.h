//===- PipelinePlan.h - the inter-op search and its #tess.plan -*- C++ -*-===//
//
// The pipeline search (lib/Pipeline: stages, their submeshes' DP x TP and
// ZeRO-1, micro-batches, schedule, remat per stage) as the compile runs it:
// on the training program built from the forward (the compile's training
// phase, q/k/v apart, as the stages' meshes plan the projections), its
// activations scaled to the step the compile measures (CompiledStepMemory.h)
// and, on one device, the fit decided by that step; and its result as the
// module's #tess.plan, the one decision every later phase reads. Here for
// tess-search-pipeline and for tesserac --explain --pipeline, which prints
// the search's full report, so that both run one search and write one plan.
//
// The search prices every candidate at any micro-batch from the program at
// two batches (UnitProfile.h), so it needs the forward at batches other than
// the module's: `forwardAtBatch` gives the module's own forward at another
// batch, and the importer gives it for tesserac, which plans before the model
// is imported at the micro-batch it compiles.
//
// The plan's translation: the compiled driver runs every stage on one stage
// mesh with one strategy (`mesh`, dp/tp), the stage split given as the
// plan's chunks (#tess.chunk), each stage's recomputation on its chunks where
// the stages differ (the plan's remat is the first stage with layers'), and
// ZeRO-1 inside the stage mesh as the plan's zero = 1 (runtime/train/
// StageZero.h). What the driver cannot run is an error naming the flag that
// pins a plan it can. Its inverse, for --explain --plan, gives the search's
// pins that return a pipelined #tess.plan and its prediction.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_PIPELINEPLAN_H
#define TESSERA_TRANSFORMS_PIPELINEPLAN_H

#include "Tess/IR/TessOps.h"
#include "tessera/Analysis/StepMemory.h"
#include "tessera/CostModel/Cluster.h"
#include "tessera/Pipeline/InterOpSearch.h"
#include "tessera/Transforms/CompiledStepMemory.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <optional>

namespace tessera {

/// The forward (the fusion phase's module) at `batch` samples; failure
/// after a diagnostic.
using ForwardAtBatch =
    llvm::function_ref<mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>(
        int64_t batch)>;

/// The search's plan and what it was found on.
struct SearchedPipeline {
  pipeline::SearchOptions search;
  pipeline::ProgramProfile profile;
  pipeline::PipelinePlan plan;
  /// A plan on one device: its compiled step's memory, which decided it.
  std::optional<StepMemory> compiled;
};

/// Searches the pipeline plan of the forward `forwardAt` gives, on
/// `cluster` with `search`'s pins, the step built and measured with `step`.
/// A plan on one device is the step the compile builds: its compiled peak
/// decides the fit (a plan that does not fit by it is searched again with
/// the next stronger recomputation, unless the recomputation is pinned).
/// Failure after a diagnostic: `forwardAt`'s and the measurement's own, the
/// search's through `error` (its message, which names the pin at fault).
mlir::FailureOr<SearchedPipeline>
searchPipelinePlan(ForwardAtBatch forwardAt, const cost::Cluster &cluster,
                   const pipeline::SearchOptions &search,
                   const CompiledStepOptions &step,
                   llvm::function_ref<void(const llvm::Twine &)> error);

/// The batch of the module's @forward: the leading dim its inputs share.
/// Failure after an error on the module (no @forward, inputs without one
/// leading dim).
mlir::FailureOr<int64_t> forwardBatch(mlir::ModuleOp module);

/// A copy of `module` with its @forward at `batch` samples: every value
/// computed from the inputs has the batch as its leading dim (as the
/// importer writes the forward at any batch of 2 or more), which becomes
/// `batch`. Failure after an error on the module (a value computed from the
/// inputs without that leading dim, a forward that no longer verifies).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
forwardAtBatch(mlir::ModuleOp module, int64_t batch);

/// The module's #tess.plan the compile writes for `plan` (of the program
/// `profile` describes), its stage mesh included: what the executable
/// prints. Errors: what the driver cannot run, with the flag that pins a
/// plan it can.
llvm::Expected<tess::PlanAttr>
pipelinePlanAttribute(mlir::MLIRContext &context,
                      const pipeline::PipelinePlan &plan,
                      const pipeline::ProgramProfile &profile);

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
