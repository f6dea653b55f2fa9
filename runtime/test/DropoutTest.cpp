//===- DropoutTest.cpp - tessera_cpu_dropout and its counter-based mask ---===//

#include "TestUtil.h"

#include "Random.h"
#include "tessera/runtime/lowering_support.h"

using namespace tessera_test;

namespace {

TEST(Dropout, RateZeroIsTheIdentity) {
  Tensor x = randomTensor({5, 7}, 1);
  Tensor y(TESSERA_F32, {5, 7});
  EXPECT_KERNEL_OK(tessera_cpu_dropout(x.get(), y.get(), 0.0, 42));
  EXPECT_EQ(y.values(), x.values());
}

TEST(Dropout, DropsAboutRateAndScalesTheRest) {
  const int64_t count = 200000;
  Tensor x = Tensor::floats({count}, std::vector<float>(count, 1.0f));
  Tensor y(TESSERA_F32, {count});
  for (double rate : {0.1, 0.5, 0.9}) {
    EXPECT_KERNEL_OK(tessera_cpu_dropout(x.get(), y.get(), rate, 1234));
    int64_t dropped = 0;
    for (int64_t i = 0; i < count; ++i) {
      if (y.at(i) == 0.0f)
        ++dropped;
      else
        EXPECT_FLOAT_EQ(y.at(i), static_cast<float>(1.0 / (1.0 - rate)));
    }
    EXPECT_NEAR(static_cast<double>(dropped) / count, rate, 0.005) << rate;
  }
}

TEST(Dropout, TheMaskIsAFunctionOfSeedAndIndexOnly) {
  Tensor x = Tensor::floats({1000}, std::vector<float>(1000, 1.0f));
  Tensor sameElementsReshaped =
      Tensor::floats({10, 100}, std::vector<float>(1000, 1.0f));
  Tensor first(TESSERA_F32, {1000}), second(TESSERA_F32, {1000});
  Tensor reshaped(TESSERA_F32, {10, 100}), otherSeed(TESSERA_F32, {1000});
  EXPECT_KERNEL_OK(tessera_cpu_dropout(x.get(), first.get(), 0.5, 7));
  EXPECT_KERNEL_OK(tessera_cpu_dropout(x.get(), second.get(), 0.5, 7));
  EXPECT_KERNEL_OK(
      tessera_cpu_dropout(sameElementsReshaped.get(), reshaped.get(), 0.5, 7));
  EXPECT_KERNEL_OK(tessera_cpu_dropout(x.get(), otherSeed.get(), 0.5, 6));
  EXPECT_EQ(first.values(), second.values());
  EXPECT_EQ(first.values(), reshaped.values());
  EXPECT_NE(first.values(), otherSeed.values());
  // A prefix of a tensor draws the prefix of the mask.
  Tensor prefix = Tensor::floats({10}, std::vector<float>(10, 1.0f));
  Tensor prefixOut(TESSERA_F32, {10});
  EXPECT_KERNEL_OK(tessera_cpu_dropout(prefix.get(), prefixOut.get(), 0.5, 7));
  for (int64_t i = 0; i < 10; ++i)
    EXPECT_EQ(prefixOut.at(i), first.at(i));
}

// Tests that unmixBits undoes SplitMix64's finalizer, and that an advanced
// seed's stream is the seed's from `count` on: what a rank's block of a
// split random op draws (stream_axis).
TEST(Dropout, AnAdvancedSeedDrawsTheStreamFromItsOffset) {
  using namespace tessera::cpu;
  for (uint64_t z : {0ull, 1ull, 42ull, 0x9E3779B97F4A7C15ull, ~0ull})
    EXPECT_EQ(unmixBits(mixBits(z)), z) << z;
  for (uint64_t seed : {0ull, 7ull, 0xDEADBEEFCAFEull})
    for (uint64_t count : {0ull, 1ull, 1000ull, 123456789ull}) {
      DropoutMask whole(seed, 0.5), block(advancedSeed(seed, count), 0.5);
      for (uint64_t i = 0; i < 64; ++i)
        ASSERT_EQ(block.keeps(i), whole.keeps(count + i))
            << "seed " << seed << " count " << count << " i " << i;
      EXPECT_EQ(tessera_advance_seed(seed, count), advancedSeed(seed, count));
    }
}

// Tests that the blocks of a tensor's rows, each dropped with the seed
// advanced to its first element, are the whole tensor dropped.
TEST(Dropout, RowBlocksWithAdvancedSeedsAreTheWholeDropout) {
  Tensor x = randomTensor({4, 6, 5}, 3);
  Tensor whole(TESSERA_F32, {4, 6, 5});
  EXPECT_KERNEL_OK(tessera_cpu_dropout(x.get(), whole.get(), 0.3, 99));
  const int64_t blockElements = 2 * 6 * 5;
  const std::vector<float> values = x.values();
  for (int64_t block = 0; block < 2; ++block) {
    std::vector<float> rows(values.begin() + block * blockElements,
                            values.begin() + (block + 1) * blockElements);
    Tensor part = Tensor::floats({2, 6, 5}, rows);
    Tensor dropped(TESSERA_F32, {2, 6, 5});
    EXPECT_KERNEL_OK(tessera_cpu_dropout(
        part.get(), dropped.get(), 0.3,
        tessera_advance_seed(99, static_cast<uint64_t>(block * blockElements))));
    for (int64_t i = 0; i < blockElements; ++i)
      EXPECT_EQ(dropped.at(i), whole.at(block * blockElements + i)) << i;
  }
}

TEST(Dropout, RejectsRatesOutsideZeroToOne) {
  Tensor x(TESSERA_F32, {4}), y(TESSERA_F32, {4});
  EXPECT_NE(tessera_cpu_dropout(x.get(), y.get(), 1.0, 1), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("outside [0, 1)"),
            std::string::npos);
  EXPECT_NE(tessera_cpu_dropout(x.get(), y.get(), -0.1, 1), 0);
}

TEST(Dropout, Bf16StorageRoundsOnce) {
  Tensor x = Tensor::floats({64}, randomFloats(64, 3), TESSERA_BF16);
  Tensor y(TESSERA_BF16, {64});
  Tensor xF32 = Tensor::floats({64}, x.values());
  Tensor yF32(TESSERA_F32, {64});
  EXPECT_KERNEL_OK(tessera_cpu_dropout(x.get(), y.get(), 0.3, 5));
  EXPECT_KERNEL_OK(tessera_cpu_dropout(xF32.get(), yF32.get(), 0.3, 5));
  for (int64_t i = 0; i < 64; ++i)
    EXPECT_EQ(y.at(i),
              tessera::cpu::bf16ToFloat(tessera::cpu::floatToBf16(yF32.at(i))));
}

} // namespace
