//===- CompilePhases.cpp - the compile pipeline as named phases ----------===//
//
// The one place that says which passes a compile runs, and in which order:
// tesserac runs these phases (it decides the plan, writes the weights and
// links, but adds no pass of its own), and tessera-opt registers them, so
// that `tesserac --compile-to=P` followed by `tessera-opt
// --tess-phase-<next>` is `tesserac --compile-to=<next>`.
//
// The order is the compile's: the sharding search plans the forward before
// the training step is built, so that the step's copies of the forward ops
// carry their plan (tessera/Sharding/SearchedPlan.h); the plan is written
// before the recomputation
// and the partitioning because both read it; the mesh's layouts are written
// after the recomputation (its clones in the backward take their layouts by
// propagation, as every backward op does) and before the stage split (so
// that each stage function is one mesh rank's); the lowering preparation
// runs last, on whatever functions the step was cut into.
//
//===----------------------------------------------------------------------===//

#include "tessera/Driver/CompilePhases.h"

#include "tessera/Lowering/Passes.h"
#include "tessera/Transforms/CompiledStepMemory.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/STLExtras.h"

using namespace tessera;

namespace {

constexpr CompilePhaseInfo kPhases[] = {
    {CompilePhase::Import, "import",
     "the imported graph: one tess op per ONNX node"},
    {CompilePhase::Fusion, "fusion",
     "canonicalize and fuse the forward graph into Transformer-level ops"},
    {CompilePhase::Search, "search",
     "fit the step's memory (recomputation, offload) and search the "
     "sharding plan of a mesh (or choose the mesh of N devices), written on "
     "the forward's ops; or search a pipeline's plan; or weigh both"},
    {CompilePhase::Training, "training",
     "build the training step: autodiff, the loss, AdamW, the precision"},
    {CompilePhase::Plan, "plan", "write the module's #tess.plan"},
    {CompilePhase::Remat, "remat",
     "recompute in the backward what the plan's remat says"},
    {CompilePhase::Shard, "shard",
     "write a mesh plan's layouts on the step (searched or forced)"},
    {CompilePhase::Partition, "partition",
     "rewrite the annotated step into the program one rank runs"},
    {CompilePhase::Stages, "stages",
     "cut the step into pipeline stages"},
    {CompilePhase::Preparation, "preparation",
     "prepare the step for the lowering: the chunked head, layouts, "
     "schedules, one op per kernel call"},
    {CompilePhase::EmitC, "emitc",
     "lower the step to EmitC over the runtime's kernels"},
};

/// `shard` as a pass's list option: a pin's terms are comma separated, as a
/// list option's elements are, so one of several terms is quoted, and the
/// pipeline --print-phase-pipelines prints reparses to the same pins.
llvm::SmallVector<std::string> quotedPins(llvm::ArrayRef<std::string> shard) {
  llvm::SmallVector<std::string> pins;
  for (const std::string &pin : shard)
    pins.push_back(pin.find(',') == std::string::npos ? pin
                                                      : "\"" + pin + "\"");
  return pins;
}

} // namespace

llvm::ArrayRef<CompilePhaseInfo> tessera::compilePhases() { return kPhases; }

std::optional<CompilePhase> tessera::parseCompilePhase(llvm::StringRef name) {
  for (const CompilePhaseInfo &info : kPhases)
    if (info.name == name)
      return info.phase;
  return std::nullopt;
}

llvm::StringRef tessera::compilePhaseName(CompilePhase phase) {
  return kPhases[static_cast<size_t>(phase)].name;
}

std::string tessera::compilePhaseNames() {
  std::string names;
  for (const CompilePhaseInfo &info : kPhases)
    names += (names.empty() ? "" : ", ") + info.name.str();
  return names;
}

FitMemoryOptions
tessera::fitMemoryOptions(const CompilePhaseOptions &options) {
  FitMemoryOptions fit;
  fit.cluster = options.cluster;
  fit.mesh = options.mesh;
  fit.devices = options.devices;
  fit.memoryLimit = options.memoryLimit;
  fit.remat = options.rematPin;
  fit.offload = options.offloadPin;
  return copyStepOptions(fit, options);
}

SearchShardingOptions
tessera::searchShardingOptions(const CompilePhaseOptions &options) {
  SearchShardingOptions search;
  search.cluster = options.cluster;
  search.mesh = options.mesh;
  search.devices = options.devices;
  search.memoryLimit = options.memoryLimit;
  search.zero = options.zero;
  search.pins = quotedPins(options.shard);
  search.searchTimeout = options.searchTimeout;
  search.calibration = options.calibration;
  return copyStepOptions(search, options);
}

SearchPipelineOptions
tessera::searchPipelineOptions(const CompilePhaseOptions &options) {
  SearchPipelineOptions search;
  search.cluster = options.cluster;
  search.devices = options.pipelineDevices;
  search.memoryLimit = options.memoryLimit;
  search.stages = options.pipelineStages;
  search.microBatches = options.pipelineMicroBatches;
  search.schedule = options.pipelineSchedule;
  search.remat = options.rematPin;
  search.zero = options.zero;
  search.tensorParallel = options.pipelineTensorParallel;
  search.stageUnits.assign(options.pipelineStageUnits.begin(),
                           options.pipelineStageUnits.end());
  return copyStepOptions(search, options);
}

SearchPlanOptions
tessera::searchPlanOptions(const CompilePhaseOptions &options) {
  SearchPlanOptions search;
  search.cluster = options.cluster;
  search.devices = options.devices;
  search.mesh = options.mesh;
  search.pins = quotedPins(options.shard);
  search.memoryLimit = options.memoryLimit;
  search.zero = options.zero;
  search.remat = options.rematPin;
  search.stages = options.pipelineStages;
  search.microBatches = options.pipelineMicroBatches;
  search.schedule = options.pipelineSchedule;
  search.searchTimeout = options.searchTimeout;
  return copyStepOptions(search, options);
}

void tessera::buildCompilePhase(mlir::OpPassManager &pm, CompilePhase phase,
                                const CompilePhaseOptions &options) {
  switch (phase) {
  case CompilePhase::Import:
    // The importer reads ONNX, not IR: no pass.
    return;
  case CompilePhase::Fusion:
    buildImportCleanupPipeline(pm);
    return;
  case CompilePhase::Search:
    // A pipeline's plan is one search: its stages' meshes, ZeRO-1, remat
    // and micro-batches together.
    if (options.searchPipeline) {
      pm.addPass(createSearchPipeline(searchPipelineOptions(options)));
      return;
    }
    // Over N devices, the one-stage and the pipelined plans are one
    // decision: both searches, the winner written.
    if (options.searchPlan) {
      pm.addPass(createSearchPlan(searchPlanOptions(options)));
      return;
    }
    if (!options.search)
      return;
    // The recomputation and offload first: the search is calibrated by the
    // step that recomputes what the plan says.
    pm.addPass(createFitMemory(fitMemoryOptions(options)));
    pm.addPass(createSearchSharding(searchShardingOptions(options)));
    return;
  case CompilePhase::Training: {
    // Only where nothing is partitioned: the sharding search plans the
    // forward as imported, one column split per projection, which a packed
    // weight does not have.
    BuildTrainingOptions training;
    training.loss = options.loss;
    training.precision = options.precision;
    training.vocabularyMultiple = options.vocabularyMultiple;
    if (options.packGateUp)
      pm.addNestedPass<mlir::func::FuncOp>(createPackGateUpProjections());
    buildTrainingStepPipeline(pm, training, options.packQkv);
    return;
  }
  case CompilePhase::Plan: {
    WritePlanOptions plan;
    plan.plan = options.plan;
    pm.addPass(createWritePlan(plan));
    return;
  }
  case CompilePhase::Remat: {
    // Runs always: a module's plan decides the mode (none changes nothing).
    RematerializeOptions remat;
    remat.mode = options.remat;
    pm.addPass(createRematerialize(remat));
    return;
  }
  case CompilePhase::Shard: {
    if (options.searchedLayouts) {
      AnnotateFromPlanOptions annotate;
      annotate.remarks = options.planRemarks;
      pm.addPass(createAnnotateFromPlan(annotate));
      return;
    }
    if (options.strategy.empty())
      return;
    AnnotateShardingOptions annotate;
    annotate.mesh = options.mesh;
    annotate.axes.assign(options.axes.begin(), options.axes.end());
    annotate.strategy = options.strategy;
    annotate.deferGradientReduction = options.deferGradientReduction;
    pm.addPass(createAnnotateSharding(annotate));
    return;
  }
  case CompilePhase::Partition:
    if (options.partition)
      pm.addPass(createPartitionSpmd());
    return;
  case CompilePhase::Stages: {
    // One stage is still a pipeline (a schedule of micro-batches, the
    // gradients reduced by the driver): cut into @stage0_*.
    if (options.stages < 1)
      return;
    SplitPipelineStagesOptions split;
    split.stages = options.stages;
    split.virtualStages = options.virtualStages;
    pm.addPass(createSplitPipelineStages(split));
    return;
  }
  case CompilePhase::Preparation: {
    LoweringPreparationOptions preparation;
    preparation.logitsBlockBytes = options.logitsBlockBytes;
    buildLoweringPreparationPipeline(pm, preparation);
    return;
  }
  case CompilePhase::EmitC: {
    LowerToEmitCOptions lowering;
    lowering.modelName = options.modelName;
    lowering.weightsFile = options.weightsFile;
    lowering.targetName = options.target;
    lowering.pipelineSchedule = options.schedule;
    lowering.microBatches = options.microBatches;
    pm.addPass(createLowerToEmitC(lowering));
    return;
  }
  }
}

void tessera::registerCompilePhasePipelines() {
  for (const CompilePhaseInfo &info : kPhases) {
    if (info.phase == CompilePhase::Import)
      continue;
    CompilePhase phase = info.phase;
    mlir::PassPipelineRegistration<CompilePhaseOptions>(
        ("tess-phase-" + info.name).str(),
        ("tesserac's " + info.name + " phase: " + info.summary).str(),
        [phase](mlir::OpPassManager &pm, const CompilePhaseOptions &options) {
          buildCompilePhase(pm, phase, options);
        });
  }
}
