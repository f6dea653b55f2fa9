//===- TrainingShardingPlan.h - the chosen plan, for the partitioner -*- C++ -*-===//
//
// What the whole-mesh search (MeshSharding.h) decides for a forward function
// of `tess` ops, in the form the SPMD partitioning rewrite consumes. This
// struct is an interface between helpers: keep it stable, extend it only by
// adding fields.
//
//   mesh            the device mesh the plan is for (axes, sizes, links)
//   ops             every op of the function but the terminator, in program
//                   order: its strategy and the layouts of its operands (as
//                   the op needs them) and results (as it leaves them)
//   parameters      every tess.parameter: the layout of its compute weight
//                   during the step, of its optimizer state, master weight
//                   and synchronized gradient, and its ZeRO stage
//   transfers       every use whose producer leaves a layout other than the
//                   one its consumer needs: the collectives between them
//                   (Resharding.h), forward direction; for a parameter use
//                   also the gradient's way back
//   resultLayouts   per result of the function, the layout it leaves the
//                   function in: in training the layout the loss reads the
//                   logits in (a split token dim: each device's tokens; a
//                   split class dim: vocabulary-parallel cross-entropy),
//                   never a partial sum
//   layoutOf(v)     a value's layout as its producer leaves it (function
//                   arguments: replicated)
//
// Semantics the partitioner must follow:
//  - A layout (TensorLayout.h) splits a dim in equal contiguous blocks over
//    one mesh axis; a partial sum over an axis is completed by an
//    all-reduce (or a reduce-scatter into a split).
//  - tess.split with "split dim D" on its own split axis D reads its input
//    piece by piece: each device holds its 1/n of every piece. The
//    column-parallel producer's weight (and bias) columns are then laid out
//    piece-major when partitioned (Megatron-LM's fused QKV).
//  - ZeRO (stages over the axes in `zeroAxes`, those the parameter is
//    replicated on): 0 all-reduces gradients; 1 reduce-scatters them into
//    `stateLayout`, updates the shard and all-gathers the compute weight;
//    2 as 1 and keeps only the gradient shard; 3 keeps the compute weight
//    in `computeLayout` (sharded) and all-gathers it before its forward and
//    backward uses.
//  - Gradients of a parameter read whole by an op that divides its work on
//    an axis are partial sums over that axis (ShardingStrategy.h).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SHARDING_TRAININGSHARDINGPLAN_H
#define TESSERA_SHARDING_TRAININGSHARDINGPLAN_H

#include "tessera/CostModel/DeviceMesh.h"
#include "tessera/Sharding/Resharding.h"
#include "tessera/Sharding/TensorLayout.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

#include <array>
#include <string>
#include <vector>

namespace tessera::sharding {

struct OpSharding {
  mlir::Operation *op = nullptr;
  /// "replicated", or per split axis "dp: data-parallel, tp: column-parallel".
  std::string strategy;
  llvm::SmallVector<TensorLayout, 3> operandLayouts;
  llvm::SmallVector<TensorLayout, 1> resultLayouts;
  /// The layer the op belongs to ("transformer.h.3"), or "".
  std::string layer;
};

struct ParameterSharding {
  mlir::Operation *op = nullptr;
  std::string name;
  /// The compute weight during the step (under ZeRO-3 sharded over
  /// `zeroAxes` too).
  TensorLayout computeLayout;
  /// Master weight, AdamW moments and the synchronized gradient (ZeRO 1-3:
  /// sharded over `zeroAxes`).
  TensorLayout stateLayout;
  int zeroStage = 0;
  llvm::SmallVector<unsigned, 2> zeroAxes;
};

struct PlannedTransfer {
  mlir::Value value;
  /// Null for a use by the function's terminator (then `to` is the
  /// result's entry of `resultLayouts`, and `collectives` include the
  /// loss's own all-reduces).
  mlir::Operation *consumer = nullptr;
  unsigned operandIndex = 0;
  TensorLayout from, to;
  ReshardPlan collectives;
};

/// Per device, per step.
struct PlanPrediction {
  double computeSeconds = 0;   // forward + backward kernels
  double optimizerSeconds = 0; // AdamW on the local shard
  /// Indexed by cost::Collective: seconds and bytes (NCCL's buffer
  /// convention) of each kind of collective.
  std::array<double, 5> collectiveSeconds{};
  std::array<double, 5> collectiveBytes{};
  double masterWeights = 0, computeWeights = 0, gradients = 0,
         optimizerState = 0, activations = 0, inputsAndBuffers = 0;
  /// The arena's temporaries at its peak on top of the kept activations:
  /// the larger of the layers' (the one-device step's, in the plan's share)
  /// and the head's (its rank's logits, at most a block, the loss's f32
  /// blocks when they are vocabulary-parallel, and the weights the head
  /// gathers). The search's memory bound holds the layers' share only.
  double transientBytes = 0, boundTransientBytes = 0;

  double communicationSeconds() const;
  double stepSeconds() const {
    return computeSeconds + optimizerSeconds + communicationSeconds();
  }
  double memoryBytes() const {
    return masterWeights + computeWeights + gradients + optimizerState +
           activations + transientBytes + inputsAndBuffers;
  }
  /// What the search's memory bound held of memoryBytes().
  double boundBytes() const {
    return memoryBytes() - transientBytes + boundTransientBytes;
  }
};

/// How the plan was found.
struct PlanSearchInfo {
  /// "ilp" or "greedy".
  std::string method;
  bool provenOptimal = false;
  double searchSeconds = 0;
  /// Nodes and edges of the problem actually solved (after layer reuse),
  /// and ops of the whole function.
  size_t solvedNodes = 0, solvedEdges = 0, functionOps = 0;
  /// "transformer.h.0-23" per run of identical layers solved once, with
  /// its length.
  std::vector<std::pair<std::string, size_t>> reusedLayers;
  /// On a mesh whose plans are checked against the rank's compiled program
  /// (tess-search-sharding): each search's memory bound and the compiled
  /// rank's bytes for its plan, in order, when there was more than one.
  struct MemoryCheck {
    double boundBytes = 0, compiledBytes = 0;
  };
  std::vector<MemoryCheck> memoryChecks;
};

struct TrainingShardingPlan {
  cost::DeviceMesh mesh;
  std::vector<OpSharding> ops;
  std::vector<ParameterSharding> parameters;
  std::vector<PlannedTransfer> transfers;
  /// One per function result (see the file comment).
  std::vector<TensorLayout> resultLayouts;
  /// The ZeRO stage every trainable parameter has, or -1 when they differ.
  int zeroStage = 0;
  PlanPrediction predicted;
  PlanSearchInfo search;

  /// The entry of `op` in `ops`, or null.
  const OpSharding *find(mlir::Operation *op) const;
  /// `value`'s layout as its producer leaves it.
  TensorLayout layoutOf(mlir::Value value) const;

  llvm::DenseMap<mlir::Operation *, unsigned> opIndex;
};

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_TRAININGSHARDINGPLAN_H
