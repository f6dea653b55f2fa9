//===- PlanChoice.cpp - one-stage or pipelined: one decision --------------===//
//
// See PlanChoice.h.
//
//===----------------------------------------------------------------------===//

#include "PlanChoice.h"

#include "llvm/Support/FormatVariadic.h"

using namespace llvm;

namespace tessera::tesserac {

bool PlanChoice::pipelined() const {
  if (!notCompiled.empty())
    return false;
  // No mesh of the devices fits: the pipeline search's plan, one stage or
  // more, is the one that does.
  if (!meshUnfit.empty())
    return true;
  if (pipelineStages < 2)
    return false;
  if (oneStageLayout && !(pipelineSeconds < oneStageSeconds))
    return false;
  return meshLayout && pipelineSeconds < meshSeconds;
}

void PlanChoice::print(raw_ostream &os) const {
  os << formatv("Plan choice on {0} devices (the lowest predicted step that "
                "fits; a pipeline must beat both one-stage prices):\n",
                devices);
  auto row = [&](StringRef search, StringRef layout, StringRef price) {
    os << formatv("  {0,-34} {1,-50} {2}\n", search, layout, price);
  };
  auto milliseconds = [](double seconds) {
    return formatv("{0:F4} ms", seconds * 1e3).str();
  };
  if (meshLayout)
    row("one stage, tess-search-sharding", "mesh " + *meshLayout,
        milliseconds(meshSeconds));
  else if (!meshUnfit.empty())
    row("one stage, tess-search-sharding", "no mesh fits", "-");
  else
    row("one stage, tess-search-sharding", "searched by the compile", "-");
  if (oneStageLayout)
    row("one stage, tess-search-pipeline", *oneStageLayout,
        milliseconds(oneStageSeconds));
  else
    row("one stage, tess-search-pipeline", "none fits", "-");
  row("best, tess-search-pipeline", pipelineLayout,
      milliseconds(pipelineSeconds));
  if (pipelineStages > 1 && !notCompiled.empty())
    os << "  (the pipeline is not compiled: " << notCompiled << ")\n";
  os << "  compiled: "
     << (pipelined() ? "the pipeline search's plan"
                     : "the one-stage sharding search's plan")
     << "\n";
}

std::string pipelineLayout(const pipeline::PipelinePlan &plan) {
  const pipeline::StageCost &first = plan.stages.front().cost;
  return formatv("PP {0} x DP {1} x TP {2}{3}, {4}, {5} micro-batches",
                 plan.stages.size(), first.dataParallel, first.tensorParallel,
                 first.zero ? ", ZeRO-1" : "", plan.schedule.name(),
                 plan.microBatches)
      .str();
}

} // namespace tessera::tesserac
