//===- ShardingProblem.h - one function's strategies and edges -*- C++ -*-===//
//
// The intra-op search's input, built from a function: a node per op with its
// strategies (ShardingStrategy.h), and an edge per use of a value with the
// resharding time for every pair of (producer strategy, consumer strategy)
// (Resharding.h). The function's arguments arrive replicated (a slice of
// them is free) and its results leave replicated, or in training the layout
// the loss reads (below): those boundary edges have a fixed side.
//
// The search minimizes, over one strategy per node, the sum of the chosen
// strategies' times plus the resharding on every edge (Alpa's objective),
// optionally subject to a per-device memory bound. buildShardingProblem
// builds it on one mesh axis; MeshSharding.h over every axis of a mesh at
// once, with ZeRO stages and repeated layers solved once.
//
// Parameter edges (training): when the producer is a tess.parameter node
// whose strategy has a `gradientLayout`, the edge's price is the forward
// move of the weight (twice under ZeRO-3: the backward gathers it again)
// plus the move of its gradient, a partial sum over the consumer's
// `gradientPartialAxes`, back into the layout the optimizer keeps it in:
// an all-reduce for plain data parallelism, a reduce-scatter under ZeRO.
// Under ZeRO-1/2 the step leaves the gradient a partial sum over the ZeRO
// axes that the driver reduce-scatters (runtime/train/MeshZero.h), but a
// weight read only by compute replicated on those axes (once, or several
// times: the step sums whole gradients into a whole one) gets its gradient
// whole on every rank, which the step returns whole and the driver slices
// for free; the all-gather of the updated weights is on the parameter's
// strategy either way.
// Runtimes coalesce gradient collectives into buckets (PyTorch DDP, FSDP,
// Tessera's gradient reducer), so parameter-state collectives are priced at
// the bucket's rate (`bucketedCollectiveTime`), not one latency per tensor;
// and a parameter read by k ops accumulates its gradient locally before the
// one synchronization, so each of its k edges carries 1/k of it (exact when
// every use leaves the gradient in the same state, e.g. tied embeddings
// under data parallelism).
//
// The backward's mirror of an edge (training): the gradient of a value that
// needs one travels from the layout its consumer read it in back to the
// layout its producer left it in (partial sums dropped: the gradient of
// every addend is the whole gradient), so a free forward slice costs an
// all-gather backward and a forward all-gather a free slice.
//
// The loss (`resultsFeedLoss`, training): the function's results are the
// logits a token-wise loss reads, and only the scalar loss leaves the step.
// A result may leave in any layout: a partial sum is all-reduced first; a
// split token dim (any dim but the last) costs the all-reduce of the scalar
// loss, a split class dim Megatron-LM's vocabulary-parallel cross-entropy
// (all-reduces of each token's max logit, target logit and sum of
// exponentials, fp32). The logits' gradient comes back in the same layout.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SHARDING_SHARDINGPROBLEM_H
#define TESSERA_SHARDING_SHARDINGPROBLEM_H

#include "tessera/Sharding/Resharding.h"
#include "tessera/Sharding/ShardingStrategy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>
#include <vector>

namespace tessera::sharding {

struct ShardingNode {
  mlir::Operation *op = nullptr;
  std::vector<ShardingStrategy> strategies;
  /// How many ops of the program this node stands for: a node of a
  /// repeated layer solved once stands for its instance in every layer
  /// (MeshSharding.h); its time and memory count that many times.
  double count = 1;
};

/// A use of a value. `producer` is absent for a function argument (which is
/// replicated), `consumer` absent for a function result (which must be
/// replicated, or with `resultsFeedLoss` is read by the loss).
struct ShardingEdge {
  mlir::Value value;
  std::optional<unsigned> producer;
  unsigned resultIndex = 0;
  std::optional<unsigned> consumer;
  unsigned operandIndex = 0;
  /// reshardTime[i][j]: seconds from the producer's strategy i to the
  /// consumer's strategy j (a fixed side has one entry).
  std::vector<std::vector<double>> reshardTime;
  /// How many uses of the program this edge stands for (see
  /// ShardingNode::count).
  double count = 1;
};

struct ShardingProblem {
  const cost::DeviceMesh *mesh = nullptr;
  const cost::Cluster *cluster = nullptr;
  unsigned axis = 0;
  std::vector<ShardingNode> nodes;
  std::vector<ShardingEdge> edges;
  /// Per device bytes the strategies' `memoryBytes` (times their node's
  /// count) may add up to; none: no bound.
  std::optional<double> memoryLimit;
  /// Training: an edge out of a tess.parameter node also carries the
  /// parameter's gradient back, and an edge of a value in `needsGradient`
  /// its gradient's mirror move (see edgeReshard).
  bool training = false;
  /// Training: values whose gradient the backward computes
  /// (valuesNeedingGradient).
  llvm::DenseSet<mlir::Value> needsGradient;
  /// The function's results feed a token-wise loss (the file comment)
  /// rather than having to leave replicated.
  bool resultsFeedLoss = false;
  /// Bytes per bucket of the coalesced parameter-state collectives; 0:
  /// each tensor is its own collective.
  double gradientBucketBytes = 0;

  /// The layout `edge`'s value has on its producer's side under `choice`.
  TensorLayout producedLayout(const ShardingEdge &edge,
                              llvm::ArrayRef<unsigned> choice) const;
  /// The layout `edge`'s consumer needs under `choice`.
  TensorLayout requiredLayout(const ShardingEdge &edge,
                              llvm::ArrayRef<unsigned> choice) const;
  /// The edge's resharding seconds under `choice`.
  double edgeTime(const ShardingEdge &edge,
                  llvm::ArrayRef<unsigned> choice) const;
  /// The collectives on `edge` under `choice`.
  ReshardPlan edgeReshard(const ShardingEdge &edge,
                          llvm::ArrayRef<unsigned> choice) const;
  /// The objective: strategy times plus edge resharding, in seconds, each
  /// times its count.
  double totalTime(llvm::ArrayRef<unsigned> choice) const;
  /// Per device bytes of the chosen strategies' `memoryBytes`, times count.
  double totalMemory(llvm::ArrayRef<unsigned> choice) const;
  /// Whether `choice`'s totalMemory is within `memoryLimit` (none: always),
  /// with a relative tolerance for the solver's rounding.
  bool fitsMemory(llvm::ArrayRef<unsigned> choice) const;
  /// The least `totalMemory` of any choice (nodes are independent in it).
  double minimumMemory() const;
};

/// The seconds of a parameter-state collective (gradient reduction, ZeRO
/// gathers) of `bytes` on `axis` when such collectives are coalesced into
/// buckets of `bucketBytes`: a tensor smaller than a bucket pays its share
/// of the bucket's time; 0 buckets: the tensor's own collective.
double bucketedCollectiveTime(const cost::DeviceMesh &mesh,
                              const cost::Cluster &cluster, unsigned axis,
                              cost::Collective collective, double bytes,
                              double bucketBytes);

/// The layout a token-wise loss reads a result left in `produced`: the
/// same, with its partial sums completed.
TensorLayout lossLayout(const TensorLayout &produced);

/// Fills `edge.reshardTime` for every pair of its ends' strategies.
void priceEdge(const ShardingProblem &problem, ShardingEdge &edge);

/// Values of `body` computed from a trainable tess.parameter: the ones whose
/// gradient the backward computes.
llvm::DenseSet<mlir::Value> valuesNeedingGradient(mlir::Block &body);

/// Builds the problem for `function` on mesh axis `axis`. `training` prices
/// forward plus backward (ShardingStrategy.h). Errors: an axis out of range,
/// a function that is not one block of region-free ops.
llvm::Expected<ShardingProblem>
buildShardingProblem(mlir::func::FuncOp function, const cost::DeviceMesh &mesh,
                     const cost::Cluster &cluster, unsigned axis,
                     bool training);

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_SHARDINGPROBLEM_H
