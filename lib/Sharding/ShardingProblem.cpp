//===- ShardingProblem.cpp - building the search's graph
//-------------------===//

#include "tessera/Sharding/ShardingProblem.h"

#include "Tess/IR/TessOps.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::sharding;

static TensorLayout replicatedLayoutOf(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  return TensorLayout::replicated(type ? type.getRank() : 0);
}

TensorLayout
ShardingProblem::producedLayout(const ShardingEdge &edge,
                                llvm::ArrayRef<unsigned> choice) const {
  if (!edge.producer)
    return replicatedLayoutOf(edge.value);
  return nodes[*edge.producer]
      .strategies[choice[*edge.producer]]
      .resultLayouts[edge.resultIndex];
}

TensorLayout
ShardingProblem::requiredLayout(const ShardingEdge &edge,
                                llvm::ArrayRef<unsigned> choice) const {
  if (!edge.consumer)
    return replicatedLayoutOf(edge.value);
  return nodes[*edge.consumer]
      .strategies[choice[*edge.consumer]]
      .operandLayouts[edge.operandIndex];
}

double ShardingProblem::edgeTime(const ShardingEdge &edge,
                                 llvm::ArrayRef<unsigned> choice) const {
  unsigned from = edge.producer ? choice[*edge.producer] : 0;
  unsigned to = edge.consumer ? choice[*edge.consumer] : 0;
  return edge.reshardTime[from][to];
}

ReshardPlan
ShardingProblem::edgeReshard(const ShardingEdge &edge,
                             llvm::ArrayRef<unsigned> choice) const {
  auto type = llvm::dyn_cast<RankedTensorType>(edge.value.getType());
  if (!type || !type.hasStaticShape())
    return ReshardPlan();
  return planReshard(producedLayout(edge, choice), requiredLayout(edge, choice),
                     type.getShape(), elementBytes(edge.value), *mesh,
                     *cluster);
}

double ShardingProblem::totalTime(llvm::ArrayRef<unsigned> choice) const {
  double total = 0;
  for (auto [node, strategy] : llvm::zip_equal(nodes, choice))
    total += node.strategies[strategy].time();
  for (const ShardingEdge &edge : edges)
    total += edgeTime(edge, choice);
  return total;
}

/// Values computed from a trainable parameter: the ones whose gradient the
/// backward computes.
static llvm::DenseSet<Value> valuesNeedingGradient(Block &body) {
  llvm::DenseSet<Value> needs;
  for (Operation &op : body) {
    bool fromTrainable = false;
    if (auto parameter = llvm::dyn_cast<tess::ParameterOp>(op))
      fromTrainable = parameter.getTrainable();
    else
      fromTrainable = llvm::any_of(op.getOperands(), [&](Value operand) {
        return needs.contains(operand);
      });
    if (!fromTrainable)
      continue;
    for (Value result : op.getResults())
      if (auto type = llvm::dyn_cast<RankedTensorType>(result.getType()))
        if (llvm::isa<FloatType>(type.getElementType()))
          needs.insert(result);
  }
  return needs;
}

llvm::Expected<ShardingProblem> sharding::buildShardingProblem(
    func::FuncOp function, const cost::DeviceMesh &mesh,
    const cost::Cluster &cluster, unsigned axis, bool training) {
  auto fail = [&](const llvm::Twine &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot plan the sharding of @" +
                                       function.getSymName() + ": " + why);
  };
  if (axis >= mesh.axes.size())
    return fail("mesh axis " + llvm::Twine(axis) + " is not in " +
                mesh.describe());
  if (!llvm::hasSingleElement(function.getBody()))
    return fail("the function must have exactly one block");

  Block &body = function.getBody().front();
  llvm::DenseSet<Value> needsGradient;
  if (training)
    needsGradient = valuesNeedingGradient(body);

  StrategyContext context;
  context.mesh = &mesh;
  context.cluster = &cluster;
  context.axis = axis;
  context.training = training;
  context.needsGradient = &needsGradient;

  ShardingProblem problem;
  problem.mesh = &mesh;
  problem.cluster = &cluster;
  problem.axis = axis;
  llvm::DenseMap<Operation *, unsigned> nodeOf;
  for (Operation &op : body) {
    if (op.getNumRegions() != 0)
      return fail("op '" + op.getName().getStringRef() +
                  "' has regions, which the search does not handle");
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    nodeOf[&op] = problem.nodes.size();
    problem.nodes.push_back({&op, enumerateStrategies(&op, context)});
  }

  auto addEdge = [&](Value value, std::optional<unsigned> consumer,
                     unsigned operandIndex) {
    ShardingEdge edge;
    edge.value = value;
    if (auto result = llvm::dyn_cast<OpResult>(value)) {
      edge.producer = nodeOf.lookup(result.getOwner());
      edge.resultIndex = result.getResultNumber();
    }
    edge.consumer = consumer;
    edge.operandIndex = operandIndex;
    if (!edge.producer && !edge.consumer)
      return; // An argument returned unchanged: nothing to move.

    auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
    bool priced = type && type.hasStaticShape();
    unsigned fromCount =
        edge.producer ? problem.nodes[*edge.producer].strategies.size() : 1;
    unsigned toCount =
        edge.consumer ? problem.nodes[*edge.consumer].strategies.size() : 1;
    edge.reshardTime.assign(fromCount, std::vector<double>(toCount, 0.0));
    llvm::SmallVector<unsigned> choice(problem.nodes.size(), 0);
    for (unsigned from = 0; from < fromCount && priced; ++from)
      for (unsigned to = 0; to < toCount; ++to) {
        if (edge.producer)
          choice[*edge.producer] = from;
        if (edge.consumer)
          choice[*edge.consumer] = to;
        edge.reshardTime[from][to] = problem.edgeReshard(edge, choice).time;
      }
    problem.edges.push_back(std::move(edge));
  };

  for (Operation &op : body) {
    std::optional<unsigned> consumer;
    if (!op.hasTrait<OpTrait::IsTerminator>())
      consumer = nodeOf.lookup(&op);
    for (OpOperand &use : op.getOpOperands())
      addEdge(use.get(), consumer, use.getOperandNumber());
  }
  return problem;
}
