//===- LayoutChoice.cpp - the layouts one op runs in ---------------------===//

#include "LayoutChoice.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::partition;
using sharding::kUnsplit;
using sharding::TensorLayout;

namespace {

ArrayRef<int64_t> shapeOf(Value value) {
  if (auto type = llvm::dyn_cast<RankedTensorType>(value.getType()))
    return type.getShape();
  return {};
}

class Chooser {
public:
  Chooser(Operation *op, const tess::ShardingLabels &labels,
          const cost::DeviceMesh &mesh, ArrayRef<TensorLayout> operandLayouts,
          bool operandsAreLocal)
      : op(op), labels(labels), mesh(mesh) {
    for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
      SmallVector<int64_t, 4> shape(shapeOf(operand));
      if (operandsAreLocal && index < operandLayouts.size() &&
          operandLayouts[index].rank() == shape.size())
        for (auto [dim, axis] : llvm::enumerate(operandLayouts[index].dimAxes))
          if (axis != kUnsplit)
            shape[dim] *= mesh.axes[axis].size;
      operandShapes.push_back(shape);
    }
  }

  /// Gives `label` the axis `axis` if both are free and every dim of the
  /// label divides by the axis's size.
  void tryAssign(int label, int axis) {
    if (label == tess::kWhole || axis == kUnsplit || assigned.count(label) ||
        llvm::is_contained(usedAxes, axis) || !assignable(label))
      return;
    int64_t size = mesh.axes[axis].size;
    auto divides = [&](ArrayRef<SmallVector<int, 4>> lists,
                       auto valueAt) -> bool {
      for (auto [index, list] : llvm::enumerate(lists)) {
        ArrayRef<int64_t> shape = valueAt(index);
        for (auto [dim, other] : llvm::enumerate(list))
          if (other == label && shape[dim] % size != 0)
            return false;
      }
      return true;
    };
    if (!divides(labels.operands,
                 [&](size_t index) -> ArrayRef<int64_t> {
                   return operandShapes[index];
                 }) ||
        !divides(labels.results, [&](size_t index) -> ArrayRef<int64_t> {
          return shapeOf(op->getResult(index));
        }))
      return;
    assigned[label] = axis;
    usedAxes.push_back(axis);
  }

  /// Labels of operand dims that are split, in operand order, filtered by
  /// (label, axis).
  template <typename Filter>
  void assignFromOperands(ArrayRef<TensorLayout> layouts, Filter filter) {
    for (auto [index, list] : llvm::enumerate(labels.operands)) {
      if (index >= layouts.size() || layouts[index].rank() != list.size())
        continue;
      for (auto [dim, label] : llvm::enumerate(list))
        if (filter(label, layouts[index].dimAxes[dim]))
          tryAssign(label, layouts[index].dimAxes[dim]);
    }
  }

  int axisOf(int label) const {
    auto it = assigned.find(label);
    return it == assigned.end() ? kUnsplit : it->second;
  }

  TensorLayout layoutFor(ArrayRef<int> list) const {
    TensorLayout layout = TensorLayout::replicated(list.size());
    for (auto [dim, label] : llvm::enumerate(list))
      layout.dimAxes[dim] = label == tess::kWhole ? kUnsplit : axisOf(label);
    return layout;
  }

  Operation *op;
  const tess::ShardingLabels &labels;
  const cost::DeviceMesh &mesh;
  llvm::DenseMap<int, int> assigned;
  SmallVector<int> usedAxes;
  /// The operands' global shapes.
  SmallVector<SmallVector<int64_t, 4>, 4> operandShapes;

private:
  bool assignable(int label) const {
    return labels.isPartitionable(label) &&
           (labels.inResults(label) || labels.isSummed(label) ||
            llvm::is_contained(labels.averaged, label) ||
            labels.kindOf(label) == tess::LabelKind::Classes);
  }
};

void addAxis(SmallVectorImpl<unsigned> &axes, unsigned axis) {
  if (!llvm::is_contained(axes, axis)) {
    axes.push_back(axis);
    llvm::sort(axes);
  }
}

} // namespace

LayoutChoice partition::chooseLayouts(
    Operation *op, const tess::ShardingLabels &labels,
    ArrayRef<TensorLayout> operandLayouts, const cost::DeviceMesh &mesh,
    ArrayRef<TensorLayout> desiredResults,
    const llvm::DenseMap<int, unsigned> *forced, bool operandsAreLocal) {
  Chooser chooser(op, labels, mesh, operandLayouts, operandsAreLocal);
  if (forced)
    for (auto [label, axis] : *forced)
      chooser.tryAssign(label, axis);
  // A piece-major split or concat runs on each rank's 1/n of every piece
  // whatever its operands arrive in: a piece is an ordinary contiguous
  // split, while the whole tensor's order is only its region's
  // (PieceMajorRegion.h), so that one is never resharded.
  if (auto axisName = op->getAttrOfType<StringAttr>(tess::kPieceMajorAttrName))
    if (int axis = mesh.axisIndex(axisName.getValue()); axis >= 0)
      for (int label : labels.labels())
        if (labels.kindOf(label) == tess::LabelKind::Pieced)
          chooser.tryAssign(label, axis);
  if (!desiredResults.empty()) {
    for (auto [index, list] : llvm::enumerate(labels.results))
      if (index < desiredResults.size() &&
          desiredResults[index].rank() == list.size())
        for (auto [dim, label] : llvm::enumerate(list))
          chooser.tryAssign(label, desiredResults[index].dimAxes[dim]);
  } else {
    chooser.assignFromOperands(operandLayouts, [&](int label, int) {
      return labels.inResults(label);
    });
  }
  // Given the results' layouts (the plan's), a summed label takes an
  // operand's axis only where a result it is summed into leaves partial
  // over that axis: otherwise the plan read the operands whole (a ZeRO-3
  // weight gathered for replicated compute), and splitting the
  // contraction would run another plan (a partial sum and its all-reduce).
  auto leftPartial = [&](int label, int axis) {
    if (desiredResults.empty() || !labels.isSummed(label))
      return true;
    for (auto [index, summed] : llvm::enumerate(labels.summed))
      if (llvm::is_contained(summed, label) && index < desiredResults.size() &&
          axis != kUnsplit &&
          desiredResults[index].isPartialOver(static_cast<unsigned>(axis)))
        return true;
    return false;
  };
  chooser.assignFromOperands(operandLayouts, [&](int label, int axis) {
    return !labels.inResults(label) && leftPartial(label, axis);
  });

  // Partial sums that pass through a linear group.
  llvm::DenseMap<unsigned, ArrayRef<unsigned>> passing;
  for (unsigned axis = 0; axis < mesh.axes.size(); ++axis) {
    if (llvm::is_contained(chooser.usedAxes, (int)axis))
      continue;
    SmallVector<unsigned> partial;
    for (auto [index, layout] : llvm::enumerate(operandLayouts))
      if (layout.isPartialOver(axis))
        partial.push_back(index);
    if (partial.empty())
      continue;
    for (const auto &group : labels.linearGroups) {
      bool covers = llvm::all_of(partial, [&](unsigned index) {
        return llvm::is_contained(group, index);
      });
      bool allPartial = llvm::all_of(group, [&](unsigned index) {
        return index < operandLayouts.size() &&
               operandLayouts[index].isPartialOver(axis);
      });
      if (covers && allPartial) {
        passing[axis] = group;
        break;
      }
    }
  }

  LayoutChoice choice;
  SmallVector<SmallVector<unsigned, 2>, 2> created(labels.results.size());
  for (auto [index, summed] : llvm::enumerate(labels.summed))
    for (int label : summed)
      if (int axis = chooser.axisOf(label); axis != kUnsplit)
        addAxis(created[index], axis);
  for (int label : labels.averaged)
    if (int axis = chooser.axisOf(label); axis != kUnsplit)
      addAxis(choice.averagedAxes, axis);

  for (auto [index, list] : llvm::enumerate(labels.operands)) {
    TensorLayout layout = chooser.layoutFor(list);
    for (auto [axis, group] : passing)
      if (llvm::is_contained(group, (unsigned)index))
        addAxis(layout.partialAxes, axis);
    if (llvm::is_contained(labels.addedToSum, (unsigned)index) &&
        !created.empty())
      for (unsigned axis : created[0])
        addAxis(layout.partialAxes, axis);
    choice.operands.push_back(layout);
  }
  for (auto [index, list] : llvm::enumerate(labels.results)) {
    TensorLayout layout = chooser.layoutFor(list);
    for (auto [axis, group] : passing)
      addAxis(layout.partialAxes, axis);
    for (unsigned axis : created[index])
      addAxis(layout.partialAxes, axis);
    choice.results.push_back(layout);
  }
  return choice;
}
