//===- ReductionTest.cpp - tessera_cpu_reduce and sum_squares -------------===//

#include "TestUtil.h"

using namespace tessera_test;

namespace {

TEST(Reduce, OverTwoDimsKeptAndDropped) {
  Tensor x = randomTensor({2, 3, 4}, 1);
  const int64_t dims[] = {0, 2};
  Tensor dropped(TESSERA_F32, {3}), kept(TESSERA_F32, {1, 3, 1});
  for (int32_t op : {TESSERA_REDUCE_SUM, TESSERA_REDUCE_MEAN,
                     TESSERA_REDUCE_MAX, TESSERA_REDUCE_MIN}) {
    EXPECT_KERNEL_OK(tessera_cpu_reduce(op, x.get(), dropped.get(), dims, 2));
    EXPECT_KERNEL_OK(tessera_cpu_reduce(op, x.get(), kept.get(), dims, 2));
    for (int64_t middle = 0; middle < 3; ++middle) {
      double sum = 0, maximum = -1e9, minimum = 1e9;
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t c = 0; c < 4; ++c) {
          double value = x.at((a * 3 + middle) * 4 + c);
          sum += value;
          maximum = std::max(maximum, value);
          minimum = std::min(minimum, value);
        }
      double expected = op == TESSERA_REDUCE_SUM    ? sum
                        : op == TESSERA_REDUCE_MEAN ? sum / 8
                        : op == TESSERA_REDUCE_MAX  ? maximum
                                                    : minimum;
      EXPECT_NEAR(dropped.at(middle), expected, 1e-6) << "op " << op;
      EXPECT_EQ(kept.at(middle), dropped.at(middle));
    }
  }
}

TEST(Reduce, IntegersAndNan) {
  Tensor x = Tensor::integers({2, 3}, {1, 2, 3, 4, 5, 6}, TESSERA_I32);
  Tensor y(TESSERA_I32, {2});
  const int64_t lastDim[] = {1};
  EXPECT_KERNEL_OK(
      tessera_cpu_reduce(TESSERA_REDUCE_SUM, x.get(), y.get(), lastDim, 1));
  EXPECT_EQ(y.integerAt(0), 6);
  EXPECT_EQ(y.integerAt(1), 15);
  Tensor withNan = Tensor::floats({3}, {1, std::nanf(""), 3});
  Tensor maximum(TESSERA_F32, {});
  const int64_t onlyDim[] = {0};
  EXPECT_KERNEL_OK(tessera_cpu_reduce(TESSERA_REDUCE_MAX, withNan.get(),
                                      maximum.get(), onlyDim, 1));
  EXPECT_TRUE(std::isnan(maximum.at(0)));
}

TEST(Reduce, RejectsRepeatedDimsAndWrongRanks) {
  Tensor x(TESSERA_F32, {2, 3}), y(TESSERA_F32, {3});
  const int64_t repeated[] = {0, 0};
  EXPECT_NE(
      tessera_cpu_reduce(TESSERA_REDUCE_SUM, x.get(), y.get(), repeated, 2), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("listed twice"),
            std::string::npos);
  Tensor wrongRank(TESSERA_F32, {1, 1, 3});
  const int64_t first[] = {0};
  EXPECT_NE(tessera_cpu_reduce(TESSERA_REDUCE_SUM, x.get(), wrongRank.get(),
                               first, 1),
            0);
}

TEST(SumSquares, AccumulatesIntoTheCallersTotal) {
  Tensor a = Tensor::floats({3}, {1, 2, 3});
  Tensor b = Tensor::floats({2}, {0.5f, -4}, TESSERA_BF16);
  double total = 1.0;
  EXPECT_KERNEL_OK(tessera_cpu_sum_squares(a.get(), &total));
  EXPECT_KERNEL_OK(tessera_cpu_sum_squares(b.get(), &total));
  EXPECT_DOUBLE_EQ(total, 1 + 14 + 16.25);
}

} // namespace
