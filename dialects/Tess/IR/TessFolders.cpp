//===- TessFolders.cpp - folds of tess ops -------------------------------===//
//
// Folds remove ops that do nothing (identity reshapes, adds of zero) and
// evaluate ops on constants where the result stays small, so that patterns
// such as the attention fusion see the simplest form of the graph.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace tessera::tess;

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

} // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>())
    return inner.getInput();
  return {};
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult folded =
          foldNeutral(getResult(), getLhs(), adaptor.getRhs(), 0.0))
    return folded;
  return foldNeutral(getResult(), getRhs(), adaptor.getLhs(), 0.0);
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldNeutral(getResult(), getLhs(), adaptor.getRhs(), 0.0);
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (OpFoldResult folded =
          foldNeutral(getResult(), getLhs(), adaptor.getRhs(), 1.0))
    return folded;
  return foldNeutral(getResult(), getRhs(), adaptor.getLhs(), 1.0);
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldNeutral(getResult(), getLhs(), adaptor.getRhs(), 1.0);
}

OpFoldResult WhereOp::fold(FoldAdaptor adaptor) {
  auto condition =
      llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getCondition());
  if (!condition)
    return {};
  Value chosen = condition.getSplatValue<bool>() ? getOnTrue() : getOnFalse();
  if (chosen.getType() == getType())
    return chosen;
  return {};
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType())
    return getInput();
  return {};
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
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
  return {};
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto splat =
          llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return splat.resizeSplat(getType());
  return {};
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto splat =
          llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return splat.resizeSplat(getType());
  return {};
}

LogicalResult SplitOp::fold(FoldAdaptor,
                            SmallVectorImpl<OpFoldResult> &results) {
  if (getNumResults() != 1)
    return failure();
  results.push_back(getInput());
  return success();
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  return {};
}
