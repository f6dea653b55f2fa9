//===- ProgramUnits.cpp - cutting @forward_backward into layers -----------===//

#include "tessera/Pipeline/ProgramUnits.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Analysis/StepMemory.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;

namespace tessera::pipeline {
namespace {

llvm::Error unitsError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "pipeline: " + message);
}

/// The function argument a value is, looking through the cast of a master
/// weight to the compute precision.
std::optional<unsigned> parameterArgument(Value value,
                                          func::FuncOp function) {
  if (auto cast = value.getDefiningOp<tess::CastOp>())
    value = cast.getInput();
  auto argument = llvm::dyn_cast<BlockArgument>(value);
  if (!argument || argument.getOwner()->getParentOp() != function)
    return std::nullopt;
  if (!function.getArgAttr(argument.getArgNumber(), "tess.parameter"))
    return std::nullopt;
  return argument.getArgNumber();
}

} // namespace

std::optional<std::string> layerKeyOf(llvm::StringRef parameterName) {
  llvm::SmallVector<llvm::StringRef> parts;
  parameterName.split(parts, '.');
  // The number must be followed by the tensor's own name, and preceded by
  // the stack's name: "h.3.attn.weight", not "weight.0".
  for (size_t index = 1; index + 1 < parts.size(); ++index) {
    if (parts[index].empty() || !llvm::all_of(parts[index], llvm::isDigit))
      continue;
    return llvm::join(llvm::ArrayRef(parts).take_front(index + 1), ".");
  }
  return std::nullopt;
}

llvm::Expected<ProgramUnits> partitionIntoUnits(ModuleOp module) {
  ProgramUnits result;
  result.forwardBackward = module.lookupSymbol<func::FuncOp>("forward_backward");
  result.optimizerStep = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!result.forwardBackward || result.forwardBackward.isExternal() ||
      !result.optimizerStep)
    return unitsError("the module has no @forward_backward and "
                      "@optimizer_step (run tess-build-training first)");
  func::FuncOp function = result.forwardBackward;
  Block &body = function.getBody().front();
  Operation *terminator = body.getTerminator();

  // Backward: everything downstream of the loss gradient, or of the loss
  // scale (a vocabulary-parallel loss's gradient, computed of tess ops by
  // tess-partition-spmd, is no tess.cross_entropy_grad).
  llvm::DenseSet<Value> gradientValues;
  if (BlockArgument lossScale = lossScaleArgument(function))
    gradientValues.insert(lossScale);
  for (Operation &op : body) {
    if (&op == terminator)
      continue;
    bool backward = llvm::isa<tess::CrossEntropyGradOp>(op) ||
                    llvm::any_of(op.getOperands(), [&](Value operand) {
                      return gradientValues.contains(operand);
                    });
    result.isBackward[&op] = backward;
    if (backward)
      gradientValues.insert(op.getResults().begin(), op.getResults().end());
  }

  // Layer keys in the order of their first use by a forward op; which
  // keyless parameters are used before the first layer.
  llvm::StringMap<unsigned> layerOfKey;
  std::vector<std::string> layerKeys;
  llvm::DenseMap<unsigned, std::optional<std::string>> keyOfArgument;
  for (BlockArgument argument : body.getArguments())
    if (auto name = function.getArgAttrOfType<StringAttr>(
            argument.getArgNumber(), "tess.parameter"))
      keyOfArgument[argument.getArgNumber()] = layerKeyOf(name.getValue());
  llvm::DenseMap<unsigned, bool> keylessBeforeLayers;
  for (Operation &op : body) {
    if (&op == terminator || result.isBackward[&op])
      continue;
    for (Value operand : op.getOperands()) {
      std::optional<unsigned> argument = parameterArgument(operand, function);
      if (!argument || llvm::isa<tess::CastOp>(op))
        continue;
      const std::optional<std::string> &key = keyOfArgument[*argument];
      if (key) {
        if (layerOfKey.try_emplace(*key, layerKeys.size() + 1).second)
          layerKeys.push_back(*key);
      } else if (!keylessBeforeLayers.count(*argument)) {
        keylessBeforeLayers[*argument] = layerKeys.empty();
      }
    }
  }
  if (layerKeys.empty())
    return unitsError("no Transformer layers found: no parameter name has a "
                      "layer number (like 'h.3.', 'layers.3.' or "
                      "'encoder.layer.3.')");

  unsigned headUnit = layerKeys.size() + 1;
  result.units.push_back({UnitKind::Embedding, "embedding", {}});
  for (const std::string &key : layerKeys)
    result.units.push_back({UnitKind::Layer, key, {}});
  result.units.push_back({UnitKind::Head, "head", {}});

  auto firstUnitOfArgument = [&](unsigned argument) -> unsigned {
    const std::optional<std::string> &key = keyOfArgument[argument];
    if (key)
      return layerOfKey.lookup(*key);
    auto found = keylessBeforeLayers.find(argument);
    return found != keylessBeforeLayers.end() && !found->second ? headUnit : 0;
  };

  // Forward ops: the largest unit among their operands.
  llvm::DenseMap<unsigned, unsigned> lastUnitOfArgument;
  for (Operation &op : body) {
    if (&op == terminator || result.isBackward[&op])
      continue;
    std::optional<unsigned> unit;
    for (Value operand : op.getOperands()) {
      std::optional<unsigned> operandUnit;
      if (std::optional<unsigned> argument =
              parameterArgument(operand, function))
        operandUnit = firstUnitOfArgument(*argument);
      else if (Operation *producer = operand.getDefiningOp();
               producer && !llvm::isa<tess::ConstantOp>(producer))
        operandUnit = result.unitOf.lookup(producer);
      if (operandUnit)
        unit = std::max(unit.value_or(0), *operandUnit);
    }
    result.unitOf[&op] = unit.value_or(0);
    if (llvm::isa<tess::CastOp>(op))
      continue;
    for (Value operand : op.getOperands())
      if (std::optional<unsigned> argument =
              parameterArgument(operand, function)) {
        unsigned &last = lastUnitOfArgument[*argument];
        last = std::max(last, result.unitOf[&op]);
        auto &parameters = result.units[result.unitOf[&op]].parameters;
        if (!llvm::is_contained(parameters, *argument))
          parameters.push_back(*argument);
      }
  }

  // The parameter-only forward ops, and the unit of each one's last
  // forward reader, seen through parameter-only readers.
  auto fromParameters = [&](Value value) {
    if (auto argument = llvm::dyn_cast<BlockArgument>(value))
      return function.getArgAttr(argument.getArgNumber(), "tess.parameter") ||
             function.getArgAttr(argument.getArgNumber(), "tess.buffer");
    Operation *producer = value.getDefiningOp();
    return llvm::isa<tess::ConstantOp>(producer) ||
           result.parameterOnly.contains(producer);
  };
  for (Operation &op : body.without_terminator())
    if (!result.isBackward[&op] && !llvm::isa<tess::ConstantOp>(op) &&
        op.getNumRegions() == 0 && op.getNumOperands() > 0 &&
        isMemoryEffectFree(&op) &&
        llvm::all_of(op.getOperands(), fromParameters) &&
        llvm::none_of(op.getUsers(),
                      [&](Operation *user) { return user == terminator; }))
      result.parameterOnly.insert(&op);
  llvm::DenseMap<Operation *, unsigned> lastReaderUnit;
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (!result.parameterOnly.contains(&op))
      continue;
    unsigned unit = result.unitOf[&op];
    for (Operation *user : op.getUsers())
      if (result.parameterOnly.contains(user))
        unit = std::max(unit, lastReaderUnit.lookup(user));
      else if (!result.isBackward.lookup(user))
        unit = std::max(unit, result.unitOf.lookup(user));
    lastReaderUnit[&op] = unit;
  }

  // Backward ops: the largest unit among the forward values they read.
  unsigned previous = headUnit;
  for (Operation &op : body) {
    if (&op == terminator || !result.isBackward[&op])
      continue;
    std::optional<unsigned> unit;
    bool readsForward = false;
    for (Value operand : op.getOperands()) {
      // A constant (the rotary tables an adjoint reads) is copied wherever
      // it is read: it ties the op to no unit, so an op reading gradients
      // and constants only stays with the backward around it.
      Operation *definer = operand.getDefiningOp();
      if (gradientValues.contains(operand) ||
          (definer && llvm::isa<tess::ConstantOp>(definer)))
        continue;
      readsForward = true;
      if (std::optional<unsigned> argument =
              parameterArgument(operand, function))
        unit = std::max(unit.value_or(0), lastUnitOfArgument.lookup(*argument));
      else if (Operation *producer = operand.getDefiningOp();
               producer && result.parameterOnly.contains(producer))
        unit = std::max(unit.value_or(0), lastReaderUnit.lookup(producer));
      else if (producer && !llvm::isa<tess::ConstantOp>(producer))
        unit = std::max(unit.value_or(0), result.unitOf.lookup(producer));
    }
    if (!unit)
      unit = readsForward ? 0u : previous;
    result.unitOf[&op] = *unit;
    previous = *unit;
  }
  return result;
}

} // namespace tessera::pipeline
