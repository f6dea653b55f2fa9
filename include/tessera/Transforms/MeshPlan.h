//===- MeshPlan.h - tess-search-sharding's decision ------------*- C++ -*-===//
//
// What tess-search-sharding decides for a module, for the pass and for a
// caller that reports the decision itself (tesserac --explain prints the
// plan, the calibration's estimate and the compiled rank's memory): the
// mesh (given, or chosen among the factorisations of `devices`), the
// searched plan, written on the module's @forward, and, on a mesh with a
// measured calibration, the memory of one rank's compiled program, which
// decides whether the plan fits (the search reruns under a lower limit
// when its per-op model missed).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TRANSFORMS_MESHPLAN_H
#define TESSERA_TRANSFORMS_MESHPLAN_H

#include "tessera/Analysis/StepMemory.h"
#include "tessera/Sharding/TrainingShardingPlan.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace tessera {

/// tess-search-sharding's decision for a module.
struct MeshPlanDecision {
  /// The searched plan (its mesh the given or chosen one).
  sharding::TrainingShardingPlan plan;
  /// The numbers the search was scaled to, the estimate of the unsharded
  /// step among them when measured.
  ShardingCalibration calibration;
  /// On a checked mesh: the memory of one rank's compiled program.
  std::optional<StepMemory> rank;
  /// On a checked mesh: that program's #tess.plan (the mesh joined), what
  /// the executable carries.
  tess::PlanAttr compiledPlan;
};

/// The module's #tess.plan as the compile's plan phase writes it for a
/// searched plan `plan` (its ZeRO stage) over the recomputation and offload
/// in `fitted` (tess-fit-memory's plan; none when null): no mesh, which the
/// step gains when its layouts are written.
tess::PlanAttr searchedModulePlan(mlir::MLIRContext *context,
                                  const sharding::TrainingShardingPlan *plan,
                                  tess::PlanAttr fitted);

/// Makes `module` the module `from` was (its operations, moved, and its
/// attributes): a decision searched on a copy, kept.
void adoptModule(mlir::ModuleOp module, mlir::ModuleOp from);

/// What tess-search-sharding does to `module` (see its description): the
/// plan of `options`' mesh, or of the mesh it chooses among `devices`,
/// written on @forward (the module's tess.mesh and #tess.plan with it).
/// Errors are diagnostics on the module, but for no plan that fits, which
/// leaves the module as it was and puts the reason in `unfit` (for the
/// caller to say in its own terms); failure either way.
mlir::FailureOr<MeshPlanDecision>
decideMeshPlan(mlir::ModuleOp module, const SearchShardingOptions &options,
               std::string &unfit);

} // namespace tessera

#endif // TESSERA_TRANSFORMS_MESHPLAN_H
