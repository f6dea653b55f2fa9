//===- SplitPipelineStages.cpp - tess-split-pipeline-stages ---------------===//
//
// @forward_backward -> @stage{c}_forward and @stage{c}_backward per pipeline
// stage. lib/Pipeline's ProgramUnits says which unit (embedding, layer,
// head) every op belongs to and whether it is forward or backward; units
// are grouped into contiguous stages, and each op is copied into its
// stage's forward or backward function. What one function reads from
// another becomes an argument of the reader and a result of the writer:
// activations and activation gradients between neighbouring stages, saved
// values from a stage's forward to its backward. See the pass's
// description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "tessera/Pipeline/ProgramUnits.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <functional>
#include <limits>
#include <map>
#include <set>

namespace tessera {
#define GEN_PASS_DEF_SPLITPIPELINESTAGES
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

/// Where the values of @forward_backward go once it is cut into stages.
struct StageCut {
  int64_t stageCount = 0;
  /// firstUnit[c]: the first unit of stage c; firstUnit[stageCount]: the
  /// unit count.
  SmallVector<int64_t> firstUnit;
  /// The stage of every op but constants (copied wherever they are read).
  llvm::DenseMap<Operation *, int64_t> stageOf;
  /// Per stage, its forward and backward ops in program order.
  std::vector<SmallVector<Operation *>> forwardOps, backwardOps;
  /// activations[c]: forward values that stage c - 1 sends to stage c
  /// (c >= 1); activationGradients[c]: backward values that stage c sends
  /// to stage c - 1. Both in program order.
  std::vector<llvm::SetVector<Value>> activations, activationGradients;
  /// saved[c]: the forward values stage c's backward reads.
  std::vector<llvm::SetVector<Value>> saved;
  /// prepareOps[c]: the parameter-only ops (ProgramUnits::parameterOnly)
  /// stage c reads, with the ones those read, in program order;
  /// residents[c]: their values stage c's forward and backward read.
  std::vector<SmallVector<Operation *>> prepareOps;
  std::vector<llvm::SetVector<Value>> residents;
  /// A gradient that is a sum of contributions computed in several stages
  /// (a tied embedding's: the embedding's and the head's), by its index
  /// among @forward_backward's results: per stage, its part. Each stage
  /// returns its part under the parameter's tess.gradient; the sum is the
  /// driver's, once per step, as Megatron-LM all-reduces the embedding's
  /// gradient between the first and the last stage.
  std::map<unsigned, std::vector<std::pair<int64_t, Value>>> partialGradients;
  /// The adds made to sum a stage's several parts: built in
  /// @forward_backward to be copied, erased from it once the stages are.
  SmallVector<Operation *> partAdds;
};

bool isConstant(Value value) {
  return value.getDefiningOp<tess::ConstantOp>() != nullptr;
}

/// The first unit of each stage: `units` split into `stages` contiguous
/// groups whose sizes differ by at most one.
SmallVector<int64_t> firstUnitOfStage(int64_t units, int64_t stages) {
  SmallVector<int64_t> first;
  for (int64_t stage = 0; stage <= stages; ++stage)
    first.push_back(stage * units / stages);
  return first;
}

/// The parameter argument `value` is (through a cast to the compute type).
std::optional<unsigned> parameterOf(Value value, func::FuncOp function) {
  if (auto cast = value.getDefiningOp<tess::CastOp>())
    value = cast.getInput();
  auto argument = llvm::dyn_cast<BlockArgument>(value);
  if (!argument || !function.getArgAttr(argument.getArgNumber(),
                                        "tess.parameter"))
    return std::nullopt;
  return argument.getArgNumber();
}

/// The parameter argument whose gradient @forward_backward returns as
/// result `result` (result i + 1 is the i-th trainable parameter's).
std::optional<unsigned> parameterOfGradient(func::FuncOp function,
                                            unsigned result) {
  unsigned index = 0;
  for (BlockArgument argument : function.getArguments())
    if (function.getArgAttr(argument.getArgNumber(), "tess.parameter") &&
        ++index == result)
      return argument.getArgNumber();
  return std::nullopt;
}

/// The stages whose forward reads each parameter (two for a tied
/// embedding), by argument number.
llvm::DenseMap<unsigned, std::set<int64_t>>
stagesReadingParameters(const pipeline::ProgramUnits &units,
                        const llvm::DenseMap<Operation *, int64_t> &stageOf) {
  func::FuncOp function = units.forwardBackward;
  llvm::DenseMap<unsigned, std::set<int64_t>> holdersOf;
  for (Operation &op : function.getBody().front().without_terminator())
    if (!units.isBackward.lookup(&op) && !llvm::isa<tess::CastOp>(op) &&
        stageOf.count(&op))
      for (Value operand : op.getOperands())
        if (std::optional<unsigned> parameter = parameterOf(operand, function))
          holdersOf[*parameter].insert(stageOf.lookup(&op));
  return holdersOf;
}

/// ProgramUnits puts a backward op with the forward values it reads: the
/// weight gradient of layer 3 (its input activation times the gradient of
/// its output) reads layer 2's output, so it would be computed one stage
/// early, from a gradient sent down for it, and returned by a stage that
/// does not hold the weight. Moves every backward op that only feeds one
/// parameter's gradient to the latest stage whose forward reads the
/// parameter, as far as the gradients it reads allow (a backward op may only read
/// gradients of its own or a later stage), and every backward op at least
/// to the stage of its readers; then moves every forward op that
/// only backward ops read (the VJP's reshapes of saved activations) to the
/// earliest of its readers' stages, so that it is saved there.
void keepGradientsWithParameters(const pipeline::ProgramUnits &units,
                                 llvm::DenseMap<Operation *, int64_t> &stageOf) {
  func::FuncOp function = units.forwardBackward;
  Block &body = function.getBody().front();
  Operation *terminator = body.getTerminator();
  auto isBackward = [&](Operation *op) { return units.isBackward.lookup(op); };

  llvm::DenseMap<unsigned, std::set<int64_t>> holdersOf =
      stagesReadingParameters(units, stageOf);

  // A backward op reading gradients only (the sum of a residual stream's
  // cotangents, a reshape) goes to the latest stage its operands allow
  // (the earliest of their stages) rather than with the op before it: one
  // value then crosses to the earlier stage, not all its operands.
  for (Operation &op : body.without_terminator()) {
    if (!isBackward(&op) || !stageOf.count(&op))
      continue;
    std::optional<int64_t> latest;
    bool gradientsOnly = true;
    for (Value operand : op.getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (producer && llvm::isa<tess::ConstantOp>(producer))
        continue;
      if (!producer || !isBackward(producer) || !stageOf.count(producer)) {
        gradientsOnly = false;
        break;
      }
      latest = std::min(latest.value_or(stageOf.lookup(producer)),
                        stageOf.lookup(producer));
    }
    if (gradientsOnly && latest)
      stageOf[&op] = std::max(stageOf.lookup(&op), *latest);
  }

  // The one parameter whose gradient is all an op's results feed, if any.
  llvm::DenseMap<Operation *, unsigned> feedsOnly;
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (!isBackward(&op) || !stageOf.count(&op))
      continue;
    std::optional<unsigned> parameter;
    bool single = true;
    for (Value value : op.getResults())
      for (OpOperand &use : value.getUses()) {
        std::optional<unsigned> fed;
        if (use.getOwner() == terminator) {
          fed = parameterOfGradient(function, use.getOperandNumber());
        } else if (auto found = feedsOnly.find(use.getOwner());
                   found != feedsOnly.end()) {
          fed = found->second;
        }
        single = single && fed && (!parameter || *parameter == *fed);
        parameter = fed;
      }
    if (single && parameter)
      feedsOnly[&op] = *parameter;
  }
  for (Operation &op : body.without_terminator()) {
    auto found = feedsOnly.find(&op);
    if (found == feedsOnly.end())
      continue;
    int64_t latest = std::numeric_limits<int64_t>::max();
    for (Value operand : op.getOperands())
      if (Operation *producer = operand.getDefiningOp();
          producer && isBackward(producer) && stageOf.count(producer))
        latest = std::min(latest, stageOf.lookup(producer));
    // The latest holder of the parameter the gradients allow. A parameter
    // several stages read (a tied table) has its parts summed once a step
    // by its first reader's stage: a part already in a holder stays there,
    // as the stage model prices it (the head's stage would otherwise take
    // the embedding's part when it also holds the first layer).
    const std::set<int64_t> &holders = holdersOf[found->second];
    if (holders.size() > 1 && holders.count(stageOf.lookup(&op)))
      continue;
    auto after = holders.upper_bound(latest);
    if (after == holders.begin())
      continue;
    int64_t &stage = stageOf[&op];
    stage = std::max(stage, *std::prev(after));
  }
  // ProgramUnits puts a backward op reading no forward value with the op
  // before it, which may be a stage earlier than its readers (BERT's
  // reshape of the key gradient after the value's weight gradient): move
  // every backward op up to its latest backward reader. Readers follow
  // their producers, so one sweep in reverse settles every chain.
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (!isBackward(&op) || !stageOf.count(&op))
      continue;
    int64_t &stage = stageOf[&op];
    for (Operation *reader : op.getUsers())
      if (reader != terminator && isBackward(reader))
        stage = std::max(stage, stageOf.lookup(reader));
  }
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (isBackward(&op) || !stageOf.count(&op) || op.getNumResults() == 0)
      continue;
    std::optional<int64_t> earliest;
    for (Value value : op.getResults())
      for (Operation *reader : value.getUsers()) {
        if (reader == terminator || !isBackward(reader))
          earliest = std::optional<int64_t>(-1);
        else if (!earliest || *earliest >= 0)
          earliest = std::min(earliest.value_or(stageOf.lookup(reader)),
                              stageOf.lookup(reader));
      }
    int64_t &stage = stageOf[&op];
    if (earliest && *earliest > stage)
      stage = *earliest;
  }
}

/// A backward op reading one gradient and nothing else (the reshape of a
/// layer output's gradient for its weight gradient, the dropout VJP of a
/// residual stream's gradient, a bias gradient's sum over tokens) sits
/// with the op before it, which may be a stage later than all its
/// readers: then its result would cross the boundary as well as its
/// operand, which the residual stream sends down anyway (GPT-3's last
/// layer of a stage sent the gradient and its masked copy, two messages a
/// micro-batch). Moves it down to its latest reader, where its operand
/// arrives; a parameter's gradient counts as read by the latest stage at
/// or before the op's that holds the parameter. Readers first: the sweep
/// is in reverse, so a chain (dropout VJP, bias sum) moves as one. After
/// splitCrossStageGradientSums: the adds of a gradient summed across
/// stages are no readers any more, and a stage's part stays in its stage.
void lowerSingleGradientOps(const pipeline::ProgramUnits &units,
                            llvm::DenseMap<Operation *, int64_t> &stageOf) {
  func::FuncOp function = units.forwardBackward;
  Block &body = function.getBody().front();
  Operation *terminator = body.getTerminator();
  auto isBackward = [&](Operation *op) { return units.isBackward.lookup(op); };
  llvm::DenseMap<unsigned, std::set<int64_t>> holdersOf =
      stagesReadingParameters(units, stageOf);
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (!isBackward(&op) || !stageOf.count(&op) || op.use_empty())
      continue;
    SmallVector<Value> read;
    for (Value operand : op.getOperands())
      if (!isConstant(operand))
        read.push_back(operand);
    Operation *producer = read.size() == 1 ? read[0].getDefiningOp() : nullptr;
    if (!producer || !isBackward(producer) || !stageOf.count(producer))
      continue;
    int64_t stage = stageOf.lookup(&op);
    std::optional<int64_t> latestReader;
    for (OpOperand &use : op.getUses()) {
      Operation *reader = use.getOwner();
      std::optional<int64_t> readerStage;
      if (reader == terminator) {
        // The latest holder of the parameter at or before the op's stage.
        std::optional<unsigned> parameter =
            parameterOfGradient(function, use.getOperandNumber());
        auto holders = parameter ? holdersOf.find(*parameter) : holdersOf.end();
        if (holders != holdersOf.end()) {
          auto after = holders->second.upper_bound(stage);
          if (after != holders->second.begin())
            readerStage = *std::prev(after);
        }
      } else if (stageOf.count(reader)) {
        readerStage = stageOf.lookup(reader);
      }
      if (!readerStage) {
        latestReader.reset();
        break;
      }
      latestReader = std::max(latestReader.value_or(0), *readerStage);
    }
    if (latestReader)
      stageOf[&op] = std::min(stage, *latestReader);
  }
}

/// Finds the gradients that are sums (trees of tess.add read by nothing
/// else) of contributions from several stages and makes each stage's part
/// its own: the tree's adds leave the stages (stageOf), and the parts of
/// one stage are summed by new adds in that stage. Without this, the later
/// stage's contribution would cross to the stage of the final add with
/// every micro-batch: a tied embedding's head gradient, [vocabulary,
/// hidden], sent down the pipeline M times a step.
void splitCrossStageGradientSums(func::FuncOp function, StageCut &cut) {
  Block &body = function.getBody().front();
  Operation *terminator = body.getTerminator();
  for (unsigned index = 1; index < terminator->getNumOperands(); ++index) {
    Value gradient = terminator->getOperand(index);
    auto root = gradient.getDefiningOp<tess::AddOp>();
    if (!root || !cut.stageOf.count(root) || !gradient.hasOneUse())
      continue;
    // The tree's adds and its leaves, the leaves by stage.
    SmallVector<Operation *> adds;
    std::map<int64_t, SmallVector<Value>> leaves;
    SmallVector<Value> pending = {gradient};
    bool complete = true;
    while (!pending.empty() && complete) {
      Value value = pending.pop_back_val();
      auto add = value.getDefiningOp<tess::AddOp>();
      bool inner = add && cut.stageOf.count(add) &&
                   (value == gradient || value.hasOneUse()) &&
                   add.getLhs().getType() == add.getType() &&
                   add.getRhs().getType() == add.getType();
      if (inner) {
        adds.push_back(add);
        pending.push_back(add.getRhs());
        pending.push_back(add.getLhs());
        continue;
      }
      Operation *producer = value.getDefiningOp();
      if (!producer || !cut.stageOf.count(producer)) {
        complete = false; // an argument or a constant: keep the sum
        break;
      }
      leaves[cut.stageOf.lookup(producer)].push_back(value);
    }
    if (!complete || leaves.size() < 2)
      continue;
    for (Operation *add : adds)
      cut.stageOf.erase(add);
    OpBuilder builder(terminator);
    for (auto &[stage, parts] : leaves) {
      Value sum = parts.front();
      for (Value part : llvm::drop_begin(parts)) {
        sum = tess::AddOp::create(builder, root.getLoc(), sum.getType(), sum,
                                  part);
        cut.stageOf[sum.getDefiningOp()] = stage;
        cut.partAdds.push_back(sum.getDefiningOp());
      }
      cut.partialGradients[index].push_back({stage, sum});
    }
  }
}

/// ProgramUnits puts a parameter-only op (ProgramUnits::parameterOnly) with
/// the first unit of its parameter, so the head's [vocabulary, hidden]
/// padded copy of a tied embedding would be computed by the first stage and
/// sent to the last with every micro-batch, and every weight's cast would
/// be computed again, and saved for the backward, per micro-batch. Instead
/// each stage computes the parameter-only values it reads once a step, in
/// its prepare function (cut.prepareOps), and its forward and backward
/// read them as resident arguments (cut.residents).
void prepareParameterOnlyValues(const pipeline::ProgramUnits &units,
                                StageCut &cut) {
  const llvm::DenseSet<Operation *> &parameterOnly = units.parameterOnly;
  func::FuncOp function = units.forwardBackward;
  Block &body = function.getBody().front();
  std::vector<llvm::DenseSet<Operation *>> needed(cut.stageCount);
  std::function<void(Operation *, int64_t)> need = [&](Operation *op,
                                                       int64_t stage) {
    if (!needed[stage].insert(op).second)
      return;
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp();
          producer && parameterOnly.contains(producer))
        need(producer, stage);
  };
  cut.prepareOps.resize(cut.stageCount);
  cut.residents.resize(cut.stageCount);
  for (Operation &op : body.without_terminator()) {
    auto found = cut.stageOf.find(&op);
    if (found == cut.stageOf.end())
      continue;
    for (Value operand : op.getOperands())
      if (Operation *producer = operand.getDefiningOp();
          producer && parameterOnly.contains(producer)) {
        need(producer, found->second);
        cut.residents[found->second].insert(operand);
      }
  }
  for (Operation &op : body.without_terminator())
    if (parameterOnly.contains(&op))
      for (int64_t stage = 0; stage < cut.stageCount; ++stage)
        if (needed[stage].contains(&op))
          cut.prepareOps[stage].push_back(&op);
}

struct SplitPipelineStagesPass
    : tessera::impl::SplitPipelineStagesBase<SplitPipelineStagesPass> {
  using SplitPipelineStagesBase::SplitPipelineStagesBase;

  void runOnOperation() override;

private:
  /// The module's tess.plan, or null (then the options decide).
  tess::PlanAttr plan;
  /// Pipeline devices and chunks per device: the plan's, or the options'.
  int64_t deviceCount = 1, chunksPerDevice = 1;

  /// Assigns ops to stages and finds what crosses between functions.
  FailureOr<StageCut> cut(const pipeline::ProgramUnits &units);
  /// Builds one stage function: `arguments` first (each with the unit
  /// attribute `argumentRole`), then whatever program arguments `ops` read;
  /// results are `results` with their attributes.
  func::FuncOp
  buildFunction(OpBuilder &builder, func::FuncOp source, StringRef name,
                int64_t stage, ArrayRef<Value> arguments,
                ArrayRef<StringRef> argumentRoles, ArrayRef<Operation *> ops,
                ArrayRef<std::pair<Value, NamedAttribute>> results);
};

FailureOr<StageCut>
SplitPipelineStagesPass::cut(const pipeline::ProgramUnits &units) {
  func::FuncOp function = units.forwardBackward;
  int64_t unitCount = static_cast<int64_t>(units.units.size());
  StageCut result;
  result.stageCount = deviceCount * chunksPerDevice;
  if (result.stageCount > unitCount) {
    function.emitError("tess-split-pipeline-stages: ")
        << deviceCount << " stages x " << chunksPerDevice << " virtual = "
        << result.stageCount << " pipeline stages, but the program has only "
        << unitCount << " units to cut (embedding, "
        << units.layerCount() << " layers, head)";
    return failure();
  }
  // The plan's chunks where it has them (its verifier checked their count
  // and order), otherwise as equal a unit count per stage as possible.
  SmallVector<int64_t> &firstUnit = result.firstUnit;
  if (plan && !plan.getChunks().empty()) {
    for (tess::ChunkAttr chunk : plan.getChunks())
      firstUnit.push_back(chunk.getFirst());
    int64_t planned = plan.getChunks().back().getLast() + 1;
    if (planned != unitCount) {
      function.emitError("tess-split-pipeline-stages: the plan's chunks "
                         "cover units 0 to ")
          << planned - 1 << ", the program has " << unitCount
          << " units (embedding, " << units.layerCount() << " layers, head)";
      return failure();
    }
    firstUnit.push_back(unitCount);
  } else {
    firstUnit = firstUnitOfStage(unitCount, result.stageCount);
  }
  auto stageOfUnit = [&](int64_t unit) {
    int64_t stage = 0;
    while (firstUnit[stage + 1] <= unit)
      ++stage;
    return stage;
  };
  size_t count = result.stageCount;
  result.forwardOps.resize(count);
  result.backwardOps.resize(count);
  result.activations.resize(count);
  result.activationGradients.resize(count);
  result.saved.resize(count);

  Block &body = function.getBody().front();
  for (Operation &op : body.without_terminator())
    if (!llvm::isa<tess::ConstantOp>(op))
      result.stageOf[&op] = stageOfUnit(units.unitOf.lookup(&op));
  keepGradientsWithParameters(units, result.stageOf);
  splitCrossStageGradientSums(function, result);
  lowerSingleGradientOps(units, result.stageOf);
  for (Operation *op : units.parameterOnly)
    result.stageOf.erase(op);
  prepareParameterOnlyValues(units, result);
  for (Operation &op : body.without_terminator()) {
    auto found = result.stageOf.find(&op);
    if (found != result.stageOf.end())
      (units.isBackward.lookup(&op) ? result.backwardOps
                                    : result.forwardOps)[found->second]
          .push_back(&op);
  }

  // Each value's readers: a forward value read by a later stage passes
  // every boundary up to its last reader; a backward value read by an
  // earlier stage passes every boundary down to its first reader.
  for (Operation &op : body.without_terminator()) {
    auto found = result.stageOf.find(&op);
    if (found == result.stageOf.end())
      continue;
    int64_t stage = found->second;
    bool backward = units.isBackward.lookup(&op);
    for (Value value : op.getResults()) {
      int64_t last = stage, first = stage;
      for (OpOperand &use : value.getUses()) {
        Operation *reader = use.getOwner();
        // The terminator, and the adds of a gradient split into parts.
        if (reader == body.getTerminator() || !result.stageOf.count(reader))
          continue;
        int64_t readerStage = result.stageOf.lookup(reader);
        bool readerBackward = units.isBackward.lookup(reader);
        if ((!backward && readerStage < stage) ||
            (backward && (!readerBackward || readerStage > stage))) {
          InFlightDiagnostic diagnostic = reader->emitError(
              "tess-split-pipeline-stages: this op of pipeline stage ");
          diagnostic << readerStage << " reads a value of stage " << stage
                     << " that a pipeline cannot deliver to it";
          diagnostic.attachNote(op.getLoc()) << "the value is defined here";
          return failure();
        }
        last = std::max(last, readerStage);
        first = std::min(first, readerStage);
        if (!backward && readerBackward)
          result.saved[readerStage].insert(value);
      }
      for (int64_t boundary = stage + 1; !backward && boundary <= last;
           ++boundary)
        result.activations[boundary].insert(value);
      for (int64_t boundary = stage; backward && boundary > first; --boundary)
        result.activationGradients[boundary].insert(value);
    }
  }
  return result;
}

func::FuncOp SplitPipelineStagesPass::buildFunction(
    OpBuilder &builder, func::FuncOp source, StringRef name, int64_t stage,
    ArrayRef<Value> arguments, ArrayRef<StringRef> argumentRoles,
    ArrayRef<Operation *> ops,
    ArrayRef<std::pair<Value, NamedAttribute>> results) {
  MLIRContext *context = &getContext();
  Location location = source.getLoc();
  auto function = func::FuncOp::create(builder, location, name,
                                       FunctionType::get(context, {}, {}));
  Block *body = function.addEntryBlock();
  OpBuilder inside = OpBuilder::atBlockBegin(body);
  IRMapping mapping;
  SmallVector<DictionaryAttr> argumentAttributes;
  for (auto [value, role] : llvm::zip_equal(arguments, argumentRoles)) {
    mapping.map(value, body->addArgument(value.getType(), location));
    argumentAttributes.push_back(DictionaryAttr::get(
        context, {NamedAttribute(role, UnitAttr::get(context))}));
  }
  // Program arguments (parameters, buffers, inputs) and constants are
  // brought in where first read.
  auto bring = [&](Value value) {
    if (mapping.contains(value))
      return;
    if (auto argument = llvm::dyn_cast<BlockArgument>(value)) {
      mapping.map(value, body->addArgument(value.getType(), location));
      argumentAttributes.push_back(
          source.getArgAttrDict(argument.getArgNumber()));
    } else if (isConstant(value)) {
      inside.clone(*value.getDefiningOp(), mapping);
    }
  };
  for (Operation *op : ops) {
    for (Value operand : op->getOperands())
      bring(operand);
    inside.clone(*op, mapping);
  }
  SmallVector<Value> returned;
  SmallVector<Type> resultTypes;
  for (const auto &[value, attribute] : results) {
    bring(value);
    returned.push_back(mapping.lookup(value));
    resultTypes.push_back(value.getType());
  }
  func::ReturnOp::create(inside, location, returned);
  function.setFunctionType(
      FunctionType::get(context, body->getArgumentTypes(), resultTypes));
  for (auto [index, attributes] : llvm::enumerate(argumentAttributes))
    if (attributes)
      function.setArgAttrs(index, attributes);
  for (auto [index, result] : llvm::enumerate(results))
    function.setResultAttrs(index, DictionaryAttr::get(context, {result.second}));
  function->setAttr("tess.pipeline_stage", builder.getI64IntegerAttr(stage));
  function->setAttr("tess.pipeline_device",
                    builder.getI64IntegerAttr(stage % deviceCount));
  return function;
}

void SplitPipelineStagesPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *context = &getContext();
  plan = tess::PlanAttr::lookup(module);
  deviceCount = stages;
  chunksPerDevice = virtualStages;
  if (plan) {
    if (!plan.isPipelined()) {
      module.emitError("tess-split-pipeline-stages: the module's tess.plan "
                       "has no pipeline schedule");
      return signalPassFailure();
    }
    deviceCount = plan.getStages();
    chunksPerDevice = plan.getVirtualStages();
  }
  if (deviceCount < 1 || chunksPerDevice < 1) {
    module.emitError("tess-split-pipeline-stages: stages and virtual must be "
                     "at least 1, got stages=")
        << static_cast<int64_t>(stages)
        << " virtual=" << static_cast<int64_t>(virtualStages);
    return signalPassFailure();
  }
  auto units = pipeline::partitionIntoUnits(module);
  if (!units) {
    module.emitError("tess-split-pipeline-stages: ")
        << llvm::toString(units.takeError());
    return signalPassFailure();
  }
  // tess-rematerialize's clones read forward values only, but they are the
  // backward's: in the stage's backward they recompute from saved inputs,
  // instead of running twice in the forward and being saved. So is every
  // op reading what they recompute (the VJP's reshapes of it).
  llvm::DenseSet<Operation *> recomputed;
  for (Operation &op : units->forwardBackward.getBody().front()) {
    bool readsRecomputed = llvm::any_of(op.getOperands(), [&](Value operand) {
      return recomputed.contains(operand.getDefiningOp());
    });
    if (op.hasAttr("tess.recomputed") ||
        (readsRecomputed && !units->isBackward.lookup(&op))) {
      recomputed.insert(&op);
      units->isBackward[&op] = true;
    }
  }
  FailureOr<StageCut> stageCut = cut(*units);
  if (failed(stageCut))
    return signalPassFailure();
  func::FuncOp source = units->forwardBackward;
  for (int64_t stage = 0; stage < stageCut->stageCount; ++stage)
    for (const char *kind : {"prepare", "forward", "backward"})
      if (module.lookupSymbol(("stage" + llvm::Twine(stage) + "_" + kind).str())) {
        module.emitError("tess-split-pipeline-stages: the module already has "
                         "@stage")
            << stage << "_" << kind << " (was it split before?)";
        return signalPassFailure();
      }

  // Which stage returns each gradient: the one computing it; a gradient
  // that is a constant (a parameter not reaching the loss) is the first
  // stage's.
  auto terminator =
      llvm::cast<func::ReturnOp>(source.getBody().front().getTerminator());
  Value loss = terminator.getOperand(0);
  auto stageOfValue = [&](Value value) -> int64_t {
    Operation *producer = value.getDefiningOp();
    return producer ? stageCut->stageOf.lookup(producer) : 0;
  };

  auto activationRole = StringAttr::get(context, "tess.activation");
  auto gradientRole = StringAttr::get(context, "tess.activation_gradient");
  auto savedRole = StringAttr::get(context, "tess.saved");
  auto residentRole = StringAttr::get(context, "tess.resident");
  auto roles = [](size_t count, StringRef role) {
    return SmallVector<StringRef>(count, role);
  };
  auto withRole = [&](const llvm::SetVector<Value> &values, StringAttr role,
                      SmallVector<std::pair<Value, NamedAttribute>> &into) {
    for (Value value : values)
      into.push_back({value, NamedAttribute(role, UnitAttr::get(context))});
  };

  OpBuilder builder(context);
  builder.setInsertionPointAfter(source);
  int64_t last = stageCut->stageCount - 1;
  for (int64_t stage = 0; stage <= last; ++stage) {
    const llvm::SetVector<Value> &incoming = stageCut->activations[stage];
    const llvm::SetVector<Value> &saved = stageCut->saved[stage];
    const llvm::SetVector<Value> &residents = stageCut->residents[stage];
    SmallVector<std::pair<Value, NamedAttribute>> prepareResults;
    withRole(residents, residentRole, prepareResults);
    buildFunction(builder, source,
                  ("stage" + llvm::Twine(stage) + "_prepare").str(), stage, {},
                  {}, stageCut->prepareOps[stage], prepareResults);

    SmallVector<std::pair<Value, NamedAttribute>> forwardResults;
    if (stage < last)
      withRole(stageCut->activations[stage + 1], activationRole,
               forwardResults);
    withRole(saved, savedRole, forwardResults);
    if (loss.getDefiningOp() && stageOfValue(loss) == stage)
      forwardResults.push_back(
          {loss, NamedAttribute(StringAttr::get(context, "tess.loss"),
                                UnitAttr::get(context))});
    // Both calls take every resident value, the prepare's results in
    // order, whether or not they read it: the driver passes one list.
    SmallVector<Value> forwardArguments(residents.begin(), residents.end());
    forwardArguments.append(incoming.begin(), incoming.end());
    SmallVector<StringRef> forwardRoles =
        roles(residents.size(), residentRole.getValue());
    forwardRoles.append(roles(incoming.size(), activationRole.getValue()));
    buildFunction(builder, source,
                  ("stage" + llvm::Twine(stage) + "_forward").str(), stage,
                  forwardArguments, forwardRoles, stageCut->forwardOps[stage],
                  forwardResults);

    SmallVector<Value> backwardArguments(residents.begin(), residents.end());
    backwardArguments.append(saved.begin(), saved.end());
    SmallVector<StringRef> backwardRoles =
        roles(residents.size(), residentRole.getValue());
    backwardRoles.append(roles(saved.size(), savedRole.getValue()));
    if (stage < last) {
      const llvm::SetVector<Value> &gradients =
          stageCut->activationGradients[stage + 1];
      backwardArguments.append(gradients.begin(), gradients.end());
      backwardRoles.append(roles(gradients.size(), gradientRole.getValue()));
    }
    SmallVector<std::pair<Value, NamedAttribute>> backwardResults;
    if (stage > 0)
      withRole(stageCut->activationGradients[stage], gradientRole,
               backwardResults);
    for (unsigned index = 1; index < terminator.getNumOperands(); ++index) {
      Value gradient = terminator.getOperand(index);
      auto parts = stageCut->partialGradients.find(index);
      if (parts != stageCut->partialGradients.end()) {
        gradient = nullptr;
        for (auto [partStage, part] : parts->second)
          if (partStage == stage)
            gradient = part;
        if (!gradient)
          continue;
      } else if (stageOfValue(gradient) != stage) {
        continue;
      }
      auto name = source.getResultAttrOfType<StringAttr>(index, "tess.gradient");
      backwardResults.push_back(
          {gradient,
           NamedAttribute(StringAttr::get(context, "tess.gradient"),
                          name ? name : StringAttr::get(context, ""))});
    }
    buildFunction(builder, source,
                  ("stage" + llvm::Twine(stage) + "_backward").str(), stage,
                  backwardArguments, backwardRoles,
                  stageCut->backwardOps[stage], backwardResults);
  }
  for (Operation *add : llvm::reverse(stageCut->partAdds))
    add->erase();
  module->setAttr(
      "tess.pipeline",
      DictionaryAttr::get(
          context,
          {NamedAttribute(StringAttr::get(context, "stages"),
                          builder.getI64IntegerAttr(deviceCount)),
           NamedAttribute(StringAttr::get(context, "virtual"),
                          builder.getI64IntegerAttr(chunksPerDevice))}));
  if (plan) {
    // The plan's chunks (where it has them) are the cut: their remat stays.
    ArrayRef<tess::ChunkAttr> planned = plan.getChunks();
    SmallVector<tess::ChunkAttr> chunks;
    for (int64_t chunk = 0; chunk < stageCut->stageCount; ++chunk)
      chunks.push_back(tess::ChunkAttr::get(
          context, chunk % deviceCount, stageCut->firstUnit[chunk],
          stageCut->firstUnit[chunk + 1] - 1,
          chunk < static_cast<int64_t>(planned.size())
              ? planned[static_cast<size_t>(chunk)].getRemat()
              : StringRef()));
    module->setAttr("tess.plan", plan.withChunks(chunks));
  }
}

} // namespace
