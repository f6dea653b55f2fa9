//===- MeshPlan.cpp - tess-search-sharding's decision ---------------------===//
//
// See MeshPlan.h. The search's per-op model predicts a rank's memory; the
// program the compile builds for that rank is what runs, so a mesh plan is
// checked against it: the step built from the planned forward, its layouts
// written from the plan and one rank partitioned, as the compile's
// training, plan, shard and partition phases do, then the one memory
// analysis. Where the model missed, the search runs again under a bound
// corrected by the miss: lowered when the rank does not fit, raised when it
// fits with room a faster plan might use (the model can overestimate, as
// well as under), and the fastest plan whose rank fits is kept. Choosing the mesh of N devices is that decision for
// each factorisation, the fastest that fits kept.
//
//===----------------------------------------------------------------------===//

#include "tessera/Transforms/MeshPlan.h"

#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/CompiledStepMemory.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

using namespace mlir;
using namespace tessera;

namespace {

/// The searches of one mesh before its plan is kept.
constexpr int kMaxSearches = 4;

/// The least change of the search's memory bound tried, as a share of the
/// limit: a smaller one returns the same plan.
constexpr double kBoundStep = 1e-4;

/// Holds the remarks emitted while it lives (the partition's, of a mesh
/// that may not be chosen), for emitAgain.
class HeldRemarks : public ScopedDiagnosticHandler {
public:
  explicit HeldRemarks(MLIRContext *context) : ScopedDiagnosticHandler(context) {
    setHandler([this](Diagnostic &diagnostic) {
      if (diagnostic.getSeverity() != DiagnosticSeverity::Remark)
        return failure();
      held.push_back({diagnostic.getLocation(), diagnostic.str()});
      return success();
    });
  }
  std::vector<std::pair<Location, std::string>> take() {
    return std::exchange(held, {});
  }

private:
  std::vector<std::pair<Location, std::string>> held;
};

void emitAgain(const std::vector<std::pair<Location, std::string>> &remarks) {
  for (const auto &[location, message] : remarks)
    emitRemark(location) << message;
}

/// The compiled step's options among the search's.
CompiledStepOptions stepOptions(const SearchShardingOptions &options) {
  CompiledStepOptions step;
  return copyStepOptions(step, options);
}

/// The memory of one rank's program compiled from the forward in `searched`
/// (left as it is), whose ops carry the plan `plan`: the training step
/// (q/k/v apart), the module's plan, the layouts from the plan and the
/// partition, prepared and analysed; `compiledPlan` is that program's
/// #tess.plan. Failure after a diagnostic.
FailureOr<StepMemory> rankMemory(ModuleOp searched,
                                 const SearchShardingOptions &options,
                                 const sharding::TrainingShardingPlan &plan,
                                 tess::PlanAttr fitted,
                                 tess::PlanAttr &compiledPlan) {
  OwningOpRef<ModuleOp> step(searched.clone());
  CompiledStepOptions compiled = stepOptions(options);
  if (failed(buildTrainingStep(*step, compiled, /*packQkv=*/false)))
    return failure();
  (*step)->setAttr(sharding::kPlanAttrName,
                   searchedModulePlan(searched.getContext(), &plan, fitted));
  PassManager passes(searched.getContext());
  AnnotateFromPlanOptions annotate;
  annotate.remarks = true;
  passes.addPass(createAnnotateFromPlan(annotate));
  passes.addPass(createPartitionSpmd());
  if (failed(passes.run(*step)))
    return searched.emitError()
           << "tess-search-sharding: partitioning the checked plan's step "
              "failed";
  compiledPlan = tess::PlanAttr::lookup(*step);
  return preparedStepMemory(*step, compiled, /*microBatches=*/1);
}

/// decideMeshPlan for the one mesh of `options` (its `devices` 0).
FailureOr<MeshPlanDecision> decideOnMesh(ModuleOp module,
                                         const SearchShardingOptions &options,
                                         std::string &unfit) {
  FailureOr<ShardingCalibration> calibration =
      calibrateSharding(module, options);
  if (failed(calibration))
    return failure();
  // (The calibration has read the options: the cluster loads.)
  llvm::Expected<cost::Cluster> cluster = cost::loadCluster(options.cluster);
  if (!cluster)
    return module.emitError() << "tess-search-sharding: "
                              << llvm::toString(cluster.takeError());
  double limit = options.memoryLimit > 0
                     ? static_cast<double>(options.memoryLimit)
                     : cluster->device.memoryBytes;
  bool measured = StringRef(options.calibration).trim().empty();
  tess::PlanAttr fitted = tess::PlanAttr::lookup(module);
  // The search's per-op model and the compiled rank differ by a few
  // percent either way (liveness, the partition's gathers and temporaries),
  // so the bound the search is given is corrected by what the model missed
  // on the plan it returned: lowered when that rank does not fit, raised
  // when it fits with room a faster plan might use. `fitting` brackets the
  // bounds from below (its plan fits), `missing` from above.
  SearchShardingOptions bounded = options;
  double bound = limit;
  double fitting = 0, missing = std::numeric_limits<double>::infinity();
  std::optional<MeshPlanDecision> best;
  OwningOpRef<ModuleOp> bestModule;
  std::optional<double> lastSeconds;
  std::vector<sharding::PlanSearchInfo::MemoryCheck> checks;
  double leastMissed = std::numeric_limits<double>::infinity();
  for (int search = 1; search <= kMaxSearches; ++search) {
    if (search > 1)
      bounded.memoryLimit = static_cast<int64_t>(bound);
    OwningOpRef<ModuleOp> planned(module.clone());
    llvm::Expected<sharding::TrainingShardingPlan> plan =
        searchSharding(*planned, bounded, *calibration);
    if (!plan) {
      // Nothing the model fits under this bound: nor under a lower one.
      // The error is then the least rank a plan that missed needs, when a
      // higher bound gave one.
      if (best || leastMissed < std::numeric_limits<double>::infinity()) {
        consumeError(plan.takeError());
        break;
      }
      unfit = llvm::toString(plan.takeError());
      return failure();
    }
    MeshPlanDecision decision;
    decision.plan = std::move(*plan);
    decision.calibration = *calibration;
    if (decision.calibration.estimate)
      decision.calibration.estimate->memoryLimitBytes = limit;
    const cost::DeviceMesh &mesh = decision.plan.mesh;
    if (mesh.deviceCount() == 1 || !measured) {
      adoptModule(module, *planned);
      return decision;
    }
    // A raised bound that gives the same plan again: nothing faster fits.
    double seconds = decision.plan.predicted.stepSeconds();
    if (lastSeconds && seconds == *lastSeconds && bound > fitting &&
        fitting > 0)
      break;
    lastSeconds = seconds;
    FailureOr<StepMemory> rank = rankMemory(*planned, options, decision.plan,
                                            fitted, decision.compiledPlan);
    if (failed(rank))
      return failure();
    decision.rank = *rank;
    double predicted = decision.plan.predicted.memoryBytes();
    double compiled = rank->totalBytes();
    bool fits = compiled <= limit;
    checks.push_back({bound, compiled});
    if (fits) {
      fitting = std::max(fitting, bound);
      if (!best || seconds < best->plan.predicted.stepSeconds()) {
        best = std::move(decision);
        bestModule = std::move(planned);
      }
    } else {
      missing = std::min(missing, bound);
      // Without a plan that fits, the error gives the least rank searched.
      if (compiled < leastMissed) {
        leastMissed = compiled;
        unfit = llvm::formatv(
            "no sharding plan fits {0:F3} MiB per device on mesh {1} as "
            "compiled: the least of the search's plans needs {2:F3} MiB per "
            "rank (its arena planned from liveness and the training state; "
            "the search predicted {3:F3}); raise --memory-limit or use more "
            "devices",
            limit / 1048576.0, mesh.describe(), compiled / 1048576.0,
            predicted / 1048576.0);
      }
    }
    // The bound at which the model, shifted by its miss on this plan, puts
    // the plan at the limit, at least a step away from this one and kept
    // strictly inside the bracket (its middle where the shift leaves it).
    double step = kBoundStep * limit;
    // (In the bound's terms: the bound holds the layers' temporaries in
    // their least share, not the head's.)
    double next = decision.plan.predicted.boundBytes() + (limit - compiled);
    if (fits && next < bound + step)
      break; // no room worth another search
    if (!fits)
      next = std::min(next, bound - step);
    if (!(next > fitting && next < missing)) {
      if (missing - fitting < 2 * step)
        break;
      next = 0.5 * (fitting + missing);
    }
    bound = next;
  }
  if (!best)
    return failure();
  if (checks.size() > 1)
    best->plan.search.memoryChecks = std::move(checks);
  adoptModule(module, *bestModule);
  return std::move(*best);
}

/// Every mesh of `devices` devices, from the most data-parallel: dp=N,
/// dp=A,tp=B, tp=N.
std::vector<std::string> meshesOf(int64_t devices) {
  std::vector<std::string> meshes;
  for (int64_t dp = devices; dp >= 1; --dp) {
    if (devices % dp != 0)
      continue;
    int64_t tp = devices / dp;
    meshes.push_back(tp == 1   ? llvm::formatv("dp={0}", dp).str()
                     : dp == 1 ? llvm::formatv("tp={0}", tp).str()
                               : llvm::formatv("dp={0},tp={1}", dp, tp).str());
  }
  return meshes;
}

} // namespace

void tessera::adoptModule(ModuleOp module, ModuleOp from) {
  Block *body = module.getBody();
  body->clear();
  body->getOperations().splice(body->end(), from.getBody()->getOperations());
  module->setAttrs(from->getAttrDictionary());
}

tess::PlanAttr
tessera::searchedModulePlan(MLIRContext *context,
                            const sharding::TrainingShardingPlan *plan,
                            tess::PlanAttr fitted) {
  int64_t zero = 0;
  if (plan)
    zero = plan->zeroStage < 0 ? tess::PlanAttr::kMixedZero : plan->zeroStage;
  std::string remat = "none";
  std::string offload;
  if (fitted) {
    remat = fitted.getRemat().str();
    offload = fitted.getOffload().str();
  }
  return tess::PlanAttr::get(context, tess::MeshAttr(), zero, remat,
                             /*stages=*/1, /*schedule=*/"",
                             /*microbatches=*/1, {}, offload);
}

FailureOr<MeshPlanDecision>
tessera::decideMeshPlan(ModuleOp module, const SearchShardingOptions &options,
                        std::string &unfit) {
  if (options.devices == 0)
    return decideOnMesh(module, options, unfit);
  auto error = [&]() { return module.emitError() << "tess-search-sharding: "; };
  if (options.devices < 0)
    return error() << "devices " << options.devices
                   << ": expected a device count >= 0 (0: `mesh`)";
  if (!StringRef(options.mesh).trim().empty())
    return error() << "devices " << options.devices << " with mesh "
                   << options.mesh
                   << ": `devices` chooses the mesh, which `mesh` pins; give "
                      "one of them";
  llvm::Expected<cost::Cluster> cluster = cost::loadCluster(options.cluster);
  if (!cluster)
    return error() << llvm::toString(cluster.takeError());
  std::optional<MeshPlanDecision> chosen;
  OwningOpRef<ModuleOp> chosenModule;
  std::vector<std::pair<Location, std::string>> chosenRemarks;
  std::string reasons;
  for (const std::string &spec : meshesOf(options.devices)) {
    llvm::Expected<cost::DeviceMesh> mesh = cost::parseMesh(spec);
    if (!mesh)
      return error() << "devices " << options.devices << ": "
                     << llvm::toString(mesh.takeError());
    if (llvm::Error placed = cost::placeOnCluster(*mesh, *cluster))
      return error() << "devices " << options.devices << ": "
                     << llvm::toString(std::move(placed));
    SearchShardingOptions meshOptions = options;
    meshOptions.devices = 0;
    meshOptions.mesh = spec;
    OwningOpRef<ModuleOp> candidate(module.clone());
    std::string why;
    FailureOr<MeshPlanDecision> decision;
    std::vector<std::pair<Location, std::string>> remarks;
    {
      HeldRemarks held(module.getContext());
      decision = decideOnMesh(*candidate, meshOptions, why);
      remarks = held.take();
    }
    if (failed(decision)) {
      if (why.empty())
        return failure();
      reasons += "\n  " + spec + ": " + why;
      continue;
    }
    if (!chosen || decision->plan.predicted.stepSeconds() <
                       chosen->plan.predicted.stepSeconds()) {
      chosen = std::move(*decision);
      chosenModule = std::move(candidate);
      chosenRemarks = std::move(remarks);
    }
  }
  if (!chosen) {
    unfit = llvm::formatv("no mesh of {0} devices fits a plan on cluster "
                          "'{1}':{2}",
                          options.devices, cluster->name, reasons);
    return failure();
  }
  adoptModule(module, *chosenModule);
  emitAgain(chosenRemarks);
  return std::move(*chosen);
}
