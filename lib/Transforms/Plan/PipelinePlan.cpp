//===- PipelinePlan.cpp - tess-search-pipeline's decision -----------------===//
//
// See PipelinePlan.h. The search, its options and the plan's translation are
// here, the pass (SearchPipeline.cpp) and tesserac --explain --pipeline
// calling decidePipelinePlan alike, so that the plan --explain prints is the
// one the pass writes and the compile builds.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/PipelinePlan.h"

#include "tessera/CostModel/DeviceMesh.h"
#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/CompiledStepMemory.h"
#include "tessera/Transforms/ForwardBatch.h"
#include "tessera/Transforms/MeshPlan.h"
#include "tessera/Transforms/TrainingPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <optional>

using namespace mlir;
using namespace tessera;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

/// The searches of a plan on several devices before the compiled program's
/// miss is an error (each plan found is compiled and measured), and the
/// least change of the bound tried (a share of the limit), as MeshPlan.cpp's.
constexpr int kMaxSearches = 6;
constexpr double kBoundStep = 1e-4;

llvm::Error refuse(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The training program of the module's forward at `batch` samples, q/k/v
/// apart: the stages' meshes plan the projections one column split each.
FailureOr<OwningOpRef<ModuleOp>>
trainingProgram(ModuleOp module, int64_t batch,
                const CompiledStepOptions &step) {
  FailureOr<OwningOpRef<ModuleOp>> program = forwardAtBatch(module, batch);
  if (failed(program) ||
      failed(buildTrainingStep(**program, step, /*packQkv=*/false)))
    return failure();
  return program;
}

/// The memory of the one-device step the compile builds from the module's
/// forward at `batch` samples a micro-batch, `microBatches` of them a step,
/// recomputing `remat`.
FailureOr<StepMemory> compiledMemory(ModuleOp module, int64_t batch,
                                     pipeline::RematMode remat,
                                     int64_t microBatches,
                                     const CompiledStepOptions &step) {
  FailureOr<OwningOpRef<ModuleOp>> forward = forwardAtBatch(module, batch);
  if (failed(forward))
    return failure();
  return compiledStepMemory(**forward, remat, step, microBatches);
}

/// Scales the stage model's working sets so that the whole program as one
/// stage on one device, at `batch` samples and without recomputation,
/// predicts the compiled step's peak: the search's estimate of every
/// candidate is then calibrated to the analysis that decides the fit.
LogicalResult calibrateWorkingSet(pipeline::ProgramProfile &profile,
                                  const pipeline::MegatronStageOracle &oracle,
                                  int64_t batch, ModuleOp module,
                                  const CompiledStepOptions &step) {
  FailureOr<StepMemory> compiled = compiledMemory(
      module, batch, pipeline::RematMode::None, /*microBatches=*/1, step);
  if (failed(compiled))
    return failure();
  pipeline::StageQuery whole;
  whole.endUnit = profile.units.size();
  whole.microBatchSamples = batch;
  std::vector<pipeline::StageCost> plans = oracle.plans(whole);
  if (plans.empty())
    return success();
  // The saved values, the inputs and the state are the compiled
  // program's by construction; what the compiled peak holds beyond them is
  // the temporaries, which the profiled program (before the lowering's
  // fusions and their f32 temporaries) sees only roughly.
  const pipeline::StageMemory &model = plans.front().memory;
  double temporaries = model.working;
  double measured = compiled->totalBytes() - model.resident() -
                    model.activationsPerMicroBatch - model.inputs;
  if (temporaries > 0 && measured > 0)
    profile.workingScale = measured / temporaries;
  return success();
}

/// The chunks' first and last units: the stages' ranges, or with V chunks
/// a device (interleaved:V) each stage's layers in V equal parts, chunk
/// v x stages + s being part v of stage s, the embedding in chunk 0 and the
/// head in the last (Megatron's interleaving, which the search prices).
llvm::Expected<std::vector<std::pair<int64_t, int64_t>>>
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
    int64_t units = layers[chunk % stages] / virtualStages + (chunk == 0) +
                    (chunk == chunkCount - 1);
    if (units == 0)
      return refuse(llvm::formatv(
          "the searched plan's stage {0} has {1} layers, fewer than the {2} "
          "chunks interleaved:{2} cuts it into; pin another --schedule",
          chunk % stages, layers[chunk % stages], virtualStages));
    chunks.push_back({next, next + units - 1});
    next += units;
  }
  return chunks;
}

/// Searches the pipeline plan of the module's forward on `searched`'s
/// cluster with its pins (`searched.search`, the global batch set), the
/// step built and measured with `step`: its profile, plan and, on one
/// device, compiled memory. A plan on one device is the step the compile
/// builds: its compiled peak decides the fit (a plan that does not fit by
/// it is searched again with the next stronger recomputation, unless the
/// recomputation is pinned). Failure after an error on the module: the
/// measurement's, or the search's (its message, which names the pin at
/// fault); but with `unfit`, no plan under the pins is its reason there, no
/// error.
LogicalResult searchPipelinePlan(ModuleOp module,
                                 const CompiledStepOptions &step,
                                 PipelinePlanDecision &searched,
                                 std::string *unfit) {
  const cost::Cluster &cluster = searched.cluster;
  pipeline::SearchOptions &search = searched.search;
  auto error = [&](const llvm::Twine &message) {
    module.emitError() << message;
    return failure();
  };
  // The search answered that no plan fits its pins.
  auto noPlan = [&](const llvm::Twine &message) {
    if (!unfit)
      return error(message);
    *unfit = message.str();
    return failure();
  };
  // What --explain prints and the compile builds: a plan the compiled
  // driver runs, every stage on one stage mesh.
  search.oneStageMesh = true;
  // The program at two batch sizes gives every cost at any micro-batch
  // (UnitProfile.h says why not batch 1).
  constexpr int64_t firstBatch = 2;
  FailureOr<OwningOpRef<ModuleOp>> first =
      trainingProgram(module, firstBatch, step);
  if (failed(first))
    return failure();
  FailureOr<OwningOpRef<ModuleOp>> second =
      trainingProgram(module, firstBatch + 1, step);
  if (failed(second))
    return failure();
  auto profile = pipeline::profileProgram(**first, **second, firstBatch);
  if (!profile)
    return error(llvm::toString(profile.takeError()));
  searched.profile = std::move(*profile);
  pipeline::MegatronStageOracle oracle(searched.profile, cluster);
  if (failed(calibrateWorkingSet(searched.profile, oracle, firstBatch, module,
                                  step)))
    return failure();
  auto plan =
      pipeline::searchPipeline(searched.profile, cluster, oracle, search);
  if (!plan)
    return noPlan(llvm::toString(plan.takeError()));
  // On one device the plan is the step the compile builds (its micro-batches
  // accumulated, --grad-accum): the arena analysis, not the stage model,
  // decides whether it fits, as for one device without a pipeline.
  bool rematForced = search.remat.has_value();
  while (plan->devices == 1 && plan->stages.size() == 1) {
    pipeline::RematMode remat = plan->stages.front().remat;
    FailureOr<StepMemory> compiled = compiledMemory(
        module, plan->microBatchSamples, remat, plan->microBatches, step);
    if (failed(compiled))
      return failure();
    searched.compiled = *compiled;
    double limit = cluster.device.memoryBytes;
    if (compiled->totalBytes() <= limit)
      break;
    if (rematForced || remat == pipeline::RematMode::Full)
      return noPlan(llvm::formatv(
          "the plan on one device needs {0:F2} GiB as compiled (its arena "
          "planned from liveness and the training state; the stage model "
          "said {1:F2}), more than the {2:F2} GiB of the device",
          compiled->totalBytes() / kGiB,
          plan->stages.front().cost.memory.total(
              plan->stages.front().inFlight) /
              kGiB,
          limit / kGiB));
    search.remat = remat == pipeline::RematMode::None
                       ? pipeline::RematMode::Selective
                       : pipeline::RematMode::Full;
    plan = pipeline::searchPipeline(searched.profile, cluster, oracle, search);
    if (!plan)
      return noPlan(llvm::toString(plan.takeError()));
  }
  searched.plan = std::move(*plan);
  return success();
}

/// The module's #tess.plan the compile writes for `plan` (of the program
/// `profile` describes), its stage mesh included: what the executable
/// prints. Errors: what the driver cannot run, with the flag that pins a
/// plan it can.
llvm::Expected<tess::PlanAttr>
pipelinePlanAttribute(MLIRContext &context, const pipeline::PipelinePlan &plan,
                      const pipeline::ProgramProfile &profile) {
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
  pipeline::RematMode remat = pipeline::RematMode::None;
  auto layered = llvm::find_if(plan.stages, hasLayers);
  if (layered != plan.stages.end())
    remat = layered->remat;
  std::vector<std::string> stageRemats;
  bool remats = false;
  for (const pipeline::StagePlan &stage : plan.stages) {
    bool differs = hasLayers(stage) && stage.remat != remat;
    stageRemats.push_back(differs ? pipeline::rematName(stage.remat).str()
                                  : std::string());
    remats = remats || differs;
  }
  for (auto [index, stage] : llvm::enumerate(plan.stages)) {
    if (stage.cost.tensorParallel != first.cost.tensorParallel ||
        stage.cost.dataParallel != first.cost.dataParallel)
      return refuse(llvm::formatv(
          "the searched pipeline plan runs stage 0 as {0} and stage {1} as "
          "{2}; the compiled driver runs every stage on one stage mesh: pin "
          "the stage mesh with --mesh, or another --stages or --devices",
          first.cost.intraOpPlan(), index, stage.cost.intraOpPlan()));
    if (stage.cost.dataParallel > 1 && stage.cost.zero != first.cost.zero)
      return refuse(llvm::formatv(
          "the searched pipeline plan shards the optimizer state of stage "
          "{0} and not of stage {1} (ZeRO-1); the compiled driver runs "
          "every stage alike: pin --zero 0 or --zero 1",
          stage.cost.zero ? index : 0, stage.cost.zero ? 0 : index));
  }
  // ZeRO-1 over each stage's dp group (runtime/train/StageZero.h).
  int64_t zero = first.cost.zero && first.cost.dataParallel > 1 ? 1 : 0;
  int64_t dataParallel = first.cost.dataParallel;
  int64_t tensorParallel = first.cost.tensorParallel;
  std::string meshText;
  if (dataParallel > 1 && tensorParallel > 1)
    meshText = llvm::formatv("dp={0},tp={1}", dataParallel, tensorParallel);
  else if (dataParallel > 1)
    meshText = llvm::formatv("dp={0}", dataParallel);
  else if (tensorParallel > 1)
    meshText = llvm::formatv("tp={0}", tensorParallel);
  tess::MeshAttr mesh;
  if (!meshText.empty())
    mesh =
        sharding::meshAttr(&context, llvm::cantFail(cost::parseMesh(meshText)));
  auto stages = static_cast<int64_t>(plan.stages.size());
  llvm::Expected<std::vector<std::pair<int64_t, int64_t>>> units =
      chunkUnits(plan, profile);
  if (!units)
    return units.takeError();
  // Chunk c runs on stage c mod stages, with that stage's remat.
  SmallVector<tess::ChunkAttr> chunks;
  for (auto [index, range] : llvm::enumerate(*units))
    chunks.push_back(tess::ChunkAttr::get(
        &context, static_cast<int64_t>(index) % stages, range.first,
        range.second,
        remats ? StringRef(stageRemats[index % stageRemats.size()])
               : StringRef()));
  return tess::PlanAttr::get(&context, mesh, zero, pipeline::rematName(remat),
                             stages, plan.schedule.name(), plan.microBatches,
                             chunks, /*offload=*/"");
}

/// The memory of every device of the pipelined program the compile builds
/// for `plan` from the module's forward (at the global batch): the
/// training step at one micro-batch (q/k/v packed where a stage is one
/// device, as the compile packs them), the plan's remat, every stage
/// partitioned over its stage mesh with the gradients left pending over
/// dp (the driver sums them), cut into the plan's chunks and prepared for
/// the lowering. Failure after a diagnostic.
FailureOr<std::vector<pipeline::PipelineDeviceMemory>>
compiledPipelineMemory(ModuleOp module, tess::PlanAttr plan,
                       int64_t microBatch, const CompiledStepOptions &step) {
  FailureOr<OwningOpRef<ModuleOp>> forward = forwardAtBatch(module, microBatch);
  if (failed(forward))
    return failure();
  ModuleOp program = **forward;
  StageMeshStrategy stageMesh = stageMeshStrategy(plan);
  if (failed(buildTrainingStep(program, step,
                               /*packQkv=*/stageMesh.mesh.empty())))
    return failure();
  program->setAttr(sharding::kPlanAttrName, plan);
  PassManager passes(module.getContext());
  // The plan's remat (and its chunks' own) over the pass's option.
  passes.addPass(createRematerialize());
  if (!stageMesh.mesh.empty()) {
    AnnotateShardingOptions annotate;
    annotate.mesh = stageMesh.mesh;
    annotate.strategy = stageMesh.strategy;
    annotate.deferGradientReduction = true;
    passes.addPass(createAnnotateSharding(annotate));
    passes.addPass(createPartitionSpmd());
  }
  SplitPipelineStagesOptions split;
  split.stages = plan.getStages();
  // The plan's schedule is the search's: it parses.
  split.virtualStages =
      llvm::cantFail(pipeline::parseSchedule(plan.getSchedule()))
          .virtualStages;
  passes.addPass(createSplitPipelineStages(split));
  LoweringPreparationOptions preparation;
  preparation.logitsBlockBytes = step.logitsBlockBytes;
  buildLoweringPreparationPipeline(passes, preparation);
  if (failed(passes.run(program)))
    return module.emitError()
           << "tess-search-pipeline: compiling the checked plan's stages "
              "failed";
  return pipeline::estimatePipelineMemory(program);
}

/// The pipeline search's plan under `bound` bytes a device (`bounded`, the
/// cluster searched with that bound).
llvm::Expected<pipeline::PipelinePlan>
searchUnder(const PipelinePlanDecision &searched, cost::Cluster &bounded,
            double bound) {
  bounded.device.memoryBytes = bound;
  pipeline::MegatronStageOracle oracle(searched.profile, bounded);
  return pipeline::searchPipeline(searched.profile, bounded, oracle,
                                  searched.search);
}

/// A plan as compiled: each device's memory and the largest.
struct CompiledCheck {
  std::vector<pipeline::PipelineDeviceMemory> devices;
  double peak = 0;
};

/// `plan` compiled as the compile would build it, or std::nullopt where it
/// has no plan attribute (nothing to compile); failure after an error on
/// `module` where the compile fails.
FailureOr<std::optional<CompiledCheck>>
compilePlan(ModuleOp module, const PipelinePlanDecision &searched,
            const pipeline::PipelinePlan &plan) {
  llvm::Expected<tess::PlanAttr> attribute =
      pipelinePlanAttribute(*module.getContext(), plan, searched.profile);
  if (!attribute) {
    llvm::consumeError(attribute.takeError());
    return std::optional<CompiledCheck>();
  }
  FailureOr<std::vector<pipeline::PipelineDeviceMemory>> devices =
      compiledPipelineMemory(module, *attribute,
                             searched.search.globalBatch / plan.microBatches,
                             searched.step);
  if (failed(devices))
    return failure();
  CompiledCheck check;
  check.peak = static_cast<double>(pipeline::largestDeviceBytes(*devices));
  check.devices = std::move(*devices);
  return std::optional<CompiledCheck>(std::move(check));
}

/// After a miss, the plan that fits was searched under a bound lowered by a
/// guess, perhaps past what a faster plan needs: the bounds between its
/// (`bounded`'s) and the least that missed are bisected, with the
/// searches left, for a faster plan whose compiled program still fits; it
/// replaces `searched`'s plan and compiled devices. Each compiled check
/// goes into `checked`.
void raiseFittingBound(ModuleOp module, PipelinePlanDecision &searched,
                       cost::Cluster &bounded, double missedBound,
                       int &searches,
                       std::vector<std::pair<double, double>> &checked) {
  const double limit = searched.cluster.device.memoryBytes;
  const double least = kBoundStep * limit;
  double fitBound = bounded.device.memoryBytes;
  while (searches < kMaxSearches && missedBound - fitBound > 2 * least) {
    double middle = (fitBound + missedBound) / 2;
    ++searches;
    llvm::Expected<pipeline::PipelinePlan> found =
        searchUnder(searched, bounded, middle);
    if (!found) {
      // A looser bound always has the tighter one's plan; not reached.
      llvm::consumeError(found.takeError());
      return;
    }
    // No faster plan under it: the fitting plan holds up to it.
    if (!(found->stepSeconds < searched.plan.stepSeconds)) {
      fitBound = middle;
      continue;
    }
    FailureOr<std::optional<CompiledCheck>> compiled =
        compilePlan(module, searched, *found);
    if (failed(compiled))
      return;
    if (!*compiled) {
      missedBound = middle;
      continue;
    }
    checked.push_back({middle, (*compiled)->peak});
    if ((*compiled)->peak <= limit) {
      searched.plan = std::move(*found);
      searched.compiledDevices = std::move((*compiled)->devices);
      fitBound = middle;
    } else {
      missedBound = middle;
    }
  }
}

/// checkCompiledPipeline (PipelinePlan.h). A plan on several devices is
/// the pipelined program the compile builds for it; where the model
/// missed, the stage model underestimated, mostly per parameter: the search
/// runs again under the plan's prediction scaled down by the miss, and
/// where no plan fits a bound, under bounds bisected between it and the
/// least that missed; once a plan fits, the bounds above it are bisected
/// for a faster one that still fits (raiseFittingBound; kMaxSearches
/// searches in all).
LogicalResult checkCompiled(ModuleOp module, PipelinePlanDecision &searched,
                            std::string *unfit) {
  pipeline::PipelinePlan &plan = searched.plan;
  const double limit = searched.cluster.device.memoryBytes;
  const double least = kBoundStep * limit;
  cost::Cluster bounded = searched.cluster;
  std::vector<std::pair<double, double>> checked;
  // The bounds tried: the least whose plan missed as compiled, the
  // greatest under which the search found no plan.
  double missedBound = limit, emptyBound = 0;
  int searches = 1;
  auto noPlan = [&](const std::string &message) {
    if (!unfit)
      return module.emitError() << message, failure();
    *unfit = message;
    return failure();
  };
  while (plan.devices > 1 || plan.stages.size() > 1) {
    FailureOr<std::optional<CompiledCheck>> compiled =
        compilePlan(module, searched, plan);
    if (failed(compiled))
      return failure();
    if (!*compiled)
      return success();
    double peak = (*compiled)->peak;
    checked.push_back({bounded.device.memoryBytes, peak});
    searched.compiledDevices = std::move((*compiled)->devices);
    if (peak <= limit) {
      if (checked.size() > 1)
        raiseFittingBound(module, searched, bounded, missedBound, searches,
                          checked);
      searched.plan.compiledSearches = std::move(checked);
      return success();
    }
    missedBound = std::min(missedBound, bounded.device.memoryBytes);
    double model = 0;
    for (const pipeline::StagePlan &stage : plan.stages)
      model = std::max(model, stage.cost.memory.total(stage.inFlight));
    std::string missed = llvm::formatv(
        "the pipeline plan {0} needs {1:F3} MiB on its largest device as "
        "compiled (its arenas planned from liveness, its stash, messages "
        "and training state; the stage model said {2:F3}), more than the "
        "{3:F3} MiB of a device",
        tessera::pipelineLayout(plan), peak / kMiB, model / kMiB, limit / kMiB);
    // The search's plans under a bound b predict at most b. The model
    // misses mostly per parameter (state the stage model splits and the
    // compiled stage keeps whole, the driver's accumulators), so the miss
    // scales with the plan: this one's prediction scaled by limit / peak
    // asks for one that compiles within the limit if the model misses it
    // alike. Where no plan fits that bound (the next plan's model misses
    // less), the bounds between it and the one that missed are bisected.
    double next = model * (limit / peak) - least;
    std::string lastEmpty;
    while (true) {
      if (!(next > emptyBound + least && next < missedBound - least))
        next = (emptyBound + missedBound) / 2;
      if (searches == kMaxSearches || missedBound - emptyBound < 2 * least)
        return noPlan(
            missed +
            (lastEmpty.empty()
                 ? std::string()
                 : "; under the least bound searched again, " + lastEmpty) +
            llvm::formatv("; searched {0} times, no plan fits as compiled "
                          "between {1:F3} and {2:F3} MiB of the stage model",
                          searches, emptyBound / kMiB, missedBound / kMiB)
                .str());
      ++searches;
      llvm::Expected<pipeline::PipelinePlan> found =
          searchUnder(searched, bounded, next);
      if (found) {
        plan = std::move(*found);
        break;
      }
      lastEmpty = llvm::toString(found.takeError());
      emptyBound = next;
    }
  }
  return success();
}

/// `options` as the cluster searched and the search's pins, in `decision`;
/// failure after an error on `module` naming the option.
LogicalResult readSearchOptions(ModuleOp module,
                                const SearchPipelineOptions &options,
                                PipelinePlanDecision &decision) {
  cost::Cluster &planned = decision.cluster;
  pipeline::SearchOptions &search = decision.search;
  auto error = [&]() { return module.emitError() << "tess-search-pipeline: "; };
  llvm::Expected<cost::Cluster> loaded = cost::loadCluster(options.cluster);
  if (!loaded)
    return error() << "cluster '" << options.cluster
                   << "': " << llvm::toString(loaded.takeError());
  planned = std::move(*loaded);
  if (options.memoryLimit < 0)
    return error() << "memory-limit "
                   << static_cast<int64_t>(options.memoryLimit)
                   << ": expected bytes >= 0 (0: the cluster's device "
                      "memory)";
  if (options.memoryLimit > 0)
    planned.device.memoryBytes = static_cast<double>(options.memoryLimit);
  if (options.devices < 0 || options.devices > planned.deviceCount())
    return error() << "devices " << static_cast<int64_t>(options.devices)
                   << ": cluster '" << planned.name << "' has "
                   << planned.deviceCount() << " devices (0: all of them)";
  if (options.devices > 0)
    search.devices = options.devices;
  for (auto [name, value, field] :
       {std::tuple<StringRef, int64_t, std::optional<int64_t> *>{
            "stages", options.stages, &search.stages},
        {"micro-batches", options.microBatches, &search.microBatches},
        {"tensor-parallel", options.tensorParallel, &search.tensorParallel}}) {
    if (value < 0)
      return error() << name << " " << value
                     << ": expected a positive count (0: searched)";
    if (value > 0)
      *field = value;
  }
  if (!options.schedule.empty()) {
    llvm::Expected<pipeline::Schedule> parsed =
        pipeline::parseSchedule(options.schedule);
    if (!parsed)
      return error() << "schedule '" << options.schedule
                     << "': " << llvm::toString(parsed.takeError());
    search.schedule = *parsed;
  }
  if (!options.remat.empty()) {
    search.remat = pipeline::parseRematName(options.remat);
    if (!search.remat)
      return error() << "remat '" << options.remat
                     << "': expected none, selective or full (empty: "
                        "searched per stage)";
  }
  if (options.zero < -1 || options.zero > 1)
    return error() << "zero " << static_cast<int>(options.zero)
                   << ": expected 0 or 1 (ZeRO-1 inside the stage mesh; -1: "
                      "searched)";
  if (options.zero >= 0)
    search.zero = options.zero == 1;
  if (!options.stageUnits.empty()) {
    if (!search.stages ||
        static_cast<int64_t>(options.stageUnits.size()) != *search.stages)
      return error() << "stage-units: " << options.stageUnits.size()
                     << " counts for "
                     << (search.stages ? std::to_string(*search.stages)
                                       : std::string("unpinned"))
                     << " stages; pin stages and give each one's units";
    for (int64_t units : options.stageUnits) {
      if (units < 1)
        return error() << "stage-units: a stage of " << units
                       << " units; expected at least 1";
      search.stageUnitCounts.push_back(static_cast<size_t>(units));
    }
  }
  return success();
}

} // namespace

FailureOr<PipelinePlanDecision>
tessera::decidePipelinePlan(ModuleOp module,
                            const SearchPipelineOptions &options,
                            std::string *unfit) {
  PipelinePlanDecision decision;
  if (failed(readSearchOptions(module, options, decision)))
    return failure();
  FailureOr<int64_t> batch = forwardBatch(module);
  if (failed(batch))
    return failure();
  decision.search.globalBatch = *batch;
  copyStepOptions(decision.step, options);
  if (failed(searchPipelinePlan(module, decision.step, decision, unfit)) ||
      failed(checkCompiled(module, decision, unfit)))
    return failure();
  llvm::Expected<tess::PlanAttr> plan = pipelinePlanAttribute(
      *module.getContext(), decision.plan, decision.profile);
  if (!plan) {
    decision.notCompiled = llvm::toString(plan.takeError());
    return decision;
  }
  // The step a pipelined plan runs is one micro-batch's: the forward at
  // that batch is what the training phase builds, so that the module the
  // search leaves is the compile's from here on (tessera-opt reruns the
  // later phases on it).
  int64_t microBatch = decision.search.globalBatch / decision.plan.microBatches;
  if (microBatch != decision.search.globalBatch) {
    FailureOr<OwningOpRef<ModuleOp>> rebatched =
        forwardAtBatch(module, microBatch);
    if (failed(rebatched))
      return failure();
    adoptModule(module, **rebatched);
  }
  module->setAttr(sharding::kPlanAttrName, *plan);
  return decision;
}

LogicalResult tessera::checkCompiledPipeline(ModuleOp module,
                                             PipelinePlanDecision &decision,
                                             std::string *unfit) {
  return checkCompiled(module, decision, unfit);
}

StageMeshStrategy tessera::stageMeshStrategy(tess::PlanAttr plan) {
  int64_t dataParallel = 1, tensorParallel = 1;
  if (tess::MeshAttr mesh = plan.getMesh())
    for (const cost::MeshAxis &axis : sharding::deviceMesh(mesh).axes) {
      if (axis.name == "dp")
        dataParallel = axis.size;
      if (axis.name == "tp")
        tensorParallel = axis.size;
    }
  if (dataParallel > 1 && tensorParallel > 1)
    return {llvm::formatv("dp={0},tp={1}", dataParallel, tensorParallel),
            "dp-tp"};
  if (dataParallel > 1)
    return {llvm::formatv("dp={0}", dataParallel), "dp"};
  if (tensorParallel > 1)
    return {llvm::formatv("tp={0}", tensorParallel), "tp"};
  return {};
}

llvm::Expected<pipeline::SearchOptions>
tessera::pipelineSearchPins(tess::PlanAttr attribute) {
  pipeline::SearchOptions pins;
  if (attribute.getZero() != 0 && attribute.getZero() != 1)
    return refuse(llvm::formatv(
        "a pipelined plan with zero = {0}: the compiled pipelines shard each "
        "stage's optimizer state over its data-parallel group at most "
        "(expected zero 0 or 1)",
        attribute.getZero() == tess::PlanAttr::kMixedZero
            ? std::string("mixed")
            : std::to_string(attribute.getZero())));
  llvm::Expected<pipeline::Schedule> schedule =
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
