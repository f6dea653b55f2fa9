//===- VocabularyParallelLoss.cpp - the loss over split classes ---------===//

#include "VocabularyParallelLoss.h"

#include "Tess/IR/TessOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"

using namespace mlir;

namespace tessera::partition {
namespace {

RankedTensorType typeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

Value f32Scalar(OpBuilder &builder, Location location, double value) {
  auto type = RankedTensorType::get({}, builder.getF32Type());
  return tess::ConstantOp::create(
      builder, location, type,
      DenseElementsAttr::get(type, builder.getF32FloatAttr(value)));
}

/// `value` with a trailing dim of 1 ([rows...] -> [rows..., 1]).
Value withUnitDim(OpBuilder &builder, Location location, Value value) {
  RankedTensorType type = typeOf(value);
  SmallVector<int64_t> shape(type.getShape());
  shape.push_back(1);
  return tess::ReshapeOp::create(
      builder, location, RankedTensorType::get(shape, type.getElementType()),
      value);
}

Value reduceLast(OpBuilder &builder, Location location, Value value,
                 bool maximum) {
  DenseI64ArrayAttr last = builder.getDenseI64ArrayAttr({-1});
  if (maximum)
    return tess::ReduceMaxOp::create(builder, location, value, last,
                                     /*keep_dims=*/true);
  return tess::ReduceSumOp::create(builder, location, value, last,
                                   /*keep_dims=*/true);
}

Value reduceAll(OpBuilder &builder, Location location, Value value) {
  int64_t rank = typeOf(value).getRank();
  return tess::ReduceSumOp::create(
      builder, location, value,
      builder.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(0, rank))),
      /*keep_dims=*/false);
}

Value allReduce(OpBuilder &builder, Location location, Value value,
                StringRef axis, tess::CollectiveReduction reduction) {
  return tess::AllReduceOp::create(builder, location, value,
                                   builder.getStringAttr(axis), reduction);
}

/// Each row's maximum and sum of exponents over the whole row, this
/// rank's exponents `exp(x - max)` and its f32 logits.
struct RowSums {
  Value logits, maximum, exponents, sum;
};

RowSums rowSums(OpBuilder &builder, Location location, Value logits,
                StringRef axis) {
  RowSums rows;
  RankedTensorType logitsType = typeOf(logits);
  auto f32Type =
      RankedTensorType::get(logitsType.getShape(), builder.getF32Type());
  rows.logits = logitsType.getElementType().isF32()
                    ? logits
                    : tess::CastOp::create(builder, location, f32Type, logits)
                          .getResult();
  rows.maximum = allReduce(builder, location,
                           reduceLast(builder, location, rows.logits, true),
                           axis, tess::CollectiveReduction::max);
  rows.exponents = tess::ExpOp::create(
      builder, location,
      tess::SubOp::create(builder, location, rows.logits, rows.maximum));
  rows.sum = allReduce(builder, location,
                       reduceLast(builder, location, rows.exponents, false),
                       axis, tess::CollectiveReduction::sum);
  return rows;
}

/// Which of this rank's classes is each row's target, which rows count,
/// and how many do (at least 1).
void targetRows(OpBuilder &builder, Location location, Value targets,
                int64_t ignoreIndex, StringRef axis, int64_t classes,
                int64_t localClasses, VocabularyParallelRows &rows) {
  // The class ids of this rank's block: the whole range, sliced as the
  // logits' classes are.
  RankedTensorType targetsType = typeOf(targets);
  Type indexType = targetsType.getElementType();
  int64_t rank = targetsType.getRank() + 1;
  SmallVector<int64_t> idsShape(rank, 1);
  idsShape.back() = classes;
  auto idsType = RankedTensorType::get(idsShape, indexType);
  SmallVector<APInt> ids;
  unsigned width = indexType.getIntOrFloatBitWidth();
  for (int64_t id = 0; id < classes; ++id)
    ids.push_back(APInt(width, static_cast<uint64_t>(id), /*isSigned=*/true));
  Value allIds = tess::ConstantOp::create(builder, location, idsType,
                                          DenseElementsAttr::get(idsType, ids));
  idsShape.back() = localClasses;
  Value localIds = tess::ShardSliceOp::create(
      builder, location, RankedTensorType::get(idsShape, indexType), allIds,
      builder.getStringAttr(axis), rank - 1);
  Value rowTargets = withUnitDim(builder, location, targets);
  rows.isTarget = tess::CompareOp::create(
      builder, location, tess::ComparisonPredicate::eq, rowTargets, localIds);

  auto indexScalar = RankedTensorType::get({}, indexType);
  Value ignored = tess::ConstantOp::create(
      builder, location, indexScalar,
      DenseElementsAttr::get(indexScalar,
                             builder.getIntegerAttr(indexType, ignoreIndex)));
  Value counted = tess::CompareOp::create(
      builder, location, tess::ComparisonPredicate::ne, rowTargets, ignored);
  rows.counted = tess::CastOp::create(
      builder, location,
      RankedTensorType::get(typeOf(counted).getShape(), builder.getF32Type()),
      counted);
  rows.count =
      tess::MaximumOp::create(builder, location,
                              reduceAll(builder, location, rows.counted),
                              f32Scalar(builder, location, 1.0));
}

/// The loss's row sums and what its gradient reads of them.
struct LossRows {
  RowSums sums;
  VocabularyParallelRows kept;
};

LossRows lossRows(OpBuilder &builder, Location location, Value logits,
                  Value targets, int64_t ignoreIndex, StringRef axis,
                  int64_t classes) {
  LossRows rows;
  rows.sums = rowSums(builder, location, logits, axis);
  targetRows(builder, location, targets, ignoreIndex, axis, classes,
             typeOf(logits).getShape().back(), rows.kept);
  rows.kept.softmax = tess::DivOp::create(builder, location,
                                          rows.sums.exponents, rows.sums.sum);
  return rows;
}

} // namespace

VocabularyParallelRows vocabularyParallelRows(OpBuilder &builder,
                                              Location location, Value logits,
                                              Value targets,
                                              int64_t ignoreIndex,
                                              StringRef axis, int64_t classes) {
  return lossRows(builder, location, logits, targets, ignoreIndex, axis,
                  classes)
      .kept;
}

Value vocabularyParallelLoss(OpBuilder &builder, Location location,
                             Value logits, Value targets, int64_t ignoreIndex,
                             StringRef axis, int64_t classes,
                             VocabularyParallelRows &rows) {
  LossRows both = lossRows(builder, location, logits, targets, ignoreIndex,
                           axis, classes);
  const RowSums &sums = both.sums;
  rows = both.kept;
  // The target's logit: on the rank whose block holds it, 0 on the others.
  Value picked = tess::WhereOp::create(builder, location, rows.isTarget,
                                       sums.logits,
                                       f32Scalar(builder, location, 0.0));
  Value target = allReduce(builder, location,
                           reduceLast(builder, location, picked, false), axis,
                           tess::CollectiveReduction::sum);
  // -log softmax(x)[t] = log(sum) + max - x[t], for the counted rows.
  Value rowLoss = tess::SubOp::create(
      builder, location,
      tess::AddOp::create(builder, location,
                          tess::LogOp::create(builder, location, sums.sum),
                          sums.maximum),
      target);
  Value total = reduceAll(
      builder, location,
      tess::MulOp::create(builder, location, rowLoss, rows.counted));
  return tess::DivOp::create(builder, location, total, rows.count);
}

Value vocabularyParallelLossGradient(OpBuilder &builder, Location location,
                                     const VocabularyParallelRows &rows,
                                     Value dloss, Type logitsType) {
  // (softmax - one-hot) * dloss / count on the counted rows, every op
  // downstream of dloss.
  Value scale = tess::MulOp::create(
      builder, location,
      tess::DivOp::create(builder, location, dloss, rows.count), rows.counted);
  Value scaled = tess::MulOp::create(builder, location, rows.softmax, scale);
  Value gradient = tess::SubOp::create(
      builder, location, scaled,
      tess::WhereOp::create(builder, location, rows.isTarget, scale,
                            f32Scalar(builder, location, 0.0)));
  if (llvm::cast<RankedTensorType>(logitsType).getElementType().isF32())
    return gradient;
  return tess::CastOp::create(builder, location, logitsType, gradient);
}

} // namespace tessera::partition
