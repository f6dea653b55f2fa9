//===- LayerRepetition.cpp - layers by parameter name, runs by signature --===//

#include "tessera/Sharding/LayerRepetition.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;
using namespace tessera;
using namespace tessera::sharding;

std::pair<std::string, std::string>
sharding::splitLayerName(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  name.split(parts, '.');
  for (size_t index = 1; index + 1 < parts.size(); ++index) {
    if (parts[index].empty() || !llvm::all_of(parts[index], llvm::isDigit))
      continue;
    std::string layer =
        llvm::join(llvm::ArrayRef(parts).take_front(index + 1), ".");
    std::string rest =
        llvm::join(llvm::ArrayRef(parts).drop_front(index + 1), ".");
    return {layer, rest};
  }
  return {"", name.str()};
}

std::string LayerRun::describe() const {
  const LayerInstance &first = instances.front();
  if (instances.size() == 1)
    return first.name;
  return prefix + "." + std::to_string(first.index) + "-" +
         std::to_string(instances.back().index);
}

Operation *LayerStructure::representative(Operation *op) const {
  auto found = placeOf.find(op);
  if (found == placeOf.end())
    return op;
  const Place &place = found->second;
  return runs[place.run].instances.front().ops[place.position];
}

namespace {

/// The layer a parameter op belongs to, or "".
std::string layerOf(Operation *op) {
  if (auto parameter = llvm::dyn_cast<tess::ParameterOp>(op))
    return splitLayerName(parameter.getName()).first;
  return "";
}

std::string signatureOf(
    const LayerInstance &instance,
    llvm::function_ref<std::string(tess::ParameterOp)> extraSignature) {
  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [index, op] : llvm::enumerate(instance.ops))
    position[op] = index;
  std::string text;
  llvm::raw_string_ostream os(text);
  for (Operation *op : instance.ops) {
    os << op->getName().getStringRef();
    if (auto parameter = llvm::dyn_cast<tess::ParameterOp>(op)) {
      os << " " << splitLayerName(parameter.getName()).second
         << (parameter.getTrainable() ? " trainable" : "");
      if (extraSignature)
        os << " " << extraSignature(parameter);
    } else {
      os << " " << op->getAttrDictionary();
    }
    os << " (";
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      auto local = producer ? position.find(producer) : position.end();
      if (local != position.end())
        os << "%" << local->second << "#"
           << llvm::cast<OpResult>(operand).getResultNumber();
      else
        os << "ext " << operand.getType();
      os << ", ";
    }
    os << ") -> (";
    for (Type type : op->getResultTypes())
      os << type << ", ";
    os << ")\n";
  }
  return text;
}

} // namespace

LayerStructure sharding::findRepeatedLayers(
    func::FuncOp function,
    llvm::function_ref<std::string(tess::ParameterOp)> extraSignature) {
  LayerStructure structure;
  if (!llvm::hasSingleElement(function.getBody()))
    return structure;

  // Ops into layers, in program order.
  std::map<std::string, LayerInstance> layers;
  std::vector<std::string> order;
  std::string current;
  auto addTo = [&](const std::string &layer, Operation *op) {
    auto [entry, inserted] = layers.try_emplace(layer);
    if (inserted) {
      entry->second.name = layer;
      llvm::StringRef digits = llvm::StringRef(layer).rsplit('.').second;
      digits.getAsInteger(10, entry->second.index);
      order.push_back(layer);
    }
    entry->second.ops.push_back(op);
  };
  for (Operation &op : function.getBody().front()) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    if (llvm::isa<tess::ParameterOp>(op)) {
      std::string layer = layerOf(&op);
      if (!layer.empty())
        addTo(layer, &op);
      continue;
    }
    if (llvm::isa<tess::ConstantOp>(op))
      continue;
    bool readsParameter = false;
    std::string layer;
    for (Value operand : op.getOperands())
      if (Operation *producer = operand.getDefiningOp())
        if (llvm::isa<tess::ParameterOp>(producer)) {
          readsParameter = true;
          if (layer.empty())
            layer = layerOf(producer);
        }
    if (readsParameter)
      current = layer;
    if (!current.empty())
      addTo(current, &op);
  }

  // Consecutive identical layers of one prefix form a run.
  std::map<std::string, std::vector<LayerInstance *>> byPrefix;
  std::vector<std::string> prefixes;
  for (const std::string &name : order) {
    std::string prefix = llvm::StringRef(name).rsplit('.').first.str();
    auto [entry, inserted] = byPrefix.try_emplace(prefix);
    if (inserted)
      prefixes.push_back(prefix);
    entry->second.push_back(&layers[name]);
  }
  for (const std::string &prefix : prefixes) {
    std::vector<LayerInstance *> &instances = byPrefix[prefix];
    llvm::sort(instances, [](const LayerInstance *a, const LayerInstance *b) {
      return a->index < b->index;
    });
    std::string previousSignature;
    for (LayerInstance *instance : instances) {
      std::string signature = signatureOf(*instance, extraSignature);
      bool extends = !structure.runs.empty() &&
                     structure.runs.back().prefix == prefix &&
                     structure.runs.back().instances.back().index + 1 ==
                         instance->index &&
                     signature == previousSignature;
      if (!extends) {
        structure.runs.emplace_back();
        structure.runs.back().prefix = prefix;
      }
      structure.runs.back().instances.push_back(std::move(*instance));
      previousSignature = std::move(signature);
    }
  }
  for (auto [runIndex, run] : llvm::enumerate(structure.runs))
    for (auto [instanceIndex, instance] : llvm::enumerate(run.instances))
      for (auto [position, op] : llvm::enumerate(instance.ops))
        structure.placeOf[op] = {static_cast<unsigned>(runIndex),
                                 static_cast<unsigned>(instanceIndex),
                                 static_cast<unsigned>(position)};
  return structure;
}
