//===- NcclCommGpuTest.cpp - The NCCL backend on two GPUs -----------------===//
//
// Needs 2 GPUs (scripts/test-gpu-multi.sh runs it on the GPU machine);
// skips with fewer. Most tests run two ranks as two threads of this process
// (one GPU each, meeting through the TCP rendezvous on localhost) and
// compare every result with the in-process host backend on the same inputs.
// The launch tests start this binary again as rank processes
// (`--scenario NAME`), under torchrun-style variables and with --nproc, and
// one kills a rank mid-collective to check that the survivor ends with the
// watchdog's message within the timeout.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/gradient_reducer.h"
#include "tessera/runtime/launch.h"
#include "tessera/runtime/nccl_comm.h"
#include "tessera/runtime/thread_comm.h"

#include "CommTestUtil.h"
#include "DataTypes.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <mutex>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace tessera::comm;
using namespace tessera::comm::test;

namespace {

std::string selfPath;

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call
#define COMM_OK(call) ASSERT_EQ((call), 0) << tessera_comm_last_error()

int gpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess)
    return 0;
  return count;
}

#define REQUIRE_TWO_GPUS()                                                     \
  do {                                                                         \
    if (gpuCount() < 2)                                                        \
      GTEST_SKIP() << "needs 2 GPUs";                                          \
  } while (0)

struct GpuRank {
  int32_t rank;
  const RankComms *comms;
  cudaStream_t stream;
};

/// Runs body on two thread ranks, one per GPU, each with its NcclWorld
/// over `mesh`.
void onTwoGpus(const MeshShape &mesh,
               const std::function<void(GpuRank &)> &body) {
  int32_t port = freePort();
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::vector<std::string> failures;
  for (int32_t rank = 0; rank < 2; ++rank)
    threads.emplace_back([&, rank] {
      try {
        LaunchInfo info;
        info.rank = info.localRank = rank;
        info.worldSize = info.localWorldSize = 2;
        info.masterPort = port;
        Rendezvous rendezvous(info, 60);
        NcclOptions options;
        options.timeoutSeconds = 60;
        NcclWorld world(info, rendezvous, mesh, options);
        cudaStream_t stream = nullptr;
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        GpuRank gpu{rank, &world.comms(), stream};
        body(gpu);
        cudaStreamSynchronize(stream);
        cudaStreamDestroy(stream);
        rendezvous.barrier();
      } catch (const std::exception &error) {
        std::lock_guard<std::mutex> guard(mutex);
        failures.push_back("rank " + std::to_string(rank) + ": " +
                           error.what());
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (const std::string &failure : failures)
    ADD_FAILURE() << failure;
}

/// Device copy of host bytes, freed at scope exit.
class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes) : size(bytes) {
    cudaMalloc(&data, bytes);
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T> &host)
      : DeviceBuffer(host.size() * sizeof(T)) {
    cudaMemcpy(data, host.data(), size, cudaMemcpyHostToDevice);
  }
  ~DeviceBuffer() { cudaFree(data); }
  template <typename T> std::vector<T> read() const {
    std::vector<T> host(size / sizeof(T));
    cudaMemcpy(host.data(), data, size, cudaMemcpyDeviceToHost);
    return host;
  }
  void *data = nullptr;
  size_t size;
};

std::vector<float> inputFor(int32_t rank, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = static_cast<float>(rank + 1) * 0.37f +
                static_cast<float>(i % 97) * 0.01f;
  return values;
}

/// The host backend's answer for the same collective: runs `collective` on
/// two thread ranks over host copies of the inputs; returns rank r's output.
std::vector<std::vector<float>> hostReference(
    size_t outputCount,
    const std::function<void(tessera_comm *, int32_t, std::vector<float> &,
                             std::vector<float> &)> &collective,
    size_t inputCount) {
  ThreadWorld world({2});
  std::vector<std::vector<float>> outputs(2);
  runThreadRanks(world, [&](const RankComms &comms) {
    std::vector<float> input = inputFor(comms.rank, inputCount);
    std::vector<float> output(outputCount);
    collective(comms.world, comms.rank, input, output);
    outputs[static_cast<size_t>(comms.rank)] = output;
    return 0;
  });
  return outputs;
}

} // namespace

// Tests every collective of comm.h on NCCL against the host backend, with
// blocks along an inner axis (the packing path) and axis 0 (the direct one).
TEST(NcclCommGpuTest, CollectivesMatchTheHostBackend) {
  REQUIRE_TWO_GPUS();
  using Collective =
      std::function<void(tessera_comm *, int32_t, void *, void *, void *)>;
  struct Case {
    const char *name;
    size_t inputCount, outputCount;
    Collective call;
  };
  auto tensors = [](void *in, void *out, std::vector<int64_t> inShape,
                    std::vector<int64_t> outShape) {
    return std::make_pair(view(in, TESSERA_F32, inShape),
                          view(out, TESSERA_F32, outShape));
  };
  std::vector<Case> cases = {
      {"all_reduce sum", 24, 24,
       [&](tessera_comm *comm, int32_t, void *in, void *out, void *stream) {
         auto [x, y] = tensors(in, out, {4, 6}, {4, 6});
         ASSERT_EQ(
             tessera_comm_all_reduce(comm, &x, TESSERA_REDUCE_SUM, stream), 0)
             << tessera_comm_last_error();
         (void)y;
       }},
      {"all_gather axis 1", 24, 48,
       [&](tessera_comm *comm, int32_t, void *in, void *out, void *stream) {
         auto [x, y] = tensors(in, out, {4, 6}, {4, 12});
         ASSERT_EQ(tessera_comm_all_gather(comm, &x, &y, 1, stream), 0)
             << tessera_comm_last_error();
       }},
      {"all_gather axis 0", 24, 48,
       [&](tessera_comm *comm, int32_t, void *in, void *out, void *stream) {
         auto [x, y] = tensors(in, out, {4, 6}, {8, 6});
         ASSERT_EQ(tessera_comm_all_gather(comm, &x, &y, 0, stream), 0)
             << tessera_comm_last_error();
       }},
      {"reduce_scatter axis 1", 24, 12,
       [&](tessera_comm *comm, int32_t, void *in, void *out, void *stream) {
         auto [x, y] = tensors(in, out, {4, 6}, {4, 3});
         ASSERT_EQ(tessera_comm_reduce_scatter(comm, &x, &y, 1, stream), 0)
             << tessera_comm_last_error();
       }},
      {"reduce_scatter axis 0", 24, 12,
       [&](tessera_comm *comm, int32_t, void *in, void *out, void *stream) {
         auto [x, y] = tensors(in, out, {4, 6}, {2, 6});
         ASSERT_EQ(tessera_comm_reduce_scatter(comm, &x, &y, 0, stream), 0)
             << tessera_comm_last_error();
       }},
      {"all_to_all split 1 concat 0", 24, 24,
       [&](tessera_comm *comm, int32_t, void *in, void *out, void *stream) {
         auto [x, y] = tensors(in, out, {2, 3, 4}, {4, 3, 2});
         ASSERT_EQ(tessera_comm_all_to_all(comm, &x, &y, 2, 0, stream), 0)
             << tessera_comm_last_error();
       }},
      {"send/recv ring", 24, 24,
       [&](tessera_comm *comm, int32_t rank, void *in, void *out,
           void *stream) {
         auto [x, y] = tensors(in, out, {24}, {24});
         // Rank 0 sends first, rank 1 receives first: no deadlock on NCCL.
         if (rank == 0) {
           ASSERT_EQ(tessera_comm_send(comm, &x, 1, stream), 0)
               << tessera_comm_last_error();
           ASSERT_EQ(tessera_comm_recv(comm, &y, 1, stream), 0)
               << tessera_comm_last_error();
         } else {
           ASSERT_EQ(tessera_comm_recv(comm, &y, 0, stream), 0)
               << tessera_comm_last_error();
           ASSERT_EQ(tessera_comm_send(comm, &x, 0, stream), 0)
               << tessera_comm_last_error();
         }
       }},
  };
  std::vector<std::vector<std::vector<float>>> expected, actual(cases.size());
  for (const Case &test : cases) {
    bool inPlace = std::string(test.name) == "all_reduce sum";
    expected.push_back(hostReference(
        test.outputCount,
        [&](tessera_comm *comm, int32_t rank, std::vector<float> &in,
            std::vector<float> &out) {
          test.call(comm, rank, in.data(), out.data(), nullptr);
          if (inPlace)
            out = in;
        },
        test.inputCount));
  }
  std::mutex mutex;
  onTwoGpus({2}, [&](GpuRank &gpu) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const Case &test = cases[c];
      bool inPlace = std::string(test.name) == "all_reduce sum";
      DeviceBuffer in(inputFor(gpu.rank, test.inputCount));
      DeviceBuffer out(test.outputCount * sizeof(float));
      test.call(gpu.comms->world, gpu.rank, in.data, out.data, gpu.stream);
      cudaStreamSynchronize(gpu.stream);
      std::vector<float> result =
          inPlace ? in.read<float>() : out.read<float>();
      std::lock_guard<std::mutex> guard(mutex);
      actual[c].resize(2);
      actual[c][static_cast<size_t>(gpu.rank)] = result;
    }
  });
  for (size_t c = 0; c < cases.size(); ++c)
    EXPECT_EQ(actual[c], expected[c]) << cases[c].name;
}

// Tests bf16 and max reductions and a split communicator of a 1x2 mesh
// (axis 0: groups of one, axis 1: both GPUs).
TEST(NcclCommGpuTest, Bf16MaxAndSplitComms) {
  REQUIRE_TWO_GPUS();
  using namespace tessera::cpu;
  onTwoGpus({1, 2}, [&](GpuRank &gpu) {
    const RankComms &comms = *gpu.comms;
    ASSERT_EQ(comms.axes.size(), 2u);
    EXPECT_EQ(tessera_comm_size(comms.axes[0]), 1);
    EXPECT_EQ(tessera_comm_size(comms.axes[1]), 2);
    EXPECT_EQ(tessera_comm_rank(comms.axes[1]), gpu.rank);
    std::vector<uint16_t> host = {
        floatToBf16(1.5f + static_cast<float>(gpu.rank)), floatToBf16(-2.0f)};
    DeviceBuffer data(host);
    tessera_tensor x = view(data.data, TESSERA_BF16, {2});
    COMM_OK(tessera_comm_all_reduce(comms.axes[1], &x, TESSERA_REDUCE_SUM,
                                    gpu.stream));
    COMM_OK(tessera_comm_all_reduce(comms.axes[0], &x, TESSERA_REDUCE_SUM,
                                    gpu.stream));
    cudaStreamSynchronize(gpu.stream);
    std::vector<uint16_t> sum = data.read<uint16_t>();
    EXPECT_EQ(bf16ToFloat(sum[0]), 4.0f);
    EXPECT_EQ(bf16ToFloat(sum[1]), -4.0f);
    float flag = gpu.rank == 1 ? 1.0f : 0.0f;
    DeviceBuffer flagBuffer(std::vector<float>{flag});
    tessera_tensor f = view(flagBuffer.data, TESSERA_F32, {});
    COMM_OK(tessera_comm_all_reduce(comms.world, &f, TESSERA_REDUCE_MAX,
                                    gpu.stream));
    cudaStreamSynchronize(gpu.stream);
    EXPECT_EQ(flagBuffer.read<float>()[0], 1.0f);
    ScalarAgreement agree(comms.world, gpu.stream);
    EXPECT_EQ(agree.sum(gpu.rank + 0.25), 1.5);
    EXPECT_EQ(agree.max(gpu.rank == 0 ? 3.0 : 2.0), 3.0);
  });
}

namespace {

/// GPT-2-124M-like parameter sizes (a few large matrices, many small
/// vectors), scaled to keep the test quick.
std::vector<int64_t> modelParameters() {
  std::vector<int64_t> sizes = {50304 * 96, 1024 * 96};
  for (int layer = 0; layer < 12; ++layer)
    for (int64_t size : {96, 96, 96 * 288, 288, 96 * 96, 96, 96, 96, 96 * 384,
                         384, 384 * 96, 96})
      sizes.push_back(size);
  sizes.push_back(96);
  sizes.push_back(96);
  return sizes;
}

float gradientAt(int32_t rank, int64_t element) {
  return static_cast<float>((element * 7 + rank * 13) % 1000) * 1e-3f - 0.5f;
}

} // namespace

// Tests the reducer on GPUs: gradients "computed" (copied) on the compute
// stream in backward order, buckets reduced on the communication stream as
// they complete, and the result equal to one plain all-reduce of the whole
// buffer; then ZeRO-1's reduce-scatter and all-gather.
TEST(NcclCommGpuTest, ReducerOverlapsAndMatchesPlainAllReduce) {
  REQUIRE_TWO_GPUS();
  std::vector<int64_t> sizes = modelParameters();
  onTwoGpus({2}, [&](GpuRank &gpu) {
    tessera_comm *comm = gpu.comms->world;
    GradientLayout layout = GradientLayout::plan(sizes, (4 << 20) / 4);
    auto total = static_cast<size_t>(layout.totalElements());
    std::vector<float> host(total);
    for (size_t e = 0; e < total; ++e)
      host[e] = gradientAt(gpu.rank, static_cast<int64_t>(e));
    void *pinnedMemory = nullptr;
    cudaMallocHost(&pinnedMemory, total * sizeof(float));
    auto *pinned = static_cast<float *>(pinnedMemory);
    std::memcpy(pinned, host.data(), total * sizeof(float));

    DeviceBuffer plain(host);
    tessera_tensor whole =
        view(plain.data, TESSERA_F32, {static_cast<int64_t>(total)});
    COMM_OK(
        tessera_comm_all_reduce(comm, &whole, TESSERA_REDUCE_SUM, gpu.stream));

    cudaStream_t commStream = nullptr;
    cudaStreamCreateWithFlags(&commStream, cudaStreamNonBlocking);
    DeviceBuffer gradients(total * sizeof(float));
    GradientReducer reducer(comm, layout, gradients.data, TESSERA_F32,
                            ReduceMode::AllReduce, gpu.stream, commStream);
    for (int step = 0; step < 3; ++step) {
      for (auto p = static_cast<int32_t>(sizes.size()); p-- > 0;) {
        const GradientSlot &slot = layout.parameters()[static_cast<size_t>(p)];
        cudaMemcpyAsync(static_cast<float *>(gradients.data) + slot.offset,
                        pinned + slot.offset,
                        static_cast<size_t>(slot.elements) * sizeof(float),
                        cudaMemcpyHostToDevice, gpu.stream);
        reducer.onGradientReady(p);
      }
      reducer.finish();
      cudaStreamSynchronize(gpu.stream);
      EXPECT_EQ(gradients.read<float>(), plain.read<float>())
          << "step " << step;
    }

    GradientLayout sharded = GradientLayout::plan(sizes, (4 << 20) / 4, 2);
    auto shardedTotal = static_cast<size_t>(sharded.totalElements());
    std::vector<float> shardedHost(shardedTotal, 0.0f);
    for (size_t e = 0; e < shardedTotal; ++e)
      shardedHost[e] = gradientAt(gpu.rank, static_cast<int64_t>(e));
    DeviceBuffer shardedGradients(shardedHost);
    GradientReducer zero(comm, sharded, shardedGradients.data, TESSERA_F32,
                         ReduceMode::ReduceScatter, gpu.stream, commStream);
    for (auto p = static_cast<int32_t>(sizes.size()); p-- > 0;)
      zero.onGradientReady(p);
    zero.finish();
    cudaStreamSynchronize(gpu.stream);
    std::vector<float> reduced = shardedGradients.read<float>();
    std::vector<float> weights(shardedTotal, 0.0f);
    for (const ShardSegment &segment : sharded.shardSegments(gpu.rank))
      for (int64_t e = 0; e < segment.elements; ++e) {
        auto at = static_cast<size_t>(segment.bufferOffset + e);
        float expected = gradientAt(0, static_cast<int64_t>(at)) +
                         gradientAt(1, static_cast<int64_t>(at));
        ASSERT_EQ(reduced[at], expected) << "element " << at;
        weights[at] = 2.0f * expected;
      }
    DeviceBuffer weightBuffer(weights);
    zero.allGatherShards(weightBuffer.data, TESSERA_F32);
    cudaStreamSynchronize(gpu.stream);
    std::vector<float> gathered = weightBuffer.read<float>();
    for (size_t p = 0; p < sizes.size(); ++p) {
      const GradientSlot &slot = sharded.parameters()[p];
      for (int64_t e = 0; e < slot.elements; e += 97) {
        auto at = static_cast<size_t>(slot.offset + e);
        ASSERT_EQ(gathered[at],
                  2.0f * (gradientAt(0, static_cast<int64_t>(at)) +
                          gradientAt(1, static_cast<int64_t>(at))));
      }
    }
    cudaStreamDestroy(commStream);
    cudaFreeHost(pinned);
  });
}

// Prints the all-reduce bandwidth at 16 MiB and 256 MiB (f32), the way
// nccl-tests reports it: bus bandwidth = bytes * 2 (n - 1) / n / time.
TEST(NcclCommGpuTest, AllReduceBandwidth) {
  REQUIRE_TWO_GPUS();
  onTwoGpus({2}, [&](GpuRank &gpu) {
    for (size_t mebibytes : {16, 256}) {
      size_t bytes = mebibytes << 20;
      DeviceBuffer buffer(bytes);
      cudaMemset(buffer.data, 0, bytes);
      tessera_tensor x =
          view(buffer.data, TESSERA_F32, {static_cast<int64_t>(bytes / 4)});
      for (int warmup = 0; warmup < 3; ++warmup)
        COMM_OK(tessera_comm_all_reduce(gpu.comms->world, &x,
                                        TESSERA_REDUCE_SUM, gpu.stream));
      cudaEvent_t begin, end;
      cudaEventCreate(&begin);
      cudaEventCreate(&end);
      const int iterations = 20;
      cudaEventRecord(begin, gpu.stream);
      for (int i = 0; i < iterations; ++i)
        COMM_OK(tessera_comm_all_reduce(gpu.comms->world, &x,
                                        TESSERA_REDUCE_SUM, gpu.stream));
      cudaEventRecord(end, gpu.stream);
      cudaEventSynchronize(end);
      float milliseconds = 0;
      cudaEventElapsedTime(&milliseconds, begin, end);
      double seconds = milliseconds / 1e3 / iterations;
      double algorithm = static_cast<double>(bytes) / seconds / 1e9;
      if (gpu.rank == 0)
        std::printf(
            "all_reduce f32 %4zu MiB on 2 GPUs: %8.3f ms, algbw %6.1f GB/s, "
            "busbw %6.1f GB/s\n",
            mebibytes, seconds * 1e3, algorithm, algorithm * 2 * (2 - 1) / 2);
      cudaEventDestroy(begin);
      cudaEventDestroy(end);
    }
  });
}

namespace {

/// A rank process: meet, all-reduce, check. With `dieAfter` >= 0, rank 1
/// kills itself with SIGKILL after that many all-reduces and rank 0 keeps
/// going (the watchdog must end it).
int rankScenario(const LaunchInfo &info, double timeout, int dieAfter) {
  Rendezvous rendezvous(info, timeout);
  NcclOptions options;
  options.timeoutSeconds = timeout;
  NcclWorld world(info, rendezvous, {info.worldSize}, options);
  tessera_comm *comm = world.comms().world;
  size_t count = 1 << 20;
  DeviceBuffer buffer(std::vector<float>(count, 1.0f));
  tessera_tensor x =
      view(buffer.data, TESSERA_F32, {static_cast<int64_t>(count)});
  int rounds = dieAfter >= 0 ? 1000000 : 1;
  for (int round = 0; round < rounds; ++round) {
    if (info.rank == 1 && round == dieAfter) {
      std::fprintf(stderr, "rank 1: killing myself mid-run\n");
      std::raise(SIGKILL);
    }
    if (tessera_comm_all_reduce(comm, &x, TESSERA_REDUCE_MAX, nullptr) != 0) {
      std::fprintf(stderr, "%s\n", tessera_comm_last_error());
      return 1;
    }
    if (cudaStreamSynchronize(nullptr) != cudaSuccess) {
      std::fprintf(stderr, "rank %d: CUDA error after the all-reduce\n",
                   info.rank);
      return 1;
    }
  }
  std::vector<float> result = buffer.read<float>();
  if (result[0] != 1.0f || result[count - 1] != 1.0f)
    return 1;
  std::printf("rank %d of %d (%s): NCCL all_reduce ok\n", info.rank,
              info.worldSize, info.source.c_str());
  std::fflush(stdout);
  return 0;
}

} // namespace

// Tests the torchrun-style environment (what --nproc and torchrun set).
TEST(NcclLaunchGpuTest, TorchrunStyleRanks) {
  REQUIRE_TWO_GPUS();
  SpawnOptions options;
  options.executable = selfPath;
  EXPECT_EQ(spawnLocalRanks(2, {selfPath, "--scenario", "allreduce"}, options),
            0);
}

// Tests --nproc 2 through launchFromCommandLine, as the driver will call it.
TEST(NcclLaunchGpuTest, NprocSpawnsTwoRanks) {
  REQUIRE_TWO_GPUS();
  std::string command =
      selfPath + " --scenario launch --nproc 2 --comm-timeout 60";
  EXPECT_EQ(std::system(command.c_str()), 0);
}

// Tests that a rank killed mid-collective ends the other rank with the
// watchdog's message, within the timeout (plus setup), not a hang.
TEST(NcclLaunchGpuTest, KilledPeerEndsTheOtherRank) {
  REQUIRE_TWO_GPUS();
  SpawnOptions options;
  options.executable = selfPath;
  options.stopOthersOnFailure = false; // the survivor must stop by itself
  auto begin = std::chrono::steady_clock::now();
  int code = 0;
  std::string log = captureStderr([&] {
    code = spawnLocalRanks(
        2, {selfPath, "--scenario", "kill", "--comm-timeout=5"}, options);
  });
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  std::printf("killed peer: the survivor exited after %.1f s (timeout 5 s)\n%s",
              seconds, log.c_str());
  EXPECT_NE(code, 0);
  EXPECT_NE(log.find("rank 1 (pid"), std::string::npos) << log;
  EXPECT_NE(log.find("rank 0: NCCL "), std::string::npos) << log;
  EXPECT_NE(log.find("(peer died?)"), std::string::npos) << log;
  EXPECT_LT(seconds, 40);
}

int main(int argc, char **argv) {
  selfPath = "/proc/self/exe";
  char resolved[4096];
  ssize_t length = ::readlink("/proc/self/exe", resolved, sizeof(resolved) - 1);
  if (length > 0)
    selfPath.assign(resolved, static_cast<size_t>(length));
  if (argc > 2 && std::string(argv[1]) == "--scenario") {
    std::string scenario = argv[2];
    try {
      Launch launch = launchFromCommandLine(argc, argv, processEnvironment());
      if (launch.launcherExitCode)
        return *launch.launcherExitCode;
      if (scenario == "allreduce" || scenario == "launch")
        return rankScenario(launch.info, launch.commTimeoutSeconds, -1);
      if (scenario == "kill")
        return rankScenario(launch.info, launch.commTimeoutSeconds, 20);
    } catch (const CommError &error) {
      std::fprintf(stderr, "error: %s\n", error.what());
      return 1;
    }
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
