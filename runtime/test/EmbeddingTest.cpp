//===- EmbeddingTest.cpp - embedding and gather, forward and grad ---------===//

#include "TestUtil.h"

using namespace tessera_test;

namespace {

TEST(Embedding, LooksUpRows) {
  Tensor table = randomTensor({5, 3}, 1);
  Tensor ids = Tensor::integers({2, 2}, {4, 0, 4, 2});
  Tensor y(TESSERA_F32, {2, 2, 3});
  EXPECT_KERNEL_OK(tessera_cpu_embedding(table.get(), ids.get(), y.get()));
  const int64_t expectedRows[] = {4, 0, 4, 2};
  for (int64_t position = 0; position < 4; ++position)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(y.at(position * 3 + j),
                table.at(expectedRows[position] * 3 + j));
}

TEST(Embedding, Bf16TableAndI32Ids) {
  Tensor table = Tensor::floats({4, 2}, randomFloats(8, 2), TESSERA_BF16);
  Tensor ids = Tensor::integers({3}, {3, 1, 3}, TESSERA_I32);
  Tensor y(TESSERA_BF16, {3, 2});
  EXPECT_KERNEL_OK(tessera_cpu_embedding(table.get(), ids.get(), y.get()));
  EXPECT_EQ(y.at(0), table.at(6));
  EXPECT_EQ(y.at(3), table.at(3));
}

TEST(Embedding, AnIdOutOfRangeIsAnErrorNamingIdPositionAndRange) {
  Tensor table(TESSERA_F32, {8, 4});
  Tensor ids = Tensor::integers({2, 3}, {1, 2, 3, 4, 5, 600});
  Tensor y(TESSERA_F32, {2, 3, 4});
  EXPECT_NE(tessera_cpu_embedding(table.get(), ids.get(), y.get()), 0);
  EXPECT_STREQ(tessera_cpu_last_error(),
               "tessera_cpu_embedding: token id 600 at position [1, 2] of ids "
               "[2, 3] is outside the table's rows [0, 8)");
  Tensor negative = Tensor::integers({2}, {-1, 0});
  Tensor y2(TESSERA_F32, {2, 4});
  EXPECT_NE(tessera_cpu_embedding(table.get(), negative.get(), y2.get()), 0);
  EXPECT_NE(
      std::string(tessera_cpu_last_error()).find("token id -1 at position [0]"),
      std::string::npos)
      << tessera_cpu_last_error();
  Tensor dy(TESSERA_F32, {2, 3, 4}), dtable(TESSERA_F32, {8, 4});
  EXPECT_NE(tessera_cpu_embedding_grad(ids.get(), dy.get(), dtable.get()), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("token id 600"),
            std::string::npos);
}

// Tests the vocabulary-parallel blocks (rows_axis): two ranks' lookups in
// their halves of a table sum to the whole lookup (each id found in one
// block, zeros in the other), and their gradients are the whole gradient's
// rows; an id outside the whole table is still an error, and a block that
// does not fit the table is refused.
TEST(Embedding, RowBlocksSumToTheWholeLookupAndGradient) {
  Tensor table = randomTensor({6, 3}, 4);
  Tensor ids = Tensor::integers({2, 3}, {5, 0, 2, 3, 5, 1});
  Tensor whole(TESSERA_F32, {2, 3, 3});
  EXPECT_KERNEL_OK(tessera_cpu_embedding(table.get(), ids.get(), whole.get()));
  Tensor dy = randomTensor({2, 3, 3}, 5);
  Tensor wholeGradient(TESSERA_F32, {6, 3});
  EXPECT_KERNEL_OK(
      tessera_cpu_embedding_grad(ids.get(), dy.get(), wholeGradient.get()));
  const std::vector<float> tableValues = table.values();
  std::vector<float> sum(18, 0.0f);
  for (int64_t block = 0; block < 2; ++block) {
    Tensor rows = Tensor::floats(
        {3, 3}, std::vector<float>(tableValues.begin() + block * 9,
                                   tableValues.begin() + (block + 1) * 9));
    Tensor y(TESSERA_F32, {2, 3, 3});
    EXPECT_KERNEL_OK(tessera_cpu_embedding_rows(rows.get(), ids.get(), y.get(),
                                                block * 3, 6));
    for (int64_t i = 0; i < 18; ++i)
      sum[static_cast<size_t>(i)] += y.at(i);
    Tensor gradient(TESSERA_F32, {3, 3});
    EXPECT_KERNEL_OK(tessera_cpu_embedding_grad_rows(
        ids.get(), dy.get(), gradient.get(), block * 3, 6));
    for (int64_t i = 0; i < 9; ++i)
      EXPECT_EQ(gradient.at(i), wholeGradient.at(block * 9 + i)) << i;
  }
  EXPECT_EQ(sum, whole.values());

  Tensor rows(TESSERA_F32, {3, 3}), y(TESSERA_F32, {2, 3, 3});
  Tensor outside = Tensor::integers({2, 3}, {5, 0, 2, 3, 6, 1});
  EXPECT_NE(tessera_cpu_embedding_rows(rows.get(), outside.get(), y.get(), 3, 6),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error())
                .find("token id 6 at position [1, 1] of ids [2, 3] is outside "
                      "the table's rows [0, 6)"),
            std::string::npos)
      << tessera_cpu_last_error();
  EXPECT_NE(tessera_cpu_embedding_rows(rows.get(), ids.get(), y.get(), 4, 6), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error())
                .find("rows [4, 7) are not a block of a table of 6 rows"),
            std::string::npos)
      << tessera_cpu_last_error();
}

TEST(EmbeddingGrad, MatchesFiniteDifferencesAndSumsRepeatedIds) {
  Tensor table = randomTensor({5, 3}, 3);
  Tensor ids = Tensor::integers({2, 3}, {1, 4, 1, 0, 1, 3});
  std::vector<float> weights = randomFloats(18, 4);
  Tensor dy = Tensor::floats({2, 3, 3}, weights);
  Tensor y(TESSERA_F32, {2, 3, 3});
  Tensor dtable =
      Tensor::floats({5, 3}, std::vector<float>(15, 9.0f)); // overwritten
  EXPECT_KERNEL_OK(
      tessera_cpu_embedding_grad(ids.get(), dy.get(), dtable.get()));
  auto objective = [&] {
    EXPECT_KERNEL_OK(tessera_cpu_embedding(table.get(), ids.get(), y.get()));
    return weightedSum(y, weights);
  };
  expectGradientNear(dtable, numericGradient(table, objective), "dtable");
  for (int64_t j = 0; j < 3; ++j) {
    EXPECT_FLOAT_EQ(dtable.at(1 * 3 + j), weights[0 * 3 + j] +
                                              weights[2 * 3 + j] +
                                              weights[4 * 3 + j]);
    EXPECT_EQ(dtable.at(2 * 3 + j), 0.0f); // row 2 is never read
  }
}

TEST(Gather, AlongAMiddleAxisWithNegativeIndices) {
  Tensor x = randomTensor({2, 4, 3}, 5);
  Tensor indices = Tensor::integers({2}, {-1, 1});
  Tensor y(TESSERA_F32, {2, 2, 3});
  EXPECT_KERNEL_OK(tessera_cpu_gather(x.get(), indices.get(), y.get(), 1));
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(y.at((o * 2 + 0) * 3 + i), x.at((o * 4 + 3) * 3 + i));
      EXPECT_EQ(y.at((o * 2 + 1) * 3 + i), x.at((o * 4 + 1) * 3 + i));
    }
}

TEST(Gather, AScalarIndexDropsTheAxis) {
  Tensor x = Tensor::integers({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor index = Tensor::integers({}, {2});
  Tensor y(TESSERA_I64, {2});
  EXPECT_KERNEL_OK(tessera_cpu_gather(x.get(), index.get(), y.get(), 0));
  EXPECT_EQ(y.integerAt(0), 5);
  EXPECT_EQ(y.integerAt(1), 6);
}

TEST(Gather, AnIndexOutOfRangeIsAnError) {
  Tensor x(TESSERA_F32, {2, 4}), indices = Tensor::integers({3}, {0, 4, 1});
  Tensor y(TESSERA_F32, {2, 3});
  EXPECT_NE(tessera_cpu_gather(x.get(), indices.get(), y.get(), 1), 0);
  EXPECT_NE(
      std::string(tessera_cpu_last_error())
          .find("index 4 at position [1] of indices [3] is outside [-4, 4)"),
      std::string::npos)
      << tessera_cpu_last_error();
}

TEST(GatherGrad, MatchesFiniteDifferences) {
  Tensor x = randomTensor({2, 4, 3}, 6);
  Tensor indices = Tensor::integers({2, 2}, {0, -1, 3, 2});
  std::vector<float> weights = randomFloats(24, 7);
  Tensor dy = Tensor::floats({2, 2, 2, 3}, weights);
  Tensor y(TESSERA_F32, {2, 2, 2, 3}), dx(TESSERA_F32, {2, 4, 3});
  EXPECT_KERNEL_OK(
      tessera_cpu_gather_grad(indices.get(), dy.get(), dx.get(), 1));
  auto objective = [&] {
    EXPECT_KERNEL_OK(tessera_cpu_gather(x.get(), indices.get(), y.get(), 1));
    return weightedSum(y, weights);
  };
  expectGradientNear(dx, numericGradient(x, objective), "dx");
}

} // namespace
