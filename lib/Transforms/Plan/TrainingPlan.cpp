//===- TrainingPlan.cpp - tess-search-plan's decision ---------------------===//
//
// See TrainingPlan.h. The pass (SearchPlan.cpp) and tesserac, which prints
// the choice under --explain, call decideTrainingPlan alike, so that the
// plan --explain reports is the one the compile builds.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/TrainingPlan.h"

#include "tessera/CostModel/DeviceMesh.h"
#include "tessera/Pipeline/StageCostOracle.h"
#include "tessera/Transforms/CompiledStepMemory.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace tessera;

namespace {

/// A `mesh` pin: its devices and tensor-parallel degree (devices 0: none).
struct StageMeshPin {
  int64_t devices = 0;
  int64_t tensorParallel = 1;
};

/// The options of the passes tess-search-plan runs, from its own: each
/// search's pins and the step it measures.
FitMemoryOptions fitMemoryOptions(const SearchPlanOptions &options) {
  FitMemoryOptions fit;
  fit.cluster = options.cluster;
  // A pinned mesh is the one-stage plan's mesh (the search runs only when
  // it is all the devices).
  fit.mesh = options.mesh;
  fit.devices = options.mesh.empty() ? options.devices : 0;
  fit.memoryLimit = options.memoryLimit;
  fit.remat = options.remat;
  return copyStepOptions(fit, options);
}

SearchShardingOptions searchShardingOptions(const SearchPlanOptions &options) {
  SearchShardingOptions search;
  search.cluster = options.cluster;
  search.mesh = options.mesh;
  search.devices = options.mesh.empty() ? options.devices : 0;
  search.memoryLimit = options.memoryLimit;
  search.zero = options.zero;
  search.pins = options.pins;
  search.searchTimeout = options.searchTimeout;
  return copyStepOptions(search, options);
}

SearchPipelineOptions searchPipelineOptions(const SearchPlanOptions &options,
                                            const StageMeshPin &pin) {
  SearchPipelineOptions search;
  search.cluster = options.cluster;
  search.devices = options.devices;
  search.memoryLimit = options.memoryLimit;
  search.stages = options.stages;
  search.microBatches = options.microBatches;
  search.schedule = options.schedule;
  search.remat = options.remat;
  search.zero = options.zero;
  if (pin.devices > 0) {
    search.stages = options.devices / pin.devices;
    search.tensorParallel = pin.tensorParallel;
  }
  return copyStepOptions(search, options);
}

/// Why `options`' pins leave the mesh search out: a pipeline's shape,
/// which no one-stage mesh plan has (empty: they do not).
std::string meshExcluded(const SearchPlanOptions &options,
                         const StageMeshPin &mesh) {
  if (mesh.devices > 0 && mesh.devices < options.devices)
    return llvm::formatv("mesh {0} is one stage's {1} devices, which no "
                         "one-stage plan of {2} devices is",
                         options.mesh, mesh.devices, options.devices);
  std::string pin;
  if (options.stages > 1)
    pin = llvm::formatv("stages {0}", options.stages);
  else if (options.microBatches > 1)
    pin = llvm::formatv("micro-batches {0}", options.microBatches);
  else if (!options.schedule.empty())
    pin = "schedule " + options.schedule;
  if (pin.empty())
    return "";
  return pin + " pins a pipeline's shape, which no one-stage mesh plan has";
}

/// Why `options`' pins leave the pipeline search out (empty: they do not).
std::string pipelineExcluded(const SearchPlanOptions &options) {
  if (!options.pins.empty())
    return "shard pins parameters' layouts on the mesh, which only the "
           "mesh search plans";
  if (options.zero >= 2)
    return llvm::formatv("zero {0}: no pipelined plan runs ZeRO-2 or 3",
                         static_cast<int>(options.zero));
  return "";
}

/// The pipeline search's prices in `choice`: its best plan, and its best
/// one-stage plan, searched again pinned to one stage on the profile the
/// decision searched (the same model, the same space) and checked against
/// its compiled program as the best was (`module`'s forward).
LogicalResult pricePipeline(ModuleOp module,
                            const PipelinePlanDecision &decision,
                            PlanChoice &choice) {
  const pipeline::PipelinePlan &best = decision.plan;
  choice.pipelineLayout = pipelineLayout(best);
  choice.pipelineSeconds = best.stepSeconds;
  choice.pipelineStages = static_cast<int64_t>(best.stages.size());
  choice.notCompiled = decision.notCompiled;
  if (choice.pipelineStages == 1) {
    choice.oneStageLayout = choice.pipelineLayout;
    choice.oneStageSeconds = best.stepSeconds;
    return success();
  }
  PipelinePlanDecision oneStage = decision;
  oneStage.search.stages = 1;
  oneStage.compiledDevices.clear();
  pipeline::MegatronStageOracle oracle(decision.profile, decision.cluster);
  llvm::Expected<pipeline::PipelinePlan> flat = pipeline::searchPipeline(
      decision.profile, decision.cluster, oracle, oneStage.search);
  if (!flat) {
    // No one-stage plan fits: the row says so.
    llvm::consumeError(flat.takeError());
    return success();
  }
  oneStage.plan = std::move(*flat);
  std::string unfit;
  // No one-stage plan fits as compiled: no row either; an error is one.
  if (failed(checkCompiledPipeline(module, oneStage, &unfit)))
    return unfit.empty() ? failure() : success();
  choice.oneStageLayout = pipelineLayout(oneStage.plan);
  choice.oneStageSeconds = oneStage.plan.stepSeconds;
  return success();
}

/// Reads `options`' `mesh` pin, every stage's mesh: its devices and
/// tensor-parallel degree, `options.devices` set from them when 0 (the
/// mesh's times the stages). Failure after the error.
FailureOr<StageMeshPin> readMeshPin(ModuleOp module,
                                    SearchPlanOptions &options) {
  auto error = [&]() { return module.emitError() << "tess-search-plan: "; };
  StageMeshPin pin;
  if (options.mesh.empty() && !options.pins.empty())
    return error() << "shard " << options.pins.front()
                   << ": a pin names the axes of a pinned `mesh`";
  if (options.mesh.empty())
    return pin;
  llvm::Expected<cost::DeviceMesh> mesh = cost::parseMesh(options.mesh);
  if (!mesh)
    return error() << "mesh " << options.mesh << ": "
                   << llvm::toString(mesh.takeError());
  pin.devices = mesh->deviceCount();
  for (const cost::MeshAxis &axis : mesh->axes) {
    if (axis.name == "tp")
      pin.tensorParallel = axis.size;
    else if (axis.name != "dp")
      return error() << "mesh " << options.mesh << ": a stage's mesh has "
                     << "the axes dp and tp, not " << axis.name;
  }
  if (options.devices == 0)
    options.devices = pin.devices * std::max<int64_t>(options.stages, 1);
  if (options.devices % pin.devices != 0)
    return error() << "mesh " << options.mesh << " of " << pin.devices
                   << " devices with devices " << options.devices
                   << ": every stage runs on the mesh, so its devices "
                      "divide them";
  if (options.stages > 0 && options.stages != options.devices / pin.devices)
    return error() << "stages " << options.stages << " with mesh "
                   << options.mesh << ": " << options.devices
                   << " devices are " << options.devices / pin.devices
                   << (options.devices / pin.devices == 1 ? " stage"
                                                          : " stages")
                   << " of its " << pin.devices;
  return pin;
}

} // namespace

bool PlanChoice::pipelined() const {
  if (!pipelineRunnable())
    return false;
  // No mesh of the devices fits, or the pins leave no mesh plan: the
  // pipeline search's plan, one stage or more, is the one that does.
  if (!meshUnfit.empty() || !meshExcluded.empty())
    return true;
  if (pipelineStages < 2)
    return false;
  if (oneStageLayout && !(pipelineSeconds < oneStageSeconds))
    return false;
  return meshLayout && pipelineSeconds < meshSeconds;
}

void PlanChoice::print(llvm::raw_ostream &os) const {
  os << llvm::formatv("Plan choice on {0} devices (the lowest predicted step "
                      "that fits; a pipeline must beat both one-stage "
                      "prices):\n",
                      devices);
  auto row = [&](StringRef search, StringRef layout, StringRef price) {
    os << llvm::formatv("  {0,-34} {1,-50} {2}\n", search, layout, price);
  };
  auto milliseconds = [](double seconds) {
    return llvm::formatv("{0:F4} ms", seconds * 1e3).str();
  };
  // A search the pins leave out, or whose pins no plan fits: why, on a
  // line of its own.
  auto because = [&](StringRef search, StringRef what, StringRef why) {
    row(search, what, "-");
    os << "    (" << why << ")\n";
  };
  if (!meshExcluded.empty())
    because("one stage, tess-search-sharding", "not searched", meshExcluded);
  else if (meshLayout)
    row("one stage, tess-search-sharding", "mesh " + *meshLayout,
        milliseconds(meshSeconds));
  else
    row("one stage, tess-search-sharding", "no mesh fits", "-");
  if (!pipelineExcluded.empty()) {
    because("tess-search-pipeline", "not searched", pipelineExcluded);
  } else if (!pipelineUnfit.empty()) {
    because("tess-search-pipeline", "no plan fits the pins", pipelineUnfit);
  } else {
    if (oneStageLayout)
      row("one stage, tess-search-pipeline", *oneStageLayout,
          milliseconds(oneStageSeconds));
    else
      row("one stage, tess-search-pipeline", "none fits", "-");
    row("best, tess-search-pipeline", pipelineLayout,
        milliseconds(pipelineSeconds));
    if ((pipelineStages > 1 || !meshExcluded.empty()) && !notCompiled.empty())
      os << "  (the pipeline is not compiled: " << notCompiled << ")\n";
  }
  os << "  compiled: "
     << (pipelined() ? "the pipeline search's plan"
                     : "the one-stage sharding search's plan")
     << "\n";
}

std::string PlanChoice::unfit() const {
  std::string reason = meshExcluded.empty() ? meshUnfit : meshExcluded;
  std::string pipeline = !pipelineExcluded.empty() ? pipelineExcluded
                         : !pipelineUnfit.empty()  ? pipelineUnfit
                         : !notCompiled.empty()
                             ? "its plan is not compiled: " + notCompiled
                             : std::string();
  if (pipeline.empty())
    return reason;
  return reason + "; the pipeline search: " + pipeline;
}

std::string tessera::pipelineLayout(const pipeline::PipelinePlan &plan) {
  const pipeline::StageCost &first = plan.stages.front().cost;
  return llvm::formatv("PP {0} x DP {1} x TP {2}{3}, {4}, {5} micro-batches",
                       plan.stages.size(), first.dataParallel,
                       first.tensorParallel, first.zero ? ", ZeRO-1" : "",
                       plan.schedule.name(), plan.microBatches)
      .str();
}

FailureOr<TrainingPlanDecision>
tessera::decideTrainingPlan(ModuleOp module, SearchPlanOptions options,
                            std::string &unfit) {
  auto error = [&]() { return module.emitError() << "tess-search-plan: "; };
  FailureOr<StageMeshPin> meshPin = readMeshPin(module, options);
  if (failed(meshPin))
    return failure();
  if (options.devices < 2)
    return error() << "devices " << options.devices
                   << ": expected at least 2 (one device has no mesh or "
                      "pipeline to choose: tess-fit-memory fits it)";
  if (options.zero < -1 || options.zero > 3)
    return error() << "zero " << static_cast<int>(options.zero)
                   << ": expected a ZeRO stage 0 to 3 (-1: searched)";
  TrainingPlanDecision decision;
  PlanChoice &choice = decision.choice;
  choice.devices = options.devices;
  choice.meshExcluded = meshExcluded(options, *meshPin);
  choice.pipelineExcluded = pipelineExcluded(options);
  if (!choice.meshExcluded.empty() && !choice.pipelineExcluded.empty())
    return error() << choice.pipelineExcluded << "; "
                   << choice.meshExcluded << ": no plan takes both pins";
  // The mesh search runs on a copy, kept if it wins; the pipeline search
  // writes only the module's #tess.plan, and only for a plan the compiled
  // driver runs.
  OwningOpRef<ModuleOp> meshModule(module.clone());
  if (choice.pipelineExcluded.empty()) {
    FailureOr<PipelinePlanDecision> pipelined = decidePipelinePlan(
        module, searchPipelineOptions(options, *meshPin), &choice.pipelineUnfit);
    if (failed(pipelined) && choice.pipelineUnfit.empty())
      return failure();
    if (succeeded(pipelined)) {
      decision.pipeline = std::move(*pipelined);
      if (failed(pricePipeline(module, decision.pipeline, choice)))
        return failure();
    }
  }

  if (choice.meshExcluded.empty()) {
    FailureOr<std::string> offloaded =
        fitMemory(*meshModule, fitMemoryOptions(options));
    if (failed(offloaded))
      return failure();
    decision.offloaded = std::move(*offloaded);
    decision.fitted = tess::PlanAttr::lookup(*meshModule);
    std::string reason;
    FailureOr<MeshPlanDecision> mesh =
        decideMeshPlan(*meshModule, searchShardingOptions(options), reason);
    if (failed(mesh)) {
      if (reason.empty())
        return failure();
      choice.meshUnfit = reason;
    } else {
      choice.meshLayout = mesh->plan.mesh.describe();
      choice.meshSeconds = mesh->plan.predicted.stepSeconds();
      decision.mesh = std::move(*mesh);
    }
  }
  if (choice.pipelined())
    return decision;
  if (!decision.mesh) {
    unfit = choice.unfit();
    return failure();
  }
  adoptModule(module, *meshModule);
  return decision;
}
