//===- AnnotateFromPlan.cpp - the search's plan as the partitioner's input ===//
//
// The search (lib/Sharding/MeshSharding.h) plans the forward function; the
// partitioner (tess-partition-spmd) rewrites the training step
// @forward_backward from PlanAnnotation.h's attributes. This file writes
// those attributes from a TrainingShardingPlan:
//
//  - Arguments. A parameter or buffer takes its ParameterSharding's
//    `computeLayout`, found by the name in its `tess.parameter` /
//    `tess.buffer` attribute. The token ids take the layout the plan's first
//    reader of @forward's argument needs (the embedding's), the targets the
//    token dims of the layout the loss reads the logits in
//    (`resultLayouts[0]`), the loss scale is replicated.
//  - The forward ops of the step. tess-build-training copies @forward's ops
//    in program order (tess.parameter ops become arguments) before the
//    loss; canonicalization and CSE may fold some and hoist constants. The
//    planned ops are matched to the step's ops before the first
//    tess.cross_entropy in order, by op name, result shapes and operands
//    (an operand whose producer is matched must map to the matching
//    value), so a folded op is skipped rather than mismatched. A matched
//    op's results get the plan's result layouts; the partitioner then runs
//    it in the layouts LayoutChoice.h picks for them, which are the plan's
//    operand layouts whenever the operands arrive as the plan has them.
//  - Everything else (the loss, the backward, ops the plan does not
//    name): propagation with LayoutChoice.h, each op in the layouts its
//    operands arrive in, as tess-annotate-sharding does.
//  - Results: the loss replicated; a gradient in its parameter's
//    `stateLayout` under ZeRO-3 (the shard the optimizer updates), else in
//    its `computeLayout`, under ZeRO 1-2 a pending partial sum over the
//    ZeRO axes: the driver, which holds the optimizer state, reduce-
//    scatters it into its shard (runtime/train/MeshZero.h).
//
// What the partitioner cannot express, and what is written instead (each a
// line of the report):
//  - A tess.split that reads its input piece by piece (its split dim split
//    over an axis: Megatron's fused QKV, whose weight columns would be laid
//    out piece-major). The partitioner's blocks are contiguous, so the
//    split's producer keeps that dim whole (its parameters are then whole
//    on that axis too), and the split follows propagation; the consumers
//    of the pieces slice their heads (no communication), as
//    tess-annotate-sharding's TP does.
//  - A plan layout that does not fit its value, or a matched op that the
//    partitioner's rule runs in other layouts than the plan (an operand it
//    would read whole where the plan splits it, a result resharded after
//    the op): reported, and the program stays correct because the
//    partitioner inserts the collectives its own rule needs.
//
//===----------------------------------------------------------------------===//

#include "LayoutChoice.h"

#include "tessera/Sharding/PlanAnnotation.h"

#include "llvm/Support/FormatVariadic.h"

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

bool isConstant(Value value) {
  value = throughArgumentCast(value);
  while (auto cast = value.getDefiningOp<tess::CastOp>())
    value = cast.getInput();
  return value.getDefiningOp<tess::ConstantOp>() != nullptr;
}

bool sameShapes(TypeRange left, TypeRange right) {
  if (left.size() != right.size())
    return false;
  for (auto [a, b] : llvm::zip(left, right)) {
    auto shapedA = llvm::dyn_cast<ShapedType>(a);
    auto shapedB = llvm::dyn_cast<ShapedType>(b);
    if (!shapedA || !shapedB ? a != b
                             : shapedA.getShape() != shapedB.getShape())
      return false;
  }
  return true;
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

class PlanAnnotator {
public:
  PlanAnnotator(func::FuncOp step, const sharding::TrainingShardingPlan &plan)
      : step(step), plan(plan), mesh(plan.mesh) {}

  llvm::Expected<sharding::PlanAnnotationReport> run();

private:
  /// Matches the planned forward ops to the step's copies (`matched`).
  void matchForwardOps(func::FuncOp forward);
  /// Piece-major splits: the producers whose result dim must stay whole,
  /// and the parameters that stay whole on an axis.
  void findPieceMajorSplits();
  void seedArguments(func::FuncOp forward);
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
  /// Step op -> its plan entry.
  llvm::DenseMap<Operation *, const sharding::OpSharding *> matched;
  /// Planned (forward) ops that follow propagation instead of the plan.
  llvm::DenseSet<Operation *> propagated;
  /// Planned ops whose result `first` dim must stay whole on axis `second`.
  llvm::DenseMap<Operation *, std::pair<unsigned, unsigned>> keepWhole;
  /// Parameter name -> mesh axes it stays whole on.
  llvm::StringMap<SmallVector<unsigned, 1>> wholeParameters;
  llvm::DenseMap<Value, TensorLayout> layouts;
};

void PlanAnnotator::matchForwardOps(func::FuncOp forward) {
  // Forward value -> step value.
  llvm::DenseMap<Value, Value> values;
  if (forward.getNumArguments() > 0)
    if (BlockArgument ids = argumentNamed(step, "tess.input", "input_ids"))
      values[forward.getArgument(0)] = ids;
  SmallVector<Operation *> planned;
  for (Operation &op : forward.getBody().front()) {
    if (auto parameter = dyn_cast<tess::ParameterOp>(op)) {
      BlockArgument argument = argumentNamed(step, "tess.parameter",
                                             parameter.getName());
      if (!argument)
        argument = argumentNamed(step, "tess.buffer", parameter.getName());
      if (argument)
        values[parameter.getResult()] = argument;
      continue;
    }
    if (!isa<tess::ConstantOp>(op) && !op.hasTrait<OpTrait::IsTerminator>())
      planned.push_back(&op);
  }
  SmallVector<Operation *> candidates;
  for (Operation &op : step.getBody().front()) {
    if (isa<tess::CrossEntropyOp>(op))
      break;
    bool argumentCast = isa<tess::CastOp>(op) &&
                        llvm::isa<BlockArgument>(op.getOperand(0));
    if (!isa<tess::ConstantOp>(op) && !argumentCast)
      candidates.push_back(&op);
  }

  auto matches = [&](Operation *original, Operation *copy) {
    if (original->getName() != copy->getName() ||
        original->getNumOperands() != copy->getNumOperands() ||
        !sameShapes(original->getResultTypes(), copy->getResultTypes()))
      return false;
    for (auto [from, to] :
         llvm::zip(original->getOperands(), copy->getOperands())) {
      auto known = values.find(from);
      if (known != values.end()) {
        if (throughArgumentCast(to) != known->second)
          return false;
      } else if (isConstant(from) && !isConstant(to)) {
        return false;
      }
    }
    return true;
  };
  size_t next = 0;
  report.plannedOps = planned.size();
  for (Operation *original : planned) {
    const sharding::OpSharding *entry = plan.find(original);
    for (size_t index = next; index < candidates.size(); ++index) {
      Operation *copy = candidates[index];
      if (!matches(original, copy))
        continue;
      for (auto [from, to] :
           llvm::zip(original->getResults(), copy->getResults()))
        values[from] = to;
      if (entry)
        matched[copy] = entry;
      ++report.matchedOps;
      next = index + 1;
      break;
    }
  }
}

void PlanAnnotator::findPieceMajorSplits() {
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
    unsigned axis = input.dimAxes[dim];
    propagated.insert(split);
    Operation *producer = split.getInput().getDefiningOp();
    std::string whole;
    if (producer && plan.find(producer)) {
      keepWhole[producer] = {static_cast<unsigned>(dim), axis};
      for (Value operand : producer->getOperands())
        if (auto parameter = operand.getDefiningOp<tess::ParameterOp>()) {
          wholeParameters[parameter.getName()].push_back(axis);
          whole += (whole.empty() ? "" : ", ") + parameter.getName().str();
        }
    }
    const sharding::OpSharding *producerEntry =
        producer ? plan.find(producer) : nullptr;
    deviate(llvm::formatv(
        "{0}: the plan reads its input {1} piece by piece (piece-major "
        "columns of {2}); the partitioner splits contiguous blocks, so that "
        "dim stays whole on {3}{4} and the pieces' readers slice their "
        "blocks",
        describe(split, &entry), print(input),
        producer ? describe(producer, producerEntry) : std::string("?"),
        mesh.axes[axis].name, whole.empty() ? "" : " (with " + whole + ")"));
  }
}

void PlanAnnotator::seedArguments(func::FuncOp forward) {
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
  if (forward.getNumArguments() > 0) {
    Value ids = forward.getArgument(0);
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
    if (!entry) {
      for (auto [result, layout] : llvm::zip(op.getResults(), choice.results))
        layouts[result] = layout;
      continue;
    }
    for (auto [result, layout] : llvm::zip(op.getResults(), desired))
      layouts[result] = layout;

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
    results.push_back(layout);
  }
  return results;
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
  func::FuncOp forward;
  for (const sharding::OpSharding &entry : plan.ops)
    if (entry.op) {
      forward = entry.op->getParentOfType<func::FuncOp>();
      break;
    }
  if (!forward)
    return llvm::createStringError("the plan names no ops");
  matchForwardOps(forward);
  findPieceMajorSplits();
  seedArguments(forward);
  chooseOpLayouts();
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

} // namespace

llvm::Expected<sharding::PlanAnnotationReport>
sharding::annotateFromSearchPlan(func::FuncOp step,
                                 const TrainingShardingPlan &plan) {
  return PlanAnnotator(step, plan).run();
}
