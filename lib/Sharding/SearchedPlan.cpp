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

/// `layouts` read on `mesh`.
Expected<SmallVector<TensorLayout>>
readLayouts(ArrayRef<tess::LayoutAttr> layouts, const cost::DeviceMesh &mesh) {
  SmallVector<TensorLayout> read;
  for (tess::LayoutAttr layout : layouts) {
    Expected<TensorLayout> one = tensorLayout(layout, mesh);
    if (!one)
      return one.takeError();
    read.push_back(std::move(*one));
  }
  return read;
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
  // The recomputation and offload tess-fit-memory decided before the
  // search stay (an offload only where the plan is one device's, C7).
  StringRef remat = "none", offload;
  if (tess::PlanAttr fitted = tess::PlanAttr::lookup(module)) {
    remat = fitted.getRemat();
    if (!sharded)
      offload = fitted.getOffload();
  }
  module->setAttr(kPlanAttrName,
                  tess::PlanAttr::get(context, mesh, zero, remat,
                                      /*stages=*/1, /*schedule=*/"",
                                      /*microbatches=*/1, {}, offload));
  if (!sharded)
    return;

  auto layouts = [&](ArrayRef<TensorLayout> list) {
    SmallVector<tess::LayoutAttr> attributes;
    for (const TensorLayout &layout : list)
      attributes.push_back(layoutAttr(context, layout, plan.mesh));
    return attributes;
  };
  llvm::DenseMap<Operation *, const ParameterSharding *> parameters;
  for (const ParameterSharding &parameter : plan.parameters)
    parameters[parameter.op] = &parameter;
  for (const OpSharding &entry : plan.ops) {
    // A constant is no decision: the step casts or folds its copies.
    if (llvm::isa<tess::ConstantOp>(entry.op))
      continue;
    tess::LayoutAttr state;
    int64_t zeroStage = 0;
    SmallVector<StringAttr> zeroAxes;
    if (const ParameterSharding *parameter = parameters.lookup(entry.op)) {
      state = layoutAttr(context, parameter->stateLayout, plan.mesh);
      zeroStage = parameter->zeroStage;
      for (unsigned axis : parameter->zeroAxes)
        zeroAxes.push_back(StringAttr::get(context, plan.mesh.axes[axis].name));
    }
    entry.op->setAttr(kPlannedAttrName,
                      tess::PlannedAttr::get(
                          context, entry.strategy, entry.layer,
                          layouts(entry.operandLayouts),
                          layouts(entry.resultLayouts), state, zeroStage,
                          zeroAxes));
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
  auto planned = llvm::dyn_cast<tess::PlannedAttr>(attribute);
  if (!planned)
    return plannedError(op, "must be a #tess.planned");
  PlannedOp result;
  result.strategy = planned.getStrategy().str();
  result.layer = planned.getLayer().str();
  Expected<SmallVector<TensorLayout>> operands =
      readLayouts(planned.getOperands(), mesh);
  if (!operands)
    return operands.takeError();
  result.operands.assign(operands->begin(), operands->end());
  Expected<SmallVector<TensorLayout>> results =
      readLayouts(planned.getResults(), mesh);
  if (!results)
    return results.takeError();
  // One layout per operand and result: the attribute's C5, verified.
  result.results.assign(results->begin(), results->end());
  if (planned.isParameter()) {
    Expected<TensorLayout> state = tensorLayout(planned.getState(), mesh);
    if (!state)
      return state.takeError();
    result.state = std::move(*state);
  }
  result.zeroStage = static_cast<int>(planned.getZero());
  for (StringAttr name : planned.getZeroAxes()) {
    int axis = mesh.axisIndex(name.getValue());
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
