//===- GroupCollective.h - a collective over a group of devices -*- C++ -*-===//
//
// The one price of a collective over a group of devices, inside a node or
// across nodes, that both searches use: the mesh search for a mesh axis's
// groups (axisCollectiveTime, DeviceMesh.h) and the pipeline search for a
// stage's data-parallel replicas (MegatronStageOracle.cpp).
//
// Inside one node the group's collective runs on the intra-node link. Across
// nodes it is priced as NCCL 2.x runs it for large messages with one network
// adapter per device, which is what a cluster file describes
// (`links.inter_node.bandwidth` is the bus bandwidth of one device's adapter,
// README.md "Cluster files"; the built-ins are HGX/DGX nodes with one NIC a
// GPU):
//
// - All-reduce, all-gather, reduce-scatter: a flat ring over every device of
//   the group (NCCL has no hierarchical reduce-scatter / inter-node
//   all-reduce / all-gather; NVIDIA/nccl#569). Its order visits a node's
//   devices one after the other, so each ring crosses each node boundary
//   once, and NCCL runs one ring per channel with the channels spread over
//   the node's adapters: with k devices of the group on a node, k adapters
//   carry 1/k of the ring's bytes each, in parallel (#569 measures this: 8
//   ranks over 8 nodes 363 ms, over 2 nodes of 4 with 4 NICs 132 ms). Every
//   hop of a ring moves the same bytes, bus factor of n = all the group's
//   devices, and a ring is paced by its slowest hop:
//
//     time = max(inter(collective, bytes / k, n), intra(collective, bytes, n))
//
//   (the intra-node term only where k > 1).
// - All-to-all: point to point, each device sending to every other; of its
//   (n - 1)/n of the buffer, (n - k)/n leaves the node over its own adapter
//   and (k - 1)/n stays on the intra-node link, at the same time.
// - Send/receive: one pair, on the link between their nodes.
//
// Not modelled: NCCL's tree (it can beat the ring on two nodes with fewer
// adapters than devices, nccl-tests#196, which a cluster file cannot say),
// NVLink SHARP and CollNet. The two-level price the pipeline search used to
// give a data-parallel group across nodes (reduce-scatter inside the node,
// all-reduce of 1/k across nodes, all-gather back) moves 2(N - 1)/N of the
// bytes over each adapter where the ring moves 2(kN - 1)/(kN): on 2 nodes of
// 4, 1 against 1.75, an under-price NCCL does not reach; the mesh search's
// flat ring on one adapter (k = 1 always) over-priced the same group k times.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_GROUPCOLLECTIVE_H
#define TESSERA_COSTMODEL_GROUPCOLLECTIVE_H

#include "tessera/CostModel/Cluster.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>

namespace tessera::cost {

/// A group of devices one collective runs over: `devices` of them spread
/// evenly over `nodes` nodes, devices / nodes on each. Every group of a mesh
/// axis (or every replica group of a stage) has the same shape and they run
/// at once on disjoint devices and adapters.
struct DeviceGroup {
  int64_t devices = 1;
  int64_t nodes = 1;

  int64_t devicesPerNode() const { return nodes > 0 ? devices / nodes : 0; }
};

/// The shape of the groups of `size` devices `stride` apart, each inside an
/// aligned block of `size * stride` consecutive devices (a mesh axis's
/// groups; a stage's data-parallel replicas, `stride` its tensor-parallel
/// degree), on `cluster`'s node-by-node numbering: one node where such
/// blocks tile a node; where they are whole nodes and `stride` divides a
/// node, devicesPerNode / stride of a group on each node; one device a node
/// where `stride` is a node or more. A group that covers nodes unevenly (a
/// block neither tiling a node nor made of whole nodes) is taken as one
/// device a node: the ring's traffic on one adapter, the slowest placement.
DeviceGroup stridedGroup(const Cluster &cluster, int64_t size, int64_t stride);

/// Seconds for `collective` over `bytes` (NCCL's buffer convention,
/// Collective.h) among the devices of `group` on `cluster` (the file
/// comment): 0 for a group of one device or no bytes.
double groupCollectiveTime(const Cluster &cluster, Collective collective,
                           double bytes, const DeviceGroup &group);

/// The bucket of the drivers' coalesced gradient and ZeRO collectives
/// (runtime/train's --bucket-mb default, PyTorch DDP's): what both searches
/// price a parameter-state collective in.
inline constexpr double kGradientBucketBytes = 25.0 * 1024 * 1024;

/// Seconds of parameter-state collectives of `bytes` in all, coalesced into
/// buckets of `bucketBytes` (0: one collective): up to a bucket, one
/// collective of `bytes`; beyond, `bytes / bucketBytes` buckets' worth,
/// each paying its own latency. `collective(b)` prices one collective of b
/// bytes.
double bucketedTime(double bytes, double bucketBytes,
                    llvm::function_ref<double(double)> collective);

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_GROUPCOLLECTIVE_H
