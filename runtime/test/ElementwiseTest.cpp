//===- ElementwiseTest.cpp - unary, unary_grad, binary, where -------------===//

#include "TestUtil.h"
#include "reference/TorchReferences.h"

using namespace tessera_test;

namespace {

struct UnaryCase {
  int32_t op;
  const char *name;
  float low, high; // A domain away from kinks and singularities.
  double (*reference)(double);
};

double geluErf(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}
double geluTanh(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

const UnaryCase kDifferentiableOps[] = {
    {TESSERA_NEG, "neg", -2, 2, [](double x) { return -x; }},
    {TESSERA_ABS, "abs", 0.2f, 2, [](double x) { return std::fabs(x); }},
    {TESSERA_EXP, "exp", -2, 2, [](double x) { return std::exp(x); }},
    {TESSERA_LOG, "log", 0.5f, 3, [](double x) { return std::log(x); }},
    {TESSERA_SQRT, "sqrt", 0.5f, 3, [](double x) { return std::sqrt(x); }},
    {TESSERA_RSQRT, "rsqrt", 0.5f, 3,
     [](double x) { return 1 / std::sqrt(x); }},
    {TESSERA_RECIPROCAL, "reciprocal", 0.5f, 3, [](double x) { return 1 / x; }},
    {TESSERA_TANH, "tanh", -2, 2, [](double x) { return std::tanh(x); }},
    {TESSERA_ERF, "erf", -2, 2, [](double x) { return std::erf(x); }},
    {TESSERA_SIGMOID, "sigmoid", -3, 3, sigmoid},
    {TESSERA_RELU, "relu", 0.2f, 2, [](double x) { return x > 0 ? x : 0; }},
    {TESSERA_SILU, "silu", -3, 3, [](double x) { return x * sigmoid(x); }},
    {TESSERA_GELU_ERF, "gelu_erf", -3, 3, geluErf},
    {TESSERA_GELU_TANH, "gelu_tanh", -3, 3, geluTanh},
    {TESSERA_COS, "cos", -3, 3, [](double x) { return std::cos(x); }},
    {TESSERA_SIN, "sin", -3, 3, [](double x) { return std::sin(x); }},
};

TEST(Unary, ForwardMatchesDoublePrecisionMath) {
  for (const UnaryCase &unary : kDifferentiableOps) {
    std::vector<float> values = randomFloats(20, 3, unary.low, unary.high);
    Tensor x = Tensor::floats({4, 5}, values);
    Tensor y(TESSERA_F32, {4, 5});
    EXPECT_KERNEL_OK(tessera_cpu_unary(unary.op, x.get(), y.get()));
    for (int64_t i = 0; i < 20; ++i)
      EXPECT_NEAR(y.at(i), unary.reference(values[i]),
                  2e-6 * (1 + std::fabs(unary.reference(values[i]))))
          << unary.name << " at " << values[i];
  }
}

TEST(Unary, ReluOfNegativesIsZero) {
  Tensor x = Tensor::floats({3}, {-1.0f, 0.0f, 2.0f});
  Tensor y(TESSERA_F32, {3});
  EXPECT_KERNEL_OK(tessera_cpu_unary(TESSERA_RELU, x.get(), y.get()));
  EXPECT_EQ(y.values(), (std::vector<float>{0.0f, 0.0f, 2.0f}));
}

TEST(Unary, GeluMatchesPyTorch) {
  using namespace torch_reference;
  size_t count = std::size(gelu_x);
  Tensor x = Tensor::floats({static_cast<int64_t>(count)},
                            std::vector<float>(gelu_x, gelu_x + count));
  Tensor y(TESSERA_F32, {static_cast<int64_t>(count)});
  EXPECT_KERNEL_OK(tessera_cpu_unary(TESSERA_GELU_ERF, x.get(), y.get()));
  expectAllNear(y.values(), gelu_erf_y, count, 1e-6, "gelu erf");
  EXPECT_KERNEL_OK(tessera_cpu_unary(TESSERA_GELU_TANH, x.get(), y.get()));
  expectAllNear(y.values(), gelu_tanh_y, count, 1e-6, "gelu tanh");
}

TEST(UnaryGrad, EveryDifferentiableOpMatchesFiniteDifferences) {
  for (const UnaryCase &unary : kDifferentiableOps) {
    Shape shape = {3, 4};
    Tensor x =
        Tensor::floats(shape, randomFloats(12, 11, unary.low, unary.high));
    std::vector<float> weights = randomFloats(12, 12);
    Tensor y(TESSERA_F32, shape), dx(TESSERA_F32, shape);
    Tensor dy = Tensor::floats(shape, weights);
    EXPECT_KERNEL_OK(
        tessera_cpu_unary_grad(unary.op, x.get(), dy.get(), dx.get()));
    auto objective = [&] {
      EXPECT_KERNEL_OK(tessera_cpu_unary(unary.op, x.get(), y.get()));
      return weightedSum(y, weights);
    };
    expectGradientNear(dx, numericGradient(x, objective, 1e-3), unary.name);
  }
}

TEST(UnaryGrad, LogicalNotHasNoGradient) {
  Tensor x(TESSERA_F32, {2}), dy(TESSERA_F32, {2}), dx(TESSERA_F32, {2});
  EXPECT_NE(
      tessera_cpu_unary_grad(TESSERA_LOGICAL_NOT, x.get(), dy.get(), dx.get()),
      0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("no gradient"),
            std::string::npos);
}

TEST(Unary, Bf16IsTheF32ResultRounded) {
  std::vector<float> values = randomFloats(32, 5, -3, 3);
  Tensor xBf16 = Tensor::floats({32}, values, TESSERA_BF16);
  Tensor xF32 = Tensor::floats({32}, xBf16.values());
  Tensor yBf16(TESSERA_BF16, {32}), yF32(TESSERA_F32, {32});
  EXPECT_KERNEL_OK(
      tessera_cpu_unary(TESSERA_GELU_TANH, xBf16.get(), yBf16.get()));
  EXPECT_KERNEL_OK(
      tessera_cpu_unary(TESSERA_GELU_TANH, xF32.get(), yF32.get()));
  for (int64_t i = 0; i < 32; ++i)
    EXPECT_EQ(yBf16.at(i),
              tessera::cpu::bf16ToFloat(tessera::cpu::floatToBf16(yF32.at(i))));
}

TEST(Unary, IntegerNegAbsAndLogicalNot) {
  Tensor x = Tensor::integers({3}, {-4, 0, 7}, TESSERA_I32);
  Tensor y(TESSERA_I32, {3});
  EXPECT_KERNEL_OK(tessera_cpu_unary(TESSERA_NEG, x.get(), y.get()));
  EXPECT_EQ(y.integerAt(0), 4);
  EXPECT_EQ(y.integerAt(2), -7);
  EXPECT_KERNEL_OK(tessera_cpu_unary(TESSERA_ABS, x.get(), y.get()));
  EXPECT_EQ(y.integerAt(0), 4);
  Tensor notX(TESSERA_BOOL, {3});
  EXPECT_KERNEL_OK(tessera_cpu_unary(TESSERA_LOGICAL_NOT, x.get(), notX.get()));
  EXPECT_EQ(notX.integerAt(0), 0);
  EXPECT_EQ(notX.integerAt(1), 1);
  EXPECT_NE(tessera_cpu_unary(TESSERA_EXP, x.get(), y.get()), 0);
}

TEST(Binary, BroadcastsLikeNumpy) {
  Tensor a = Tensor::floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor row = Tensor::floats({3}, {10, 20, 30});
  Tensor column = Tensor::floats({2, 1}, {100, 200});
  Tensor y(TESSERA_F32, {2, 3});
  EXPECT_KERNEL_OK(
      tessera_cpu_binary(TESSERA_ADD, a.get(), row.get(), y.get()));
  EXPECT_EQ(y.values(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_KERNEL_OK(
      tessera_cpu_binary(TESSERA_SUB, column.get(), a.get(), y.get()));
  EXPECT_EQ(y.values(), (std::vector<float>{99, 98, 97, 196, 195, 194}));
  Tensor outer(TESSERA_F32, {2, 3});
  EXPECT_KERNEL_OK(
      tessera_cpu_binary(TESSERA_MUL, column.get(), row.get(), outer.get()));
  EXPECT_EQ(outer.values(),
            (std::vector<float>{1000, 2000, 3000, 2000, 4000, 6000}));
  Tensor scalar = Tensor::floats({}, {2});
  EXPECT_KERNEL_OK(
      tessera_cpu_binary(TESSERA_POW, a.get(), scalar.get(), y.get()));
  EXPECT_EQ(y.values(), (std::vector<float>{1, 4, 9, 16, 25, 36}));
  EXPECT_KERNEL_OK(
      tessera_cpu_binary(TESSERA_DIV, a.get(), scalar.get(), y.get()));
  EXPECT_EQ(y.values(), (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
}

TEST(Binary, RejectsShapesThatDoNotBroadcast) {
  Tensor a(TESSERA_F32, {2, 3}), b(TESSERA_F32, {2}), y(TESSERA_F32, {2, 3});
  EXPECT_NE(tessera_cpu_binary(TESSERA_ADD, a.get(), b.get(), y.get()), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("does not broadcast"),
            std::string::npos);
}

TEST(Binary, ComparisonsAndLogicWriteBool) {
  Tensor a = Tensor::floats({4}, {1, 2, 3, 4});
  Tensor b = Tensor::floats({4}, {4, 2, 1, 4});
  Tensor y(TESSERA_BOOL, {4});
  auto bools = [&] {
    std::vector<int64_t> values;
    for (int64_t i = 0; i < 4; ++i)
      values.push_back(y.integerAt(i));
    return values;
  };
  EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_LT, a.get(), b.get(), y.get()));
  EXPECT_EQ(bools(), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_GE, a.get(), b.get(), y.get()));
  EXPECT_EQ(bools(), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_EQ, a.get(), b.get(), y.get()));
  EXPECT_EQ(bools(), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_NE, a.get(), b.get(), y.get()));
  EXPECT_EQ(bools(), (std::vector<int64_t>{1, 0, 1, 0}));
  EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_LE, a.get(), b.get(), y.get()));
  EXPECT_EQ(bools(), (std::vector<int64_t>{1, 1, 0, 1}));
  EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_GT, a.get(), b.get(), y.get()));
  EXPECT_EQ(bools(), (std::vector<int64_t>{0, 0, 1, 0}));
  Tensor p = Tensor::integers({4}, {0, 1, 0, 1}, TESSERA_BOOL);
  Tensor q = Tensor::integers({4}, {0, 0, 1, 1}, TESSERA_BOOL);
  EXPECT_KERNEL_OK(
      tessera_cpu_binary(TESSERA_LOGICAL_AND, p.get(), q.get(), y.get()));
  EXPECT_EQ(bools(), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_KERNEL_OK(
      tessera_cpu_binary(TESSERA_LOGICAL_OR, p.get(), q.get(), y.get()));
  EXPECT_EQ(bools(), (std::vector<int64_t>{0, 1, 1, 1}));
}

TEST(Binary, MaximumAndMinimumPropagateNan) {
  Tensor a = Tensor::floats({3}, {1, std::nanf(""), 5});
  Tensor b = Tensor::floats({3}, {2, 0, std::nanf("")});
  Tensor y(TESSERA_F32, {3});
  EXPECT_KERNEL_OK(
      tessera_cpu_binary(TESSERA_MAXIMUM, a.get(), b.get(), y.get()));
  EXPECT_EQ(y.at(0), 2);
  EXPECT_TRUE(std::isnan(y.at(1)));
  EXPECT_TRUE(std::isnan(y.at(2)));
  EXPECT_KERNEL_OK(
      tessera_cpu_binary(TESSERA_MINIMUM, a.get(), b.get(), y.get()));
  EXPECT_EQ(y.at(0), 1);
  EXPECT_TRUE(std::isnan(y.at(1)));
}

TEST(Binary, IntegersFollowC) {
  Tensor a = Tensor::integers({4}, {-7, 7, 3, 2});
  Tensor b = Tensor::integers({4}, {2, -2, 4, 10});
  Tensor y(TESSERA_I64, {4});
  EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_DIV, a.get(), b.get(), y.get()));
  EXPECT_EQ(y.integerAt(0), -3); // truncates toward zero
  EXPECT_EQ(y.integerAt(1), -3);
  EXPECT_EQ(y.integerAt(2), 0);
  EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_POW, a.get(), b.get(), y.get()));
  EXPECT_EQ(y.integerAt(0), 49);
  EXPECT_EQ(y.integerAt(1), 0); // 7^-2 truncates to 0
  EXPECT_EQ(y.integerAt(3), 1024);
  EXPECT_KERNEL_OK(
      tessera_cpu_binary(TESSERA_MAXIMUM, a.get(), b.get(), y.get()));
  EXPECT_EQ(y.integerAt(0), 2);
  Tensor zero = Tensor::integers({}, {0});
  EXPECT_NE(tessera_cpu_binary(TESSERA_DIV, a.get(), zero.get(), y.get()), 0);
  EXPECT_NE(std::string(tessera_cpu_last_error())
                .find("division by zero at position [0]"),
            std::string::npos)
      << tessera_cpu_last_error();
}

TEST(Binary, Bf16IsTheF32ResultRounded) {
  Tensor a = Tensor::floats({16}, randomFloats(16, 1), TESSERA_BF16);
  Tensor b = Tensor::floats({16}, randomFloats(16, 2), TESSERA_BF16);
  Tensor y(TESSERA_BF16, {16});
  EXPECT_KERNEL_OK(tessera_cpu_binary(TESSERA_MUL, a.get(), b.get(), y.get()));
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(y.at(i), tessera::cpu::bf16ToFloat(
                           tessera::cpu::floatToBf16(a.at(i) * b.at(i))));
}

TEST(Where, SelectsWithBroadcasting) {
  Tensor condition = Tensor::integers({3}, {1, 0, 1}, TESSERA_BOOL);
  Tensor onTrue = Tensor::floats({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor onFalse = Tensor::floats({}, {-1});
  Tensor y(TESSERA_F32, {2, 3});
  EXPECT_KERNEL_OK(
      tessera_cpu_where(condition.get(), onTrue.get(), onFalse.get(), y.get()));
  EXPECT_EQ(y.values(), (std::vector<float>{1, -1, 3, 4, -1, 6}));
}

} // namespace
