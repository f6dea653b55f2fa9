//===- OffloadedOptimizerCudaTest.cpp - --offload optimizer's transfers ---===//
//
// CudaOffloadedOptimizer against the resident optimizer it replaces: the
// same flat layout (a parameter read as its master, two read as bf16
// copies, one of them several chunks long, zero gaps), the same gradients
// on the GPU, three AdamW steps each. The host's masters and moments must
// equal the GPU's multi-tensor AdamW's bit for bit (both compute
// tessera_cpu_adamw's arithmetic without FMA contraction), and what the
// step reads on the GPU (the copies, the mirrored master) too, ranges cut
// small so that several are pipelined and, a chunk a range, more ranges
// than staging slots. Label gpu: skipped without one.
//
//===----------------------------------------------------------------------===//

#include "CudaOffloadedOptimizer.h"
#include "OffloadTestLayout.h"

#include "tessera/runtime/cpu_kernels.h"
#include "tessera/runtime/cuda_optimizer.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

using namespace tessera::train;

namespace {

bool gpuAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    if (!gpuAvailable())                                                       \
      GTEST_SKIP() << "no CUDA device";                                        \
  } while (0)

std::vector<float> randomFlat(const ParameterLayout &layout, uint32_t seed,
                              float low, float high) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> draw(low, high);
  std::vector<float> values(static_cast<size_t>(layout.totalElements()), 0.0f);
  for (int32_t p = 0; p < layout.size(); ++p)
    for (int64_t e = 0; e < layout.count(p); ++e)
      values[static_cast<size_t>(layout.offset(p) + e)] = draw(random);
  return values;
}

template <typename T> T *upload(const std::vector<T> &values) {
  T *device = nullptr;
  EXPECT_EQ(
      cudaMalloc(reinterpret_cast<void **>(&device), values.size() * sizeof(T)),
      cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, values.data(), values.size() * sizeof(T),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  return device;
}

template <typename T> std::vector<T> download(const T *device, size_t count) {
  std::vector<T> values(count);
  EXPECT_EQ(cudaMemcpy(values.data(), device, count * sizeof(T),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  return values;
}

void expectBitEqual(const void *actual, const void *expected, size_t bytes,
                    const char *what) {
  EXPECT_EQ(std::memcmp(actual, expected, bytes), 0)
      << what << " differ from the resident optimizer's";
}

/// Three AdamW steps each way, the offloaded one in ranges of about
/// `rangeElements`.
void expectTheResidentOptimizersBits(int64_t rangeElements) {
  tessera_program program = offload_test::program();
  ParameterLayout layout(program);
  const size_t total = static_cast<size_t>(layout.totalElements());
  const std::vector<tessera_tensor_chunk> chunks =
      offload_test::placedChunks(layout);
  const int64_t copyElements = offload_test::kCopyElements;
  const std::vector<float> masters = randomFlat(layout, 1, -1.0f, 1.0f);
  // bf16 gradients: the top half of random f32s (zero in the gaps).
  const std::vector<float> values = randomFlat(layout, 2, -1.0f, 1.0f);
  std::vector<uint16_t> gradients(total);
  for (size_t i = 0; i < total; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof(bits));
    gradients[i] = static_cast<uint16_t>(bits >> 16);
  }
  uint16_t *deviceGradients = upload(gradients);

  // The resident optimizer: masters and moments on the GPU.
  float *residentMasters = upload(masters);
  float *residentM = upload(std::vector<float>(total, 0.0f));
  float *residentV = upload(std::vector<float>(total, 0.0f));
  uint16_t *residentCopies =
      upload(std::vector<uint16_t>(static_cast<size_t>(copyElements), 0));
  tessera_tensor_chunk *deviceChunks = upload(chunks);

  // The offloaded one, in ranges of one or two chunks.
  uint16_t *offloadCopies =
      upload(std::vector<uint16_t>(static_cast<size_t>(copyElements), 0));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    CudaOffloadedOptimizer offload(layout, chunks, TESSERA_BF16, offloadCopies,
                                   copyElements, TESSERA_BF16, stream,
                                   rangeElements);
    std::memcpy(offload.masters(), masters.data(), total * sizeof(float));
    offload.uploadWeights();
    for (int64_t step = 1; step <= 3; ++step) {
      AdamWUpdate update;
      update.step = step;
      update.learningRate = 1e-3;
      update.beta1 = 0.9;
      update.beta2 = 0.95;
      update.epsilon = 1e-8;
      update.weightDecay = 0.1;
      update.gradientScale = 0.5;
      ASSERT_EQ(tessera_cuda_multi_tensor_adamw(
                    residentMasters, deviceGradients, TESSERA_BF16, residentM,
                    residentV, residentCopies, TESSERA_BF16, deviceChunks,
                    static_cast<int32_t>(chunks.size()), step, 1e-3, 0.9, 0.95,
                    1e-8, 0.1, 0.5, nullptr, nullptr),
                0)
          << tessera_cuda_last_error();
      offload.startGradientDownload(deviceGradients);
      offload.update(update, deviceGradients);
      EXPECT_EQ(offload.nonFiniteParameter(), -1);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      offload.endStep();
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> expectedMasters = download(residentMasters, total);
    expectBitEqual(offload.masters(), expectedMasters.data(),
                   total * sizeof(float), "the masters");
    expectBitEqual(offload.firstMoments(), download(residentM, total).data(),
                   total * sizeof(float), "the first moments");
    expectBitEqual(offload.secondMoments(), download(residentV, total).data(),
                   total * sizeof(float), "the second moments");
    expectBitEqual(
        download(offloadCopies, static_cast<size_t>(copyElements)).data(),
        download(residentCopies, static_cast<size_t>(copyElements)).data(),
        static_cast<size_t>(copyElements) * 2, "the compute copies");
    // wte, read as its master, is mirrored on the GPU.
    const std::vector<float> mirror =
        download(static_cast<const float *>(offload.mirrorOf(0)), 100000);
    expectBitEqual(mirror.data(), expectedMasters.data(),
                   100000 * sizeof(float), "the mirrored master");
    EXPECT_EQ(offload.mirrorOf(1), nullptr);
  }
  cudaStreamDestroy(stream);
  for (void *memory :
       {static_cast<void *>(deviceGradients),
        static_cast<void *>(residentMasters), static_cast<void *>(residentM),
        static_cast<void *>(residentV), static_cast<void *>(residentCopies),
        static_cast<void *>(deviceChunks), static_cast<void *>(offloadCopies)})
    cudaFree(memory);
}

// Three ranges, fewer than the staging slots.
TEST(OffloadedOptimizerCuda, EqualsTheResidentOptimizerBitForBit) {
  REQUIRE_GPU();
  expectTheResidentOptimizersBits(100000);
}

// A range a chunk: six ranges through four staging slots, each slot reused
// within a step (the download into a slot after its range's AdamW, the
// copies written after the previous upload from it).
TEST(OffloadedOptimizerCuda, StagingSlotsAreReusedWithinAStep) {
  REQUIRE_GPU();
  expectTheResidentOptimizersBits(1);
}

// TESSERA_OFFLOAD_PINNED_MOMENTS=0: the moments pageable (the A/B of the
// host AdamW's rate; pinned is the default), the same bits; the pinned
// moments of the default are unpinned before they are freed (the tests
// above).
TEST(OffloadedOptimizerCuda, PageableMomentsGiveTheSameBits) {
  REQUIRE_GPU();
  ASSERT_EQ(setenv("TESSERA_OFFLOAD_PINNED_MOMENTS", "0", 1), 0);
  expectTheResidentOptimizersBits(100000);
  unsetenv("TESSERA_OFFLOAD_PINNED_MOMENTS");
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

} // namespace
