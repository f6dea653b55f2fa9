//===- MatmulTest.cpp - tessera_cpu_matmul and tessera_cpu_linear ---------===//

#include "TestUtil.h"

using namespace tessera_test;

namespace {

/// op(a) @ op(b) for one [rows, inner] x [inner, columns] product, in f64,
/// reading a possibly transposed operand by its storage layout.
std::vector<double> referenceProduct(const float *a, const float *b,
                                     int64_t rows, int64_t inner,
                                     int64_t columns, bool transposeA,
                                     bool transposeB) {
  std::vector<double> y(rows * columns, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < columns; ++j)
      for (int64_t k = 0; k < inner; ++k)
        y[i * columns + j] +=
            static_cast<double>(transposeA ? a[k * rows + i]
                                           : a[i * inner + k]) *
            (transposeB ? b[j * inner + k] : b[k * columns + j]);
  return y;
}

TEST(Matmul, AllTransposeCombinationsWithBatchBroadcast) {
  const int64_t rows = 3, inner = 4, columns = 5;
  for (int transposeA = 0; transposeA < 2; ++transposeA) {
    for (int transposeB = 0; transposeB < 2; ++transposeB) {
      Shape aShape = {2, 1, transposeA ? inner : rows,
                      transposeA ? rows : inner};
      Shape bShape = {3, transposeB ? columns : inner,
                      transposeB ? inner : columns};
      Tensor a = randomTensor(aShape, 1), b = randomTensor(bShape, 2);
      Tensor y(TESSERA_F32, {2, 3, rows, columns});
      EXPECT_KERNEL_OK(tessera_cpu_matmul(a.get(), b.get(), y.get(), transposeA,
                                          transposeB));
      std::vector<float> aValues = a.values(), bValues = b.values();
      for (int64_t outer = 0; outer < 2; ++outer) {
        for (int64_t batch = 0; batch < 3; ++batch) {
          std::vector<double> expected =
              referenceProduct(aValues.data() + outer * rows * inner,
                               bValues.data() + batch * inner * columns, rows,
                               inner, columns, transposeA, transposeB);
          for (int64_t i = 0; i < rows * columns; ++i)
            EXPECT_NEAR(y.at((outer * 3 + batch) * rows * columns + i),
                        expected[i], 1e-5)
                << "transpose_a " << transposeA << " transpose_b "
                << transposeB;
        }
      }
    }
  }
}

TEST(Matmul, RejectsMismatchedInnerDims) {
  Tensor a(TESSERA_F32, {2, 3}), b(TESSERA_F32, {4, 5}), y(TESSERA_F32, {2, 5});
  EXPECT_NE(tessera_cpu_matmul(a.get(), b.get(), y.get(), 0, 0), 0);
  EXPECT_NE(
      std::string(tessera_cpu_last_error()).find("contracted dims differ"),
      std::string::npos);
}

TEST(Linear, MatchesTheProductPlusBias) {
  for (int transposeWeight = 0; transposeWeight < 2; ++transposeWeight) {
    Tensor x = randomTensor({2, 3, 4}, 3);
    Shape weightShape = transposeWeight ? Shape{6, 4} : Shape{4, 6};
    Tensor weight = randomTensor(weightShape, 4);
    Tensor bias = randomTensor({6}, 5);
    Tensor y(TESSERA_F32, {2, 3, 6}), noBias(TESSERA_F32, {2, 3, 6});
    EXPECT_KERNEL_OK(tessera_cpu_linear(x.get(), weight.get(), bias.get(),
                                        y.get(), transposeWeight));
    EXPECT_KERNEL_OK(tessera_cpu_linear(x.get(), weight.get(), nullptr,
                                        noBias.get(), transposeWeight));
    std::vector<float> xValues = x.values(), wValues = weight.values();
    std::vector<double> expected = referenceProduct(
        xValues.data(), wValues.data(), 6, 4, 6, false, transposeWeight);
    for (int64_t row = 0; row < 6; ++row) {
      for (int64_t j = 0; j < 6; ++j) {
        EXPECT_NEAR(noBias.at(row * 6 + j), expected[row * 6 + j], 1e-5);
        EXPECT_NEAR(y.at(row * 6 + j), expected[row * 6 + j] + bias.at(j),
                    1e-5);
      }
    }
  }
}

TEST(Linear, Bf16IsTheF32ResultRounded) {
  Tensor x = Tensor::floats({8, 16}, randomFloats(128, 6), TESSERA_BF16);
  Tensor weight = Tensor::floats({16, 12}, randomFloats(192, 7), TESSERA_BF16);
  Tensor bias = Tensor::floats({12}, randomFloats(12, 8), TESSERA_BF16);
  Tensor y(TESSERA_BF16, {8, 12});
  EXPECT_KERNEL_OK(
      tessera_cpu_linear(x.get(), weight.get(), bias.get(), y.get(), 0));
  Tensor xF32 = Tensor::floats({8, 16}, x.values());
  Tensor weightF32 = Tensor::floats({16, 12}, weight.values());
  Tensor biasF32 = Tensor::floats({12}, bias.values());
  Tensor yF32(TESSERA_F32, {8, 12});
  EXPECT_KERNEL_OK(tessera_cpu_linear(xF32.get(), weightF32.get(),
                                      biasF32.get(), yF32.get(), 0));
  for (int64_t i = 0; i < 96; ++i)
    EXPECT_EQ(y.at(i),
              tessera::cpu::bf16ToFloat(tessera::cpu::floatToBf16(yF32.at(i))));
}

TEST(Linear, RejectsAWeightOfTheWrongShape) {
  Tensor x(TESSERA_F32, {2, 4}), weight(TESSERA_F32, {5, 6}),
      y(TESSERA_F32, {2, 6});
  EXPECT_NE(tessera_cpu_linear(x.get(), weight.get(), nullptr, y.get(), 0), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("does not match weight"),
            std::string::npos);
}

// linear_gelu and linear_dgelu are the two kernels each replaces, in order
// (the lowering fuses them; the CUDA backend makes each one GEMM): the same
// values to the bit, bf16 included.
TEST(LinearGelu, IsTheLinearThenTheGelu) {
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16}) {
    Tensor x = Tensor::floats({2, 3, 8}, randomFloats(48, 9, -2, 2), dtype);
    Tensor weight = Tensor::floats({8, 12}, randomFloats(96, 10), dtype);
    Tensor bias = Tensor::floats({12}, randomFloats(12, 11), dtype);
    Tensor pre(dtype, {2, 3, 12}), y(dtype, {2, 3, 12});
    Tensor expectedPre(dtype, {2, 3, 12}), expectedY(dtype, {2, 3, 12});
    EXPECT_KERNEL_OK(tessera_cpu_linear_gelu(x.get(), weight.get(), bias.get(),
                                             pre.get(), y.get(), 0));
    EXPECT_KERNEL_OK(tessera_cpu_linear(x.get(), weight.get(), bias.get(),
                                        expectedPre.get(), 0));
    EXPECT_KERNEL_OK(tessera_cpu_unary(TESSERA_GELU_TANH, expectedPre.get(),
                                       expectedY.get()));
    EXPECT_EQ(pre.values(), expectedPre.values());
    EXPECT_EQ(y.values(), expectedY.values());
  }
}

TEST(LinearGelu, DgeluIsTheLinearThenTheGeluGradient) {
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16}) {
    Tensor dy = Tensor::floats({6, 5}, randomFloats(30, 12), dtype);
    Tensor weight = Tensor::floats({12, 5}, randomFloats(60, 13), dtype);
    Tensor pre = Tensor::floats({6, 12}, randomFloats(72, 14, -3, 3), dtype);
    Tensor dx(dtype, {6, 12}), product(dtype, {6, 12}),
        expected(dtype, {6, 12});
    EXPECT_KERNEL_OK(tessera_cpu_linear_dgelu(dy.get(), weight.get(), pre.get(),
                                              dx.get(), 1));
    EXPECT_KERNEL_OK(
        tessera_cpu_linear(dy.get(), weight.get(), nullptr, product.get(), 1));
    EXPECT_KERNEL_OK(tessera_cpu_unary_grad(TESSERA_GELU_TANH, pre.get(),
                                            product.get(), expected.get()));
    EXPECT_EQ(dx.values(), expected.values());
  }
}

TEST(MatmulBiasGrad, IsTheProductAndTheColumnSumsOfB) {
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16}) {
    Tensor a = Tensor::floats({10, 6}, randomFloats(60, 30), dtype);
    Tensor b = Tensor::floats({10, 4}, randomFloats(40, 31), dtype);
    Tensor y(dtype, {6, 4}), dbias(dtype, {4});
    Tensor product(dtype, {6, 4}), sums(dtype, {4});
    EXPECT_KERNEL_OK(tessera_cpu_matmul_bias_grad(a.get(), b.get(), y.get(),
                                                  dbias.get(), 1, 0));
    EXPECT_KERNEL_OK(tessera_cpu_matmul(a.get(), b.get(), product.get(), 1, 0));
    const int64_t rows[] = {0};
    EXPECT_KERNEL_OK(
        tessera_cpu_reduce(TESSERA_REDUCE_SUM, b.get(), sums.get(), rows, 1));
    EXPECT_EQ(y.values(), product.values());
    EXPECT_EQ(dbias.values(), sums.values());
  }
}

TEST(MatmulBiasGrad, RejectsATransposedBAndAWrongDbias) {
  Tensor a(TESSERA_F32, {10, 6}), b(TESSERA_F32, {10, 4}),
      y(TESSERA_F32, {6, 4}), dbias(TESSERA_F32, {4}),
      shortBias(TESSERA_F32, {3});
  EXPECT_NE(tessera_cpu_matmul_bias_grad(a.get(), b.get(), y.get(), dbias.get(),
                                         1, 1),
            0);
  EXPECT_NE(
      std::string(tessera_cpu_last_error()).find("must not be transposed"),
      std::string::npos)
      << tessera_cpu_last_error();
  EXPECT_NE(tessera_cpu_matmul_bias_grad(a.get(), b.get(), y.get(),
                                         shortBias.get(), 1, 0),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error())
                .find("dbias has shape [3], expected [4]"),
            std::string::npos)
      << tessera_cpu_last_error();
}

TEST(LinearAdd, IsTheLinearThenTheResidualAdd) {
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16}) {
    Tensor x = Tensor::floats({2, 3, 8}, randomFloats(48, 15), dtype);
    Tensor weight = Tensor::floats({12, 8}, randomFloats(96, 16), dtype);
    Tensor bias = Tensor::floats({12}, randomFloats(12, 17), dtype);
    Tensor residual = Tensor::floats({2, 3, 12}, randomFloats(72, 18), dtype);
    Tensor y(dtype, {2, 3, 12}), product(dtype, {2, 3, 12}),
        expected(dtype, {2, 3, 12});
    EXPECT_KERNEL_OK(tessera_cpu_linear_add(x.get(), weight.get(), bias.get(),
                                            residual.get(), y.get(), 1));
    EXPECT_KERNEL_OK(tessera_cpu_linear(x.get(), weight.get(), bias.get(),
                                        product.get(), 1));
    EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_ADD, product.get(),
                                        residual.get(), expected.get()));
    EXPECT_EQ(y.values(), expected.values());
  }
  Tensor x(TESSERA_F32, {2, 8}), weight(TESSERA_F32, {8, 12}),
      residual(TESSERA_F32, {2, 11}), y(TESSERA_F32, {2, 12});
  EXPECT_NE(tessera_cpu_linear_add(x.get(), weight.get(), nullptr,
                                   residual.get(), y.get(), 0),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("residual"),
            std::string::npos)
      << tessera_cpu_last_error();
}

TEST(LinearGelu, RejectsMismatchedOperandsNamingThem) {
  Tensor dy(TESSERA_F32, {6, 5}), weight(TESSERA_F32, {12, 5}),
      pre(TESSERA_F32, {6, 12}), dx(TESSERA_F32, {6, 11});
  EXPECT_NE(
      tessera_cpu_linear_dgelu(dy.get(), weight.get(), pre.get(), dx.get(), 1),
      0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("dx"), std::string::npos)
      << tessera_cpu_last_error();
  Tensor x(TESSERA_F32, {2, 8}), w(TESSERA_F32, {8, 12}),
      p(TESSERA_F32, {2, 12}), y(TESSERA_F32, {2, 13});
  EXPECT_NE(
      tessera_cpu_linear_gelu(x.get(), w.get(), nullptr, p.get(), y.get(), 0),
      0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("y"), std::string::npos)
      << tessera_cpu_last_error();
}

// Tests matmul_add (tess-chunk-loss-head's weight-gradient sum): the product
// plus the addend, to the bit of a matmul then an add, into a separate
// output and into the addend's own storage.
TEST(MatmulAdd, IsTheProductThenTheAddInPlaceOrNot) {
  for (int32_t dtype : {TESSERA_F32, TESSERA_BF16}) {
    Tensor a = Tensor::floats({10, 6}, randomFloats(60, 21), dtype);
    Tensor b = Tensor::floats({10, 4}, randomFloats(40, 22), dtype);
    Tensor addend = Tensor::floats({6, 4}, randomFloats(24, 23), dtype);
    Tensor product(dtype, {6, 4}), expected(dtype, {6, 4}), y(dtype, {6, 4});
    EXPECT_KERNEL_OK(tessera_cpu_matmul(a.get(), b.get(), product.get(), 1, 0));
    EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_ADD, product.get(),
                                        addend.get(), expected.get()));
    EXPECT_KERNEL_OK(tessera_cpu_matmul_add(a.get(), b.get(), addend.get(),
                                            y.get(), 1, 0));
    EXPECT_EQ(y.values(), expected.values());
    EXPECT_KERNEL_OK(tessera_cpu_matmul_add(a.get(), b.get(), addend.get(),
                                            addend.get(), 1, 0));
    EXPECT_EQ(addend.values(), expected.values());
  }
  Tensor a(TESSERA_F32, {10, 6}), b(TESSERA_F32, {10, 4}),
      addend(TESSERA_F32, {6, 5}), y(TESSERA_F32, {6, 4});
  EXPECT_NE(tessera_cpu_matmul_add(a.get(), b.get(), addend.get(), y.get(), 1,
                                   0),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("addend"),
            std::string::npos)
      << tessera_cpu_last_error();
}

} // namespace
