//===- Resharding.cpp - pricing a layout change axis by axis
//---------------===//
//
// Three passes over the axes: first the partial sums that end split over a
// dim no axis splits yet (reduce-scattered, so that what follows moves
// their block), then the axes that end replicated, partial or unchanged
// (they only give dims up), then the axes that end splitting a dim they did
// not split before. The order matters on a 2-D mesh: a dim can be
// split over one axis only, so an axis moving onto a dim must wait for the
// axis leaving it. If two axes swap dims, the one that still holds the slot
// is gathered first (a valid, slightly pessimistic, price).
//
//===----------------------------------------------------------------------===//

#include "tessera/Sharding/Resharding.h"

#include "llvm/ADT/STLExtras.h"

using namespace tessera;
using namespace tessera::sharding;

namespace {

class ReshardPlanner {
public:
  ReshardPlanner(const TensorLayout &from, llvm::ArrayRef<int64_t> shape,
                 double elementBytes, const cost::DeviceMesh &mesh,
                 const cost::Cluster &cluster)
      : current(from), shape(shape), elementBytes(elementBytes), mesh(mesh),
        cluster(cluster) {}

  /// Moves axis `axis` from its current state to the one in `to`.
  void moveAxis(unsigned axis, const TensorLayout &to) {
    int fromDim = current.dimSplitOver(axis);
    int toDim = to.dimSplitOver(axis);
    bool fromPartial = current.isPartialOver(axis);
    bool toPartial = to.isPartialOver(axis);

    if (fromPartial && !toPartial) {
      llvm::erase(current.partialAxes, axis);
      if (toDim == kUnsplit) {
        addStep(axis, cost::Collective::AllReduce, localBytes());
        return;
      }
      freeSlot(toDim, axis);
      addStep(axis, cost::Collective::ReduceScatter, localBytes());
      current.dimAxes[toDim] = static_cast<int>(axis);
      return;
    }
    if (toPartial) {
      // Zeros on all but one device of the group (a split dim is padded with
      // zeros back to the whole tensor): local and free.
      if (!fromPartial) {
        if (fromDim != kUnsplit)
          current.dimAxes[fromDim] = kUnsplit;
        current.partialAxes.push_back(axis);
        llvm::sort(current.partialAxes);
      }
      return;
    }
    if (fromDim == toDim)
      return;
    if (toDim == kUnsplit) {
      gather(axis);
      return;
    }
    freeSlot(toDim, axis);
    if (fromDim != kUnsplit) {
      addStep(axis, cost::Collective::AllToAll, localBytes());
      current.dimAxes[fromDim] = kUnsplit;
    }
    // From replicated, each device keeps its slice: free.
    current.dimAxes[toDim] = static_cast<int>(axis);
  }

  ReshardPlan plan;

private:
  double localBytes() const {
    return current.localElements(shape, mesh) * elementBytes;
  }

  void addStep(unsigned axis, cost::Collective collective, double bytes) {
    ReshardStep step;
    step.axis = axis;
    step.collective = collective;
    step.bytes = bytes;
    step.time =
        cost::axisCollectiveTime(mesh, cluster, axis, collective, bytes);
    plan.time += step.time;
    plan.steps.push_back(step);
  }

  /// All-gathers the dim `axis` splits, leaving it replicated on `axis`.
  void gather(unsigned axis) {
    int dim = current.dimSplitOver(axis);
    addStep(axis, cost::Collective::AllGather,
            localBytes() * static_cast<double>(mesh.axes[axis].size));
    current.dimAxes[dim] = kUnsplit;
  }

  /// Makes sure no axis other than `axis` splits `dim`.
  void freeSlot(int dim, unsigned axis) {
    int occupant = current.dimAxes[dim];
    if (occupant != kUnsplit && occupant != static_cast<int>(axis))
      gather(static_cast<unsigned>(occupant));
  }

  TensorLayout current;
  llvm::ArrayRef<int64_t> shape;
  double elementBytes;
  const cost::DeviceMesh &mesh;
  const cost::Cluster &cluster;
};

} // namespace

/// The axis by axis plan (the file comment).
static ReshardPlan planAxisByAxis(const TensorLayout &from,
                                  const TensorLayout &to,
                                  llvm::ArrayRef<int64_t> shape,
                                  double elementBytes,
                                  const cost::DeviceMesh &mesh,
                                  const cost::Cluster &cluster) {
  ReshardPlanner planner(from, shape, elementBytes, mesh, cluster);
  // A partial sum that ends split over a free dim is reduce-scattered
  // first, so the other axes' collectives move its block (the partition's
  // order, Transforms/Partition/Reshard.cpp).
  auto scattersFirst = [&](unsigned axis) {
    int toDim = to.dimSplitOver(axis);
    return from.isPartialOver(axis) && !to.isPartialOver(axis) &&
           toDim != kUnsplit && from.dimAxes[toDim] == kUnsplit;
  };
  auto acquiresDim = [&](unsigned axis) {
    int toDim = to.dimSplitOver(axis);
    return toDim != kUnsplit && toDim != from.dimSplitOver(axis);
  };
  unsigned axes = mesh.axes.size();
  for (unsigned axis = 0; axis < axes; ++axis)
    if (scattersFirst(axis))
      planner.moveAxis(axis, to);
  for (unsigned axis = 0; axis < axes; ++axis)
    if (!scattersFirst(axis) && !acquiresDim(axis))
      planner.moveAxis(axis, to);
  for (unsigned axis = 0; axis < axes; ++axis)
    if (!scattersFirst(axis) && acquiresDim(axis))
      planner.moveAxis(axis, to);
  return planner.plan;
}

/// Seconds per byte of a large all-reduce on `axis`: how slow its link is.
static double allReduceSecondsPerByte(const cost::DeviceMesh &mesh,
                                      const cost::Cluster &cluster,
                                      unsigned axis) {
  constexpr double kProbeBytes = 1024.0 * 1024.0 * 1024.0;
  return cost::axisCollectiveTime(mesh, cluster, axis,
                                  cost::Collective::AllReduce, kProbeBytes) /
         kProbeBytes;
}

ReshardPlan sharding::planReshard(const TensorLayout &from,
                                  const TensorLayout &to,
                                  llvm::ArrayRef<int64_t> shape,
                                  double elementBytes,
                                  const cost::DeviceMesh &mesh,
                                  const cost::Cluster &cluster) {
  ReshardPlan direct =
      planAxisByAxis(from, to, shape, elementBytes, mesh, cluster);
  // A sum over several axes that ends whole can be reduced hierarchically
  // (as NCCL does across nodes): reduce-scatter over the faster axes, all-
  // reduce the shard over the slowest, all-gather over the faster ones.
  llvm::SmallVector<unsigned, 2> reduced;
  for (unsigned axis : from.partialAxes)
    if (!to.isPartialOver(axis) && to.dimSplitOver(axis) == kUnsplit &&
        from.dimSplitOver(axis) == kUnsplit)
      reduced.push_back(axis);
  if (reduced.size() < 2)
    return direct;
  unsigned slowest = *llvm::max_element(reduced, [&](unsigned a, unsigned b) {
    return allReduceSecondsPerByte(mesh, cluster, a) <
           allReduceSecondsPerByte(mesh, cluster, b);
  });
  TensorLayout middle = from;
  for (unsigned axis : reduced) {
    if (axis == slowest)
      continue;
    for (unsigned dim = 0; dim < middle.rank(); ++dim) {
      if (middle.dimAxes[dim] != kUnsplit || to.dimAxes[dim] != kUnsplit)
        continue;
      TensorLayout candidate = middle;
      candidate.dimAxes[dim] = static_cast<int>(axis);
      llvm::erase(candidate.partialAxes, axis);
      if (fitsShape(candidate, shape, mesh)) {
        middle = candidate;
        break;
      }
    }
  }
  if (middle.partialAxes.size() != 1)
    return direct;
  ReshardPlan hierarchical =
      planAxisByAxis(from, middle, shape, elementBytes, mesh, cluster);
  ReshardPlan rest =
      planAxisByAxis(middle, to, shape, elementBytes, mesh, cluster);
  for (const ReshardStep &step : rest.steps) {
    hierarchical.steps.push_back(step);
    hierarchical.time += step.time;
  }
  return hierarchical.time < direct.time ? hierarchical : direct;
}
