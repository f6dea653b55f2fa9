//===- GeneratorEvaluation.cpp - Fold ONNX ops that produce new values ----===//
//
// Ops whose result is generated rather than gathered from an input: the
// constants (Constant, ConstantOfShape), sequences (Range, CumSum) and masks
// (Trilu). Range and CumSum accumulate in the element type, as onnxruntime
// does, so a float32 Range or CumSum reproduces its rounding step by step.
//
//===----------------------------------------------------------------------===//

#include "EvaluationSupport.h"

#include <algorithm>
#include <cmath>

using namespace tessera::onnx_import;
using namespace tessera::onnx_import::constant_evaluation;
using onnx::TensorProto;

/// The tensor in attribute `value` of a Constant or ConstantOfShape.
static llvm::Expected<HostTensor>
decodeValueAttribute(const NodeContext &context,
                     const onnx::AttributeProto &value) {
  llvm::Expected<HostTensor> decoded =
      decodeTensorProto(value.t(), context.getModelDirectory());
  if (!decoded)
    return context.error(llvm::toString(decoded.takeError()));
  return decoded;
}

FoldResult constant_evaluation::evaluateConstant(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(0, 0))
    return failure;
  if (const onnx::AttributeProto *value = context.attribute("value")) {
    llvm::Expected<HostTensor> decoded = decodeValueAttribute(context, *value);
    if (!decoded)
      return decoded.takeError();
    return foldedTo(std::move(*decoded));
  }
  if (const onnx::AttributeProto *value = context.attribute("value_float"))
    return foldedTo(HostTensor::scalarDouble(value->f(), TensorProto::FLOAT));
  if (const onnx::AttributeProto *value = context.attribute("value_floats"))
    return foldedTo(HostTensor::fromDoubles(
        TensorProto::FLOAT, {value->floats_size()},
        std::vector<double>(value->floats().begin(), value->floats().end())));
  if (const onnx::AttributeProto *value = context.attribute("value_int"))
    return foldedTo(HostTensor::scalarInt(value->i(), TensorProto::INT64));
  if (const onnx::AttributeProto *value = context.attribute("value_ints"))
    return foldedTo(HostTensor::fromInts(
        TensorProto::INT64, {value->ints_size()},
        std::vector<int64_t>(value->ints().begin(), value->ints().end())));
  // Tessera has no run-time form of a Constant either: declining to fold
  // one would make the importer blame the fold limit.
  if (context.attribute("value_string") || context.attribute("value_strings") ||
      context.attribute("sparse_value"))
    return context.error("holds strings or a sparse tensor, which Tessera "
                         "does not compute with");
  return context.error("has no value attribute");
}

FoldResult
constant_evaluation::evaluateConstantOfShape(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(1, 1))
    return failure;
  llvm::Expected<std::vector<int64_t>> shape =
      context.shapeInput(*context.input(0));
  if (!shape)
    return shape.takeError();
  HostTensor fill = HostTensor::scalarDouble(0.0, TensorProto::FLOAT);
  if (const onnx::AttributeProto *value = context.attribute("value")) {
    llvm::Expected<HostTensor> decoded = decodeValueAttribute(context, *value);
    if (!decoded)
      return decoded.takeError();
    if (decoded->numElements() != 1)
      return context.error("value must hold exactly one element, got " +
                           decoded->describe());
    fill = std::move(*decoded);
  }
  if (exceedsFoldLimit(*shape))
    return notFolded();
  HostTensor result = makeResult(fill.getElementType(), *shape);
  int64_t count = result.numElements();
  withStorage(fill, result, [&](const auto *value, auto *destination) {
    std::fill(destination, destination + count, value[0]);
  });
  return foldedTo(std::move(result));
}

FoldResult constant_evaluation::evaluateRange(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(3, 3))
    return failure;
  const HostTensor &start = *context.input(0);
  const HostTensor &limit = *context.input(1);
  const HostTensor &delta = *context.input(2);
  for (const HostTensor *operand : {&start, &limit, &delta}) {
    if (operand->numElements() != 1)
      return context.error("start, limit and delta must be scalars, got " +
                           operand->describe());
    if (llvm::Error failure = context.requireSameElementType(start, *operand))
      return failure;
  }
  if (start.isBool())
    return context.error("Range does not accept BOOL inputs");
  int32_t elementType = start.getElementType();

  if (start.isFloat()) {
    // onnxruntime computes the count as ceil((limit - start) / delta) with
    // the difference in the element type, then accumulates value += delta in
    // the element type.
    auto generate = [&](auto first, auto last, auto step) -> FoldResult {
      if (step == 0)
        return context.error("delta must not be 0");
      double count = std::ceil(static_cast<double>(last - first) /
                               static_cast<double>(step));
      if (std::isnan(count))
        return context.error("start, limit and delta must be finite");
      if (count > static_cast<double>(kMaxFoldedElements))
        return notFolded();
      int64_t length = count > 0 ? static_cast<int64_t>(count) : 0;
      std::vector<double> values;
      values.reserve(length);
      auto value = first;
      for (int64_t i = 0; i < length; ++i) {
        values.push_back(static_cast<double>(value));
        value += step;
      }
      return foldedTo(
          HostTensor::fromDoubles(elementType, {length}, std::move(values)));
    };
    if (elementType == TensorProto::DOUBLE)
      return generate(start.getScalarDouble(), limit.getScalarDouble(),
                      delta.getScalarDouble());
    return generate(static_cast<float>(start.getScalarDouble()),
                    static_cast<float>(limit.getScalarDouble()),
                    static_cast<float>(delta.getScalarDouble()));
  }

  int64_t first = start.getScalarInt();
  int64_t last = limit.getScalarInt();
  int64_t step = delta.getScalarInt();
  if (step == 0)
    return context.error("delta must not be 0");
  // Exact integer ceil((last - first) / step); a span that overflows int64 is
  // far beyond the fold limit anyway.
  int64_t span;
  if (__builtin_sub_overflow(last, first, &span))
    return notFolded();
  int64_t length = 0;
  if (step > 0 && span > 0)
    length = (span - 1) / step + 1;
  else if (step < 0 && span < 0)
    length = (span + 1) / step + 1;
  if (length > kMaxFoldedElements)
    return notFolded();
  std::vector<int64_t> values(length);
  for (int64_t i = 0; i < length; ++i)
    values[i] = wrappingAdd(first, wrappingMul(i, step));
  return foldedTo(
      HostTensor::fromInts(elementType, {length}, std::move(values)));
}

FoldResult constant_evaluation::evaluateTrilu(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(1, 2))
    return failure;
  const HostTensor &data = *context.input(0);
  if (data.getRank() < 2)
    return context.error("input must have rank at least 2, got " +
                         data.describe());
  int64_t diagonal = 0;
  if (const HostTensor *k = context.input(1)) {
    if (llvm::Error failure = context.requireIntegerInput(*k, "k"))
      return failure;
    if (k->numElements() != 1)
      return context.error("k must be a scalar, got " + k->describe());
    diagonal = k->getScalarInt();
  }
  bool upper = context.intAttribute("upper", 1) != 0;
  llvm::ArrayRef<int64_t> shape = data.getShape();
  int64_t rows = shape[shape.size() - 2];
  int64_t columns = shape.back();
  int64_t matrices = product(shape.drop_back(2));
  HostTensor result = data;
  withMutableStorage(result, [&](auto *values) {
    for (int64_t m = 0; m < matrices; ++m)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < columns; ++c) {
          bool keep = upper ? c - r >= diagonal : c - r <= diagonal;
          if (!keep)
            values[(m * rows + r) * columns + c] = 0;
        }
  });
  return foldedTo(std::move(result));
}

FoldResult constant_evaluation::evaluateCumSum(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(2, 2))
    return failure;
  const HostTensor &data = *context.input(0);
  const HostTensor &axisInput = *context.input(1);
  if (llvm::Error failure = context.requireIntegerInput(axisInput, "axis"))
    return failure;
  if (axisInput.numElements() != 1)
    return context.error("axis must be a scalar, got " + axisInput.describe());
  if (data.isBool())
    return context.error("CumSum does not accept BOOL inputs");
  if (data.getRank() == 0)
    return context.error("input must have rank at least 1");
  llvm::Expected<int64_t> axis =
      context.normalizeAxis(axisInput.getScalarInt(), data.getRank());
  if (!axis)
    return axis.takeError();
  bool exclusive = context.intAttribute("exclusive", 0) != 0;
  bool reverse = context.intAttribute("reverse", 0) != 0;
  llvm::ArrayRef<int64_t> shape = data.getShape();
  AxisBlocks blocks = blocksAroundAxis(shape, *axis);
  int64_t axisSize = shape[*axis];
  int32_t elementType = data.getElementType();
  HostTensor result = makeResult(elementType, shape);

  // Runs the scan with the accumulator type of `zero`; `round` brings each
  // partial sum back to the element type, as onnxruntime accumulates in it.
  auto scan = [&](const auto *source, auto *destination, auto zero,
                  auto round) {
    for (int64_t o = 0; o < blocks.outer; ++o) {
      for (int64_t i = 0; i < blocks.inner; ++i) {
        auto sum = zero;
        for (int64_t step = 0; step < axisSize; ++step) {
          int64_t k = reverse ? axisSize - 1 - step : step;
          int64_t offset = (o * axisSize + k) * blocks.inner + i;
          auto next = round(
              wrappingAdd(sum, static_cast<decltype(zero)>(source[offset])));
          destination[offset] = exclusive ? sum : next;
          sum = next;
        }
      }
    }
  };
  if (elementType == TensorProto::DOUBLE) {
    scan(data.getFloatData().data(), result.getMutableFloatData().data(), 0.0,
         [](double value) { return value; });
  } else if (data.isFloat()) {
    scan(data.getFloatData().data(), result.getMutableFloatData().data(), 0.0f,
         [&](float value) {
           return static_cast<float>(
               roundToFloatElementType(value, elementType));
         });
  } else {
    scan(data.getIntData().data(), result.getMutableIntData().data(),
         int64_t(0), [](int64_t value) { return value; });
    result.normalizeStorage();
  }
  return foldedTo(std::move(result));
}
