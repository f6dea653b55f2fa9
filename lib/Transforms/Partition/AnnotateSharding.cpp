//===- AnnotateSharding.cpp - tess-annotate-sharding ---------------------===//
//
// Forced plans (DP, Megatron TP, DP x TP) for @forward_backward, written as
// PlanAnnotation.h's attributes. The plan seeds the layouts of the
// arguments (tokens over dp, Megatron's weights over tp), forces attention
// heads over tp, and propagates everything else op by op with
// LayoutChoice.h, the rule the partitioner applies. See the pass's
// description in Passes.td for the rules.
//
//===----------------------------------------------------------------------===//

#include "LayoutChoice.h"
#include "PieceMajorRegion.h"

#include "tessera/Analysis/MegatronPartition.h"
#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace tessera {
#define GEN_PASS_DEF_ANNOTATESHARDING
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using namespace tessera::partition;
using sharding::kUnsplit;
using sharding::TensorLayout;

namespace {

struct AnnotateShardingPass
    : tessera::impl::AnnotateShardingBase<AnnotateShardingPass> {
  using AnnotateShardingBase::AnnotateShardingBase;

  void runOnOperation() override;

private:
  LogicalResult parseOptions();
  /// Megatron's weight layouts, by argument.
  void seedTensorParallel(func::FuncOp function,
                          llvm::DenseMap<Value, TensorLayout> &layouts);

  cost::DeviceMesh deviceMesh;
  /// A fused projection's split (GPT-2's q/k/v) whose producer's weight
  /// Megatron splits: piece-major where its region allows
  /// (PieceMajorRegion.h), else its parameters stay replicated and the
  /// pieces' readers slice their heads.
  /// `broken`: splits whose regions an earlier try's layouts resharded
  /// (their dims stay whole). Returns the decision (marked): the regions
  /// with their mesh axes, and the splits refused with why.
  PieceMajorDecision
  choosePieceMajor(func::FuncOp function,
                   llvm::DenseMap<Value, TensorLayout> &layouts,
                   const llvm::DenseMap<Operation *, std::string> &broken);

  /// The vocabulary-parallel tables' parameter names, whose gradients
  /// tess.embedding_grad computes as the rank's block of rows.
  llvm::StringSet<> vocabularyGradients;
  /// The LM heads over the vocabulary whose weight is a padded copy of a
  /// parameter (tess-build-training's vocabulary padding), by op.
  llvm::DenseSet<mlir::Operation *> paddedHeads;
  /// Axis indices, or -1 when the strategy does not use the axis (or it
  /// has one device).
  int dataAxis = -1, tensorAxis = -1;
};

LogicalResult AnnotateShardingPass::parseOptions() {
  ModuleOp module = getOperation();
  auto fail = [&](const Twine &message) {
    module.emitError("tess-annotate-sharding: ") << message;
    return failure();
  };
  llvm::Expected<cost::DeviceMesh> parsed = cost::parseMesh(mesh);
  if (!parsed)
    return fail(llvm::toString(parsed.takeError()));
  deviceMesh = std::move(*parsed);
  if (deviceMesh.axes.empty())
    return fail("needs a mesh, e.g. mesh=2x2");
  if (!axes.empty()) {
    if (axes.size() != deviceMesh.axes.size())
      return fail("axes names " + std::to_string(axes.size()) +
                  " axes of a mesh of " +
                  std::to_string(deviceMesh.axes.size()));
    for (auto [axis, name] : llvm::zip(deviceMesh.axes, axes))
      axis.name = name;
  }
  bool wantsData = strategy == "dp" || strategy == "dp-tp";
  bool wantsTensor = strategy == "tp" || strategy == "dp-tp";
  if (!wantsData && !wantsTensor)
    return fail("strategy must be dp, tp or dp-tp, got '" + strategy + "'");
  auto findAxis = [&](StringRef name, bool wanted, int &index) {
    index = deviceMesh.axisIndex(name);
    if (wanted && index < 0)
      return fail("strategy " + strategy + " needs a mesh axis named '" +
                  name + "' (mesh " + deviceMesh.describe() + ")");
    if (!wanted || deviceMesh.axes[index].size == 1)
      index = -1;
    return success();
  };
  if (failed(findAxis("dp", wantsData, dataAxis)) ||
      failed(findAxis("tp", wantsTensor, tensorAxis)))
    return failure();
  return success();
}

void AnnotateShardingPass::seedTensorParallel(
    func::FuncOp function, llvm::DenseMap<Value, TensorLayout> &layouts) {
  int64_t size = deviceMesh.axes[tensorAxis].size;
  auto splitArgument = [&](Value weight, unsigned dim) {
    BlockArgument argument = parameterArgument(weight);
    if (!argument || layouts.count(argument))
      return;
    auto type = llvm::cast<RankedTensorType>(argument.getType());
    if (type.getDimSize(dim) % size != 0)
      return;
    layouts[argument] =
        TensorLayout::splitDim(type.getRank(), dim, tensorAxis);
  };
  MegatronPartition partition = megatronPartition(function);
  for (MegatronPartition::Block &block : partition.blocks) {
    splitArgument(block.row.getWeight(),
                  block.row.getTransposeWeight() ? 1 : 0);
    for (tess::LinearOp column : block.columns) {
      splitArgument(column.getWeight(), column.getTransposeWeight() ? 0 : 1);
      if (column.getBias())
        splitArgument(column.getBias(), 0);
    }
  }
  // An LM head over the vocabulary: its weight's output features (and
  // bias) over tp, so the logits arrive split over their classes.
  for (tess::LinearOp head : partition.vocabularyHeads) {
    unsigned classDim = head.getTransposeWeight() ? 0 : 1;
    splitArgument(head.getWeight(), classDim);
    if (head.getBias())
      splitArgument(head.getBias(), 0);
    if (partition.readsPaddedCopy(head) &&
        llvm::cast<RankedTensorType>(head.getWeight().getType())
                    .getDimSize(classDim) %
                size ==
            0)
      paddedHeads.insert(head);
  }
  // A vocabulary-parallel table: its rows over tp. The lookup's indexed
  // label follows the table (a partial sum over tp); its gradient is
  // computed as the rank's block of rows (vocabularyGradients).
  for (tess::EmbeddingOp lookup : partition.vocabularyLookups) {
    splitArgument(lookup.getTable(), 0);
    BlockArgument table = parameterArgument(lookup.getTable());
    if (auto found = layouts.find(table); found != layouts.end() &&
                                          found->second.dimAxes[0] ==
                                              tensorAxis)
      if (auto name = function.getArgAttrOfType<StringAttr>(
              table.getArgNumber(), "tess.parameter"))
        vocabularyGradients.insert(name.getValue());
  }
}

PieceMajorDecision AnnotateShardingPass::choosePieceMajor(
    func::FuncOp function, llvm::DenseMap<Value, TensorLayout> &layouts,
    const llvm::DenseMap<Operation *, std::string> &broken) {
  auto splitOn = [&](Value value, unsigned dim) {
    auto it = layouts.find(value);
    return it != layouts.end() && dim < it->second.rank() &&
           it->second.dimAxes[dim] == tensorAxis;
  };
  std::vector<PiecedSplit> splits;
  function.walk([&](tess::SplitOp split) {
    auto linear = split.getInput().getDefiningOp<tess::LinearOp>();
    BlockArgument weight =
        linear ? parameterArgument(linear.getWeight()) : BlockArgument();
    int64_t axis = static_cast<int64_t>(split.getAxis());
    int64_t rank = llvm::cast<RankedTensorType>(split.getInput().getType())
                       .getRank();
    if (weight && (axis == rank - 1 || axis == -1) &&
        splitOn(weight, linear.getTransposeWeight() ? 0 : 1))
      splits.push_back({split, static_cast<unsigned>(tensorAxis)});
  });
  PieceMajorDecision decision = decidePieceMajor(
      function, splits,
      [&](unsigned number, unsigned dim, unsigned) {
        return splitOn(function.getArgument(number), dim);
      },
      &broken);
  for (unsigned number : decision.wholeArguments)
    layouts.erase(function.getArgument(number));
  std::vector<std::string> axisNames;
  for (const cost::MeshAxis &axis : deviceMesh.axes)
    axisNames.push_back(axis.name);
  markPieceMajor(function, decision, axisNames);
  return decision;
}

void AnnotateShardingPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(parseOptions()))
    return signalPassFailure();
  auto function = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!function || function.isExternal()) {
    module.emitError("tess-annotate-sharding needs the @forward_backward of "
                     "tess-build-training");
    return signalPassFailure();
  }

  llvm::DenseMap<Value, TensorLayout> layouts;
  if (dataAxis >= 0) {
    int64_t size = deviceMesh.axes[dataAxis].size;
    for (BlockArgument argument : function.getArguments()) {
      auto role = function.getArgAttrOfType<StringAttr>(
          argument.getArgNumber(), "tess.input");
      if (!role || (role.getValue() != "input_ids" &&
                    role.getValue() != "targets"))
        continue;
      auto type = llvm::cast<RankedTensorType>(argument.getType());
      if (type.getRank() < 1 || type.getDimSize(0) % size != 0) {
        function.emitError("tess-annotate-sharding: the batch of ")
            << role << " " << type << " does not divide by dp = " << size;
        return signalPassFailure();
      }
      layouts[argument] = TensorLayout::splitDim(type.getRank(), 0, dataAxis);
    }
  }
  if (tensorAxis >= 0)
    seedTensorParallel(function, layouts);

  auto layoutOf = [&](Value value) {
    auto it = layouts.find(value);
    if (it != layouts.end())
      return it->second;
    auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
    return TensorLayout::replicated(type ? type.getRank() : 0);
  };
  // Propagation, piece-major regions first decided: a try whose layouts
  // would reshard a region (read or write its dim other than split over
  // tp) is redone with that region's dim whole; each try refuses at least
  // one more split.
  // The lookups' gradients the step returns as a vocabulary-parallel
  // table's: their rows over tp.
  llvm::DenseSet<Operation *> rowBlockGradients;
  Operation *returnOp = function.getBody().front().getTerminator();
  for (OpOperand &returned : returnOp->getOpOperands()) {
    auto name = function.getResultAttrOfType<StringAttr>(
        returned.getOperandNumber(), "tess.gradient");
    if (!name || !vocabularyGradients.contains(name.getValue()))
      continue;
    // Through the sum with the head's part of a tied table's gradient.
    SmallVector<Value> pending = {returned.get()};
    while (!pending.empty()) {
      Operation *producer = pending.pop_back_val().getDefiningOp();
      if (isa_and_nonnull<tess::EmbeddingGradOp>(producer))
        rowBlockGradients.insert(producer);
      else if (isa_and_nonnull<tess::AddOp, tess::CastOp>(producer))
        pending.append(producer->operand_begin(), producer->operand_end());
    }
  }
  const llvm::DenseMap<Value, TensorLayout> seeded = layouts;
  llvm::DenseMap<Operation *, std::string> broken;
  std::vector<std::pair<Operation *, std::string>> refused;
  while (true) {
    layouts = seeded;
    PieceMajorDecision decision =
        tensorAxis >= 0 ? choosePieceMajor(function, layouts, broken)
                        : PieceMajorDecision();
    refused = std::move(decision.refused);
    PieceMajorLayoutCheck regions(std::move(decision.regions));
    size_t before = broken.size();
    auto check = [&](Value value, const TensorLayout &layout) {
      regions.check(
          value, layout,
          [](unsigned) { return "the layouts reshard its pieced dim"; },
          broken);
    };
    for (Operation &op : function.getBody().front()) {
      if (op.hasTrait<OpTrait::IsTerminator>())
        continue;
      SmallVector<TensorLayout> operandLayouts;
      for (Value operand : op.getOperands()) {
        operandLayouts.push_back(layoutOf(operand));
        check(operand, operandLayouts.back());
      }
      tess::ShardingLabels labels = tess::shardingLabels(&op);
      llvm::DenseMap<int, unsigned> forced;
      if (tensorAxis >= 0 &&
          isa<tess::AttentionOp, tess::AttentionGradOp>(op) &&
          labels.operands[0][1] != tess::kWhole)
        forced[labels.operands[0][1]] = tensorAxis;
      if (rowBlockGradients.contains(&op))
        forced[labels.results[0][0]] = tensorAxis;
      // An LM head reading a padded copy of its weight (no parameter the
      // seed splits): its classes over tp all the same, each rank taking
      // its block of the copy.
      if (paddedHeads.contains(&op)) {
        bool transposed = cast<tess::LinearOp>(op).getTransposeWeight();
        forced[labels.operands[1][transposed ? 0 : 1]] = tensorAxis;
      }
      LayoutChoice choice = chooseLayouts(&op, labels, operandLayouts,
                                          deviceMesh, {}, &forced);
      for (auto [operand, layout] : llvm::zip(op.getOperands(), choice.operands))
        check(operand, layout);
      for (auto [result, layout] : llvm::zip(op.getResults(), choice.results)) {
        layouts[result] = layout;
        check(result, layout);
      }
    }
    if (broken.size() == before)
      break;
    clearPieceMajor(function);
  }
  // What the forced strategy could not build as Megatron-LM's, as
  // tess-annotate-from-plan says it for a searched plan.
  for (const auto &[op, why] : refused)
    op->emitRemark() << "tess-annotate-sharding: the fused projection this "
                        "split cuts stays whole on '"
                     << deviceMesh.axes[tensorAxis].name
                     << "' (its readers slice their heads), not column-"
                        "parallel piece by piece: "
                     << why;

  // The loss leaves replicated; a gradient in its parameter's layout.
  llvm::StringMap<TensorLayout> parameterLayouts;
  for (BlockArgument argument : function.getArguments())
    if (auto name = function.getArgAttrOfType<StringAttr>(
            argument.getArgNumber(), "tess.parameter"))
      parameterLayouts[name.getValue()] = layoutOf(argument);
  Operation *terminator = function.getBody().front().getTerminator();
  SmallVector<TensorLayout> resultLayouts;
  for (unsigned index = 0; index < function.getNumResults(); ++index) {
    Value returned = terminator->getOperand(index);
    TensorLayout layout = TensorLayout::replicated(
        llvm::cast<RankedTensorType>(returned.getType()).getRank());
    if (auto name =
            function.getResultAttrOfType<StringAttr>(index, "tess.gradient")) {
      auto it = parameterLayouts.find(name.getValue());
      if (it != parameterLayouts.end())
        layout = it->second;
      if (deferGradientReduction && dataAxis >= 0 &&
          layoutOf(returned).isPartialOver(dataAxis) &&
          layout.dimSplitOver(dataAxis) == kUnsplit) {
        layout.partialAxes.push_back(dataAxis);
        llvm::sort(layout.partialAxes);
      }
    }
    resultLayouts.push_back(layout);
  }
  if (llvm::Error error = sharding::annotateShardingPlan(
          function, deviceMesh, layouts, resultLayouts)) {
    function.emitError("tess-annotate-sharding: ")
        << llvm::toString(std::move(error));
    return signalPassFailure();
  }
}

} // namespace
