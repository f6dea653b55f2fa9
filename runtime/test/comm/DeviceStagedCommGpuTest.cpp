//===- DeviceStagedCommGpuTest.cpp - In-process comms over device memory --===//
//
// device_staged_comm.h on one GPU: two thread ranks share device 0, and
// every collective of their staged comms (on device tensors, on each rank's
// own stream) must give what the in-process comm gives on host copies of
// the same inputs. Also the helpers that move host values over a device
// comm: ScalarAgreement and allGatherHostTensors; and the gradient reducer
// of --thread-ranks on one GPU (four ranks, each with a compute and a comm
// stream, as NCCL's ranks have). Skips without a GPU.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/device_staged_comm.h"
#include "tessera/runtime/gradient_reducer.h"
#include "tessera/runtime/thread_comm.h"

#include "CommTestUtil.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using namespace tessera::comm;
using namespace tessera::comm::test;

namespace {

bool haveGpu() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

/// A device copy of `values`, freed with the object.
class DeviceFloats {
public:
  explicit DeviceFloats(const std::vector<float> &values)
      : count(values.size()) {
    EXPECT_EQ(cudaMalloc(&data, count * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data, values.data(), count * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(data); }
  std::vector<float> read() const {
    std::vector<float> values(count);
    EXPECT_EQ(cudaMemcpy(values.data(), data, count * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return values;
  }
  void *data = nullptr;
  size_t count;
};

/// Rank r's input: 2 x 4 values that differ per rank.
std::vector<float> inputOf(int32_t rank) {
  std::vector<float> values;
  for (int i = 0; i < 8; ++i)
    values.push_back(static_cast<float>(rank * 100 + i) + 0.25f);
  return values;
}

// Tests that all_reduce, all_gather, reduce_scatter and all_to_all over the
// staged comms of two thread ranks on one GPU give the host comm's results
// on the same inputs, each rank on its own stream.
TEST(DeviceStagedComms, CollectivesMatchTheHostComm) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU";
  ThreadWorld hostWorld(MeshShape{2}, 30), deviceWorld(MeshShape{2}, 30);
  std::mutex mutex;
  std::vector<std::vector<std::vector<float>>> host(2), device(2);
  auto run = [&](ThreadWorld &world, bool staged) {
    runThreadRanks(world, [&](const RankComms &comms) {
      EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
      cudaStream_t stream = nullptr;
      EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                cudaSuccess);
      std::unique_ptr<DeviceStagedComms> wrapped;
      tessera_comm *comm = comms.axes[0];
      if (staged) {
        wrapped = std::make_unique<DeviceStagedComms>(comms);
        comm = wrapped->comms().axes[0];
      }
      std::vector<float> in = inputOf(comms.rank);
      std::vector<std::vector<float>> results;
      // Each collective on host vectors, or device copies of them.
      auto collect = [&](size_t outCount, auto call) {
        std::vector<float> x = in, y(outCount);
        if (!staged) {
          EXPECT_EQ(call(x.data(), y.data()), 0) << tessera_comm_last_error();
          results.push_back(outCount ? y : x);
          return;
        }
        DeviceFloats dx(x), dy(y);
        EXPECT_EQ(call(dx.data, dy.data), 0) << tessera_comm_last_error();
        results.push_back(outCount ? dy.read() : dx.read());
      };
      collect(0, [&](void *x, void *) {
        tessera_tensor t = view(x, TESSERA_F32, {2, 4});
        return tessera_comm_all_reduce(comm, &t, TESSERA_REDUCE_SUM, stream);
      });
      collect(16, [&](void *x, void *y) {
        tessera_tensor a = view(x, TESSERA_F32, {2, 4});
        tessera_tensor b = view(y, TESSERA_F32, {2, 8});
        return tessera_comm_all_gather(comm, &a, &b, 1, stream);
      });
      collect(4, [&](void *x, void *y) {
        tessera_tensor a = view(x, TESSERA_F32, {2, 4});
        tessera_tensor b = view(y, TESSERA_F32, {1, 4});
        return tessera_comm_reduce_scatter(comm, &a, &b, 0, stream);
      });
      collect(8, [&](void *x, void *y) {
        tessera_tensor a = view(x, TESSERA_F32, {2, 4});
        tessera_tensor b = view(y, TESSERA_F32, {4, 2});
        return tessera_comm_all_to_all(comm, &a, &b, 1, 0, stream);
      });
      cudaStreamDestroy(stream);
      std::lock_guard<std::mutex> lock(mutex);
      (staged ? device : host)[static_cast<size_t>(comms.rank)] = results;
      return 0;
    });
  };
  run(hostWorld, false);
  run(deviceWorld, true);
  for (size_t rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(host[rank].size(), 4u);
    EXPECT_EQ(device[rank], host[rank]) << "rank " << rank;
  }
  // all_reduce of [0.25, 1.25, ...] and [100.25, ...]: 100.5 + 2i.
  EXPECT_FLOAT_EQ(host[0][0][3], 106.5f);
}

// Tests that a host scalar agreed over the staged world, and host tensors
// gathered over a staged axis, arrive as on the host: the device comm's
// staging through device buffers is invisible to the caller.
TEST(DeviceStagedComms, HostValuesTravelThroughDeviceBuffers) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU";
  ThreadWorld world(MeshShape{2}, 30);
  std::mutex mutex;
  std::vector<double> sums(2);
  std::vector<std::vector<float>> gathered(2);
  runThreadRanks(world, [&](const RankComms &comms) {
    EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
    DeviceStagedComms staged(comms);
    ScalarAgreement agreement(staged.comms().world, nullptr);
    double sum = agreement.sum(comms.rank + 1.5);
    std::vector<float> block = inputOf(comms.rank), whole(16);
    tessera_tensor x = view(block.data(), TESSERA_F32, {8});
    tessera_tensor y = view(whole.data(), TESSERA_F32, {16});
    allGatherHostTensors(staged.comms().axes[0], x, y, 0, nullptr);
    std::lock_guard<std::mutex> lock(mutex);
    sums[static_cast<size_t>(comms.rank)] = sum;
    gathered[static_cast<size_t>(comms.rank)] = whole;
    return 0;
  });
  std::vector<float> expected = inputOf(0), second = inputOf(1);
  expected.insert(expected.end(), second.begin(), second.end());
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(sums[rank], 4.0) << "rank " << rank;
    EXPECT_EQ(gathered[rank], expected) << "rank " << rank;
  }
}

/// Holds up the stream it is enqueued on, so that what follows is late.
void CUDART_CB holdUpTheStream(void *) {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

/// Rank r's gradient element e: sums over 4 ranks stay exact in f32.
float gradientOf(int32_t rank, int64_t element) {
  return static_cast<float>(rank * 4096 + element % 1024);
}

// Tests the gradient reduction of --thread-ranks on one GPU: 4 ranks share
// device 0, each reducer on its rank's comm stream over the staged comms.
// The compute stream's gradients arrive late (a host function holds the
// stream up before their upload), so a reduction that did not wait for the
// compute stream would read the stale buffer; reading the result on the
// compute stream after finish() needs the compute stream to wait for the
// reduction. ZeRO-0's all-reduce leaves the sum everywhere, ZeRO-1's
// reduce-scatter each rank's shard of it.
TEST(DeviceStagedComms, GradientReducerOnThreadRanksCommStreams) {
  if (!haveGpu())
    GTEST_SKIP() << "no GPU";
  constexpr int32_t kRanks = 4;
  const std::vector<int64_t> counts = {300, 5, 1000, 77};
  for (ReduceMode mode : {ReduceMode::AllReduce, ReduceMode::ReduceScatter}) {
    const bool sharded = mode == ReduceMode::ReduceScatter;
    const GradientLayout layout = GradientLayout::plan(
        counts, /*bucketElements=*/512, sharded ? kRanks : 1, 128);
    const auto total = static_cast<size_t>(layout.totalElements());
    ThreadWorld world(MeshShape{kRanks}, 30);
    std::mutex mutex;
    std::vector<std::vector<float>> reduced(kRanks);
    runThreadRanks(world, [&](const RankComms &comms) {
      EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
      cudaStream_t compute = nullptr, commStream = nullptr;
      EXPECT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking),
                cudaSuccess);
      EXPECT_EQ(cudaStreamCreateWithFlags(&commStream, cudaStreamNonBlocking),
                cudaSuccess);
      DeviceStagedComms staged(comms);
      void *pinned = nullptr;
      EXPECT_EQ(cudaMallocHost(&pinned, total * sizeof(float)), cudaSuccess);
      auto *upload = static_cast<float *>(pinned);
      std::fill(upload, upload + total, 0.0f);
      for (const GradientSlot &slot : layout.parameters())
        for (int64_t e = slot.offset; e < slot.offset + slot.elements; ++e)
          upload[e] = gradientOf(comms.rank, e);
      // Stale values, which a reduction ahead of the gradients would sum.
      DeviceFloats gradients(std::vector<float>(total, -1.0f));
      std::vector<float> result(total);
      {
        GradientReducer reducer(staged.comms().world, layout, gradients.data,
                                TESSERA_F32, mode, compute, commStream);
        EXPECT_EQ(cudaLaunchHostFunc(compute, holdUpTheStream, nullptr),
                  cudaSuccess);
        EXPECT_EQ(cudaMemcpyAsync(gradients.data, upload,
                                  total * sizeof(float),
                                  cudaMemcpyHostToDevice, compute),
                  cudaSuccess);
        // As the backward pass announces them: the last parameter first.
        for (auto p = static_cast<int32_t>(counts.size()) - 1; p >= 0; --p)
          reducer.onGradientReady(p);
        reducer.finish();
        EXPECT_EQ(cudaMemcpyAsync(result.data(), gradients.data,
                                  total * sizeof(float),
                                  cudaMemcpyDeviceToHost, compute),
                  cudaSuccess);
        EXPECT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
      }
      cudaFreeHost(pinned);
      cudaStreamDestroy(commStream);
      cudaStreamDestroy(compute);
      std::lock_guard<std::mutex> lock(mutex);
      reduced[static_cast<size_t>(comms.rank)] = result;
      return 0;
    });
    auto sum = [&](int64_t element) {
      float value = 0;
      for (int32_t r = 0; r < kRanks; ++r)
        value += gradientOf(r, element);
      return value;
    };
    for (int32_t rank = 0; rank < kRanks; ++rank) {
      const std::vector<float> &result = reduced[static_cast<size_t>(rank)];
      ASSERT_EQ(result.size(), total);
      int64_t checked = 0;
      if (sharded) {
        for (const ShardSegment &segment : layout.shardSegments(rank))
          for (int64_t e = segment.bufferOffset;
               e < segment.bufferOffset + segment.elements; ++e, ++checked)
            ASSERT_EQ(result[static_cast<size_t>(e)], sum(e))
                << "ZeRO-1, rank " << rank << ", element " << e;
      } else {
        for (const GradientSlot &slot : layout.parameters())
          for (int64_t e = slot.offset; e < slot.offset + slot.elements;
               ++e, ++checked)
            ASSERT_EQ(result[static_cast<size_t>(e)], sum(e))
                << "ZeRO-0, rank " << rank << ", element " << e;
      }
      EXPECT_GT(checked, 0) << "rank " << rank;
    }
  }
}

} // namespace
