//===- ShardingProblem.h - one function's strategies and edges -*- C++ -*-===//
//
// The intra-op search's input, built from a function: a node per op with its
// strategies (ShardingStrategy.h), and an edge per use of a value with the
// resharding time for every pair of (producer strategy, consumer strategy)
// (Resharding.h). The function's arguments arrive replicated (a slice of
// them is free) and its results must leave replicated: those boundary edges
// have a fixed side.
//
// The search minimizes, over one strategy per node, the sum of the chosen
// strategies' times plus the resharding on every edge: Alpa's objective on
// one mesh axis, without its memory bound.
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
};

/// A use of a value. `producer` is absent for a function argument (which is
/// replicated), `consumer` absent for a function result (which must be
/// replicated).
struct ShardingEdge {
  mlir::Value value;
  std::optional<unsigned> producer;
  unsigned resultIndex = 0;
  std::optional<unsigned> consumer;
  unsigned operandIndex = 0;
  /// reshardTime[i][j]: seconds from the producer's strategy i to the
  /// consumer's strategy j (a fixed side has one entry).
  std::vector<std::vector<double>> reshardTime;
};

struct ShardingProblem {
  const cost::DeviceMesh *mesh = nullptr;
  const cost::Cluster *cluster = nullptr;
  unsigned axis = 0;
  std::vector<ShardingNode> nodes;
  std::vector<ShardingEdge> edges;

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
  /// The objective: strategy times plus edge resharding, in seconds.
  double totalTime(llvm::ArrayRef<unsigned> choice) const;
};

/// Builds the problem for `function` on mesh axis `axis`. `training` prices
/// forward plus backward (ShardingStrategy.h). Errors: an axis out of range,
/// a function that is not one block of region-free ops.
llvm::Expected<ShardingProblem>
buildShardingProblem(mlir::func::FuncOp function, const cost::DeviceMesh &mesh,
                     const cost::Cluster &cluster, unsigned axis,
                     bool training);

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_SHARDINGPROBLEM_H
