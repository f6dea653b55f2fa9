//===- RotaryTest.cpp - tess.rotary's CPU kernel ---------------------------===//

#include "TestUtil.h"

#include <cmath>

using namespace tessera_test;

namespace {

/// x * cos + rotate_half(x) * sin over [B, H, T, D] with cos/sin [1, 1, T, D],
/// written out as the decomposed chain the exporters produce.
std::vector<float> rotateHalfReference(const Tensor &x, const Tensor &cos,
                                       const Tensor &sin, int64_t rows,
                                       int64_t positions, int64_t width) {
  std::vector<float> y(static_cast<size_t>(rows * width));
  int64_t half = width / 2;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t t = r % positions;
    for (int64_t j = 0; j < width; ++j) {
      double rotated = j < half ? -x.at(r * width + j + half)
                                : x.at(r * width + j - half);
      y[static_cast<size_t>(r * width + j)] = static_cast<float>(
          x.at(r * width + j) * double(cos.at(t * width + j)) +
          rotated * sin.at(t * width + j));
    }
  }
  return y;
}

/// Llama's table: angle t * theta^(-2i / D), the same for both halves.
void rotaryTable(int64_t positions, int64_t width, Tensor &cos, Tensor &sin) {
  for (int64_t t = 0; t < positions; ++t)
    for (int64_t j = 0; j < width; ++j) {
      double frequency = std::pow(10000.0, -2.0 * (j % (width / 2)) / width);
      double angle = static_cast<double>(t) * frequency;
      tessera::cpu::storeFloat(cos.data(), TESSERA_F32, t * width + j,
                               static_cast<float>(std::cos(angle)));
      tessera::cpu::storeFloat(sin.data(), TESSERA_F32, t * width + j,
                               static_cast<float>(std::sin(angle)));
    }
}

TEST(Rotary, MatchesTheRotateHalfChain) {
  const int64_t batch = 2, heads = 3, positions = 5, width = 8;
  Tensor x = randomTensor({batch, heads, positions, width}, 3);
  Tensor cos(TESSERA_F32, {1, 1, positions, width}),
      sin(TESSERA_F32, {1, 1, positions, width});
  rotaryTable(positions, width, cos, sin);
  Tensor y(TESSERA_F32, {batch, heads, positions, width});
  EXPECT_KERNEL_OK(tessera_cpu_rotary(x.get(), cos.get(), sin.get(), y.get(), 0, 0));
  std::vector<float> expected = rotateHalfReference(
      x, cos, sin, batch * heads * positions, positions, width);
  expectAllNear(y.values(), expected.data(), expected.size(), 1e-6, "rotary");
}

// A packed q/k/v [B, T, Hq + 2 Hkv, D] against a [1, T, 1, D] table with
// rotated_heads = Hq + Hkv: those heads equal the full rotation of the same
// tensor, the value heads behind them are copied bit for bit.
TEST(Rotary, RotatesOnlyTheFirstHeads) {
  const int64_t batch = 2, positions = 5, heads = 6, rotated = 4, width = 8;
  Shape shape = {batch, positions, heads, width};
  Tensor x = randomTensor(shape, 21);
  Tensor cos = randomTensor({1, positions, 1, width}, 22),
         sin = randomTensor({1, positions, 1, width}, 23);
  for (int32_t adjoint : {0, 1}) {
    Tensor all(TESSERA_F32, shape), some(TESSERA_F32, shape);
    EXPECT_KERNEL_OK(tessera_cpu_rotary(x.get(), cos.get(), sin.get(), all.get(), adjoint, 0));
    EXPECT_KERNEL_OK(
        tessera_cpu_rotary(x.get(), cos.get(), sin.get(), some.get(), adjoint, rotated));
    for (int64_t i = 0; i < x.count(); ++i) {
      int64_t head = (i / width) % heads;
      float expected = head < rotated ? all.at(i) : x.at(i);
      EXPECT_EQ(some.at(i), expected) << "element " << i << " head " << head;
    }
  }
}

// y may be x (the arena runs the rotation in place when x is dead after
// it): the same values as into a separate y, forward and adjoint, the value
// heads of a packed q/k/v untouched.
TEST(Rotary, InPlaceEqualsOutOfPlace) {
  const int64_t batch = 2, positions = 5, heads = 6, rotated = 4, width = 8;
  Shape shape = {batch, positions, heads, width};
  Tensor cos = randomTensor({1, positions, 1, width}, 32),
         sin = randomTensor({1, positions, 1, width}, 33);
  for (int64_t rotatedHeads : {int64_t(0), rotated})
    for (int32_t adjoint : {0, 1}) {
      Tensor x = randomTensor(shape, 31), place = randomTensor(shape, 31);
      Tensor y(TESSERA_F32, shape);
      EXPECT_KERNEL_OK(tessera_cpu_rotary(x.get(), cos.get(), sin.get(),
                                          y.get(), adjoint, rotatedHeads));
      EXPECT_KERNEL_OK(tessera_cpu_rotary(place.get(), cos.get(), sin.get(),
                                          place.get(), adjoint, rotatedHeads));
      for (int64_t i = 0; i < x.count(); ++i)
        EXPECT_EQ(place.at(i), y.at(i))
            << "element " << i << " adjoint " << adjoint << " rotated "
            << rotatedHeads;
    }
}

TEST(Rotary, AdjointIsTheTransposedRotation) {
  // <R x, w> = <x, R^T w> for any x, w, with tables whose halves differ (the
  // op does not assume cos[i] == cos[i + h]).
  const Shape shape = {2, 2, 4, 6};
  Tensor x = randomTensor(shape, 5), w = randomTensor(shape, 6);
  Tensor cos = randomTensor({1, 1, 4, 6}, 7), sin = randomTensor({1, 1, 4, 6}, 8);
  Tensor rx(TESSERA_F32, shape), rw(TESSERA_F32, shape);
  EXPECT_KERNEL_OK(tessera_cpu_rotary(x.get(), cos.get(), sin.get(), rx.get(), 0, 0));
  EXPECT_KERNEL_OK(tessera_cpu_rotary(w.get(), cos.get(), sin.get(), rw.get(), 1, 0));
  double forward = 0, adjoint = 0;
  for (int64_t i = 0; i < x.count(); ++i) {
    forward += double(rx.at(i)) * w.at(i);
    adjoint += double(x.at(i)) * rw.at(i);
  }
  EXPECT_NEAR(forward, adjoint, 1e-5);
}

TEST(Rotary, AdjointUndoesAPureRotation) {
  // cos^2 + sin^2 = 1 with equal halves: R^T R = I.
  const int64_t positions = 7, width = 16;
  Tensor x = randomTensor({3, positions, width}, 9);
  Tensor cos4(TESSERA_F32, {1, 1, positions, width}),
      sin4(TESSERA_F32, {1, 1, positions, width});
  rotaryTable(positions, width, cos4, sin4);
  Tensor cos = Tensor::floats({1, positions, width}, cos4.values());
  Tensor sin = Tensor::floats({1, positions, width}, sin4.values());
  Tensor y(TESSERA_F32, {3, positions, width}), back(TESSERA_F32, {3, positions, width});
  EXPECT_KERNEL_OK(tessera_cpu_rotary(x.get(), cos.get(), sin.get(), y.get(), 0, 0));
  EXPECT_KERNEL_OK(tessera_cpu_rotary(y.get(), cos.get(), sin.get(), back.get(), 1, 0));
  std::vector<float> original = x.values();
  expectAllNear(back.values(), original.data(), original.size(), 1e-6, "R^T R x");
}

TEST(Rotary, RoundsOnceInBf16) {
  Tensor x = Tensor::floats({1, 4}, {1.0f, 2.0f, 3.0f, 4.0f}, TESSERA_BF16);
  Tensor cos = Tensor::floats({1, 4}, {0.5f, 0.25f, 0.5f, 0.25f}, TESSERA_BF16);
  Tensor sin = Tensor::floats({1, 4}, {0.125f, 0.375f, 0.125f, 0.375f}, TESSERA_BF16);
  Tensor y(TESSERA_BF16, {1, 4});
  EXPECT_KERNEL_OK(tessera_cpu_rotary(x.get(), cos.get(), sin.get(), y.get(), 0, 0));
  // y0 = 1 * 0.5 - 3 * 0.125, y1 = 2 * 0.25 - 4 * 0.375,
  // y2 = 3 * 0.5 + 1 * 0.125, y3 = 4 * 0.25 + 2 * 0.375: exact in bf16.
  const float expected[] = {0.125f, -1.0f, 1.625f, 1.75f};
  expectAllNear(y.values(), expected, 4, 0.0, "bf16 rotary");
}

TEST(Rotary, RejectsBadOperandsNamingThem) {
  Tensor odd(TESSERA_F32, {2, 5}), x(TESSERA_F32, {2, 4}), y(TESSERA_F32, {2, 4});
  Tensor table(TESSERA_F32, {1, 4}), lowRank(TESSERA_F32, {4}),
      wrong(TESSERA_F32, {3, 4}), half(TESSERA_BF16, {1, 4});
  Tensor oddY(TESSERA_F32, {2, 5});
  EXPECT_NE(tessera_cpu_rotary(odd.get(), table.get(), table.get(), oddY.get(), 0, 0), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("must be even"),
            std::string::npos);
  EXPECT_NE(tessera_cpu_rotary(x.get(), lowRank.get(), table.get(), y.get(), 0, 0), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("cos [4] must have x's rank"),
            std::string::npos);
  EXPECT_NE(tessera_cpu_rotary(x.get(), table.get(), wrong.get(), y.get(), 0, 0), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("sin"), std::string::npos);
  EXPECT_NE(tessera_cpu_rotary(x.get(), half.get(), table.get(), y.get(), 0, 0), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("cos"), std::string::npos);
  // x [2, 4]: dim -2 has 2 entries, so 3 heads cannot be rotated.
  EXPECT_NE(tessera_cpu_rotary(x.get(), table.get(), table.get(), y.get(), 0, 3), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("rotated_heads 3 must be 0 or in [1, dim(-2)]"),
            std::string::npos);
}

} // namespace
