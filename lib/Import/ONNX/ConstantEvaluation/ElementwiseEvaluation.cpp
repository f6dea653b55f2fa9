//===- ElementwiseEvaluation.cpp - Fold elementwise ONNX ops --------------===//
//
// Cast, Where, the comparisons, the logical ops, arithmetic (Add, Sub, Mul,
// Div, Pow, Max, Min) and unary math. Each computes in the precision
// onnxruntime uses for the element type: fp32 ops in float, fp16/bf16 ops in
// float and then rounded (HostTensor::normalizeStorage), double in double,
// and integers in 64 bits, wrapped back to their width afterwards.
//
//===----------------------------------------------------------------------===//

#include "EvaluationSupport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace tessera::onnx_import;
using namespace tessera::onnx_import::constant_evaluation;
using onnx::TensorProto;

namespace {

//===----------------------------------------------------------------------===//
// Functors
//===----------------------------------------------------------------------===//

struct SubFunctor {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<uint64_t>(a) -
                            static_cast<uint64_t>(b));
    else
      return a - b;
  }
};
/// Integer division truncates toward zero (C++ and onnxruntime agree); the
/// caller rejects integer division by zero before calling.
struct DivFunctor {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_signed_v<T> && std::is_integral_v<T>) {
      // INT64_MIN / -1 overflows; wrap like the other integer ops.
      if (b == -1)
        return static_cast<T>(0 - static_cast<uint64_t>(a));
    }
    return a / b;
  }
};
/// NaN wins, as in onnxruntime's Max/Min. `IsMax` picks the larger value.
template <bool IsMax> struct MaxMinFunctor {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a))
        return a;
      if (std::isnan(b))
        return b;
    }
    if constexpr (IsMax)
      return a < b ? b : a;
    else
      return b < a ? b : a;
  }
};

/// Integer power by squaring with wrapping; negative exponents follow
/// onnxruntime, which truncates std::pow's fractional result.
int64_t integerPower(int64_t base, int64_t exponent) {
  if (exponent < 0)
    return static_cast<int64_t>(
        std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1)
      result = wrappingMul(result, base);
    base = wrappingMul(base, base);
    exponent >>= 1;
  }
  return result;
}

enum class CompareKind { Equal, Less, LessOrEqual, Greater, GreaterOrEqual };

template <typename T> bool compareValues(CompareKind kind, T a, T b) {
  switch (kind) {
  case CompareKind::Equal:
    return a == b;
  case CompareKind::Less:
    return a < b;
  case CompareKind::LessOrEqual:
    return a <= b;
  case CompareKind::Greater:
    return a > b;
  case CompareKind::GreaterOrEqual:
    return a >= b;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Runs `compute` over the broadcast of two integer tensors of one element
/// type: on uint64_t values for UINT64, on int64_t values otherwise.
template <typename Compute>
void broadcastIntegers(const HostTensor &lhs, const HostTensor &rhs,
                       llvm::ArrayRef<int64_t> outputShape, int64_t *output,
                       Compute compute) {
  const int64_t *a = lhs.getIntData().data();
  const int64_t *b = rhs.getIntData().data();
  if (lhs.isUnsigned64())
    broadcastBinary(a, lhs.getShape(), b, rhs.getShape(), outputShape, output,
                    [&](int64_t x, int64_t y) {
                      return static_cast<int64_t>(compute(
                          static_cast<uint64_t>(x), static_cast<uint64_t>(y)));
                    });
  else
    broadcastBinary(a, lhs.getShape(), b, rhs.getShape(), outputShape, output,
                    [&](int64_t x, int64_t y) {
                      return static_cast<int64_t>(compute(x, y));
                    });
}

/// Applies an arithmetic functor with the precision of the element type.
template <typename Functor>
HostTensor applyArithmetic(const HostTensor &lhs, const HostTensor &rhs,
                           llvm::ArrayRef<int64_t> outputShape,
                           Functor functor) {
  int32_t elementType = lhs.getElementType();
  HostTensor result = makeResult(elementType, outputShape);
  if (lhs.isFloat()) {
    const double *a = lhs.getFloatData().data();
    const double *b = rhs.getFloatData().data();
    double *out = result.getMutableFloatData().data();
    if (elementType == TensorProto::DOUBLE) {
      broadcastBinary(a, lhs.getShape(), b, rhs.getShape(), outputShape, out,
                      [&](double x, double y) { return functor(x, y); });
    } else {
      // fp32 semantics; fp16/bf16 are then rounded by normalizeStorage.
      broadcastBinary(a, lhs.getShape(), b, rhs.getShape(), outputShape, out,
                      [&](double x, double y) {
                        return static_cast<double>(functor(
                            static_cast<float>(x), static_cast<float>(y)));
                      });
    }
  } else {
    broadcastIntegers(lhs, rhs, outputShape,
                      result.getMutableIntData().data(), functor);
  }
  result.normalizeStorage();
  return result;
}

/// Applies a unary floating function with the precision of the element type.
template <typename Functor>
HostTensor applyFloatUnary(const HostTensor &input, Functor functor) {
  HostTensor result = makeResult(input.getElementType(), input.getShape());
  const double *in = input.getFloatData().data();
  double *out = result.getMutableFloatData().data();
  int64_t count = input.numElements();
  if (input.getElementType() == TensorProto::DOUBLE) {
    for (int64_t i = 0; i < count; ++i)
      out[i] = functor(in[i]);
  } else {
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<double>(functor(static_cast<float>(in[i])));
    result.normalizeStorage();
  }
  return result;
}

/// Sets `outputShape` to the broadcast of `operands`. Returns what the
/// evaluator must return instead of computing: the error when the shapes do
/// not broadcast, or "not folded" when the result exceeds the fold limit.
std::optional<FoldResult>
broadcastWithinFoldLimit(const NodeContext &context,
                         llvm::ArrayRef<const HostTensor *> operands,
                         std::vector<int64_t> &outputShape) {
  llvm::Expected<std::vector<int64_t>> shape = context.broadcastAll(operands);
  if (!shape)
    return FoldResult(shape.takeError());
  if (exceedsFoldLimit(*shape))
    return notFolded();
  outputShape = std::move(*shape);
  return std::nullopt;
}

/// Converts element `index` of `input` to the floating `targetType` the way
/// onnxruntime's Cast does.
double castToFloat(const HostTensor &input, int64_t index, int32_t targetType) {
  if (input.isFloat())
    return roundToFloatElementType(input.getFloatData()[index], targetType);
  int64_t value = input.getIntData()[index];
  if (targetType == TensorProto::DOUBLE)
    return input.isUnsigned64()
               ? static_cast<double>(static_cast<uint64_t>(value))
               : static_cast<double>(value);
  // Integer -> fp32 rounds once, directly; fp16/bf16 then round from fp32.
  float asFloat = input.isUnsigned64()
                      ? static_cast<float>(static_cast<uint64_t>(value))
                      : static_cast<float>(value);
  return roundToFloatElementType(asFloat, targetType);
}

FoldResult castTo(const HostTensor &data, int32_t targetType) {
  if (!isSupportedElementType(targetType))
    return notFolded();
  HostTensor result = makeResult(targetType, data.getShape());
  int64_t count = data.numElements();
  if (result.isFloat()) {
    std::vector<double> &out = result.getMutableFloatData();
    for (int64_t i = 0; i < count; ++i)
      out[i] = castToFloat(data, i, targetType);
    return foldedTo(std::move(result));
  }
  std::vector<int64_t> &out = result.getMutableIntData();
  if (!data.isFloat()) {
    llvm::ArrayRef<int64_t> in = data.getIntData();
    for (int64_t i = 0; i < count; ++i)
      out[i] = wrapToIntegerElementType(in[i], targetType);
    return foldedTo(std::move(result));
  }
  llvm::ArrayRef<double> in = data.getFloatData();
  if (targetType == TensorProto::BOOL) {
    for (int64_t i = 0; i < count; ++i)
      out[i] = in[i] != 0.0; // NaN is nonzero, hence true.
    return foldedTo(std::move(result));
  }
  // Floating -> integer truncates toward zero. ONNX leaves values outside
  // the target range (and NaN) undefined, so those are not folded: the
  // backend's own Cast decides.
  auto [lowest, highest] = integerRange(targetType);
  for (int64_t i = 0; i < count; ++i) {
    double truncated = std::trunc(in[i]);
    if (targetType == TensorProto::UINT64) {
      if (!(truncated >= 0.0 && truncated < 0x1p64))
        return notFolded();
      out[i] = static_cast<int64_t>(static_cast<uint64_t>(truncated));
      continue;
    }
    if (!(truncated >= -0x1p63 && truncated < 0x1p63))
      return notFolded();
    int64_t value = static_cast<int64_t>(truncated);
    if (value < lowest || value > highest)
      return notFolded();
    out[i] = value;
  }
  return foldedTo(std::move(result));
}

} // namespace

//===----------------------------------------------------------------------===//
// Cast and Where
//===----------------------------------------------------------------------===//

FoldResult constant_evaluation::evaluateCast(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(1, 1))
    return failure;
  const onnx::AttributeProto *to = context.attribute("to");
  if (!to)
    return context.error("missing required attribute 'to'");
  return castTo(*context.input(0), static_cast<int32_t>(to->i()));
}

FoldResult constant_evaluation::evaluateCastLike(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(2, 2))
    return failure;
  return castTo(*context.input(0), context.input(1)->getElementType());
}

FoldResult constant_evaluation::evaluateWhere(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(3, 3))
    return failure;
  const HostTensor &condition = *context.input(0);
  const HostTensor &onTrue = *context.input(1);
  const HostTensor &onFalse = *context.input(2);
  if (!condition.isBool())
    return context.error("condition must be BOOL, got " +
                         condition.describe());
  if (llvm::Error failure = context.requireSameElementType(onTrue, onFalse))
    return failure;
  std::vector<int64_t> outputShape;
  if (std::optional<FoldResult> early = broadcastWithinFoldLimit(
          context, {&condition, &onTrue, &onFalse}, outputShape))
    return std::move(*early);
  HostTensor result = makeResult(onTrue.getElementType(), outputShape);
  const int64_t *choose = condition.getIntData().data();
  std::array<Strides, 3> strides = {
      broadcastStrides(condition.getShape(), outputShape),
      broadcastStrides(onTrue.getShape(), outputShape),
      broadcastStrides(onFalse.getShape(), outputShape)};
  auto select = [&](const auto *trueValues, const auto *falseValues,
                    auto *destination) {
    walk<3>(outputShape, strides, {0, 0, 0},
            [&](int64_t i, const std::array<int64_t, 3> &offsets) {
              destination[i] = choose[offsets[0]] ? trueValues[offsets[1]]
                                                  : falseValues[offsets[2]];
            });
  };
  if (result.isFloat())
    select(onTrue.getFloatData().data(), onFalse.getFloatData().data(),
           result.getMutableFloatData().data());
  else
    select(onTrue.getIntData().data(), onFalse.getIntData().data(),
           result.getMutableIntData().data());
  return foldedTo(std::move(result));
}

//===----------------------------------------------------------------------===//
// Comparisons and logic
//===----------------------------------------------------------------------===//

FoldResult constant_evaluation::evaluateCompare(const NodeContext &context) {
  CompareKind kind = llvm::StringSwitch<CompareKind>(context.getOpType())
                         .Case("Equal", CompareKind::Equal)
                         .Case("Less", CompareKind::Less)
                         .Case("LessOrEqual", CompareKind::LessOrEqual)
                         .Case("Greater", CompareKind::Greater)
                         .Default(CompareKind::GreaterOrEqual);
  if (llvm::Error failure = context.checkInputCount(2, 2))
    return failure;
  const HostTensor &lhs = *context.input(0);
  const HostTensor &rhs = *context.input(1);
  if (llvm::Error failure = context.requireSameElementType(lhs, rhs))
    return failure;
  std::vector<int64_t> outputShape;
  if (std::optional<FoldResult> early =
          broadcastWithinFoldLimit(context, {&lhs, &rhs}, outputShape))
    return std::move(*early);
  HostTensor result = makeResult(TensorProto::BOOL, outputShape);
  int64_t *out = result.getMutableIntData().data();
  if (lhs.isFloat()) {
    // Stored doubles are exact, so comparing them equals comparing in the
    // element type.
    broadcastBinary(lhs.getFloatData().data(), lhs.getShape(),
                    rhs.getFloatData().data(), rhs.getShape(), outputShape,
                    out, [kind](double a, double b) -> int64_t {
                      return compareValues(kind, a, b);
                    });
  } else {
    broadcastIntegers(lhs, rhs, outputShape, out, [kind](auto a, auto b) {
      return compareValues(kind, a, b);
    });
  }
  return foldedTo(std::move(result));
}

FoldResult constant_evaluation::evaluateLogical(const NodeContext &context) {
  llvm::StringRef opType = context.getOpType();
  bool isNot = opType == "Not";
  if (llvm::Error failure =
          context.checkInputCount(isNot ? 1 : 2, isNot ? 1 : 2))
    return failure;
  for (size_t i = 0; i < (isNot ? 1u : 2u); ++i)
    if (!context.input(i)->isBool())
      return context.error("inputs must be BOOL, got " +
                           context.input(i)->describe());
  const HostTensor &lhs = *context.input(0);
  if (isNot) {
    HostTensor result = lhs;
    for (int64_t &value : result.getMutableIntData())
      value = !value;
    return foldedTo(std::move(result));
  }
  const HostTensor &rhs = *context.input(1);
  std::vector<int64_t> outputShape;
  if (std::optional<FoldResult> early =
          broadcastWithinFoldLimit(context, {&lhs, &rhs}, outputShape))
    return std::move(*early);
  HostTensor result = makeResult(TensorProto::BOOL, outputShape);
  int64_t *out = result.getMutableIntData().data();
  if (opType == "And")
    broadcastIntegers(lhs, rhs, outputShape, out,
                      [](auto x, auto y) { return x & y; });
  else if (opType == "Or")
    broadcastIntegers(lhs, rhs, outputShape, out,
                      [](auto x, auto y) { return x | y; });
  else
    broadcastIntegers(lhs, rhs, outputShape, out,
                      [](auto x, auto y) { return x ^ y; });
  return foldedTo(std::move(result));
}

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

FoldResult constant_evaluation::evaluateArithmetic(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(2, 2))
    return failure;
  const HostTensor &lhs = *context.input(0);
  const HostTensor &rhs = *context.input(1);
  if (llvm::Error failure = context.requireSameElementType(lhs, rhs))
    return failure;
  if (lhs.isBool())
    return context.error("arithmetic on BOOL tensors is not defined");
  std::vector<int64_t> outputShape;
  if (std::optional<FoldResult> early =
          broadcastWithinFoldLimit(context, {&lhs, &rhs}, outputShape))
    return std::move(*early);
  llvm::StringRef opType = context.getOpType();
  if (opType == "Add")
    return foldedTo(applyArithmetic(lhs, rhs, outputShape, AddFunctor()));
  if (opType == "Sub")
    return foldedTo(applyArithmetic(lhs, rhs, outputShape, SubFunctor()));
  if (opType == "Mul")
    return foldedTo(applyArithmetic(lhs, rhs, outputShape, MulFunctor()));
  if (rhs.isInteger() && llvm::is_contained(rhs.getIntData(), 0))
    return context.error("integer division by zero");
  return foldedTo(applyArithmetic(lhs, rhs, outputShape, DivFunctor()));
}

FoldResult constant_evaluation::evaluatePow(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(2, 2))
    return failure;
  const HostTensor &base = *context.input(0);
  const HostTensor &exponent = *context.input(1);
  if (base.isBool() || exponent.isBool())
    return context.error("Pow does not accept BOOL inputs");
  std::vector<int64_t> outputShape;
  if (std::optional<FoldResult> early =
          broadcastWithinFoldLimit(context, {&base, &exponent}, outputShape))
    return std::move(*early);
  int32_t elementType = base.getElementType();
  HostTensor result = makeResult(elementType, outputShape);
  // The exponent may have a different type than the base; read it as double
  // (floating exponents) or int64 (integer exponents).
  std::vector<double> exponentValues(exponent.numElements());
  for (int64_t i = 0, e = exponent.numElements(); i < e; ++i)
    exponentValues[i] = exponent.getDouble(i);
  if (base.isFloat()) {
    double *out = result.getMutableFloatData().data();
    if (elementType == TensorProto::DOUBLE)
      broadcastBinary(base.getFloatData().data(), base.getShape(),
                      exponentValues.data(), exponent.getShape(), outputShape,
                      out, [](double x, double y) { return std::pow(x, y); });
    else
      broadcastBinary(base.getFloatData().data(), base.getShape(),
                      exponentValues.data(), exponent.getShape(), outputShape,
                      out, [](double x, double y) {
                        return static_cast<double>(std::pow(
                            static_cast<float>(x), static_cast<float>(y)));
                      });
    result.normalizeStorage();
    return foldedTo(std::move(result));
  }
  int64_t *out = result.getMutableIntData().data();
  if (exponent.isFloat()) {
    // onnxruntime: static_cast<T>(std::pow(base, exponent)).
    std::vector<double> baseValues(base.numElements());
    for (int64_t i = 0, e = base.numElements(); i < e; ++i)
      baseValues[i] = base.getDouble(i);
    double limit = 0x1p63;
    bool representable = true;
    broadcastBinary(baseValues.data(), base.getShape(), exponentValues.data(),
                    exponent.getShape(), outputShape, out,
                    [&](double x, double y) -> int64_t {
                      double value = std::trunc(std::pow(x, y));
                      if (!(value >= -limit && value < limit)) {
                        representable = false;
                        return 0;
                      }
                      return static_cast<int64_t>(value);
                    });
    if (!representable)
      return notFolded();
  } else {
    broadcastBinary(base.getIntData().data(), base.getShape(),
                    exponent.getIntData().data(), exponent.getShape(),
                    outputShape, out, integerPower);
  }
  result.normalizeStorage();
  return foldedTo(std::move(result));
}

FoldResult
constant_evaluation::evaluateVariadicMaxMin(const NodeContext &context) {
  llvm::Expected<std::vector<const HostTensor *>> operands =
      context.variadicInputs();
  if (!operands)
    return operands.takeError();
  bool isMax = context.getOpType() == "Max";
  HostTensor result = *operands->front();
  if (result.isBool())
    return context.error("Max/Min do not accept BOOL inputs");
  for (const HostTensor *next : llvm::drop_begin(*operands)) {
    if (llvm::Error failure = context.requireSameElementType(result, *next))
      return failure;
    std::vector<int64_t> outputShape;
    if (std::optional<FoldResult> early =
            broadcastWithinFoldLimit(context, {&result, next}, outputShape))
      return std::move(*early);
    result = isMax ? applyArithmetic(result, *next, outputShape,
                                     MaxMinFunctor<true>())
                   : applyArithmetic(result, *next, outputShape,
                                     MaxMinFunctor<false>());
  }
  return foldedTo(std::move(result));
}

//===----------------------------------------------------------------------===//
// Unary math
//===----------------------------------------------------------------------===//

/// Neg and Abs, the unary ops that also take integers.
static FoldResult negateOrAbs(const NodeContext &context,
                              const HostTensor &data) {
  bool isNeg = context.getOpType() == "Neg";
  if (data.isFloat())
    return foldedTo(
        isNeg ? applyFloatUnary(data, [](auto x) { return -x; })
              : applyFloatUnary(data, [](auto x) { return std::fabs(x); }));
  bool isUnsigned = data.getElementType() == TensorProto::UINT8 ||
                    data.getElementType() == TensorProto::UINT16 ||
                    data.getElementType() == TensorProto::UINT32 ||
                    data.isUnsigned64();
  if (isNeg && isUnsigned)
    return context.error("Neg does not accept unsigned input " +
                         data.describe());
  HostTensor result = data;
  if (!isUnsigned) {
    for (int64_t &value : result.getMutableIntData())
      if (isNeg || value < 0)
        value = static_cast<int64_t>(0 - static_cast<uint64_t>(value));
    result.normalizeStorage();
  }
  return foldedTo(std::move(result));
}

FoldResult constant_evaluation::evaluateUnary(const NodeContext &context) {
  if (llvm::Error failure = context.checkInputCount(1, 1))
    return failure;
  const HostTensor &data = *context.input(0);
  llvm::StringRef opType = context.getOpType();
  if (data.isBool())
    return context.error("input must be numeric, got " + data.describe());
  if (opType == "Neg" || opType == "Abs")
    return negateOrAbs(context, data);

  if (llvm::Error failure = context.requireFloatInput(data))
    return failure;
  if (opType == "Sqrt")
    return foldedTo(applyFloatUnary(data, [](auto x) { return std::sqrt(x); }));
  if (opType == "Reciprocal")
    return foldedTo(applyFloatUnary(
        data, [](auto x) { return static_cast<decltype(x)>(1) / x; }));
  if (opType == "Exp")
    return foldedTo(applyFloatUnary(data, [](auto x) { return std::exp(x); }));
  if (opType == "Log")
    return foldedTo(applyFloatUnary(data, [](auto x) { return std::log(x); }));
  if (opType == "Tanh")
    return foldedTo(applyFloatUnary(data, [](auto x) { return std::tanh(x); }));
  if (opType == "Erf")
    return foldedTo(applyFloatUnary(data, [](auto x) { return std::erf(x); }));
  if (opType == "Cos")
    return foldedTo(applyFloatUnary(data, [](auto x) { return std::cos(x); }));
  if (opType == "Sin")
    return foldedTo(applyFloatUnary(data, [](auto x) { return std::sin(x); }));
  if (opType == "Sigmoid")
    return foldedTo(applyFloatUnary(data, [](auto x) {
      using T = decltype(x);
      return static_cast<T>(1) / (static_cast<T>(1) + std::exp(-x));
    }));
  if (opType == "Floor")
    return foldedTo(
        applyFloatUnary(data, [](auto x) { return std::floor(x); }));
  return foldedTo(applyFloatUnary(data, [](auto x) { return std::ceil(x); }));
}
