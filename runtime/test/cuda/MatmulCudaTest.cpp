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

TEST(MatmulCuda, MisalignedLeadingDimsGoThroughPaddedScratch) {
  REQUIRE_GPU();
  // 77 and 1003 elements are not 16-byte multiples in any dtype (the
  // vocabulary-sized logits' case): misaligned operands and y are copied to
  // padded scratch around the product, transposed or not.
  uint32_t seed = 30;
  for (auto [dtype, outputType] : {std::pair{TESSERA_F32, TESSERA_F32},
                                   {TESSERA_BF16, TESSERA_BF16},
                                   {TESSERA_BF16, TESSERA_F32}})
    for (bool transposeA : {false, true})
      for (bool transposeB : {false, true}) {
        SCOPED_TRACE(std::to_string(dtype) + " -> " +
                     std::to_string(outputType) + " transposes " +
                     std::to_string(transposeA) + std::to_string(transposeB));
        Shape aShape = transposeA ? Shape{77, 1000} : Shape{1000, 77};
        Shape bShape = transposeB ? Shape{1003, 77} : Shape{77, 1003};
        checkMatmul(dtype, outputType, aShape, bShape, {1000, 1003}, transposeA,
                    transposeB, seed);
        seed += 2;
      }
  // The same scratch slot serves a smaller product next.
  checkMatmul(TESSERA_BF16, TESSERA_BF16, {1000, 1001}, {1001, 77}, {1000, 77},
              false, false, seed);
}

TEST(MatmulCuda, VocabularySizedPaddingMovesEveryElement) {
  REQUIRE_GPU();
  // Products over a 50257-long inner extent (the LM head's backward): every
  // operand goes through padded scratch. Small integers make every sum exact
  // in f32 and f64 whatever the order, so one element lost or duplicated by
  // the padded copies shows as an exact mismatch, not as rounding.
  auto integers = [](int32_t dtype, const Shape &shape, uint32_t seed) {
    std::vector<float> values = randomFloats(countOf(shape), seed, -3.5f, 3.5f);
    for (float &value : values)
      value = std::round(value);
    return Tensor::floats(shape, values, dtype);
  };
  uint32_t seed = 60;
  for (int32_t dtype : {TESSERA_F32, TESSERA_F64, TESSERA_BF16})
    for (bool transposeA : {false, true}) {
      SCOPED_TRACE(std::to_string(dtype) + " transposeA " +
                   std::to_string(transposeA));
      Shape aShape = transposeA ? Shape{50257, 61} : Shape{61, 50257};
      int32_t outputType = dtype == TESSERA_BF16 ? TESSERA_F32 : dtype;
      Tensor a = integers(dtype, aShape, seed++);
      Tensor b = integers(dtype, {50257, 64}, seed++);
      Tensor expected(outputType, {61, 64});
      EXPECT_CPU_KERNEL_OK(tessera_cpu_matmul(a.get(), b.get(), expected.get(),
                                              transposeA, false));
      DeviceTensor da(a), db(b), dy(outputType, {61, 64});
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_matmul(da.get(), db.get(), dy.get(),
                                                transposeA, false, nullptr));
      expectDeviceClean();
      expectTensorsNear(dy.download(), expected, 0, 0, "matmul");
    }
  // A vocabulary-wide y (copied back out of scratch) next to it.
  Tensor x = integers(TESSERA_F32, {67, 64}, seed++);
  Tensor w = integers(TESSERA_F32, {50257, 64}, seed++);
  Tensor expected(TESSERA_F32, {67, 50257});
  EXPECT_CPU_KERNEL_OK(
      tessera_cpu_matmul(x.get(), w.get(), expected.get(), false, true));
  DeviceTensor dx(x), dw(w), dy(TESSERA_F32, {67, 50257});
  EXPECT_CUDA_KERNEL_OK(
      tessera_cuda_matmul(dx.get(), dw.get(), dy.get(), false, true, nullptr));
  expectDeviceClean();
  expectTensorsNear(dy.download(), expected, 0, 0, "logits");
}

void checkLinear(int32_t dtype, bool withBias, bool transposeWeight,
                 uint32_t seed, const Shape &xShape = {2, 5, 48},
                 int64_t columns = 40) {
  int64_t inner = xShape.back();
  Shape weightShape =
      transposeWeight ? Shape{columns, inner} : Shape{inner, columns};
  Shape yShape = xShape;
  yShape.back() = columns;
  Tensor x = randomTensor(dtype, xShape, seed);
  Tensor weight = randomTensor(dtype, weightShape, seed + 1);
  Tensor bias = randomTensor(dtype, {columns}, seed + 2);
  Tensor expected(dtype, yShape);
  EXPECT_CPU_KERNEL_OK(tessera_cpu_linear(x.get(), weight.get(),
                                          withBias ? bias.get() : nullptr,
                                          expected.get(), transposeWeight));
  DeviceTensor dx(x), dw(weight), db(bias), dy(dtype, yShape);
  EXPECT_CUDA_KERNEL_OK(
      tessera_cuda_linear(dx.get(), dw.get(), withBias ? db.get() : nullptr,
                          dy.get(), transposeWeight, nullptr));
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

TEST(MatmulCuda, LinearWithMisalignedRowsKeepsTheBias) {
  REQUIRE_GPU();
  // A padded y keeps the fused bias epilogue (f32, bf16, f16) and the
  // bias-rows-then-accumulate path (f64, copied into scratch before beta = 1).
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16, TESSERA_F64})
    for (bool transpose : {false, true}) {
      SCOPED_TRACE(std::to_string(dtype) + " transpose " +
                   std::to_string(transpose));
      checkLinear(dtype, true, transpose, 40 + dtype, {4, 250, 77}, 1003);
    }
}

// The fused GELU calls against the CPU reference: bf16/f16 take cuBLASLt's
// GELU_AUX(_BIAS) and DGELU epilogues (tanh GELU in f32 before the one
// rounding), f32 the separate kernels. GPT-2's MLP shape in small.
void checkLinearGelu(int32_t dtype, bool withBias, uint32_t seed) {
  SCOPED_TRACE("dtype " + std::to_string(dtype) + " bias " +
               std::to_string(withBias));
  Shape xShape = {4, 64, 128}, weightShape = {128, 512},
        preShape = {4, 64, 512}, dyShape = {4, 64, 128},
        projectionShape = {512, 128};
  Tensor x = randomTensor(dtype, xShape, seed, -2.0f, 2.0f);
  Tensor weight = randomTensor(dtype, weightShape, seed + 1, -0.2f, 0.2f);
  Tensor bias = randomTensor(dtype, {512}, seed + 2);
  Tensor dy = randomTensor(dtype, dyShape, seed + 3);
  Tensor projection =
      randomTensor(dtype, projectionShape, seed + 4, -0.2f, 0.2f);
  Tensor pre(dtype, preShape), y(dtype, preShape), dx(dtype, preShape);
  const tessera_tensor *biasArg = withBias ? bias.get() : nullptr;
  EXPECT_CPU_KERNEL_OK(tessera_cpu_linear_gelu(x.get(), weight.get(), biasArg,
                                               pre.get(), y.get(), 0));
  // The output projection's input gradient through the GELU: dy [.., 128]
  // times the [512, 128] weight read transposed.
  EXPECT_CPU_KERNEL_OK(tessera_cpu_linear_dgelu(dy.get(), projection.get(),
                                                pre.get(), dx.get(), 1));
  DeviceTensor gx(x), gw(weight), gb(bias), gdy(dy), gp(projection),
      gpre(dtype, preShape), gy(dtype, preShape), gdx(dtype, preShape);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_linear_gelu(
      gx.get(), gw.get(), withBias ? gb.get() : nullptr, gpre.get(), gy.get(),
      0, nullptr));
  // The GPU's own pre feeds its backward, as in a training step.
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_linear_dgelu(
      gdy.get(), gp.get(), gpre.get(), gdx.get(), 1, nullptr));
  expectDeviceClean();
  double rtol = dtype == TESSERA_F32 ? 1e-4 : toleranceFor(dtype);
  expectTensorsNear(gpre.download(), pre, rtol, rtol, "linear_gelu pre");
  expectTensorsNear(gy.download(), y, rtol, rtol, "linear_gelu y");
  expectTensorsNear(gdx.download(), dx, rtol, rtol, "linear_dgelu dx");
}

TEST(MatmulCuda, LinearGeluAndDgeluMatchTheCpuReference) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16})
    for (bool bias : {false, true})
      checkLinearGelu(dtype, bias, 60 + dtype);
}

// linear_add against the CPU reference: the residual enters the GEMM as C
// (beta = 1), so 16-bit results round once where the CPU rounds twice.
TEST(MatmulCuda, LinearAddMatchesTheCpuReference) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16, TESSERA_F16})
    for (bool withBias : {false, true}) {
      SCOPED_TRACE("dtype " + std::to_string(dtype) + " bias " +
                   std::to_string(withBias));
      Shape xShape = {4, 64, 128}, yShape = {4, 64, 96};
      Tensor x = randomTensor(dtype, xShape, 70 + dtype);
      Tensor weight = randomTensor(dtype, {96, 128}, 71 + dtype, -0.2f, 0.2f);
      Tensor bias = randomTensor(dtype, {96}, 72 + dtype);
      Tensor residual = randomTensor(dtype, yShape, 73 + dtype);
      Tensor y(dtype, yShape);
      const tessera_tensor *biasArg = withBias ? bias.get() : nullptr;
      EXPECT_CPU_KERNEL_OK(tessera_cpu_linear_add(
          x.get(), weight.get(), biasArg, residual.get(), y.get(), 1));
      DeviceTensor gx(x), gw(weight), gb(bias), gr(residual), gy(dtype, yShape);
      EXPECT_CUDA_KERNEL_OK(tessera_cuda_linear_add(
          gx.get(), gw.get(), withBias ? gb.get() : nullptr, gr.get(), gy.get(),
          1, nullptr));
      expectDeviceClean();
      double rtol = dtype == TESSERA_F32 ? 1e-4 : toleranceFor(dtype);
      expectTensorsNear(gy.download(), y, rtol, rtol, "linear_add");
    }
}

// A weight gradient and its bias gradient in one call (cuBLASLt's BGRADA
// epilogue where it has one; the product and a column sum otherwise)
// against the CPU's product and column sums, at a GPT-2 fc shape and odd
// small ones.
TEST(MatmulCuda, MatmulBiasGradMatchesTheCpuReference) {
  REQUIRE_GPU();
  struct Case {
    int32_t dtype;
    int64_t k, m, n;
  };
  for (Case c :
       {Case{TESSERA_BF16, 4096, 768, 3072},
        Case{TESSERA_BF16, 4096, 3072, 768}, Case{TESSERA_BF16, 62, 64, 192},
        Case{TESSERA_F32, 62, 64, 192}, Case{TESSERA_BF16, 30, 7, 5}}) {
    SCOPED_TRACE("dtype " + std::to_string(c.dtype) + " k " +
                 std::to_string(c.k) + " m " + std::to_string(c.m) + " n " +
                 std::to_string(c.n));
    Tensor a = randomTensor(c.dtype, {c.k, c.m}, 80);
    Tensor b = randomTensor(c.dtype, {c.k, c.n}, 81);
    Tensor y(c.dtype, {c.m, c.n}), dbias(c.dtype, {c.n});
    EXPECT_CPU_KERNEL_OK(tessera_cpu_matmul_bias_grad(a.get(), b.get(), y.get(),
                                                      dbias.get(), 1, 0));
    DeviceTensor ga(a), gb(b), gy(c.dtype, {c.m, c.n}), gdbias(c.dtype, {c.n});
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_matmul_bias_grad(
        ga.get(), gb.get(), gy.get(), gdbias.get(), 1, 0, nullptr));
    expectDeviceClean();
    double rtol = c.dtype == TESSERA_F32 ? 1e-4 : toleranceFor(c.dtype);
    expectTensorsNear(gy.download(), y, rtol, rtol, "matmul_bias_grad y");
    expectTensorsNear(gdbias.download(), dbias, rtol, rtol,
                      "matmul_bias_grad dbias");
  }
  DeviceTensor ga(TESSERA_F32, {10, 6}), gb(TESSERA_F32, {10, 4}),
      gy(TESSERA_F32, {6, 4}), gdbias(TESSERA_F32, {4});
  EXPECT_NE(tessera_cuda_matmul_bias_grad(ga.get(), gb.get(), gy.get(),
                                          gdbias.get(), 1, 1, nullptr),
            0);
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

// matmul_add against the CPU reference at a chunked head's weight-gradient
// shape (dl^T h, dl [rows, classes]): into a separate output and into the
// addend itself (the arena's in-place sum), where cuBLASLt reads and writes
// C in one GEMM. The two are each within the dtype's rounding of the CPU,
// not bit-equal to each other: on an H100 (cuBLAS 13.0) the in-place bf16
// sum differs from the separate one by a few units in the last place, the
// same plan and algorithm serving both.
TEST(MatmulCuda, MatmulAddMatchesTheCpuReferenceInPlaceOrNot) {
  REQUIRE_GPU();
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16}) {
    SCOPED_TRACE("dtype " + std::to_string(dtype));
    Shape yShape = {1000, 256};
    Tensor a = randomTensor(dtype, {512, 1000}, 90 + dtype);
    Tensor b = randomTensor(dtype, {512, 256}, 91 + dtype, -0.2f, 0.2f);
    Tensor addend = randomTensor(dtype, yShape, 92 + dtype);
    Tensor y(dtype, yShape);
    EXPECT_CPU_KERNEL_OK(tessera_cpu_matmul_add(a.get(), b.get(), addend.get(),
                                                y.get(), 1, 0));
    DeviceTensor ga(a), gb(b), gaddend(addend), gy(dtype, yShape);
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_matmul_add(
        ga.get(), gb.get(), gaddend.get(), gy.get(), 1, 0, nullptr));
    EXPECT_CUDA_KERNEL_OK(tessera_cuda_matmul_add(
        ga.get(), gb.get(), gaddend.get(), gaddend.get(), 1, 0, nullptr));
    expectDeviceClean();
    double rtol = dtype == TESSERA_F32 ? 1e-4 : toleranceFor(dtype);
    expectTensorsNear(gy.download(), y, rtol, rtol, "matmul_add");
    expectTensorsNear(gaddend.download(), y, rtol, rtol, "in place");
  }
}

// With autotuning on, a shape's first calls time every candidate on the
// call's own buffers: the products must still be the CPU's, and a sum
// written over its addend (which trials would add again and again) must be
// added once. Shapes no other test uses, so that their plans are new here.
TEST(MatmulCuda, AutotunedProductsMatchTheCpuAndAddInPlaceOnce) {
  REQUIRE_GPU();
  tessera_cuda_set_gemm_autotune(1);
  checkMatmul(TESSERA_BF16, TESSERA_BF16, {192, 320}, {320, 448}, {192, 448},
              false, false, 20);
  checkMatmul(TESSERA_F32, TESSERA_F32, {320, 192}, {448, 320}, {192, 448},
              true, true, 21);
  Shape yShape = {448, 192};
  Tensor a = randomTensor(TESSERA_BF16, {320, 448}, 22);
  Tensor b = randomTensor(TESSERA_BF16, {320, 192}, 23, -0.2f, 0.2f);
  Tensor addend = randomTensor(TESSERA_BF16, yShape, 24);
  Tensor y(TESSERA_BF16, yShape);
  EXPECT_CPU_KERNEL_OK(tessera_cpu_matmul_add(a.get(), b.get(), addend.get(),
                                              y.get(), 1, 0));
  DeviceTensor ga(a), gb(b), gaddend(addend), gy(TESSERA_BF16, yShape);
  // In place first (the plan keeps its candidates), then into a fresh
  // output (the trials run there).
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_matmul_add(
      ga.get(), gb.get(), gaddend.get(), gaddend.get(), 1, 0, nullptr));
  DeviceTensor fresh(addend);
  EXPECT_CUDA_KERNEL_OK(tessera_cuda_matmul_add(
      ga.get(), gb.get(), fresh.get(), gy.get(), 1, 0, nullptr));
  expectDeviceClean();
  tessera_cuda_set_gemm_autotune(0);
  double rtol = toleranceFor(TESSERA_BF16);
  expectTensorsNear(gaddend.download(), y, rtol, rtol, "in place");
  expectTensorsNear(gy.download(), y, rtol, rtol, "into a fresh output");
}

} // namespace
