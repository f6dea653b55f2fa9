//===- SearchSharding.cpp - tess-search-sharding --------------------------===//
//
// The intra-op search as a pass of the compile (its `search` phase), so that
// the plan tesserac compiles is a step tessera-opt can rerun from the
// options printed by `tesserac --print-phase-pipelines`: the flags that pin
// the plan (--mesh, --zero, --shard, --memory-limit, --cluster) are its
// options, and the search's answer is IR on the forward's ops
// (tessera/Sharding/SearchedPlan.h), which the training step inherits.
//
// The search is given the forward function itself, not a copy: a mixed
// precision step is priced at its compute type by retyping the forward's
// f32 values for the search and restoring them before the plan is written.
//
// On a mesh the plan is checked against the rank's compiled program, and
// `devices` chooses the mesh (MeshPlan.h).
//
// Its per-op model is calibrated by the module itself: the step the compile
// builds for one device from the forward, recomputing what the module's
// #tess.plan says (tess-fit-memory's decision), measured by the one memory
// analysis and priced by the cost model (calibrateSharding). Its replicated
// plan then predicts that step's peak and time exactly, and a sharded plan
// divides them.
//
//===----------------------------------------------------------------------===//

#include "tessera/CostModel/TrainingStepEstimate.h"
#include "tessera/Sharding/MeshSharding.h"
#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Sharding/SearchedPlan.h"
#include "tessera/Transforms/CompiledStepMemory.h"
#include "tessera/Transforms/MeshPlan.h"
#include "tessera/Transforms/Passes.h"

#include "llvm/Support/FormatVariadic.h"

namespace tessera {
#define GEN_PASS_DEF_SEARCHSHARDING
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using llvm::Expected;

namespace {

llvm::Error searchError(const Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
}

/// The calibration text's fields.
struct CalibrationField {
  StringRef key;
  double ShardingCalibration::*value;
};
constexpr CalibrationField kCalibrationFields[] = {
    {"compute", &ShardingCalibration::trainingComputeSeconds},
    {"optimizer", &ShardingCalibration::optimizerSecondsPerElement},
    {"activations", &ShardingCalibration::activationPeakBytes},
    {"saved", &ShardingCalibration::activationSavedBytes},
    {"fixed", &ShardingCalibration::fixedMemoryBytes},
};

/// Reads `calibration` (the option's text) into `numbers`.
llvm::Error readCalibration(StringRef calibration,
                            ShardingCalibration &numbers) {
  SmallVector<StringRef> items;
  calibration.split(items, ',', -1, /*KeepEmpty=*/false);
  for (StringRef item : items) {
    auto [key, text] = item.split('=');
    const CalibrationField *field =
        llvm::find_if(kCalibrationFields, [&](const CalibrationField &f) {
          return f.key == key.trim();
        });
    double value;
    if (field == std::end(kCalibrationFields) ||
        text.trim().getAsDouble(value) || value < 0)
      return searchError("calibration '" + calibration + "': expected " +
                         "compute=S,optimizer=S,activations=B,saved=B,"
                         "fixed=B with numbers >= 0, got '" + item + "'");
    numbers.*(field->value) = value;
  }
  return llvm::Error::success();
}

/// The pass's options as the search's inputs.
struct SearchInputs {
  cost::Cluster cluster;
  cost::DeviceMesh mesh;
  sharding::MeshSearchOptions search;
  /// Bytes per device: the option's, else the cluster's device memory.
  double limitBytes = 0;
  /// The compute type a mixed-precision step's f32 values are priced at.
  Type planningType;
};

Expected<SearchInputs> readOptions(MLIRContext *context,
                                   const SearchShardingOptions &options) {
  SearchInputs inputs;
  Expected<cost::Cluster> cluster = cost::loadCluster(options.cluster);
  if (!cluster)
    return cluster.takeError();
  inputs.cluster = std::move(*cluster);
  Expected<cost::DeviceMesh> mesh = cost::parseMesh(options.mesh);
  if (!mesh)
    return mesh.takeError();
  if (llvm::Error placed = cost::placeOnCluster(*mesh, inputs.cluster))
    return std::move(placed);
  inputs.mesh = std::move(*mesh);

  sharding::MeshSearchOptions &search = inputs.search;
  if (options.memoryLimit < 0)
    return searchError(llvm::formatv("memory-limit {0}: expected bytes >= 0",
                                     options.memoryLimit));
  inputs.limitBytes = options.memoryLimit > 0
                          ? static_cast<double>(options.memoryLimit)
                          : inputs.cluster.device.memoryBytes;
  // On one device the compiled step's analysis has decided what fits: the
  // search's only plan is the replicated one.
  if (inputs.mesh.deviceCount() > 1)
    search.memoryLimitBytes = inputs.limitBytes;
  if (options.zero < -1 || options.zero > 3)
    return searchError(llvm::formatv(
        "zero {0}: expected a ZeRO stage 0, 1, 2 or 3 (-1: searched)",
        options.zero));
  if (options.zero >= 0)
    search.zeroStage = options.zero;
  for (const std::string &text : options.pins) {
    // A pin of several terms comes quoted from the compile phases, whose
    // printed pipeline keeps its commas inside one list element that way;
    // a parsed pipeline has already taken the quotes off.
    StringRef unquoted = text;
    if (unquoted.size() >= 2 && unquoted.front() == '"' &&
        unquoted.back() == '"')
      unquoted = unquoted.drop_front().drop_back();
    Expected<sharding::ShardPin> pin =
        sharding::parseShardPin(unquoted, inputs.mesh);
    if (!pin)
      return pin.takeError();
    search.pins.push_back(std::move(*pin));
  }
  if (!(options.searchTimeout > 0))
    return searchError(llvm::formatv(
        "search-timeout {0}: expected a positive number of seconds",
        options.searchTimeout));
  search.timeLimitSeconds = options.searchTimeout;

  StringRef precision = options.precision;
  if (precision == "bf16")
    inputs.planningType = BFloat16Type::get(context);
  else if (precision == "fp16")
    inputs.planningType = Float16Type::get(context);
  else if (precision != "fp32")
    return searchError("precision '" + precision +
                       "': expected fp32, bf16 or fp16");
  bool mixed = precision != "fp32";
  search.computeWeightBytes = mixed ? 2 : 0;
  search.gradientBytes = mixed ? 2 : 4;
  return inputs;
}

/// The error of a module without the forward function the search plans.
llvm::Error noForwardError() {
  return searchError("the module has no @forward with a body (the search "
                     "plans the forward function, before "
                     "tess-build-training)");
}

/// The calibration measured from `module` for `inputs` (see
/// calibrateSharding): the one-device step recomputing what the module's
/// plan says, and the cost model's estimate of the unsharded step (q/k/v
/// packed only where one device compiles it so). Failure after an error on
/// the module.
FailureOr<ShardingCalibration>
measureCalibration(ModuleOp module, const SearchInputs &inputs,
                   const SearchShardingOptions &options) {
  pipeline::RematMode remat = pipeline::RematMode::None;
  bool offload = false;
  if (tess::PlanAttr plan = tess::PlanAttr::lookup(module)) {
    remat = pipeline::parseRematName(plan.getRemat())
                .value_or(pipeline::RematMode::None);
    offload = plan.isOffloaded();
  }
  CompiledStepOptions stepOptions;
  stepOptions.loss = options.loss;
  stepOptions.precision = options.precision;
  stepOptions.vocabularyMultiple = options.vocabularyMultiple;
  stepOptions.logitsBlockBytes = options.logitsBlockBytes;
  FailureOr<StepMemory> memory = compiledStepMemory(module, remat, stepOptions);
  if (failed(memory))
    return failure();
  OwningOpRef<ModuleOp> unsharded(module.clone());
  if (failed(buildTrainingStep(*unsharded, stepOptions,
                               /*packQkv=*/inputs.mesh.deviceCount() == 1)))
    return failure();
  llvm::Expected<cost::TrainingStepEstimate> estimate =
      cost::estimateTrainingStep(*unsharded, *memory, inputs.cluster,
                                 cost::DeviceMesh());
  if (!estimate)
    return module.emitError()
           << "tess-search-sharding: " << llvm::toString(estimate.takeError());
  estimate->memoryLimitBytes = inputs.limitBytes;
  estimate->remat = pipeline::rematName(remat).str();
  estimate->offloadOptimizer = offload;
  const TrainingStateBytes &state = memory->state;
  // Offloaded, AdamW runs on the host's cores (the PCIe copies overlap it
  // range by range): its time, where the cluster says the host's rate.
  auto &optimizerSeconds =
      estimate->secondsByKind[static_cast<size_t>(cost::OpKind::Optimizer)];
  if (offload && inputs.cluster.host)
    optimizerSeconds = static_cast<double>(state.trainableElements) /
                       inputs.cluster.host->adamwElementsPerSecond;

  ShardingCalibration calibration;
  calibration.trainingComputeSeconds =
      estimate->computeSeconds() - optimizerSeconds;
  if (state.trainableElements > 0)
    calibration.optimizerSecondsPerElement =
        optimizerSeconds / state.trainableElements;
  // The search prices each parameter's state by its layout and ZeRO stage
  // (ShardingStrategy), the buffers and the GEMM scratch as fixed, and
  // scales its activations to the rest of the compiled step's memory (the
  // arena): its replicated plan predicts exactly the analysis's peak. The
  // state subtracted is the analysis's own, not a per-element rate, which a
  // table read as its f32 master (no compute copy) would miss.
  double parameterStateBytes =
      static_cast<double>(state.total() - state.buffers);
  calibration.fixedMemoryBytes =
      static_cast<double>(state.buffers + memory->gemmScratchBytes);
  calibration.activationPeakBytes =
      std::max(1.0, static_cast<double>(memory->totalBytes()) -
                        calibration.fixedMemoryBytes - parameterStateBytes);
  calibration.activationSavedBytes =
      std::min(calibration.activationPeakBytes,
               static_cast<double>(memory->savedForBackwardBytes));
  calibration.estimate = std::move(*estimate);
  return calibration;
}

struct SearchShardingPass
    : tessera::impl::SearchShardingBase<SearchShardingPass> {
  using SearchShardingBase::SearchShardingBase;
  void runOnOperation() override;
};

} // namespace

FailureOr<ShardingCalibration>
tessera::calibrateSharding(ModuleOp module,
                           const SearchShardingOptions &options) {
  auto error = [&](llvm::Error why) {
    return module.emitError()
           << "tess-search-sharding: " << llvm::toString(std::move(why));
  };
  Expected<SearchInputs> inputs = readOptions(module.getContext(), options);
  if (!inputs)
    return error(inputs.takeError());
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal())
    return error(noForwardError());
  if (!StringRef(options.calibration).trim().empty()) {
    ShardingCalibration given;
    if (llvm::Error wrong = readCalibration(options.calibration, given))
      return error(std::move(wrong));
    return given;
  }
  return measureCalibration(module, *inputs, options);
}

Expected<sharding::TrainingShardingPlan>
tessera::searchSharding(ModuleOp module, const SearchShardingOptions &options,
                        const ShardingCalibration &calibration) {
  Expected<SearchInputs> inputs = readOptions(module.getContext(), options);
  if (!inputs)
    return inputs.takeError();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal())
    return noForwardError();
  sharding::MeshSearchOptions &search = inputs->search;
  search.trainingComputeSeconds = calibration.trainingComputeSeconds;
  search.optimizerSecondsPerElement = calibration.optimizerSecondsPerElement;
  search.activationPeakBytes = calibration.activationPeakBytes;
  search.activationSavedBytes = calibration.activationSavedBytes;
  search.logitsBlockBytes = static_cast<double>(options.logitsBlockBytes);
  search.fixedMemoryBytes = calibration.fixedMemoryBytes;

  // Priced at the compute type: the forward's own values, retyped for the
  // search and restored after it.
  SmallVector<std::pair<Value, Type>> types;
  if (inputs->planningType) {
    for (BlockArgument argument : forward.getArguments())
      types.push_back({argument, argument.getType()});
    forward.walk([&](Operation *op) {
      for (Value result : op->getResults())
        types.push_back({result, result.getType()});
    });
    sharding::setPlanningPrecision(forward, inputs->planningType);
  }
  Expected<sharding::TrainingShardingPlan> plan =
      sharding::searchTrainingSharding(forward, inputs->mesh, inputs->cluster,
                                       inputs->search);
  for (auto [value, type] : types)
    value.setType(type);
  if (!plan)
    return plan.takeError();
  sharding::writeSearchedPlan(forward, *plan);
  return plan;
}

void SearchShardingPass::runOnOperation() {
  ModuleOp module = getOperation();
  SearchShardingOptions options;
  options.cluster = cluster;
  options.mesh = mesh;
  options.devices = devices;
  options.memoryLimit = memoryLimit;
  options.zero = zero;
  options.pins.assign(pins.begin(), pins.end());
  options.searchTimeout = searchTimeout;
  options.precision = precision;
  options.calibration = calibration;
  options.loss = loss;
  options.vocabularyMultiple = vocabularyMultiple;
  options.logitsBlockBytes = logitsBlockBytes;
  std::string unfit;
  if (succeeded(decideMeshPlan(module, options, unfit)))
    return;
  if (!unfit.empty()) {
    InFlightDiagnostic error = module.emitError() << "tess-search-sharding: ";
    if (options.devices > 0)
      error << "devices " << options.devices << ": ";
    error << unfit;
  }
  signalPassFailure();
}
