//===- DeviceMesh.h - a named n-D grid of devices over a cluster -*- C++ -*-===//
//
// `--mesh 2x4` or `--mesh dp=2,tp=4`: the devices a program runs on, laid
// out as a grid whose axes the sharding search assigns tensor dims to. Unnamed
// axes get the conventional names, outermost first: `dp` for one axis,
// `dp, tp` for two, `pp, dp, tp` for three.
//
// Devices are numbered node by node (device d lives on node d / devices per
// node) and the grid is row-major over them: the last axis varies fastest.
// So with 8 devices a node, `dp=2,tp=4` keeps each tensor-parallel group of 4
// inside a node (on NVLink) and `dp=4,tp=8` on 32 devices puts `dp` across
// nodes (on InfiniBand). placeOnCluster works out which link each axis uses.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_DEVICEMESH_H
#define TESSERA_COSTMODEL_DEVICEMESH_H

#include "tessera/CostModel/Cluster.h"
#include "tessera/CostModel/GroupCollective.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <string>

namespace tessera::cost {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
  /// Distance, in device numbers, between neighbours along this axis: the
  /// product of the sizes of the axes after it.
  int64_t stride = 1;
  /// Set by placeOnCluster: the link this axis's collectives use.
  LinkLevel level = LinkLevel::IntraNode;
};

struct DeviceMesh {
  llvm::SmallVector<MeshAxis, 3> axes;

  int64_t deviceCount() const;
  /// "dp=2,tp=4" (or "1 device" for the empty mesh).
  std::string describe() const;
  /// The index of the axis named `name`, or -1.
  int axisIndex(llvm::StringRef name) const;
};

/// Parses `2x4`, `8` or `dp=2,tp=4`. An empty spec is one device (no axes).
llvm::Expected<DeviceMesh> parseMesh(llvm::StringRef spec);

/// Checks that `mesh` fits `cluster` and records each axis's link level:
/// it uses at most the cluster's devices, and when it spans more than one
/// node it uses whole nodes. An axis whose groups stay inside one node talks
/// over the intra-node link; one whose groups cross nodes over the
/// inter-node link (which the cluster must have). An axis that is partly
/// inside and partly across nodes (e.g. 16 devices with stride 1 on nodes of
/// 8) is an inter-node axis: its ring crosses nodes (axisCollectiveTime
/// prices its hops on both links, GroupCollective.h).
llvm::Error placeOnCluster(DeviceMesh &mesh, const Cluster &cluster);

/// How one group of the axis `axis` lies on the nodes (all its groups alike):
/// one node for an intra-node axis, else stridedGroup of its size and stride.
DeviceGroup axisGroup(const DeviceMesh &mesh, const Cluster &cluster,
                      unsigned axis);

/// Seconds for `collective` over `bytes` among the devices of one group of
/// the axis `axis` (all its groups run in parallel on disjoint links):
/// groupCollectiveTime of its axisGroup, the price the pipeline search gives
/// the same group.
double axisCollectiveTime(const DeviceMesh &mesh, const Cluster &cluster,
                          unsigned axis, Collective collective, double bytes);

/// Seconds to all-reduce `bytes` over every device of the mesh: one
/// collective over all of them, as DDP's gradient all-reduce is one NCCL
/// call on one communicator (groupCollectiveTime: a ring over the nodes'
/// adapters, not reduce-scatter / all-reduce / all-gather axis by axis,
/// which NCCL does not do). 0 on one device.
double meshAllReduceTime(const DeviceMesh &mesh, const Cluster &cluster,
                         double bytes);

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_DEVICEMESH_H
