//===- TestUtil.h - Tensors, random data and gradient checks for tests ----===//
//
// Tensor owns its bytes and hands out a tessera_tensor; the helpers below
// generate reproducible random data and check analytic gradients against
// central finite differences of a scalar objective sum(w * f(x)) with random
// weights w, evaluated in f64 from the kernels' f32 outputs.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TEST_TESTUTIL_H
#define TESSERA_RUNTIME_TEST_TESTUTIL_H

#include "DataTypes.h"
#include "tessera/runtime/cpu_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace tessera_test {

using Shape = std::vector<int64_t>;

inline int64_t countOf(const Shape &shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

/// A dense tensor that owns its storage (zero-initialized).
class Tensor {
public:
  Tensor(int32_t dtype, Shape shape)
      : shape(std::move(shape)),
        bytes(static_cast<size_t>(countOf(this->shape)) *
                  tessera::cpu::dtypeSize(dtype) +
              8) {
    descriptor.dtype = dtype;
    descriptor.rank = static_cast<int32_t>(this->shape.size());
    for (size_t dim = 0; dim < this->shape.size(); ++dim)
      descriptor.shape[dim] = this->shape[dim];
  }

  /// A float tensor of `dtype` holding `values` rounded to it.
  static Tensor floats(const Shape &shape, const std::vector<float> &values,
                       int32_t dtype = TESSERA_F32) {
    Tensor tensor(dtype, shape);
    EXPECT_EQ(static_cast<int64_t>(values.size()), tensor.count());
    for (size_t i = 0; i < values.size(); ++i)
      tessera::cpu::storeFloat(tensor.data(), dtype, static_cast<int64_t>(i),
                               values[i]);
    return tensor;
  }

  static Tensor integers(const Shape &shape, const std::vector<int64_t> &values,
                         int32_t dtype = TESSERA_I64) {
    Tensor tensor(dtype, shape);
    EXPECT_EQ(static_cast<int64_t>(values.size()), tensor.count());
    for (size_t i = 0; i < values.size(); ++i)
      tessera::cpu::storeInteger(tensor.data(), dtype, static_cast<int64_t>(i),
                                 values[i]);
    return tensor;
  }

  tessera_tensor *get() {
    descriptor.data = bytes.data();
    return &descriptor;
  }
  const tessera_tensor *get() const {
    descriptor.data = const_cast<unsigned char *>(bytes.data());
    return &descriptor;
  }
  void *data() { return bytes.data(); }
  float *f32() { return reinterpret_cast<float *>(bytes.data()); }
  int64_t count() const { return countOf(shape); }
  int32_t dtype() const { return descriptor.dtype; }
  const Shape &dims() const { return shape; }

  float at(int64_t i) const {
    return tessera::cpu::loadFloat(bytes.data(), descriptor.dtype, i);
  }
  int64_t integerAt(int64_t i) const {
    return tessera::cpu::loadInteger(bytes.data(), descriptor.dtype, i);
  }
  std::vector<float> values() const {
    std::vector<float> result(static_cast<size_t>(count()));
    for (int64_t i = 0; i < count(); ++i)
      result[i] = at(i);
    return result;
  }

private:
  Shape shape;
  std::vector<unsigned char> bytes;
  mutable tessera_tensor descriptor{};
};

/// Uniform random floats in [low, high), reproducible from `seed`.
inline std::vector<float> randomFloats(int64_t count, uint32_t seed,
                                       float low = -1.0f, float high = 1.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(static_cast<size_t>(count));
  for (float &value : values)
    value = distribution(generator);
  return values;
}

inline Tensor randomTensor(const Shape &shape, uint32_t seed, float low = -1.0f,
                           float high = 1.0f) {
  return Tensor::floats(shape, randomFloats(countOf(shape), seed, low, high));
}

/// sum_i weights[i] * y[i] in f64.
inline double weightedSum(const Tensor &y, const std::vector<float> &weights) {
  double sum = 0.0;
  for (int64_t i = 0; i < y.count(); ++i)
    sum += static_cast<double>(weights[i]) * y.at(i);
  return sum;
}

/// Central differences of `objective` with respect to every element of the
/// f32 tensor `input` (perturbed in place and restored).
inline std::vector<double>
numericGradient(Tensor &input, const std::function<double()> &objective,
                double step = 1e-2) {
  std::vector<double> gradient(static_cast<size_t>(input.count()));
  float *values = input.f32();
  for (int64_t i = 0; i < input.count(); ++i) {
    float original = values[i];
    float plus = static_cast<float>(original + step);
    float minus = static_cast<float>(original - step);
    values[i] = plus;
    double objectivePlus = objective();
    values[i] = minus;
    double objectiveMinus = objective();
    values[i] = original;
    gradient[i] = (objectivePlus - objectiveMinus) /
                  (static_cast<double>(plus) - static_cast<double>(minus));
  }
  return gradient;
}

/// Expects |analytic - numeric| <= relativeTolerance * (|numeric| + rms),
/// rms being the root mean square of the numeric gradient: relative to each
/// element, with the tensor's own scale as the floor for tiny elements.
inline void expectGradientNear(const Tensor &analytic,
                               const std::vector<double> &numeric,
                               const std::string &what,
                               double relativeTolerance = 1e-3) {
  ASSERT_EQ(analytic.count(), static_cast<int64_t>(numeric.size())) << what;
  double squares = 0.0;
  for (double value : numeric)
    squares += value * value;
  double rms = std::sqrt(squares / std::max<size_t>(numeric.size(), 1));
  ASSERT_GT(rms, 1e-6) << what
                       << ": the gradient is zero; the check is vacuous";
  for (size_t i = 0; i < numeric.size(); ++i)
    EXPECT_NEAR(analytic.at(static_cast<int64_t>(i)), numeric[i],
                relativeTolerance * (std::fabs(numeric[i]) + rms))
        << what << " at element " << i;
}

inline void expectAllNear(const std::vector<float> &actual,
                          const float *expected, size_t count, double tolerance,
                          const std::string &what) {
  ASSERT_EQ(actual.size(), count) << what;
  for (size_t i = 0; i < count; ++i)
    EXPECT_NEAR(actual[i], expected[i],
                tolerance * (1.0 + std::fabs(expected[i])))
        << what << " at element " << i;
}

/// Runs a kernel call and fails the test with its message if it fails.
#define EXPECT_KERNEL_OK(call)                                                 \
  do {                                                                         \
    int status_ = (call);                                                      \
    EXPECT_EQ(status_, 0) << tessera_cpu_last_error();                         \
  } while (0)

} // namespace tessera_test

#endif // TESSERA_RUNTIME_TEST_TESTUTIL_H
