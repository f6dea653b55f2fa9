//===- TrainingPlan.h - tess-search-plan's decision ------------*- C++ -*-===//
//
// Issue 22: a search over N devices weighs the one-stage mesh plans
// (tess-search-sharding, which chooses the mesh of N) and the pipelined
// plans (tess-search-pipeline, whose space is PP x DP x TP with PP = 1 among
// it) as one decision, the plan with the lowest predicted step that fits
// the devices' memory; tess-search-plan makes it on the module, so that
// tesserac (--devices N, whatever it pins) and tessera-opt run the same
// step, and writes the winner as the one of the two passes would.
//
// The cost basis. Both searches price with lib/CostModel's device and link
// model, and on one layout they agree to a few per cent (gpt2-tiny, batch 8
// x 16, on test/Lowering/Inputs/eight-small-devices.json: dp=4 x tp=2 is
// 13.74 ms to the mesh search and 13.92 ms to the pipeline search; dp=2 on
// two-small-devices.json 54.79 against 55.05 ms). Their spaces differ: the
// pipeline search uses every device (DP x TP = N / PP), while the mesh
// search may leave a layer replicated, each device computing it whole,
// which on a tiny model is the fastest plan (gpt2-tiny on 16 H200s: dp=16
// replicated at 0.004 ms a step, no gradient exchange, where the pipeline
// search's best one-stage plan is 0.612 ms and its best pipeline 0.239 ms).
// So a pipelined plan is taken only when it is faster than both: the
// pipeline search's own best one-stage plan (the same model, the same
// space), and the mesh search's plan at its own price (a plan, such as the
// replicated one, the pipeline search cannot price); or when no mesh of N
// devices fits a one-stage plan at all. A one-stage plan is the mesh
// search's, whose per-op ILP is the finer intra-op search, unless no mesh
// fits: then the pipeline search's plan, one stage or more, is compiled
// (its one-stage plans may recompute every layer, which the mesh search's
// memory fit does not weigh per stage).
//
// Pins constrain the decision, never choose another path: each pins every
// search whose plans it describes and leaves out a search none of whose
// plans it allows. `zero` 0 or 1, `remat` and `memory-limit` pin both;
// `stages` 1 pins the pipeline search to one stage (its plan then competes
// as the one-stage fallback). A pipeline's shape (`stages` S > 1,
// `micro-batches` M > 1, a `schedule`) leaves out the mesh search, whose
// plans have none; `zero` 2|3, which no pipelined plan runs, leaves out the
// pipeline search. (--shard pins name a mesh's axes, so they pin --mesh's
// search, not this choice of the mesh.) A search left out, or one that finds no
// plan under the pins, is a row of the choice with its reason; the other
// search's plan is then compiled if it fits.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_TRAININGPLAN_H
#define TESSERA_TRANSFORMS_TRAININGPLAN_H

#include "tessera/Transforms/MeshPlan.h"
#include "tessera/Transforms/PipelinePlan.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace tessera {

/// The predicted steps the decision weighs, and what it takes.
struct PlanChoice {
  int64_t devices = 0;
  /// tess-search-sharding's plan: its mesh and predicted step seconds;
  /// unset when no mesh fits (`meshUnfit` then says why).
  std::optional<std::string> meshLayout;
  double meshSeconds = 0;
  std::string meshUnfit;
  /// The pipeline search's best plan with one stage (unset: none fits).
  std::optional<std::string> oneStageLayout;
  double oneStageSeconds = 0;
  /// The pipeline search's best plan, its stage count, and why the compiled
  /// driver cannot run it (empty: it can).
  std::string pipelineLayout;
  double pipelineSeconds = 0;
  int64_t pipelineStages = 1;
  std::string notCompiled;
  /// Why a pin leaves the mesh search out (empty: it ran) or the pipeline
  /// search out, and why the pipeline search found no plan under the pins
  /// (empty: it found one).
  std::string meshExcluded;
  std::string pipelineExcluded;
  std::string pipelineUnfit;

  /// Whether the pipeline search's plan is one the compile may take: it
  /// ran, found a plan, and the compiled driver runs it.
  bool pipelineRunnable() const {
    return pipelineExcluded.empty() && pipelineUnfit.empty() &&
           notCompiled.empty();
  }
  /// Why no plan is compiled, each search's reason (when neither is).
  std::string unfit() const;

  /// Whether the pipelined plan is taken (see the file comment).
  bool pipelined() const;
  /// tesserac --explain's "Plan choice" section.
  void print(llvm::raw_ostream &os) const;
};

/// `plan`'s layout as the choice names it: "PP 2 x DP 8 x TP 1, ZeRO-1,
/// 1f1b, 4 micro-batches".
std::string pipelineLayout(const pipeline::PipelinePlan &plan);

/// tess-search-plan's decision for a module.
struct TrainingPlanDecision {
  /// Both searches' prices and the choice between them.
  PlanChoice choice;
  /// The pipeline search's decision (tess-search-pipeline's).
  PipelinePlanDecision pipeline;
  /// The mesh search's decision (tess-search-sharding's); unset when no
  /// mesh fits.
  std::optional<MeshPlanDecision> mesh;
  /// tess-fit-memory's #tess.plan, which calibrated the mesh search, and
  /// why it offloads the optimizer state (empty: it does not).
  tess::PlanAttr fitted;
  std::string offloaded;

  bool pipelined() const { return choice.pipelined(); }
};

/// What tess-search-plan does to `module` (see its description): the
/// pipeline search and the mesh search (tess-fit-memory, then
/// tess-search-sharding choosing the mesh of `devices`, or searching the
/// pinned `mesh`), once each, and
/// `module` as the winner's pass leaves it: the mesh plan written on
/// @forward (its tess.mesh and #tess.plan), or the pipeline's #tess.plan.
/// Errors are diagnostics on the module, but for no plan that fits (no mesh
/// fits and the pipeline search's plan is not one the compiled driver
/// runs), which puts the mesh search's reason in `unfit` for the caller to
/// say in its own terms; failure either way.
mlir::FailureOr<TrainingPlanDecision>
decideTrainingPlan(mlir::ModuleOp module, SearchPlanOptions options,
                   std::string &unfit);

} // namespace tessera

#endif // TESSERA_TRANSFORMS_TRAININGPLAN_H
