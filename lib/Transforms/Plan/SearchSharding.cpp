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
//===----------------------------------------------------------------------===//

#include "tessera/Sharding/MeshSharding.h"
#include "tessera/Sharding/SearchedPlan.h"
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

/// The calibration text's fields, in the order calibrationText writes them.
struct CalibrationField {
  StringRef key;
  double sharding::MeshSearchOptions::*value;
};
constexpr CalibrationField kCalibrationFields[] = {
    {"compute", &sharding::MeshSearchOptions::trainingComputeSeconds},
    {"optimizer", &sharding::MeshSearchOptions::optimizerSecondsPerElement},
    {"activations", &sharding::MeshSearchOptions::activationPeakBytes},
    {"fixed", &sharding::MeshSearchOptions::fixedMemoryBytes},
};

/// Reads `calibration` (calibrationText's form) into `search`.
llvm::Error readCalibration(StringRef calibration,
                            sharding::MeshSearchOptions &search) {
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
                         "compute=S,optimizer=S,activations=B,fixed=B "
                         "with numbers >= 0, got '" + item + "'");
    search.*(field->value) = value;
  }
  return llvm::Error::success();
}

/// The pass's options as the search's inputs.
struct SearchInputs {
  cost::Cluster cluster;
  cost::DeviceMesh mesh;
  sharding::MeshSearchOptions search;
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
  // On one device the compiled step's analysis has decided what fits: the
  // search's only plan is the replicated one.
  if (inputs.mesh.deviceCount() > 1)
    search.memoryLimitBytes =
        options.memoryLimit > 0 ? static_cast<double>(options.memoryLimit)
                                : inputs.cluster.device.memoryBytes;
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
  if (llvm::Error error = readCalibration(options.calibration, search))
    return std::move(error);
  return inputs;
}

struct SearchShardingPass
    : tessera::impl::SearchShardingBase<SearchShardingPass> {
  using SearchShardingBase::SearchShardingBase;
  void runOnOperation() override;
};

} // namespace

Expected<sharding::TrainingShardingPlan>
tessera::searchSharding(ModuleOp module, const SearchShardingOptions &options) {
  Expected<SearchInputs> inputs = readOptions(module.getContext(), options);
  if (!inputs)
    return inputs.takeError();
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal())
    return searchError("the module has no @forward with a body (the search "
                       "plans the forward function, before "
                       "tess-build-training)");

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

std::string
tessera::shardingCalibrationText(const sharding::MeshSearchOptions &options) {
  std::string text;
  for (const CalibrationField &field : kCalibrationFields)
    text += llvm::formatv("{0}{1}={2}", text.empty() ? "" : ",", field.key,
                          llvm::format("%.17g", options.*(field.value)))
                .str();
  return text;
}

void SearchShardingPass::runOnOperation() {
  ModuleOp module = getOperation();
  SearchShardingOptions options;
  options.cluster = cluster;
  options.mesh = mesh;
  options.memoryLimit = memoryLimit;
  options.zero = zero;
  options.pins.assign(pins.begin(), pins.end());
  options.searchTimeout = searchTimeout;
  options.precision = precision;
  options.calibration = calibration;
  Expected<sharding::TrainingShardingPlan> plan =
      searchSharding(module, options);
  if (!plan) {
    module.emitError() << "tess-search-sharding: "
                       << llvm::toString(plan.takeError());
    return signalPassFailure();
  }
}
