//===- GatedActivationTest.cpp - tess.swiglu's CPU kernels, both forms ----===//

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

/// The gate (half 0) or up (half 1) halves of each row of a packed
/// [rows, 2 width] tensor, as a [rows, width] f32 tensor.
Tensor halfOf(const Tensor &packed, int64_t rows, int64_t width, int half) {
  std::vector<float> values;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t col = 0; col < width; ++col)
      values.push_back(packed.at(row * 2 * width + half * width + col));
  return Tensor::floats({rows, width}, values);
}

// Rows of 2F = 2 x 13 (not a multiple of anything a kernel packs by): the
// packed kernels read each row's strided halves exactly as the unpacked
// kernels read two tensors, to the bit.
TEST(PackedSwiglu, MatchesTheUnpackedKernelsOnTheHalves) {
  const int64_t rows = 5, width = 13;
  Tensor packed = randomTensor({rows, 2 * width}, 6, -5, 5);
  Tensor dy = randomTensor({rows, width}, 7);
  Tensor gate = halfOf(packed, rows, width, 0);
  Tensor up = halfOf(packed, rows, width, 1);

  Tensor y(TESSERA_F32, {rows, width}), expected(TESSERA_F32, {rows, width});
  EXPECT_KERNEL_OK(tessera_cpu_packed_swiglu(packed.get(), y.get()));
  EXPECT_KERNEL_OK(tessera_cpu_swiglu(gate.get(), up.get(), expected.get()));
  for (int64_t i = 0; i < y.count(); ++i)
    EXPECT_EQ(y.at(i), expected.at(i)) << i;

  Tensor dpacked(TESSERA_F32, {rows, 2 * width});
  Tensor dgate(TESSERA_F32, {rows, width}), dup(TESSERA_F32, {rows, width});
  EXPECT_KERNEL_OK(
      tessera_cpu_packed_swiglu_grad(packed.get(), dy.get(), dpacked.get()));
  EXPECT_KERNEL_OK(tessera_cpu_swiglu_grad(gate.get(), up.get(), dy.get(),
                                           dgate.get(), dup.get()));
  Tensor packedGate = halfOf(dpacked, rows, width, 0);
  Tensor packedUp = halfOf(dpacked, rows, width, 1);
  for (int64_t i = 0; i < dgate.count(); ++i) {
    EXPECT_EQ(packedGate.at(i), dgate.at(i)) << i;
    EXPECT_EQ(packedUp.at(i), dup.at(i)) << i;
  }

  // In place, as the arena planner schedules it: the gradient over input.
  EXPECT_KERNEL_OK(
      tessera_cpu_packed_swiglu_grad(packed.get(), dy.get(), packed.get()));
  for (int64_t i = 0; i < packed.count(); ++i)
    EXPECT_EQ(packed.at(i), dpacked.at(i)) << i;
}

TEST(PackedSwiglu, RejectsMismatchedOperandsNamingThem) {
  Tensor odd(TESSERA_F32, {2, 7}), y(TESSERA_F32, {2, 3});
  EXPECT_NE(tessera_cpu_packed_swiglu(odd.get(), y.get()), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("even"),
            std::string::npos);
  Tensor packed(TESSERA_F32, {2, 8}), full(TESSERA_F32, {2, 8});
  EXPECT_NE(tessera_cpu_packed_swiglu(packed.get(), full.get()), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("y [2, 8]"),
            std::string::npos);
  Tensor dy(TESSERA_F32, {2, 4}), wrongDtype(TESSERA_BF16, {2, 8});
  EXPECT_NE(tessera_cpu_packed_swiglu_grad(packed.get(), dy.get(),
                                           wrongDtype.get()),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("dinput"),
            std::string::npos);
}

} // namespace
