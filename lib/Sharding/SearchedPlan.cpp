//===- SearchedPlan.cpp - the search's plan as IR on the forward ----------===//

#include "tessera/Sharding/SearchedPlan.h"

#include "tessera/Sharding/PlanAnnotation.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tessera;
using namespace tessera::sharding;
using llvm::Expected;

namespace {

llvm::Error plannedError(Operation *op, const Twine &why) {
  return llvm::createStringError(
      llvm::formatv("tess.planned of '{0}': ", op->getName()).str() +
      why.str());
}

/// The layouts of `field` of `planned` (an array of #tess.layout), read on
/// `mesh`; empty when the field is absent.
Expected<SmallVector<TensorLayout>> readLayouts(Operation *op,
                                                DictionaryAttr planned,
                                                StringRef field,
                                                const cost::DeviceMesh &mesh) {
  SmallVector<TensorLayout> layouts;
  Attribute attribute = planned.get(field);
  if (!attribute)
    return layouts;
  auto array = llvm::dyn_cast<ArrayAttr>(attribute);
  if (!array)
    return plannedError(op, field + " must be an array of #tess.layout");
  for (Attribute element : array) {
    auto layout = llvm::dyn_cast<tess::LayoutAttr>(element);
    if (!layout)
      return plannedError(op, field + " must be an array of #tess.layout");
    Expected<TensorLayout> read = tensorLayout(layout, mesh);
    if (!read)
      return read.takeError();
    layouts.push_back(std::move(*read));
  }
  return layouts;
}

} // namespace

void sharding::writeSearchedPlan(func::FuncOp forward,
                                 const TrainingShardingPlan &plan) {
  MLIRContext *context = forward.getContext();
  auto module = forward->getParentOfType<ModuleOp>();
  erasePlannedAttributes(forward);
  bool sharded = plan.mesh.deviceCount() > 1;
  tess::MeshAttr mesh;
  if (sharded) {
    mesh = meshAttr(context, plan.mesh);
    module->setAttr(kMeshAttrName, mesh);
  }
  int64_t zero =
      plan.zeroStage < 0 ? tess::PlanAttr::kMixedZero : plan.zeroStage;
  module->setAttr(kPlanAttrName,
                  tess::PlanAttr::get(context, mesh, zero, "none",
                                      /*stages=*/1, /*schedule=*/"",
                                      /*microbatches=*/1, {}, /*offload=*/""));
  if (!sharded)
    return;

  auto layouts = [&](ArrayRef<TensorLayout> list) {
    SmallVector<Attribute> attributes;
    for (const TensorLayout &layout : list)
      attributes.push_back(layoutAttr(context, layout, plan.mesh));
    return ArrayAttr::get(context, attributes);
  };
  auto text = [&](StringRef value) { return StringAttr::get(context, value); };
  llvm::DenseMap<Operation *, const ParameterSharding *> parameters;
  for (const ParameterSharding &parameter : plan.parameters)
    parameters[parameter.op] = &parameter;
  for (const OpSharding &entry : plan.ops) {
    // A constant is no decision: the step casts or folds its copies.
    if (llvm::isa<tess::ConstantOp>(entry.op))
      continue;
    NamedAttrList fields;
    fields.append("strategy", text(entry.strategy));
    if (!entry.layer.empty())
      fields.append("layer", text(entry.layer));
    fields.append("results", layouts(entry.resultLayouts));
    if (const ParameterSharding *parameter = parameters.lookup(entry.op)) {
      fields.append("state",
                    layoutAttr(context, parameter->stateLayout, plan.mesh));
      fields.append("zero", IntegerAttr::get(IntegerType::get(context, 64),
                                             parameter->zeroStage));
      if (!parameter->zeroAxes.empty()) {
        SmallVector<Attribute> axes;
        for (unsigned axis : parameter->zeroAxes)
          axes.push_back(text(plan.mesh.axes[axis].name));
        fields.append("zero_axes", ArrayAttr::get(context, axes));
      }
    } else {
      fields.append("operands", layouts(entry.operandLayouts));
    }
    entry.op->setAttr(kPlannedAttrName, fields.getDictionary(context));
  }
  for (auto [index, layout] : llvm::enumerate(plan.resultLayouts))
    if (index < forward.getNumResults())
      forward.setResultAttr(index, kPlannedAttrName,
                            layoutAttr(context, layout, plan.mesh));
}

Expected<std::optional<PlannedOp>>
sharding::readPlannedOp(Operation *op, const cost::DeviceMesh &mesh) {
  Attribute attribute = op->getAttr(kPlannedAttrName);
  if (!attribute)
    return std::nullopt;
  auto planned = llvm::dyn_cast<DictionaryAttr>(attribute);
  if (!planned)
    return plannedError(op, "must be a dictionary");
  PlannedOp result;
  if (auto strategy = planned.getAs<StringAttr>("strategy"))
    result.strategy = strategy.str();
  if (auto layer = planned.getAs<StringAttr>("layer"))
    result.layer = layer.str();
  Expected<SmallVector<TensorLayout>> operands =
      readLayouts(op, planned, "operands", mesh);
  if (!operands)
    return operands.takeError();
  result.operands.assign(operands->begin(), operands->end());
  Expected<SmallVector<TensorLayout>> results =
      readLayouts(op, planned, "results", mesh);
  if (!results)
    return results.takeError();
  if (results->size() != op->getNumResults())
    return plannedError(op, llvm::formatv("results needs one layout per "
                                          "result ({0})",
                                          op->getNumResults()));
  result.results.assign(results->begin(), results->end());
  if (Attribute state = planned.get("state")) {
    auto layout = llvm::dyn_cast<tess::LayoutAttr>(state);
    if (!layout)
      return plannedError(op, "state must be a #tess.layout");
    Expected<TensorLayout> read = tensorLayout(layout, mesh);
    if (!read)
      return read.takeError();
    result.state = std::move(*read);
  }
  if (auto zero = planned.getAs<IntegerAttr>("zero"))
    result.zeroStage = static_cast<int>(zero.getInt());
  if (auto axes = planned.getAs<ArrayAttr>("zero_axes"))
    for (Attribute name : axes) {
      auto text = llvm::dyn_cast<StringAttr>(name);
      int axis = text ? mesh.axisIndex(text.getValue()) : -1;
      if (axis < 0)
        return plannedError(op, "zero_axes must name axes of the mesh");
      result.zeroAxes.push_back(static_cast<unsigned>(axis));
    }
  return result;
}

Expected<TensorLayout>
sharding::readPlannedResult(func::FuncOp forward, unsigned index,
                            const cost::DeviceMesh &mesh) {
  auto type = llvm::dyn_cast<RankedTensorType>(forward.getResultTypes()[index]);
  unsigned rank = type ? type.getRank() : 0;
  Attribute attribute = forward.getResultAttr(index, kPlannedAttrName);
  if (!attribute)
    return TensorLayout::replicated(rank);
  auto layout = llvm::dyn_cast<tess::LayoutAttr>(attribute);
  if (!layout)
    return llvm::createStringError(
        llvm::formatv("tess.planned of result {0} must be a #tess.layout",
                      index)
            .str());
  return tensorLayout(layout, mesh);
}

void sharding::erasePlannedAttributes(func::FuncOp function) {
  function.walk([](Operation *op) { op->removeAttr(kPlannedAttrName); });
  for (unsigned index = 0; index < function.getNumResults(); ++index)
    function.removeResultAttr(
        index, StringAttr::get(function.getContext(), kPlannedAttrName));
}
