//===- PlanAnnotation.h - a sharding plan written into the IR ---*- C++ -*-===//
//
// The plan the partitioner (`tess-partition-spmd`) reads, as the dialect's
// typed attributes (dialects/Tess/IR/TessPlanAttrs.td, which verifies them
// against the mesh and the values' ranks):
//   module     tess.mesh = #tess.mesh<dp = 2, tp = 2>
//              tess.plan = #tess.plan<mesh = ..., zero = 1, ...>
//   argument   tess.layout = #tess.layout<[dp, -]>   (the shard a rank is
//                                                     given)
//   op         tess.layouts = [#tess.layout<[dp, -, tp]>]  (one per result,
//                                                     as the op leaves it)
//   result     tess.layout = #tess.layout<[-, tp] partial(dp)>  (what a rank
//                                                     returns)
//              tess.zero_stage = 2  (a gradient pending over its parameter's
//                                    ZeRO axes: the plan's ZeRO stage, 1 or
//                                    2, of the parameter, which says whether
//                                    the driver keeps the whole gradient or
//                                    only its shard: runtime/train/
//                                    MeshZero.h)
//              tess.zero_axes = ["dp"]  (tess-partition-spmd: a ZeRO-1/2
//                                    gradient returned whole, the same on
//                                    every rank of these ZeRO axes, where
//                                    the plan left it pending: the driver
//                                    takes its rank's shard of it locally,
//                                    no collective)
//   argument   tess.pieces = array<i64: 1, 3>  (a parameter stored piece by
//   and result                       piece: per dim the count of equal
//                                    pieces, each rank holding its block of
//                                    each, Megatron's fused QKV; a fused
//                                    projection's weight and its gradient,
//                                    lib/Transforms/Partition/
//                                    PieceMajorRegion.h)
// A value without an attribute is replicated. The layouts are complete: the
// partitioner needs no propagation, only each op's local rule (its
// ShardingInterface, Tess/IR/TessShardingLabels.h) to see what its operands
// must be.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SHARDING_PLANANNOTATION_H
#define TESSERA_SHARDING_PLANANNOTATION_H

#include "Tess/IR/TessOps.h"
#include "tessera/Sharding/TensorLayout.h"
#include "tessera/Sharding/TrainingShardingPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace tessera::sharding {

inline constexpr llvm::StringLiteral kMeshAttrName = "tess.mesh";
inline constexpr llvm::StringLiteral kLayoutAttrName = "tess.layout";
inline constexpr llvm::StringLiteral kLayoutsAttrName = "tess.layouts";
inline constexpr llvm::StringLiteral kPlanAttrName = "tess.plan";
inline constexpr llvm::StringLiteral kZeroStageAttrName = "tess.zero_stage";
inline constexpr llvm::StringLiteral kZeroAxesAttrName = "tess.zero_axes";
inline constexpr llvm::StringLiteral kPiecesAttrName = "tess.pieces";

/// The attribute form of `mesh`, and back.
tess::MeshAttr meshAttr(mlir::MLIRContext *context,
                        const cost::DeviceMesh &mesh);
cost::DeviceMesh deviceMesh(tess::MeshAttr mesh);

/// The attribute form of `layout` on `mesh` (axes by name), and back.
/// Errors: an axis that is not one of `mesh`'s.
tess::LayoutAttr layoutAttr(mlir::MLIRContext *context,
                            const TensorLayout &layout,
                            const cost::DeviceMesh &mesh);
llvm::Expected<TensorLayout> tensorLayout(tess::LayoutAttr layout,
                                          const cost::DeviceMesh &mesh);

/// Writes `mesh` on `function`'s module (and into its tess.plan, if it has
/// one) and, for every value of `function`
/// (arguments and op results) a layout in `layouts`, and for result i of
/// the function `resultLayouts[i]` (replicated where `resultLayouts` is
/// shorter). Values missing from `layouts` are replicated; ops whose
/// results are all replicated get no attribute. Errors: a layout that does
/// not fit its value's shape (TensorLayout.h's fitsShape).
llvm::Error annotateShardingPlan(
    mlir::func::FuncOp function, const cost::DeviceMesh &mesh,
    const llvm::DenseMap<mlir::Value, TensorLayout> &layouts,
    llvm::ArrayRef<TensorLayout> resultLayouts);

/// The layout the plan gives `value` (replicated without an attribute).
/// Errors: an attribute that is no #tess.layout, an axis not of `mesh`, a
/// layout of the wrong rank.
llvm::Expected<TensorLayout> readLayout(mlir::Value value,
                                        const cost::DeviceMesh &mesh);
/// The layout the plan gives result `index` of `function`.
llvm::Expected<TensorLayout> readResultLayout(mlir::func::FuncOp function,
                                              unsigned index,
                                              const cost::DeviceMesh &mesh);

/// What `annotateFromSearchedPlan` wrote where it could not follow the
/// search's plan: one line per deviation, naming the op (or parameter), what
/// the plan asked and what the annotation does instead. Empty when the
/// partitioner runs the plan as the search priced it.
struct PlanAnnotationReport {
  std::vector<std::string> deviations;
  /// Ops of @forward the search planned (tess.parameter aside) and how
  /// many of them the step still has (the others were folded).
  size_t plannedOps = 0, matchedOps = 0;
};

/// The bridge from the search to the partitioner: writes a complete,
/// consistent annotation of `step` (the @forward_backward that
/// tess-build-training built from a @forward which tess-search-sharding
/// planned, its ops carrying their `tess.planned`, SearchedPlan.h) on the
/// module's tess.mesh, then erases the `tess.planned` wishes. Defined in
/// lib/Transforms/Partition/AnnotateFromPlan.cpp (TesseraTransforms), since
/// it decides with the partitioner's own layout rule; see that file for the
/// mapping. Errors: a module without a searched plan, a step without the
/// roles tess-build-training gives its arguments.
llvm::Expected<PlanAnnotationReport>
annotateFromSearchedPlan(mlir::func::FuncOp step);

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_PLANANNOTATION_H
