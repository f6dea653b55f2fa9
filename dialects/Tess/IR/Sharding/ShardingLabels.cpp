//===- ShardingLabels.cpp - the sharding interface's answer --------------===//
//
// The queries every user of the labels shares, the fallback for ops without
// the interface, and the Labeler the ops' rules are written with.
//
//===----------------------------------------------------------------------===//

#include "Labeler.h"

using namespace mlir;
using namespace tessera::tess;
using namespace tessera::tess::sharding;

StringRef tessera::tess::stringifyLabelKind(LabelKind kind) {
  switch (kind) {
  case LabelKind::Batch:
    return "batch";
  case LabelKind::Parallel:
    return "parallel";
  case LabelKind::Contracted:
    return "contracted";
  case LabelKind::Reduced:
    return "reduced";
  case LabelKind::Averaged:
    return "averaged";
  case LabelKind::Indexed:
    return "indexed";
  case LabelKind::Pieced:
    return "pieced";
  case LabelKind::Classes:
    return "classes";
  case LabelKind::Streamed:
    return "streamed";
  }
  llvm_unreachable("unknown label kind");
}

SmallVector<int> ShardingLabels::labels() const {
  SmallVector<int> all;
  for (const auto *lists : {&operands, &results})
    for (const auto &list : *lists)
      for (int label : list)
        if (label != kWhole)
          all.push_back(label);
  llvm::sort(all);
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

bool ShardingLabels::inResults(int label) const {
  return llvm::any_of(
      results, [&](const auto &list) { return llvm::is_contained(list, label); });
}

bool ShardingLabels::isSummed(int label) const {
  return llvm::any_of(
      summed, [&](const auto &list) { return llvm::is_contained(list, label); });
}

bool ShardingLabels::isPartitionable(int label) const {
  LabelKind kind = kindOf(label);
  return kind != LabelKind::Pieced || pieceMajor;
}

const NamedSplit *ShardingLabels::splitWithRole(SplitRole role) const {
  for (const NamedSplit &split : splits)
    if (split.role == role)
      return &split;
  return nullptr;
}

int64_t ShardingLabels::sizeOf(Operation *op, int label) const {
  for (auto [index, list] : llvm::enumerate(operands))
    for (auto [dim, other] : llvm::enumerate(list))
      if (other == label)
        return shapeOf(op->getOperand(index))[dim];
  for (auto [index, list] : llvm::enumerate(results))
    for (auto [dim, other] : llvm::enumerate(list))
      if (other == label)
        return shapeOf(op->getResult(index))[dim];
  return 0;
}

ShardingLabels tessera::tess::shardingLabels(Operation *op) {
  if (auto shardable = llvm::dyn_cast<ShardingInterface>(op))
    return shardable.getShardingLabels();
  return Labeler(op).take();
}

//===----------------------------------------------------------------------===//
// Labeler
//===----------------------------------------------------------------------===//

ArrayRef<int64_t> sharding::shapeOf(Value value) {
  if (auto type = llvm::dyn_cast<RankedTensorType>(value.getType()))
    return type.getShape();
  return {};
}

int64_t sharding::axisOf(int64_t axis, Value value) {
  return normalizeAxis(axis, shapeOf(value).size()).value_or(0);
}

SmallVector<int64_t> sharding::trailingDims(int64_t axis, Value input) {
  SmallVector<int64_t> dims;
  for (int64_t dim = axisOf(axis, input);
       dim < (int64_t)shapeOf(input).size(); ++dim)
    dims.push_back(dim);
  return dims;
}

Labeler::Labeler(Operation *op) : op(op) {
  labels.operands.resize(op->getNumOperands());
  labels.results.resize(op->getNumResults());
  labels.summed.resize(op->getNumResults());
  for (auto [index, operand] : llvm::enumerate(op->getOperands()))
    labels.operands[index].assign(shapeOf(operand).size(), kWhole);
  for (auto [index, result] : llvm::enumerate(op->getResults()))
    labels.results[index].assign(shapeOf(result).size(), kWhole);
}

int Labeler::fresh(LabelKind kind) {
  labels.kinds.push_back(kind);
  return static_cast<int>(labels.kinds.size()) - 1;
}

void Labeler::sameShape() {
  SmallVector<int> dims;
  for (size_t dim = 0; dim < labels.results[0].size(); ++dim)
    dims.push_back(fresh());
  for (auto &list : labels.results)
    if (list.size() == dims.size())
      list.assign(dims.begin(), dims.end());
  for (auto &list : labels.operands)
    if (list.size() == dims.size())
      list.assign(dims.begin(), dims.end());
}

void Labeler::broadcast(unsigned result) {
  ArrayRef<int64_t> shape = shapeOf(op->getResult(result));
  for (size_t dim = 0; dim < shape.size(); ++dim)
    labels.results[result][dim] = fresh();
  for (unsigned index = 0; index < op->getNumOperands(); ++index)
    alignRight(index, labels.results[result], shape);
}

void Labeler::alignRight(unsigned index, ArrayRef<int> reference,
                         ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> own = shapeOf(op->getOperand(index));
  if (own.size() > shape.size())
    return;
  size_t offset = shape.size() - own.size();
  for (size_t dim = 0; dim < own.size(); ++dim)
    if (own[dim] == shape[offset + dim])
      labels.operands[index][dim] = reference[offset + dim];
}

void Labeler::followOperand(unsigned source, ArrayRef<unsigned> operands,
                            ArrayRef<unsigned> results, ArrayRef<int64_t> whole,
                            LabelKind kind) {
  SmallVector<int, 4> &list = labels.operands[source];
  for (size_t dim = 0; dim < list.size(); ++dim)
    list[dim] = llvm::is_contained(whole, (int64_t)dim) ? kWhole : fresh(kind);
  for (unsigned index : operands)
    if (labels.operands[index].size() == list.size())
      labels.operands[index] = list;
  for (unsigned index : results)
    if (labels.results[index].size() == list.size())
      labels.results[index] = list;
}

void Labeler::linearIn(std::initializer_list<unsigned> group) {
  labels.linearGroups.emplace_back(group);
}

void Labeler::linearInAll() {
  SmallVector<unsigned, 3> group;
  for (unsigned index = 0; index < op->getNumOperands(); ++index)
    group.push_back(index);
  labels.linearGroups.push_back(group);
}

void Labeler::offer(StringRef name, int label, SplitRole role) {
  labels.splits.push_back({name.str(), label, role});
}

void Labeler::offerEveryResultDim() {
  for (auto [dim, label] : llvm::enumerate(labels.results[0]))
    if (label != kWhole)
      offer("split dim " + std::to_string(dim), label);
}
