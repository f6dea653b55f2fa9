//===- DataMovementSharding.cpp - sharding labels of data movement ops ---===//
//
// Views and copies keep a dim's label where the dim survives unchanged: a
// reshape group by group, a transpose by its permutation, a slice where it
// takes the whole dim, a gather outside its axis. Reductions keep the dims
// they keep; reduce_sum sums the others (a split leaves partial sums), the
// other reductions need them whole. The search offers splits of reshapes,
// transposes, splits and broadcasts, and a partial sum through the views.
//
//===----------------------------------------------------------------------===//

#include "Labeler.h"

using namespace mlir;
using namespace tessera::tess;
using namespace tessera::tess::sharding;

namespace {

/// Slice-like ops: a dim taken whole (start 0, stride 1, same size on both
/// sides) is shared.
ShardingLabels window(Operation *op, Value from, Value to,
                      ArrayRef<int64_t> starts, ArrayRef<int64_t> strides) {
  Labeler labeler(op);
  ArrayRef<int64_t> fromShape = shapeOf(from), toShape = shapeOf(to);
  for (size_t dim = 0; dim < fromShape.size(); ++dim) {
    if (starts[dim] != 0 || strides[dim] != 1 ||
        fromShape[dim] != toShape[dim])
      continue;
    int label = labeler.fresh();
    labeler.operand(0)[dim] = label;
    labeler.result(0)[dim] = label;
  }
  labeler.linearIn({0});
  return labeler.take();
}

/// tess.gather: input dims other than `axis` follow into the result, the
/// indices' dims fill the middle. Its gradient scatters them back, summing
/// the indices' dims.
ShardingLabels gather(Operation *op, int64_t axis, unsigned dataOperand,
                      unsigned indices, bool dataIsResult) {
  Labeler labeler(op);
  Value data = dataIsResult ? op->getResult(0) : op->getOperand(dataOperand);
  SmallVector<int, 4> &dataLabels =
      dataIsResult ? labeler.result(0) : labeler.operand(dataOperand);
  SmallVector<int, 4> &gatheredLabels =
      dataIsResult ? labeler.operand(1) : labeler.result(0);
  int64_t a = axisOf(axis, data);
  size_t indexRank = shapeOf(op->getOperand(indices)).size();
  size_t rank = shapeOf(data).size();
  for (size_t dim = 0; dim < rank; ++dim) {
    if ((int64_t)dim == a)
      continue;
    int label = labeler.fresh();
    dataLabels[dim] = label;
    gatheredLabels[(int64_t)dim < a ? dim : dim - 1 + indexRank] = label;
  }
  for (size_t dim = 0; dim < indexRank; ++dim) {
    int label =
        labeler.fresh(dataIsResult ? LabelKind::Reduced : LabelKind::Parallel);
    labeler.operand(indices)[dim] = label;
    gatheredLabels[a + dim] = label;
    if (dataIsResult)
      labeler.labels.summed[0].push_back(label);
  }
  labeler.linearIn({dataIsResult ? 1u : 0u});
  return labeler.take();
}

/// Reductions: kept dims follow the input; reduced ones are summed (sum) or
/// whole (the others, whose partial results do not add up).
ShardingLabels reduction(Operation *op, ArrayRef<int64_t> dims, bool keepDims,
                         bool summed) {
  Labeler labeler(op);
  Value input = op->getOperand(0);
  size_t rank = shapeOf(input).size();
  SmallVector<int64_t> reduced;
  for (int64_t dim : dims)
    reduced.push_back(axisOf(dim, input));
  size_t out = 0;
  for (size_t dim = 0; dim < rank; ++dim) {
    bool isReduced = llvm::is_contained(reduced, (int64_t)dim);
    int label = labeler.fresh(isReduced ? LabelKind::Reduced
                                        : LabelKind::Parallel);
    if (!isReduced) {
      labeler.operand(0)[dim] = label;
      labeler.result(0)[out++] = label;
      continue;
    }
    if (summed) {
      labeler.operand(0)[dim] = label;
      labeler.labels.summed[0].push_back(label);
    }
    if (keepDims)
      ++out;
  }
  if (summed)
    labeler.linearIn({0});
  return labeler.take();
}

/// Offers each labeled input dim d as "split dim d -> e", e the result dim
/// with its label (a view keeps a split block a block).
void offerViewSplits(Labeler &labeler) {
  for (auto [inputDim, label] : llvm::enumerate(labeler.operand(0))) {
    if (label == kWhole)
      continue;
    auto resultDim = llvm::find(labeler.result(0), label);
    if (resultDim == labeler.result(0).end())
      continue;
    labeler.offer("split dim " + std::to_string(inputDim) + " -> " +
                      std::to_string(resultDim - labeler.result(0).begin()),
                  label);
  }
  labeler.labels.searchesPartialSums = true;
}

} // namespace

/// Dims correspond group by group (runs of dims with equal products); the
/// outermost dims of a group share a label, since a split of the outermost
/// dim of a group is the same contiguous block of its elements on both
/// sides. Inner dims stay whole.
ShardingLabels ReshapeOp::getShardingLabels() {
  Labeler labeler(*this);
  labeler.linearIn({0});
  ArrayRef<int64_t> in = shapeOf(getInput());
  ArrayRef<int64_t> out = shapeOf(getResult());
  size_t i = 0, j = 0;
  while (i < in.size() && j < out.size()) {
    if (in[i] == 1) {
      ++i;
      continue;
    }
    if (out[j] == 1) {
      ++j;
      continue;
    }
    int label = labeler.fresh();
    labeler.operand(0)[i] = label;
    labeler.result(0)[j] = label;
    int64_t inProduct = in[i++], outProduct = out[j++];
    while (inProduct != outProduct) {
      if (inProduct < outProduct) {
        if (i >= in.size())
          break;
        inProduct *= in[i++];
      } else {
        if (j >= out.size())
          break;
        outProduct *= out[j++];
      }
    }
    if (inProduct != outProduct)
      break;
  }
  offerViewSplits(labeler);
  return labeler.take();
}

ShardingLabels TransposeOp::getShardingLabels() {
  Labeler labeler(*this);
  ArrayRef<int64_t> permutation = getPermutation();
  for (size_t dim = 0; dim < permutation.size(); ++dim) {
    int label = labeler.fresh();
    labeler.operand(0)[permutation[dim]] = label;
    labeler.result(0)[dim] = label;
  }
  labeler.linearIn({0});
  // In result dim order, as the permutation reads.
  for (size_t dim = 0; dim < permutation.size(); ++dim)
    labeler.offer("split dim " + std::to_string(permutation[dim]) + " -> " +
                      std::to_string(dim),
                  labeler.result(0)[dim]);
  labeler.labels.searchesPartialSums = true;
  return labeler.take();
}

ShardingLabels BroadcastOp::getShardingLabels() {
  Labeler labeler(*this);
  labeler.broadcast();
  labeler.linearIn({0});
  labeler.offerEveryResultDim();
  return labeler.take();
}

ShardingLabels SliceOp::getShardingLabels() {
  return window(*this, getInput(), getResult(), getStarts(), getStrides());
}
ShardingLabels SliceGradOp::getShardingLabels() {
  return window(*this, getDx(), getDy(), getStarts(), getStrides());
}

namespace {

/// The axis of a split or concat: one `pieced` label on the whole tensor's
/// dim and on every piece's (LabelKind::Pieced), partitionable when the op
/// is marked tess.piece_major.
void labelPieces(Labeler &labeler, Operation *op, Value whole,
                 ValueRange pieces, int64_t axis) {
  int pieced = labeler.fresh(LabelKind::Pieced);
  labeler.labels.pieceMajor = op->hasAttr(kPieceMajorAttrName);
  auto place = [&](Value value) {
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      if (operand == value)
        labeler.operand(index)[axis] = pieced;
    for (auto [index, result] : llvm::enumerate(op->getResults()))
      if (result == value)
        labeler.result(index)[axis] = pieced;
  };
  place(whole);
  for (Value piece : pieces)
    place(piece);
}

} // namespace

/// Every dim but the axis follows into each piece; the axis is `pieced`:
/// the search may split it (each rank then holds 1/n of every piece).
ShardingLabels SplitOp::getShardingLabels() {
  Labeler labeler(*this);
  int64_t axis = axisOf(getAxis(), getInput());
  labeler.followOperand(0, {},
                        llvm::to_vector(llvm::seq<unsigned>(0, getNumResults())),
                        {axis});
  labelPieces(labeler, *this, getInput(), getResults(), axis);
  labeler.linearIn({0});
  for (auto [dim, label] : llvm::enumerate(labeler.operand(0)))
    labeler.offer("split dim " + std::to_string(dim), label);
  return labeler.take();
}

/// A split's reverse (its gradient): the axis is `pieced` too, not offered
/// (the search plans the forward's splits; the backward's concats follow).
ShardingLabels ConcatOp::getShardingLabels() {
  Labeler labeler(*this);
  int64_t axis = axisOf(getAxis(), getResult());
  labeler.followOperand(
      0, llvm::to_vector(llvm::seq<unsigned>(1, getNumOperands())), {0},
      {axis});
  labelPieces(labeler, *this, getResult(), getInputs(), axis);
  labeler.linearInAll();
  return labeler.take();
}

ShardingLabels GatherOp::getShardingLabels() {
  return gather(*this, getAxis(), 0, 1, false);
}
ShardingLabels GatherGradOp::getShardingLabels() {
  return gather(*this, getAxis(), 1, 0, true);
}

ShardingLabels ReduceSumOp::getShardingLabels() {
  return reduction(*this, getDims(), getKeepDims(), /*summed=*/true);
}
ShardingLabels ReduceMeanOp::getShardingLabels() {
  return reduction(*this, getDims(), getKeepDims(), /*summed=*/false);
}
ShardingLabels ReduceMaxOp::getShardingLabels() {
  return reduction(*this, getDims(), getKeepDims(), /*summed=*/false);
}
ShardingLabels ReduceMinOp::getShardingLabels() {
  return reduction(*this, getDims(), getKeepDims(), /*summed=*/false);
}
