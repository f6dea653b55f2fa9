//===- PlanAnnotation.cpp - a sharding plan written into the IR ----------===//

#include "tessera/Sharding/PlanAnnotation.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::sharding;
using llvm::Expected;

tess::MeshAttr sharding::meshAttr(MLIRContext *context,
                                  const cost::DeviceMesh &mesh) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  for (const cost::MeshAxis &axis : mesh.axes) {
    names.push_back(StringAttr::get(context, axis.name));
    sizes.push_back(axis.size);
  }
  return tess::MeshAttr::get(context, names, sizes);
}

cost::DeviceMesh sharding::deviceMesh(tess::MeshAttr mesh) {
  cost::DeviceMesh result;
  for (auto [name, size] : llvm::zip(mesh.getNames(), mesh.getSizes()))
    result.axes.push_back({name.str(), size, 1, cost::LinkLevel::IntraNode});
  // Strides as DeviceMesh.h defines them: the product of the later sizes.
  int64_t stride = 1;
  for (cost::MeshAxis &axis : llvm::reverse(result.axes)) {
    axis.stride = stride;
    stride *= axis.size;
  }
  return result;
}

tess::LayoutAttr sharding::layoutAttr(MLIRContext *context,
                                      const TensorLayout &layout,
                                      const cost::DeviceMesh &mesh) {
  SmallVector<StringAttr> dims, partial;
  for (int axis : layout.dimAxes)
    dims.push_back(StringAttr::get(
        context, axis == kUnsplit ? "" : mesh.axes[axis].name));
  for (unsigned axis : layout.partialAxes)
    partial.push_back(StringAttr::get(context, mesh.axes[axis].name));
  return tess::LayoutAttr::get(context, dims, partial);
}

Expected<TensorLayout> sharding::tensorLayout(tess::LayoutAttr attribute,
                                              const cost::DeviceMesh &mesh) {
  auto axisIndex = [&](StringAttr name) -> Expected<unsigned> {
    for (auto [index, axis] : llvm::enumerate(mesh.axes))
      if (axis.name == name.getValue())
        return static_cast<unsigned>(index);
    return llvm::createStringError("layout " +
                                   llvm::formatv("{0}", attribute).str() +
                                   " names '" + name.getValue().str() +
                                   "', no axis of the mesh");
  };
  TensorLayout layout;
  for (StringAttr name : attribute.getDims()) {
    if (name.getValue().empty()) {
      layout.dimAxes.push_back(kUnsplit);
      continue;
    }
    Expected<unsigned> axis = axisIndex(name);
    if (!axis)
      return axis.takeError();
    layout.dimAxes.push_back(static_cast<int>(*axis));
  }
  for (StringAttr name : attribute.getPartial()) {
    Expected<unsigned> axis = axisIndex(name);
    if (!axis)
      return axis.takeError();
    layout.partialAxes.push_back(*axis);
  }
  // TensorLayout keeps its partial axes in the mesh's order.
  llvm::sort(layout.partialAxes);
  return layout;
}

namespace {

unsigned rankOf(Value value) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(value.getType());
  return tensor ? tensor.getRank() : 0;
}

/// The attribute of `layout` after checking that it fits `value`.
Expected<tess::LayoutAttr> layoutFor(Value value, const TensorLayout &layout,
                                     const cost::DeviceMesh &mesh) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(value.getType());
  if (tensor ? !fitsShape(layout, tensor.getShape(), mesh)
             : !layout.isReplicated() || layout.rank() != 0)
    return llvm::createStringError(
        "layout " + layout.print(mesh) + " does not fit a value of type " +
        llvm::formatv("{0}", value.getType()).str());
  return layoutAttr(value.getContext(), layout, mesh);
}

/// `attribute`'s layout for a value of rank `rank`; replicated without
/// one.
Expected<TensorLayout> readFor(Attribute attribute, unsigned rank,
                               const cost::DeviceMesh &mesh) {
  if (!attribute)
    return TensorLayout::replicated(rank);
  auto layout = llvm::dyn_cast<tess::LayoutAttr>(attribute);
  if (!layout)
    return llvm::createStringError(
        "expected a #tess.layout, got " +
        llvm::formatv("{0}", attribute).str());
  Expected<TensorLayout> read = tensorLayout(layout, mesh);
  if (read && read->rank() != rank)
    return llvm::createStringError(
        "layout " + llvm::formatv("{0}", attribute).str() + " has " +
        std::to_string(read->rank()) + " dims for a value of rank " +
        std::to_string(rank));
  return read;
}

} // namespace

llvm::Error sharding::annotateShardingPlan(
    func::FuncOp function, const cost::DeviceMesh &mesh,
    const DenseMap<Value, TensorLayout> &layouts,
    ArrayRef<TensorLayout> resultLayouts) {
  MLIRContext *context = function.getContext();
  auto module = function->getParentOfType<ModuleOp>();
  tess::MeshAttr meshAttribute = meshAttr(context, mesh);
  module->setAttr(kMeshAttrName, meshAttribute);
  // A module's plan names the mesh its layouts are on (the plan's C6).
  if (auto plan = module->getAttrOfType<tess::PlanAttr>(kPlanAttrName))
    module->setAttr(kPlanAttrName, plan.withMesh(meshAttribute));
  for (BlockArgument argument : function.getArguments()) {
    auto layout = layouts.find(argument);
    if (layout == layouts.end() || layout->second.isReplicated()) {
      function.removeArgAttr(argument.getArgNumber(), kLayoutAttrName);
      continue;
    }
    Expected<tess::LayoutAttr> attribute =
        layoutFor(argument, layout->second, mesh);
    if (!attribute)
      return attribute.takeError();
    function.setArgAttr(argument.getArgNumber(), kLayoutAttrName, *attribute);
  }
  llvm::Error error = llvm::Error::success();
  function.walk([&](Operation *op) {
    if (error || op->getNumResults() == 0)
      return;
    SmallVector<Attribute> attributes;
    bool anySplit = false;
    for (Value result : op->getResults()) {
      auto layout = layouts.find(result);
      TensorLayout replicated = TensorLayout::replicated(rankOf(result));
      const TensorLayout &chosen =
          layout == layouts.end() ? replicated : layout->second;
      anySplit |= !chosen.isReplicated();
      Expected<tess::LayoutAttr> attribute = layoutFor(result, chosen, mesh);
      if (!attribute) {
        error = attribute.takeError();
        return;
      }
      attributes.push_back(*attribute);
    }
    if (anySplit)
      op->setAttr(kLayoutsAttrName, ArrayAttr::get(context, attributes));
    else
      op->removeAttr(kLayoutsAttrName);
  });
  if (error)
    return error;
  for (unsigned index = 0; index < function.getNumResults(); ++index) {
    if (index >= resultLayouts.size() ||
        resultLayouts[index].isReplicated()) {
      function.removeResultAttr(index,
                                StringAttr::get(context, kLayoutAttrName));
      continue;
    }
    Value returned =
        function.getBody().front().getTerminator()->getOperand(index);
    Expected<tess::LayoutAttr> attribute =
        layoutFor(returned, resultLayouts[index], mesh);
    if (!attribute)
      return attribute.takeError();
    function.setResultAttr(index, kLayoutAttrName, *attribute);
  }
  return llvm::Error::success();
}

Expected<TensorLayout> sharding::readLayout(Value value,
                                            const cost::DeviceMesh &mesh) {
  unsigned rank = rankOf(value);
  if (auto argument = llvm::dyn_cast<BlockArgument>(value)) {
    auto function =
        llvm::dyn_cast<func::FuncOp>(argument.getOwner()->getParentOp());
    return readFor(function ? function.getArgAttr(argument.getArgNumber(),
                                                  kLayoutAttrName)
                            : Attribute(),
                   rank, mesh);
  }
  auto result = llvm::cast<OpResult>(value);
  auto layouts = result.getOwner()->getAttrOfType<ArrayAttr>(kLayoutsAttrName);
  if (!layouts)
    return TensorLayout::replicated(rank);
  if (layouts.size() != result.getOwner()->getNumResults())
    return llvm::createStringError(
        "tess.layouts needs one layout per result of '" +
        result.getOwner()->getName().getStringRef().str() + "'");
  return readFor(layouts[result.getResultNumber()], rank, mesh);
}

Expected<TensorLayout>
sharding::readResultLayout(func::FuncOp function, unsigned index,
                           const cost::DeviceMesh &mesh) {
  auto type = llvm::cast<RankedTensorType>(function.getResultTypes()[index]);
  return readFor(function.getResultAttr(index, kLayoutAttrName),
                 type.getRank(), mesh);
}
