//===- Reshard.cpp - collectives that move a value between layouts -------===//

#include "Reshard.h"

#include "Tess/IR/TessOps.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::partition;
using sharding::kUnsplit;
using sharding::TensorLayout;
namespace tess = tessera::tess;

RankedTensorType partition::localType(RankedTensorType type,
                                      const TensorLayout &layout,
                                      const cost::DeviceMesh &mesh) {
  SmallVector<int64_t> shape(type.getShape());
  for (auto [dim, axis] : llvm::enumerate(layout.dimAxes))
    if (axis != kUnsplit)
      shape[dim] /= mesh.axes[axis].size;
  return RankedTensorType::get(shape, type.getElementType());
}

namespace {

RankedTensorType withDim(Value value, int64_t dim, int64_t size) {
  auto type = llvm::cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, type.getElementType());
}

int64_t dimSize(Value value, int64_t dim) {
  return llvm::cast<RankedTensorType>(value.getType()).getDimSize(dim);
}

} // namespace

FailureOr<Value> partition::reshard(OpBuilder &builder, Location location,
                                    Value value, const TensorLayout &from,
                                    const TensorLayout &to,
                                    const cost::DeviceMesh &mesh) {
  if (from == to)
    return value;
  auto elementType =
      llvm::cast<RankedTensorType>(value.getType()).getElementType();
  TensorLayout current = from;
  auto axisName = [&](unsigned axis) {
    return builder.getStringAttr(mesh.axes[axis].name);
  };
  auto axisSize = [&](int axis) { return mesh.axes[axis].size; };

  // Complete the partial sums `to` does not keep: first those `to` splits
  // a dim over (a reduce-scatter), then the others (an all-reduce), which
  // so move the scattered block, not the whole tensor (a gradient partial
  // over dp and tp whose ZeRO layout splits it over tp: the dp all-reduce
  // moves 1/tp of it).
  auto scatterTarget = [&](unsigned axis) {
    int target = to.dimSplitOver(axis);
    return target != kUnsplit && current.dimAxes[target] == kUnsplit
               ? target
               : kUnsplit;
  };
  for (bool scatter : {true, false})
    for (unsigned axis : from.partialAxes) {
      if (to.isPartialOver(axis) || !current.isPartialOver(axis))
        continue;
      int target = scatterTarget(axis);
      if ((target != kUnsplit) != scatter)
        continue;
      if (scatter) {
        value = tess::ReduceScatterOp::create(
            builder, location,
            withDim(value, target, dimSize(value, target) / axisSize(axis)),
            value, axisName(axis), target);
        current.dimAxes[target] = axis;
      } else {
        value = tess::AllReduceOp::create(builder, location, value,
                                          axisName(axis),
                                          tess::CollectiveReduction::sum);
      }
      llvm::erase(current.partialAxes, axis);
    }

  // Undo the splits `to` does not have: move them to the dim `to` splits
  // when that dim is free, else gather.
  for (unsigned dim = 0; dim < current.rank(); ++dim) {
    int axis = current.dimAxes[dim];
    if (axis == kUnsplit || to.dimAxes[dim] == axis)
      continue;
    int target = to.dimSplitOver(axis);
    int64_t size = axisSize(axis);
    if (target != kUnsplit && current.dimAxes[target] == kUnsplit) {
      auto type = llvm::cast<RankedTensorType>(value.getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[target] /= size;
      shape[dim] *= size;
      value = tess::AllToAllOp::create(
          builder, location, RankedTensorType::get(shape, elementType), value,
          axisName(axis), target, dim);
      current.dimAxes[target] = axis;
    } else {
      value = tess::AllGatherOp::create(
          builder, location, withDim(value, dim, dimSize(value, dim) * size),
          value, axisName(axis), dim);
    }
    current.dimAxes[dim] = kUnsplit;
  }

  // Take this rank's block of the dims `to` splits.
  for (unsigned dim = 0; dim < to.rank(); ++dim) {
    int axis = to.dimAxes[dim];
    if (axis == kUnsplit || current.dimAxes[dim] == axis)
      continue;
    value = tess::ShardSliceOp::create(
        builder, location,
        withDim(value, dim, dimSize(value, dim) / axisSize(axis)), value,
        axisName(axis), dim);
    current.dimAxes[dim] = axis;
  }

  // Whole -> partial: every rank holds an equal addend.
  for (unsigned axis : to.partialAxes) {
    if (current.isPartialOver(axis))
      continue;
    auto floatType = llvm::dyn_cast<FloatType>(elementType);
    if (!floatType)
      return emitError(location, "cannot make a partial sum of a ")
             << elementType << " tensor";
    auto scalarType = RankedTensorType::get({}, floatType);
    Value share = tess::ConstantOp::create(
        builder, location, scalarType,
        DenseElementsAttr::get(
            scalarType, FloatAttr::get(floatType, 1.0 / axisSize(axis))));
    value = tess::MulOp::create(builder, location, value, share);
    current.partialAxes.push_back(axis);
    llvm::sort(current.partialAxes);
  }
  return value;
}
