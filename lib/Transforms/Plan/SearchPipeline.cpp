//===- SearchPipeline.cpp - tess-search-pipeline --------------------------===//
//
// The inter-op search as a pass: tesserac's pipelined compile and
// tessera-opt reach it from the same options, and its answer is the
// module's #tess.plan, which the compile's plan phase writes on the step it
// builds at one micro-batch. The decision is PipelinePlan.h's, which
// tesserac --explain --pipeline makes with the same options and reports in
// full, so that the plan it prints is the one this pass writes.
//
//===----------------------------------------------------------------------===//

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
};

void SearchPipelinePass::runOnOperation() {
  ModuleOp module = getOperation();
  SearchPipelineOptions options;
  options.cluster = cluster;
  options.devices = devices;
  options.memoryLimit = memoryLimit;
  options.stages = stages;
  options.microBatches = microBatches;
  options.schedule = schedule;
  options.remat = remat;
  options.zero = zero;
  options.tensorParallel = tensorParallel;
  options.stageUnits.assign(stageUnits.begin(), stageUnits.end());
  options.loss = loss;
  options.precision = precision;
  options.vocabularyMultiple = vocabularyMultiple;
  options.logitsBlockBytes = logitsBlockBytes;
  FailureOr<PipelinePlanDecision> decision =
      decidePipelinePlan(module, options);
  if (failed(decision))
    return signalPassFailure();
  if (!decision->notCompiled.empty()) {
    module.emitError() << decision->notCompiled;
    return signalPassFailure();
  }
}

} // namespace
