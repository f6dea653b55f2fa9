//===- ShardingStrategy.cpp - per-op strategy lists
//------------------------===//

#include "tessera/Sharding/ShardingStrategy.h"

#include "tessera/CostModel/Collective.h"
#include "tessera/CostModel/OpCost.h"

#include "Tess/IR/TessOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::sharding;

double sharding::elementBytes(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.getElementType().isIntOrFloat())
    return 0;
  return static_cast<double>(
      (type.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

double sharding::tensorBytes(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  return static_cast<double>(type.getNumElements()) * elementBytes(value);
}

namespace {

llvm::ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

unsigned rankOf(Value value) { return shapeOf(value).size(); }

bool isStaticTensor(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape();
}

/// A dim attribute in `[-rank, rank)` made non-negative.
unsigned normalizeDim(int64_t dim, unsigned rank) {
  return static_cast<unsigned>(dim < 0 ? dim + rank : dim);
}

class StrategyList {
public:
  StrategyList(Operation *op, const StrategyContext &context)
      : op(op), context(context),
        axisSize(context.mesh->axes[context.axis].size) {
    cost::OpCost opCost = cost::estimateOpCost(op);
    forwardTime = opCost.time(context.cluster->device);
  }

  /// Every operand and result whole on every device.
  llvm::SmallVector<TensorLayout, 3> replicatedOperands() const {
    llvm::SmallVector<TensorLayout, 3> layouts;
    for (Value operand : op->getOperands())
      layouts.push_back(TensorLayout::replicated(rankOf(operand)));
    return layouts;
  }
  TensorLayout replicatedResult(unsigned index = 0) const {
    return TensorLayout::replicated(rankOf(op->getResult(index)));
  }
  TensorLayout split(Value value, unsigned dim) const {
    return TensorLayout::splitDim(rankOf(value), dim, context.axis);
  }
  TensorLayout partial(Value value) const {
    return TensorLayout::partial(rankOf(value), context.axis);
  }

  /// Adds a strategy if its layouts fit the shapes. `dividesWork` says
  /// whether each device does 1/n of the op's work.
  void add(llvm::StringRef name,
           llvm::SmallVector<TensorLayout, 3> operandLayouts,
           llvm::SmallVector<TensorLayout, 1> resultLayouts, bool dividesWork) {
    for (auto [operand, layout] :
         llvm::zip_equal(op->getOperands(), operandLayouts))
      if (!fitsShape(layout, shapeOf(operand), *context.mesh))
        return;
    for (auto [result, layout] :
         llvm::zip_equal(op->getResults(), resultLayouts))
      if (!fitsShape(layout, shapeOf(result), *context.mesh))
        return;

    ShardingStrategy strategy;
    strategy.name = name.str();
    double divisor = dividesWork ? static_cast<double>(axisSize) : 1.0;
    strategy.computeTime =
        forwardTime * (context.training ? 3.0 : 1.0) / divisor;
    strategy.gradientPartialAxes.assign(op->getNumOperands(), 0);
    strategy.parameterGradientTime.assign(op->getNumOperands(), 0.0);
    if (context.training && dividesWork && context.needsGradient)
      for (auto [index, operand, layout] :
           llvm::enumerate(op->getOperands(), operandLayouts)) {
        bool wholeOnAxis = layout.dimSplitOver(context.axis) == kUnsplit &&
                           !layout.isPartialOver(context.axis);
        if (!wholeOnAxis || !context.needsGradient->contains(operand))
          continue;
        double time = cost::axisCollectiveTime(
            *context.mesh, *context.cluster, context.axis,
            cost::Collective::AllReduce,
            layout.localElements(shapeOf(operand), *context.mesh) *
                elementBytes(operand));
        strategy.communicationTime += time;
        strategy.gradientPartialAxes[index] |= 1u << context.axis;
        if (operand.getDefiningOp<tess::ParameterOp>())
          strategy.parameterGradientTime[index] = time;
      }
    strategy.operandLayouts = std::move(operandLayouts);
    strategy.resultLayouts = std::move(resultLayouts);
    strategies.push_back(std::move(strategy));
  }

  void addReplicated() {
    llvm::SmallVector<TensorLayout, 1> results;
    for (Value result : op->getResults())
      results.push_back(TensorLayout::replicated(rankOf(result)));
    add("replicated", replicatedOperands(), std::move(results),
        /*dividesWork=*/false);
  }

  /// Splits result dim `dim` and every operand dim aligned with it from the
  /// right (numpy broadcasting); an operand dim of another size (a broadcast
  /// one) or missing stays whole.
  void addFollowingResultDim(unsigned dim) {
    Value result = op->getResult(0);
    unsigned rank = rankOf(result);
    int64_t size = shapeOf(result)[dim];
    llvm::SmallVector<TensorLayout, 3> operands = replicatedOperands();
    for (auto [operand, layout] : llvm::zip(op->getOperands(), operands)) {
      int operandDim =
          static_cast<int>(dim) - static_cast<int>(rank - rankOf(operand));
      if (operandDim >= 0 && shapeOf(operand)[operandDim] == size)
        layout.dimAxes[operandDim] = static_cast<int>(context.axis);
    }
    add("split dim " + std::to_string(dim), std::move(operands),
        {split(result, dim)}, /*dividesWork=*/true);
  }

  void addLinear(tess::LinearOp linear) {
    Value input = linear.getInput(), weight = linear.getWeight(),
          result = linear.getResult();
    bool hasBias = static_cast<bool>(linear.getBias());
    unsigned inputRank = rankOf(input), resultRank = rankOf(result);
    // The weight is [in, out], or [out, in] with transpose_weight.
    unsigned weightIn = linear.getTransposeWeight() ? 1 : 0;
    unsigned weightOut = 1 - weightIn;

    llvm::SmallVector<TensorLayout, 3> column = replicatedOperands();
    column[1] = split(weight, weightOut);
    if (hasBias)
      column[2] = split(linear.getBias(), 0);
    add("column-parallel", std::move(column), {split(result, resultRank - 1)},
        true);

    llvm::SmallVector<TensorLayout, 3> row = replicatedOperands();
    row[0] = split(input, inputRank - 1);
    row[1] = split(weight, weightIn);
    if (hasBias)
      row[2] = partial(linear.getBias());
    add("row-parallel", std::move(row), {partial(result)}, true);

    if (inputRank >= 2) {
      llvm::SmallVector<TensorLayout, 3> data = replicatedOperands();
      data[0] = split(input, 0);
      add("data-parallel", std::move(data), {split(result, 0)}, true);
    }
  }

  void addMatmul(tess::MatmulOp matmul) {
    Value lhs = matmul.getLhs(), rhs = matmul.getRhs(),
          result = matmul.getResult();
    unsigned lhsRank = rankOf(lhs), rhsRank = rankOf(rhs),
             resultRank = rankOf(result);
    unsigned lhsM = matmul.getTransposeLhs() ? lhsRank - 1 : lhsRank - 2;
    unsigned lhsK = matmul.getTransposeLhs() ? lhsRank - 2 : lhsRank - 1;
    unsigned rhsK = matmul.getTransposeRhs() ? rhsRank - 1 : rhsRank - 2;
    unsigned rhsN = matmul.getTransposeRhs() ? rhsRank - 2 : rhsRank - 1;

    llvm::SmallVector<TensorLayout, 3> rows = replicatedOperands();
    rows[0] = split(lhs, lhsM);
    add("split M", std::move(rows), {split(result, resultRank - 2)}, true);

    llvm::SmallVector<TensorLayout, 3> columns = replicatedOperands();
    columns[1] = split(rhs, rhsN);
    add("split N", std::move(columns), {split(result, resultRank - 1)}, true);

    llvm::SmallVector<TensorLayout, 3> contraction = replicatedOperands();
    contraction[0] = split(lhs, lhsK);
    contraction[1] = split(rhs, rhsK);
    add("split K", std::move(contraction), {partial(result)}, true);

    // A batch dim both operands have at full size (not broadcast).
    for (unsigned dim = 0; dim + 2 < resultRank; ++dim) {
      int lhsDim =
          static_cast<int>(dim) - static_cast<int>(resultRank - lhsRank);
      int rhsDim =
          static_cast<int>(dim) - static_cast<int>(resultRank - rhsRank);
      int64_t size = shapeOf(result)[dim];
      if (lhsDim < 0 || rhsDim < 0 || shapeOf(lhs)[lhsDim] != size ||
          shapeOf(rhs)[rhsDim] != size)
        continue;
      llvm::SmallVector<TensorLayout, 3> batch = replicatedOperands();
      batch[0] = split(lhs, lhsDim);
      batch[1] = split(rhs, rhsDim);
      add("split batch dim " + std::to_string(dim), std::move(batch),
          {split(result, dim)}, true);
    }
  }

  /// Norms: split any dim before the normalized ones; scale and bias (the
  /// normalized shape) stay whole.
  void addNormalization(unsigned firstNormalizedDim) {
    for (unsigned dim = 0; dim < firstNormalizedDim; ++dim) {
      llvm::SmallVector<TensorLayout, 3> operands = replicatedOperands();
      operands[0] = split(op->getOperand(0), dim);
      add("split dim " + std::to_string(dim), std::move(operands),
          {split(op->getResult(0), dim)}, true);
    }
  }

  void addSoftmax(tess::SoftmaxOp softmax) {
    unsigned rank = rankOf(softmax.getResult());
    unsigned axis = normalizeDim(static_cast<int64_t>(softmax.getAxis()), rank);
    for (unsigned dim = 0; dim < rank; ++dim)
      if (dim != axis)
        addFollowingResultDim(dim);
  }

  void addAttention(tess::AttentionOp attention) {
    Value result = attention.getResult();
    Value mask = attention.getMask();
    // dim 0 is batch, dim 1 heads, for q, k, v and the (broadcast) mask.
    for (unsigned dim : {0u, 1u}) {
      llvm::SmallVector<TensorLayout, 3> operands = replicatedOperands();
      for (unsigned index = 0; index < 3; ++index)
        operands[index] = split(op->getOperand(index), dim);
      if (mask) {
        unsigned maskRank = rankOf(mask);
        int maskDim = static_cast<int>(dim) - static_cast<int>(4 - maskRank);
        if (maskDim >= 0 && shapeOf(mask)[maskDim] != 1)
          operands[3] = split(mask, maskDim);
      }
      add(dim == 0 ? "split batch" : "split heads", std::move(operands),
          {split(result, dim)}, true);
    }
  }

  void addEmbedding(tess::EmbeddingOp embedding) {
    Value table = embedding.getTable(), indices = embedding.getIndices(),
          result = embedding.getResult();
    unsigned resultRank = rankOf(result);
    // Every device looks up every token (rows it lacks give zeros): the
    // work is not divided.
    add("vocabulary-parallel", {split(table, 0), replicatedOperands()[1]},
        {partial(result)}, false);
    add("split hidden", {split(table, 1), replicatedOperands()[1]},
        {split(result, resultRank - 1)}, true);
    add("split tokens", {replicatedOperands()[0], split(indices, 0)},
        {split(result, 0)}, true);
  }

  void addReshape(tess::ReshapeOp reshape) {
    llvm::ArrayRef<int64_t> inputShape = shapeOf(reshape.getInput());
    llvm::ArrayRef<int64_t> resultShape = shapeOf(reshape.getResult());
    // A block split of input dim d keeps contiguous runs of the flat array
    // that a block split of result dim e reproduces exactly when the dims
    // before them hold the same number of elements and both divide by n.
    int64_t inputPrefix = 1;
    for (auto [inputDim, inputSize] : llvm::enumerate(inputShape)) {
      int64_t resultPrefix = 1;
      for (auto [resultDim, resultSize] : llvm::enumerate(resultShape)) {
        if (resultPrefix == inputPrefix && inputSize % axisSize == 0 &&
            resultSize % axisSize == 0) {
          add("split dim " + std::to_string(inputDim) + " -> " +
                  std::to_string(resultDim),
              {split(reshape.getInput(), inputDim)},
              {split(reshape.getResult(), resultDim)}, true);
          break;
        }
        resultPrefix *= resultSize;
      }
      inputPrefix *= inputSize;
    }
    add("partial sum", {partial(reshape.getInput())},
        {partial(reshape.getResult())}, false);
  }

  void addTranspose(tess::TransposeOp transpose) {
    llvm::ArrayRef<int64_t> permutation = transpose.getPermutation();
    for (auto [resultDim, inputDim] : llvm::enumerate(permutation))
      add("split dim " + std::to_string(inputDim) + " -> " +
              std::to_string(resultDim),
          {split(transpose.getInput(), static_cast<unsigned>(inputDim))},
          {split(transpose.getResult(), resultDim)}, true);
    add("partial sum", {partial(transpose.getInput())},
        {partial(transpose.getResult())}, false);
  }

  /// Splits a dim of the input and the same dim of every piece. On the
  /// split axis itself each device holds its 1/n of every piece: the
  /// input's block layout is read piece by piece (a column-parallel
  /// producer orders its weight columns that way when partitioned, as
  /// Megatron-LM does for the fused QKV projection).
  void addSplit(tess::SplitOp split) {
    Value input = split.getInput();
    unsigned rank = rankOf(input);
    for (unsigned dim = 0; dim < rank; ++dim) {
      llvm::SmallVector<TensorLayout, 1> results;
      for (Value result : split.getResults())
        results.push_back(this->split(result, dim));
      add("split dim " + std::to_string(dim), {this->split(input, dim)},
          std::move(results), true);
    }
  }

  std::vector<ShardingStrategy> strategies;

private:
  Operation *op;
  const StrategyContext &context;
  int64_t axisSize;
  double forwardTime = 0;
};

} // namespace

std::vector<ShardingStrategy>
sharding::enumerateStrategies(Operation *op, const StrategyContext &context) {
  bool allStatic = llvm::all_of(op->getOperands(), isStaticTensor) &&
                   llvm::all_of(op->getResults(), isStaticTensor);
  if (!allStatic) {
    // No layouts to speak of: the op runs whole where it is, costing its
    // full time (e.g. func.return, or ops on unranked values).
    ShardingStrategy strategy;
    strategy.name = "replicated";
    for (Value operand : op->getOperands())
      strategy.operandLayouts.push_back(TensorLayout::replicated(
          isStaticTensor(operand) ? rankOf(operand) : 0));
    for (Value result : op->getResults())
      strategy.resultLayouts.push_back(TensorLayout::replicated(
          isStaticTensor(result) ? rankOf(result) : 0));
    strategy.computeTime =
        cost::estimateOpCost(op).time(context.cluster->device) *
        (context.training ? 3.0 : 1.0);
    strategy.gradientPartialAxes.assign(op->getNumOperands(), 0);
    strategy.parameterGradientTime.assign(op->getNumOperands(), 0.0);
    return {strategy};
  }

  StrategyList list(op, context);
  list.addReplicated();
  if (context.mesh->axes[context.axis].size <= 1)
    return std::move(list.strategies);
  if (auto split = llvm::dyn_cast<tess::SplitOp>(op)) {
    list.addSplit(split);
    return std::move(list.strategies);
  }
  if (op->getNumResults() != 1)
    return std::move(list.strategies);

  unsigned resultRank = rankOf(op->getResult(0));
  auto followEveryDim = [&] {
    for (unsigned dim = 0; dim < resultRank; ++dim)
      list.addFollowingResultDim(dim);
  };
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](tess::LinearOp linear) { list.addLinear(linear); })
      .Case([&](tess::MatmulOp matmul) { list.addMatmul(matmul); })
      .Case([&](tess::LayerNormOp norm) {
        list.addNormalization(
            normalizeDim(static_cast<int64_t>(norm.getAxis()), resultRank));
      })
      // The batch and head dims split; positions and pairs stay whole, so
      // cos and sin (replicated) still line up (OpDimLabels agrees).
      .Case([&](tess::RotaryOp) {
        for (unsigned dim = 0; dim + 2 < resultRank; ++dim)
          list.addFollowingResultDim(dim);
      })
      .Case([&](tess::RmsNormOp norm) {
        list.addNormalization(
            normalizeDim(static_cast<int64_t>(norm.getAxis()), resultRank));
      })
      .Case([&](tess::SoftmaxOp softmax) { list.addSoftmax(softmax); })
      .Case([&](tess::AttentionOp attention) { list.addAttention(attention); })
      .Case([&](tess::EmbeddingOp embedding) { list.addEmbedding(embedding); })
      .Case([&](tess::ReshapeOp reshape) { list.addReshape(reshape); })
      .Case([&](tess::TransposeOp transpose) { list.addTranspose(transpose); })
      .Case<tess::AddOp, tess::SubOp, tess::MulOp, tess::DivOp, tess::PowOp,
            tess::MaximumOp, tess::MinimumOp, tess::LogicalAndOp,
            tess::LogicalOrOp, tess::CompareOp, tess::WhereOp,
            tess::BroadcastOp>([&](Operation *) { followEveryDim(); })
      .Default([&](Operation *other) {
        // Unary elementwise ops and casts. Dropout is left replicated: its
        // random stream is indexed by the element's position in the whole
        // tensor, which a partitioned kernel would have to offset.
        if (other->hasTrait<OpTrait::Elementwise>() &&
            !llvm::isa<tess::DropoutOp>(other))
          followEveryDim();
      });
  return std::move(list.strategies);
}
