//===- FitMemory.cpp - tess-fit-memory ------------------------------------===//
//
// The decision of what one device recomputes and whether it offloads the
// optimizer state, as a pass of the compile's `search` phase: tesserac and
// tessera-opt reach it from the same options, and its answer is the
// module's #tess.plan, which the sharding search and every later phase read.
//
// The step is measured as it will be compiled (CompiledStepMemory.h), not
// predicted from a formula: the least recomputation whose compiled step fits
// is the plan, so that what --explain says fits is what the executable
// allocates. Offloading costs a step the host's AdamW, so it is the last
// resort, and it says so.
//
//===----------------------------------------------------------------------===//

#include "tessera/CostModel/Cluster.h"
#include "tessera/CostModel/DeviceMesh.h"
#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/CompiledStepMemory.h"
#include "tessera/Transforms/Passes.h"

#include "llvm/Support/FormatVariadic.h"

namespace tessera {
#define GEN_PASS_DEF_FITMEMORY
#include "tessera/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera;
using pipeline::RematMode;

namespace {

/// The options as the decision's inputs.
struct FitInputs {
  cost::Cluster cluster;
  int64_t devices = 1;
  double limitBytes = 0;
  std::optional<RematMode> remat;
  /// Pinned: offloaded (true) or not (false); absent: only when nothing
  /// else fits.
  std::optional<bool> offload;
  CompiledStepOptions step;
};

FailureOr<FitInputs> readOptions(ModuleOp module,
                                 const FitMemoryOptions &options) {
  auto error = [&]() { return module.emitError() << "tess-fit-memory: "; };
  FitInputs inputs;
  llvm::Expected<cost::Cluster> cluster = cost::loadCluster(options.cluster);
  if (!cluster)
    return error() << llvm::toString(cluster.takeError());
  inputs.cluster = std::move(*cluster);
  llvm::Expected<cost::DeviceMesh> mesh = cost::parseMesh(options.mesh);
  if (!mesh)
    return error() << llvm::toString(mesh.takeError());
  if (llvm::Error placed = cost::placeOnCluster(*mesh, inputs.cluster))
    return error() << llvm::toString(std::move(placed));
  inputs.devices = mesh->deviceCount();
  if (options.devices < 0)
    return error() << "devices " << options.devices
                   << ": expected a device count >= 0 (0: the mesh's)";
  if (options.devices > 0 && !mesh->axes.empty())
    return error() << "devices " << options.devices << " with mesh "
                   << mesh->describe()
                   << ": the search chooses the mesh of `devices`, which "
                      "`mesh` pins; give one of them";
  if (options.devices > 0)
    inputs.devices = options.devices;
  if (options.memoryLimit < 0)
    return error() << "memory-limit " << options.memoryLimit
                   << ": expected bytes >= 0";
  inputs.limitBytes = options.memoryLimit > 0
                          ? static_cast<double>(options.memoryLimit)
                          : inputs.cluster.device.memoryBytes;
  if (!options.remat.empty()) {
    inputs.remat = pipeline::parseRematName(options.remat);
    if (!inputs.remat)
      return error() << "remat '" << options.remat
                     << "': expected none, selective or full (empty: the "
                        "least that fits)";
  }
  if (options.offload == "optimizer" || options.offload == "none")
    inputs.offload = options.offload == "optimizer";
  else if (!options.offload.empty())
    return error() << "offload '" << options.offload
                   << "': expected optimizer or none (empty: offloaded only "
                      "when nothing else fits)";
  if (inputs.offload.value_or(false) && inputs.devices > 1)
    return error() << "offload=optimizer on "
                   << (mesh->axes.empty()
                           ? llvm::formatv("{0} devices", inputs.devices).str()
                           : "mesh " + mesh->describe())
                   << ": an offloaded plan is one device's";
  inputs.step.loss = options.loss;
  inputs.step.precision = options.precision;
  inputs.step.vocabularyMultiple = options.vocabularyMultiple;
  inputs.step.logitsBlockBytes = options.logitsBlockBytes;
  return inputs;
}

/// `bytes` in MiB below a GiB, else in GiB.
std::string sizeText(double bytes) {
  return bytes < 1073741824.0
             ? llvm::formatv("{0:F3} MiB", bytes / 1048576.0).str()
             : llvm::formatv("{0:F2} GiB", bytes / 1073741824.0).str();
}

/// What `--offload optimizer` (the executable's: fp32 masters and AdamW's
/// moments in pinned host memory, AdamW on the host) leaves on the GPU for
/// `memory` compiled with `remat`: "; with ... it needs X on the GPU ...",
/// saying whether that fits `limitBytes` and, with the cluster's `host`,
/// what a step pays for it (the host's AdamW over every element, and the
/// gradients' and copies' PCIe transfers, which the executable overlaps
/// with it range by range).
std::string offloadAdvice(const StepMemory &memory, RematMode remat,
                          double limitBytes,
                          const std::optional<cost::HostModel> &host) {
  const TrainingStateBytes &state = memory.state;
  double gpu = static_cast<double>(memory.offloadedTotalBytes());
  std::string advice = llvm::formatv(
      "; with the executable's --offload optimizer (--remat {0}) the GPU "
      "would hold {1} and host memory {2}",
      pipeline::rematName(remat), sizeText(gpu),
      sizeText(static_cast<double>(state.offloadedToHost())));
  if (gpu > limitBytes)
    return advice + ", which does not fit either";
  advice += ", which fits: compile with --remat " +
            pipeline::rematName(remat).str() +
            " and run with --offload optimizer";
  if (host)
    advice += llvm::formatv(
        " (a step adds the host's AdamW, {0:F3} ms, beside {1:F3} ms of "
        "PCIe copies it overlaps range by range)",
        1e3 * static_cast<double>(state.trainableElements) /
            host->adamwElementsPerSecond,
        1e3 * (static_cast<double>(state.gradients) /
                   host->deviceToHostBandwidth +
               static_cast<double>(state.computeCopies +
                                   state.masterReadWeights) /
                   host->hostToDeviceBandwidth));
  return advice;
}

/// The decision of tess-fit-memory (see its description) for `inputs`:
/// `remat` and `offload`, and why it offloads when it was not pinned to.
/// Failure after an error on the module.
LogicalResult decide(ModuleOp module, const FitInputs &inputs, RematMode &remat,
                     bool &offload, std::string &reason) {
  remat = inputs.remat.value_or(RematMode::None);
  offload = false;
  // On a mesh the search divides the step: nothing to decide here.
  if (inputs.devices > 1)
    return success();
  SmallVector<RematMode, 3> modes = {RematMode::None, RematMode::Selective,
                                     RematMode::Full};
  if (inputs.remat)
    modes = {*inputs.remat};
  bool mayOffload = inputs.offload.value_or(true);
  bool mustOffload = inputs.offload.value_or(false);
  double limit = inputs.limitBytes;
  std::string needs;
  SmallVector<std::pair<RematMode, StepMemory>, 3> tried;
  for (RematMode mode : modes) {
    FailureOr<StepMemory> memory =
        compiledStepMemory(module, mode, inputs.step);
    if (failed(memory))
      return failure();
    tried.push_back({mode, *memory});
    if (!mustOffload && memory->totalBytes() <= limit) {
      remat = mode;
      return success();
    }
    needs +=
        llvm::formatv("{0}{1} with --remat {2}", needs.empty() ? "" : ", ",
                      sizeText(memory->totalBytes()), pipeline::rematName(mode))
            .str();
  }
  // Offloading the optimizer state is what is left on one device: with
  // the least recomputation whose offloaded state fits, else the most.
  auto offloaded = llvm::find_if(tried, [&](const auto &entry) {
    return static_cast<double>(entry.second.offloadedTotalBytes()) <= limit;
  });
  if (mayOffload && offloaded != tried.end()) {
    remat = offloaded->first;
    offload = true;
    if (!mustOffload)
      reason = llvm::formatv("no recomputation fits {0} with the optimizer "
                             "state on the device ({1}); the plan offloads "
                             "it (the executable's --offload optimizer)",
                             sizeText(limit), needs);
    return success();
  }
  // What offloading would leave on the device, unless it was ruled out.
  std::string advice;
  if (mayOffload)
    advice = offloadAdvice(tried.back().second, tried.back().first, limit,
                           inputs.cluster.host);
  // More devices are the cluster's (--devices N plans them), or another
  // cluster's.
  const int64_t devices = inputs.cluster.deviceCount();
  std::string more =
      devices > 1
          ? llvm::formatv("plan several of cluster '{0}''s {1} devices "
                          "(--devices N)",
                          inputs.cluster.name, devices)
                .str()
          : std::string("use a cluster of more devices (--cluster)");
  return module.emitError() << llvm::formatv(
             "no plan fits {0} on one device: the compiled step needs {1} "
             "(its arena planned from liveness and the training state){2}; "
             "raise --memory-limit, lower --dim batch or {3}",
             sizeText(limit), needs, advice, more);
}

struct FitMemoryPass : tessera::impl::FitMemoryBase<FitMemoryPass> {
  using FitMemoryBase::FitMemoryBase;
  void runOnOperation() override;
};

} // namespace

FailureOr<std::string> tessera::fitMemory(ModuleOp module,
                                          const FitMemoryOptions &options) {
  FailureOr<FitInputs> inputs = readOptions(module, options);
  if (failed(inputs))
    return failure();
  if (!module.lookupSymbol<func::FuncOp>("forward"))
    return module.emitError() << "tess-fit-memory: the module has no "
                                 "@forward (the fit measures the step built "
                                 "from it, before tess-build-training)";
  RematMode remat;
  bool offload;
  std::string reason;
  if (failed(decide(module, *inputs, remat, offload, reason)))
    return failure();
  module->setAttr(sharding::kPlanAttrName,
                  tess::PlanAttr::get(module.getContext(), tess::MeshAttr(),
                                      /*zero=*/0, pipeline::rematName(remat),
                                      /*stages=*/1, /*schedule=*/"",
                                      /*microbatches=*/1, {},
                                      offload ? "optimizer" : ""));
  return reason;
}

void FitMemoryPass::runOnOperation() {
  ModuleOp module = getOperation();
  FitMemoryOptions options;
  options.cluster = cluster;
  options.mesh = mesh;
  options.devices = devices;
  options.memoryLimit = memoryLimit;
  options.remat = remat;
  options.offload = offload;
  options.loss = loss;
  options.precision = precision;
  options.vocabularyMultiple = vocabularyMultiple;
  options.logitsBlockBytes = logitsBlockBytes;
  FailureOr<std::string> reason = fitMemory(module, options);
  if (failed(reason))
    return signalPassFailure();
  if (!reason->empty())
    module.emitRemark() << *reason;
}
