//===- OpDimLabels.cpp - how an op's dims correspond, for sharding ------===//

#include "OpDimLabels.h"

#include "Tess/IR/TessOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::partition;
namespace tess = tessera::tess;

SmallVector<int> OpDimLabels::labels() const {
  SmallVector<int> all;
  for (const auto *lists : {&operands, &results})
    for (const auto &list : *lists)
      for (int label : list)
        if (label != kWhole)
          all.push_back(label);
  llvm::sort(all);
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

bool OpDimLabels::inResults(int label) const {
  return llvm::any_of(results,
                      [&](const auto &list) { return llvm::is_contained(list, label); });
}

bool OpDimLabels::isSummed(int label) const {
  return llvm::any_of(summed,
                      [&](const auto &list) { return llvm::is_contained(list, label); });
}

namespace {

ArrayRef<int64_t> shapeOf(Value value) {
  if (auto type = llvm::dyn_cast<RankedTensorType>(value.getType()))
    return type.getShape();
  return {};
}

/// Builds the labels of one op.
class Labeler {
public:
  explicit Labeler(Operation *op) : op(op) {
    labels.operands.resize(op->getNumOperands());
    labels.results.resize(op->getNumResults());
    labels.summed.resize(op->getNumResults());
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      labels.operands[index].assign(shapeOf(operand).size(), kWhole);
    for (auto [index, result] : llvm::enumerate(op->getResults()))
      labels.results[index].assign(shapeOf(result).size(), kWhole);
  }

  int fresh() { return next++; }
  SmallVector<int, 4> &operand(unsigned index) {
    return labels.operands[index];
  }
  SmallVector<int, 4> &result(unsigned index) { return labels.results[index]; }

  /// Every operand and result the same labels, dim by dim (elementwise ops
  /// whose operands all have the result's shape).
  void sameShape() {
    SmallVector<int> dims;
    for (size_t dim = 0; dim < labels.results[0].size(); ++dim)
      dims.push_back(fresh());
    for (auto &list : labels.results)
      if (list.size() == dims.size())
        list.assign(dims.begin(), dims.end());
    for (auto &list : labels.operands)
      if (list.size() == dims.size())
        list.assign(dims.begin(), dims.end());
  }

  /// Numpy broadcasting: result dims get labels; an operand dim aligned from
  /// the right shares it when the sizes agree (a stretched 1 stays whole).
  void broadcast(unsigned result = 0) {
    ArrayRef<int64_t> shape = shapeOf(op->getResult(result));
    for (size_t dim = 0; dim < shape.size(); ++dim)
      labels.results[result][dim] = fresh();
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      alignRight(index, labels.results[result], shape);
  }

  /// Operand `index` shares the labels of `reference` (of `shape`) where it
  /// aligns from the right with equal sizes.
  void alignRight(unsigned index, ArrayRef<int> reference,
                  ArrayRef<int64_t> shape) {
    ArrayRef<int64_t> own = shapeOf(op->getOperand(index));
    if (own.size() > shape.size())
      return;
    size_t offset = shape.size() - own.size();
    for (size_t dim = 0; dim < own.size(); ++dim)
      if (own[dim] == shape[offset + dim])
        labels.operands[index][dim] = reference[offset + dim];
  }

  /// Result `index` and every operand in `operands` take `source`'s labels
  /// except at `whole` dims (normalized dims, a softmax axis).
  void followOperand(unsigned source, ArrayRef<unsigned> operands,
                     ArrayRef<unsigned> results, ArrayRef<int64_t> whole) {
    SmallVector<int, 4> &list = labels.operands[source];
    for (size_t dim = 0; dim < list.size(); ++dim)
      list[dim] = llvm::is_contained(whole, (int64_t)dim) ? kWhole : fresh();
    for (unsigned index : operands)
      if (labels.operands[index].size() == list.size())
        labels.operands[index] = list;
    for (unsigned index : results)
      if (labels.results[index].size() == list.size())
        labels.results[index] = list;
  }

  void linearIn(std::initializer_list<unsigned> group) {
    labels.linearGroups.emplace_back(group);
  }
  /// Every operand is a linear group of its own... jointly: add/sub/concat.
  void linearInAll() {
    SmallVector<unsigned, 3> group;
    for (unsigned index = 0; index < op->getNumOperands(); ++index)
      group.push_back(index);
    labels.linearGroups.push_back(group);
  }

  OpDimLabels take() { return std::move(labels); }
  Operation *op;
  OpDimLabels labels;

private:
  int next = 0;
};

int64_t axisOf(int64_t axis, Value value) {
  return tess::normalizeAxis(axis, shapeOf(value).size()).value_or(0);
}

/// The trailing dims [axis, rank) of a norm.
SmallVector<int64_t> trailingDims(int64_t axis, Value input) {
  SmallVector<int64_t> dims;
  for (int64_t dim = axisOf(axis, input);
       dim < (int64_t)shapeOf(input).size(); ++dim)
    dims.push_back(dim);
  return dims;
}

/// Reshape: dims correspond group by group (runs of dims with equal
/// products); the outermost dims of a group share a label, since a split of
/// the outermost dim of a group is the same contiguous block of its
/// elements on both sides. Inner dims stay whole.
void reshapeLabels(Labeler &labeler) {
  ArrayRef<int64_t> in = shapeOf(labeler.op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(labeler.op->getResult(0));
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
          return;
        inProduct *= in[i++];
      } else {
        if (j >= out.size())
          return;
        outProduct *= out[j++];
      }
    }
  }
}

void matmulLabels(Labeler &labeler, tess::MatmulOp matmul) {
  ArrayRef<int64_t> result = shapeOf(matmul.getResult());
  size_t rank = result.size();
  for (size_t dim = 0; dim + 2 < rank; ++dim)
    labeler.result(0)[dim] = labeler.fresh();
  int m = labeler.fresh(), n = labeler.fresh(), k = labeler.fresh();
  labeler.result(0)[rank - 2] = m;
  labeler.result(0)[rank - 1] = n;
  SmallVector<int64_t> batch(result.drop_back(2));
  SmallVector<int> batchLabels(labeler.result(0).begin(),
                               labeler.result(0).end() - 2);
  for (unsigned index : {0u, 1u}) {
    ArrayRef<int64_t> shape = shapeOf(matmul->getOperand(index));
    size_t own = shape.size();
    size_t offset = batch.size() - (own - 2);
    for (size_t dim = 0; dim + 2 < own; ++dim)
      if (shape[dim] == batch[offset + dim])
        labeler.operand(index)[dim] = batchLabels[offset + dim];
    bool transposed =
        index == 0 ? matmul.getTransposeLhs() : matmul.getTransposeRhs();
    int outer = index == 0 ? m : n;
    // lhs is [M, K] (or [K, M] transposed), rhs [K, N] (or [N, K]).
    bool outerFirst = (index == 0) != transposed;
    labeler.operand(index)[own - 2] = outerFirst ? outer : k;
    labeler.operand(index)[own - 1] = outerFirst ? k : outer;
  }
  labeler.labels.summed[0] = {k};
  labeler.linearIn({0});
  labeler.linearIn({1});
}

void linearLabels(Labeler &labeler, tess::LinearOp linear) {
  size_t rank = shapeOf(linear.getResult()).size();
  for (size_t dim = 0; dim + 1 < rank; ++dim) {
    int label = labeler.fresh();
    labeler.result(0)[dim] = label;
    labeler.operand(0)[dim] = label;
  }
  int out = labeler.fresh(), in = labeler.fresh();
  labeler.result(0)[rank - 1] = out;
  labeler.operand(0)[rank - 1] = in;
  bool transposed = linear.getTransposeWeight();
  labeler.operand(1)[0] = transposed ? out : in;
  labeler.operand(1)[1] = transposed ? in : out;
  labeler.labels.summed[0] = {in};
  if (linear.getBias()) {
    labeler.operand(2)[0] = out;
    labeler.labels.addedToSum = {2};
    labeler.linearIn({0, 2});
    labeler.linearIn({1, 2});
  } else {
    labeler.linearIn({0});
    labeler.linearIn({1});
  }
}

/// [B, H, S, D] attention operands: batch and heads shared (K/V heads with
/// Q's label: a contiguous block of query heads reads the matching block of
/// K/V groups); sequences and head_dim whole; the mask by broadcasting.
void attentionLabels(Labeler &labeler, unsigned maskIndex, bool hasMask,
                     unsigned operandCount) {
  int batch = labeler.fresh(), heads = labeler.fresh();
  for (unsigned index = 0; index < operandCount; ++index) {
    if (hasMask && index == maskIndex)
      continue;
    labeler.operand(index)[0] = batch;
    labeler.operand(index)[1] = heads;
  }
  for (unsigned index = 0; index < labeler.op->getNumResults(); ++index) {
    labeler.result(index)[0] = batch;
    labeler.result(index)[1] = heads;
  }
  if (hasMask) {
    SmallVector<int> reference = {batch, heads, kWhole, kWhole};
    SmallVector<int64_t> shape(shapeOf(labeler.op->getOperand(0)));
    shape[3] = shapeOf(labeler.op->getOperand(1))[2];
    labeler.alignRight(maskIndex, reference, shape);
  }
}

/// Reductions: kept dims follow the input; reduced ones are summed (sum) or
/// whole (the others, whose partial results do not add up).
void reductionLabels(Labeler &labeler, ArrayRef<int64_t> dims, bool keepDims,
                     bool summed) {
  Value input = labeler.op->getOperand(0);
  size_t rank = shapeOf(input).size();
  SmallVector<int64_t> reduced;
  for (int64_t dim : dims)
    reduced.push_back(axisOf(dim, input));
  size_t out = 0;
  for (size_t dim = 0; dim < rank; ++dim) {
    bool isReduced = llvm::is_contained(reduced, (int64_t)dim);
    int label = labeler.fresh();
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
}

/// Slice-like ops: a dim taken whole (start 0, stride 1, same size on both
/// sides) is shared.
void windowLabels(Labeler &labeler, Value from, Value to,
                  ArrayRef<int64_t> starts, ArrayRef<int64_t> strides) {
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
}

/// tess.gather: input dims other than `axis` follow into the result, the
/// indices' dims fill the middle.
void gatherLabels(Labeler &labeler, int64_t axis, unsigned dataOperand,
                  unsigned indices, bool dataIsResult) {
  Operation *op = labeler.op;
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
    int label = labeler.fresh();
    labeler.operand(indices)[dim] = label;
    gatheredLabels[a + dim] = label;
    if (dataIsResult)
      labeler.labels.summed[0].push_back(label);
  }
}

} // namespace

OpDimLabels partition::dimLabels(Operation *op) {
  Labeler labeler(op);
  llvm::TypeSwitch<Operation *>(op)
      .Case<tess::NegOp, tess::CastOp>([&](Operation *) {
        labeler.sameShape();
        labeler.linearIn({0});
      })
      .Case<tess::AbsOp, tess::ExpOp, tess::LogOp, tess::SqrtOp,
            tess::RsqrtOp, tess::ReciprocalOp, tess::TanhOp, tess::ErfOp,
            tess::SigmoidOp, tess::ReluOp, tess::CosOp, tess::SinOp,
            tess::SiluOp, tess::LogicalNotOp, tess::GeluOp>(
          [&](Operation *) { labeler.sameShape(); })
      // Elementwise in param, grad, m and v (lr, step and grad_scale are
      // scalars): ZeRO's sharded update runs on each rank's shard.
      .Case([&](tess::AdamWOp) { labeler.sameShape(); })
      .Case([&](tess::SwigluOp) {
        labeler.sameShape();
        labeler.linearIn({1});
      })
      .Case([&](tess::SwigluGradOp) {
        labeler.sameShape();
        labeler.linearIn({2});
      })
      .Case<tess::GeluGradOp, tess::SiluGradOp>([&](Operation *) {
        labeler.sameShape();
        labeler.linearIn({1});
      })
      .Case([&](tess::DropoutOp dropout) {
        if (dropout.getRate().convertToDouble() == 0) {
          labeler.sameShape();
          labeler.linearIn({0});
        }
      })
      .Case<tess::AddOp, tess::SubOp>([&](Operation *) {
        labeler.broadcast();
        labeler.linearInAll();
      })
      .Case<tess::MulOp>([&](Operation *) {
        labeler.broadcast();
        labeler.linearIn({0});
        labeler.linearIn({1});
      })
      .Case<tess::DivOp>([&](Operation *) {
        labeler.broadcast();
        labeler.linearIn({0});
      })
      .Case<tess::PowOp, tess::MaximumOp, tess::MinimumOp, tess::CompareOp,
            tess::LogicalAndOp, tess::LogicalOrOp>(
          [&](Operation *) { labeler.broadcast(); })
      .Case([&](tess::WhereOp) {
        labeler.broadcast();
        labeler.linearIn({1, 2});
      })
      .Case([&](tess::BroadcastOp) {
        labeler.broadcast();
        labeler.linearIn({0});
      })
      .Case([&](tess::ReshapeOp) {
        reshapeLabels(labeler);
        labeler.linearIn({0});
      })
      .Case([&](tess::TransposeOp transpose) {
        ArrayRef<int64_t> permutation = transpose.getPermutation();
        for (size_t dim = 0; dim < permutation.size(); ++dim) {
          int label = labeler.fresh();
          labeler.operand(0)[permutation[dim]] = label;
          labeler.result(0)[dim] = label;
        }
        labeler.linearIn({0});
      })
      .Case([&](tess::SliceOp slice) {
        windowLabels(labeler, slice.getInput(), slice.getResult(),
                     slice.getStarts(), slice.getStrides());
      })
      .Case([&](tess::SliceGradOp grad) {
        windowLabels(labeler, grad.getDx(), grad.getDy(), grad.getStarts(),
                     grad.getStrides());
      })
      .Case([&](tess::SplitOp split) {
        labeler.followOperand(0, {}, llvm::to_vector(llvm::seq<unsigned>(
                                         0, op->getNumResults())),
                              {axisOf(split.getAxis(), split.getInput())});
        labeler.linearIn({0});
      })
      .Case([&](tess::ConcatOp concat) {
        labeler.followOperand(
            0, llvm::to_vector(llvm::seq<unsigned>(1, op->getNumOperands())),
            {0}, {axisOf(concat.getAxis(), concat.getResult())});
        labeler.linearInAll();
      })
      .Case([&](tess::MatmulOp matmul) { matmulLabels(labeler, matmul); })
      .Case([&](tess::LinearOp linear) { linearLabels(labeler, linear); })
      .Case([&](tess::LayerNormOp norm) {
        labeler.followOperand(0, {}, {0},
                              trailingDims(norm.getAxis(), norm.getInput()));
      })
      // A pair spans the last dim and cos/sin are laid out over the last
      // two (positions, pairs): only the leading dims (batch, heads) split.
      .Case([&](tess::RotaryOp rotary) {
        int64_t rank = rotary.getType().getRank();
        labeler.followOperand(0, {}, {0},
                              trailingDims(rank >= 2 ? -2 : -1,
                                           rotary.getInput()));
      })
      .Case([&](tess::RmsNormOp norm) {
        labeler.followOperand(0, {}, {0},
                              trailingDims(norm.getAxis(), norm.getInput()));
      })
      .Case<tess::LayerNormGradOp, tess::RmsNormGradOp>([&](Operation *) {
        // Operands (input, scale?, dy); results (dx, dscale?, dbias?). The
        // leading dims are summed into the scale and bias gradients.
        int64_t axis = isa<tess::LayerNormGradOp>(op)
                           ? cast<tess::LayerNormGradOp>(op).getAxis()
                           : cast<tess::RmsNormGradOp>(op).getAxis();
        Value input = op->getOperand(0);
        SmallVector<int64_t> whole = trailingDims(axis, input);
        labeler.followOperand(0, {op->getNumOperands() - 1}, {0}, whole);
        SmallVector<int, 2> leading;
        for (int label : labeler.operand(0))
          if (label != kWhole)
            leading.push_back(label);
        for (unsigned index = 1; index < op->getNumResults(); ++index)
          labeler.labels.summed[index] = leading;
      })
      .Case([&](tess::SoftmaxOp softmax) {
        labeler.followOperand(0, {}, {0},
                              {axisOf(softmax.getAxis(), softmax.getInput())});
      })
      .Case([&](tess::SoftmaxGradOp grad) {
        labeler.followOperand(0, {1}, {0},
                              {axisOf(grad.getAxis(), grad.getOutput())});
        labeler.linearIn({1});
      })
      .Case([&](tess::AttentionOp attention) {
        if (attention.getDropout().convertToDouble() == 0)
          attentionLabels(labeler, 3, (bool)attention.getMask(),
                          op->getNumOperands());
      })
      .Case([&](tess::AttentionGradOp grad) {
        if (grad.getDropout().convertToDouble() == 0)
          attentionLabels(labeler, 3, (bool)grad.getMask(),
                          op->getNumOperands());
      })
      .Case([&](tess::EmbeddingOp) {
        // table [V, E], ids [...] -> [..., E]; the vocabulary stays whole.
        size_t idsRank = shapeOf(op->getOperand(1)).size();
        for (size_t dim = 0; dim < idsRank; ++dim) {
          int label = labeler.fresh();
          labeler.operand(1)[dim] = label;
          labeler.result(0)[dim] = label;
        }
        int width = labeler.fresh();
        labeler.operand(0)[1] = width;
        labeler.result(0)[idsRank] = width;
        labeler.linearIn({0});
      })
      .Case([&](tess::EmbeddingGradOp) {
        // ids [...], dy [..., E] -> dtable [V, E]: the rows are summed.
        size_t idsRank = shapeOf(op->getOperand(0)).size();
        for (size_t dim = 0; dim < idsRank; ++dim) {
          int label = labeler.fresh();
          labeler.operand(0)[dim] = label;
          labeler.operand(1)[dim] = label;
          labeler.labels.summed[0].push_back(label);
        }
        int width = labeler.fresh();
        labeler.operand(1)[idsRank] = width;
        labeler.result(0)[1] = width;
        labeler.linearIn({1});
      })
      .Case([&](tess::GatherOp gather) {
        gatherLabels(labeler, gather.getAxis(), 0, 1, false);
        labeler.linearIn({0});
      })
      .Case([&](tess::GatherGradOp grad) {
        gatherLabels(labeler, grad.getAxis(), 1, 0, true);
        labeler.linearIn({1});
      })
      .Case<tess::CrossEntropyOp, tess::CrossEntropyGradOp>([&](Operation *) {
        // logits [..., V], targets [...]: the rows are averaged; the
        // gradient's rows follow the logits; dloss is a replicated scalar.
        size_t rows = shapeOf(op->getOperand(1)).size();
        for (size_t dim = 0; dim < rows; ++dim) {
          int label = labeler.fresh();
          labeler.operand(0)[dim] = label;
          labeler.operand(1)[dim] = label;
          labeler.labels.averaged.push_back(label);
          if (isa<tess::CrossEntropyGradOp>(op))
            labeler.result(0)[dim] = label;
        }
        if (isa<tess::CrossEntropyGradOp>(op))
          labeler.linearIn({2});
      })
      .Case<tess::ReduceSumOp>([&](tess::ReduceSumOp reduction) {
        reductionLabels(labeler, reduction.getDims(), reduction.getKeepDims(),
                        /*summed=*/true);
      })
      .Case<tess::ReduceMeanOp, tess::ReduceMaxOp, tess::ReduceMinOp>(
          [&](Operation *) {
            auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims");
            reductionLabels(labeler, dims.asArrayRef(),
                            (bool)op->getAttr("keep_dims"), /*summed=*/false);
          })
      .Default([](Operation *) {});
  return labeler.take();
}
