//===- SearchPlan.cpp - tess-search-plan ----------------------------------===//
//
// The joint decision of a compile over N devices (issue 22: the intra-op
// and the inter-op searches as one, on the training step's forward) as a
// pass of the compile's `search` phase: tesserac --devices N and tessera-opt
// reach it from the same options, and its answer is the module as the
// winning search's pass writes it. The decision is TrainingPlan.h's, which
// tesserac --explain makes with the same options and reports in full.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/Passes.h"
#include "tessera/Transforms/TrainingPlan.h"

namespace tessera {
#define GEN_PASS_DEF_SEARCHPLAN
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;

namespace {

struct SearchPlanPass : tessera::impl::SearchPlanBase<SearchPlanPass> {
  using SearchPlanBase::SearchPlanBase;
  void runOnOperation() override;
};

void SearchPlanPass::runOnOperation() {
  ModuleOp module = getOperation();
  SearchPlanOptions options;
  options.cluster = cluster;
  options.devices = devices;
  options.mesh = mesh;
  options.pins.assign(pins.begin(), pins.end());
  options.memoryLimit = memoryLimit;
  options.zero = zero;
  options.remat = remat;
  options.stages = stages;
  options.microBatches = microBatches;
  options.schedule = schedule;
  options.searchTimeout = searchTimeout;
  options.loss = loss;
  options.precision = precision;
  options.vocabularyMultiple = vocabularyMultiple;
  options.logitsBlockBytes = logitsBlockBytes;
  std::string unfit;
  FailureOr<TrainingPlanDecision> decision =
      decideTrainingPlan(module, options, unfit);
  if (failed(decision)) {
    if (!unfit.empty()) {
      // The pins that say which devices: the count, a stage's mesh or both.
      std::string devicesPin =
          options.mesh.empty() ? "devices " + std::to_string(options.devices)
          : options.devices == 0
              ? "mesh " + options.mesh
              : "devices " + std::to_string(options.devices) + " with mesh " +
                    options.mesh;
      module.emitError() << "tess-search-plan: " << devicesPin << ": "
                         << unfit;
    }
    return signalPassFailure();
  }
  if (!decision->offloaded.empty())
    module.emitRemark() << decision->offloaded;
}

} // namespace
