//===- GroupCollectiveTest.cpp - one collective over devices on nodes -----===//
//
// cost::groupCollectiveTime, the price both searches give a collective over
// a group of devices (issue 22), on a cluster of two nodes of four devices
// with alpha-beta links, so that every expected time is a formula of the
// file comment of GroupCollective.h.
//
//===----------------------------------------------------------------------===//

#include "tessera/CostModel/DeviceMesh.h"
#include "tessera/CostModel/GroupCollective.h"

#include <gtest/gtest.h>

#include <string>

using namespace tessera::cost;

namespace {

/// Two nodes of four devices: 100 GB/s inside a node, 1 GB/s a device's
/// adapter between nodes, no latency unless asked.
Cluster twoNodesOfFour(double interLatency = 0) {
  std::string json = R"json({
    "name": "two-by-four", "nodes": 2, "devices_per_node": 4,
    "device": {"memory_bytes": 1e9, "memory_bandwidth": 1e12,
               "flops": {"bf16": 1e12, "fp16": 1e12, "fp32": 1e12}},
    "links": {
      "intra_node": {"latency": 0, "bandwidth": 1e11},
      "inter_node": {"latency": LATENCY, "bandwidth": 1e9}}})json";
  json.replace(json.find("LATENCY"), 7, std::to_string(interLatency));
  llvm::Expected<Cluster> cluster = parseCluster(json, "two-by-four.json");
  EXPECT_TRUE(static_cast<bool>(cluster))
      << llvm::toString(cluster.takeError());
  return cluster ? std::move(*cluster) : Cluster();
}

constexpr double kBytes = 4e8;

// Tests how groups of a stride lie on nodes of four.
TEST(GroupCollective, StridedGroups) {
  Cluster cluster = twoNodesOfFour();
  auto shape = [&](int64_t size, int64_t stride) {
    DeviceGroup group = stridedGroup(cluster, size, stride);
    EXPECT_EQ(group.devices, size);
    return group.nodes;
  };
  EXPECT_EQ(shape(4, 1), 1);  // a node
  EXPECT_EQ(shape(2, 2), 1);  // blocks of 4 tile a node
  EXPECT_EQ(shape(8, 1), 2);  // four a node
  EXPECT_EQ(shape(4, 2), 2);  // two a node (a TP 2 rank's replicas)
  EXPECT_EQ(shape(2, 4), 2);  // one a node
  EXPECT_EQ(shape(1, 8), 1);  // one device
  // Blocks of 3 straddle nodes unevenly: one device a node, the slowest.
  EXPECT_EQ(shape(3, 1), 3);
}

// Tests a group inside a node: the intra-node link, as before.
TEST(GroupCollective, InsideANode) {
  Cluster cluster = twoNodesOfFour();
  EXPECT_DOUBLE_EQ(
      groupCollectiveTime(cluster, Collective::AllReduce, kBytes, {4, 1}),
      cluster.intraNode.time(Collective::AllReduce, kBytes, 4));
  EXPECT_EQ(groupCollectiveTime(cluster, Collective::AllReduce, kBytes, {1, 1}),
            0.0);
  EXPECT_EQ(groupCollectiveTime(cluster, Collective::AllReduce, 0, {8, 2}),
            0.0);
}

// Tests the ring across nodes: all 8 devices' bus factor 2 * 7/8, a quarter
// of the bytes on each of a node's four adapters (NVIDIA/nccl#569: more
// devices a node, more adapters, a faster ring), paced by the slower hop.
TEST(GroupCollective, RingAcrossNodesUsesEveryAdapter) {
  Cluster cluster = twoNodesOfFour();
  double ring = groupCollectiveTime(cluster, Collective::AllReduce, kBytes,
                                    {8, 2});
  EXPECT_DOUBLE_EQ(ring, 2 * 7.0 / 8 * kBytes / 4 / 1e9);
  // Not the flat ring on one adapter (what the mesh search priced), nor
  // the two-level reduce-scatter / all-reduce / all-gather (what the
  // pipeline search priced: 2 * 1/2 of a quarter across the nodes).
  EXPECT_DOUBLE_EQ(ring * 4,
                   cluster.interNode->time(Collective::AllReduce, kBytes, 8));
  EXPECT_GT(ring, 2 * 0.5 * kBytes / 4 / 1e9);

  // One device a node: the whole ring on each adapter.
  EXPECT_DOUBLE_EQ(
      groupCollectiveTime(cluster, Collective::AllReduce, kBytes, {2, 2}),
      kBytes / 1e9);
  // Two a node (four replicas of a TP 2 rank).
  EXPECT_DOUBLE_EQ(
      groupCollectiveTime(cluster, Collective::ReduceScatter, kBytes, {4, 2}),
      3.0 / 4 * kBytes / 2 / 1e9);

  // A slow intra-node link paces the ring instead.
  cluster.intraNode.collectives[static_cast<size_t>(Collective::AllGather)]
      .bandwidth = 1e8;
  EXPECT_DOUBLE_EQ(
      groupCollectiveTime(cluster, Collective::AllGather, kBytes, {8, 2}),
      7.0 / 8 * kBytes / 1e8);
}

// Tests the latency: each hop's, not divided among the adapters.
TEST(GroupCollective, LatencyOfTheSlowerHop) {
  Cluster cluster = twoNodesOfFour(/*interLatency=*/1e-3);
  EXPECT_DOUBLE_EQ(
      groupCollectiveTime(cluster, Collective::AllReduce, kBytes, {8, 2}),
      1e-3 + 2 * 7.0 / 8 * kBytes / 4 / 1e9);
}

// Tests all-to-all (point to point: 4/8 of the buffer leaves the node over
// each device's adapter, 3/8 stays) and send/receive between two nodes.
TEST(GroupCollective, AllToAllAndSendReceive) {
  Cluster cluster = twoNodesOfFour();
  EXPECT_DOUBLE_EQ(
      groupCollectiveTime(cluster, Collective::AllToAll, kBytes, {8, 2}),
      4.0 / 8 * kBytes / 1e9);
  EXPECT_DOUBLE_EQ(
      groupCollectiveTime(cluster, Collective::SendRecv, kBytes, {2, 2}),
      kBytes / 1e9);
}

// Tests that the mesh search's axis collectives and the whole mesh's
// all-reduce are this function of their groups.
TEST(GroupCollective, MeshAxesAreGroups) {
  Cluster cluster = twoNodesOfFour();
  DeviceMesh dataParallel = *parseMesh("dp=8");
  ASSERT_FALSE(placeOnCluster(dataParallel, cluster));
  EXPECT_DOUBLE_EQ(
      axisCollectiveTime(dataParallel, cluster, 0, Collective::AllReduce,
                         kBytes),
      groupCollectiveTime(cluster, Collective::AllReduce, kBytes, {8, 2}));
  EXPECT_DOUBLE_EQ(meshAllReduceTime(dataParallel, cluster, kBytes),
                   groupCollectiveTime(cluster, Collective::AllReduce, kBytes,
                                       {8, 2}));

  DeviceMesh twoByFour = *parseMesh("dp=2,tp=4");
  ASSERT_FALSE(placeOnCluster(twoByFour, cluster));
  DeviceGroup across = axisGroup(twoByFour, cluster, 0);
  DeviceGroup inside = axisGroup(twoByFour, cluster, 1);
  EXPECT_EQ(across.devices, 2);
  EXPECT_EQ(across.nodes, 2);
  EXPECT_EQ(inside.devices, 4);
  EXPECT_EQ(inside.nodes, 1);
  // The whole mesh: one ring over its 8 devices, not axis by axis.
  EXPECT_DOUBLE_EQ(meshAllReduceTime(twoByFour, cluster, kBytes),
                   groupCollectiveTime(cluster, Collective::AllReduce, kBytes,
                                       {8, 2}));
}

} // namespace
