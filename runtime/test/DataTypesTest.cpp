//===- DataTypesTest.cpp - bf16/f16 rounding and tessera_cpu_cast ---------===//

#include "TestUtil.h"

#include <cstring>
#include <limits>

using namespace tessera::cpu;
using namespace tessera_test;

namespace {

float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

TEST(DataTypes, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(fromBits(0x3f808000)), 0x3f80); // tie, even below
  EXPECT_EQ(floatToBf16(fromBits(0x3f818000)), 0x3f82); // tie, even above
  EXPECT_EQ(floatToBf16(fromBits(0x3f808001)), 0x3f81); // just above the tie
  EXPECT_EQ(floatToBf16(fromBits(0x3f807fff)), 0x3f80); // just below the tie
  EXPECT_EQ(floatToBf16(-2.0f), 0xc000);
  EXPECT_EQ(floatToBf16(fromBits(0x7f7fffff)), 0x7f80); // rounds up to inf
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::nanf("")))));
  // A NaN whose payload sits only in the dropped bits stays NaN.
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(fromBits(0x7f800001)))));
}

TEST(DataTypes, Bf16RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float value = bf16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value))
      EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(value))));
    else
      EXPECT_EQ(floatToBf16(value), bits);
  }
}

TEST(DataTypes, F16RoundsToNearestEvenWithSubnormals) {
  EXPECT_EQ(floatToF16(1.0f), 0x3c00);
  EXPECT_EQ(floatToF16(-2.0f), 0xc000);
  EXPECT_EQ(floatToF16(65504.0f), 0x7bff); // largest finite
  EXPECT_EQ(floatToF16(65519.0f), 0x7bff); // below the midpoint
  EXPECT_EQ(floatToF16(65520.0f), 0x7c00); // the midpoint ties to inf
  EXPECT_EQ(floatToF16(1e6f), 0x7c00);
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -24)), 0x0001);    // smallest subnormal
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -25)), 0x0000);    // tie to even (0)
  EXPECT_EQ(floatToF16(std::ldexp(3.0f, -25)), 0x0002);    // tie to even (2)
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -14)), 0x0400);    // smallest normal
  EXPECT_EQ(floatToF16(std::ldexp(2047.0f, -25)), 0x0400); // rounds up into it
  EXPECT_EQ(floatToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00); // tie, even
  EXPECT_EQ(floatToF16(1.0f + std::ldexp(3.0f, -11)), 0x3c02); // tie, even
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(std::nanf("")))));
  EXPECT_EQ(f16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16ToFloat(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(DataTypes, F16RoundTripsEveryPattern) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float value = f16ToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value))
      EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(value))));
    else
      EXPECT_EQ(floatToF16(value), bits);
  }
}

TEST(DataTypes, DoubleToBf16RoundsOnce) {
  // Just below the midpoint between bf16 0x3f81 and 0x3f82: the right answer
  // is 0x3f81. Rounding to the nearest float first lands on the midpoint,
  // which a second round-to-nearest-even would send to 0x3f82.
  double belowMidpoint = 1.01171875 - std::ldexp(1.0, -40);
  EXPECT_EQ(floatToBf16(static_cast<float>(belowMidpoint)), 0x3f82);
  Tensor x = Tensor(TESSERA_F64, {1});
  std::memcpy(x.data(), &belowMidpoint, sizeof belowMidpoint);
  Tensor y(TESSERA_BF16, {1});
  EXPECT_KERNEL_OK(tessera_cpu_cast(x.get(), y.get()));
  uint16_t bits;
  std::memcpy(&bits, y.data(), sizeof bits);
  EXPECT_EQ(bits, 0x3f81);
}

TEST(Cast, FloatToIntegerTruncatesTowardZero) {
  Tensor x = Tensor::floats({5}, {-2.7f, 2.7f, 0.0f, std::nanf(""), 1e20f});
  Tensor y(TESSERA_I32, {5});
  EXPECT_KERNEL_OK(tessera_cpu_cast(x.get(), y.get()));
  EXPECT_EQ(y.integerAt(0), -2);
  EXPECT_EQ(y.integerAt(1), 2);
  EXPECT_EQ(y.integerAt(2), 0);
  EXPECT_EQ(y.integerAt(3), 0); // NaN is defined as 0
}

TEST(Cast, IntegersSignExtendAndTruncate) {
  Tensor x = Tensor::integers({3}, {300, -1, 128}, TESSERA_I64);
  Tensor y(TESSERA_I8, {3});
  EXPECT_KERNEL_OK(tessera_cpu_cast(x.get(), y.get()));
  EXPECT_EQ(y.integerAt(0), 44); // 300 mod 256
  EXPECT_EQ(y.integerAt(1), -1);
  EXPECT_EQ(y.integerAt(2), -128);
  Tensor back(TESSERA_I64, {3});
  EXPECT_KERNEL_OK(tessera_cpu_cast(y.get(), back.get()));
  EXPECT_EQ(back.integerAt(1), -1); // sign-extended
}

TEST(Cast, BoolIsNotZero) {
  Tensor x = Tensor::floats({4}, {0.0f, 0.5f, -3.0f, -0.0f});
  Tensor y(TESSERA_BOOL, {4});
  EXPECT_KERNEL_OK(tessera_cpu_cast(x.get(), y.get()));
  EXPECT_EQ(y.integerAt(0), 0);
  EXPECT_EQ(y.integerAt(1), 1);
  EXPECT_EQ(y.integerAt(2), 1);
  EXPECT_EQ(y.integerAt(3), 0);
  Tensor asInt(TESSERA_I32, {4});
  EXPECT_KERNEL_OK(tessera_cpu_cast(y.get(), asInt.get())); // zero-extended
  EXPECT_EQ(asInt.integerAt(2), 1);
}

TEST(Cast, FloatToHalfTypesMatchesTheRoundingHelpers) {
  std::vector<float> values = randomFloats(64, 7, -100.0f, 100.0f);
  Tensor x = Tensor::floats({64}, values);
  Tensor bf16(TESSERA_BF16, {64}), f16(TESSERA_F16, {64}),
      f64(TESSERA_F64, {64});
  EXPECT_KERNEL_OK(tessera_cpu_cast(x.get(), bf16.get()));
  EXPECT_KERNEL_OK(tessera_cpu_cast(x.get(), f16.get()));
  EXPECT_KERNEL_OK(tessera_cpu_cast(x.get(), f64.get()));
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(bf16.at(i), bf16ToFloat(floatToBf16(values[i])));
    EXPECT_EQ(f16.at(i), f16ToFloat(floatToF16(values[i])));
    EXPECT_EQ(f64.at(i), values[i]);
  }
}

TEST(Cast, RejectsMismatchedShapes) {
  Tensor x(TESSERA_F32, {4}), y(TESSERA_F32, {5});
  EXPECT_NE(tessera_cpu_cast(x.get(), y.get()), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("expected [4]"),
            std::string::npos)
      << tessera_cpu_last_error();
}

} // namespace
