//===- FusionMatchers.h - matching helpers shared by the fusion passes -*- C++ -*-===//
//
// The fusion passes recognize chains that exporters write out op by op. They
// all need to answer the same small questions about a value: is it a scalar
// constant close to some number, does a reshape only add or remove unit
// dims in front, does an intermediate value feed nothing but the chain. The
// answers live here so that every pass asks them the same way.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_TRANSFORMS_FUSION_FUSIONMATCHERS_H
#define TESSERA_LIB_TRANSFORMS_FUSION_FUSIONMATCHERS_H

#include "Tess/IR/TessOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/SmallString.h"

#include <cmath>
#include <cstdlib>
#include <optional>

namespace tessera::fusion {

/// Relative tolerance for the constants of a decomposed formula. Exporters
/// print constants as float32, so sqrt(2/pi) arrives as 0.7978846 and 1/sqrt 2
/// as 0.70710677: both within 1e-7 of the exact value, far inside this bound,
/// while a different constant (0.5 vs 0.05) is far outside it.
inline constexpr double kConstantRelativeTolerance = 1e-6;

/// The value every element of a constant tensor holds, when they all hold the
/// same float (a splat, which includes any one-element tensor); nullopt for
/// anything else, including values not defined by a constant.
inline std::optional<double> getSplatFloat(mlir::Value value) {
  mlir::Attribute attribute;
  if (!value || !mlir::matchPattern(value, mlir::m_Constant(&attribute)))
    return std::nullopt;
  auto elements = llvm::dyn_cast<mlir::DenseElementsAttr>(attribute);
  if (!elements || !elements.isSplat() ||
      !llvm::isa<mlir::FloatType>(elements.getElementType()))
    return std::nullopt;
  return elements.getSplatValue<llvm::APFloat>().convertToDouble();
}

/// Like getSplatFloat, but the shortest decimal that reads back as the
/// constant in its own element type: an f32 epsilon exported as 1e-5 is
/// stored as 9.99999974e-06, and reads back here as 1e-05 rather than as the
/// double 9.9999997473787516e-06. For attributes (epsilon) that a person
/// reads, where the float32 rounding is an artifact of the export.
inline std::optional<double> getSplatFloatAsWritten(mlir::Value value) {
  mlir::Attribute attribute;
  if (!value || !mlir::matchPattern(value, mlir::m_Constant(&attribute)))
    return std::nullopt;
  auto elements = llvm::dyn_cast<mlir::DenseElementsAttr>(attribute);
  if (!elements || !elements.isSplat() ||
      !llvm::isa<mlir::FloatType>(elements.getElementType()))
    return std::nullopt;
  // Print with ever more significant digits until the text reads back as
  // the same number in the constant's own precision.
  llvm::APFloat exact = elements.getSplatValue<llvm::APFloat>();
  for (unsigned digits = 1; digits <= 17; ++digits) {
    llvm::SmallString<32> text;
    exact.toString(text, digits, /*FormatMaxPadding=*/0);
    double shortest = std::strtod(text.c_str(), nullptr);
    llvm::APFloat roundTrip(shortest);
    bool losesInfo = false;
    roundTrip.convert(exact.getSemantics(), llvm::APFloat::rmNearestTiesToEven,
                      &losesInfo);
    if (roundTrip.bitwiseIsEqual(exact))
      return shortest;
  }
  return exact.convertToDouble();
}

/// True when `actual` equals `expected` to within the relative tolerance.
inline bool isCloseTo(double actual, double expected,
                      double relativeTolerance = kConstantRelativeTolerance) {
  return std::abs(actual - expected) <=
         relativeTolerance * std::abs(expected);
}

/// True when `value` is a splat float constant close to `expected`.
inline bool isSplatCloseTo(mlir::Value value, double expected) {
  std::optional<double> splat = getSplatFloat(value);
  return splat && isCloseTo(*splat, expected);
}

/// True when `type` is a ranked tensor whose every dim is 1 (rank 0 included):
/// a scalar that broadcasts against any shape without changing it.
inline bool isScalarShaped(mlir::Type type) {
  auto ranked = llvm::dyn_cast<mlir::RankedTensorType>(type);
  return ranked && ranked.hasStaticShape() && ranked.getNumElements() == 1;
}

/// `shape` without its leading 1s.
inline llvm::ArrayRef<int64_t> dropLeadingUnitDims(llvm::ArrayRef<int64_t> shape) {
  while (!shape.empty() && shape.front() == 1)
    shape = shape.drop_front();
  return shape;
}

/// Looks through `tess.reshape`s that only add or remove leading unit dims
/// (PyTorch's unsqueeze(0) / squeeze(0)): such a reshape changes no element's
/// position, and numpy broadcasting adds leading unit dims anyway.
inline mlir::Value stripLeadingUnitReshapes(mlir::Value value) {
  while (auto reshape = value.getDefiningOp<tess::ReshapeOp>()) {
    auto from = llvm::cast<mlir::RankedTensorType>(reshape.getInput().getType());
    auto to = llvm::cast<mlir::RankedTensorType>(reshape.getType());
    if (dropLeadingUnitDims(from.getShape()) != dropLeadingUnitDims(to.getShape()))
      break;
    value = reshape.getInput();
  }
  return value;
}

/// Calls `match(first, second)` and, when that fails, `match(second, first)`:
/// the operands of a commutative op (add, mul) may come in either order.
template <typename MatchFunction>
bool matchEitherOrder(mlir::Value first, mlir::Value second,
                      MatchFunction &&match) {
  return match(first, second) || match(second, first);
}

/// True when `value` is a tensor with the given shape.
inline bool hasShape(mlir::Value value, llvm::ArrayRef<int64_t> shape) {
  auto ranked = llvm::dyn_cast<mlir::RankedTensorType>(value.getType());
  return ranked && ranked.getShape() == shape;
}

} // namespace tessera::fusion

#endif // TESSERA_LIB_TRANSFORMS_FUSION_FUSIONMATCHERS_H
