//===- MatmulCudaTest.cpp - cuBLASLt matmul/linear against the CPU --------===//

#include "CudaTestUtil.h"

using namespace tessera_test;

namespace {

void checkMatmul(int32_t dtype, int32_t outputType, const Shape &aShape,
                 const Shape &bShape, const Shape &yShape, bool transposeA,
                 bool transposeB, uint32_t seed) {
  Tensor a = randomTensor(dtype, aShape, seed);
  Tensor b = randomTensor(dtype, bShape, seed + 1);
  Tensor expected(outputType, yShape);
  EXPECT_CPU_KERNEL_OK(tessera_cpu_matmul(a.get(), b.get(), expected.get(),
                                          transposeA, transposeB));
  DeviceTensor da(a), db(b), dy(outputType, yShape);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_matmul(da.get(), db.get(), dy.get(),
                                            transposeA, transposeB, nullptr));
  expectDeviceClean();
  // Inputs are exact in every dtype; only the output rounding differs.
  double rtol = outputType == TESSERA_F32 ? 1e-4 : toleranceFor(outputType);
  expectTensorsNear(dy.download(), expected, rtol, rtol, "matmul");
}

TEST(MatmulCuda, F32Plain) {
  REQUIRE_GPU();
  checkMatmul(TESSERA_F32, TESSERA_F32, {33, 17}, {17, 29}, {33, 29}, false,
              false, 1);
}

TEST(MatmulCuda, F32Transposes) {
  REQUIRE_GPU();
  checkMatmul(TESSERA_F32, TESSERA_F32, {17, 33}, {29, 17}, {33, 29}, true,
              true, 2);
  checkMatmul(TESSERA_F32, TESSERA_F32, {17, 33}, {17, 29}, {33, 29}, true,
              false, 3);
  checkMatmul(TESSERA_F32, TESSERA_F32, {33, 17}, {29, 17}, {33, 29}, false,
              true, 4);
}

TEST(MatmulCuda, StridedBatchAndBroadcastWeight) {
  REQUIRE_GPU();
  checkMatmul(TESSERA_F32, TESSERA_F32, {4, 33, 17}, {4, 17, 29}, {4, 33, 29},
              false, false, 5);
  checkMatmul(TESSERA_F32, TESSERA_F32, {4, 33, 17}, {17, 29}, {4, 33, 29},
              false, false, 6);
  checkMatmul(TESSERA_F32, TESSERA_F32, {1, 33, 17}, {3, 29, 17}, {3, 33, 29},
              false, true, 7);
}

TEST(MatmulCuda, IrregularBroadcastLoopsOverBatches) {
  REQUIRE_GPU();
  // b's batch offsets 0,1,2,0,1,2 are not one stride: one call per batch.
  checkMatmul(TESSERA_F32, TESSERA_F32, {2, 3, 9, 16}, {3, 16, 12},
              {2, 3, 9, 12}, false, false, 8);
  checkMatmul(TESSERA_F32, TESSERA_F32, {2, 1, 9, 16}, {1, 3, 16, 12},
              {2, 3, 9, 12}, false, false, 9);
}

TEST(MatmulCuda, HalfPrecisionsAccumulateInF32) {
  REQUIRE_GPU();
  checkMatmul(TESSERA_BF16, TESSERA_BF16, {3, 64, 128}, {3, 128, 96},
              {3, 64, 96}, false, false, 10);
  checkMatmul(TESSERA_F16, TESSERA_F16, {64, 128}, {96, 128}, {64, 96}, false,
              true, 11);
  checkMatmul(TESSERA_BF16, TESSERA_F32, {64, 128}, {128, 96}, {64, 96}, false,
              false, 12);
}

TEST(MatmulCuda, F64) {
  REQUIRE_GPU();
  checkMatmul(TESSERA_F64, TESSERA_F64, {2, 20, 30}, {2, 30, 10}, {2, 20, 10},
              false, false, 13);
}

void checkLinear(int32_t dtype, bool withBias, bool transposeWeight,
                 uint32_t seed) {
  Shape xShape = {2, 5, 48}, weightShape = {48, 40};
  if (transposeWeight)
    weightShape = {40, 48};
  Tensor x = randomTensor(dtype, xShape, seed);
  Tensor weight = randomTensor(dtype, weightShape, seed + 1);
  Tensor bias = randomTensor(dtype, {40}, seed + 2);
  Tensor expected(dtype, {2, 5, 40});
  EXPECT_CPU_KERNEL_OK(tessera_cpu_linear(x.get(), weight.get(),
                                          withBias ? bias.get() : nullptr,
                                          expected.get(), transposeWeight));
  DeviceTensor dx(x), dw(weight), db(bias), dy(dtype, {2, 5, 40});
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_linear(dx.get(), dw.get(),
                                            withBias ? db.get() : nullptr,
                                            dy.get(), transposeWeight,
                                            nullptr));
  expectDeviceClean();
  double rtol = dtype == TESSERA_F32 ? 1e-4 : toleranceFor(dtype);
  expectTensorsNear(dy.download(), expected, rtol, rtol, "linear");
}

TEST(MatmulCuda, LinearWithAndWithoutBias) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16, TESSERA_F64})
    for (bool bias : {false, true})
      for (bool transpose : {false, true}) {
        SCOPED_TRACE(std::to_string(dtype) + " bias " + std::to_string(bias) +
                     " transpose " + std::to_string(transpose));
        checkLinear(dtype, bias, transpose, 20 + dtype);
      }
}

TEST(MatmulCuda, MismatchedShapesAreErrors) {
  REQUIRE_GPU();
  DeviceTensor a(TESSERA_F32, {4, 5}), b(TESSERA_F32, {6, 7}),
      y(TESSERA_F32, {4, 7});
  EXPECT_NE(tessera_cuda_matmul(a.get(), b.get(), y.get(), 0, 0, nullptr), 0);
  EXPECT_NE(std::string(tessera_cuda_last_error()).find("contracted dims"),
            std::string::npos)
      << tessera_cuda_last_error();
}

} // namespace
