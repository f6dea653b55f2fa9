//===- PlanReport.cpp - the sharding plan as tesserac --explain prints it -===//

#include "tessera/Sharding/MeshSharding.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;
using namespace tessera;
using namespace tessera::sharding;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

/// Ops worth a line: the ones whose strategy is a parallelization choice.
bool isReported(Operation *op) {
  return llvm::isa<tess::LinearOp, tess::MatmulOp, tess::AttentionOp,
                   tess::EmbeddingOp>(op);
}

/// The name of the parameter an op reads as its weight (the first one),
/// after its layer prefix.
std::string weightName(Operation *op) {
  for (Value operand : op->getOperands())
    if (auto parameter = operand.getDefiningOp<tess::ParameterOp>())
      return splitLayerName(parameter.getName()).second;
  return "";
}

} // namespace

void sharding::printTrainingShardingPlan(const TrainingShardingPlan &plan,
                                         const cost::Cluster &cluster,
                                         llvm::raw_ostream &os) {
  const PlanSearchInfo &search = plan.search;
  os << "\nSharding plan on mesh " << plan.mesh.describe() << " ("
     << plan.mesh.deviceCount() << " device"
     << (plan.mesh.deviceCount() == 1 ? "" : "s") << ")\n";
  os << llvm::formatv(
      "  search     {0}{1}, {2:F2} s; {3} nodes and {4} edges solved for {5} "
      "ops\n",
      search.method == "ilp" ? "ILP (CBC)" : "greedy",
      search.method == "ilp"
          ? (search.provenOptimal ? ", proven optimal" : ", not proven optimal")
          : " (the ILP gave no better plan within --search-timeout)",
      search.searchSeconds, search.solvedNodes, search.solvedEdges,
      search.functionOps);
  if (!search.memoryChecks.empty()) {
    // The bounds the search ran under, corrected by what its per-op model
    // missed on each plan's compiled rank (tess-search-sharding).
    os << "  searched   " << search.memoryChecks.size()
       << " times under bounds corrected by the compiled rank (bound -> rank "
          "MiB):";
    llvm::ListSeparator comma(",");
    for (const PlanSearchInfo::MemoryCheck &check : search.memoryChecks)
      os << comma
         << llvm::formatv(" {0:F3} -> {1:F3}", check.boundBytes / 1048576.0,
                          check.compiledBytes / 1048576.0);
    os << "\n";
  }
  if (plan.zeroStage >= 0)
    os << "  ZeRO       stage " << plan.zeroStage << " for every parameter\n";
  else
    os << "  ZeRO       stages differ by parameter (below)\n";

  // Group the ops: runs of identical layers once, the rest by layer.
  std::map<std::string, size_t> runLength;
  std::map<std::string, std::string> runOfLayer;
  for (const auto &[name, length] : search.reusedLayers) {
    runLength[name] = length;
    llvm::StringRef prefix = llvm::StringRef(name).rsplit('.').first;
    llvm::StringRef range = llvm::StringRef(name).rsplit('.').second;
    auto [first, last] = range.split('-');
    int64_t from = 0, to = 0;
    first.getAsInteger(10, from);
    if (last.empty() || last.getAsInteger(10, to))
      to = from;
    for (int64_t index = from; index <= to; ++index)
      runOfLayer[(prefix + "." + llvm::Twine(index)).str()] = name;
  }
  // Lines by group, groups in order of their first line: a group with
  // nothing to report (e.g. embeddings' parameters only) prints nothing,
  // and a group's parameters and ops come under one header.
  std::vector<std::string> groups;
  std::map<std::string, std::string> linesOf;
  for (const OpSharding &entry : plan.ops) {
    std::string group = entry.layer.empty() ? "" : runOfLayer[entry.layer];
    bool firstInstance =
        entry.layer.empty() ||
        llvm::StringRef(group).rsplit('.').second.split('-').first ==
            llvm::StringRef(entry.layer).rsplit('.').second;
    if (!firstInstance)
      continue;
    std::string text;
    llvm::raw_string_ostream line(text);
    if (auto parameter = llvm::dyn_cast<tess::ParameterOp>(entry.op)) {
      const ParameterSharding *state = nullptr;
      for (const ParameterSharding &candidate : plan.parameters)
        if (candidate.op == entry.op)
          state = &candidate;
      if (!state || !parameter.getTrainable())
        continue;
      // Parameters on one line each only when something is sharded.
      if (state->computeLayout.isReplicated() && state->zeroStage == 0 &&
          plan.zeroStage >= 0)
        continue;
      line << llvm::formatv("    {0,-28} {1,-16} {2} ZeRO-{3}",
                            splitLayerName(parameter.getName()).second,
                            "parameter", state->computeLayout.print(plan.mesh),
                            state->zeroStage);
      if (state->zeroStage > 0)
        line << ", state " << state->stateLayout.print(plan.mesh);
      line << "\n";
    } else if (isReported(entry.op)) {
      line << llvm::formatv("    {0,-28} {1,-16} {2}\n", weightName(entry.op),
                            entry.op->getName().getStringRef(),
                            entry.strategy);
    } else {
      continue;
    }
    auto [found, inserted] = linesOf.try_emplace(group);
    if (inserted)
      groups.push_back(group);
    found->second += text;
  }
  for (const std::string &group : groups) {
    if (group.empty())
      os << "  outside the repeated layers:\n";
    else if (runLength[group] > 1)
      os << "  " << group << " (" << runLength[group]
         << " identical layers, solved once):\n";
    else
      os << "  " << group << ":\n";
    os << linesOf[group];
  }
  for (const TensorLayout &layout : plan.resultLayouts)
    os << "  the loss reads the logits as " << layout.print(plan.mesh)
       << (layout.isReplicated() || layout.rank() == 0
               ? " (whole on every device)"
               : layout.dimAxes.back() != kUnsplit
                     ? " (vocabulary-parallel cross-entropy)"
                     : " (each device its tokens)")
       << "\n";

  const PlanPrediction &predicted = plan.predicted;
  double total = predicted.memoryBytes();
  os << llvm::formatv("\n{0,-42} {1,12} {2,7}\n", "Plan memory per device",
                      "MiB", "share");
  auto memoryLine = [&](llvm::StringRef label, double bytes) {
    os << llvm::formatv("  {0,-40} {1,12:F3} {2,6:F1}%\n", label, bytes / kMiB,
                        total > 0 ? 100.0 * bytes / total : 0.0);
  };
  memoryLine("master weights (fp32)", predicted.masterWeights);
  memoryLine("compute weights", predicted.computeWeights);
  memoryLine("gradients", predicted.gradients);
  memoryLine("optimizer state (AdamW m, v)", predicted.optimizerState);
  memoryLine("inputs and buffers", predicted.inputsAndBuffers);
  memoryLine("activations kept for the backward", predicted.activations);
  if (predicted.transientBytes > 0)
    memoryLine("temporaries at the peak", predicted.transientBytes);
  os << llvm::formatv("  {0,-40} {1,12:F3} of {2:F1} GiB\n", "total",
                      total / kMiB, cluster.device.memoryBytes / kGiB);

  double step = predicted.stepSeconds();
  os << llvm::formatv("\n{0,-28} {1,10} {2,7} {3,14}\n",
                      "Plan time per step", "ms", "share", "MiB per device");
  auto timeLine = [&](llvm::StringRef label, double seconds,
                      std::optional<double> bytes) {
    os << llvm::formatv("  {0,-26} {1,10:F4} {2,6:F1}% {3,14}\n", label,
                        seconds * 1e3, step > 0 ? 100.0 * seconds / step : 0.0,
                        bytes ? llvm::formatv("{0:F1}", *bytes / kMiB).str()
                              : std::string());
  };
  timeLine("compute (fwd + bwd)", predicted.computeSeconds, std::nullopt);
  timeLine("optimizer", predicted.optimizerSeconds, std::nullopt);
  double volume = 0;
  for (cost::Collective collective : cost::allCollectives()) {
    size_t kind = static_cast<size_t>(collective);
    if (predicted.collectiveBytes[kind] == 0)
      continue;
    volume += predicted.collectiveBytes[kind];
    timeLine(cost::collectiveName(collective),
             predicted.collectiveSeconds[kind],
             predicted.collectiveBytes[kind]);
  }
  timeLine("step", step, volume);
  os << llvm::formatv("Communication volume: {0:F1} MiB per device per step\n",
                      volume / kMiB);
}
