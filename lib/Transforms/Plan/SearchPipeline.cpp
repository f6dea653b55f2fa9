//===- SearchPipeline.cpp - tess-search-pipeline --------------------------===//
//
// The inter-op search as a pass: tesserac's pipelined compile and
// tessera-opt reach it from the same options, and its answer is the
// module's #tess.plan, which the compile's plan phase writes on the step it
// builds at one micro-batch. The search and the plan's translation are
// PipelinePlan.h's, which tesserac --explain --pipeline shares, so that the
// plan it prints is the one this pass writes.
//
//===----------------------------------------------------------------------===//

#include "tessera/CostModel/Cluster.h"
#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/Passes.h"
#include "tessera/Transforms/PipelinePlan.h"

namespace tessera {
#define GEN_PASS_DEF_SEARCHPIPELINE
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

struct SearchPipelinePass
    : tessera::impl::SearchPipelineBase<SearchPipelinePass> {
  using SearchPipelineBase::SearchPipelineBase;
  void runOnOperation() override;

private:
  /// The options as the search's pins; failure after an error naming the
  /// option.
  LogicalResult readOptions(cost::Cluster &planned,
                            pipeline::SearchOptions &search);
};

LogicalResult SearchPipelinePass::readOptions(cost::Cluster &planned,
                                              pipeline::SearchOptions &search) {
  ModuleOp module = getOperation();
  auto error = [&]() { return module.emitError() << "tess-search-pipeline: "; };
  llvm::Expected<cost::Cluster> loaded = cost::loadCluster(cluster);
  if (!loaded)
    return error() << "cluster '" << cluster
                   << "': " << llvm::toString(loaded.takeError());
  planned = std::move(*loaded);
  if (memoryLimit < 0)
    return error() << "memory-limit " << static_cast<int64_t>(memoryLimit)
                   << ": expected bytes >= 0 (0: the cluster's device "
                      "memory)";
  if (memoryLimit > 0)
    planned.device.memoryBytes = static_cast<double>(memoryLimit);
  if (devices < 0 || devices > planned.deviceCount())
    return error() << "devices " << static_cast<int64_t>(devices)
                   << ": cluster '" << planned.name << "' has "
                   << planned.deviceCount() << " devices (0: all of them)";
  if (devices > 0)
    search.devices = devices;
  for (auto [name, value, field] :
       {std::tuple<StringRef, int64_t, std::optional<int64_t> *>{
            "stages", stages, &search.stages},
        {"micro-batches", microBatches, &search.microBatches},
        {"tensor-parallel", tensorParallel, &search.tensorParallel}}) {
    if (value < 0)
      return error() << name << " " << value
                     << ": expected a positive count (0: searched)";
    if (value > 0)
      *field = value;
  }
  if (!schedule.empty()) {
    llvm::Expected<pipeline::Schedule> parsed =
        pipeline::parseSchedule(schedule);
    if (!parsed)
      return error() << "schedule '" << schedule
                     << "': " << llvm::toString(parsed.takeError());
    search.schedule = *parsed;
  }
  if (!remat.empty()) {
    search.remat = pipeline::parseRematName(remat);
    if (!search.remat)
      return error() << "remat '" << remat
                     << "': expected none, selective or full (empty: "
                        "searched per stage)";
  }
  if (zero < -1 || zero > 1)
    return error() << "zero " << static_cast<int>(zero)
                   << ": expected 0 or 1 (ZeRO-1 inside the stage mesh; -1: "
                      "searched)";
  if (zero >= 0)
    search.zero = zero == 1;
  if (!stageUnits.empty()) {
    if (!search.stages ||
        static_cast<int64_t>(stageUnits.size()) != *search.stages)
      return error() << "stage-units: " << stageUnits.size() << " counts for "
                     << (search.stages ? std::to_string(*search.stages)
                                       : std::string("unpinned"))
                     << " stages; pin stages and give each one's units";
    for (int64_t units : stageUnits) {
      if (units < 1)
        return error() << "stage-units: a stage of " << units
                       << " units; expected at least 1";
      search.stageUnitCounts.push_back(static_cast<size_t>(units));
    }
  }
  return success();
}

void SearchPipelinePass::runOnOperation() {
  ModuleOp module = getOperation();
  cost::Cluster planned;
  pipeline::SearchOptions search;
  if (failed(readOptions(planned, search)))
    return signalPassFailure();
  FailureOr<int64_t> batch = forwardBatch(module);
  if (failed(batch))
    return signalPassFailure();
  search.globalBatch = *batch;
  CompiledStepOptions step;
  step.loss = loss;
  step.precision = precision;
  step.vocabularyMultiple = vocabularyMultiple;
  step.logitsBlockBytes = logitsBlockBytes;
  auto forwardAt = [&](int64_t samples) {
    return forwardAtBatch(module, samples);
  };
  auto error = [&](const llvm::Twine &message) {
    module.emitError() << message;
  };
  FailureOr<SearchedPipeline> searched =
      searchPipelinePlan(forwardAt, planned, search, step, error);
  if (failed(searched))
    return signalPassFailure();
  llvm::Expected<tess::PlanAttr> plan = pipelinePlanAttribute(
      *module.getContext(), searched->plan, searched->profile);
  if (!plan) {
    module.emitError() << llvm::toString(plan.takeError());
    return signalPassFailure();
  }
  module->setAttr(sharding::kPlanAttrName, *plan);
}

} // namespace
