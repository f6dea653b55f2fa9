//===- ShardingStrategy.cpp - per-op strategy lists ---------------------===//
//
// The strategies are the op's named splits (its ShardingInterface), priced.
//
//===----------------------------------------------------------------------===//

#include "tessera/Sharding/ShardingStrategy.h"

#include "tessera/CostModel/Collective.h"
#include "tessera/CostModel/OpCost.h"

#include "Tess/IR/TessOps.h"
#include "Tess/IR/TessShardingLabels.h"
#include "mlir/IR/BuiltinTypes.h"

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

  /// The op's named split of one label (ShardingLabels): every dim with the
  /// label split over the axis; a result the label is summed into, and an
  /// operand added to that sum, partial. An indexed label does not divide
  /// the work (every device looks up every index).
  void addLabelSplit(const tess::ShardingLabels &labels,
                     const tess::NamedSplit &named) {
    auto layoutFor = [&](Value value, llvm::ArrayRef<int> list) {
      TensorLayout layout = TensorLayout::replicated(rankOf(value));
      for (auto [dim, label] : llvm::enumerate(list))
        if (label == named.label)
          layout.dimAxes[dim] = static_cast<int>(context.axis);
      return layout;
    };
    bool summedIntoFirst =
        !labels.summed.empty() && llvm::is_contained(labels.summed[0],
                                                     named.label);
    llvm::SmallVector<TensorLayout, 3> operands;
    for (auto [index, operand] : llvm::enumerate(op->getOperands()))
      operands.push_back(
          summedIntoFirst && llvm::is_contained(labels.addedToSum, index)
              ? partial(operand)
              : layoutFor(operand, labels.operands[index]));
    llvm::SmallVector<TensorLayout, 1> results;
    for (auto [index, result] : llvm::enumerate(op->getResults()))
      results.push_back(llvm::is_contained(labels.summed[index], named.label)
                            ? partial(result)
                            : layoutFor(result, labels.results[index]));
    add(named.name, std::move(operands), std::move(results),
        labels.kindOf(named.label) != tess::LabelKind::Indexed);
  }

  /// Every operand and result a partial sum: a linear view passes it on.
  void addPartialSums() {
    llvm::SmallVector<TensorLayout, 3> operands;
    for (Value operand : op->getOperands())
      operands.push_back(partial(operand));
    llvm::SmallVector<TensorLayout, 1> results;
    for (Value result : op->getResults())
      results.push_back(partial(result));
    add("partial sum", std::move(operands), std::move(results), false);
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
  tess::ShardingLabels labels = tess::shardingLabels(op);
  for (const tess::NamedSplit &split : labels.splits)
    list.addLabelSplit(labels, split);
  if (labels.searchesPartialSums)
    list.addPartialSums();
  return std::move(list.strategies);
}
