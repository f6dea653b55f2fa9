//===- SearchedPlan.h - the search's plan as IR on the forward --*- C++ -*-===//
//
// What the whole-mesh search (MeshSharding.h) decided, written where it was
// decided: on the forward function's own ops, by `tess-search-sharding`
// before the training step is built. tess-build-training clones each forward
// op into @forward_backward with its attributes, so the step's copy of an op
// carries its plan by construction: nothing has to be matched back by name
// or shape, and an op that canonicalization folds away simply has no plan
// (its replacement follows the partitioner's propagation).
//
//   module      tess.mesh = #tess.mesh<dp = 2, tp = 2>
//               tess.plan = #tess.plan<mesh = ..., zero = 1>
//   op          tess.planned = #tess.planned<strategy = "dp: data-parallel",
//                   layer = "transformer.h.0",
//                   operands = [#tess.layout<[dp, -]>, ...],
//                   results = [#tess.layout<[dp, -]>]>
//   parameter   tess.planned = #tess.planned<strategy = ...,
//                   results = [compute layout], state = #tess.layout<...>,
//                   zero = 1, zero_axes = [dp]>
//   result i    tess.planned = #tess.layout<[dp, -, -]>   (on @forward: the
//                               layout the loss reads the logits in)
//
// #tess.planned is a dialect attribute (TessPlanAttrs.td): its form, ZeRO
// stage and axes, layout counts and mesh axes are verified with the IR.
//
// `tess.planned` is the search's wish, not yet the partitioner's input: a
// wish may not fit its value (which `tess.layouts`' verifier would reject)
// or ask for what the partitioner cannot do (a split read piece by piece
// whose region is not piece-major, PieceMajorRegion.h). The shard
// phase turns it into PlanAnnotation.h's complete, verified layouts.
//
// A plan of one device writes the module's #tess.plan only: every layout
// is replicated.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SHARDING_SEARCHEDPLAN_H
#define TESSERA_SHARDING_SEARCHEDPLAN_H

#include "tessera/Sharding/TrainingShardingPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace tessera::sharding {

inline constexpr llvm::StringLiteral kPlannedAttrName = "tess.planned";

/// Writes `plan`, which the search found for `forward` (its ops are
/// forward's), as the attributes above, replacing any earlier plan but the
/// #tess.plan's recomputation and offload, which tess-fit-memory decided.
void writeSearchedPlan(mlir::func::FuncOp forward,
                       const TrainingShardingPlan &plan);

/// One op's `tess.planned`, read back on `mesh`.
struct PlannedOp {
  std::string strategy;
  std::string layer;
  llvm::SmallVector<TensorLayout, 3> operands;
  llvm::SmallVector<TensorLayout, 1> results;
  /// A parameter's optimizer state layout, ZeRO stage and the axes its
  /// stage shards over.
  std::optional<TensorLayout> state;
  int zeroStage = 0;
  llvm::SmallVector<unsigned, 2> zeroAxes;
};

/// `op`'s plan: nullopt without `tess.planned`. Errors: an attribute that is
/// not a #tess.planned, a layout naming an axis `mesh` has not.
llvm::Expected<std::optional<PlannedOp>>
readPlannedOp(mlir::Operation *op, const cost::DeviceMesh &mesh);

/// The layout the plan says the loss reads result `index` of `forward` in
/// (replicated without one).
llvm::Expected<TensorLayout> readPlannedResult(mlir::func::FuncOp forward,
                                               unsigned index,
                                               const cost::DeviceMesh &mesh);

/// Removes every `tess.planned` of `function` (its ops' and results').
void erasePlannedAttributes(mlir::func::FuncOp function);

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_SEARCHEDPLAN_H
