//===- CompiledPipelinePlan.cpp - the searched pipeline plan as compiled --===//

#include "CompiledPipelinePlan.h"

#include "tessera/CostModel/DeviceMesh.h"
#include "tessera/Sharding/PlanAnnotation.h"

#include "llvm/Support/FormatVariadic.h"

using namespace llvm;

namespace tessera::tesserac {

namespace {

Error refuse(const Twine &message) {
  return createStringError(inconvertibleErrorCode(), message);
}

/// The chunks' first and last units: the stages' ranges, or with V chunks
/// a device (interleaved:V) each stage's layers in V equal parts, chunk
/// v x stages + s being part v of stage s, the embedding in chunk 0 and the
/// head in the last (Megatron's interleaving, which the search prices).
Expected<std::vector<std::pair<int64_t, int64_t>>>
chunkUnits(const pipeline::PipelinePlan &plan,
           const pipeline::ProgramProfile &profile) {
  std::vector<std::pair<int64_t, int64_t>> chunks;
  int64_t virtualStages = plan.schedule.virtualStages;
  if (virtualStages == 1) {
    for (const pipeline::StagePlan &stage : plan.stages)
      chunks.push_back({static_cast<int64_t>(stage.firstUnit),
                        static_cast<int64_t>(stage.endUnit) - 1});
    return chunks;
  }
  auto stages = static_cast<int64_t>(plan.stages.size());
  std::vector<int64_t> layers;
  for (const pipeline::StagePlan &stage : plan.stages) {
    int64_t count = 0;
    for (size_t unit = stage.firstUnit; unit < stage.endUnit; ++unit)
      count += profile.units[unit].kind == pipeline::UnitKind::Layer;
    layers.push_back(count);
  }
  int64_t next = 0, chunkCount = stages * virtualStages;
  for (int64_t chunk = 0; chunk < chunkCount; ++chunk) {
    int64_t units = layers[chunk % stages] / virtualStages +
                    (chunk == 0) + (chunk == chunkCount - 1);
    if (units == 0)
      return refuse(formatv("the searched plan's stage {0} has {1} layers, "
                            "fewer than the {2} chunks interleaved:{2} "
                            "cuts it into; pin another --schedule",
                            chunk % stages, layers[chunk % stages],
                            virtualStages));
    chunks.push_back({next, next + units - 1});
    next += units;
  }
  return chunks;
}

} // namespace

Expected<CompiledPipelinePlan>
compiledPipelinePlan(const pipeline::PipelinePlan &plan,
                     const pipeline::ProgramProfile &profile) {
  CompiledPipelinePlan compiled;
  const pipeline::StagePlan &first = plan.stages.front();
  // A stage without layers recomputes nothing whatever it says: the
  // remat is that of the stages with layers.
  auto hasLayers = [&](const pipeline::StagePlan &stage) {
    for (size_t unit = stage.firstUnit; unit < stage.endUnit; ++unit)
      if (profile.units[unit].kind == pipeline::UnitKind::Layer)
        return true;
    return false;
  };
  // The plan's remat is the first stage with layers'; a stage that
  // recomputes otherwise says its own on its chunks.
  auto layered = llvm::find_if(plan.stages, hasLayers);
  if (layered != plan.stages.end())
    compiled.remat = layered->remat;
  std::vector<std::string> stageRemats;
  bool remats = false;
  for (const pipeline::StagePlan &stage : plan.stages) {
    bool differs = hasLayers(stage) && stage.remat != compiled.remat;
    stageRemats.push_back(differs ? pipeline::rematName(stage.remat).str()
                                  : std::string());
    remats = remats || differs;
  }
  for (auto [index, stage] : llvm::enumerate(plan.stages)) {
    if (stage.cost.tensorParallel != first.cost.tensorParallel ||
        stage.cost.dataParallel != first.cost.dataParallel)
      return refuse(formatv(
          "the searched pipeline plan runs stage 0 as {0} and stage {1} as "
          "{2}; the compiled driver runs every stage on one stage mesh: pin "
          "the stage mesh with --mesh, or another --stages or --devices",
          first.cost.intraOpPlan(), index, stage.cost.intraOpPlan()));
    if (stage.cost.dataParallel > 1 && stage.cost.zero != first.cost.zero)
      return refuse(formatv(
          "the searched pipeline plan shards the optimizer state of stage "
          "{0} and not of stage {1} (ZeRO-1); the compiled driver runs "
          "every stage alike: pin --zero 0 or --zero 1",
          stage.cost.zero ? index : 0, stage.cost.zero ? 0 : index));
  }
  // ZeRO-1 over each stage's dp group (runtime/train/StageZero.h).
  compiled.step.zero = first.cost.zero && first.cost.dataParallel > 1 ? 1 : 0;
  int64_t dataParallel = first.cost.dataParallel;
  int64_t tensorParallel = first.cost.tensorParallel;
  if (dataParallel > 1 && tensorParallel > 1) {
    compiled.mesh = formatv("dp={0},tp={1}", dataParallel, tensorParallel);
    compiled.strategy = "dp-tp";
  } else if (dataParallel > 1) {
    compiled.mesh = formatv("dp={0}", dataParallel);
    compiled.strategy = "dp";
  } else if (tensorParallel > 1) {
    compiled.mesh = formatv("tp={0}", tensorParallel);
    compiled.strategy = "tp";
  }
  compiled.step.stages = static_cast<int64_t>(plan.stages.size());
  compiled.step.virtualStages = plan.schedule.virtualStages;
  compiled.step.microBatches = plan.microBatches;
  compiled.step.schedule = plan.schedule.name();
  Expected<std::vector<std::pair<int64_t, int64_t>>> chunks =
      chunkUnits(plan, profile);
  if (!chunks)
    return chunks.takeError();
  compiled.step.chunks = std::move(*chunks);
  // Chunk c runs on stage c mod stages, with that stage's remat.
  if (remats)
    for (size_t chunk = 0; chunk < compiled.step.chunks.size(); ++chunk)
      compiled.step.chunkRemats.push_back(
          stageRemats[chunk % stageRemats.size()]);
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

tess::PlanAttr planAttribute(mlir::MLIRContext &context,
                             const CompiledPipelinePlan &plan) {
  tess::MeshAttr mesh;
  if (!plan.mesh.empty())
    mesh = sharding::meshAttr(&context, cantFail(cost::parseMesh(plan.mesh)));
  return tess::PlanAttr::get(
      &context, mesh, plan.step.zero, pipeline::rematName(plan.remat),
      plan.step.stages, plan.step.schedule, plan.step.microBatches,
      chunkAttributes(context, plan.step), /*offload=*/"");
}

Expected<pipeline::SearchOptions> searchPinsOf(tess::PlanAttr attribute) {
  pipeline::SearchOptions pins;
  if (attribute.getZero() != 0 && attribute.getZero() != 1)
    return refuse(formatv("a pipelined plan with zero = {0}: the compiled "
                          "pipelines shard each stage's optimizer state "
                          "over its data-parallel group at most (expected "
                          "zero 0 or 1)",
                          attribute.getZero() == tess::PlanAttr::kMixedZero
                              ? std::string("mixed")
                              : std::to_string(attribute.getZero())));
  Expected<pipeline::Schedule> schedule =
      pipeline::parseSchedule(attribute.getSchedule());
  if (!schedule)
    return schedule.takeError();
  pins.schedule = *schedule;
  pins.stages = attribute.getStages();
  pins.microBatches = attribute.getMicrobatches();
  // Chunks that say their own remat: the search chose it per stage, which
  // no pin forces; with the stages pinned it chooses the same again.
  if (llvm::none_of(attribute.getChunks(), [](tess::ChunkAttr chunk) {
        return !chunk.getRemat().empty();
      }))
    pins.remat = *pipeline::parseRematName(attribute.getRemat());
  pins.zero = attribute.getZero() == 1;
  int64_t meshDevices = 1, dataParallel = 1;
  pins.tensorParallel = 1;
  if (tess::MeshAttr mesh = attribute.getMesh()) {
    cost::DeviceMesh stageMesh = sharding::deviceMesh(mesh);
    meshDevices = stageMesh.deviceCount();
    for (const cost::MeshAxis &axis : stageMesh.axes) {
      if (axis.name == "tp")
        pins.tensorParallel = axis.size;
      if (axis.name == "dp")
        dataParallel = axis.size;
    }
  }
  // The compile writes zero = 1 only over a stage mesh's dp replicas.
  if (attribute.getZero() == 1 && dataParallel < 2)
    return refuse("a pipelined plan with zero = 1 but no data-parallel "
                  "stage mesh: the compiled pipelines shard a stage's "
                  "optimizer state over its dp replicas only (expected "
                  "zero 0, or a mesh with dp)");
  pins.devices = *pins.stages * meshDevices;
  // Each device's units are the search's stage: the chunks it runs.
  if (!attribute.getChunks().empty()) {
    pins.stageUnitCounts.assign(static_cast<size_t>(*pins.stages), 0);
    for (auto [index, chunk] : llvm::enumerate(attribute.getChunks()))
      pins.stageUnitCounts[index % pins.stageUnitCounts.size()] +=
          static_cast<size_t>(chunk.getLast() - chunk.getFirst() + 1);
  }
  return pins;
}

} // namespace tessera::tesserac
