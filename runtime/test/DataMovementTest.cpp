//===- DataMovementTest.cpp - copy, transpose, broadcast, slice, joins ----===//

#include "TestUtil.h"

using namespace tessera_test;

namespace {

std::vector<float> iota(int64_t count) {
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i)
    values[i] = static_cast<float>(i);
  return values;
}

TEST(Copy, CopiesAcrossShapes) {
  Tensor x = Tensor::floats({2, 3}, iota(6));
  Tensor y(TESSERA_F32, {3, 2});
  EXPECT_KERNEL_OK(tessera_cpu_copy(x.get(), y.get()));
  EXPECT_EQ(y.values(), iota(6));
  Tensor wrong(TESSERA_F32, {5});
  EXPECT_NE(tessera_cpu_copy(x.get(), wrong.get()), 0);
}

TEST(Transpose, PermutesDims) {
  Tensor x = Tensor::floats({2, 3, 4}, iota(24));
  Tensor y(TESSERA_F32, {4, 2, 3});
  const int64_t permutation[] = {2, 0, 1};
  EXPECT_KERNEL_OK(tessera_cpu_transpose(x.get(), y.get(), permutation));
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(y.at((a * 2 + b) * 3 + c), x.at((b * 3 + c) * 4 + a));
  const int64_t notAPermutation[] = {0, 0, 1};
  EXPECT_NE(tessera_cpu_transpose(x.get(), y.get(), notAPermutation), 0);
}

TEST(Transpose, WorksOnIntegers) {
  Tensor x = Tensor::integers({2, 3}, {1, 2, 3, 4, 5, 6}, TESSERA_I16);
  Tensor y(TESSERA_I16, {3, 2});
  const int64_t permutation[] = {1, 0};
  EXPECT_KERNEL_OK(tessera_cpu_transpose(x.get(), y.get(), permutation));
  std::vector<int64_t> values;
  for (int64_t i = 0; i < 6; ++i)
    values.push_back(y.integerAt(i));
  EXPECT_EQ(values, (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
}

TEST(Broadcast, StretchesSizeOneAndLeadingDims) {
  Tensor x = Tensor::floats({3, 1}, {1, 2, 3});
  Tensor y(TESSERA_F32, {2, 3, 2});
  EXPECT_KERNEL_OK(tessera_cpu_broadcast(x.get(), y.get()));
  EXPECT_EQ(y.values(),
            (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
}

TEST(Slice, StridedWindow) {
  Tensor x = Tensor::floats({4, 6}, iota(24));
  Tensor y(TESSERA_F32, {2, 2});
  const int64_t starts[] = {1, 1}, strides[] = {2, 3};
  EXPECT_KERNEL_OK(tessera_cpu_slice(x.get(), y.get(), starts, strides));
  EXPECT_EQ(y.values(), (std::vector<float>{7, 10, 19, 22}));
}

TEST(Slice, AWindowPastTheEndIsAnError) {
  Tensor x(TESSERA_F32, {4, 6}), y(TESSERA_F32, {2, 3});
  const int64_t starts[] = {1, 1}, strides[] = {2, 3};
  EXPECT_NE(tessera_cpu_slice(x.get(), y.get(), starts, strides), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("do not fit"),
            std::string::npos)
      << tessera_cpu_last_error();
}

TEST(SliceGrad, IsTheAdjointOfSlice) {
  Tensor x = randomTensor({4, 6}, 1);
  const int64_t starts[] = {0, 1}, strides[] = {3, 2};
  std::vector<float> weights = randomFloats(6, 2);
  Tensor dy = Tensor::floats({2, 3}, weights);
  Tensor y(TESSERA_F32, {2, 3});
  Tensor dx =
      Tensor::floats({4, 6}, std::vector<float>(24, 5.0f)); // overwritten
  EXPECT_KERNEL_OK(tessera_cpu_slice_grad(dy.get(), dx.get(), starts, strides));
  auto objective = [&] {
    EXPECT_KERNEL_OK(tessera_cpu_slice(x.get(), y.get(), starts, strides));
    return weightedSum(y, weights);
  };
  expectGradientNear(dx, numericGradient(x, objective), "dx");
  EXPECT_EQ(dx.at(1), weights[0]);
  EXPECT_EQ(dx.at(0), 0.0f);
}

TEST(ConcatAndSplit, RoundTripAlongAMiddleAxis) {
  Tensor a = Tensor::floats({2, 1, 2}, {1, 2, 3, 4});
  Tensor b = Tensor::floats({2, 2, 2}, {5, 6, 7, 8, 9, 10, 11, 12});
  Tensor joined(TESSERA_F32, {2, 3, 2});
  const tessera_tensor *inputs[] = {a.get(), b.get()};
  EXPECT_KERNEL_OK(tessera_cpu_concat(inputs, 2, joined.get(), 1));
  EXPECT_EQ(joined.values(),
            (std::vector<float>{1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}));
  Tensor first(TESSERA_F32, {2, 1, 2}), second(TESSERA_F32, {2, 2, 2});
  tessera_tensor *outputs[] = {first.get(), second.get()};
  EXPECT_KERNEL_OK(tessera_cpu_split(joined.get(), outputs, 2, 1));
  EXPECT_EQ(first.values(), a.values());
  EXPECT_EQ(second.values(), b.values());
}

TEST(Concat, RejectsSizesThatDoNotAddUp) {
  Tensor a(TESSERA_F32, {2, 2}), b(TESSERA_F32, {2, 2}), y(TESSERA_F32, {2, 5});
  const tessera_tensor *inputs[] = {a.get(), b.get()};
  EXPECT_NE(tessera_cpu_concat(inputs, 2, y.get(), 1), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("sum to 4"),
            std::string::npos);
  Tensor c(TESSERA_F32, {3, 2});
  const tessera_tensor *mismatched[] = {a.get(), c.get()};
  Tensor y2(TESSERA_F32, {2, 4});
  EXPECT_NE(tessera_cpu_concat(mismatched, 2, y2.get(), 1), 0);
}

} // namespace
