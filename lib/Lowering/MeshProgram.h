//===- MeshProgram.h - a partitioned step as the driver runs it -*- C++ -*-===//
//
// Internal to lib/Lowering. A training step that tess-partition-spmd made
// into one rank's program carries its plan in attributes (PlanAnnotation.h:
// the module's tess.mesh, each argument's and result's tess.layout). The
// compiled executable's ABI (program.h) fixes what the driver and the step
// agree on:
//
// - parameters and buffers are the rank's blocks, and the program's tables
//   say how each is split (tessera_tensor_split), so that the driver can cut
//   the whole weights into blocks and gather them back for checkpoints;
// - every gradient leaves in its parameter's layout (the driver's AdamW
//   updates the block it holds; a gradient laid out otherwise than its
//   parameter has no block to update), complete or a pending partial sum
//   over axes the parameter is whole on, which the driver sums once a step:
//   in a pipelined step (PipelineProgram.h, a stage mesh) the data-parallel
//   axes (tess-annotate-sharding's defer-gradient-reduction: once over the
//   f32 sums of the micro-batches instead of every micro-batch's in every
//   backward), in a step of the mesh search's plan the ZeRO axes of its
//   ZeRO-1/2 parameters (the driver reduce-scatters them and shards their
//   optimizer state, runtime/train/MeshZero.h);
// - the loss leaves replicated (every rank reports the micro-batch's loss);
// - tokens and targets arrive whole on every rank: one data loader feeds all
//   ranks the same micro-batch, and the step cuts its own block of it
//   (tess.shard_slice at the top of the step), whatever dims the plan
//   splits.
//
// prepareMeshProgram checks the first three and rewrites the step (and a
// pipelined step's stage functions) for the last before the lowering
// describes their signatures.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_LOWERING_MESHPROGRAM_H
#define TESSERA_LIB_LOWERING_MESHPROGRAM_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::lowering {

struct MeshProgram {
  /// The mesh's axes, outermost first (program.h's mesh_shape and
  /// mesh_axis_names).
  std::vector<std::string> axisNames;
  std::vector<int64_t> axisSizes;
  /// Per argument of the step (parameters and buffers; tokens and targets
  /// are whole after the rewrite): per dim the mesh axis it is split over,
  /// or -1.
  std::vector<std::vector<int32_t>> argumentSplits;
  /// Per argument: per dim its count of pieces (tess.pieces), empty when it
  /// has none.
  std::vector<std::vector<int64_t>> argumentPieces;
  /// Per parameter name, the mesh axes (a bit each, axis a as 1 << a) its
  /// gradient leaves as a pending partial sum over, or whole on (the
  /// result's tess.zero_axes); absent: complete.
  llvm::StringMap<int32_t> gradientPartialAxes;
  /// The parameters of gradientPartialAxes whose gradient the step returns
  /// whole and the same on every rank of those axes (tess.zero_axes): the
  /// driver takes its shard locally instead of reducing it.
  llvm::StringSet<> wholeGradients;
  /// Per parameter name whose gradient is pending, the plan's ZeRO stage of
  /// it (the result's tess.zero_stage: 1, or 2 when the driver keeps only
  /// the gradient's shard); absent: 1.
  llvm::StringMap<int32_t> gradientZeroStages;
};

/// std::nullopt for a module without a tess.mesh (one device). For a
/// partitioned step: checks the contract above (errors name the tensor and
/// its layout), makes tokens and targets whole (in `step` and, `pipelined`,
/// in every stage function that takes them) and returns the mesh and the
/// arguments' splits. The same for both targets: the collectives' memory
/// and streams are the runtime's business (mesh_step.h).
mlir::FailureOr<std::optional<MeshProgram>>
prepareMeshProgram(mlir::ModuleOp module, mlir::func::FuncOp step,
                   bool pipelined);

} // namespace tessera::lowering

#endif // TESSERA_LIB_LOWERING_MESHPROGRAM_H
