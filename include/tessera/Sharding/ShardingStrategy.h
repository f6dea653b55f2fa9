//===- ShardingStrategy.h - the ways one op can run on a mesh axis -*- C++
//-*-===//
//
// For one op and one mesh axis, the strategies the intra-op search chooses
// among (Alpa's per-op strategy list): the layout each operand must arrive in,
// the layout each result leaves in, the op's compute time per device and the
// communication the strategy itself causes. Moving a value between the
// layout its producer leaves and the one its consumer needs is priced on the
// edge (Resharding.h), not here.
//
// The strategies, on an axis of n devices: replicated, then each split the
// op names in its sharding labels (Tess/IR/TessShardingLabels.h, the tess
// ShardingInterface), in its order: every dim with the split's label split,
// a result it is summed into a partial sum (and an operand added to that
// sum: a bias), plus "partial sum" through the views that pass one on. So
// the search offers exactly the layouts the partition rewrite builds from
// the same labels:
//   linear     column-parallel (weight split on `out`, result split on its
//              last dim); row-parallel (input and weight split on `in`,
//              result a partial sum, the bias added on one device, i.e.
//              needed as a partial sum); data-parallel (input and result
//              split on dim 0, weight replicated)
//   matmul     split M, N, K (result a partial sum), or a batch dim both
//              operands have
//   elementwise, broadcast
//              split on any result dim, operands following it (a broadcast
//              operand dim stays whole)
//   layer_norm, rms_norm, softmax, rotary
//              split on a dim that is not normalized (rotary: batch, heads)
//   attention  split on batch; split on heads (with grouped K/V, the K/V
//              head count must divide by n too, so every device holds whole
//              groups); with dropout on batch only (each rank draws its
//              block of the stream, stream_axis)
//   dropout    with a rate: split on dim 0 only (the same)
//   embedding  vocabulary-parallel (table split on rows, result a partial
//              sum: rows a device lacks contribute zeros; the work is not
//              divided); split on the hidden dim; split on the token batch
//   reshape, transpose
//              a split dim that maps to one result dim (a reshape: the
//              outermost dim of a group of equal products); a partial sum
//              passes through (both are linear)
//   split      any dim, the split axis included (each device holds 1/n of
//              every piece)
//   others     replicated (a conservative fallback: always valid)
// A split strategy needs every split dim divisible by n.
//
// Times: the op's roofline time from lib/CostModel divided by n when the work
// is divided. For training, forward plus backward is 3x the forward (a
// backward does the two products of a forward one), and an operand that the
// strategy reads replicated while dividing the work gets a partial gradient
// on every device, which the backward all-reduces: for a weight that is data
// parallelism's gradient all-reduce, for a column-parallel input Megatron's
// `f` all-reduce. Only operands that need a gradient (computed from a
// trainable tess.parameter) count.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SHARDING_SHARDINGSTRATEGY_H
#define TESSERA_SHARDING_SHARDINGSTRATEGY_H

#include "tessera/CostModel/Cluster.h"
#include "tessera/CostModel/DeviceMesh.h"
#include "tessera/Sharding/Resharding.h"
#include "tessera/Sharding/TensorLayout.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::sharding {

struct ShardingStrategy {
  /// What reports print: "replicated", "column-parallel", "split dim 0", ...
  std::string name;
  /// One per operand of the op, one per result.
  llvm::SmallVector<TensorLayout, 3> operandLayouts;
  llvm::SmallVector<TensorLayout, 1> resultLayouts;
  /// Seconds per device.
  double computeTime = 0;
  /// Seconds of collectives the strategy itself causes (training only: the
  /// all-reduce of partial gradients).
  double communicationTime = 0;

  /// Training only, one per operand: a bit per mesh axis over which the
  /// operand's gradient comes out of the backward as a partial sum (the
  /// strategy divides the work on that axis while reading the operand
  /// whole). `communicationTime` includes the all-reduce of each such
  /// operand; a whole-mesh search prices a parameter's instead with its
  /// ZeRO stage (MeshSharding.h) and uses these bits.
  llvm::SmallVector<unsigned, 3> gradientPartialAxes;
  /// The part of `communicationTime` spent on the gradients of operands
  /// that are tess.parameter results, by operand (0 for the others).
  llvm::SmallVector<double, 3> parameterGradientTime;
  /// Per device bytes this choice keeps for the step, and the ZeRO stage,
  /// set by the whole-mesh search (MeshSharding.h): activations kept for
  /// the backward for an op, the training state for a parameter.
  double memoryBytes = 0;
  /// Parameters only: the ZeRO stage (0-3) over the axes the parameter is
  /// replicated on; -1 for ops.
  int zeroStage = -1;
  /// Parameters only: the layout the optimizer step reads the gradient in
  /// (the master weights' and moments' layout); the gradient's move into it
  /// is priced on the parameter's edges (ShardingProblem.h).
  std::optional<TensorLayout> gradientLayout;
  /// Parameters only: the mesh axes ZeRO shards the state over.
  llvm::SmallVector<unsigned, 2> zeroAxes;
  /// The collectives behind `communicationTime` when a whole-mesh search
  /// built the strategy (for reports); empty otherwise.
  llvm::SmallVector<ReshardStep, 2> collectives;
  /// Parameters only: the ZeRO stage's byte split, per device.
  struct ParameterBytes {
    double masterWeights = 0, computeWeights = 0, gradients = 0,
           optimizerState = 0;
  } parameterBytes;

  double time() const { return computeTime + communicationTime; }
};

struct StrategyContext {
  const cost::DeviceMesh *mesh = nullptr;
  const cost::Cluster *cluster = nullptr;
  /// The mesh axis the strategies split over.
  unsigned axis = 0;
  /// Price forward plus backward (see the file comment) rather than the
  /// forward alone.
  bool training = false;
  /// Values that need a gradient; may be null (then none do).
  const llvm::DenseSet<mlir::Value> *needsGradient = nullptr;
};

/// The strategies of `op`; never empty (the replicated one is always first).
/// An op with an operand or result that is not a statically shaped tensor
/// gets only the replicated strategy.
std::vector<ShardingStrategy>
enumerateStrategies(mlir::Operation *op, const StrategyContext &context);

/// The bytes of a statically shaped tensor value (0 for anything else).
double tensorBytes(mlir::Value value);

/// The size of one element of a tensor value, in bytes (i1 takes one).
double elementBytes(mlir::Value value);

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_SHARDINGSTRATEGY_H
