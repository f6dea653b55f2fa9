//===- DriverKernelsCudaTest.cpp - The driver's GPU kernels vs the CPU ----===//
//
// cuda_optimizer.h's kernels over a flat buffer of three parameters (one of
// them two chunks long, with zero gaps between the slices as the driver lays
// them out), against the CPU reference kernels run per parameter.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"
#include "FlatChunkLayout.h"

#include "tessera/runtime/cuda_optimizer.h"

using namespace tessera_test;

namespace {

/// FlatChunkLayout's three parameters; 0 and 2 have compute copies, at the
/// masters' offsets.
struct FlatLayout : tessera::test::FlatChunkLayout {
  FlatLayout() : FlatChunkLayout({0, -1, 71040}) {}
};

/// A view of `count` elements of `flat` from element `offset`.
tessera_tensor slice(Tensor &flat, int64_t offset, int64_t count) {
  tessera_tensor view = *flat.get();
  view.data = static_cast<unsigned char *>(flat.data()) +
              offset * tessera::cpu::dtypeSize(flat.dtype());
  view.rank = 1;
  view.shape[0] = count;
  return view;
}

/// `values` with the gaps between the layout's slices zeroed.
Tensor withZeroGaps(const FlatLayout &layout, const Tensor &values) {
  std::vector<float> data = values.values();
  std::vector<bool> inSlice(data.size(), false);
  for (size_t t = 0; t < layout.counts.size(); ++t)
    for (int64_t e = 0; e < layout.counts[t]; ++e)
      inSlice[static_cast<size_t>(layout.offsets[t] + e)] = true;
  for (size_t i = 0; i < data.size(); ++i)
    if (!inSlice[i])
      data[i] = 0.0f;
  return Tensor::floats(values.dims(), data, values.dtype());
}

/// The chunk table in device memory.
class DeviceChunks {
public:
  explicit DeviceChunks(const std::vector<tessera_tensor_chunk> &table)
      : count(static_cast<int32_t>(table.size())) {
    size_t bytes = table.size() * sizeof(tessera_tensor_chunk);
    cudaMalloc(reinterpret_cast<void **>(&data), bytes);
    cudaMemcpy(data, table.data(), bytes, cudaMemcpyHostToDevice);
  }
  DeviceChunks(const DeviceChunks &) = delete;
  DeviceChunks &operator=(const DeviceChunks &) = delete;
  ~DeviceChunks() { cudaFree(data); }
  const tessera_tensor_chunk *get() const { return data; }
  int32_t size() const { return count; }

private:
  tessera_tensor_chunk *data = nullptr;
  int32_t count;
};

TEST(DriverKernelsCuda, MultiTensorAdamWMatchesTheCpuStepPerParameter) {
  REQUIRE_GPU();
  FlatLayout layout;
  DeviceChunks chunks(layout.chunks());
  ASSERT_EQ(chunks.size(), 4);
  for (int32_t gradDtype : {TESSERA_F32, TESSERA_BF16}) {
    SCOPED_TRACE("grad dtype " + std::to_string(gradDtype));
    Shape shape = {layout.total};
    Tensor param = withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 11));
    Tensor grad = withZeroGaps(layout, randomTensor(gradDtype, shape, 12));
    Tensor m =
        withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 13, -0.1f, 0.1f));
    Tensor v =
        withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 14, 0.0f, 0.01f));
    DeviceTensor gparam(param), ggrad(grad), gm(m), gv(v);
    for (int64_t step = 1; step <= 3; ++step) {
      for (size_t t = 0; t < layout.counts.size(); ++t) {
        tessera_tensor p = slice(param, layout.offsets[t], layout.counts[t]);
        tessera_tensor g = slice(grad, layout.offsets[t], layout.counts[t]);
        tessera_tensor mt = slice(m, layout.offsets[t], layout.counts[t]);
        tessera_tensor vt = slice(v, layout.offsets[t], layout.counts[t]);
        EXPECT_CPU_KERNEL_OK(
            tessera_cpu_adamw(&p, &g, &mt, &vt, step, 1e-3, 0.9, 0.95, 1e-8,
                              layout.decays[t] ? 0.1 : 0.0, 0.5));
      }
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_multi_tensor_adamw(
          static_cast<float *>(gparam.get()->data), ggrad.get()->data,
          gradDtype, static_cast<float *>(gm.get()->data),
          static_cast<float *>(gv.get()->data), nullptr, TESSERA_BF16,
          chunks.get(), chunks.size(), step, 1e-3, 0.9, 0.95, 1e-8, 0.1, 0.5,
          nullptr, nullptr));
    }
    expectDeviceClean();
    // Bit for bit (no FMA contraction on the GPU: what lets an offloaded
    // optimizer's host AdamW reproduce a resident run). The gaps are zero
    // on both sides: nothing writes them.
    expectSameBits(gparam.download(), param, "param");
    expectSameBits(gm.download(), m, "m");
    expectSameBits(gv.download(), v, "v");
  }
}

// Chunks whose state_offset places their masters and moments in a compact
// buffer (a ZeRO-1 rank's shard: parameter 1's second chunk and parameter
// 2) are updated bit for bit as the whole buffers' launch updates them,
// the gradient read at their offset in the whole flat buffer, and their
// compute copies rounded from the compact masters.
TEST(DriverKernelsCuda, MultiTensorAdamWReadsACompactShardsState) {
  REQUIRE_GPU();
  FlatLayout layout;
  std::vector<tessera_tensor_chunk> whole = layout.chunks();
  ASSERT_EQ(whole.size(), 4u);
  std::vector<tessera_tensor_chunk> shard = {whole[2], whole[3]};
  int64_t next = 0;
  for (tessera_tensor_chunk &chunk : shard) {
    chunk.state_offset = next;
    next += (chunk.count + 127) / 128 * 128;
  }
  Shape shape = {layout.total};
  Tensor param = withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 21));
  Tensor grad = withZeroGaps(layout, randomTensor(TESSERA_BF16, shape, 22));
  Tensor m =
      withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 23, -0.1f, 0.1f));
  Tensor v =
      withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 24, 0.0f, 0.01f));
  auto pack = [&](const std::vector<float> &flat) {
    std::vector<float> compact(static_cast<size_t>(next), 0.0f);
    for (const tessera_tensor_chunk &chunk : shard)
      std::copy_n(flat.begin() + chunk.offset, chunk.count,
                  compact.begin() + chunk.state_offset);
    return Tensor::floats({next}, compact, TESSERA_F32);
  };
  DeviceTensor wholeParam(param), wholeM(m), wholeV(v), deviceGrad(grad);
  DeviceTensor shardParam(pack(param.values())), shardM(pack(m.values())),
      shardV(pack(v.values()));
  Tensor copies = Tensor::floats(shape, std::vector<float>(
                                            static_cast<size_t>(layout.total),
                                            0.0f),
                                 TESSERA_BF16);
  DeviceTensor shardCopies(copies), rounded(copies);
  DeviceChunks wholeChunks(whole), shardChunks(shard);
  for (int64_t step = 1; step <= 2; ++step) {
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_multi_tensor_adamw(
        static_cast<float *>(wholeParam.get()->data), deviceGrad.get()->data,
        TESSERA_BF16, static_cast<float *>(wholeM.get()->data),
        static_cast<float *>(wholeV.get()->data), nullptr, TESSERA_BF16,
        wholeChunks.get(), wholeChunks.size(), step, 1e-3, 0.9, 0.95, 1e-8,
        0.1, 0.5, nullptr, nullptr));
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_multi_tensor_adamw(
        static_cast<float *>(shardParam.get()->data), deviceGrad.get()->data,
        TESSERA_BF16, static_cast<float *>(shardM.get()->data),
        static_cast<float *>(shardV.get()->data), shardCopies.get()->data,
        TESSERA_BF16, shardChunks.get(), shardChunks.size(), step, 1e-3, 0.9,
        0.95, 1e-8, 0.1, 0.5, nullptr, nullptr));
  }
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_round_chunk_copies(
      static_cast<const float *>(shardParam.get()->data),
      rounded.get()->data, TESSERA_BF16, shardChunks.get(),
      shardChunks.size(), nullptr));
  expectDeviceClean();
  expectSameBits(shardParam.download(), pack(wholeParam.download().values()),
                 "a shard's master");
  expectSameBits(shardM.download(), pack(wholeM.download().values()),
                 "a shard's first moment");
  expectSameBits(shardV.download(), pack(wholeV.download().values()),
                 "a shard's second moment");
  // Chunks with copy_offset = offset (the copies at the gradients'
  // offsets, as a sharded backend places them).
  expectSameBits(shardCopies.download(), rounded.download(),
                 "the copies AdamW rounded");
}

// The compute copies AdamW writes are its updated masters rounded to
// nearest even, bit for bit what tessera_cpu_cast makes of them, only for
// the chunks that have one; tessera_cuda_round_chunk_copies makes the same
// from the masters alone.
TEST(DriverKernelsCuda, MultiTensorAdamWRoundsTheComputeCopies) {
  REQUIRE_GPU();
  FlatLayout layout;
  DeviceChunks chunks(layout.chunks());
  Shape shape = {layout.total};
  for (int32_t copyDtype : {TESSERA_BF16, TESSERA_F16}) {
    SCOPED_TRACE("copy dtype " + std::to_string(copyDtype));
    DeviceTensor param(
        withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 31)));
    DeviceTensor grad(
        withZeroGaps(layout, randomTensor(TESSERA_BF16, shape, 32)));
    DeviceTensor m(withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 33)));
    DeviceTensor v(withZeroGaps(
        layout, randomTensor(TESSERA_F32, shape, 34, 0.0f, 0.01f)));
    // Sentinel copies: what a chunk without a copy leaves alone.
    Tensor sentinel = Tensor::floats(
        shape, std::vector<float>(static_cast<size_t>(layout.total), 7.0f),
        copyDtype);
    DeviceTensor copies(sentinel), rounded(sentinel);
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_multi_tensor_adamw(
        static_cast<float *>(param.get()->data), grad.get()->data,
        TESSERA_BF16, static_cast<float *>(m.get()->data),
        static_cast<float *>(v.get()->data), copies.get()->data, copyDtype,
        chunks.get(), chunks.size(), 1, 1e-3, 0.9, 0.95, 1e-8, 0.1, 1.0,
        nullptr, nullptr));
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_round_chunk_copies(
        static_cast<const float *>(param.get()->data), rounded.get()->data,
        copyDtype, chunks.get(), chunks.size(), nullptr));
    expectDeviceClean();
    Tensor updated = param.download();
    Tensor expected = sentinel;
    for (size_t t : {size_t(0), size_t(2)}) {
      tessera_tensor from = slice(updated, layout.offsets[t], layout.counts[t]);
      tessera_tensor to = slice(expected, layout.offsets[t], layout.counts[t]);
      EXPECT_CPU_KERNEL_OK(tessera_cpu_cast(&from, &to));
    }
    expectTensorsNear(copies.download(), expected, 0.0, 0.0, "AdamW's copies");
    expectTensorsNear(rounded.download(), expected, 0.0, 0.0,
                      "the masters rounded");
  }
}

// Tests the non-finite flag: 0 after a normal step; after a step whose size
// overflows f32 (lr 3e38), chunk_count - c for the first chunk c written
// non-finite; and zeroed again by the next call.
TEST(DriverKernelsCuda, MultiTensorAdamWFlagsTheFirstNonFiniteChunk) {
  REQUIRE_GPU();
  FlatLayout layout;
  DeviceChunks chunks(layout.chunks());
  Shape shape = {layout.total};
  DeviceTensor param(withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 21)));
  DeviceTensor grad(withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 22)));
  DeviceTensor m(withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 23)));
  DeviceTensor v(
      withZeroGaps(layout, randomTensor(TESSERA_F32, shape, 24, 0.0f, 0.01f)));
  int32_t *flag = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&flag), sizeof(int32_t)),
            cudaSuccess);
  auto step = [&](double lr) {
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_multi_tensor_adamw(
        static_cast<float *>(param.get()->data), grad.get()->data, TESSERA_F32,
        static_cast<float *>(m.get()->data),
        static_cast<float *>(v.get()->data), nullptr, TESSERA_BF16,
        chunks.get(), chunks.size(), 1, lr, 0.9, 0.95, 1e-8, 0.0, 1.0, flag,
        nullptr));
    int32_t value = -1;
    EXPECT_EQ(cudaMemcpy(&value, flag, sizeof value, cudaMemcpyDeviceToHost),
              cudaSuccess);
    return value;
  };
  EXPECT_EQ(step(1e-3), 0);
  EXPECT_EQ(step(3e38), chunks.size());
  cudaMemset(param.get()->data, 0, layout.total * sizeof(float));
  cudaMemset(m.get()->data, 0, layout.total * sizeof(float));
  cudaMemset(v.get()->data, 0, layout.total * sizeof(float));
  EXPECT_EQ(step(1e-3), 0);
  cudaFree(flag);
  expectDeviceClean();
}

TEST(DriverKernelsCuda, MultiTensorAdamWRejectsBadArguments) {
  REQUIRE_GPU();
  float *none = nullptr;
  EXPECT_NE(tessera_cuda_multi_tensor_adamw(none, none, TESSERA_I32, none, none,
                                            nullptr, TESSERA_BF16, nullptr, 0,
                                            1, 1e-3, 0.9, 0.95, 1e-8, 0, 1,
                                            nullptr, nullptr),
            0);
  EXPECT_NE(std::string(tessera_cuda_last_error()).find("grad must be f32"),
            std::string::npos)
      << tessera_cuda_last_error();
  EXPECT_NE(tessera_cuda_multi_tensor_adamw(none, none, TESSERA_F32, none, none,
                                            nullptr, TESSERA_BF16, nullptr, 0,
                                            0, 1e-3, 0.9, 0.95, 1e-8, 0, 1,
                                            nullptr, nullptr),
            0);
  float value = 0;
  EXPECT_NE(tessera_cuda_multi_tensor_adamw(&value, &value, TESSERA_F32,
                                            &value, &value, &value, TESSERA_I32,
                                            nullptr, 0, 1, 1e-3, 0.9, 0.95,
                                            1e-8, 0, 1, nullptr, nullptr),
            0);
  EXPECT_NE(std::string(tessera_cuda_last_error()).find("copies must be f32"),
            std::string::npos)
      << tessera_cuda_last_error();
}

TEST(DriverKernelsCuda, AccumulationCastsAndAddsInF32) {
  REQUIRE_GPU();
  const int64_t count = 100003;
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16}) {
    SCOPED_TRACE("dtype " + std::to_string(dtype));
    Tensor first = randomTensor(dtype, {count}, 21);
    Tensor second = randomTensor(dtype, {count}, 22);
    Tensor expected(TESSERA_F32, {count});
    for (int64_t i = 0; i < count; ++i)
      expected.f32()[i] = first.at(i) + second.at(i);
    DeviceTensor gfirst(first), gsecond(second);
    DeviceTensor accumulator(TESSERA_F32, {count}); // NaN-filled
    float *sums = static_cast<float *>(accumulator.get()->data);
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_accumulate_gradients(
        sums, gfirst.get()->data, dtype, count, 1, nullptr));
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_accumulate_gradients(
        sums, gsecond.get()->data, dtype, count, 0, nullptr));
    expectDeviceClean();
    expectTensorsEqual(accumulator.download(), expected, "accumulator");
  }
}

// The driver's layout, whose chunks start at whole 16-byte packs (read a
// pack a thread), and one whose chunks do not (read an element a thread),
// with tails of every length below a pack.
TEST(DriverKernelsCuda, ChunkSumsOfSquaresMatchTheCpu) {
  REQUIRE_GPU();
  FlatLayout unaligned;
  unaligned.offsets = {3, 1029, 71047};
  unaligned.counts = {1000, 70001, 7};
  for (const FlatLayout &layout : {FlatLayout{}, unaligned}) {
    std::vector<tessera_tensor_chunk> table = layout.chunks();
    DeviceChunks chunks(table);
    for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16}) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " first offset " +
                   std::to_string(layout.offsets[0]));
      Tensor x = randomTensor(dtype, {layout.total}, 31, -2.0f, 2.0f);
      DeviceTensor gx(x);
      DeviceTensor partial(TESSERA_F64, {static_cast<int64_t>(table.size())});
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_chunk_sum_squares(
          gx.get()->data, dtype, chunks.get(), chunks.size(),
          static_cast<double *>(partial.get()->data), nullptr));
      expectDeviceClean();
      Tensor sums = partial.download();
      for (size_t c = 0; c < table.size(); ++c) {
        tessera_tensor view = slice(x, table[c].offset, table[c].count);
        double expected = 0;
        EXPECT_CPU_KERNEL_OK(tessera_cpu_sum_squares(&view, &expected));
        double actual = static_cast<const double *>(sums.data())[c];
        EXPECT_NEAR(actual, expected, 1e-12 * expected) << "chunk " << c;
      }
    }
  }
}

} // namespace
