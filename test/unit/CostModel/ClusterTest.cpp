//===- ClusterTest.cpp - cluster files, built-ins and the link model -------===//

#include "tessera/CostModel/Cluster.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessera::cost;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string errorOf(llvm::Expected<Cluster> cluster) {
  if (cluster)
    return "";
  return llvm::toString(cluster.takeError());
}

/// A minimal valid file; tests break one field at a time.
std::string minimalCluster(const std::string &extraTop = "",
                           const std::string &device = "",
                           const std::string &links = "") {
  return R"({"name": "test", "nodes": 1, "devices_per_node": 2,)" + extraTop +
         R"( "device": {"memory_bytes": 1e9, "memory_bandwidth": 1e12,
                         "flops": {"bf16": 4e14, "fp16": 4e14, "fp32": 5e13})" +
         device + R"(},
         "links": {"intra_node": {"latency": 1e-5, "bandwidth": 1e11)" +
         links + "}}}";
}

// Tests that every built-in parses and has what --explain needs.
TEST(Cluster, BuiltinsParse) {
  for (llvm::StringRef name : builtinClusterNames()) {
    llvm::Expected<Cluster> cluster = loadCluster(name);
    ASSERT_TRUE(static_cast<bool>(cluster))
        << name.str() << ": " << llvm::toString(cluster.takeError());
    EXPECT_EQ(cluster->name, name.str());
    EXPECT_GT(cluster->device.matrixRate(Precision::BF16), 0);
    EXPECT_GE(cluster->device.peakMatrixRate(Precision::BF16),
              cluster->device.matrixRate(Precision::BF16));
    EXPECT_EQ(cluster->interNode.has_value(), cluster->nodes > 1);
  }
}

// Tests the h200 built-in against shared/docs/ANCHORS.md.
TEST(Cluster, H200MatchesAnchors) {
  llvm::Expected<Cluster> cluster = loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(cluster));
  EXPECT_EQ(cluster->deviceCount(), 8);
  EXPECT_DOUBLE_EQ(cluster->device.matrixRate(Precision::BF16), 790e12);
  EXPECT_DOUBLE_EQ(cluster->device.memoryBandwidth, 4.8e12);
  EXPECT_NEAR(cluster->device.memoryBytes / 1e9, 150.75, 0.01);

  // All-reduce between 2 GPUs: bus bandwidth = algorithm bandwidth there.
  const LinkModel &nvlink = cluster->intraNode;
  EXPECT_NEAR(nvlink.time(Collective::AllReduce, kMiB, 2) * 1e6, 65.5, 0.1);
  EXPECT_NEAR(16 * kMiB / nvlink.time(Collective::AllReduce, 16 * kMiB, 2),
              206e9, 1e6);
  EXPECT_NEAR(256 * kMiB / nvlink.time(Collective::AllReduce, 256 * kMiB, 2),
              301e9, 1e6);
  EXPECT_NEAR(1024 * kMiB / nvlink.time(Collective::AllReduce, 1024 * kMiB, 2),
              326e9, 1e6);
}

// Tests the attention rates: measured ones where the file gives them,
// the GEMM rate elsewhere, and the h200 built-in's from its traced step.
TEST(Cluster, AttentionRates) {
  llvm::Expected<Cluster> plain = parseCluster(minimalCluster(), "test.json");
  ASSERT_TRUE(static_cast<bool>(plain)) << llvm::toString(plain.takeError());
  EXPECT_DOUBLE_EQ(plain->device.attentionRate(Precision::BF16), 4e14);
  llvm::Expected<Cluster> measured = parseCluster(
      minimalCluster("", R"(, "attention_flops": {"bf16": 1.5e14})"),
      "test.json");
  ASSERT_TRUE(static_cast<bool>(measured))
      << llvm::toString(measured.takeError());
  EXPECT_DOUBLE_EQ(measured->device.attentionRate(Precision::BF16), 1.5e14);
  EXPECT_DOUBLE_EQ(measured->device.attentionRate(Precision::FP32), 5e13);
  EXPECT_NE(errorOf(parseCluster(
                minimalCluster("", R"(, "attention_flops": {"bf16": -1})"),
                "test.json")),
            "");
  llvm::Expected<Cluster> h200 = loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(h200));
  EXPECT_DOUBLE_EQ(h200->device.attentionRate(Precision::BF16), 4.93e14);
}

// Tests the measured GEMM shapes and the per-kernel cost: a measured shape
// is timed at its own rate, a shape between measured ones at their
// inverse-distance blend (in log2 space), any shape without a table or
// without dims at device.flops; malformed rows name their field.
TEST(Cluster, GemmShapesAndKernelSeconds) {
  llvm::Expected<Cluster> cluster = parseCluster(
      minimalCluster("", R"(, "kernel_seconds": 1e-6,
          "gemm_shapes": {"bf16": [[1024, 1024, 1024, 1e14],
                                   [4096, 4096, 4096, 3e14]]})"),
      "test.json");
  ASSERT_TRUE(static_cast<bool>(cluster))
      << llvm::toString(cluster.takeError());
  const DeviceModel &device = cluster->device;
  EXPECT_DOUBLE_EQ(device.kernelSeconds, 1e-6);
  EXPECT_DOUBLE_EQ(device.matrixRate(Precision::BF16, 1024, 1024, 1024), 1e14);
  EXPECT_DOUBLE_EQ(device.matrixRate(Precision::BF16, 4096, 4096, 4096), 3e14);
  // Halfway in log space: equal weights.
  EXPECT_DOUBLE_EQ(device.matrixRate(Precision::BF16, 2048, 2048, 2048), 2e14);
  // Nearer the large shape: nearer its rate (0.5 against 1.5 in each dim's
  // log2, weights 9 : 1).
  EXPECT_NEAR(device.matrixRate(Precision::BF16, 2896.3, 2896.3, 2896.3),
              (9 * 3e14 + 1e14) / 10, 1e12);
  EXPECT_DOUBLE_EQ(device.matrixRate(Precision::FP16, 2048, 2048, 2048), 4e14);
  EXPECT_DOUBLE_EQ(device.matrixRate(Precision::BF16, 0, 2048, 2048), 4e14);

  EXPECT_EQ(errorOf(parseCluster(
                minimalCluster("", R"(, "gemm_shapes": {"bf16": [[1, 2, 3]]})"),
                "g.json")),
            "cluster file 'g.json': field 'device.gemm_shapes.bf16[0]' must "
            "be [m, n, k, flop/s], four positive numbers, got [1,2,3]");
  EXPECT_EQ(errorOf(parseCluster(
                minimalCluster("", R"(, "gemm_shapes": {"bf16": 7})"),
                "g.json")),
            "cluster file 'g.json': field 'device.gemm_shapes.bf16' must be "
            "an array of [m, n, k, flop/s] rows");
  EXPECT_EQ(errorOf(parseCluster(
                minimalCluster("", R"(, "gemm_shapes": {"tf32": []})"),
                "g.json")),
            "cluster file 'g.json': unknown field 'device.gemm_shapes.tf32' "
            "(expected one of: bf16, fp16, fp32)");
  EXPECT_EQ(errorOf(parseCluster(
                minimalCluster("", R"(, "kernel_seconds": -1)"), "k.json")),
            "cluster file 'k.json': field 'device.kernel_seconds' must be a "
            "non-negative number, got -1");

  // The measured H200 file has both, at GPT-2's shapes.
  llvm::Expected<Cluster> measured = loadCluster(
      std::string(TESSERA_SOURCE_DIR) + "/bench/clusters/h200x2-measured.json");
  ASSERT_TRUE(static_cast<bool>(measured))
      << llvm::toString(measured.takeError());
  EXPECT_GT(measured->device.kernelSeconds, 0);
  double qkv = measured->device.matrixRate(Precision::BF16, 16384, 2304, 768);
  EXPECT_GT(qkv, 4e14);
  EXPECT_LT(qkv, measured->device.matrixRate(Precision::BF16));
}

// Tests the ring factors of each collective.
TEST(Collective, BusFactors) {
  EXPECT_DOUBLE_EQ(busFactor(Collective::AllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(busFactor(Collective::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(busFactor(Collective::AllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busFactor(Collective::ReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busFactor(Collective::AllToAll, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(busFactor(Collective::SendRecv, 2), 1.0);
  for (Collective collective : allCollectives()) {
    EXPECT_EQ(busFactor(collective, 1), 0.0);
    EXPECT_EQ(parseCollectiveName(collectiveName(collective)), collective);
  }
}

// Tests the alpha-beta line and the measured table around and between its
// points.
TEST(LinkModel, AlphaBetaAndMeasuredTable) {
  CollectiveModel model;
  model.collective = Collective::AllReduce;
  model.latency = 10e-6;
  model.bandwidth = 100e9;
  // 8 devices: 2 * 7/8 of the bytes cross each link.
  EXPECT_DOUBLE_EQ(model.time(1e9, 8), 10e-6 + 1e9 * 1.75 / 100e9);
  EXPECT_EQ(model.time(1e9, 1), 0.0);
  EXPECT_EQ(model.time(0, 8), 0.0);

  model.measured = {{1e6, 10e9}, {1e8, 100e9}};
  // On a point: exactly its bandwidth.
  EXPECT_DOUBLE_EQ(model.time(1e6, 2), 1e6 / 10e9);
  // Halfway in log(bytes): halfway in log(bandwidth).
  EXPECT_NEAR(model.time(1e7, 2), 1e7 / std::sqrt(10e9 * 100e9), 1e-12);
  // Below: a straight line from the latency at 0 bytes.
  EXPECT_NEAR(model.time(0.5e6, 2), 10e-6 + (1e-4 - 10e-6) * 0.5, 1e-12);
  // Above: the last point's bandwidth for the extra bytes.
  EXPECT_NEAR(model.time(3e8, 2), 1e8 / 100e9 + 2e8 / 100e9, 1e-12);
  // Never decreasing in bytes.
  double previous = 0;
  for (double bytes = 1e3; bytes < 1e10; bytes *= 1.7) {
    double time = model.time(bytes, 4);
    EXPECT_GE(time, previous) << bytes;
    previous = time;
  }
}

// Tests the optional host section (what prices --offload optimizer): the
// h200 built-in's measured rates, and none in a file without it.
TEST(Cluster, Host) {
  llvm::Expected<Cluster> h200 = loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(h200));
  ASSERT_TRUE(h200->host.has_value());
  EXPECT_DOUBLE_EQ(h200->host->adamwElementsPerSecond, 4.48e9);
  EXPECT_DOUBLE_EQ(h200->host->deviceToHostBandwidth, 5.45e10);
  EXPECT_DOUBLE_EQ(h200->host->hostToDeviceBandwidth, 5.11e10);
  llvm::Expected<Cluster> plain = parseCluster(minimalCluster(), "p.json");
  ASSERT_TRUE(static_cast<bool>(plain)) << llvm::toString(plain.takeError());
  EXPECT_FALSE(plain->host.has_value());
}

// Tests a file that sets only link defaults and one collective override.
TEST(Cluster, LinkDefaultsAndOverrides) {
  llvm::Expected<Cluster> cluster = parseCluster(
      minimalCluster("", "", R"(, "collectives": {"send_recv": {"bandwidth": 2e11}})"),
      "test.json");
  ASSERT_TRUE(static_cast<bool>(cluster)) << llvm::toString(cluster.takeError());
  EXPECT_DOUBLE_EQ(cluster->intraNode.get(Collective::AllGather).bandwidth, 1e11);
  EXPECT_DOUBLE_EQ(cluster->intraNode.get(Collective::SendRecv).bandwidth, 2e11);
  EXPECT_DOUBLE_EQ(cluster->intraNode.get(Collective::SendRecv).latency, 1e-5);
  // Peaks default to the practical rates; vector rate to fp32's.
  EXPECT_DOUBLE_EQ(cluster->device.peakMatrixRate(Precision::BF16), 4e14);
  EXPECT_DOUBLE_EQ(cluster->device.vectorFlops, 5e13);
}

// Tests that errors name the file and the field.
TEST(Cluster, Errors) {
  EXPECT_NE(errorOf(parseCluster("{\"name\": ", "bad.json"))
                .find("cluster file 'bad.json': invalid JSON"),
            std::string::npos);

  std::string noFp32 = R"({"name": "x", "nodes": 1, "devices_per_node": 1,
      "device": {"memory_bytes": 1, "memory_bandwidth": 1, "flops": {"bf16": 1, "fp16": 1}},
      "links": {"intra_node": {"bandwidth": 1}}})";
  EXPECT_EQ(errorOf(parseCluster(noFp32, "a.json")),
            "cluster file 'a.json': missing field 'device.flops.fp32'");

  EXPECT_EQ(errorOf(parseCluster(minimalCluster(R"( "nodez": 2,)"), "b.json")),
            "cluster file 'b.json': unknown field 'nodez' (expected one of: "
            "name, description, nodes, devices_per_node, device, links, "
            "host)");

  EXPECT_EQ(errorOf(parseCluster(
                minimalCluster(R"( "host": {"adamw_elements_per_second": 1e9,
                                  "device_to_host_bandwidth": 1e10},)"),
                "h.json")),
            "cluster file 'h.json': missing field "
            "'host.host_to_device_bandwidth'");

  std::string twoNodes = minimalCluster();
  twoNodes.replace(twoNodes.find("\"nodes\": 1"), 10, "\"nodes\": 2");
  EXPECT_EQ(errorOf(parseCluster(twoNodes, "c.json")),
            "cluster file 'c.json': missing field 'links.inter_node' "
            "(required because 'nodes' is 2)");

  EXPECT_EQ(errorOf(parseCluster(minimalCluster("", R"(, "vector_flops": -1)"),
                                 "d.json")),
            "cluster file 'd.json': field 'device.vector_flops' must be a "
            "positive number, got -1");

  std::string unsorted = minimalCluster(
      "", "",
      R"(, "collectives": {"all_reduce": {"measured": [{"bytes": 2, "bus_bandwidth": 1}, {"bytes": 1, "bus_bandwidth": 1}]}})");
  EXPECT_EQ(errorOf(parseCluster(unsorted, "e.json")),
            "cluster file 'e.json': field "
            "'links.intra_node.collectives.all_reduce.measured[1]': "
            "measurements must be sorted by strictly increasing bytes");

  std::string noBandwidth = R"({"name": "x", "nodes": 1, "devices_per_node": 1,
      "device": {"memory_bytes": 1, "memory_bandwidth": 1, "flops": {"bf16": 1, "fp16": 1, "fp32": 1}},
      "links": {"intra_node": {"collectives": {"all_reduce": {"bandwidth": 1}}}}})";
  EXPECT_EQ(errorOf(parseCluster(noBandwidth, "f.json")),
            "cluster file 'f.json': missing field "
            "'links.intra_node.collectives.all_gather.bandwidth' (or a default "
            "'links.intra_node.bandwidth' for every collective of the link)");

  std::string unknown = errorOf(loadCluster("h100"));
  EXPECT_NE(unknown.find("--cluster h100: not a built-in cluster (h200, "
                         "h200-multinode, a100-megatron) and not a readable "
                         "file"),
            std::string::npos)
      << unknown;
}

// Tests reading a cluster from a file, as --cluster FILE does.
TEST(Cluster, LoadsFile) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("cluster", "json", path));
  {
    std::error_code code;
    llvm::raw_fd_ostream file(path, code);
    ASSERT_FALSE(code);
    file << minimalCluster();
  }
  llvm::Expected<Cluster> cluster = loadCluster(path);
  llvm::sys::fs::remove(path);
  ASSERT_TRUE(static_cast<bool>(cluster)) << llvm::toString(cluster.takeError());
  EXPECT_EQ(cluster->name, "test");
  EXPECT_EQ(cluster->deviceCount(), 2);
}

} // namespace
