//===- DeviceMeshTest.cpp - --mesh parsing and placement -------------------===//

#include "tessera/CostModel/DeviceMesh.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace tessera::cost;

namespace {

std::string errorOf(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "";
}
std::string errorOf(llvm::Expected<DeviceMesh> mesh) {
  return mesh ? "" : llvm::toString(mesh.takeError());
}

Cluster builtin(llvm::StringRef name) {
  llvm::Expected<Cluster> cluster = loadCluster(name);
  EXPECT_TRUE(static_cast<bool>(cluster));
  return cluster ? std::move(*cluster) : Cluster();
}

// Tests the two spellings and the default axis names.
TEST(DeviceMesh, Parses) {
  llvm::Expected<DeviceMesh> mesh = parseMesh("2x4");
  ASSERT_TRUE(static_cast<bool>(mesh));
  EXPECT_EQ(mesh->describe(), "dp=2,tp=4");
  EXPECT_EQ(mesh->axes[0].stride, 4);
  EXPECT_EQ(mesh->axes[1].stride, 1);
  EXPECT_EQ(mesh->deviceCount(), 8);

  mesh = parseMesh("dp=2, tp=4");
  ASSERT_TRUE(static_cast<bool>(mesh));
  EXPECT_EQ(mesh->describe(), "dp=2,tp=4");
  EXPECT_EQ(mesh->axisIndex("tp"), 1);

  mesh = parseMesh("8");
  ASSERT_TRUE(static_cast<bool>(mesh));
  EXPECT_EQ(mesh->describe(), "dp=8");

  mesh = parseMesh("2x2x2");
  ASSERT_TRUE(static_cast<bool>(mesh));
  EXPECT_EQ(mesh->describe(), "pp=2,dp=2,tp=2");

  mesh = parseMesh("");
  ASSERT_TRUE(static_cast<bool>(mesh));
  EXPECT_EQ(mesh->deviceCount(), 1);
  EXPECT_EQ(mesh->describe(), "1 device");
}

TEST(DeviceMesh, ParseErrors) {
  EXPECT_EQ(errorOf(parseMesh("2x0")),
            "--mesh 2x0: '0': an axis size must be a positive integer "
            "(write 2x4 or dp=2,tp=4)");
  EXPECT_EQ(errorOf(parseMesh("dp=2,dp=4")),
            "--mesh dp=2,dp=4: axis 'dp' is named twice");
  EXPECT_EQ(errorOf(parseMesh("2=2")),
            "--mesh 2=2: '2=2': expected NAME=N with NAME an identifier, "
            "e.g. dp=2,tp=4");
  EXPECT_EQ(errorOf(parseMesh("2x2x2x2")),
            "--mesh 2x2x2x2: 4 axes need names, e.g. pp=2,dp=2,cp=2,tp=2");
  EXPECT_EQ(errorOf(parseMesh("2x")),
            "--mesh 2x: '': an axis size must be a positive integer (write "
            "2x4 or dp=2,tp=4)");
}

// Tests which link each axis uses.
TEST(DeviceMesh, Placement) {
  Cluster h200 = builtin("h200");
  DeviceMesh mesh = *parseMesh("2x4");
  ASSERT_FALSE(placeOnCluster(mesh, h200));
  EXPECT_EQ(mesh.axes[0].level, LinkLevel::IntraNode);
  EXPECT_EQ(mesh.axes[1].level, LinkLevel::IntraNode);

  // Fewer devices than the node: the first ones.
  mesh = *parseMesh("2");
  EXPECT_FALSE(placeOnCluster(mesh, h200));

  mesh = *parseMesh("16");
  EXPECT_EQ(errorOf(placeOnCluster(mesh, h200)),
            "--mesh dp=16: needs 16 devices, but cluster 'h200' has 8 (1 "
            "node(s) of 8)");

  Cluster multinode = builtin("h200-multinode");
  mesh = *parseMesh("dp=4,tp=8");
  ASSERT_FALSE(placeOnCluster(mesh, multinode));
  EXPECT_EQ(mesh.axes[0].level, LinkLevel::InterNode);
  EXPECT_EQ(mesh.axes[1].level, LinkLevel::IntraNode);

  // A 16-device axis of stride 1 spans two nodes: its ring crosses IB.
  mesh = *parseMesh("2x16");
  ASSERT_FALSE(placeOnCluster(mesh, multinode));
  EXPECT_EQ(mesh.axes[1].level, LinkLevel::InterNode);

  // A mesh larger than a node uses whole nodes.
  mesh = *parseMesh("12");
  EXPECT_EQ(errorOf(placeOnCluster(mesh, multinode)),
            "--mesh dp=12: 12 devices span more than one node of 8 on "
            "cluster 'h200-multinode': a mesh larger than a node must use "
            "whole nodes");
}

// Tests the all-reduce over a whole 2-D mesh: one ring over its 32 devices
// (NCCL's, GroupCollective.h), the bytes over InfiniBand split among each
// node's eight adapters; no longer reduce-scatter / all-reduce / all-gather
// axis by axis, which NCCL does not run.
TEST(DeviceMesh, AllReduceOverTheWholeMesh) {
  Cluster multinode = builtin("h200-multinode");
  double bytes = 512e6;

  DeviceMesh flat = *parseMesh("8");
  ASSERT_FALSE(placeOnCluster(flat, multinode));
  EXPECT_DOUBLE_EQ(meshAllReduceTime(flat, multinode, bytes),
                   multinode.intraNode.time(Collective::AllReduce, bytes, 8));

  DeviceMesh mesh = *parseMesh("dp=4,tp=8");
  ASSERT_FALSE(placeOnCluster(mesh, multinode));
  double expected = std::max(
      multinode.interNode->time(Collective::AllReduce, bytes / 8, 32),
      multinode.intraNode.time(Collective::AllReduce, bytes, 32));
  EXPECT_DOUBLE_EQ(meshAllReduceTime(mesh, multinode, bytes), expected);

  DeviceMesh single = *parseMesh("");
  EXPECT_EQ(meshAllReduceTime(single, multinode, bytes), 0.0);
}

} // namespace
