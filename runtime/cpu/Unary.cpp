//===- Unary.cpp - Elementwise functions of one tensor and their grads ----===//
//
// Each op is one line of math in `applyUnary` and one line of derivative in
// `applyUnaryDerivative`, both templates over the arithmetic type: f32 for
// f32/bf16/f16 storage (the ABI's rule), f64 for f64 storage. Integer inputs
// are accepted by the ops that make sense on them (neg, abs) and computed in
// int64; logical_not reads anything and writes bool.
//
// GELU follows PyTorch: the erf form x * Phi(x) and the tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). Derivatives at kinks
// follow PyTorch too: relu'(0) = 0, abs'(0) = 0.
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"
#include "Errors.h"
#include "OperandChecks.h"
#include "TensorAccess.h"
#include "UnaryConstants.h"

#include <cmath>

using namespace tessera::cpu;

namespace {

const char *unaryOpName(int32_t op) {
  static const char *const names[] = {
      "neg",        "abs",       "exp", "log",     "sqrt",       "rsqrt",
      "reciprocal", "tanh",      "erf", "sigmoid", "relu",       "silu",
      "gelu_erf",   "gelu_tanh", "cos", "sin",     "logical_not"};
  if (op < 0 || op > TESSERA_LOGICAL_NOT)
    return "unknown";
  return names[op];
}

template <typename T> T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }

/// Phi and phi of the standard normal distribution.
template <typename T> T normalCdf(T x) {
  return T(0.5) * (T(1) + std::erf(x * T(kSqrtHalf)));
}
template <typename T> T normalPdf(T x) {
  return std::exp(T(-0.5) * x * x) * T(0.5 * kSqrtTwoOverPi);
}

template <typename T> T applyUnary(int32_t op, T x) {
  switch (op) {
  case TESSERA_NEG:
    return -x;
  case TESSERA_ABS:
    return std::fabs(x);
  case TESSERA_EXP:
    return std::exp(x);
  case TESSERA_LOG:
    return std::log(x);
  case TESSERA_SQRT:
    return std::sqrt(x);
  case TESSERA_RSQRT:
    return T(1) / std::sqrt(x);
  case TESSERA_RECIPROCAL:
    return T(1) / x;
  case TESSERA_TANH:
    return std::tanh(x);
  case TESSERA_ERF:
    return std::erf(x);
  case TESSERA_SIGMOID:
    return sigmoid(x);
  case TESSERA_RELU:
    return x > T(0) ? x : T(0);
  case TESSERA_SILU:
    return x * sigmoid(x);
  case TESSERA_GELU_ERF:
    return x * normalCdf(x);
  case TESSERA_GELU_TANH: {
    T inner = T(kSqrtTwoOverPi) * (x + T(kGeluTanhCubic) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  }
  case TESSERA_COS:
    return std::cos(x);
  case TESSERA_SIN:
    return std::sin(x);
  default:
    fail(std::string("op ") + unaryOpName(op) + " (" + std::to_string(op) +
         ") is not a floating-point unary op");
  }
}

/// d op(x) / dx.
template <typename T> T applyUnaryDerivative(int32_t op, T x) {
  switch (op) {
  case TESSERA_NEG:
    return T(-1);
  case TESSERA_ABS:
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
  case TESSERA_EXP:
    return std::exp(x);
  case TESSERA_LOG:
    return T(1) / x;
  case TESSERA_SQRT:
    return T(0.5) / std::sqrt(x);
  case TESSERA_RSQRT:
    return T(-0.5) / (x * std::sqrt(x));
  case TESSERA_RECIPROCAL:
    return T(-1) / (x * x);
  case TESSERA_TANH: {
    T t = std::tanh(x);
    return T(1) - t * t;
  }
  case TESSERA_ERF:
    return T(kTwoOverSqrtPi) * std::exp(-x * x);
  case TESSERA_SIGMOID: {
    T s = sigmoid(x);
    return s * (T(1) - s);
  }
  case TESSERA_RELU:
    return x > T(0) ? T(1) : T(0);
  case TESSERA_SILU: {
    T s = sigmoid(x);
    return s * (T(1) + x * (T(1) - s));
  }
  case TESSERA_GELU_ERF:
    return normalCdf(x) + x * normalPdf(x);
  case TESSERA_GELU_TANH: {
    T inner = T(kSqrtTwoOverPi) * (x + T(kGeluTanhCubic) * x * x * x);
    T t = std::tanh(inner);
    T innerDerivative =
        T(kSqrtTwoOverPi) * (T(1) + T(3 * kGeluTanhCubic) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * innerDerivative;
  }
  case TESSERA_COS:
    return -std::sin(x);
  case TESSERA_SIN:
    return std::cos(x);
  default:
    fail(std::string("op ") + unaryOpName(op) + " (" + std::to_string(op) +
         ") has no gradient");
  }
}

template <typename T>
void unaryFloat(int32_t op, const tessera_tensor &x, tessera_tensor &y) {
  int64_t count = elementCount(x);
  for (int64_t i = 0; i < count; ++i)
    storeNumber(
        y.data, y.dtype, i,
        applyUnary<T>(op, static_cast<T>(loadNumber(x.data, x.dtype, i))));
}

template <typename T>
void unaryGradFloat(int32_t op, const tessera_tensor &x,
                    const tessera_tensor &dy, tessera_tensor &dx) {
  int64_t count = elementCount(x);
  for (int64_t i = 0; i < count; ++i) {
    T value = static_cast<T>(loadNumber(x.data, x.dtype, i));
    T upstream = static_cast<T>(loadNumber(dy.data, dy.dtype, i));
    storeNumber(dx.data, dx.dtype, i,
                upstream * applyUnaryDerivative<T>(op, value));
  }
}

} // namespace

extern "C" int tessera_cpu_unary(int32_t op, const tessera_tensor *x,
                                 tessera_tensor *y) {
  return runKernel("tessera_cpu_unary", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireUnaryOperands(op, input, output);
    int64_t count = elementCount(input);
    if (op == TESSERA_LOGICAL_NOT) {
      for (int64_t i = 0; i < count; ++i)
        storeInteger(output.data, output.dtype, i,
                     loadNumber(input.data, input.dtype, i) == 0.0);
      return;
    }
    if (isIntegerType(input.dtype)) {
      if (op != TESSERA_NEG && op != TESSERA_ABS)
        fail(std::string("op ") + unaryOpName(op) + " needs a float tensor, " +
             "not " + dtypeName(input.dtype));
      for (int64_t i = 0; i < count; ++i) {
        int64_t value = loadInteger(input.data, input.dtype, i);
        int64_t result =
            op == TESSERA_NEG ? -value : (value < 0 ? -value : value);
        storeInteger(output.data, output.dtype, i, result);
      }
      return;
    }
    if (input.dtype == TESSERA_F64)
      unaryFloat<double>(op, input, output);
    else
      unaryFloat<float>(op, input, output);
  });
}

extern "C" int tessera_cpu_unary_grad(int32_t op, const tessera_tensor *x,
                                      const tessera_tensor *dy,
                                      tessera_tensor *dx) {
  return runKernel("tessera_cpu_unary_grad", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &result = requireTensor(dx, "dx");
    requireUnaryGradOperands(input, upstream, result);
    if (op < 0 || op >= TESSERA_LOGICAL_NOT)
      fail(std::string("op ") + unaryOpName(op) + " (" + std::to_string(op) +
           ") has no gradient");
    if (input.dtype == TESSERA_F64)
      unaryGradFloat<double>(op, input, upstream, result);
    else
      unaryGradFloat<float>(op, input, upstream, result);
  });
}
