//===- ShardingProblem.cpp - building the search's graph
//-------------------===//

#include "tessera/Sharding/ShardingProblem.h"

#include "tessera/CostModel/Collective.h"

#include "Tess/IR/TessOps.h"
#include "llvm/ADT/DenseMap.h"

#include <iterator>

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

TensorLayout sharding::lossLayout(const TensorLayout &produced) {
  TensorLayout layout = produced;
  layout.partialAxes.clear();
  return layout;
}

double sharding::bucketedCollectiveTime(const cost::DeviceMesh &mesh,
                                        const cost::Cluster &cluster,
                                        unsigned axis,
                                        cost::Collective collective,
                                        double bytes, double bucketBytes) {
  if (bucketBytes <= 0 || bytes >= bucketBytes)
    return cost::axisCollectiveTime(mesh, cluster, axis, collective, bytes);
  return bytes / bucketBytes *
         cost::axisCollectiveTime(mesh, cluster, axis, collective,
                                  bucketBytes);
}

TensorLayout
ShardingProblem::requiredLayout(const ShardingEdge &edge,
                                llvm::ArrayRef<unsigned> choice) const {
  if (!edge.consumer)
    return resultsFeedLoss && edge.producer
               ? lossLayout(producedLayout(edge, choice))
               : replicatedLayoutOf(edge.value);
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

namespace {

void append(ReshardPlan &plan, const ReshardPlan &more) {
  for (const ReshardStep &step : more.steps) {
    plan.steps.push_back(step);
    plan.time += step.time;
  }
}

/// Adds an all-reduce of `bytes` over `axis`.
void addAllReduce(ReshardPlan &plan, unsigned axis, double bytes,
                  const cost::DeviceMesh &mesh, const cost::Cluster &cluster) {
  ReshardStep step;
  step.axis = axis;
  step.collective = cost::Collective::AllReduce;
  step.bytes = bytes;
  step.time = cost::axisCollectiveTime(mesh, cluster, axis, step.collective,
                                       bytes);
  plan.steps.push_back(step);
  plan.time += step.time;
}

/// The loss's own collectives on logits of `shape` in `layout` (the file
/// comment of ShardingProblem.h): per axis splitting the class (last) dim,
/// three fp32 all-reduces of one value per local token; per axis splitting
/// only token dims, the scalar loss's all-reduce.
ReshardPlan lossCollectives(const TensorLayout &layout,
                            llvm::ArrayRef<int64_t> shape,
                            const cost::DeviceMesh &mesh,
                            const cost::Cluster &cluster) {
  ReshardPlan plan;
  if (shape.empty())
    return plan;
  unsigned classDim = shape.size() - 1;
  double localTokens = layout.localElements(shape, mesh) /
                       (layout.dimAxes[classDim] == kUnsplit
                            ? shape[classDim]
                            : shape[classDim] /
                                  mesh.axes[layout.dimAxes[classDim]].size);
  for (unsigned axis = 0; axis < mesh.axes.size(); ++axis) {
    int dim = layout.dimSplitOver(axis);
    if (dim == kUnsplit)
      continue;
    if (static_cast<unsigned>(dim) == classDim) {
      for (int statistic = 0; statistic < 3; ++statistic)
        addAllReduce(plan, axis, 4 * localTokens, mesh, cluster);
    } else {
      addAllReduce(plan, axis, 4, mesh, cluster);
    }
  }
  return plan;
}

/// The number of ops reading `value` (the terminator included).
double useCount(mlir::Value value) {
  return static_cast<double>(
      std::distance(value.use_begin(), value.use_end()));
}

} // namespace

ReshardPlan
ShardingProblem::edgeReshard(const ShardingEdge &edge,
                             llvm::ArrayRef<unsigned> choice) const {
  auto type = llvm::dyn_cast<RankedTensorType>(edge.value.getType());
  if (!type || !type.hasStaticShape())
    return ReshardPlan();
  TensorLayout produced = producedLayout(edge, choice);
  TensorLayout required = requiredLayout(edge, choice);
  double bytesPerElement = elementBytes(edge.value);
  ReshardPlan plan = planReshard(produced, required, type.getShape(),
                                 bytesPerElement, *mesh, *cluster);
  if (!edge.consumer && resultsFeedLoss && edge.producer)
    append(plan, lossCollectives(required, type.getShape(), *mesh, *cluster));
  if (!training || !edge.producer)
    return plan;
  const ShardingStrategy &producer =
      nodes[*edge.producer].strategies[choice[*edge.producer]];
  if (!producer.gradientLayout || !edge.consumer) {
    // An activation: its gradient's way back, the forward move mirrored. (A
    // parameter without an optimizer layout keeps its gradient where its
    // reader computes it: the strategies price its reduction.)
    if (needsGradient.contains(edge.value) &&
        !edge.value.getDefiningOp<tess::ParameterOp>())
      append(plan, planReshard(lossLayout(required), lossLayout(produced),
                               type.getShape(), bytesPerElement, *mesh,
                               *cluster));
    return plan;
  }

  // A parameter: ZeRO-3 gathers it again in the backward, and the gradient
  // travels back into the optimizer's layout. Both are coalesced
  // parameter-state collectives, and the gradient's synchronization is
  // shared by the parameter's uses.
  ReshardPlan state;
  if (producer.zeroStage == 3) {
    append(state, plan);
    append(state, plan);
    plan = ReshardPlan();
  }
  const ShardingStrategy &consumer =
      nodes[*edge.consumer].strategies[choice[*edge.consumer]];
  TensorLayout gradient = required;
  unsigned partialMask = consumer.gradientPartialAxes.empty()
                             ? 0
                             : consumer.gradientPartialAxes[edge.operandIndex];
  for (unsigned axis = 0; axis < mesh->axes.size(); ++axis)
    if ((partialMask >> axis) & 1u)
      gradient.partialAxes.push_back(axis);
  llvm::sort(gradient.partialAxes);
  // ZeRO-1/2: the step leaves the gradient a partial sum over the ZeRO
  // axes in the weight's layout (tess-annotate-from-plan), which the driver
  // reduce-scatters into the optimizer's shard (runtime/train/MeshZero.h).
  // A gradient whole on every rank of those axes (replicated compute: no
  // partial sum over them, no dim split over them) the step returns whole
  // and the driver slices, for free (tess-partition-spmd's tess.zero_axes).
  // A weight read several times gets the sum of its readers' gradients
  // (tess.add), whole where every addend is: each edge carries its share
  // (below), so a read whole on the ZeRO axes adds nothing and a split one
  // its share of the reduce-scatter, exact when the readers agree (a tied
  // embedding read by a replicated lookup and LM head: free). Where they
  // do not, the step all-reduces the split readers' gradients before the
  // sum and slices the whole result, which costs more than the shares.
  auto wholeOnZeroAxes = [&](const TensorLayout &layout) {
    return llvm::none_of(producer.zeroAxes, [&](unsigned axis) {
      return layout.isPartialOver(axis) ||
             layout.dimSplitOver(axis) != kUnsplit;
    });
  };
  ReshardPlan backward;
  if ((producer.zeroStage == 1 || producer.zeroStage == 2) &&
      !producer.zeroAxes.empty() && !wholeOnZeroAxes(gradient)) {
    TensorLayout pending = producer.resultLayouts.front();
    pending.partialAxes.assign(producer.zeroAxes.begin(),
                               producer.zeroAxes.end());
    llvm::sort(pending.partialAxes);
    backward = planReshard(gradient, pending, type.getShape(),
                           bytesPerElement, *mesh, *cluster);
    append(backward, planReshard(pending, *producer.gradientLayout,
                                 type.getShape(), bytesPerElement, *mesh,
                                 *cluster));
  } else {
    backward = planReshard(gradient, *producer.gradientLayout,
                           type.getShape(), bytesPerElement, *mesh, *cluster);
  }
  double share = 1.0 / std::max(1.0, useCount(edge.value));
  for (ReshardStep &step : backward.steps)
    step.bytes *= share;
  append(state, backward);
  for (ReshardStep step : state.steps) {
    step.time = bucketedCollectiveTime(*mesh, *cluster, step.axis,
                                       step.collective, step.bytes,
                                       gradientBucketBytes);
    plan.steps.push_back(step);
    plan.time += step.time;
  }
  return plan;
}

double ShardingProblem::totalTime(llvm::ArrayRef<unsigned> choice) const {
  double total = 0;
  for (auto [node, strategy] : llvm::zip_equal(nodes, choice))
    total += node.count * node.strategies[strategy].time();
  for (const ShardingEdge &edge : edges)
    total += edge.count * edgeTime(edge, choice);
  return total;
}

double ShardingProblem::totalMemory(llvm::ArrayRef<unsigned> choice) const {
  double total = 0;
  for (auto [node, strategy] : llvm::zip_equal(nodes, choice))
    total += node.count * node.strategies[strategy].memoryBytes;
  return total;
}

bool ShardingProblem::fitsMemory(llvm::ArrayRef<unsigned> choice) const {
  return !memoryLimit || !(totalMemory(choice) > *memoryLimit * (1 + 1e-9));
}

double ShardingProblem::minimumMemory() const {
  double total = 0;
  for (const ShardingNode &node : nodes) {
    double least = node.strategies.front().memoryBytes;
    for (const ShardingStrategy &strategy : node.strategies)
      least = std::min(least, strategy.memoryBytes);
    total += node.count * least;
  }
  return total;
}

void sharding::priceEdge(const ShardingProblem &problem, ShardingEdge &edge) {
  unsigned fromCount =
      edge.producer ? problem.nodes[*edge.producer].strategies.size() : 1;
  unsigned toCount =
      edge.consumer ? problem.nodes[*edge.consumer].strategies.size() : 1;
  edge.reshardTime.assign(fromCount, std::vector<double>(toCount, 0.0));
  llvm::SmallVector<unsigned> choice(problem.nodes.size(), 0);
  for (unsigned from = 0; from < fromCount; ++from)
    for (unsigned to = 0; to < toCount; ++to) {
      if (edge.producer)
        choice[*edge.producer] = from;
      if (edge.consumer)
        choice[*edge.consumer] = to;
      edge.reshardTime[from][to] = problem.edgeReshard(edge, choice).time;
    }
}

/// Values computed from a trainable parameter: the ones whose gradient the
/// backward computes.
static llvm::DenseSet<Value> gradientValues(Block &body) {
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

llvm::DenseSet<Value> sharding::valuesNeedingGradient(Block &body) {
  return gradientValues(body);
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
    needsGradient = gradientValues(body);

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
  problem.training = training;
  problem.needsGradient = needsGradient;
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
    if (priced)
      priceEdge(problem, edge);
    else
      edge.reshardTime.assign(fromCount, std::vector<double>(toCount, 0.0));
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
