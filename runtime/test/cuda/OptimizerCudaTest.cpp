//===- OptimizerCudaTest.cpp - AdamW, sum of squares, reductions ----------===//

#include "CudaTestUtil.h"

using namespace tessera_test;

namespace {

TEST(OptimizerCuda, AdamWMatchesTheCpuStep) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16}) {
    SCOPED_TRACE("dtype " + std::to_string(dtype));
    Shape shape = {1000, 3};
    Tensor param = randomTensor(dtype, shape, 1);
    Tensor grad = randomTensor(dtype, shape, 2);
    Tensor m = randomTensor(TESSERA_F32, shape, 3, -0.1f, 0.1f);
    Tensor v = randomTensor(TESSERA_F32, shape, 4, 0.0f, 0.01f);
    DeviceTensor gparam(param), ggrad(grad), gm(m), gv(v);
    for (int64_t step = 1; step <= 3; ++step) {
      EXPECT_CPU_KERNEL_OK(tessera_cpu_adamw(param.get(), grad.get(), m.get(),
                                             v.get(), step, 1e-3, 0.9, 0.95,
                                             1e-8, 0.1, 0.5));
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_adamw(
          gparam.get(), ggrad.get(), gm.get(), gv.get(), step, 1e-3, 0.9, 0.95,
          1e-8, 0.1, 0.5, nullptr));
    }
    expectDeviceClean();
    double rtol = dtype == TESSERA_F32 ? 1e-5 : toleranceFor(dtype);
    expectTensorsNear(gparam.download(), param, rtol, 1e-7, "param");
    expectTensorsNear(gm.download(), m, 1e-5, 1e-8, "m");
    expectTensorsNear(gv.download(), v, 1e-5, 1e-10, "v");
  }
}

TEST(OptimizerCuda, SumSquaresAddsIntoADeviceAccumulator) {
  REQUIRE_GPU();
  Tensor a = randomTensor(TESSERA_F32, {100000}, 5);
  Tensor b = randomTensor(TESSERA_BF16, {333}, 6);
  double expected = 1.5;
  EXPECT_CPU_KERNEL_OK(tessera_cpu_sum_squares(a.get(), &expected));
  EXPECT_CPU_KERNEL_OK(tessera_cpu_sum_squares(b.get(), &expected));
  DeviceTensor ga(a), gb(b);
  double *accumulator = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&accumulator), sizeof(double)),
            cudaSuccess);
  double start = 1.5;
  cudaMemcpy(accumulator, &start, sizeof(double), cudaMemcpyHostToDevice);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_sum_squares(ga.get(), accumulator, nullptr));
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_sum_squares(gb.get(), accumulator, nullptr));
  expectDeviceClean();
  double actual = 0.0;
  cudaMemcpy(&actual, accumulator, sizeof(double), cudaMemcpyDeviceToHost);
  cudaFree(accumulator);
  EXPECT_NEAR(actual, expected, 1e-9 * expected);
}

// A thousand blocks' partial sums: the same bits on every call.
TEST(OptimizerCuda, SumSquaresIsBitwiseDeterministic) {
  REQUIRE_GPU();
  Tensor x = randomTensor(TESSERA_F32, {3000000}, 7);
  double expected = 0.0;
  EXPECT_CPU_KERNEL_OK(tessera_cpu_sum_squares(x.get(), &expected));
  DeviceTensor gx(x);
  double *accumulator = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&accumulator), sizeof(double)),
            cudaSuccess);
  std::vector<double> results;
  for (int call = 0; call < 4; ++call) {
    cudaMemset(accumulator, 0, sizeof(double));
    EXPECT_CUDA_KERNEL_OK(
        tessera_cuda_sum_squares(gx.get(), accumulator, nullptr));
    expectDeviceClean();
    double actual = 0.0;
    cudaMemcpy(&actual, accumulator, sizeof(double), cudaMemcpyDeviceToHost);
    results.push_back(actual);
  }
  cudaFree(accumulator);
  EXPECT_NEAR(results[0], expected, 1e-9 * expected);
  for (int call = 1; call < 4; ++call)
    EXPECT_EQ(std::memcmp(&results[call], &results[0], sizeof(double)), 0)
        << results[call] << " vs " << results[0];
}

void checkReduce(int32_t op, int32_t dtype, const Shape &shape,
                 const std::vector<int64_t> &dims, bool keep) {
  SCOPED_TRACE("op " + std::to_string(op) + " dtype " + std::to_string(dtype) +
               " dims " + std::to_string(dims.size()) + " keep " +
               std::to_string(keep));
  Tensor x = dtype == TESSERA_I32 || dtype == TESSERA_I64
                 ? Tensor::integers(shape, [&] {
                     std::vector<int64_t> values(countOf(shape));
                     for (size_t i = 0; i < values.size(); ++i)
                       values[i] = static_cast<int64_t>((i * 37) % 19) - 9;
                     return values;
                   }(), dtype)
                 : randomTensor(dtype, shape, 7, -4.0f, 4.0f);
  Shape yShape;
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    bool reduced =
        std::find(dims.begin(), dims.end(), static_cast<int64_t>(dim)) !=
        dims.end();
    if (!reduced)
      yShape.push_back(shape[dim]);
    else if (keep)
      yShape.push_back(1);
  }
  Tensor expected(dtype, yShape);
  EXPECT_CPU_KERNEL_OK(tessera_cpu_reduce(op, x.get(), expected.get(),
                                          dims.data(),
                                          static_cast<int32_t>(dims.size())));
  DeviceTensor gx(x), gy(dtype, yShape);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_reduce(op, gx.get(), gy.get(),
                                            dims.data(),
                                            static_cast<int32_t>(dims.size()),
                                            nullptr));
  expectDeviceClean();
  double rtol = dtype == TESSERA_F32 ? 1e-6 : dtype == TESSERA_BF16 ? 1e-2 : 0;
  expectTensorsNear(gy.download(), expected, rtol, rtol, "reduce");
}

TEST(OptimizerCuda, ReduceOverAnyDims) {
  REQUIRE_GPU();
  for (int32_t op = TESSERA_REDUCE_SUM; op <= TESSERA_REDUCE_MIN; ++op)
    for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_I64, TESSERA_I32}) {
      checkReduce(op, dtype, {4, 50, 6}, {1}, false);
      checkReduce(op, dtype, {4, 50, 6}, {0, 2}, true);
      checkReduce(op, dtype, {4, 50, 6}, {0, 1, 2}, false);
      checkReduce(op, dtype, {3, 2000}, {1}, true);
    }
}

TEST(OptimizerCuda, ReduceOfManyShortOutputs) {
  REQUIRE_GPU();
  // The launch shapes beside the block per output: a thread per output for
  // a few elements each (the gradient of grouped K/V heads repeated for
  // attention, [B, Hkv, n, T, D] summed over n), and a warp per output for a
  // contiguous last dim with many outputs.
  for (int32_t op = TESSERA_REDUCE_SUM; op <= TESSERA_REDUCE_MIN; ++op)
    for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_I64}) {
      checkReduce(op, dtype, {2, 4, 4, 64, 72}, {2}, false);
      checkReduce(op, dtype, {2, 4, 4, 64, 72}, {2}, true);
      checkReduce(op, dtype, {3, 5000, 7}, {0, 2}, false);
      checkReduce(op, dtype, {4096, 300}, {1}, false);
      checkReduce(op, dtype, {64, 80, 2, 50}, {2, 3}, true);
    }
}

TEST(OptimizerCuda, ReduceOverLeadingDimsSumsColumns) {
  REQUIRE_GPU();
  // The bias-gradient shapes (16384 tokens): the column-sum kernels, with
  // 16-byte loads when the row is a multiple of 16 bytes, element loads else
  // (77 columns), and leading dims of extent 1 or several reduced dims.
  for (int32_t op : {TESSERA_REDUCE_SUM, TESSERA_REDUCE_MEAN})
    for (int32_t dtype : {TESSERA_F32, TESSERA_BF16}) {
      checkReduce(op, dtype, {16384, 768}, {0}, false);
      checkReduce(op, dtype, {8, 2048, 2304}, {0, 1}, true);
      checkReduce(op, dtype, {16384, 77}, {0}, false);
      checkReduce(op, dtype, {1, 4096, 1, 64}, {1}, true);
      checkReduce(op, dtype, {5, 3, 40}, {0, 1}, false);
    }
}

} // namespace
