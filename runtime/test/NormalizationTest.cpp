//===- NormalizationTest.cpp - layer_norm and rms_norm, forward and grad --===//

#include "TestUtil.h"
#include "reference/TorchReferences.h"

using namespace tessera_test;

namespace {

TEST(LayerNorm, MatchesPyTorch) {
  using namespace torch_reference;
  Tensor x =
      Tensor::floats({3, 10}, std::vector<float>(std::begin(layer_norm_x),
                                                 std::end(layer_norm_x)));
  Tensor scale =
      Tensor::floats({10}, std::vector<float>(std::begin(layer_norm_scale),
                                              std::end(layer_norm_scale)));
  Tensor bias =
      Tensor::floats({10}, std::vector<float>(std::begin(layer_norm_bias),
                                              std::end(layer_norm_bias)));
  Tensor y(TESSERA_F32, {3, 10});
  EXPECT_KERNEL_OK(tessera_cpu_layer_norm(x.get(), scale.get(), bias.get(),
                                          y.get(), 1, 1e-5));
  expectAllNear(y.values(), layer_norm_y, std::size(layer_norm_y), 2e-6,
                "layer_norm");
}

TEST(LayerNorm, NormalizesOverTrailingDimsWithoutParameters) {
  Tensor x = randomTensor({2, 3, 4}, 1, -2, 3);
  Tensor y(TESSERA_F32, {2, 3, 4});
  EXPECT_KERNEL_OK(
      tessera_cpu_layer_norm(x.get(), nullptr, nullptr, y.get(), 1, 0.0));
  for (int64_t row = 0; row < 2; ++row) {
    double sum = 0, squares = 0;
    for (int64_t j = 0; j < 12; ++j) {
      sum += y.at(row * 12 + j);
      squares += y.at(row * 12 + j) * y.at(row * 12 + j);
    }
    EXPECT_NEAR(sum / 12, 0.0, 1e-6);
    EXPECT_NEAR(squares / 12, 1.0, 1e-5);
  }
}

TEST(LayerNormGrad, MatchesFiniteDifferences) {
  Shape shape = {2, 3, 4}, normalized = {3, 4};
  Tensor x = randomTensor(shape, 2, -2, 2);
  Tensor scale = randomTensor(normalized, 3, 0.5f, 1.5f);
  Tensor bias = randomTensor(normalized, 4);
  std::vector<float> weights = randomFloats(24, 5);
  Tensor dy = Tensor::floats(shape, weights);
  Tensor y(TESSERA_F32, shape), dx(TESSERA_F32, shape);
  Tensor dscale(TESSERA_F32, normalized), dbias(TESSERA_F32, normalized);
  EXPECT_KERNEL_OK(tessera_cpu_layer_norm_grad(x.get(), scale.get(), dy.get(),
                                               dx.get(), dscale.get(),
                                               dbias.get(), 1, 1e-5));
  auto objective = [&] {
    EXPECT_KERNEL_OK(tessera_cpu_layer_norm(x.get(), scale.get(), bias.get(),
                                            y.get(), 1, 1e-5));
    return weightedSum(y, weights);
  };
  expectGradientNear(dx, numericGradient(x, objective), "dx");
  expectGradientNear(dscale, numericGradient(scale, objective), "dscale");
  expectGradientNear(dbias, numericGradient(bias, objective), "dbias");
}

TEST(LayerNormGrad, WithoutScaleOrBias) {
  Shape shape = {4, 6};
  Tensor x = randomTensor(shape, 6, -2, 2);
  std::vector<float> weights = randomFloats(24, 7);
  Tensor dy = Tensor::floats(shape, weights);
  Tensor y(TESSERA_F32, shape), dx(TESSERA_F32, shape);
  EXPECT_KERNEL_OK(tessera_cpu_layer_norm_grad(
      x.get(), nullptr, dy.get(), dx.get(), nullptr, nullptr, 1, 1e-5));
  auto objective = [&] {
    EXPECT_KERNEL_OK(
        tessera_cpu_layer_norm(x.get(), nullptr, nullptr, y.get(), 1, 1e-5));
    return weightedSum(y, weights);
  };
  expectGradientNear(dx, numericGradient(x, objective), "dx");
}

TEST(LayerNorm, Bf16IsTheF32ResultRounded) {
  Tensor x = Tensor::floats({4, 16}, randomFloats(64, 8, -3, 3), TESSERA_BF16);
  Tensor scale = Tensor::floats({16}, randomFloats(16, 9), TESSERA_BF16);
  Tensor bias = Tensor::floats({16}, randomFloats(16, 10), TESSERA_BF16);
  Tensor y(TESSERA_BF16, {4, 16});
  EXPECT_KERNEL_OK(tessera_cpu_layer_norm(x.get(), scale.get(), bias.get(),
                                          y.get(), 1, 1e-5));
  Tensor xF32 = Tensor::floats({4, 16}, x.values());
  Tensor scaleF32 = Tensor::floats({16}, scale.values());
  Tensor biasF32 = Tensor::floats({16}, bias.values());
  Tensor yF32(TESSERA_F32, {4, 16});
  EXPECT_KERNEL_OK(tessera_cpu_layer_norm(xF32.get(), scaleF32.get(),
                                          biasF32.get(), yF32.get(), 1, 1e-5));
  for (int64_t i = 0; i < 64; ++i)
    EXPECT_EQ(y.at(i),
              tessera::cpu::bf16ToFloat(tessera::cpu::floatToBf16(yF32.at(i))));
}

TEST(LayerNorm, RejectsAScaleOfTheWrongShape) {
  Tensor x(TESSERA_F32, {2, 4}), scale(TESSERA_F32, {5}),
      y(TESSERA_F32, {2, 4});
  EXPECT_NE(
      tessera_cpu_layer_norm(x.get(), scale.get(), nullptr, y.get(), 1, 1e-5),
      0);
  EXPECT_NE(std::string(tessera_cpu_last_error())
                .find("scale has shape [5], expected [4]"),
            std::string::npos)
      << tessera_cpu_last_error();
}

TEST(RmsNorm, MatchesTheFormula) {
  Tensor x = randomTensor({3, 8}, 11, -2, 2);
  Tensor scale = randomTensor({8}, 12);
  Tensor y(TESSERA_F32, {3, 8});
  EXPECT_KERNEL_OK(
      tessera_cpu_rms_norm(x.get(), scale.get(), y.get(), 1, 1e-6));
  for (int64_t row = 0; row < 3; ++row) {
    double meanSquare = 0;
    for (int64_t j = 0; j < 8; ++j)
      meanSquare += x.at(row * 8 + j) * x.at(row * 8 + j) / 8.0;
    for (int64_t j = 0; j < 8; ++j)
      EXPECT_NEAR(
          y.at(row * 8 + j),
          x.at(row * 8 + j) / std::sqrt(meanSquare + 1e-6) * scale.at(j), 1e-6);
  }
}

TEST(RmsNormGrad, MatchesFiniteDifferences) {
  Shape shape = {3, 2, 5}, normalized = {5};
  Tensor x = randomTensor(shape, 13, -2, 2);
  Tensor scale = randomTensor(normalized, 14, 0.5f, 1.5f);
  std::vector<float> weights = randomFloats(30, 15);
  Tensor dy = Tensor::floats(shape, weights);
  Tensor y(TESSERA_F32, shape), dx(TESSERA_F32, shape),
      dscale(TESSERA_F32, normalized);
  EXPECT_KERNEL_OK(tessera_cpu_rms_norm_grad(x.get(), scale.get(), dy.get(),
                                             dx.get(), dscale.get(), 2, 1e-6));
  auto objective = [&] {
    EXPECT_KERNEL_OK(
        tessera_cpu_rms_norm(x.get(), scale.get(), y.get(), 2, 1e-6));
    return weightedSum(y, weights);
  };
  expectGradientNear(dx, numericGradient(x, objective), "dx");
  expectGradientNear(dscale, numericGradient(scale, objective), "dscale");
}

TEST(LayerNormGradAdd, IsTheResidualPlusTheGradient) {
  Shape shape = {3, 16}, normalized = {16};
  Tensor x = randomTensor(shape, 16, -2, 2);
  Tensor scale = randomTensor(normalized, 17, 0.5f, 1.5f);
  Tensor dy = randomTensor(shape, 18);
  Tensor residual = randomTensor(shape, 19);
  Tensor dx(TESSERA_F32, shape), sum(TESSERA_F32, shape);
  Tensor dscale(TESSERA_F32, normalized), dbias(TESSERA_F32, normalized);
  Tensor dscaleFused(TESSERA_F32, normalized),
      dbiasFused(TESSERA_F32, normalized);
  EXPECT_KERNEL_OK(tessera_cpu_layer_norm_grad(x.get(), scale.get(), dy.get(),
                                               dx.get(), dscale.get(),
                                               dbias.get(), 1, 1e-5));
  EXPECT_KERNEL_OK(tessera_cpu_layer_norm_grad_add(
      x.get(), scale.get(), dy.get(), residual.get(), sum.get(),
      dscaleFused.get(), dbiasFused.get(), 1, 1e-5));
  for (int64_t i = 0; i < 48; ++i)
    EXPECT_EQ(sum.at(i), residual.at(i) + dx.at(i)) << i;
  EXPECT_EQ(dscaleFused.values(), dscale.values());
  EXPECT_EQ(dbiasFused.values(), dbias.values());
}

TEST(LayerNormGradAdd, Bf16RoundsTheSumOnce) {
  Shape shape = {2, 16};
  Tensor x = Tensor::floats(shape, randomFloats(32, 20, -2, 2), TESSERA_BF16);
  Tensor dy = Tensor::floats(shape, randomFloats(32, 21), TESSERA_BF16);
  Tensor residual = Tensor::floats(shape, randomFloats(32, 22), TESSERA_BF16);
  Tensor sum(TESSERA_BF16, shape), dxF32(TESSERA_F32, shape);
  EXPECT_KERNEL_OK(tessera_cpu_layer_norm_grad_add(x.get(), nullptr, dy.get(),
                                                   residual.get(), sum.get(),
                                                   nullptr, nullptr, 1, 1e-5));
  Tensor xF32 = Tensor::floats(shape, x.values());
  Tensor dyF32 = Tensor::floats(shape, dy.values());
  EXPECT_KERNEL_OK(tessera_cpu_layer_norm_grad(xF32.get(), nullptr, dyF32.get(),
                                               dxF32.get(), nullptr, nullptr, 1,
                                               1e-5));
  for (int64_t i = 0; i < 32; ++i)
    EXPECT_EQ(sum.at(i), tessera::cpu::bf16ToFloat(tessera::cpu::floatToBf16(
                             residual.at(i) + dxF32.at(i))))
        << i;
}

TEST(LayerNormGradAdd, RejectsAResidualOfTheWrongShape) {
  Tensor x(TESSERA_F32, {2, 4}), dy(TESSERA_F32, {2, 4}),
      residual(TESSERA_F32, {2, 5}), dx(TESSERA_F32, {2, 4});
  EXPECT_NE(tessera_cpu_layer_norm_grad_add(x.get(), nullptr, dy.get(),
                                            residual.get(), dx.get(), nullptr,
                                            nullptr, 1, 1e-5),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error())
                .find("residual has shape [2, 5], expected [2, 4]"),
            std::string::npos)
      << tessera_cpu_last_error();
}

TEST(RmsNormGradAdd, IsTheResidualPlusTheGradient) {
  Shape shape = {4, 8}, normalized = {8};
  Tensor x = randomTensor(shape, 23, -2, 2);
  Tensor scale = randomTensor(normalized, 24, 0.5f, 1.5f);
  Tensor dy = randomTensor(shape, 25);
  Tensor residual = randomTensor(shape, 26);
  Tensor dx(TESSERA_F32, shape), sum(TESSERA_F32, shape);
  Tensor dscale(TESSERA_F32, normalized), dscaleFused(TESSERA_F32, normalized);
  EXPECT_KERNEL_OK(tessera_cpu_rms_norm_grad(x.get(), scale.get(), dy.get(),
                                             dx.get(), dscale.get(), 1, 1e-6));
  EXPECT_KERNEL_OK(tessera_cpu_rms_norm_grad_add(x.get(), scale.get(), dy.get(),
                                                 residual.get(), sum.get(),
                                                 dscaleFused.get(), 1, 1e-6));
  for (int64_t i = 0; i < 32; ++i)
    EXPECT_EQ(sum.at(i), residual.at(i) + dx.at(i)) << i;
  EXPECT_EQ(dscaleFused.values(), dscale.values());
}

} // namespace
