//===- UnitProfile.cpp - profiling each distinct layer once ---------------===//

#include "tessera/Pipeline/UnitProfile.h"

#include "Tess/IR/TessOps.h"
#include "Tess/IR/TessShardingLabels.h"
#include "tessera/Analysis/MegatronPartition.h"
#include "tessera/Analysis/StepMemory.h"
#include "tessera/Pipeline/Remat.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <set>

using namespace mlir;

namespace tessera::pipeline {
namespace {

llvm::Error profileError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "pipeline: " + message);
}

double bytesOf(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.getElementType().isIntOrFloat())
    return 0;
  return static_cast<double>(type.getNumElements()) *
         ((type.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

std::vector<int64_t> shapeOf(Value value) {
  auto type = llvm::dyn_cast<RankedTensorType>(value.getType());
  return type ? std::vector<int64_t>(type.getShape().begin(),
                                     type.getShape().end())
              : std::vector<int64_t>();
}

/// The two programs side by side: an op of the batch-1 program and its twin
/// at batch 2, and the per-unit op lists.
struct Twins {
  mutable func::FuncOp one, two;
  llvm::DenseMap<Operation *, Operation *> twinOf;

  Value twin(Value value) const {
    if (auto argument = llvm::dyn_cast<BlockArgument>(value))
      return two.getArgument(argument.getArgNumber());
    auto result = llvm::cast<OpResult>(value);
    return twinOf.lookup(result.getOwner())->getResult(result.getResultNumber());
  }
  /// The batch of the first program; the second has one sample more.
  double firstBatch = 1;

  /// The line through (firstBatch, first) and (firstBatch + 1, second).
  Affine line(double first, double second) const {
    double perSample = second - first;
    return {first - (firstBatch - 1) * perSample, perSample};
  }
  Affine bytes(Value value) const {
    return line(bytesOf(value), bytesOf(twin(value)));
  }
  Affine elements(Value value) const {
    auto count = [](Value of) {
      return static_cast<double>(
          llvm::cast<RankedTensorType>(of.getType()).getNumElements());
    };
    return line(count(value), count(twin(value)));
  }
};

bool isParameterArgument(Value value, func::FuncOp function) {
  auto argument = llvm::dyn_cast<BlockArgument>(value);
  return argument &&
         function.getArgAttr(argument.getArgNumber(), "tess.parameter");
}

/// A master weight or its cast to the compute precision: resident state,
/// not an activation.
bool isWeight(Value value, func::FuncOp function) {
  if (auto cast = value.getDefiningOp<tess::CastOp>())
    value = cast.getInput();
  return isParameterArgument(value, function);
}

/// A value the memory model counts as an activation buffer (reshapes are
/// views of their input: the caller passes roots). A value computed from
/// parameters alone (the LM head's padded copy of a tied embedding) is a
/// stage's resident, prepared once a step, not an activation.
bool isActivation(Value value, const pipeline::ProgramUnits &units) {
  func::FuncOp function = units.forwardBackward;
  if (isWeight(value, function) || llvm::isa<BlockArgument>(value))
    return false;
  Operation *producer = value.getDefiningOp();
  return !llvm::isa<tess::ConstantOp>(producer) &&
         !units.parameterOnly.contains(producer);
}

Value rootOf(Value value) {
  while (auto reshape = value.getDefiningOp<tess::ReshapeOp>())
    value = reshape.getInput();
  return value;
}

OpRecord recordOf(Operation *op, const Twins &twins, bool tensorParallel) {
  cost::OpCost one = cost::estimateOpCost(op);
  cost::OpCost two = cost::estimateOpCost(twins.twinOf.lookup(op));
  OpRecord record;
  record.kind = one.kind;
  record.usesMatrixUnits = one.usesMatrixUnits;
  record.precision = one.precision;
  record.flops = twins.line(one.flops, two.flops);
  record.modelFlops = twins.line(one.modelFlops, two.modelFlops);
  record.bytes = twins.line(one.bytes, two.bytes);
  record.m = twins.line(one.m, two.m);
  record.n = twins.line(one.n, two.n);
  record.k = twins.line(one.k, two.k);
  record.tensorParallel = tensorParallel;
  return record;
}

void addBytes(TensorBytes &total, const Affine &bytes, bool split) {
  (split ? total.split : total.replicated) += bytes;
}

/// Bytes of the compute-precision copies `function` makes of its parameters
/// (their casts): weights, not activations, in the stages' memory.
double parameterCastBytes(func::FuncOp function) {
  double bytes = 0;
  function.walk([&](tess::CastOp cast) {
    auto argument = llvm::dyn_cast<BlockArgument>(cast.getInput());
    auto type = llvm::cast<RankedTensorType>(cast.getType());
    if (argument && argument.getOwner()->getParentOp() == function &&
        function.getArgAttr(argument.getArgNumber(), "tess.parameter"))
      bytes += static_cast<double>(type.getNumElements()) *
               (type.getElementTypeBitWidth() / 8);
  });
  return bytes;
}

ParameterSplit splitOf(const MegatronPartition &partition,
                       unsigned argument) {
  if (partition.isVocabularyTable(argument))
    return ParameterSplit::Vocabulary;
  return partition.splitsParameter(argument) ? ParameterSplit::TensorParallel
                                             : ParameterSplit::Replicated;
}

} // namespace

double ProgramProfile::heldElements(double elements, ParameterSplit split,
                                    int64_t tensorParallel) const {
  int64_t divisor = split == ParameterSplit::TensorParallel ? tensorParallel
                    : split == ParameterSplit::Vocabulary
                        ? vocabularyDivisor(tensorParallel)
                        : 1;
  auto block = static_cast<int64_t>(std::ceil(elements / divisor));
  return static_cast<double>(TrainingStateBytes::sliceElements(block));
}

double OpRecord::time(const cost::DeviceModel &device, double batch,
                      int64_t tensorParallelDegree) const {
  if (kind == cost::OpKind::Free)
    return 0;
  double divisor = tensorParallel ? tensorParallelDegree : 1;
  std::array<double, 3> dims = {m.at(batch), n.at(batch), k.at(batch)};
  if (divisor > 1) {
    // The weight's dims are those that do not grow with the batch.
    std::array<double, 3> slopes = {m.perSample, n.perSample, k.perSample};
    int split = -1;
    for (int d = 0; d < 3; ++d)
      if (slopes[d] == 0 && (split < 0 || dims[d] > dims[split]))
        split = d;
    if (split >= 0)
      dims[split] /= divisor;
  }
  return cost::kernelTime(device, kind, usesMatrixUnits, precision,
                          flops.at(batch) / divisor, bytes.at(batch) / divisor,
                          dims[0], dims[1], dims[2]);
}

llvm::Expected<ProgramProfile> profileProgram(ModuleOp first,
                                              ModuleOp second,
                                              int64_t firstBatch) {
  llvm::Expected<ProgramUnits> unitsOne = partitionIntoUnits(first);
  if (!unitsOne)
    return unitsOne.takeError();
  llvm::Expected<ProgramUnits> unitsTwo = partitionIntoUnits(second);
  if (!unitsTwo)
    return unitsTwo.takeError();

  Twins twins;
  twins.one = unitsOne->forwardBackward;
  twins.two = unitsTwo->forwardBackward;
  twins.firstBatch = static_cast<double>(firstBatch);
  func::FuncOp function = twins.one;
  Block &bodyOne = twins.one.getBody().front();
  Block &bodyTwo = twins.two.getBody().front();
  if (bodyOne.getOperations().size() != bodyTwo.getOperations().size() ||
      unitsOne->units.size() != unitsTwo->units.size())
    return profileError("the programs at two batch sizes differ in structure");
  for (auto [opOne, opTwo] : llvm::zip(bodyOne, bodyTwo)) {
    if (opOne.getName() != opTwo.getName())
      return profileError("the programs at two batch sizes differ at " +
                          opOne.getName().getStringRef());
    twins.twinOf[&opOne] = &opTwo;
  }

  ProgramProfile profile;
  profile.units = unitsOne->units;
  size_t unitCount = profile.units.size();
  Operation *terminator = bodyOne.getTerminator();
  auto unitOf = [&](Operation *op) { return unitsOne->unitOf.lookup(op); };
  auto isBackward = [&](Operation *op) {
    return unitsOne->isBackward.lookup(op);
  };
  std::vector<std::vector<Operation *>> opsOfUnit(unitCount);
  for (Operation &op : bodyOne)
    if (&op != terminator)
      opsOfUnit[unitOf(&op)].push_back(&op);

  // Megatron's tensor-parallel partition of the forward (file comment):
  // the one a stage mesh compiles (MegatronPartition.h).
  MegatronPartition partition = megatronPartition(function);
  llvm::DenseSet<Value> split;
  llvm::DenseMap<Operation *, std::vector<Affine>> forwardAllReduce,
      backwardAllReduce, backwardAllGather;
  llvm::DenseMap<Operation *, std::vector<int64_t>> divisors;
  for (Operation &op : bodyOne) {
    if (&op == terminator || isBackward(&op))
      continue;
    auto splitOperand = [&](Value value) { return split.contains(value); };
    // The op's roles in Megatron's recipe come from its sharding labels.
    tess::ShardingLabels labels = tess::shardingLabels(&op);
    const tess::NamedSplit *column =
        labels.splitWithRole(tess::SplitRole::ColumnParallel);
    const tess::NamedSplit *row =
        labels.splitWithRole(tess::SplitRole::RowParallel);
    if (column && row) {
      // A linear layer; its activation is the first operand. The LM head
      // is column-parallel over the vocabulary; a linear in no block of the
      // partition runs whole.
      Value input = op.getOperand(0);
      if (partition.isRow(&op) && split.contains(input)) {
        forwardAllReduce[&op].push_back(twins.bytes(op.getResult(0)));
        divisors[&op].push_back(labels.sizeOf(&op, row->label));
      } else if ((partition.isColumn(&op) || partition.isVocabularyHead(&op)) &&
                 !split.contains(input)) {
        split.insert(op.getResult(0));
        backwardAllReduce[&op].push_back(twins.bytes(input));
        divisors[&op].push_back(labels.sizeOf(&op, column->label));
        // A head reading a padded copy of its weight: each rank takes its
        // block of the copy, and the weight's gradient is gathered whole.
        if (partition.readsPaddedCopy(&op))
          backwardAllGather[&op].push_back(twins.bytes(op.getOperand(1)));
      }
      continue;
    }
    if (const tess::NamedSplit *vocabulary =
            labels.splitWithRole(tess::SplitRole::VocabularyParallel)) {
      // The table is the operand with the vocabulary; the ids the other.
      unsigned tableIndex = llvm::is_contained(labels.operands[0],
                                               vocabulary->label)
                                ? 0
                                : 1;
      Value table = op.getOperand(tableIndex);
      Value indices = op.getOperand(1 - tableIndex);
      auto argument = llvm::dyn_cast<BlockArgument>(indices);
      auto role = argument ? function.getArgAttrOfType<StringAttr>(
                                 argument.getArgNumber(), "tess.input")
                           : StringAttr();
      if (role && role.getValue() == "input_ids") {
        // A vocabulary-parallel lookup's result is a partial sum.
        if (partition.isVocabularyParallel(&op))
          forwardAllReduce[&op].push_back(twins.bytes(op.getResult(0)));
        profile.vocabulary = labels.sizeOf(&op, vocabulary->label);
        auto tableType = llvm::cast<RankedTensorType>(table.getType());
        profile.width = tableType.getShape().back();
        profile.sequence = llvm::cast<RankedTensorType>(argument.getType())
                               .getShape()
                               .back();
      }
      continue;
    }
    if (auto loss = llvm::dyn_cast<tess::CrossEntropyOp>(op);
        loss && split.contains(loss.getLogits())) {
      // The vocabulary-parallel loss: each row's maximum, exponent sum and
      // target logit all-reduced in f32, the first two again for the
      // gradient (VocabularyParallelLoss.h).
      Affine rowBytes = twins.elements(loss.getTargets()) * 4;
      forwardAllReduce[&op].assign(3, rowBytes);
      backwardAllReduce[&op].assign(2, rowBytes);
      continue;
    }
    if (const tess::NamedSplit *heads =
            labels.splitWithRole(tess::SplitRole::Heads)) {
      // Each head count (query heads, grouped K/V heads) once, in order.
      std::vector<int64_t> &sizes = divisors[&op];
      for (auto [index, list] : llvm::enumerate(labels.operands))
        for (auto [dim, label] : llvm::enumerate(list))
          if (label == heads->label) {
            int64_t size = llvm::cast<RankedTensorType>(
                               op.getOperand(index).getType())
                               .getDimSize(dim);
            if (!llvm::is_contained(sizes, size))
              sizes.push_back(size);
          }
    }
    if (llvm::any_of(op.getOperands(), splitOperand))
      for (Value result : op.getResults())
        if (auto type = llvm::dyn_cast<RankedTensorType>(result.getType());
            type && type.getRank() > 0)
          split.insert(result);
  }
  auto divided = [&](Value value) { return split.contains(value); };

  // Activations the backward reads: roots of the forward values it uses,
  // each kept by the first unit whose backward reads it (a layer's input,
  // which the layer before made, is kept by the layer: a pipeline stage
  // stashes what its own backward reads, a value that crossed from the
  // stage before included).
  llvm::DenseSet<Value> saved;
  llvm::DenseMap<Value, unsigned> keptBy;
  for (Operation &op : bodyOne)
    if (&op != terminator && isBackward(&op))
      for (Value operand : op.getOperands()) {
        Value root = rootOf(operand);
        Operation *producer = root.getDefiningOp();
        if (!producer || isBackward(producer) ||
            !isActivation(root, *unitsOne))
          continue;
        saved.insert(root);
        unsigned reader = unitOf(&op);
        auto [entry, inserted] = keptBy.try_emplace(root, reader);
        if (!inserted)
          entry->second = std::min(entry->second, reader);
      }

  // The activations crossing each cut between units.
  profile.boundary.assign(unitCount, Affine());
  for (Operation &op : bodyOne) {
    if (&op == terminator || isBackward(&op) ||
        llvm::isa<tess::ReshapeOp, tess::ConstantOp>(op))
      continue;
    unsigned defined = unitOf(&op);
    for (Value result : op.getResults()) {
      if (!isActivation(result, *unitsOne))
        continue;
      unsigned lastUse = defined;
      llvm::SmallVector<Value> views = {result};
      while (!views.empty()) {
        Value view = views.pop_back_val();
        for (Operation *user : view.getUsers()) {
          if (user == terminator || isBackward(user))
            continue;
          if (auto reshape = llvm::dyn_cast<tess::ReshapeOp>(user))
            views.push_back(reshape.getResult());
          lastUse = std::max(lastUse, unitOf(user));
        }
      }
      for (unsigned unit = defined + 1; unit <= lastUse; ++unit)
        profile.boundary[unit] += twins.bytes(result);
    }
  }

  for (BlockArgument argument : function.getArguments())
    if (function.getArgAttr(argument.getArgNumber(), "tess.input") &&
        !shapeOf(argument).empty())
      profile.inputs += twins.bytes(argument);

  // AdamW and the weight casts of each parameter, by argument number.
  llvm::StringMap<unsigned> argumentOfName;
  for (BlockArgument argument : function.getArguments())
    if (auto name = function.getArgAttrOfType<StringAttr>(
            argument.getArgNumber(), "tess.parameter"))
      argumentOfName[name.getValue()] = argument.getArgNumber();
  // The backward's share of a split linear: the products that read its
  // split weight (dx), and those whose result is returned, through sums,
  // views and casts, as a split parameter's gradient (dW). A whole linear's
  // (the LM head's) run whole.
  auto readsSplitWeight = [&](Value operand) {
    BlockArgument argument = parameterArgument(operand);
    return argument && partition.splitsParameter(argument.getArgNumber()) &&
           !partition.isVocabularyTable(argument.getArgNumber());
  };
  llvm::DenseSet<Operation *> splitGradientOps;
  for (OpOperand &returned : terminator->getOpOperands()) {
    auto name = function.getResultAttrOfType<StringAttr>(
        returned.getOperandNumber(), "tess.gradient");
    auto argument = name ? argumentOfName.find(name.getValue())
                         : argumentOfName.end();
    if (argument == argumentOfName.end() ||
        !readsSplitWeight(function.getArgument(argument->second)))
      continue;
    llvm::SmallVector<Value> pending = {returned.get()};
    while (!pending.empty()) {
      Operation *producer = pending.pop_back_val().getDefiningOp();
      if (!producer || !splitGradientOps.insert(producer).second)
        continue;
      if (llvm::isa<tess::AddOp, tess::ReshapeOp, tess::TransposeOp,
                    tess::CastOp>(producer))
        pending.append(producer->operand_begin(), producer->operand_end());
    }
  }
  llvm::DenseMap<unsigned, std::vector<Operation *>> stepOpsOfArgument;
  unitsOne->optimizerStep.walk([&](tess::AdamWOp adamw) {
    auto argument = llvm::dyn_cast<BlockArgument>(adamw.getParam());
    if (!argument)
      return;
    if (auto name = unitsOne->optimizerStep.getArgAttrOfType<StringAttr>(
            argument.getArgNumber(), "tess.parameter"))
      if (auto found = argumentOfName.find(name.getValue());
          found != argumentOfName.end())
        stepOpsOfArgument[found->second].push_back(adamw);
  });
  for (Operation &op : bodyOne)
    if (auto cast = llvm::dyn_cast<tess::CastOp>(op))
      if (isParameterArgument(cast.getInput(), function))
        stepOpsOfArgument[llvm::cast<BlockArgument>(cast.getInput())
                              .getArgNumber()]
            .push_back(cast);

  // A unit reading a value computed from parameters alone (the LM head's
  // padded copy of a tied embedding) holds those parameters: its stage's
  // prepare computes the value, and its backward returns their gradient's
  // part.
  std::vector<llvm::DenseSet<unsigned>> heldThroughPrepared(unitCount);
  for (size_t unit = 0; unit < unitCount; ++unit) {
    auto &held = profile.units[unit].parameters;
    llvm::SmallVector<Value> pending;
    llvm::DenseSet<Value> visited;
    for (Operation *op : opsOfUnit[unit])
      for (Value operand : op->getOperands())
        if (Operation *producer = operand.getDefiningOp();
            producer && unitsOne->parameterOnly.contains(producer))
          pending.push_back(operand);
    while (!pending.empty()) {
      Value value = pending.pop_back_val();
      if (!visited.insert(value).second)
        continue;
      if (isParameterArgument(value, function)) {
        unsigned argument = llvm::cast<BlockArgument>(value).getArgNumber();
        if (!llvm::is_contained(held, argument)) {
          held.push_back(argument);
          heldThroughPrepared[unit].insert(argument);
        }
        continue;
      }
      if (Operation *producer = value.getDefiningOp();
          producer && unitsOne->parameterOnly.contains(producer))
        pending.append(producer->operand_begin(), producer->operand_end());
    }
  }

  // A parameter's gradient, or a part summed into one, goes to the
  // driver's gradient buffers, not the arena (the lowering writes a
  // returned value in place; the split pass returns each stage's part).
  llvm::DenseMap<Value, bool> gradientOnly;
  std::function<bool(Value)> returnedAsGradient = [&](Value value) -> bool {
    if (value.use_empty())
      return false;
    auto found = gradientOnly.find(value);
    if (found != gradientOnly.end())
      return found->second;
    gradientOnly[value] = false;
    bool result = llvm::all_of(value.getUsers(), [&](Operation *user) {
      return user == terminator ||
             (llvm::isa<tess::AddOp>(user) &&
              returnedAsGradient(user->getResult(0)));
    });
    gradientOnly[value] = result;
    return result;
  };

  // One profile per distinct structure.
  std::map<std::string, unsigned> structureOfSignature;
  for (size_t unit = 0; unit < unitCount; ++unit) {
    std::string signature;
    llvm::raw_string_ostream stream(signature);
    for (Operation *op : opsOfUnit[unit]) {
      stream << op->getName() << (isBackward(op) ? "'" : "") << "(";
      for (Type type : op->getResultTypes())
        stream << type << ",";
      stream << ")";
    }
    for (unsigned parameter : profile.units[unit].parameters)
      stream << ";" << function.getArgument(parameter).getType();
    auto [found, inserted] =
        structureOfSignature.try_emplace(signature, profile.structures.size());
    profile.structureOf.push_back(found->second);
    if (!inserted)
      continue;

    UnitProfile unitProfile;
    unitProfile.signature = signature;
    const std::vector<Operation *> &ops = opsOfUnit[unit];
    llvm::DenseSet<Operation *> inUnit(ops.begin(), ops.end());

    // Shapes only split forward values of the unit have.
    std::set<std::vector<int64_t>> splitShapes, wholeShapes;
    for (Operation *op : ops)
      if (!isBackward(op))
        for (Value result : op->getResults())
          if (isActivation(result, *unitsOne) && !shapeOf(result).empty())
            (divided(result) ? splitShapes : wholeShapes)
                .insert(shapeOf(result));
    for (const std::vector<int64_t> &shape : wholeShapes)
      splitShapes.erase(shape);
    auto isSplitValue = [&](Value value) {
      return divided(value) || splitShapes.count(shapeOf(value));
    };

    // What selective recomputation re-runs and stops keeping: the rule the
    // program transformation applies (tess-rematerialize), so the planner
    // prices the rewrite it gets. The embedding and the head keep all.
    LayerRecomputation selective;
    if (profile.units[unit].kind == UnitKind::Layer)
      selective = planLayerRecomputation(*unitsOne, unit, RematMode::Selective);
    llvm::DenseSet<Value> recomputedValues(selective.values.begin(),
                                           selective.values.end());
    llvm::DenseSet<Operation *> recomputedForward(selective.ops.begin(),
                                                  selective.ops.end());

    llvm::DenseSet<Value> unitInputs;
    for (Operation *op : ops) {
      if (isBackward(op)) {
        bool tensorParallel =
            splitGradientOps.contains(op) ||
            llvm::any_of(op->getOperands(), readsSplitWeight) ||
            llvm::any_of(op->getResults(), isSplitValue) ||
            llvm::any_of(op->getOperands(), [&](Value operand) {
              return isActivation(operand, *unitsOne) && isSplitValue(operand);
            });
        OpRecord record = recordOf(op, twins, tensorParallel);
        if (record.kind != cost::OpKind::Free)
          unitProfile.backward.push_back(record);
        continue;
      }
      if (auto cast = llvm::dyn_cast<tess::CastOp>(op);
          cast && isParameterArgument(cast.getInput(), function))
        continue;
      bool tensorParallel =
          partition.isColumn(op) || partition.isRow(op) ||
          llvm::any_of(op->getResults(), divided) ||
          llvm::any_of(op->getOperands(), divided);
      OpRecord record = recordOf(op, twins, tensorParallel);
      if (record.kind != cost::OpKind::Free)
        unitProfile.forward.push_back(record);
      if (recomputedForward.contains(op) && record.kind != cost::OpKind::Free)
        unitProfile.selectiveRecompute.push_back(record);
      for (const Affine &bytes : forwardAllReduce.lookup(op))
        unitProfile.forwardAllReduces.push_back(bytes);
      for (const Affine &bytes : backwardAllReduce.lookup(op))
        unitProfile.backwardAllReduces.push_back(bytes);
      for (const Affine &bytes : backwardAllGather.lookup(op))
        unitProfile.backwardAllGathers.push_back(bytes);
      for (int64_t divisor : divisors.lookup(op))
        unitProfile.tensorParallelDivisors.push_back(divisor);
      for (Value operand : op->getOperands()) {
        Value root = rootOf(operand);
        Operation *producer = root.getDefiningOp();
        if (!producer || !isActivation(root, *unitsOne))
          continue;
        if (!inUnit.contains(producer))
          unitInputs.insert(root);
      }
    }

    // Saved activations by remat choice, and the largest op working set.
    for (Value value : saved) {
      if (keptBy.lookup(value) != unit)
        continue;
      Affine bytes = twins.bytes(value);
      addBytes(unitProfile.savedAll, bytes, divided(value));
      // savedAll less the values the backward gets from the clones.
      if (!recomputedValues.contains(value))
        addBytes(unitProfile.savedSelective, bytes, divided(value));
    }
    for (Value value : unitInputs)
      addBytes(unitProfile.savedInput, twins.bytes(value), divided(value));
    // The working set: the unit's forward and its backward (chunk
    // functions of one device, which share its one arena) each hold the
    // values neither saved nor returned from their definition to their
    // last reader in the unit (a value read by another unit, the boundary,
    // until the unit's end); the arena holds the larger peak. Recomputing,
    // the backward first re-runs forward ops (all of them, or selective
    // recomputation's), whose results it rebuilds then live in the arena
    // until their last reader in the backward: the sequence of both, the
    // rebuilt saved values included, the clones' results read by no other
    // unit (they serve this backward alone). Reshapes are views of their
    // root.
    auto peakOf = [&](llvm::ArrayRef<Operation *> sequence,
                      const llvm::DenseSet<Value> &rebuilt) {
      llvm::DenseMap<Value, size_t> lastRead;
      for (auto [index, op] : llvm::enumerate(sequence))
        for (Value operand : op->getOperands())
          lastRead[rootOf(operand)] = index;
      TensorBytes live, peak;
      std::vector<std::vector<Value>> freedAfter(sequence.size());
      for (auto [index, op] : llvm::enumerate(sequence)) {
        if (!llvm::isa<tess::ReshapeOp>(op))
          for (Value result : op->getResults()) {
            if (!isActivation(result, *unitsOne) ||
                (saved.contains(result) && !rebuilt.contains(result)) ||
                returnedAsGradient(result))
              continue;
            addBytes(live, twins.bytes(result), isSplitValue(result));
            bool readOutside =
                (rebuilt.empty() || isBackward(op)) &&
                llvm::any_of(result.getUsers(), [&](Operation *user) {
                  return !inUnit.contains(user);
                });
            auto last = lastRead.find(result);
            size_t until = readOutside ? sequence.size() - 1
                           : last == lastRead.end()
                               ? index
                               : std::max(last->second, index);
            freedAfter[until].push_back(result);
          }
        if (live.at(1, 1) > peak.at(1, 1))
          peak = live;
        for (Value value : freedAfter[index]) {
          Affine bytes = twins.bytes(value);
          bytes.atOne = -bytes.atOne;
          bytes.perSample = -bytes.perSample;
          addBytes(live, bytes, isSplitValue(value));
        }
      }
      return peak;
    };
    auto larger = [](const TensorBytes &a, const TensorBytes &b) {
      return a.at(1, 1) > b.at(1, 1) ? a : b;
    };
    llvm::SmallVector<Operation *> forwardOps, backwardOps, selectiveOps;
    for (Operation *op : ops)
      (isBackward(op) ? backwardOps : forwardOps).push_back(op);
    for (Operation *op : forwardOps)
      if (recomputedForward.contains(op))
        selectiveOps.push_back(op);
    selectiveOps.append(backwardOps.begin(), backwardOps.end());
    TensorBytes forwardPeak = peakOf(forwardOps, {});
    unitProfile.working += larger(forwardPeak, peakOf(backwardOps, {}));
    unitProfile.workingSelective +=
        larger(forwardPeak, peakOf(selectiveOps, recomputedValues));
    unitProfile.workingRecomputing +=
        larger(forwardPeak, peakOf(ops, saved));

    // The vocabulary-parallel loss (logits split over their classes) as
    // tess-partition-spmd builds it: it keeps each row's f32 softmax and
    // which class is its target for the backward instead of the logits,
    // and holds three f32 blocks of the logits' shape at once in the
    // forward (the f32 logits, x - max, exp) and three in the backward
    // (softmax * scale, the target's scale, their difference): three in
    // the device's one arena, which the forward and the backward share, in
    // place of the logits in the compute type the fused loss kernel reads
    // (dead once cast to f32).
    for (Operation *op : ops)
      if (auto loss = llvm::dyn_cast<tess::CrossEntropyOp>(op);
          loss && divided(loss.getLogits())) {
        Affine logits = twins.elements(loss.getLogits());
        Affine kept = logits * VocabularyParallelLoss::kKeptBytesPerElement;
        kept += twins.bytes(loss.getLogits()) * -1;
        unitProfile.savedAll.tensorParallelOnly += kept;
        unitProfile.savedSelective.tensorParallelOnly += kept;
        Affine blocks =
            logits * VocabularyParallelLoss::kWorkingBytesPerElement;
        blocks += twins.bytes(loss.getLogits()) * -1;
        unitProfile.working.tensorParallelOnly += blocks;
        unitProfile.workingSelective.tensorParallelOnly += blocks;
        unitProfile.workingRecomputing.tensorParallelOnly += blocks;
      }

    llvm::DenseSet<Value> prepared;
    for (Operation *op : ops)
      for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || !unitsOne->parameterOnly.contains(producer) ||
            isWeight(operand, function) || !prepared.insert(operand).second)
          continue;
        // The LM head's padded weight (1) and bias (2), split over tp with
        // the head; the weight built whole first, beside its source.
        if (partition.isVocabularyHead(op) && index > 0) {
          unitProfile.preparedSplitBytes += bytesOf(operand);
          if (auto concat = llvm::dyn_cast<tess::ConcatOp>(producer);
              concat && index == 1)
            unitProfile.prepareWorking = std::max(
                unitProfile.prepareWorking,
                bytesOf(operand) + bytesOf(concat.getInputs()[0]));
          continue;
        }
        unitProfile.preparedBytes += bytesOf(operand);
      }

    // Parameters and their once-per-step work.
    for (unsigned parameter : profile.units[unit].parameters) {
      auto type =
          llvm::cast<RankedTensorType>(function.getArgument(parameter).getType());
      ParameterSplit split = splitOf(partition, parameter);
      bool splitParameter = split == ParameterSplit::TensorParallel;
      // Its compute copy is the prepared value, counted there.
      unitProfile.parameters.push_back(
          {static_cast<double>(type.getNumElements()), split,
           heldThroughPrepared[unit].contains(parameter)});
      for (Operation *op : stepOpsOfArgument.lookup(parameter)) {
        cost::OpCost cost = cost::estimateOpCost(op);
        OpRecord record;
        record.kind = cost.kind;
        record.usesMatrixUnits = cost.usesMatrixUnits;
        record.precision = cost.precision;
        record.flops = {cost.flops, 0};
        record.bytes = {cost.bytes, 0};
        record.tensorParallel = splitParameter;
        unitProfile.stepOnce.push_back(record);
      }
    }
    profile.structures.push_back(std::move(unitProfile));
  }

  // Resident state per parameter (the driver's, TrainingStateBytes), and
  // the tied parameters. Each stage keeps the compute copies of its
  // weights for the whole step (its prepare casts them once).
  FailureOr<TrainingStateBytes> state =
      trainingStateBytes(function, /*microBatches=*/1);
  if (failed(state))
    return profileError("the training state of the program cannot be "
                        "stored by the runtime");
  double elements = static_cast<double>(state->trainableElements);
  profile.trainableParameters = state->trainableElements;
  if (elements > 0) {
    profile.masterBytesPerParameter = state->masterWeights / elements;
    profile.computeBytesPerParameter =
        (state->computeCopies + parameterCastBytes(function)) / elements;
    profile.gradientBytesPerParameter = state->gradients / elements;
    profile.optimizerBytesPerParameter = state->optimizerState / elements;
  }
  profile.accumulatorBytesPerParameter =
      TrainingStateBytes::kAccumulatorBytesPerElement;
  llvm::MapVector<unsigned, std::vector<size_t>> unitsReading;
  for (auto [index, unit] : llvm::enumerate(profile.units))
    for (unsigned parameter : unit.parameters)
      unitsReading[parameter].push_back(index);
  for (auto &[parameter, readers] : unitsReading) {
    if (readers.size() < 2)
      continue;
    auto type =
        llvm::cast<RankedTensorType>(function.getArgument(parameter).getType());
    ProgramProfile::TiedParameter tied;
    tied.elements = static_cast<double>(type.getNumElements());
    tied.split = splitOf(partition, parameter);
    tied.units = readers;
    profile.tiedGradientBytes +=
        tied.elements * profile.gradientBytesPerParameter;
    profile.tiedParameters.push_back(std::move(tied));
  }

  if (auto precision = function->getAttrOfType<StringAttr>("tess.precision"))
    if (std::optional<cost::Precision> parsed =
            cost::parsePrecisionName(precision.getValue()))
      profile.precision = *parsed;
  return profile;
}

} // namespace tessera::pipeline
