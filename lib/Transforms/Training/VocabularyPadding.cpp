//===- VocabularyPadding.cpp - an aligned class dim for the loss ----------===//

#include "VocabularyPadding.h"

#include "Tess/IR/TessOps.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace tessera {
namespace {

/// A constant tensor of `shape` holding `value` everywhere.
Value splat(OpBuilder &builder, Location loc, ArrayRef<int64_t> shape,
            FloatType type, const APFloat &value) {
  auto tensorType = RankedTensorType::get(shape, type);
  return tess::ConstantOp::create(builder, loc,
                                  DenseElementsAttr::get(tensorType, value));
}

} // namespace

Value padVocabulary(OpBuilder &builder, Value logits, int64_t multiple) {
  auto head = logits.getDefiningOp<tess::LinearOp>();
  if (!head || multiple <= 1)
    return logits;
  auto logitsType = llvm::cast<RankedTensorType>(logits.getType());
  auto weightType = llvm::cast<RankedTensorType>(head.getWeight().getType());
  auto elementType = llvm::dyn_cast<FloatType>(logitsType.getElementType());
  int64_t classes = logitsType.getShape().back();
  if (!elementType || weightType.getRank() != 2 ||
      ShapedType::isDynamic(classes) || classes % multiple == 0)
    return logits;
  int64_t padded = (classes + multiple - 1) / multiple * multiple;
  int64_t extra = padded - classes;
  Location loc = head.getLoc();

  // The weight is [V, D] with transpose_weight (nn.Linear, a tied
  // embedding), else [D, V]: zero rows or columns for the padded classes.
  bool transposed = head.getTransposeWeight();
  int64_t classDim = transposed ? 0 : 1;
  SmallVector<int64_t> zeroShape(weightType.getShape());
  zeroShape[classDim] = extra;
  auto weightElement = llvm::cast<FloatType>(weightType.getElementType());
  Value zeros = splat(builder, loc, zeroShape, weightElement,
                      APFloat::getZero(weightElement.getFloatSemantics()));
  Value weight = tess::ConcatOp::create(builder, loc,
                                        ValueRange{head.getWeight(), zeros},
                                        classDim);

  // The padded classes' logits: the lowest finite value, which the
  // softmax's exp turns into exactly 0 in any precision.
  Value bias = head.getBias();
  auto biasElement =
      bias ? llvm::cast<FloatType>(
                 llvm::cast<RankedTensorType>(bias.getType()).getElementType())
           : elementType;
  const llvm::fltSemantics &semantics = biasElement.getFloatSemantics();
  if (!bias)
    bias = splat(builder, loc, {classes}, biasElement,
                 APFloat::getZero(semantics));
  Value lowest = splat(builder, loc, {extra}, biasElement,
                       APFloat::getLargest(semantics, /*Negative=*/true));
  bias = tess::ConcatOp::create(builder, loc, ValueRange{bias, lowest}, 0);

  Value result = tess::LinearOp::create(builder, loc, head.getInput(), weight,
                                        bias, head.getTransposeWeight());
  if (head->use_empty())
    head->erase();
  return result;
}

} // namespace tessera
