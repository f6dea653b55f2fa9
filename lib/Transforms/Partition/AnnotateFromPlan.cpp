//===- AnnotateFromPlan.cpp - the search's plan as the partitioner's input ===//
//
// tess-annotate-from-plan, the shard phase of a searched plan.
//
// The search (tess-search-sharding) plans the forward function and writes
// its decision on the forward's ops (lib/Sharding/SearchedPlan.h's
// `tess.planned`), which tess-build-training's clones carry into the
// training step; the partitioner (tess-partition-spmd) rewrites the step
// @forward_backward from PlanAnnotation.h's attributes. This file writes
// those attributes from the plan the step's ops carry:
//
//  - Arguments. A parameter or buffer takes the compute layout its
//    tess.parameter op in @forward was planned, found by the name in its
//    `tess.parameter` / `tess.buffer` attribute. The token ids take the
//    layout the plan's first reader of them needs (the embedding's), the
//    targets the token dims of the layout the loss reads the logits in
//    (@forward's result), the loss scale is replicated.
//  - The forward ops of the step: those before the first tess.cross_entropy
//    that carry a plan (canonicalization may have folded some; their
//    replacements carry none). Such an op's results get the plan's result
//    layouts; the partitioner then runs it in the layouts LayoutChoice.h
//    picks for them, which are the plan's operand layouts whenever the
//    operands arrive as the plan has them.
//  - Everything else (the loss, the backward, ops the plan does not
//    name): propagation with LayoutChoice.h, each op in the layouts its
//    operands arrive in, as tess-annotate-sharding does.
//  - Results: the loss replicated; a gradient in its parameter's
//    `stateLayout` under ZeRO-3 (the shard the optimizer updates), else in
//    its `computeLayout`, under ZeRO 1-2 a pending partial sum over the
//    ZeRO axes: the driver, which holds the optimizer state, reduce-
//    scatters it into its shard (runtime/train/MeshZero.h), the
//    parameter's stage on the result (tess.zero_stage: under ZeRO-2 the
//    driver keeps only the gradient's shard).
//  - A tess.split that reads its input piece by piece (its split dim split
//    over an axis: Megatron's fused QKV) runs piece-major where its region
//    is one (PieceMajorRegion.h): the split and the backward's concat
//    marked tess.piece_major, the weight, bias and gradients tess.pieces,
//    the plan's layouts as they are. A try whose layouts would reshard
//    the region is redone with its dim whole.
//
// What the partitioner cannot express, and what is written instead (each a
// line of the report):
//  - A split read piece by piece without a piece-major region (an op that
//    reads the dim in another order, unequal pieces, a parameter not split
//    on the dim, a layout that reshards it): the split's producer keeps
//    that dim whole (its parameters are then whole on that axis too), the
//    split follows propagation, and the consumers of the pieces slice
//    their heads (no communication).
//  - A plan layout that does not fit its value, or a matched op that the
//    partitioner's rule runs in other layouts than the plan (an operand it
//    would read whole where the plan splits it, a result resharded after
//    the op): reported, and the program stays correct because the
//    partitioner inserts the collectives its own rule needs.
//
//===----------------------------------------------------------------------===//

#include "LayoutChoice.h"
#include "PieceMajorRegion.h"

#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Sharding/SearchedPlan.h"
#include "tessera/Transforms/Passes.h"

#include "llvm/Support/FormatVariadic.h"

#include <optional>


namespace tessera {
#define GEN_PASS_DEF_ANNOTATEFROMPLAN
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using namespace tessera::partition;
using sharding::kUnsplit;
using sharding::TensorLayout;

namespace {

RankedTensorType tensorType(Value value) {
  return llvm::dyn_cast<RankedTensorType>(value.getType());
}

TensorLayout replicatedFor(Value value) {
  RankedTensorType type = tensorType(value);
  return TensorLayout::replicated(type ? type.getRank() : 0);
}

/// `value` without a cast of a function argument (the step's parameters
/// are cast to the compute precision).
Value throughArgumentCast(Value value) {
  if (auto cast = value.getDefiningOp<tess::CastOp>())
    if (llvm::isa<BlockArgument>(cast.getInput()))
      return cast.getInput();
  return value;
}

/// The argument of `step` whose attribute `role` (tess.parameter,
/// tess.buffer, tess.input) is `name`.
BlockArgument argumentNamed(func::FuncOp step, StringRef role,
                            StringRef name) {
  for (BlockArgument argument : step.getArguments())
    if (auto attribute =
            step.getArgAttrOfType<StringAttr>(argument.getArgNumber(), role);
        attribute && attribute.getValue() == name)
      return argument;
  return {};
}

/// The name of the parameter whose argument of `step` `value` is (through
/// its cast to the compute type), or "".
StringRef parameterName(func::FuncOp step, Value value) {
  auto argument = llvm::dyn_cast<BlockArgument>(throughArgumentCast(value));
  if (!argument || argument.getOwner()->getParentOp() != step)
    return "";
  auto name = step.getArgAttrOfType<StringAttr>(argument.getArgNumber(),
                                                "tess.parameter");
  return name ? name.getValue() : "";
}

/// The searched plan that `step` (and @forward beside it) carry, read from
/// their `tess.planned` (SearchedPlan.h): the parameters' from @forward's
/// tess.parameter ops, the ops' from the step's own ops before the loss,
/// the results' from @forward's. `plannedOps` counts @forward's planned
/// ops (parameters aside), so that those folded in the step can be told.
llvm::Expected<sharding::TrainingShardingPlan>
readStepPlan(func::FuncOp step, size_t &plannedOps) {
  auto module = step->getParentOfType<ModuleOp>();
  auto meshAttribute =
      module->getAttrOfType<tess::MeshAttr>(sharding::kMeshAttrName);
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!meshAttribute || !forward || forward.isExternal())
    return llvm::createStringError(
        "the module has no searched plan: tess-search-sharding writes it "
        "(tess.mesh, and tess.planned on @forward's ops) before the step is "
        "built");
  sharding::TrainingShardingPlan plan;
  plan.mesh = sharding::deviceMesh(meshAttribute);
  plannedOps = 0;
  for (Operation &op : forward.getBody().front()) {
    auto planned = sharding::readPlannedOp(&op, plan.mesh);
    if (!planned)
      return planned.takeError();
    if (!*planned)
      continue;
    auto parameter = dyn_cast<tess::ParameterOp>(op);
    if (!parameter) {
      ++plannedOps;
      continue;
    }
    sharding::ParameterSharding state;
    state.op = &op;
    state.name = parameter.getName().str();
    state.computeLayout = (*planned)->results[0];
    state.stateLayout = (*planned)->state.value_or(state.computeLayout);
    state.zeroStage = (*planned)->zeroStage;
    state.zeroAxes = (*planned)->zeroAxes;
    plan.parameters.push_back(std::move(state));
  }
  for (unsigned index = 0; index < forward.getNumResults(); ++index) {
    llvm::Expected<TensorLayout> layout =
        sharding::readPlannedResult(forward, index, plan.mesh);
    if (!layout)
      return layout.takeError();
    plan.resultLayouts.push_back(std::move(*layout));
  }
  for (Operation &op : step.getBody().front()) {
    if (isa<tess::CrossEntropyOp>(op))
      break;
    auto planned = sharding::readPlannedOp(&op, plan.mesh);
    if (!planned)
      return planned.takeError();
    if (!*planned)
      continue;
    sharding::OpSharding entry;
    entry.op = &op;
    entry.strategy = (*planned)->strategy;
    entry.layer = (*planned)->layer;
    entry.operandLayouts = (*planned)->operands;
    entry.resultLayouts = (*planned)->results;
    plan.opIndex[&op] = plan.ops.size();
    plan.ops.push_back(std::move(entry));
  }
  return plan;
}

class PlanAnnotator {
public:
  PlanAnnotator(func::FuncOp step, const sharding::TrainingShardingPlan &plan,
                size_t plannedOps)
      : step(step), plan(plan), mesh(plan.mesh) {
    report.plannedOps = plannedOps;
  }

  llvm::Expected<sharding::PlanAnnotationReport> run();

private:
  /// Splits the plan reads piece by piece: marked tess.piece_major with
  /// their region (PieceMajorRegion.h) where it has one, else their
  /// producers' result dim and parameters stay whole on the axis.
  void findPieceMajorSplits();
  void seedArguments();
  void chooseOpLayouts();
  SmallVector<TensorLayout> resultLayouts();

  std::string describe(Operation *op, const sharding::OpSharding *planned) {
    std::string text = op->getName().getStringRef().str();
    if (planned && !planned->layer.empty())
      text += " in " + planned->layer;
    if (planned)
      text += " (" + planned->strategy + ")";
    return text;
  }
  std::string print(const TensorLayout &layout) { return layout.print(mesh); }
  void deviate(const Twine &line) { report.deviations.push_back(line.str()); }
  TensorLayout layoutOf(Value value) {
    auto it = layouts.find(value);
    return it == layouts.end() ? replicatedFor(value) : it->second;
  }

  func::FuncOp step;
  const sharding::TrainingShardingPlan &plan;
  const cost::DeviceMesh &mesh;
  sharding::PlanAnnotationReport report;
  /// Step op -> its plan entry (the step's ops carry their plan).
  llvm::DenseMap<Operation *, const sharding::OpSharding *> matched;
  /// Planned (forward) ops that follow propagation instead of the plan.
  llvm::DenseSet<Operation *> propagated;
  /// Planned ops whose result `first` dim must stay whole on axis `second`.
  llvm::DenseMap<Operation *, std::pair<unsigned, unsigned>> keepWhole;
  /// Parameter name -> mesh axes it stays whole on.
  llvm::StringMap<SmallVector<unsigned, 1>> wholeParameters;
  /// The piece-major regions this try decided.
  std::optional<partition::PieceMajorLayoutCheck> pieceCheck;
  /// Splits whose region a try found the layouts do not keep split, and
  /// why: the next try keeps their dim whole.
  llvm::DenseMap<Operation *, std::string> brokenSplits;
  /// Records in brokenSplits each region that `value` (in layout `layout`
  /// where `op` reads or writes it) leaves.
  void checkPieces(Operation *op, Value value, const TensorLayout &layout,
                   StringRef role) {
    if (!pieceCheck)
      return;
    pieceCheck->check(
        value, layout,
        [&](unsigned axis) {
          return llvm::formatv(
                     "the partitioner's layouts do not keep the pieced dim "
                     "split over {0}: {1} {2} it as {3}",
                     mesh.axes[axis].name, op->getName().getStringRef(), role,
                     print(layout))
              .str();
        },
        brokenSplits);
  }
  /// Clears what one try wrote (layouts, decisions, the marks in the IR).
  void resetTry();
  const sharding::ParameterSharding *parameterNamed(StringRef name) const {
    for (const sharding::ParameterSharding &parameter : plan.parameters)
      if (parameter.name == name)
        return &parameter;
    return nullptr;
  }
  llvm::DenseMap<Value, TensorLayout> layouts;
};

void PlanAnnotator::findPieceMajorSplits() {
  std::vector<partition::PiecedSplit> splits;
  llvm::DenseMap<Operation *, const sharding::OpSharding *> entries;
  for (const sharding::OpSharding &entry : plan.ops) {
    auto split = dyn_cast_or_null<tess::SplitOp>(entry.op);
    if (!split || entry.operandLayouts.empty())
      continue;
    int64_t rank = tensorType(split.getInput()).getRank();
    int64_t dim = static_cast<int64_t>(split.getAxis());
    if (dim < 0)
      dim += rank;
    const TensorLayout &input = entry.operandLayouts[0];
    if (dim < 0 || dim >= (int64_t)input.rank() ||
        input.dimAxes[dim] == kUnsplit)
      continue;
    splits.push_back({split, static_cast<unsigned>(input.dimAxes[dim])});
    entries[split] = &entry;
  }
  // Piece-major where the region's parameters are split on the dim over
  // the split's axis, in compute and state alike (the region's blocks are
  // that axis's).
  auto argumentSplit = [&](unsigned number, unsigned dim, unsigned axis) {
    StringRef name = parameterName(step, step.getArgument(number));
    const sharding::ParameterSharding *parameter =
        name.empty() ? nullptr : parameterNamed(name);
    auto splitOn = [&](const TensorLayout &layout) {
      return dim < layout.rank() && layout.dimAxes[dim] == (int)axis;
    };
    return parameter && splitOn(parameter->computeLayout) &&
           splitOn(parameter->stateLayout);
  };
  partition::PieceMajorDecision decision =
      partition::decidePieceMajor(step, splits, argumentSplit, &brokenSplits);
  std::vector<std::string> axisNames;
  for (const cost::MeshAxis &axis : mesh.axes)
    axisNames.push_back(axis.name);
  partition::markPieceMajor(step, decision, axisNames);
  pieceCheck.emplace(std::move(decision.regions));

  // The others keep their dim whole: the split follows propagation, its
  // producer's result dim and parameters stay whole on the axis, and the
  // pieces' readers slice their heads.
  for (const auto &[op, why] : decision.refused) {
    auto split = cast<tess::SplitOp>(op);
    const sharding::OpSharding *entry = entries.lookup(op);
    const TensorLayout &input = entry->operandLayouts[0];
    int64_t dim = static_cast<int64_t>(split.getAxis());
    if (dim < 0)
      dim += static_cast<int64_t>(input.rank());
    unsigned axis = static_cast<unsigned>(input.dimAxes[dim]);
    propagated.insert(split);
    Operation *producer = split.getInput().getDefiningOp();
    std::string whole;
    if (producer && plan.find(producer)) {
      keepWhole[producer] = {static_cast<unsigned>(dim), axis};
      for (Value operand : producer->getOperands())
        if (StringRef name = parameterName(step, operand); !name.empty()) {
          wholeParameters[name].push_back(axis);
          whole += (whole.empty() ? "" : ", ") + name.str();
        }
    }
    const sharding::OpSharding *producerEntry =
        producer ? plan.find(producer) : nullptr;
    deviate(llvm::formatv(
        "{0}: the plan reads its input {1} piece by piece (piece-major "
        "columns of {2}), but {3}; so that dim stays whole on {4}{5} and the "
        "pieces' readers slice their blocks",
        describe(split, entry), print(input),
        producer ? describe(producer, producerEntry) : std::string("?"), why,
        mesh.axes[axis].name, whole.empty() ? "" : " (with " + whole + ")"));
  }
}

void PlanAnnotator::seedArguments() {
  llvm::StringMap<const sharding::ParameterSharding *> parameters;
  for (const sharding::ParameterSharding &parameter : plan.parameters)
    parameters[parameter.name] = &parameter;
  for (BlockArgument argument : step.getArguments()) {
    unsigned index = argument.getArgNumber();
    auto name = step.getArgAttrOfType<StringAttr>(index, "tess.parameter");
    if (!name)
      name = step.getArgAttrOfType<StringAttr>(index, "tess.buffer");
    if (!name)
      continue;
    auto found = parameters.find(name.getValue());
    if (found == parameters.end())
      continue;
    TensorLayout layout = found->second->computeLayout;
    for (unsigned axis : wholeParameters.lookup(name.getValue()))
      for (int &dimAxis : layout.dimAxes)
        if (dimAxis == (int)axis)
          dimAxis = kUnsplit;
    if (!sharding::fitsShape(layout, tensorType(argument).getShape(), mesh)) {
      deviate("parameter " + name.getValue() + ": layout " + print(layout) +
              " does not fit " +
              llvm::formatv("{0}", argument.getType()).str() +
              "; replicated");
      continue;
    }
    layouts[argument] = layout;
  }

  // The token ids as the plan's first reader of them needs them; the
  // targets as the loss reads the logits' rows.
  auto seedInput = [&](StringRef role, TensorLayout layout) {
    BlockArgument argument = argumentNamed(step, "tess.input", role);
    if (!argument)
      return;
    layout.partialAxes.clear();
    if (layout.rank() != tensorType(argument).getRank() ||
        !sharding::fitsShape(layout, tensorType(argument).getShape(), mesh)) {
      deviate("input " + role + ": layout " + print(layout) +
              " does not fit; replicated");
      return;
    }
    layouts[argument] = layout;
  };
  if (BlockArgument ids = argumentNamed(step, "tess.input", "input_ids")) {
    for (const sharding::OpSharding &entry : plan.ops) {
      auto use = llvm::find(entry.op->getOperands(), ids);
      if (use == entry.op->operand_end())
        continue;
      unsigned index = std::distance(entry.op->operand_begin(), use);
      if (index < entry.operandLayouts.size())
        seedInput("input_ids", entry.operandLayouts[index]);
      break;
    }
  }
  if (!plan.resultLayouts.empty() && plan.resultLayouts[0].rank() > 0) {
    TensorLayout rows = plan.resultLayouts[0];
    rows.dimAxes.pop_back();
    seedInput("targets", rows);
  }
}

void PlanAnnotator::chooseOpLayouts() {
  for (Operation &op : step.getBody().front()) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    SmallVector<TensorLayout> arriving;
    for (Value operand : op.getOperands())
      arriving.push_back(layoutOf(operand));
    tess::ShardingLabels labels = tess::shardingLabels(&op);
    const sharding::OpSharding *entry = matched.lookup(&op);
    if (entry && propagated.contains(entry->op))
      entry = nullptr;

    SmallVector<TensorLayout> desired;
    if (entry) {
      desired.assign(entry->resultLayouts.begin(), entry->resultLayouts.end());
      if (auto whole = keepWhole.find(entry->op); whole != keepWhole.end())
        for (TensorLayout &layout : desired)
          if (whole->second.first < layout.rank() &&
              layout.dimAxes[whole->second.first] == (int)whole->second.second)
            layout.dimAxes[whole->second.first] = kUnsplit;
      bool fits = desired.size() == op.getNumResults();
      for (auto [result, layout] : llvm::zip(op.getResults(), desired))
        fits = fits && tensorType(result) &&
               sharding::fitsShape(layout, tensorType(result).getShape(),
                                   mesh);
      if (!fits) {
        deviate(describe(&op, entry) +
                ": the plan's result layouts do not fit; propagated");
        desired.clear();
        entry = nullptr;
      }
    }
    LayoutChoice choice =
        chooseLayouts(&op, labels, arriving, mesh, desired, nullptr);
    // A piece-major region stays split wherever it is read and written:
    // a reshard of it would move contiguous blocks.
    for (auto [index, operand] : llvm::enumerate(op.getOperands())) {
      if (index < choice.operands.size())
        checkPieces(&op, operand, choice.operands[index], "reads");
      checkPieces(&op, operand, arriving[index], "receives");
    }
    for (auto [index, result] : llvm::enumerate(op.getResults()))
      if (index < choice.results.size())
        checkPieces(&op, result, choice.results[index], "writes");
    if (!entry) {
      for (auto [result, layout] : llvm::zip(op.getResults(), choice.results))
        layouts[result] = layout;
      continue;
    }
    for (auto [result, layout] : llvm::zip(op.getResults(), desired)) {
      layouts[result] = layout;
      checkPieces(&op, result, layout, "leaves");
    }

    // How the partitioner will run it, against what the search priced.
    for (auto [index, layout] : llvm::enumerate(choice.operands)) {
      if (index >= entry->operandLayouts.size() || !tensorType(op.getOperand(index)))
        continue;
      if (layout != entry->operandLayouts[index])
        deviate(llvm::formatv("{0}: operand {1} is read as {2}, the plan "
                              "priced {3}",
                              describe(&op, entry), index, print(layout),
                              print(entry->operandLayouts[index])));
    }
    for (auto [index, layout] : llvm::enumerate(choice.results))
      if (layout != desired[index])
        deviate(llvm::formatv("{0}: result {1} comes out {2} and is "
                              "resharded to the plan's {3}",
                              describe(&op, entry), index, print(layout),
                              print(desired[index])));
  }
}

SmallVector<TensorLayout> PlanAnnotator::resultLayouts() {
  llvm::StringMap<const sharding::ParameterSharding *> parameters;
  for (const sharding::ParameterSharding &parameter : plan.parameters)
    parameters[parameter.name] = &parameter;
  Operation *terminator = step.getBody().front().getTerminator();
  SmallVector<TensorLayout> results;
  for (unsigned index = 0; index < step.getNumResults(); ++index) {
    Value returned = terminator->getOperand(index);
    TensorLayout layout = replicatedFor(returned);
    auto name = step.getResultAttrOfType<StringAttr>(index, "tess.gradient");
    auto found = name ? parameters.find(name.getValue()) : parameters.end();
    if (found != parameters.end()) {
      const sharding::ParameterSharding &parameter = *found->second;
      bool sharded = !parameter.zeroAxes.empty();
      TensorLayout planned = parameter.zeroStage == 3 && sharded
                                 ? parameter.stateLayout
                                 : parameter.computeLayout;
      planned.partialAxes.clear();
      if (sharded && (parameter.zeroStage == 1 || parameter.zeroStage == 2))
        planned.partialAxes.assign(parameter.zeroAxes.begin(),
                                   parameter.zeroAxes.end());
      for (unsigned axis : wholeParameters.lookup(name.getValue()))
        for (int &dimAxis : planned.dimAxes)
          if (dimAxis == (int)axis)
            dimAxis = kUnsplit;
      if (sharding::fitsShape(planned, tensorType(returned).getShape(), mesh))
        layout = planned;
    }
    // Whether the driver keeps a pending gradient whole (ZeRO-1) or only
    // its shard (ZeRO-2).
    step.removeResultAttr(index, StringAttr::get(step.getContext(),
                                                 sharding::kZeroStageAttrName));
    if (!layout.partialAxes.empty())
      step.setResultAttr(
          index, sharding::kZeroStageAttrName,
          IntegerAttr::get(IntegerType::get(step.getContext(), 64),
                           found->second->zeroStage));
    results.push_back(layout);
  }
  return results;
}

void PlanAnnotator::resetTry() {
  report.deviations.clear();
  propagated.clear();
  keepWhole.clear();
  wholeParameters.clear();
  layouts.clear();
  pieceCheck.reset();
  partition::clearPieceMajor(step);
}

llvm::Expected<sharding::PlanAnnotationReport> PlanAnnotator::run() {
  if (step.isExternal() || !step.getBody().hasOneBlock())
    return llvm::createStringError("the training step needs a body of one "
                                   "block");
  if (!argumentNamed(step, "tess.input", "input_ids") ||
      !argumentNamed(step, "tess.input", "targets"))
    return llvm::createStringError(
        "the training step has no input_ids/targets arguments (build it "
        "with tess-build-training)");
  for (const sharding::OpSharding &entry : plan.ops)
    matched[entry.op] = &entry;
  report.matchedOps = plan.ops.size();
  // A try whose layouts break a piece-major region is redone with that
  // region's dim whole; each try refuses at least one more split.
  for (size_t tries = 0;; ++tries) {
    size_t broken = brokenSplits.size();
    findPieceMajorSplits();
    seedArguments();
    chooseOpLayouts();
    if (brokenSplits.size() == broken || tries > plan.ops.size())
      break;
    resetTry();
  }
  if (llvm::Error error = sharding::annotateShardingPlan(
          step, mesh, layouts, resultLayouts()))
    return std::move(error);
  if (report.matchedOps < report.plannedOps)
    deviate(llvm::formatv("{0} of {1} planned ops were not found in the "
                          "training step (folded); they follow propagation",
                          report.plannedOps - report.matchedOps,
                          report.plannedOps));
  return report;
}

struct AnnotateFromPlanPass
    : tessera::impl::AnnotateFromPlanBase<AnnotateFromPlanPass> {
  using AnnotateFromPlanBase::AnnotateFromPlanBase;
  void runOnOperation() override;
};

} // namespace

void AnnotateFromPlanPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto step = module.lookupSymbol<func::FuncOp>("forward_backward");
  if (!step) {
    module.emitError("tess-annotate-from-plan: the module has no "
                     "@forward_backward (build it with tess-build-training)");
    return signalPassFailure();
  }
  llvm::Expected<sharding::PlanAnnotationReport> report =
      sharding::annotateFromSearchedPlan(step);
  if (!report) {
    module.emitError() << "tess-annotate-from-plan: "
                       << llvm::toString(report.takeError());
    return signalPassFailure();
  }
  if (remarks)
    for (const std::string &line : report->deviations)
      step.emitRemark() << "partition: " << line;
}

llvm::Expected<sharding::PlanAnnotationReport>
sharding::annotateFromSearchedPlan(func::FuncOp step) {
  size_t plannedOps = 0;
  llvm::Expected<TrainingShardingPlan> plan = readStepPlan(step, plannedOps);
  if (!plan)
    return plan.takeError();
  llvm::Expected<PlanAnnotationReport> report =
      PlanAnnotator(step, *plan, plannedOps).run();
  // The wishes are layouts now: the step's later phases read those alone.
  if (report) {
    erasePlannedAttributes(step);
    if (auto forward = step->getParentOfType<ModuleOp>()
                           .lookupSymbol<func::FuncOp>("forward"))
      erasePlannedAttributes(forward);
  }
  return report;
}
