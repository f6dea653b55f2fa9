//===- LayerSharding.cpp - sharding labels of the layer tess ops ---------===//
//
// The GEMMs label their contraction dim `contracted` and sum it into the
// result (a split leaves partial sums: Megatron's row-parallel linear);
// norms, softmax and rotary keep the dims they normalize or pair whole;
// attention splits over batch and heads only (its sequences and head_dim
// meet inside a softmax); the embedding's vocabulary is `indexed` (the
// search may split it, the partitioned kernels cannot); the loss averages
// its rows. Gradients follow their forward op, summing the rows of
// parameter gradients.
//
//===----------------------------------------------------------------------===//

#include "Labeler.h"

using namespace mlir;
using namespace tessera::tess;
using namespace tessera::tess::sharding;

ShardingLabels MatmulOp::getShardingLabels() {
  Labeler labeler(*this);
  ArrayRef<int64_t> result = shapeOf(getResult());
  size_t rank = result.size();
  for (size_t dim = 0; dim + 2 < rank; ++dim)
    labeler.result(0)[dim] = labeler.fresh(LabelKind::Batch);
  int m = labeler.fresh(), n = labeler.fresh(),
      k = labeler.fresh(LabelKind::Contracted);
  labeler.result(0)[rank - 2] = m;
  labeler.result(0)[rank - 1] = n;
  SmallVector<int64_t> batch(result.drop_back(2));
  SmallVector<int> batchLabels(labeler.result(0).begin(),
                               labeler.result(0).end() - 2);
  for (unsigned index : {0u, 1u}) {
    ArrayRef<int64_t> shape = shapeOf(getOperand(index));
    size_t own = shape.size();
    size_t offset = batch.size() - (own - 2);
    for (size_t dim = 0; dim + 2 < own; ++dim)
      if (shape[dim] == batch[offset + dim])
        labeler.operand(index)[dim] = batchLabels[offset + dim];
    bool transposed = index == 0 ? getTransposeLhs() : getTransposeRhs();
    int outer = index == 0 ? m : n;
    // lhs is [M, K] (or [K, M] transposed), rhs [K, N] (or [N, K]).
    bool outerFirst = (index == 0) != transposed;
    labeler.operand(index)[own - 2] = outerFirst ? outer : k;
    labeler.operand(index)[own - 1] = outerFirst ? k : outer;
  }
  labeler.labels.summed[0] = {k};
  labeler.linearIn({0});
  labeler.linearIn({1});
  labeler.offer("split M", m);
  labeler.offer("split N", n);
  labeler.offer("split K", k);
  // A batch dim both operands have at full size (not broadcast).
  for (auto [dim, label] : llvm::enumerate(batchLabels))
    if (llvm::is_contained(labeler.operand(0), label) &&
        llvm::is_contained(labeler.operand(1), label))
      labeler.offer("split batch dim " + std::to_string(dim), label);
  return labeler.take();
}

ShardingLabels LinearOp::getShardingLabels() {
  Labeler labeler(*this);
  size_t rank = shapeOf(getResult()).size();
  for (size_t dim = 0; dim + 1 < rank; ++dim) {
    int label = labeler.fresh(LabelKind::Batch);
    labeler.result(0)[dim] = label;
    labeler.operand(0)[dim] = label;
  }
  int out = labeler.fresh(), in = labeler.fresh(LabelKind::Contracted);
  labeler.result(0)[rank - 1] = out;
  labeler.operand(0)[rank - 1] = in;
  bool transposed = getTransposeWeight();
  labeler.operand(1)[0] = transposed ? out : in;
  labeler.operand(1)[1] = transposed ? in : out;
  labeler.labels.summed[0] = {in};
  if (getBias()) {
    labeler.operand(2)[0] = out;
    labeler.labels.addedToSum = {2};
    labeler.linearIn({0, 2});
    labeler.linearIn({1, 2});
  } else {
    labeler.linearIn({0});
    labeler.linearIn({1});
  }
  labeler.offer("column-parallel", out, SplitRole::ColumnParallel);
  labeler.offer("row-parallel", in, SplitRole::RowParallel);
  // Data parallelism splits the first token dim only.
  if (rank >= 2)
    labeler.offer("data-parallel", labeler.result(0)[0]);
  return labeler.take();
}

/// Every row dim is one label of both operands, summed into the result: a
/// split of the samples or of the tokens leaves each rank a partial sum of
/// the gradient. The features are the result's dims.
ShardingLabels LinearWeightGradOp::getShardingLabels() {
  Labeler labeler(*this);
  size_t rank = shapeOf(getInput()).size();
  for (size_t dim = 0; dim + 1 < rank; ++dim) {
    int row = labeler.fresh(LabelKind::Reduced);
    labeler.operand(0)[dim] = row;
    labeler.operand(1)[dim] = row;
    labeler.labels.summed[0].push_back(row);
  }
  int in = labeler.fresh(), out = labeler.fresh();
  labeler.operand(0)[rank - 1] = in;
  labeler.operand(1)[rank - 1] = out;
  bool transposed = getTransposeWeight();
  labeler.result(0)[0] = transposed ? out : in;
  labeler.result(0)[1] = transposed ? in : out;
  labeler.linearIn({0});
  labeler.linearIn({1});
  // A gradient: partitioned as its operands arrive, not searched.
  return labeler.take();
}

namespace {

/// A norm of the trailing dims from `axis`: the leading dims split.
ShardingLabels normalization(Operation *op, int64_t axis) {
  Labeler labeler(op);
  labeler.followOperand(0, {}, {0}, trailingDims(axis, op->getOperand(0)),
                        LabelKind::Batch);
  labeler.offerEveryResultDim();
  return labeler.take();
}

/// A norm's gradient: operands (input, scale?, dy), results (dx, dscale?,
/// dbias?). The leading dims are summed into the scale and bias gradients.
ShardingLabels normalizationGradient(Operation *op, int64_t axis) {
  Labeler labeler(op);
  labeler.followOperand(0, {op->getNumOperands() - 1}, {0},
                        trailingDims(axis, op->getOperand(0)),
                        LabelKind::Batch);
  SmallVector<int, 2> leading;
  for (int label : labeler.operand(0))
    if (label != kWhole)
      leading.push_back(label);
  for (unsigned index = 1; index < op->getNumResults(); ++index)
    labeler.labels.summed[index] = leading;
  return labeler.take();
}

/// [B, H, S, D] attention operands: batch and heads shared (K/V heads with
/// Q's label: a contiguous block of query heads reads the matching block of
/// K/V groups), the mask's by broadcasting. Q and K's head_dim and K and
/// V's key positions are contracted inside the softmax: whole. With dropout
/// the mask depends on a weight's global position: batch and heads are
/// streamed (the dropout index has a fixed head stride, so a rank's block
/// of either begins at a fixed offset: `stream_axis`, `head_stream_axis`).
ShardingLabels attention(Operation *op, bool hasMask, double dropout) {
  Labeler labeler(op);
  unsigned maskIndex = 3;
  bool random = dropout != 0;
  int batch = labeler.fresh(random ? LabelKind::Streamed : LabelKind::Batch);
  int heads = labeler.fresh(random ? LabelKind::Streamed : LabelKind::Parallel);
  for (unsigned index = 0; index < op->getNumOperands(); ++index) {
    if (hasMask && index == maskIndex)
      continue;
    labeler.operand(index)[0] = batch;
    labeler.operand(index)[1] = heads;
  }
  for (unsigned index = 0; index < op->getNumResults(); ++index) {
    labeler.result(index)[0] = batch;
    labeler.result(index)[1] = heads;
  }
  if (hasMask) {
    SmallVector<int> reference = {batch, heads, kWhole, kWhole};
    SmallVector<int64_t> shape(shapeOf(op->getOperand(0)));
    shape[3] = shapeOf(op->getOperand(1))[2];
    labeler.alignRight(maskIndex, reference, shape);
  }
  if (op->getNumResults() == 1) {
    labeler.offer("split batch", batch);
    labeler.offer("split heads", heads, SplitRole::Heads);
  }
  int headDim = labeler.fresh(LabelKind::Contracted);
  int keys = labeler.fresh(LabelKind::Contracted);
  labeler.operand(0)[3] = headDim;
  labeler.operand(1)[3] = headDim;
  labeler.operand(1)[2] = keys;
  labeler.operand(2)[2] = keys;
  return labeler.take();
}

/// logits [..., V], targets [...]: the rows are averaged; the gradient's
/// rows follow the logits; dloss is a replicated scalar. The classes (V)
/// split only where the logits arrive split (LabelKind::Classes).
ShardingLabels crossEntropy(Operation *op, bool gradient) {
  Labeler labeler(op);
  size_t rows = shapeOf(op->getOperand(1)).size();
  for (size_t dim = 0; dim < rows; ++dim) {
    int label = labeler.fresh(LabelKind::Averaged);
    labeler.operand(0)[dim] = label;
    labeler.operand(1)[dim] = label;
    labeler.labels.averaged.push_back(label);
    if (gradient)
      labeler.result(0)[dim] = label;
  }
  int classes = labeler.fresh(LabelKind::Classes);
  labeler.operand(0)[rows] = classes;
  if (gradient)
    labeler.result(0)[rows] = classes;
  if (gradient)
    labeler.linearIn({2});
  return labeler.take();
}

} // namespace

ShardingLabels LayerNormOp::getShardingLabels() {
  return normalization(*this, getAxis());
}
ShardingLabels RmsNormOp::getShardingLabels() {
  return normalization(*this, getAxis());
}
/// A pair spans the last dim and cos/sin are laid out over the last two
/// (positions, pairs): only the leading dims (batch, heads) split.
ShardingLabels RotaryOp::getShardingLabels() {
  return normalization(*this, getType().getRank() >= 2 ? -2 : -1);
}
ShardingLabels LayerNormGradOp::getShardingLabels() {
  return normalizationGradient(*this, getAxis());
}
ShardingLabels RmsNormGradOp::getShardingLabels() {
  return normalizationGradient(*this, getAxis());
}

ShardingLabels SoftmaxOp::getShardingLabels() {
  Labeler labeler(*this);
  labeler.followOperand(0, {}, {0}, {axisOf(getAxis(), getInput())});
  labeler.offerEveryResultDim();
  return labeler.take();
}
/// Operands (output, dy): linear in dy.
ShardingLabels SoftmaxGradOp::getShardingLabels() {
  Labeler labeler(*this);
  labeler.followOperand(0, {1}, {0}, {axisOf(getAxis(), getOutput())});
  labeler.linearIn({1});
  return labeler.take();
}

ShardingLabels AttentionOp::getShardingLabels() {
  return attention(*this, (bool)getMask(), getDropout().convertToDouble());
}
ShardingLabels AttentionGradOp::getShardingLabels() {
  return attention(*this, (bool)getMask(), getDropout().convertToDouble());
}

/// table [V, E], ids [...] -> [..., E]. A rank finds the vocabulary rows it
/// holds (`indexed`); the tokens and the width split.
ShardingLabels EmbeddingOp::getShardingLabels() {
  Labeler labeler(*this);
  size_t idsRank = shapeOf(getIndices()).size();
  for (size_t dim = 0; dim < idsRank; ++dim) {
    int label = labeler.fresh(LabelKind::Batch);
    labeler.operand(1)[dim] = label;
    labeler.result(0)[dim] = label;
  }
  int width = labeler.fresh();
  labeler.operand(0)[1] = width;
  labeler.result(0)[idsRank] = width;
  int vocabulary = labeler.fresh(LabelKind::Indexed);
  labeler.operand(0)[0] = vocabulary;
  labeler.labels.summed[0] = {vocabulary};
  labeler.linearIn({0});
  labeler.offer("vocabulary-parallel", vocabulary,
                SplitRole::VocabularyParallel);
  labeler.offer("split hidden", width);
  if (idsRank >= 1)
    labeler.offer("split tokens", labeler.operand(1)[0]);
  return labeler.take();
}

/// ids [...], dy [..., E] -> dtable [V, E]: the rows are summed; the table's
/// rows are indexed by the ids (a vocabulary-parallel rank computes its
/// block of them, rows_axis).
ShardingLabels EmbeddingGradOp::getShardingLabels() {
  Labeler labeler(*this);
  size_t idsRank = shapeOf(getOperand(0)).size();
  for (size_t dim = 0; dim < idsRank; ++dim) {
    int label = labeler.fresh(LabelKind::Reduced);
    labeler.operand(0)[dim] = label;
    labeler.operand(1)[dim] = label;
    labeler.labels.summed[0].push_back(label);
  }
  int width = labeler.fresh();
  labeler.operand(1)[idsRank] = width;
  labeler.result(0)[1] = width;
  labeler.result(0)[0] = labeler.fresh(LabelKind::Indexed);
  labeler.linearIn({1});
  return labeler.take();
}

ShardingLabels CrossEntropyOp::getShardingLabels() {
  return crossEntropy(*this, /*gradient=*/false);
}
ShardingLabels CrossEntropyGradOp::getShardingLabels() {
  return crossEntropy(*this, /*gradient=*/true);
}
