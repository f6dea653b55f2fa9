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

namespace {

llvm::ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

/// The text of `layout` after checking that it fits `value`.
Expected<StringAttr> layoutText(Value value, const TensorLayout &layout,
                                const cost::DeviceMesh &mesh) {
  if (!fitsShape(layout, shapeOf(value), mesh))
    return llvm::createStringError(
        "layout " + layout.print(mesh) + " does not fit a value of type " +
        llvm::formatv("{0}", value.getType()).str());
  return StringAttr::get(value.getContext(), layout.print(mesh));
}

Expected<TensorLayout> parseFor(StringAttr text, unsigned rank,
                                const cost::DeviceMesh &mesh) {
  if (!text)
    return TensorLayout::replicated(rank);
  Expected<TensorLayout> layout = parseTensorLayout(text.getValue(), mesh);
  if (!layout)
    return layout.takeError();
  if (layout->rank() != rank)
    return llvm::createStringError("layout '" + text.getValue().str() +
                                   "' has " + std::to_string(layout->rank()) +
                                   " dims for a value of rank " +
                                   std::to_string(rank));
  return layout;
}

unsigned rankOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getRank();
}

} // namespace

llvm::Error sharding::annotateShardingPlan(
    func::FuncOp function, const cost::DeviceMesh &mesh,
    const DenseMap<Value, TensorLayout> &layouts,
    ArrayRef<TensorLayout> resultLayouts) {
  MLIRContext *context = function.getContext();
  function->getParentOfType<ModuleOp>()->setAttr(kMeshAttrName,
                                                 meshAttr(context, mesh));
  for (BlockArgument argument : function.getArguments()) {
    auto layout = layouts.find(argument);
    if (layout == layouts.end() || layout->second.isReplicated()) {
      function.removeArgAttr(argument.getArgNumber(), kLayoutAttrName);
      continue;
    }
    Expected<StringAttr> text = layoutText(argument, layout->second, mesh);
    if (!text)
      return text.takeError();
    function.setArgAttr(argument.getArgNumber(), kLayoutAttrName, *text);
  }
  llvm::Error error = llvm::Error::success();
  function.walk([&](Operation *op) {
    if (error || op->getNumResults() == 0)
      return;
    SmallVector<Attribute> texts;
    bool anySplit = false;
    for (Value result : op->getResults()) {
      auto layout = layouts.find(result);
      TensorLayout replicated = TensorLayout::replicated(
          llvm::isa<RankedTensorType>(result.getType()) ? rankOf(result) : 0);
      const TensorLayout &chosen =
          layout == layouts.end() ? replicated : layout->second;
      anySplit |= !chosen.isReplicated();
      Expected<StringAttr> text = layoutText(result, chosen, mesh);
      if (!text) {
        error = text.takeError();
        return;
      }
      texts.push_back(*text);
    }
    if (anySplit)
      op->setAttr(kLayoutsAttrName, ArrayAttr::get(context, texts));
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
    Expected<StringAttr> text =
        layoutText(returned, resultLayouts[index], mesh);
    if (!text)
      return text.takeError();
    function.setResultAttr(index, kLayoutAttrName, *text);
  }
  return llvm::Error::success();
}

Expected<TensorLayout> sharding::readLayout(Value value,
                                            const cost::DeviceMesh &mesh) {
  unsigned rank = rankOf(value);
  if (auto argument = llvm::dyn_cast<BlockArgument>(value)) {
    auto function =
        llvm::dyn_cast<func::FuncOp>(argument.getOwner()->getParentOp());
    StringAttr text =
        function ? function.getArgAttrOfType<StringAttr>(
                       argument.getArgNumber(), kLayoutAttrName)
                 : StringAttr();
    return parseFor(text, rank, mesh);
  }
  auto result = llvm::cast<OpResult>(value);
  auto texts =
      result.getOwner()->getAttrOfType<ArrayAttr>(kLayoutsAttrName);
  if (!texts)
    return TensorLayout::replicated(rank);
  if (texts.size() != result.getOwner()->getNumResults())
    return llvm::createStringError(
        "tess.layouts needs one layout per result of '" +
        result.getOwner()->getName().getStringRef().str() + "'");
  return parseFor(llvm::dyn_cast<StringAttr>(texts[result.getResultNumber()]),
                  rank, mesh);
}

Expected<TensorLayout>
sharding::readResultLayout(func::FuncOp function, unsigned index,
                           const cost::DeviceMesh &mesh) {
  auto type = llvm::cast<RankedTensorType>(function.getResultTypes()[index]);
  return parseFor(function.getResultAttrOfType<StringAttr>(index,
                                                           kLayoutAttrName),
                  type.getRank(), mesh);
}
