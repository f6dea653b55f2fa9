//===- CompiledPipelinePlan.cpp - a pipelined #tess.plan as flags ---------===//

#include "CompiledPipelinePlan.h"

#include "tessera/Transforms/PipelinePlan.h"

#include "llvm/Support/FormatVariadic.h"

using namespace llvm;

namespace tessera::tesserac {

CompiledPipelinePlan compiledPipelinePlan(tess::PlanAttr plan) {
  CompiledPipelinePlan compiled;
  compiled.remat = *pipeline::parseRematName(plan.getRemat());
  StageMeshStrategy stageMesh = stageMeshStrategy(plan);
  compiled.mesh = stageMesh.mesh;
  compiled.strategy = stageMesh.strategy;
  StepPipeline &step = compiled.step;
  step.zero = plan.getZero();
  step.stages = plan.getStages();
  step.microBatches = plan.getMicrobatches();
  step.schedule = plan.getSchedule().str();
  // The pass wrote the schedule by its name: it parses.
  step.virtualStages =
      cantFail(pipeline::parseSchedule(plan.getSchedule())).virtualStages;
  bool remats = false;
  for (tess::ChunkAttr chunk : plan.getChunks()) {
    step.chunks.push_back({chunk.getFirst(), chunk.getLast()});
    step.chunkRemats.push_back(chunk.getRemat().str());
    remats = remats || !chunk.getRemat().empty();
  }
  if (!remats)
    step.chunkRemats.clear();
  return compiled;
}

SmallVector<tess::ChunkAttr> chunkAttributes(mlir::MLIRContext &context,
                                             const StepPipeline &step) {
  SmallVector<tess::ChunkAttr> chunks;
  for (auto [index, units] : llvm::enumerate(step.chunks))
    chunks.push_back(tess::ChunkAttr::get(
        &context, static_cast<int64_t>(index) % step.stages, units.first,
        units.second,
        index < step.chunkRemats.size() ? StringRef(step.chunkRemats[index])
                                        : StringRef()));
  return chunks;
}

} // namespace tessera::tesserac
