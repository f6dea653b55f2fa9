//===- Normalization.cpp - LayerNorm and RMSNorm, forward and backward ----===//
//
// Both normalize each "row": the elements of dims [axis, rank), of which
// there are `width`, over `rows` = the product of the leading dims. Row
// statistics (mean, variance, mean square) are summed in f64 and stored as
// f32, like PyTorch's f32 statistics but without its dependence on summation
// order; everything per element is f32.
//
// The backward kernels recompute the statistics instead of taking them from
// the forward: a row costs O(width) to redo, and the ABI stays one tensor in,
// one tensor out per op. With xhat = (x - mean) * rstd and h = dy * scale:
//   layer_norm: dx = rstd * (h - mean(h) - xhat * mean(h * xhat))
//   rms_norm:   dx = rstd * (h - x * rstd^2 * mean(h * x))
// and the parameter gradients sum over rows (in f64): dscale = sum dy * xhat
// (x * rstd for rms_norm), dbias = sum dy. They are overwritten, not added to.
//
//===----------------------------------------------------------------------===//

#include "Errors.h"
#include "TensorAccess.h"

#include <cmath>
#include <optional>
#include <vector>

using namespace tessera::cpu;

namespace {

/// The row layout of a normalization, with its shape checks.
struct RowLayout {
  int64_t rows;
  int64_t width;
  Shape normalizedShape;
};

RowLayout rowLayout(const tessera_tensor &x, int64_t axis) {
  requireAxis(axis, x.rank, "axis");
  Shape shape = shapeOf(x);
  return {product(shape, 0, static_cast<size_t>(axis)),
          product(shape, static_cast<size_t>(axis), shape.size()),
          Shape(shape.begin() + axis, shape.end())};
}

/// A parameter (scale or bias) checked against the normalized shape, or
/// nothing when the caller passed NULL.
std::optional<FloatInput> parameter(const tessera_tensor *tensor,
                                    const char *name, const RowLayout &layout) {
  if (!tensor)
    return std::nullopt;
  requireShape(requireTensor(tensor, name), layout.normalizedShape, name);
  return FloatInput(*tensor, name);
}

struct RowStatistics {
  float mean;
  float reciprocalStd;
};

RowStatistics layerNormStatistics(const float *row, int64_t width,
                                  double epsilon) {
  double sum = 0.0;
  for (int64_t j = 0; j < width; ++j)
    sum += row[j];
  double mean = sum / static_cast<double>(width);
  double squaredDeviations = 0.0;
  for (int64_t j = 0; j < width; ++j)
    squaredDeviations += (row[j] - mean) * (row[j] - mean);
  double variance = squaredDeviations / static_cast<double>(width);
  return {static_cast<float>(mean),
          static_cast<float>(1.0 / std::sqrt(variance + epsilon))};
}

float rmsNormReciprocal(const float *row, int64_t width, double epsilon) {
  double sumOfSquares = 0.0;
  for (int64_t j = 0; j < width; ++j)
    sumOfSquares += static_cast<double>(row[j]) * row[j];
  double meanSquare = sumOfSquares / static_cast<double>(width);
  return static_cast<float>(1.0 / std::sqrt(meanSquare + epsilon));
}

void checkEpsilon(double epsilon) {
  if (!(epsilon >= 0.0))
    fail("epsilon " + std::to_string(epsilon) + " must be >= 0");
}

/// f64 sums over rows of a parameter gradient, written out at the end.
class ParameterGradient {
public:
  ParameterGradient(tessera_tensor *tensor, const char *name,
                    const RowLayout &layout)
      : destination(tensor), destinationName(name) {
    if (!tensor)
      return;
    requireShape(requireTensor(tensor, name), layout.normalizedShape, name);
    sums.assign(static_cast<size_t>(layout.width), 0.0);
  }
  bool wanted() const { return destination != nullptr; }
  void add(int64_t index, double value) { sums[index] += value; }
  void write() {
    if (!destination)
      return;
    FloatOutput output(*destination, destinationName);
    for (size_t j = 0; j < sums.size(); ++j)
      output[j] = static_cast<float>(sums[j]);
    output.commit();
  }

private:
  tessera_tensor *destination;
  const char *destinationName;
  std::vector<double> sums;
};

/// x, dy and dx of a norm's backward (and its residual, its scale),
/// checked and read as f32; dx is committed by the caller.
struct NormGradient {
  NormGradient(const tessera_tensor *x, const tessera_tensor *scale,
               const tessera_tensor *dy, const tessera_tensor *residual,
               tessera_tensor *dx, const tessera_tensor *dscale, int64_t axis,
               double epsilon)
      : input(checkedInput(x, dy, dx, epsilon)), layout(rowLayout(input, axis)),
        scaleValues(checkedScale(scale, dscale, layout)), values(input, "x"),
        upstreamValues(*dy, "dy"), residualValues(checkedResidual(residual)),
        result(*dx, "dx") {}

  /// Row `row` of each.
  const float *x(int64_t row) const {
    return values.data() + row * layout.width;
  }
  const float *dy(int64_t row) const {
    return upstreamValues.data() + row * layout.width;
  }
  float *dx(int64_t row) { return result.data() + row * layout.width; }
  /// Null without a residual.
  const float *residual(int64_t row) const {
    return residualValues ? residualValues->data() + row * layout.width
                          : nullptr;
  }

  const tessera_tensor &input;
  RowLayout layout;
  std::optional<FloatInput> scaleValues;
  FloatInput values, upstreamValues;
  std::optional<FloatInput> residualValues;
  FloatOutput result;

private:
  static const tessera_tensor &checkedInput(const tessera_tensor *x,
                                            const tessera_tensor *dy,
                                            tessera_tensor *dx,
                                            double epsilon) {
    const tessera_tensor &input = requireTensor(x, "x");
    requireShape(requireTensor(dy, "dy"), shapeOf(input), "dy");
    requireShape(requireTensor(dx, "dx"), shapeOf(input), "dx");
    checkEpsilon(epsilon);
    return input;
  }
  static std::optional<FloatInput> checkedScale(const tessera_tensor *scale,
                                                const tessera_tensor *dscale,
                                                const RowLayout &layout) {
    std::optional<FloatInput> values = parameter(scale, "scale", layout);
    if (dscale && !scale)
      fail("dscale was requested without a scale");
    return values;
  }
  std::optional<FloatInput> checkedResidual(const tessera_tensor *tensor) {
    if (!tensor)
      return std::nullopt;
    requireShape(*tensor, shapeOf(input), "residual");
    return FloatInput(*tensor, "residual");
  }
};

/// dx = (residual +) layer_norm's input gradient, rounded once.
void layerNormGrad(const tessera_tensor *x, const tessera_tensor *scale,
                   const tessera_tensor *dy, const tessera_tensor *residual,
                   tessera_tensor *dx, tessera_tensor *dscale,
                   tessera_tensor *dbias, int64_t axis, double epsilon) {
  NormGradient operands(x, scale, dy, residual, dx, dscale, axis, epsilon);
  const RowLayout &layout = operands.layout;
  const std::optional<FloatInput> &scaleValues = operands.scaleValues;
  ParameterGradient scaleGradient(dscale, "dscale", layout);
  ParameterGradient biasGradient(dbias, "dbias", layout);
  std::vector<float> normalized(static_cast<size_t>(layout.width));
  std::vector<float> scaledUpstream(static_cast<size_t>(layout.width));
  double width = static_cast<double>(layout.width);
  for (int64_t row = 0; row < layout.rows; ++row) {
    const float *xRow = operands.x(row);
    const float *dyRow = operands.dy(row);
    float *dxRow = operands.dx(row);
    RowStatistics statistics = layerNormStatistics(xRow, layout.width, epsilon);
    double sumScaled = 0.0, sumScaledTimesNormalized = 0.0;
    for (int64_t j = 0; j < layout.width; ++j) {
      normalized[j] = (xRow[j] - statistics.mean) * statistics.reciprocalStd;
      scaledUpstream[j] = scaleValues ? dyRow[j] * (*scaleValues)[j] : dyRow[j];
      sumScaled += scaledUpstream[j];
      sumScaledTimesNormalized +=
          static_cast<double>(scaledUpstream[j]) * normalized[j];
      if (scaleGradient.wanted())
        scaleGradient.add(j, static_cast<double>(dyRow[j]) * normalized[j]);
      if (biasGradient.wanted())
        biasGradient.add(j, dyRow[j]);
    }
    float meanScaled = static_cast<float>(sumScaled / width);
    float meanScaledTimesNormalized =
        static_cast<float>(sumScaledTimesNormalized / width);
    const float *residualRow = operands.residual(row);
    for (int64_t j = 0; j < layout.width; ++j) {
      float gradient = statistics.reciprocalStd *
                       (scaledUpstream[j] - meanScaled -
                        normalized[j] * meanScaledTimesNormalized);
      dxRow[j] = residualRow ? residualRow[j] + gradient : gradient;
    }
  }
  operands.result.commit();
  scaleGradient.write();
  biasGradient.write();
}

/// dx = (residual +) rms_norm's input gradient, rounded once.
void rmsNormGrad(const tessera_tensor *x, const tessera_tensor *scale,
                 const tessera_tensor *dy, const tessera_tensor *residual,
                 tessera_tensor *dx, tessera_tensor *dscale, int64_t axis,
                 double epsilon) {
  NormGradient operands(x, scale, dy, residual, dx, dscale, axis, epsilon);
  const RowLayout &layout = operands.layout;
  const std::optional<FloatInput> &scaleValues = operands.scaleValues;
  ParameterGradient scaleGradient(dscale, "dscale", layout);
  std::vector<float> scaledUpstream(static_cast<size_t>(layout.width));
  double width = static_cast<double>(layout.width);
  for (int64_t row = 0; row < layout.rows; ++row) {
    const float *xRow = operands.x(row);
    const float *dyRow = operands.dy(row);
    float *dxRow = operands.dx(row);
    float reciprocal = rmsNormReciprocal(xRow, layout.width, epsilon);
    double sumScaledTimesInput = 0.0;
    for (int64_t j = 0; j < layout.width; ++j) {
      scaledUpstream[j] = scaleValues ? dyRow[j] * (*scaleValues)[j] : dyRow[j];
      sumScaledTimesInput += static_cast<double>(scaledUpstream[j]) * xRow[j];
      if (scaleGradient.wanted())
        scaleGradient.add(j,
                          static_cast<double>(dyRow[j]) * xRow[j] * reciprocal);
    }
    float correction = static_cast<float>(reciprocal * reciprocal *
                                          (sumScaledTimesInput / width));
    const float *residualRow = operands.residual(row);
    for (int64_t j = 0; j < layout.width; ++j) {
      float gradient = reciprocal * (scaledUpstream[j] - xRow[j] * correction);
      dxRow[j] = residualRow ? residualRow[j] + gradient : gradient;
    }
  }
  operands.result.commit();
  scaleGradient.write();
}

} // namespace

extern "C" int tessera_cpu_layer_norm(const tessera_tensor *x,
                                      const tessera_tensor *scale,
                                      const tessera_tensor *bias,
                                      tessera_tensor *y, int64_t axis,
                                      double epsilon) {
  return runKernel("tessera_cpu_layer_norm", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireShape(output, shapeOf(input), "y");
    checkEpsilon(epsilon);
    RowLayout layout = rowLayout(input, axis);
    std::optional<FloatInput> scaleValues = parameter(scale, "scale", layout);
    std::optional<FloatInput> biasValues = parameter(bias, "bias", layout);
    FloatInput values(input, "x");
    FloatOutput result(output, "y");
    for (int64_t row = 0; row < layout.rows; ++row) {
      const float *xRow = values.data() + row * layout.width;
      float *yRow = result.data() + row * layout.width;
      RowStatistics statistics =
          layerNormStatistics(xRow, layout.width, epsilon);
      for (int64_t j = 0; j < layout.width; ++j) {
        float normalized =
            (xRow[j] - statistics.mean) * statistics.reciprocalStd;
        if (scaleValues)
          normalized *= (*scaleValues)[j];
        if (biasValues)
          normalized += (*biasValues)[j];
        yRow[j] = normalized;
      }
    }
    result.commit();
  });
}

extern "C" int tessera_cpu_rms_norm(const tessera_tensor *x,
                                    const tessera_tensor *scale,
                                    tessera_tensor *y, int64_t axis,
                                    double epsilon) {
  return runKernel("tessera_cpu_rms_norm", [&] {
    const tessera_tensor &input = requireTensor(x, "x");
    tessera_tensor &output = requireTensor(y, "y");
    requireShape(output, shapeOf(input), "y");
    checkEpsilon(epsilon);
    RowLayout layout = rowLayout(input, axis);
    std::optional<FloatInput> scaleValues = parameter(scale, "scale", layout);
    FloatInput values(input, "x");
    FloatOutput result(output, "y");
    for (int64_t row = 0; row < layout.rows; ++row) {
      const float *xRow = values.data() + row * layout.width;
      float *yRow = result.data() + row * layout.width;
      float reciprocal = rmsNormReciprocal(xRow, layout.width, epsilon);
      for (int64_t j = 0; j < layout.width; ++j)
        yRow[j] =
            xRow[j] * reciprocal * (scaleValues ? (*scaleValues)[j] : 1.0f);
    }
    result.commit();
  });
}

extern "C" int tessera_cpu_layer_norm_grad(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, tessera_tensor *dx, tessera_tensor *dscale,
    tessera_tensor *dbias, int64_t axis, double epsilon) {
  return runKernel("tessera_cpu_layer_norm_grad", [&] {
    layerNormGrad(x, scale, dy, /*residual=*/nullptr, dx, dscale, dbias, axis,
                  epsilon);
  });
}

extern "C" int tessera_cpu_layer_norm_grad_add(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, const tessera_tensor *residual,
    tessera_tensor *dx, tessera_tensor *dscale, tessera_tensor *dbias,
    int64_t axis, double epsilon) {
  return runKernel("tessera_cpu_layer_norm_grad_add", [&] {
    layerNormGrad(x, scale, dy, &requireTensor(residual, "residual"), dx,
                  dscale, dbias, axis, epsilon);
  });
}

extern "C" int tessera_cpu_rms_norm_grad(const tessera_tensor *x,
                                         const tessera_tensor *scale,
                                         const tessera_tensor *dy,
                                         tessera_tensor *dx,
                                         tessera_tensor *dscale, int64_t axis,
                                         double epsilon) {
  return runKernel("tessera_cpu_rms_norm_grad", [&] {
    rmsNormGrad(x, scale, dy, /*residual=*/nullptr, dx, dscale, axis, epsilon);
  });
}

extern "C" int tessera_cpu_rms_norm_grad_add(
    const tessera_tensor *x, const tessera_tensor *scale,
    const tessera_tensor *dy, const tessera_tensor *residual,
    tessera_tensor *dx, tessera_tensor *dscale, int64_t axis, double epsilon) {
  return runKernel("tessera_cpu_rms_norm_grad_add", [&] {
    rmsNormGrad(x, scale, dy, &requireTensor(residual, "residual"), dx, dscale,
                axis, epsilon);
  });
}
