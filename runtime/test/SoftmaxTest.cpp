//===- SoftmaxTest.cpp - tessera_cpu_softmax and its gradient -------------===//

#include "TestUtil.h"

using namespace tessera_test;

namespace {

TEST(Softmax, AlongAMiddleAxis) {
  Tensor x = randomTensor({2, 3, 4}, 1, -3, 3);
  Tensor y(TESSERA_F32, {2, 3, 4});
  EXPECT_KERNEL_OK(tessera_cpu_softmax(x.get(), y.get(), 1));
  for (int64_t o = 0; o < 2; ++o) {
    for (int64_t i = 0; i < 4; ++i) {
      double sum = 0;
      for (int64_t a = 0; a < 3; ++a)
        sum += std::exp(static_cast<double>(x.at((o * 3 + a) * 4 + i)));
      for (int64_t a = 0; a < 3; ++a)
        EXPECT_NEAR(y.at((o * 3 + a) * 4 + i),
                    std::exp(static_cast<double>(x.at((o * 3 + a) * 4 + i))) /
                        sum,
                    1e-6);
    }
  }
}

TEST(Softmax, LargeLogitsDoNotOverflow) {
  Tensor x = Tensor::floats({3}, {1000.0f, 1000.0f, -1000.0f});
  Tensor y(TESSERA_F32, {3});
  EXPECT_KERNEL_OK(tessera_cpu_softmax(x.get(), y.get(), 0));
  EXPECT_EQ(y.values(), (std::vector<float>{0.5f, 0.5f, 0.0f}));
}

TEST(SoftmaxGrad, MatchesFiniteDifferences) {
  for (int64_t axis : {1, 2}) {
    Shape shape = {2, 3, 4};
    Tensor x = randomTensor(shape, 2, -2, 2);
    std::vector<float> weights = randomFloats(24, 3);
    Tensor dy = Tensor::floats(shape, weights);
    Tensor y(TESSERA_F32, shape), dx(TESSERA_F32, shape);
    EXPECT_KERNEL_OK(tessera_cpu_softmax(x.get(), y.get(), axis));
    EXPECT_KERNEL_OK(
        tessera_cpu_softmax_grad(y.get(), dy.get(), dx.get(), axis));
    auto objective = [&] {
      EXPECT_KERNEL_OK(tessera_cpu_softmax(x.get(), y.get(), axis));
      return weightedSum(y, weights);
    };
    expectGradientNear(dx, numericGradient(x, objective),
                       "axis " + std::to_string(axis));
  }
}

TEST(Softmax, RejectsAnAxisOutOfRange) {
  Tensor x(TESSERA_F32, {2, 3}), y(TESSERA_F32, {2, 3});
  EXPECT_NE(tessera_cpu_softmax(x.get(), y.get(), 2), 0);
  EXPECT_NE(
      std::string(tessera_cpu_last_error()).find("axis 2 is outside [0, 2)"),
      std::string::npos);
}

} // namespace
