//===- MeshSharding.cpp - strategies over every axis, ZeRO, layer reuse ---===//

#include "tessera/Sharding/MeshSharding.h"

#include "tessera/Analysis/MegatronPartition.h"
#include "tessera/Analysis/StepMemory.h"
#include "tessera/CostModel/MemoryText.h"
#include "tessera/Sharding/IntraOpSearch.h"

#include "llvm/Support/FormatVariadic.h"

#include <chrono>
#include <map>
#include <tuple>

using namespace mlir;
using namespace tessera;
using namespace tessera::sharding;
using tessera::cost::memoryText;

namespace {

llvm::Error searchError(const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
}

llvm::ArrayRef<int64_t> shapeOf(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape() ? type.getShape()
                                       : llvm::ArrayRef<int64_t>();
}

bool isStatic(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape();
}

/// Whether `strategy` of `op` is of a pin's op kind. Column- and
/// row-parallel are linear layers' strategies by name; data parallelism is
/// any strategy that divides the op's work while every parameter it reads
/// stays whole (no split, no partial sum) on every axis, which covers the
/// linear's "data-parallel", an embedding's "split tokens" and a norm's
/// split batch alike.
bool satisfiesKind(Operation *op, const ShardingStrategy &strategy,
                   llvm::StringRef kind) {
  llvm::StringRef name = strategy.name;
  bool column = name.contains("column-parallel");
  bool row = name.contains("row-parallel");
  if (kind == "tp-column")
    return column;
  if (kind == "tp-row")
    return row;
  if (kind == "vocabulary-parallel")
    return name.contains("vocabulary-parallel");
  if (kind == "dp") {
    if (name == "replicated" || column || row)
      return false;
    for (auto [operand, layout] :
         llvm::zip_equal(op->getOperands(), strategy.operandLayouts))
      if (operand.getDefiningOp<tess::ParameterOp>() &&
          !layout.isReplicated())
        return false;
    return true;
  }
  return name == "replicated";
}

class ProblemBuilder {
public:
  ProblemBuilder(func::FuncOp function, const cost::DeviceMesh &mesh,
                 const cost::Cluster &cluster,
                 const MeshSearchOptions &options)
      : function(function), mesh(mesh), cluster(cluster), options(options) {
    // A mesh of one device has no axes; its strategies are those of one
    // axis of size 1 (replicated only).
    singleDevice.axes.push_back({"dp", 1, 1, cost::LinkLevel::IntraNode});
  }

  llvm::Expected<MeshShardingProblem> build();

private:
  std::vector<ShardingStrategy> opStrategies(Operation *op);
  std::vector<ShardingStrategy>
  parameterStrategies(tess::ParameterOp parameter,
                      llvm::ArrayRef<TensorLayout> wanted);
  std::vector<const ShardPin *> pinsOf(tess::ParameterOp parameter) const {
    std::vector<const ShardPin *> matching;
    for (const ShardPin &pin : options.pins)
      if (pin.pattern->match(parameter.getName()))
        matching.push_back(&pin);
    return matching;
  }
  /// The ZeRO-2 ring's elements per element of a gradient sharded over
  /// `group` ranks (see parameterStrategies).
  double zeroTwoRingPerElement(int64_t group) const;
  double allGatherChain(TensorLayout from, llvm::ArrayRef<int64_t> shape,
                        double elementBytes,
                        llvm::SmallVectorImpl<ReshardStep> &steps) const;

  func::FuncOp function;
  const cost::DeviceMesh &mesh;
  const cost::Cluster &cluster;
  const MeshSearchOptions &options;
  cost::DeviceMesh singleDevice;
  llvm::DenseSet<Value> needsGradient;
  /// Bytes per bucket of the coalesced parameter-state collectives.
  double bucketBytes = 0;
  /// Elements of the model's trainable parameters.
  int64_t trainableElements = 0;
};

std::vector<ShardingStrategy> ProblemBuilder::opStrategies(Operation *op) {
  StrategyContext context;
  context.cluster = &cluster;
  context.training = options.training;
  context.needsGradient = &needsGradient;
  if (mesh.axes.empty()) {
    context.mesh = &singleDevice;
    std::vector<ShardingStrategy> list = enumerateStrategies(op, context);
    list.resize(1);
    list[0].communicationTime = 0;
    return list;
  }

  context.mesh = &mesh;
  std::vector<std::vector<ShardingStrategy>> perAxis;
  for (unsigned axis = 0; axis < mesh.axes.size(); ++axis) {
    context.axis = axis;
    perAxis.push_back(enumerateStrategies(op, context));
  }
  double replicatedTime = perAxis[0][0].computeTime;

  std::vector<ShardingStrategy> combined;
  std::vector<unsigned> index(mesh.axes.size(), 0);
  while (true) {
    ShardingStrategy strategy;
    const ShardingStrategy &first = perAxis[0][0];
    for (const TensorLayout &layout : first.operandLayouts)
      strategy.operandLayouts.push_back(TensorLayout::replicated(layout.rank()));
    for (const TensorLayout &layout : first.resultLayouts)
      strategy.resultLayouts.push_back(TensorLayout::replicated(layout.rank()));
    strategy.gradientPartialAxes.assign(op->getNumOperands(), 0);
    strategy.parameterGradientTime.assign(op->getNumOperands(), 0.0);
    double factor = 1;
    bool valid = true;
    std::string name;
    auto merge = [&](llvm::MutableArrayRef<TensorLayout> into,
                     llvm::ArrayRef<TensorLayout> from, unsigned axis) {
      for (auto [target, source] : llvm::zip_equal(into, from)) {
        for (unsigned dim = 0; dim < source.rank(); ++dim)
          if (source.dimAxes[dim] == static_cast<int>(axis)) {
            if (target.dimAxes[dim] != kUnsplit)
              valid = false;
            target.dimAxes[dim] = static_cast<int>(axis);
          }
        if (source.isPartialOver(axis)) {
          target.partialAxes.push_back(axis);
          llvm::sort(target.partialAxes);
        }
      }
    };
    for (unsigned axis = 0; axis < mesh.axes.size() && valid; ++axis) {
      const ShardingStrategy &part = perAxis[axis][index[axis]];
      merge(strategy.operandLayouts, part.operandLayouts, axis);
      merge(strategy.resultLayouts, part.resultLayouts, axis);
      if (perAxis[axis][0].computeTime > 0)
        factor *= part.computeTime / perAxis[axis][0].computeTime;
      for (auto [mask, partMask] :
           llvm::zip(strategy.gradientPartialAxes, part.gradientPartialAxes))
        mask |= partMask;
      if (part.name != "replicated")
        name += (name.empty() ? "" : ", ") + mesh.axes[axis].name + ": " +
                part.name;
    }
    if (valid) {
      strategy.name = name.empty() ? "replicated" : name;
      strategy.computeTime = replicatedTime * factor;
      // Activation gradients read whole while the work is divided are
      // all-reduced over each such axis (Megatron's `f`); a parameter's are
      // priced on its edges.
      for (auto [operandIndex, operand] : llvm::enumerate(op->getOperands())) {
        unsigned mask = strategy.gradientPartialAxes[operandIndex];
        if (!mask || operand.getDefiningOp<tess::ParameterOp>() ||
            !isStatic(operand))
          continue;
        double bytes = strategy.operandLayouts[operandIndex].localElements(
                           shapeOf(operand), mesh) *
                       elementBytes(operand);
        for (unsigned axis = 0; axis < mesh.axes.size(); ++axis)
          if ((mask >> axis) & 1u) {
            ReshardStep step;
            step.axis = axis;
            step.collective = cost::Collective::AllReduce;
            step.bytes = bytes;
            step.time = cost::axisCollectiveTime(mesh, cluster, axis,
                                                 step.collective, bytes);
            strategy.communicationTime += step.time;
            strategy.collectives.push_back(step);
          }
      }
      combined.push_back(std::move(strategy));
    }
    unsigned axis = 0;
    while (axis < index.size() && ++index[axis] == perAxis[axis].size())
      index[axis++] = 0;
    if (axis == index.size())
      break;
  }
  return combined;
}

double ProblemBuilder::zeroTwoRingPerElement(int64_t group) const {
  // Analysis/StepMemory.h's ring of a run of the whole model's gradients,
  // shared by each of them: a place and a block per element while they fit
  // a bucket (the step writes every ZeRO-2 gradient whole), less in a
  // model larger than one bucket.
  if (trainableElements <= 0)
    return 0;
  TrainingStateBytes::ZeroTwoRing ring =
      TrainingStateBytes::zeroTwoRing(trainableElements, group);
  return static_cast<double>(ring.placeElements + ring.blockElements) /
         static_cast<double>(trainableElements);
}

double ProblemBuilder::allGatherChain(
    TensorLayout from, llvm::ArrayRef<int64_t> shape, double elementBytes,
    llvm::SmallVectorImpl<ReshardStep> &steps) const {
  double time = 0;
  for (unsigned axis = 0; axis < mesh.axes.size(); ++axis) {
    int dim = from.dimSplitOver(axis);
    if (dim == kUnsplit)
      continue;
    from.dimAxes[dim] = kUnsplit;
    ReshardStep step;
    step.axis = axis;
    step.collective = cost::Collective::AllGather;
    step.bytes = from.localElements(shape, mesh) * elementBytes;
    step.time = bucketedCollectiveTime(mesh, cluster, axis, step.collective,
                                       step.bytes, bucketBytes);
    time += step.time;
    steps.push_back(step);
  }
  return time;
}

std::vector<ShardingStrategy>
ProblemBuilder::parameterStrategies(tess::ParameterOp parameter,
                                    llvm::ArrayRef<TensorLayout> wanted) {
  Value result = parameter.getResult();
  std::vector<ShardingStrategy> strategies;
  if (!isStatic(result)) {
    ShardingStrategy strategy;
    strategy.name = "replicated";
    strategy.resultLayouts.push_back(TensorLayout::replicated(0));
    strategy.zeroStage = 0;
    return {strategy};
  }
  llvm::ArrayRef<int64_t> shape = shapeOf(result);
  std::vector<const ShardPin *> pins = pinsOf(parameter);
  std::optional<int> forcedStage = options.zeroStage;
  std::optional<TensorLayout> forcedLayout;
  for (const ShardPin *pin : pins) {
    if (pin->zeroStage)
      forcedStage = pin->zeroStage;
    if (pin->layout)
      forcedLayout = pin->layout;
  }

  // The layouts worth storing: each one a consumer reads (less a partial
  // sum, which a stored weight gives for free), and replicated.
  std::vector<TensorLayout> layouts = {TensorLayout::replicated(shape.size())};
  for (TensorLayout layout : wanted) {
    layout.partialAxes.clear();
    if (!llvm::is_contained(layouts, layout))
      layouts.push_back(layout);
  }
  if (forcedLayout) {
    if (!fitsShape(*forcedLayout, shape, mesh))
      return {};
    layouts = {*forcedLayout};
  }

  bool trainable = parameter.getTrainable();
  // A table that only lookups read is read as its master: mixed precision
  // looks its rows up in the f32 table and casts only them
  // (tess-look-up-before-cast), so the driver keeps no compute copy of it
  // (TrainingStateBytes::masterReadWeights).
  bool readAsMaster = tess::readOnlyByLookups(result);
  double computeBytes = options.computeWeightBytes > 0 && !readAsMaster
                            ? options.computeWeightBytes
                            : 4.0;
  for (const TensorLayout &layout : layouts) {
    // ZeRO shards over the axes the layout leaves the weight whole on, each
    // on the first free dim it divides.
    TensorLayout sharded = layout;
    llvm::SmallVector<unsigned, 2> zeroAxes;
    for (unsigned axis = 0; axis < mesh.axes.size(); ++axis) {
      if (mesh.axes[axis].size <= 1 || layout.dimSplitOver(axis) != kUnsplit)
        continue;
      for (unsigned dim = 0; dim < shape.size(); ++dim)
        if (sharded.dimAxes[dim] == kUnsplit &&
            shape[dim] % mesh.axes[axis].size == 0) {
          sharded.dimAxes[dim] = static_cast<int>(axis);
          zeroAxes.push_back(axis);
          break;
        }
    }
    double local = layout.localElements(shape, mesh);
    double shard = sharded.localElements(shape, mesh);
    int64_t group = 1;
    for (unsigned axis : zeroAxes)
      group *= mesh.axes[axis].size;
    llvm::SmallVector<int, 4> stages = {0, 1, 2, 3};
    if (!trainable || zeroAxes.empty())
      stages = {trainable && forcedStage ? *forcedStage : 0};
    else if (forcedStage)
      stages = {*forcedStage};
    for (int stage : stages) {
      bool sharding = stage > 0 && !zeroAxes.empty();
      ShardingStrategy strategy;
      strategy.zeroStage = stage;
      strategy.name = layout.print(mesh) + " ZeRO-" + std::to_string(stage);
      if (!trainable)
        strategy.name = layout.print(mesh) + " (not trained)";
      strategy.resultLayouts.push_back(stage == 3 && sharding ? sharded
                                                              : layout);
      if (sharding)
        strategy.zeroAxes = zeroAxes;
      ShardingStrategy::ParameterBytes &bytes = strategy.parameterBytes;
      if (!trainable) {
        bytes.masterWeights = local * elementBytes(result);
      } else {
        double stateElements = sharding ? shard : local;
        bytes.masterWeights = 4 * stateElements;
        bytes.optimizerState = 8 * stateElements;
        bytes.gradients =
            options.gradientBytes * (stage >= 2 && sharding ? shard : local);
        // ZeRO-2 keeps the shard, and the step writes the whole gradient
        // into the driver's ring, where it waits for the reduce-scatter (a
        // partial sum) or the slice (a gradient the step returns whole)
        // alike: its place there and a reduced block of it, a share of a
        // ring holding at most a bucket of the model's gradients.
        if (stage == 2 && sharding)
          bytes.gradients +=
              options.gradientBytes * local * zeroTwoRingPerElement(group);
        // Without a compute copy (fp32) the master is the compute weight,
        // unless ZeRO shards the master: then a whole copy is kept too.
        if (options.computeWeightBytes > 0 && !readAsMaster)
          bytes.computeWeights = options.computeWeightBytes *
                                 (stage == 3 && sharding ? shard : local);
        else if (sharding && stage < 3)
          bytes.computeWeights = 4 * local;
        strategy.gradientLayout = sharding ? sharded : layout;
        strategy.computeTime =
            options.optimizerSecondsPerElement * stateElements +
            1e-9 * stage; // the lowest stage wins a tie
        if (sharding && stage < 3)
          strategy.communicationTime = allGatherChain(
              sharded, shape, computeBytes, strategy.collectives);
      }
      strategy.memoryBytes = bytes.masterWeights + bytes.computeWeights +
                             bytes.gradients + bytes.optimizerState;
      strategies.push_back(std::move(strategy));
    }
  }
  return strategies;
}

/// Whether the head's logits of `shape` in `layout` have their classes
/// split: the loss is then vocabulary-parallel.
bool splitsClasses(llvm::ArrayRef<int64_t> shape, const TensorLayout &layout) {
  return !shape.empty() && layout.dimAxes.back() != kUnsplit;
}

/// The loss's temporaries over the head's logits `value` in `layout` at
/// the step's peak (PlanPrediction::transientBytes): where the fused loss
/// reads whole classes, the logits' gradient, at most a --logits-block;
/// where the classes are split, the vocabulary-parallel loss's f32 blocks
/// and target mask. 0 without the calibration's split of the peak.
double headLogitsBytes(mlir::Value value, const TensorLayout &layout,
                       const cost::DeviceMesh &mesh,
                       const MeshSearchOptions &options) {
  if (options.activationSavedBytes <= 0 || !isStatic(value))
    return 0;
  llvm::ArrayRef<int64_t> shape = shapeOf(value);
  double elements = layout.localElements(shape, mesh);
  if (splitsClasses(shape, layout))
    return elements * (VocabularyParallelLoss::kWorkingBytesPerElement +
                       VocabularyParallelLoss::kTargetMaskBytesPerElement);
  double logits = elements * (options.computeWeightBytes > 0
                                  ? options.computeWeightBytes
                                  : 4.0);
  return options.logitsBlockBytes > 0
             ? std::min(logits, options.logitsBlockBytes)
             : logits;
}

llvm::Expected<MeshShardingProblem> ProblemBuilder::build() {
  auto fail = [&](const llvm::Twine &why) {
    return searchError("cannot plan the sharding of @" +
                       function.getSymName() + ": " + why);
  };
  if (!llvm::hasSingleElement(function.getBody()))
    return fail("the function must have exactly one block");
  Block &body = function.getBody().front();
  for (Operation &op : body)
    if (op.getNumRegions() != 0)
      return fail("op '" + op.getName().getStringRef() +
                  "' has regions, which the search does not handle");
  if (options.training)
    needsGradient = valuesNeedingGradient(body);
  // A bucket holds at most the whole model's gradient.
  for (auto parameter : body.getOps<tess::ParameterOp>())
    if (parameter.getTrainable() && isStatic(parameter.getResult()))
      trainableElements +=
          llvm::cast<RankedTensorType>(parameter.getResult().getType())
              .getNumElements();
  bucketBytes =
      std::min(options.gradientBucketBytes,
               static_cast<double>(trainableElements) * options.gradientBytes);

  // Every pin must match some parameter.
  for (const ShardPin &pin : options.pins) {
    bool matched = false;
    for (auto parameter : body.getOps<tess::ParameterOp>())
      matched |= pin.pattern->match(parameter.getName());
    if (!matched)
      return searchError("--shard '" + pin.text +
                         "': the regex matches no parameter name");
  }

  MeshShardingProblem result;
  if (options.reuseLayers)
    result.layers = findRepeatedLayers(function, [&](tess::ParameterOp p) {
      std::string indices;
      for (auto [index, pin] : llvm::enumerate(options.pins))
        if (pin.pattern->match(p.getName()))
          indices += std::to_string(index) + ",";
      return indices;
    });
  ShardingProblem &problem = result.problem;
  problem.mesh = &mesh;
  problem.cluster = &cluster;
  problem.training = options.training;
  problem.needsGradient = needsGradient;
  problem.resultsFeedLoss = options.training && options.lossReadsResults;
  problem.gradientBucketBytes = bucketBytes;

  // Nodes: ops that stand for themselves, in program order.
  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    ++result.functionOps;
    if (result.layers.representative(&op) != &op)
      continue;
    result.nodeOf[&op] = problem.nodes.size();
    ShardingNode node;
    node.op = &op;
    auto place = result.layers.placeOf.find(&op);
    std::string layer;
    if (place != result.layers.placeOf.end()) {
      const LayerRun &run = result.layers.runs[place->second.run];
      node.count = static_cast<double>(run.instances.size());
      layer = run.describe();
    }
    problem.nodes.push_back(std::move(node));
    result.layerOfNode.push_back(layer);
  }
  for (Operation &op : body)
    if (!op.hasTrait<OpTrait::IsTerminator>() && !result.nodeOf.count(&op))
      result.nodeOf[&op] = result.nodeOf.lookup(result.layers.representative(&op));

  // Op strategies (with the pins on the ops reading pinned parameters),
  // then the parameters', which depend on what their readers want.
  double replicatedCompute = 0, replicatedActivations = 0;
  for (ShardingNode &node : problem.nodes) {
    Operation *op = node.op;
    if (llvm::isa<tess::ParameterOp>(op))
      continue;
    node.strategies = opStrategies(op);
    for (Value operand : op->getOperands()) {
      auto parameter = operand.getDefiningOp<tess::ParameterOp>();
      if (!parameter)
        continue;
      for (const ShardPin *pin : pinsOf(parameter)) {
        if (!pin->opKind)
          continue;
        llvm::erase_if(node.strategies, [&](const ShardingStrategy &s) {
          return !satisfiesKind(op, s, *pin->opKind);
        });
        if (node.strategies.empty())
          return searchError("--shard '" + pin->text + "': no strategy of " +
                             op->getName().getStringRef() + " (reading '" +
                             parameter.getName() + "') is " + *pin->opKind +
                             " on mesh " + mesh.describe());
      }
    }
    for (ShardingStrategy &strategy : node.strategies) {
      if (llvm::isa<tess::ReshapeOp>(op))
        continue; // a view
      for (auto [value, layout] :
           llvm::zip_equal(op->getResults(), strategy.resultLayouts))
        if (isStatic(value) &&
            llvm::isa<FloatType>(
                llvm::cast<RankedTensorType>(value.getType()).getElementType()))
          strategy.memoryBytes +=
              layout.localElements(shapeOf(value), mesh) * elementBytes(value);
    }
    // Pins may have removed the replicated strategy; the scales use the
    // unpinned replicated prices.
    std::vector<ShardingStrategy> unpinned = opStrategies(op);
    replicatedCompute += node.count * unpinned[0].computeTime;
    if (!llvm::isa<tess::ReshapeOp>(op))
      for (Value value : op->getResults())
        if (isStatic(value) &&
            llvm::isa<FloatType>(
                llvm::cast<RankedTensorType>(value.getType()).getElementType()))
          replicatedActivations += node.count * tensorBytes(value);
  }
  double computeScale = options.trainingComputeSeconds > 0 && replicatedCompute > 0
                            ? options.trainingComputeSeconds / replicatedCompute
                            : 1.0;
  // The ops' activations scale to what the one-device step keeps for the
  // backward; its temporaries on top of that are priced apart, in the
  // plan's share (expandPlan).
  double keptBytes = options.activationSavedBytes > 0
                         ? std::min(options.activationSavedBytes,
                                    options.activationPeakBytes)
                         : options.activationPeakBytes;
  double activationScale = keptBytes > 0 && replicatedActivations > 0
                               ? keptBytes / replicatedActivations
                               : 1.0;
  result.replicatedActivations = replicatedActivations * activationScale;
  if (options.activationSavedBytes > 0)
    result.layerTransientBytes = options.activationPeakBytes - keptBytes;
  for (ShardingNode &node : problem.nodes)
    for (ShardingStrategy &strategy : node.strategies) {
      strategy.computeTime *= computeScale;
      strategy.memoryBytes *= activationScale;
    }

  for (ShardingNode &node : problem.nodes) {
    auto parameter = llvm::dyn_cast<tess::ParameterOp>(node.op);
    if (!parameter)
      continue;
    std::vector<TensorLayout> wanted;
    for (OpOperand &use : parameter.getResult().getUses()) {
      Operation *user = use.getOwner();
      if (user->hasTrait<OpTrait::IsTerminator>())
        continue;
      const ShardingNode &reader = problem.nodes[result.nodeOf.lookup(user)];
      for (const ShardingStrategy &strategy : reader.strategies)
        wanted.push_back(strategy.operandLayouts[use.getOperandNumber()]);
    }
    node.strategies = parameterStrategies(parameter, wanted);
    if (node.strategies.empty())
      return searchError("--shard: the layout pinned for '" +
                         parameter.getName() + "' does not fit its shape");
  }

  // Edges: every use of the function, mapped onto the nodes and counted.
  std::map<std::tuple<int64_t, unsigned, int64_t, unsigned>, size_t> edgeOf;
  auto addUse = [&](Value value, std::optional<unsigned> consumer,
                    unsigned operandIndex) {
    std::optional<unsigned> producer;
    unsigned resultIndex = 0;
    int64_t producerKey;
    if (auto opResult = llvm::dyn_cast<OpResult>(value)) {
      producer = result.nodeOf.lookup(opResult.getOwner());
      resultIndex = opResult.getResultNumber();
      producerKey = *producer;
    } else {
      producerKey = -1 - llvm::cast<BlockArgument>(value).getArgNumber();
    }
    if (!producer && !consumer)
      return;
    auto key = std::make_tuple(producerKey, resultIndex,
                               consumer ? static_cast<int64_t>(*consumer) : -1,
                               operandIndex);
    auto [entry, inserted] = edgeOf.try_emplace(key, problem.edges.size());
    if (!inserted) {
      problem.edges[entry->second].count += 1;
      return;
    }
    ShardingEdge edge;
    edge.value = value;
    edge.producer = producer;
    edge.resultIndex = resultIndex;
    edge.consumer = consumer;
    edge.operandIndex = operandIndex;
    problem.edges.push_back(std::move(edge));
  };
  for (Operation &op : body) {
    std::optional<unsigned> consumer;
    if (!op.hasTrait<OpTrait::IsTerminator>())
      consumer = result.nodeOf.lookup(&op);
    for (OpOperand &use : op.getOpOperands())
      addUse(use.get(), consumer, use.getOperandNumber());
  }
  for (ShardingEdge &edge : problem.edges) {
    if (isStatic(edge.value))
      priceEdge(problem, edge);
    else
      edge.reshardTime.assign(
          edge.producer ? problem.nodes[*edge.producer].strategies.size() : 1,
          std::vector<double>(
              edge.consumer ? problem.nodes[*edge.consumer].strategies.size()
                            : 1,
              0.0));
  }
  return result;
}

/// A ZeRO-1 or ZeRO-2 strategy: the step leaves its gradient pending over
/// its ZeRO axes for the driver's ZeRO (runtime/train/MeshZero.h).
bool isDriverZero(const ShardingStrategy &strategy) {
  return (strategy.zeroStage == 1 || strategy.zeroStage == 2) &&
         !strategy.zeroAxes.empty();
}

/// Whether the driver runs `choice`: its ZeRO-1/2 parameters all shard over
/// one group of axes it has a communicator for (tesserac's
/// requireRunnableOnMesh refuses any other plan).
bool driverRuns(const ShardingProblem &problem,
                llvm::ArrayRef<unsigned> choice) {
  const ShardingStrategy *first = nullptr;
  for (auto [node, chosen] : llvm::zip_equal(problem.nodes, choice)) {
    const ShardingStrategy &strategy = node.strategies[chosen];
    if (!isDriverZero(strategy))
      continue;
    if (!driverHasZeroGroup(strategy.zeroAxes, *problem.mesh))
      return false;
    if (first && first->zeroAxes != strategy.zeroAxes)
      return false;
    first = &strategy;
  }
  return true;
}

/// `problem` less the ZeRO-1/2 strategies over any group but `group`;
/// `kept[node]` maps each strategy left to its index in `problem`. None
/// when some node is left without a strategy.
std::optional<ShardingProblem>
restrictToZeroGroup(const ShardingProblem &problem,
                    llvm::ArrayRef<unsigned> group,
                    std::vector<std::vector<unsigned>> &kept) {
  ShardingProblem restricted = problem;
  kept.assign(problem.nodes.size(), {});
  for (auto [index, node] : llvm::enumerate(restricted.nodes)) {
    std::vector<ShardingStrategy> strategies;
    for (auto [original, strategy] : llvm::enumerate(node.strategies)) {
      if (isDriverZero(strategy) &&
          llvm::ArrayRef<unsigned>(strategy.zeroAxes) != group)
        continue;
      kept[index].push_back(original);
      strategies.push_back(strategy);
    }
    if (strategies.empty())
      return std::nullopt;
    node.strategies = std::move(strategies);
  }
  for (ShardingEdge &edge : restricted.edges) {
    std::vector<std::vector<double>> time = edge.reshardTime;
    if (edge.producer) {
      time.clear();
      for (unsigned from : kept[*edge.producer])
        time.push_back(edge.reshardTime[from]);
    }
    if (edge.consumer)
      for (std::vector<double> &row : time) {
        std::vector<double> columns;
        for (unsigned to : kept[*edge.consumer])
          columns.push_back(row[to]);
        row = std::move(columns);
      }
    edge.reshardTime = std::move(time);
  }
  return restricted;
}

/// The fastest plan (of those that fit) the driver runs: searched once per
/// group of axes the driver can shard ZeRO-1/2 over, with the other groups'
/// ZeRO-1/2 strategies removed, as indices into `problem`. None when no
/// group leaves a plan that fits.
std::optional<ShardingPlan> searchOneZeroGroup(const ShardingProblem &problem,
                                               double timeLimitSeconds) {
  std::vector<llvm::SmallVector<unsigned, 2>> groups;
  for (const ShardingNode &node : problem.nodes)
    for (const ShardingStrategy &strategy : node.strategies)
      if (isDriverZero(strategy) &&
          driverHasZeroGroup(strategy.zeroAxes, *problem.mesh) &&
          !llvm::is_contained(groups, strategy.zeroAxes))
        groups.push_back(strategy.zeroAxes);
  // No group the driver has: the plans without ZeRO-1/2.
  if (groups.empty())
    groups.emplace_back();
  llvm::sort(groups);
  std::optional<ShardingPlan> best;
  bool allProven = true;
  for (const llvm::SmallVector<unsigned, 2> &group : groups) {
    std::vector<std::vector<unsigned>> kept;
    std::optional<ShardingProblem> restricted =
        restrictToZeroGroup(problem, group, kept);
    if (!restricted)
      continue;
    ShardingPlan plan = searchIntraOp(*restricted, timeLimitSeconds);
    allProven = allProven && plan.provenOptimal;
    if (!restricted->fitsMemory(plan.choice))
      continue;
    for (auto [node, chosen] : llvm::enumerate(plan.choice))
      chosen = kept[node][chosen];
    if (!best || plan.time < best->time)
      best = std::move(plan);
  }
  if (best)
    best->provenOptimal = best->provenOptimal && allProven;
  return best;
}

/// Adds `steps` times `count` to the prediction.
void addCollectives(PlanPrediction &predicted,
                    llvm::ArrayRef<ReshardStep> steps, double count) {
  for (const ReshardStep &step : steps) {
    size_t kind = static_cast<size_t>(step.collective);
    predicted.collectiveSeconds[kind] += count * step.time;
    predicted.collectiveBytes[kind] += count * step.bytes;
  }
}

/// The arena's temporaries at the plan's peak on top of its kept
/// activations (PlanPrediction::transientBytes): the one-device step's
/// layer temporaries in the share of the activations the plan keeps, or
/// the head's, whichever is larger. The head's are the loss's over its
/// logits (headLogitsBytes) and, beside the fused loss's gradient, the
/// parameters the head all-gathers for its backward and, when the head
/// runs in blocks of logits, the weight gradient those blocks add into.
/// The search's bound holds the layers' in their least share only: the
/// decisions that check its plans against their compiled ranks
/// (tessera/Transforms/MeshPlan.h) correct it by what it missed.
void setTransient(PlanPrediction &predicted, func::FuncOp function,
                  const TrainingShardingPlan &plan,
                  const MeshShardingProblem &reduced,
                  const MeshSearchOptions &options) {
  if (reduced.layerTransientBytes <= 0 || reduced.replicatedActivations <= 0)
    return;
  const cost::DeviceMesh &mesh = plan.mesh;
  double computeBytes =
      options.computeWeightBytes > 0 ? options.computeWeightBytes : 4.0;
  double logits = 0, beside = 0;
  Operation *terminator = function.getBody().front().getTerminator();
  for (Value value : terminator->getOperands()) {
    auto opResult = llvm::dyn_cast<OpResult>(value);
    const OpSharding *head =
        opResult ? plan.find(opResult.getOwner()) : nullptr;
    if (!head)
      continue;
    const TensorLayout &layout =
        head->resultLayouts[opResult.getResultNumber()];
    double blockBytes = headLogitsBytes(value, layout, mesh, options);
    logits += blockBytes;
    if (splitsClasses(shapeOf(value), layout))
      continue; // the vocabulary-parallel loss peaks after the gathers
    // A head cut into blocks of logits adds each block's weight gradient
    // into one: that sum is live beside every block.
    if (blockBytes <
        layout.localElements(shapeOf(value), mesh) * computeBytes)
      for (auto [operand, operandLayout] : llvm::zip(
               opResult.getOwner()->getOperands(), head->operandLayouts))
        if (operand.getDefiningOp<tess::ParameterOp>() && isStatic(operand))
          beside += operandLayout.localElements(shapeOf(operand), mesh) *
                    options.gradientBytes;
    for (const PlannedTransfer &transfer : plan.transfers) {
      if (transfer.consumer != opResult.getOwner() ||
          !transfer.value.getDefiningOp<tess::ParameterOp>() ||
          !isStatic(transfer.value))
        continue;
      bool gathers = llvm::any_of(
          transfer.collectives.steps, [](const ReshardStep &step) {
            return step.collective == cost::Collective::AllGather;
          });
      if (gathers)
        beside += transfer.to.localElements(shapeOf(transfer.value), mesh) *
                  computeBytes;
    }
  }
  double layers = reduced.layerTransientBytes * predicted.activations /
                  reduced.replicatedActivations;
  double layersInBound =
      reduced.layerTransientBytes / static_cast<double>(mesh.deviceCount());
  predicted.transientBytes = std::max(layers, logits + beside);
  predicted.boundTransientBytes = layersInBound;
}

TrainingShardingPlan expandPlan(func::FuncOp function,
                                const MeshShardingProblem &reduced,
                                const ShardingPlan &solution,
                                const MeshSearchOptions &options) {
  const ShardingProblem &problem = reduced.problem;
  TrainingShardingPlan plan;
  plan.mesh = *problem.mesh;
  Block &body = function.getBody().front();
  auto strategyOf = [&](Operation *op) -> const ShardingStrategy & {
    unsigned node = reduced.nodeOf.lookup(op);
    return problem.nodes[node].strategies[solution.choice[node]];
  };

  std::optional<int> commonStage;
  bool mixed = false;
  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    const ShardingStrategy &strategy = strategyOf(&op);
    OpSharding entry;
    entry.op = &op;
    entry.strategy = strategy.name;
    entry.operandLayouts = strategy.operandLayouts;
    entry.resultLayouts = strategy.resultLayouts;
    auto place = reduced.layers.placeOf.find(&op);
    if (place != reduced.layers.placeOf.end())
      entry.layer = reduced.layers.runs[place->second.run]
                        .instances[place->second.instance]
                        .name;
    plan.opIndex[&op] = plan.ops.size();
    plan.ops.push_back(std::move(entry));
    if (auto parameter = llvm::dyn_cast<tess::ParameterOp>(op)) {
      ParameterSharding state;
      state.op = &op;
      state.name = parameter.getName().str();
      state.computeLayout = strategy.resultLayouts[0];
      state.stateLayout = strategy.gradientLayout ? *strategy.gradientLayout
                                                  : strategy.resultLayouts[0];
      state.zeroStage = std::max(strategy.zeroStage, 0);
      state.zeroAxes = strategy.zeroAxes;
      if (parameter.getTrainable()) {
        if (commonStage && *commonStage != state.zeroStage)
          mixed = true;
        commonStage = state.zeroStage;
      }
      plan.parameters.push_back(std::move(state));
    }
  }
  plan.zeroStage = mixed ? -1 : commonStage.value_or(0);

  // Transfers, use by use.
  for (Operation &op : body)
    for (OpOperand &use : op.getOpOperands()) {
      ShardingEdge edge;
      edge.value = use.get();
      if (auto opResult = llvm::dyn_cast<OpResult>(use.get())) {
        edge.producer = reduced.nodeOf.lookup(opResult.getOwner());
        edge.resultIndex = opResult.getResultNumber();
      }
      if (!op.hasTrait<OpTrait::IsTerminator>())
        edge.consumer = reduced.nodeOf.lookup(&op);
      edge.operandIndex = use.getOperandNumber();
      ReshardPlan collectives = problem.edgeReshard(edge, solution.choice);
      if (op.hasTrait<OpTrait::IsTerminator>())
        plan.resultLayouts.push_back(
            problem.requiredLayout(edge, solution.choice));
      if (collectives.steps.empty())
        continue;
      PlannedTransfer transfer;
      transfer.value = use.get();
      transfer.consumer = edge.consumer ? &op : nullptr;
      transfer.operandIndex = edge.operandIndex;
      transfer.from = problem.producedLayout(edge, solution.choice);
      transfer.to = problem.requiredLayout(edge, solution.choice);
      transfer.collectives = std::move(collectives);
      plan.transfers.push_back(std::move(transfer));
    }

  // The prediction, from the solved problem (counts stand for the layers).
  PlanPrediction &predicted = plan.predicted;
  for (auto [node, choice] : llvm::zip_equal(problem.nodes, solution.choice)) {
    const ShardingStrategy &strategy = node.strategies[choice];
    addCollectives(predicted, strategy.collectives, node.count);
    if (auto parameter = llvm::dyn_cast<tess::ParameterOp>(node.op)) {
      const ShardingStrategy::ParameterBytes &bytes = strategy.parameterBytes;
      predicted.optimizerSeconds +=
          node.count * (strategy.computeTime - 1e-9 * strategy.zeroStage);
      if (!parameter.getTrainable()) {
        predicted.inputsAndBuffers += node.count * bytes.masterWeights;
        continue;
      }
      predicted.masterWeights += node.count * bytes.masterWeights;
      predicted.computeWeights += node.count * bytes.computeWeights;
      predicted.gradients += node.count * bytes.gradients;
      predicted.optimizerState += node.count * bytes.optimizerState;
    } else {
      predicted.computeSeconds += node.count * strategy.computeTime;
      predicted.activations += node.count * strategy.memoryBytes;
    }
  }
  for (const ShardingEdge &edge : problem.edges)
    addCollectives(predicted, problem.edgeReshard(edge, solution.choice).steps,
                   edge.count);
  predicted.inputsAndBuffers += options.fixedMemoryBytes;
  setTransient(predicted, function, plan, reduced, options);

  plan.search.method = solution.method == PlanMethod::Ilp ? "ilp" : "greedy";
  plan.search.provenOptimal = solution.provenOptimal;
  plan.search.solvedNodes = problem.nodes.size();
  plan.search.solvedEdges = problem.edges.size();
  plan.search.functionOps = reduced.functionOps;
  for (const LayerRun &run : reduced.layers.runs)
    plan.search.reusedLayers.emplace_back(run.describe(), run.instances.size());
  return plan;
}

} // namespace

bool sharding::driverHasZeroGroup(llvm::ArrayRef<unsigned> axes,
                                  const cost::DeviceMesh &mesh) {
  return axes.size() == 1 || axes.size() == mesh.axes.size();
}

llvm::Expected<MeshShardingProblem>
sharding::buildMeshShardingProblem(func::FuncOp function,
                                   const cost::DeviceMesh &mesh,
                                   const cost::Cluster &cluster,
                                   const MeshSearchOptions &options) {
  return ProblemBuilder(function, mesh, cluster, options).build();
}

llvm::Expected<TrainingShardingPlan>
sharding::searchTrainingSharding(func::FuncOp function,
                                 const cost::DeviceMesh &mesh,
                                 const cost::Cluster &cluster,
                                 const MeshSearchOptions &options) {
  auto start = std::chrono::steady_clock::now();
  llvm::Expected<MeshShardingProblem> reduced =
      buildMeshShardingProblem(function, mesh, cluster, options);
  if (!reduced)
    return reduced.takeError();
  ShardingProblem &problem = reduced->problem;

  auto tooSmall = [&](llvm::StringRef why) {
    double least =
        problem.minimumMemory() + options.fixedMemoryBytes +
        reduced->layerTransientBytes / static_cast<double>(mesh.deviceCount());
    return searchError(llvm::formatv(
        "no sharding plan fits {0} per device on mesh {1}{2}: the "
        "smallest plan the search can build needs {3} per device "
        "(parameters, gradients, optimizer state and activations); raise "
        "--memory-limit or use more devices",
        memoryText(*options.memoryLimitBytes), mesh.describe(), why,
        memoryText(least)));
  };
  if (options.memoryLimitBytes) {
    // The bound holds the layers' temporaries in their least share, one
    // device's (PlanPrediction::boundTransientBytes).
    problem.memoryLimit =
        *options.memoryLimitBytes - options.fixedMemoryBytes -
        reduced->layerTransientBytes / static_cast<double>(mesh.deviceCount());
    if (problem.minimumMemory() > *problem.memoryLimit)
      return tooSmall("");
  }

  ShardingPlan solution = searchIntraOp(problem, options.timeLimitSeconds);
  // The driver shards every ZeRO-1/2 parameter over one group of axes; a
  // plan mixing groups is searched again one group at a time.
  if (!driverRuns(problem, solution.choice))
    if (std::optional<ShardingPlan> runnable =
            searchOneZeroGroup(problem, options.timeLimitSeconds))
      solution = std::move(*runnable);
  if (!problem.fitsMemory(solution.choice))
    return tooSmall(" within --search-timeout (the greedy fallback found "
                    "none)");
  TrainingShardingPlan plan =
      expandPlan(function, *reduced, solution, options);
  plan.search.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return plan;
}

const OpSharding *TrainingShardingPlan::find(Operation *op) const {
  auto found = opIndex.find(op);
  return found == opIndex.end() ? nullptr : &ops[found->second];
}

TensorLayout TrainingShardingPlan::layoutOf(Value value) const {
  if (auto opResult = llvm::dyn_cast<OpResult>(value))
    if (const OpSharding *entry = find(opResult.getOwner()))
      return entry->resultLayouts[opResult.getResultNumber()];
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  return TensorLayout::replicated(type ? type.getRank() : 0);
}

double PlanPrediction::communicationSeconds() const {
  double total = 0;
  for (double seconds : collectiveSeconds)
    total += seconds;
  return total;
}

void sharding::setPlanningPrecision(func::FuncOp function, Type computeType) {
  auto retype = [&](Value value) {
    auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
    if (type && type.getElementType().isF32())
      value.setType(type.clone(computeType));
  };
  for (BlockArgument argument : function.getArguments())
    retype(argument);
  function.walk([&](Operation *op) {
    for (Value result : op->getResults())
      retype(result);
  });
}
