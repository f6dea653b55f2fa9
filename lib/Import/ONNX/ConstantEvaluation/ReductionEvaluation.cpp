//===- ReductionEvaluation.cpp - Fold ONNX Reduce* ops --------------------===//
//
// ReduceSum, ReduceMean, ReduceMax, ReduceMin and ReduceProd. One strided
// walk over the input adds every element into its output slot: the output
// strides are those of the kept shape with the reduced dimensions set to 0.
// Floating reductions accumulate in double and round once, so the result is
// the correctly rounded reduction rather than one particular summation
// order; integer reductions wrap like the other integer ops.
//
//===----------------------------------------------------------------------===//

#include "EvaluationSupport.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace tessera::onnx_import;
using namespace tessera::onnx_import::constant_evaluation;

namespace {

enum class ReduceKind { Sum, Mean, Max, Min, Prod };

/// Where each input element goes in a reduction.
struct ReductionLayout {
  std::vector<int64_t> outputShape;
  /// Strides from an input element to its output slot.
  Strides outputStrides;
  int64_t outputCount;
  /// How many input elements fold into each output element.
  int64_t reductionSize;
};

ReductionLayout layoutReduction(llvm::ArrayRef<int64_t> shape,
                                const std::vector<bool> &reduced,
                                bool keepDims) {
  ReductionLayout layout;
  std::vector<int64_t> keptShape;
  layout.reductionSize = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    keptShape.push_back(reduced[d] ? 1 : shape[d]);
    if (reduced[d])
      layout.reductionSize *= shape[d];
    if (!reduced[d] || keepDims)
      layout.outputShape.push_back(keptShape.back());
  }
  layout.outputStrides = contiguousStrides(keptShape);
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d])
      layout.outputStrides[d] = 0;
  layout.outputCount = product(keptShape);
  return layout;
}

/// Accumulates every element of `source` (of `shape`) into its output slot.
template <typename Value, typename Combine>
void accumulate(llvm::ArrayRef<int64_t> shape, const ReductionLayout &layout,
                const Value *source, Value *accumulators, Combine combine) {
  walk<1>(shape, {layout.outputStrides}, {0},
          [&](int64_t i, const std::array<int64_t, 1> &offset) {
            accumulators[offset[0]] =
                combine(accumulators[offset[0]], source[i]);
          });
}

HostTensor reduceFloats(const HostTensor &data, ReduceKind kind,
                        ReductionLayout layout) {
  double initial = kind == ReduceKind::Prod  ? 1.0
                   : kind == ReduceKind::Max ? -INFINITY
                   : kind == ReduceKind::Min ? INFINITY
                                             : 0.0;
  std::vector<double> values(layout.outputCount, initial);
  const double *source = data.getFloatData().data();
  llvm::ArrayRef<int64_t> shape = data.getShape();
  switch (kind) {
  case ReduceKind::Sum:
  case ReduceKind::Mean:
    accumulate(shape, layout, source, values.data(),
               [](double acc, double x) { return acc + x; });
    break;
  case ReduceKind::Prod:
    accumulate(shape, layout, source, values.data(),
               [](double acc, double x) { return acc * x; });
    break;
  case ReduceKind::Max:
  case ReduceKind::Min: {
    // NaN wins, as in onnxruntime.
    bool isMax = kind == ReduceKind::Max;
    accumulate(shape, layout, source, values.data(),
               [isMax](double acc, double x) {
                 return std::isnan(x) || (isMax ? x > acc : x < acc) ? x : acc;
               });
    break;
  }
  }
  if (kind == ReduceKind::Mean)
    for (double &value : values)
      value /= static_cast<double>(layout.reductionSize);
  return HostTensor::fromDoubles(data.getElementType(),
                                 std::move(layout.outputShape),
                                 std::move(values));
}

/// std::nullopt when the reduction is not folded (the mean of nothing).
std::optional<HostTensor> reduceIntegers(const HostTensor &data,
                                         ReduceKind kind,
                                         ReductionLayout layout) {
  int32_t elementType = data.getElementType();
  auto [lowest, highest] = integerRange(elementType);
  bool isUnsigned64 = data.isUnsigned64();
  int64_t initial = kind == ReduceKind::Prod  ? 1
                    : kind == ReduceKind::Max ? lowest
                    : kind == ReduceKind::Min ? highest
                                              : 0;
  std::vector<int64_t> values(layout.outputCount, initial);
  const int64_t *source = data.getIntData().data();
  llvm::ArrayRef<int64_t> shape = data.getShape();
  switch (kind) {
  case ReduceKind::Sum:
  case ReduceKind::Mean:
    accumulate(shape, layout, source, values.data(), AddFunctor());
    break;
  case ReduceKind::Prod:
    accumulate(shape, layout, source, values.data(), MulFunctor());
    break;
  case ReduceKind::Max:
  case ReduceKind::Min: {
    bool isMax = kind == ReduceKind::Max;
    accumulate(shape, layout, source, values.data(),
               [&](int64_t acc, int64_t x) {
                 bool greater = isUnsigned64 ? static_cast<uint64_t>(x) >
                                                   static_cast<uint64_t>(acc)
                                             : x > acc;
                 bool less = isUnsigned64 ? static_cast<uint64_t>(x) <
                                                static_cast<uint64_t>(acc)
                                          : x < acc;
                 return (isMax ? greater : less) ? x : acc;
               });
    break;
  }
  }
  if (kind == ReduceKind::Mean) {
    // Integer mean truncates like onnxruntime; the mean of nothing is 0/0.
    if (layout.reductionSize == 0)
      return std::nullopt;
    for (int64_t &value : values)
      value = isUnsigned64 ? static_cast<int64_t>(
                                 static_cast<uint64_t>(value) /
                                 static_cast<uint64_t>(layout.reductionSize))
                           : value / layout.reductionSize;
  }
  return HostTensor::fromInts(elementType, std::move(layout.outputShape),
                              std::move(values));
}

} // namespace

FoldResult constant_evaluation::evaluateReduce(const NodeContext &context) {
  ReduceKind kind = llvm::StringSwitch<ReduceKind>(context.getOpType())
                        .Case("ReduceSum", ReduceKind::Sum)
                        .Case("ReduceMean", ReduceKind::Mean)
                        .Case("ReduceMax", ReduceKind::Max)
                        .Case("ReduceMin", ReduceKind::Min)
                        .Default(ReduceKind::Prod);
  // ReduceSum took axes as an input from opset 13, the others from 18.
  int64_t axesInputOpset = kind == ReduceKind::Sum ? 13 : 18;
  if (llvm::Error failure = context.checkInputCount(
          1, context.getOpsetVersion() >= axesInputOpset ? 2 : 1))
    return failure;
  const HostTensor &data = *context.input(0);
  llvm::Expected<std::optional<std::vector<int64_t>>> axes =
      context.intsFromInputOrAttribute(1, "axes", axesInputOpset);
  if (!axes)
    return axes.takeError();
  bool keepDims = context.intAttribute("keepdims", 1) != 0;
  bool noopWithEmptyAxes =
      context.intAttribute("noop_with_empty_axes", 0) != 0;
  bool reduceAll = !*axes || (*axes)->empty();
  if (reduceAll && noopWithEmptyAxes)
    return foldedTo(data);

  int64_t rank = data.getRank();
  std::vector<bool> reduced(rank, reduceAll);
  if (!reduceAll) {
    // Unlike normalizeAxes, a repeated axis is accepted here.
    for (int64_t axis : **axes) {
      llvm::Expected<int64_t> positive = context.normalizeAxis(axis, rank);
      if (!positive)
        return positive.takeError();
      reduced[*positive] = true;
    }
  }
  ReductionLayout layout = layoutReduction(data.getShape(), reduced, keepDims);
  if (data.isFloat())
    return foldedTo(reduceFloats(data, kind, std::move(layout)));
  std::optional<HostTensor> result =
      reduceIntegers(data, kind, std::move(layout));
  if (!result)
    return notFolded();
  return foldedTo(std::move(*result));
}
