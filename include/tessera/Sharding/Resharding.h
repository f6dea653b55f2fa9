//===- Resharding.h - the collectives that turn one layout into another -*- C++
//-*-===//
//
// When a producer leaves a tensor in one layout and a consumer needs another,
// the partitioned program inserts collectives between them. Mesh axes are
// independent, so the change is planned axis by axis; on each axis the
// tensor is replicated (R), split on a dim (S(d)) or a partial sum (P):
//
//   P    -> R     all-reduce of the local tensor
//   P    -> S(d)  reduce-scatter of the local tensor
//   S(d) -> R     all-gather (buffer: the gathered tensor)
//   S(d) -> S(e)  all-to-all of the local tensor
//   R    -> S(d)  free: each device keeps its slice
//   R, S -> P     free: one device keeps the value (or its slice, zero
//                 padded) and the others hold zeros, which sum to it
//
// Times come from the α-β model of the axis's link (lib/CostModel). Axes are
// handled in index order and each step sees the tensor as the earlier steps
// left it, so a gather on one axis is priced at the size the other axes'
// splits leave. A sum over several axes that ends whole takes the cheaper of
// that and the hierarchical all-reduce (reduce-scatter over the faster axes,
// all-reduce of the shard over the slowest, all-gather back).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SHARDING_RESHARDING_H
#define TESSERA_SHARDING_RESHARDING_H

#include "tessera/CostModel/Cluster.h"
#include "tessera/CostModel/Collective.h"
#include "tessera/CostModel/DeviceMesh.h"
#include "tessera/Sharding/TensorLayout.h"

namespace tessera::sharding {

struct ReshardStep {
  unsigned axis = 0;
  cost::Collective collective = cost::Collective::AllReduce;
  /// The collective's buffer in NCCL's convention (Collective.h), per device
  /// group.
  double bytes = 0;
  double time = 0;
};

struct ReshardPlan {
  llvm::SmallVector<ReshardStep, 2> steps;
  /// Seconds, the sum of the steps.
  double time = 0;
};

/// The collectives taking a tensor of `shape` with `elementBytes`-byte
/// elements from `from` to `to`. Both layouts must have the tensor's rank.
ReshardPlan planReshard(const TensorLayout &from, const TensorLayout &to,
                        llvm::ArrayRef<int64_t> shape, double elementBytes,
                        const cost::DeviceMesh &mesh,
                        const cost::Cluster &cluster);

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_RESHARDING_H
