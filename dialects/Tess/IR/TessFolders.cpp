//===- TessFolders.cpp - folds of tess ops -------------------------------===//
//
// Folds remove ops that do nothing (identity reshapes, adds of zero) and
// evaluate ops on constants where the result stays small, so that patterns
// such as the attention fusion see the simplest form of the graph.
//
// Float arithmetic on constants follows what the executable computes: types
// of at most 32 bits are widened to fp32, computed there and rounded once
// (to nearest, ties to even) to their own type; wider types compute in their
// own precision. Integers are two's complement, signed except `i1` (0 or 1),
// as tess.cast defines them.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"
#include "TessConstantFolding.h"

#include "llvm/ADT/APSInt.h"

using namespace mlir;
using namespace tessera::tess;
using folding::Element;

namespace {

/// True when `attr` is a splat whose every element equals `value`.
bool isSplatOf(Attribute attr, double value) {
  auto elements = llvm::dyn_cast_if_present<SplatElementsAttr>(attr);
  if (!elements)
    return false;
  Type element = elements.getElementType();
  if (llvm::isa<FloatType>(element))
    return elements.getSplatValue<APFloat>().convertToDouble() == value;
  if (llvm::isa<IntegerType>(element))
    return static_cast<double>(
               elements.getSplatValue<APInt>().getSExtValue()) == value;
  return false;
}

/// Returns `input` when a binary op with a neutral `other` leaves it unchanged
/// (same type, so no broadcast changes the shape).
OpFoldResult foldNeutral(Value result, Value input, Attribute other,
                         double neutral) {
  if (isSplatOf(other, neutral) && input.getType() == result.getType())
    return input;
  return {};
}

RankedTensorType rankedType(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

//===----------------------------------------------------------------------===//
// Element arithmetic
//===----------------------------------------------------------------------===//

/// The semantics float arithmetic on `semantics` is carried out in.
const llvm::fltSemantics &arithmeticSemantics(const llvm::fltSemantics &type) {
  if (APFloat::getSizeInBits(type) <= 32)
    return APFloat::IEEEsingle();
  return type;
}

APFloat convertFloat(APFloat value, const llvm::fltSemantics &semantics) {
  bool losesInfo = false;
  (void)value.convert(semantics, APFloat::rmNearestTiesToEven, &losesInfo);
  return value;
}

/// `i1` holds 0 and 1; every other integer type is signed.
bool isSigned(const APInt &value) { return value.getBitWidth() > 1; }

using FloatArithmetic = llvm::function_ref<APFloat(APFloat, const APFloat &)>;
using IntegerArithmetic =
    llvm::function_ref<std::optional<APInt>(const APInt &, const APInt &)>;

/// Folds a broadcasting binary op whose result has the operands' element
/// type.
Attribute foldArithmetic(ArrayRef<Attribute> operands, Value result,
                         FloatArithmetic onFloats,
                         IntegerArithmetic onIntegers) {
  return folding::foldElementwise(
      operands, rankedType(result),
      [&](ArrayRef<Element> values) -> std::optional<Element> {
        if (const auto *lhs = std::get_if<APFloat>(&values[0])) {
          const llvm::fltSemantics &type = lhs->getSemantics();
          const llvm::fltSemantics &wide = arithmeticSemantics(type);
          APFloat value = onFloats(convertFloat(*lhs, wide),
                                   convertFloat(std::get<APFloat>(values[1]),
                                                wide));
          return convertFloat(value, type);
        }
        std::optional<APInt> value = onIntegers(std::get<APInt>(values[0]),
                                                std::get<APInt>(values[1]));
        if (!value)
          return std::nullopt;
        return *value;
      });
}

/// True when `predicate` holds for the outcome of a three-way comparison;
/// unordered (a NaN) satisfies only `ne`.
bool holds(ComparisonPredicate predicate, APFloat::cmpResult outcome) {
  switch (predicate) {
  case ComparisonPredicate::eq:
    return outcome == APFloat::cmpEqual;
  case ComparisonPredicate::ne:
    return outcome != APFloat::cmpEqual;
  case ComparisonPredicate::lt:
    return outcome == APFloat::cmpLessThan;
  case ComparisonPredicate::le:
    return outcome == APFloat::cmpLessThan || outcome == APFloat::cmpEqual;
  case ComparisonPredicate::gt:
    return outcome == APFloat::cmpGreaterThan;
  case ComparisonPredicate::ge:
    return outcome == APFloat::cmpGreaterThan || outcome == APFloat::cmpEqual;
  }
  llvm_unreachable("unknown comparison predicate");
}

APFloat::cmpResult compareIntegers(const APInt &lhs, const APInt &rhs) {
  bool less = isSigned(lhs) ? lhs.slt(rhs) : lhs.ult(rhs);
  if (lhs == rhs)
    return APFloat::cmpEqual;
  return less ? APFloat::cmpLessThan : APFloat::cmpGreaterThan;
}

APInt boolean(bool value) { return APInt(1, value ? 1 : 0); }

/// One element converted as tess.cast defines it; std::nullopt for a float
/// that no integer of the type holds (NaN, out of range), which the
/// executable does not define either.
std::optional<Element> castElement(const Element &value, Type target) {
  if (target.isInteger(1)) {
    if (const auto *number = std::get_if<APFloat>(&value))
      return boolean(!number->isZero());
    return boolean(!std::get<APInt>(value).isZero());
  }
  if (auto floatType = llvm::dyn_cast<FloatType>(target)) {
    const llvm::fltSemantics &semantics = floatType.getFloatSemantics();
    if (const auto *number = std::get_if<APFloat>(&value))
      return convertFloat(*number, semantics);
    const APInt &integer = std::get<APInt>(value);
    APFloat converted(semantics);
    (void)converted.convertFromAPInt(integer, isSigned(integer),
                                     APFloat::rmNearestTiesToEven);
    return converted;
  }
  auto integerType = llvm::dyn_cast<IntegerType>(target);
  if (!integerType)
    return std::nullopt;
  unsigned width = integerType.getWidth();
  if (const auto *number = std::get_if<APFloat>(&value)) {
    llvm::APSInt integer(width, /*isUnsigned=*/false);
    bool isExact = false;
    if (number->convertToInteger(integer, APFloat::rmTowardZero, &isExact) &
        APFloat::opInvalidOp)
      return std::nullopt;
    return APInt(integer);
  }
  const APInt &integer = std::get<APInt>(value);
  return isSigned(integer) ? integer.sextOrTrunc(width)
                           : integer.zextOrTrunc(width);
}

} // namespace

//===----------------------------------------------------------------------===//
// Values and elementwise ops
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  // Negation is exact, so it needs no widening.
  return folding::foldElementwise(
      adaptor.getInput(), getType(),
      [](ArrayRef<Element> values) -> std::optional<Element> {
        if (const auto *number = std::get_if<APFloat>(&values[0]))
          return llvm::neg(*number);
        return -std::get<APInt>(values[0]);
      });
}

OpFoldResult LogicalNotOp::fold(FoldAdaptor adaptor) {
  if (auto inner = getInput().getDefiningOp<LogicalNotOp>())
    return inner.getInput();
  return folding::foldElementwise(
      adaptor.getInput(), getType(),
      [](ArrayRef<Element> values) -> std::optional<Element> {
        return boolean(std::get<APInt>(values[0]).isZero());
      });
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult folded =
          foldNeutral(getResult(), getLhs(), adaptor.getRhs(), 0.0))
    return folded;
  if (OpFoldResult folded =
          foldNeutral(getResult(), getRhs(), adaptor.getLhs(), 0.0))
    return folded;
  return foldArithmetic(
      adaptor.getOperands(), getResult(),
      [](APFloat lhs, const APFloat &rhs) {
        (void)lhs.add(rhs, APFloat::rmNearestTiesToEven);
        return lhs;
      },
      [](const APInt &lhs, const APInt &rhs) -> std::optional<APInt> {
        return lhs + rhs;
      });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult folded =
          foldNeutral(getResult(), getLhs(), adaptor.getRhs(), 0.0))
    return folded;
  return foldArithmetic(
      adaptor.getOperands(), getResult(),
      [](APFloat lhs, const APFloat &rhs) {
        (void)lhs.subtract(rhs, APFloat::rmNearestTiesToEven);
        return lhs;
      },
      [](const APInt &lhs, const APInt &rhs) -> std::optional<APInt> {
        return lhs - rhs;
      });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult folded =
          foldNeutral(getResult(), getLhs(), adaptor.getRhs(), 1.0))
    return folded;
  if (OpFoldResult folded =
          foldNeutral(getResult(), getRhs(), adaptor.getLhs(), 1.0))
    return folded;
  return foldArithmetic(
      adaptor.getOperands(), getResult(),
      [](APFloat lhs, const APFloat &rhs) {
        (void)lhs.multiply(rhs, APFloat::rmNearestTiesToEven);
        return lhs;
      },
      [](const APInt &lhs, const APInt &rhs) -> std::optional<APInt> {
        return lhs * rhs;
      });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult folded =
          foldNeutral(getResult(), getLhs(), adaptor.getRhs(), 1.0))
    return folded;
  return foldArithmetic(
      adaptor.getOperands(), getResult(),
      [](APFloat lhs, const APFloat &rhs) {
        (void)lhs.divide(rhs, APFloat::rmNearestTiesToEven);
        return lhs;
      },
      // Division by zero and INT_MIN / -1 are left to the executable.
      [](const APInt &lhs, const APInt &rhs) -> std::optional<APInt> {
        if (rhs.isZero())
          return std::nullopt;
        if (!isSigned(lhs))
          return lhs.udiv(rhs);
        bool overflow = false;
        APInt quotient = lhs.sdiv_ov(rhs, overflow);
        if (overflow)
          return std::nullopt;
        return quotient;
      });
}

OpFoldResult MaximumOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs() && getLhs().getType() == getType())
    return getLhs();
  // llvm::maximum propagates NaN, as ONNX Max does.
  return foldArithmetic(
      adaptor.getOperands(), getResult(),
      [](APFloat lhs, const APFloat &rhs) { return llvm::maximum(lhs, rhs); },
      [](const APInt &lhs, const APInt &rhs) -> std::optional<APInt> {
        return isSigned(lhs) ? llvm::APIntOps::smax(lhs, rhs)
                             : llvm::APIntOps::umax(lhs, rhs);
      });
}

OpFoldResult MinimumOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs() && getLhs().getType() == getType())
    return getLhs();
  return foldArithmetic(
      adaptor.getOperands(), getResult(),
      [](APFloat lhs, const APFloat &rhs) { return llvm::minimum(lhs, rhs); },
      [](const APInt &lhs, const APInt &rhs) -> std::optional<APInt> {
        return isSigned(lhs) ? llvm::APIntOps::smin(lhs, rhs)
                             : llvm::APIntOps::umin(lhs, rhs);
      });
}

OpFoldResult LogicalAndOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs() && getLhs().getType() == getType())
    return getLhs();
  return folding::foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<Element> values) -> std::optional<Element> {
        return std::get<APInt>(values[0]) & std::get<APInt>(values[1]);
      });
}

OpFoldResult LogicalOrOp::fold(FoldAdaptor adaptor) {
  if (getLhs() == getRhs() && getLhs().getType() == getType())
    return getLhs();
  return folding::foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<Element> values) -> std::optional<Element> {
        return std::get<APInt>(values[0]) | std::get<APInt>(values[1]);
      });
}

OpFoldResult CompareOp::fold(FoldAdaptor adaptor) {
  ComparisonPredicate predicate = getPredicate();
  // A comparison is exact in the operands' own type: no widening.
  return folding::foldElementwise(
      {adaptor.getLhs(), adaptor.getRhs()}, getType(),
      [&](ArrayRef<Element> values) -> std::optional<Element> {
        if (const auto *lhs = std::get_if<APFloat>(&values[0]))
          return boolean(
              holds(predicate, lhs->compare(std::get<APFloat>(values[1]))));
        return boolean(holds(predicate,
                             compareIntegers(std::get<APInt>(values[0]),
                                             std::get<APInt>(values[1]))));
      });
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  if (getOnTrue() == getOnFalse() && getOnTrue().getType() == getType())
    return getOnTrue();
  if (auto condition =
          llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getCondition())) {
    Value chosen =
        condition.getSplatValue<bool>() ? getOnTrue() : getOnFalse();
    if (chosen.getType() == getType())
      return chosen;
  }
  return folding::foldElementwise(
      adaptor.getOperands(), getType(),
      [](ArrayRef<Element> values) -> std::optional<Element> {
        return std::get<APInt>(values[0]).isZero() ? values[2] : values[1];
      });
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  Type target = getType().getElementType();
  return folding::foldElementwise(
      adaptor.getInput(), getType(),
      [&](ArrayRef<Element> values) { return castElement(values[0], target); });
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  // Row-major order is unchanged, so the constant's bytes are reused as they
  // are, whatever its size.
  if (auto dense =
          llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  if (llvm::equal(getPermutation(),
                  llvm::seq<int64_t>(0, getPermutation().size())))
    return getInput();
  if (auto splat =
          llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return splat.resizeSplat(getType());
  ArrayRef<int64_t> permutation = getPermutation();
  return folding::foldDataMovement(
      adaptor.getInput(), getType(),
      [&](ArrayRef<int64_t> resultIndex, SmallVectorImpl<int64_t> &inputIndex) {
        inputIndex.resize(resultIndex.size());
        for (auto [resultDim, inputDim] : llvm::enumerate(permutation))
          inputIndex[inputDim] = resultIndex[resultDim];
        return 0u;
      });
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto splat =
          llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return splat.resizeSplat(getType());
  ArrayRef<int64_t> inputShape = getInput().getType().getShape();
  return folding::foldDataMovement(
      adaptor.getInput(), getType(),
      [&](ArrayRef<int64_t> resultIndex, SmallVectorImpl<int64_t> &inputIndex) {
        size_t offset = resultIndex.size() - inputShape.size();
        for (auto [dim, size] : llvm::enumerate(inputShape))
          inputIndex.push_back(size == 1 ? 0 : resultIndex[dim + offset]);
        return 0u;
      });
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto splat =
          llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return splat.resizeSplat(getType());
  ArrayRef<int64_t> starts = getStarts(), strides = getStrides();
  return folding::foldDataMovement(
      adaptor.getInput(), getType(),
      [&](ArrayRef<int64_t> resultIndex, SmallVectorImpl<int64_t> &inputIndex) {
        for (auto [dim, position] : llvm::enumerate(resultIndex))
          inputIndex.push_back(starts[dim] + position * strides[dim]);
        return 0u;
      });
}

LogicalResult SplitOp::fold(FoldAdaptor adaptor,
                            SmallVectorImpl<OpFoldResult> &results) {
  if (getNumResults() == 1) {
    results.push_back(getInput());
    return success();
  }
  if (!adaptor.getInput())
    return failure();
  int64_t axis = *normalizeAxis(getAxis(), getInput().getType().getRank());
  int64_t offset = 0;
  SmallVector<OpFoldResult> pieces;
  for (Value result : getResults()) {
    RankedTensorType type = rankedType(result);
    Attribute piece;
    if (auto splat =
            llvm::dyn_cast<SplatElementsAttr>(adaptor.getInput()))
      piece = splat.resizeSplat(type);
    else
      piece = folding::foldDataMovement(
          adaptor.getInput(), type,
          [&](ArrayRef<int64_t> resultIndex,
              SmallVectorImpl<int64_t> &inputIndex) {
            llvm::append_range(inputIndex, resultIndex);
            inputIndex[axis] += offset;
            return 0u;
          });
    if (!piece)
      return failure();
    pieces.push_back(piece);
    offset += type.getDimSize(axis);
  }
  results.append(pieces.begin(), pieces.end());
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  int64_t axis = *normalizeAxis(getAxis(), getType().getRank());
  // concat(split(x)) along the same axis, every piece in order, is x: what
  // the VJP of a split becomes once the pieces' gradients come from one
  // packed op.
  if (auto split = getInputs().front().getDefiningOp<SplitOp>())
    if (split.getNumResults() == getInputs().size() &&
        *normalizeAxis(split.getAxis(), getType().getRank()) == axis &&
        llvm::equal(getInputs(), split.getResults()))
      return split.getInput();
  // Where along the axis each input starts in the result.
  SmallVector<int64_t> starts;
  int64_t start = 0;
  for (Value input : getInputs()) {
    starts.push_back(start);
    start += rankedType(input).getDimSize(axis);
  }
  return folding::foldDataMovement(
      adaptor.getInputs(), getType(),
      [&](ArrayRef<int64_t> resultIndex, SmallVectorImpl<int64_t> &inputIndex) {
        // The last input that starts at or before the position; inputs of
        // size 0 along the axis are never chosen because the next one
        // starts at the same place.
        unsigned input = llvm::upper_bound(starts, resultIndex[axis]) -
                         starts.begin() - 1;
        llvm::append_range(inputIndex, resultIndex);
        inputIndex[axis] -= starts[input];
        return input;
      });
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// A reduction whose result has its input's type reduces nothing, or only
// dims of size 1 that it keeps: each result element is its one input element
// (sum, mean, max and min of one value are that value).
#define TESS_FOLD_IDENTITY_REDUCTION(OP)                                       \
  OpFoldResult OP::fold(FoldAdaptor) {                                         \
    if (getInput().getType() == getType())                                     \
      return getInput();                                                       \
    return {};                                                                 \
  }

TESS_FOLD_IDENTITY_REDUCTION(ReduceSumOp)
TESS_FOLD_IDENTITY_REDUCTION(ReduceMeanOp)
TESS_FOLD_IDENTITY_REDUCTION(ReduceMaxOp)
TESS_FOLD_IDENTITY_REDUCTION(ReduceMinOp)
#undef TESS_FOLD_IDENTITY_REDUCTION
