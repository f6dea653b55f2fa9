//===- TrainingStepEstimate.cpp - time, FLOPs and memory of a step --------===//

#include "tessera/CostModel/TrainingStepEstimate.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace tessera::cost {
namespace {

llvm::Error stepError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "training step estimate: " + message);
}

} // namespace

double TrainingStepEstimate::computeSeconds() const {
  double seconds = 0;
  for (double kindSeconds : secondsByKind)
    seconds += kindSeconds;
  return seconds;
}

double TrainingStepEstimate::modelFlopsUtilization() const {
  double peak = device.peakMatrixRate(precision);
  return modelFlops / stepSeconds() / peak;
}

llvm::Expected<TrainingStepEstimate>
estimateTrainingStep(ModuleOp module, const StepMemory &memory,
                     const Cluster &cluster, const DeviceMesh &mesh) {
  TrainingStepEstimate estimate;
  estimate.clusterName = cluster.name;
  estimate.device = cluster.device;
  estimate.mesh = mesh;
  estimate.memory = memory;
  estimate.memoryLimitBytes = cluster.device.memoryBytes;

  auto forwardBackward = module.lookupSymbol<func::FuncOp>("forward_backward");
  auto optimizerStep = module.lookupSymbol<func::FuncOp>("optimizer_step");
  if (!forwardBackward || forwardBackward.isExternal() || !optimizerStep)
    return stepError("the module has no @forward_backward and "
                     "@optimizer_step (run tess-build-training first)");
  if (auto precision =
          forwardBackward->getAttrOfType<StringAttr>("tess.precision")) {
    std::optional<Precision> parsed = parsePrecisionName(precision.getValue());
    if (!parsed)
      return stepError("@forward_backward has an unknown tess.precision '" +
                       precision.getValue() + "'");
    estimate.precision = *parsed;
  }

  for (BlockArgument argument : forwardBackward.getArguments()) {
    auto role = forwardBackward.getArgAttrOfType<StringAttr>(
        argument.getArgNumber(), "tess.input");
    if (role && role.getValue() == "input_ids")
      estimate.tokensPerDevice =
          llvm::cast<RankedTensorType>(argument.getType()).getNumElements();
  }
  if (estimate.tokensPerDevice == 0)
    return stepError("@forward_backward has no argument marked "
                     "tess.input = \"input_ids\"");
  estimate.tokensPerStep = estimate.tokensPerDevice * mesh.deviceCount();

  llvm::StringSet<> unmodelled;
  for (func::FuncOp function : {forwardBackward, optimizerStep}) {
    function.walk([&](Operation *op) {
      OpCost cost = estimateOpCost(op);
      if (!cost.modelled && unmodelled.insert(op->getName().getStringRef()).second)
        estimate.unmodelledOps.push_back(op->getName().getStringRef().str());
      if (cost.kind == OpKind::Free)
        return;
      size_t kind = static_cast<size_t>(cost.kind);
      estimate.secondsByKind[kind] += cost.time(cluster.device);
      estimate.flopsByKind[kind] += cost.flops;
      estimate.opsByKind[kind] += 1;
      estimate.flops += cost.flops;
      estimate.modelFlops += cost.modelFlops;
    });
  }

  estimate.gradientBytes = static_cast<double>(memory.state.gradients);
  estimate.gradientAllReduceSeconds =
      meshAllReduceTime(mesh, cluster, estimate.gradientBytes);
  return estimate;
}

} // namespace tessera::cost
