//===- Resharding.cpp - pricing a layout change axis by axis
//---------------===//
//
// Two passes over the axes: first the axes that end replicated, partial or
// unchanged (they only give dims up), then the axes that end splitting a dim
// they did not split before. The order matters on a 2-D mesh: a dim can be
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

ReshardPlan sharding::planReshard(const TensorLayout &from,
                                  const TensorLayout &to,
                                  llvm::ArrayRef<int64_t> shape,
                                  double elementBytes,
                                  const cost::DeviceMesh &mesh,
                                  const cost::Cluster &cluster) {
  ReshardPlanner planner(from, shape, elementBytes, mesh, cluster);
  auto acquiresDim = [&](unsigned axis) {
    int toDim = to.dimSplitOver(axis);
    return toDim != kUnsplit && toDim != from.dimSplitOver(axis);
  };
  for (unsigned axis = 0, e = mesh.axes.size(); axis < e; ++axis)
    if (!acquiresDim(axis))
      planner.moveAxis(axis, to);
  for (unsigned axis = 0, e = mesh.axes.size(); axis < e; ++axis)
    if (acquiresDim(axis))
      planner.moveAxis(axis, to);
  return planner.plan;
}
