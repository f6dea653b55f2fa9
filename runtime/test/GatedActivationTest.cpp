//===- GatedActivationTest.cpp - tess.swiglu's CPU kernels -----------------===//

#include "TestUtil.h"

#include <cmath>

using namespace tessera_test;

namespace {

double silu(double x) { return x / (1.0 + std::exp(-x)); }

TEST(Swiglu, IsSiluOfGateTimesUp) {
  Tensor gate = randomTensor({3, 17}, 1, -6, 6), up = randomTensor({3, 17}, 2);
  Tensor y(TESSERA_F32, {3, 17});
  EXPECT_KERNEL_OK(tessera_cpu_swiglu(gate.get(), up.get(), y.get()));
  for (int64_t i = 0; i < y.count(); ++i)
    EXPECT_NEAR(y.at(i), silu(gate.at(i)) * up.at(i), 1e-6) << i;
}

TEST(SwigluGrad, MatchesFiniteDifferences) {
  // L = sum(w * swiglu(gate, up)): dL/dgate and dL/dup against central
  // differences of the forward kernel, in f64.
  const Shape shape = {2, 9};
  Tensor gate = randomTensor(shape, 3, -4, 4), up = randomTensor(shape, 4);
  Tensor dy = randomTensor(shape, 5);
  Tensor dgate(TESSERA_F32, shape), dup(TESSERA_F32, shape);
  EXPECT_KERNEL_OK(tessera_cpu_swiglu_grad(gate.get(), up.get(), dy.get(),
                                           dgate.get(), dup.get()));
  const double h = 1e-4;
  for (int64_t i = 0; i < gate.count(); ++i) {
    double g = gate.at(i), u = up.at(i), w = dy.at(i);
    double numericGate = w * u * (silu(g + h) - silu(g - h)) / (2 * h);
    double numericUp = w * silu(g);
    EXPECT_NEAR(dgate.at(i), numericGate, 1e-5) << i;
    EXPECT_NEAR(dup.at(i), numericUp, 1e-6) << i;
  }
}

TEST(Swiglu, RoundsOnceInBf16) {
  // silu(2) * 3 = 5.28482...: one rounding gives bf16's 5.28125; silu(2)
  // rounded first (1.7578125) then times 3 rounds to 5.28125 too, so use
  // values where the two differ: silu(1.5) * 1.75.
  Tensor gate = Tensor::floats({1}, {1.5f}, TESSERA_BF16);
  Tensor up = Tensor::floats({1}, {1.75f}, TESSERA_BF16);
  Tensor y(TESSERA_BF16, {1});
  EXPECT_KERNEL_OK(tessera_cpu_swiglu(gate.get(), up.get(), y.get()));
  float once = tessera::cpu::bf16ToFloat(
      tessera::cpu::floatToBf16(static_cast<float>(silu(1.5) * 1.75)));
  EXPECT_EQ(y.at(0), once);
}

TEST(Swiglu, RejectsMismatchedOperandsNamingThem) {
  Tensor gate(TESSERA_F32, {2, 4}), up(TESSERA_F32, {2, 5}), y(TESSERA_F32, {2, 4});
  EXPECT_NE(tessera_cpu_swiglu(gate.get(), up.get(), y.get()), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("up"), std::string::npos);
  Tensor same(TESSERA_F32, {2, 4}), wrongDtype(TESSERA_BF16, {2, 4});
  EXPECT_NE(tessera_cpu_swiglu_grad(gate.get(), same.get(), same.get(),
                                    wrongDtype.get(), y.get()),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("dgate"),
            std::string::npos);
}

} // namespace
