//===- Softmax.cpp - Softmax along any axis, and its gradient -------------===//
//
// A tensor seen along `axis` is [outer, length, inner]: element (o, a, i)
// sits at (o * length + a) * inner + i. Each (o, i) pair is one softmax over
// `length` values `inner` apart. The max is subtracted before exp (so large
// logits do not overflow) and the sum is f64. A row of all -inf gives NaN,
// as in PyTorch.
//
// The gradient takes the forward output y: dx = y * (dy - sum(dy * y)).
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "TensorAccess.h"

#include <cmath>
#include <limits>

using namespace tessera::cpu;

namespace {

struct AxisLayout {
  int64_t outer;
  int64_t length;
  int64_t inner;
};

AxisLayout axisLayout(const tessera_tensor &tensor, int64_t axis) {
  requireAxis(axis, tensor.rank, "axis");
  Shape shape = shapeOf(tensor);
  return {product(shape, 0, static_cast<size_t>(axis)), shape[axis],
          product(shape, static_cast<size_t>(axis) + 1, shape.size())};
}

} // namespace

extern "C" int tessera_cpu_softmax(const tessera_tensor *x, tessera_tensor *y,
                                   int64_t axis) {
  return runKernel("tessera_cpu_softmax", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireShape(output, shapeOf(input), "y");
    AxisLayout layout = axisLayout(input, axis);
    FloatInput values(input, "x");
    FloatOutput result(output, "y");
    for (int64_t o = 0; o < layout.outer; ++o) {
      for (int64_t i = 0; i < layout.inner; ++i) {
        int64_t base = o * layout.length * layout.inner + i;
        float maximum = -std::numeric_limits<float>::infinity();
        for (int64_t a = 0; a < layout.length; ++a)
          maximum = std::fmax(maximum, values[base + a * layout.inner]);
        double sum = 0.0;
        for (int64_t a = 0; a < layout.length; ++a) {
          int64_t at = base + a * layout.inner;
          result[at] = std::exp(values[at] - maximum);
          sum += result[at];
        }
        float reciprocalSum = static_cast<float>(1.0 / sum);
        for (int64_t a = 0; a < layout.length; ++a)
          result[base + a * layout.inner] *= reciprocalSum;
      }
    }
    result.commit();
  });
}

extern "C" int tessera_cpu_softmax_grad(const tessera_tensor *y,
                                        const tessera_tensor *dy,
                                        tessera_tensor *dx, int64_t axis) {
  return runKernel("tessera_cpu_softmax_grad", [&] {
    const tessera_tensor &output = requireTensor(y, "y");
    const tessera_tensor &upstream = requireTensor(dy, "dy");
    tessera_tensor &inputGradient = requireTensor(dx, "dx");
    requireShape(upstream, shapeOf(output), "dy");
    requireShape(inputGradient, shapeOf(output), "dx");
    AxisLayout layout = axisLayout(output, axis);
    FloatInput probabilities(output, "y");
    FloatInput upstreamValues(upstream, "dy");
    FloatOutput result(inputGradient, "dx");
    for (int64_t o = 0; o < layout.outer; ++o) {
      for (int64_t i = 0; i < layout.inner; ++i) {
        int64_t base = o * layout.length * layout.inner + i;
        double weightedSum = 0.0;
        for (int64_t a = 0; a < layout.length; ++a) {
          int64_t at = base + a * layout.inner;
          weightedSum +=
              static_cast<double>(upstreamValues[at]) * probabilities[at];
        }
        float dot = static_cast<float>(weightedSum);
        for (int64_t a = 0; a < layout.length; ++a) {
          int64_t at = base + a * layout.inner;
          result[at] = probabilities[at] * (upstreamValues[at] - dot);
        }
      }
    }
    result.commit();
  });
}
