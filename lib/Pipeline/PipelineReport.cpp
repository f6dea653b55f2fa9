//===- PipelineReport.cpp - the pipeline plan tesserac --explain prints ---===//

#include "tessera/Pipeline/PipelineReport.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace llvm;

namespace tessera::pipeline {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string withCommas(int64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(i, ",");
  return digits;
}

/// "embedding, h.0-h.5" for a stage's units.
std::string describeUnits(const ProgramProfile &profile, size_t first,
                          size_t end) {
  std::string text;
  auto add = [&](const std::string &part) {
    text += (text.empty() ? "" : ", ") + part;
  };
  std::optional<size_t> firstLayer, lastLayer;
  for (size_t unit = first; unit < end; ++unit) {
    if (profile.units[unit].kind == UnitKind::Layer) {
      if (!firstLayer)
        firstLayer = unit - 1;
      lastLayer = unit - 1;
      continue;
    }
    if (profile.units[unit].kind == UnitKind::Head && firstLayer) {
      add(*firstLayer == *lastLayer
              ? formatv("layer {0}", *firstLayer).str()
              : formatv("layers {0}-{1}", *firstLayer, *lastLayer).str());
      firstLayer.reset();
    }
    add(profile.units[unit].name);
  }
  if (firstLayer)
    add(*firstLayer == *lastLayer
            ? formatv("layer {0}", *firstLayer).str()
            : formatv("layers {0}-{1}", *firstLayer, *lastLayer).str());
  return text;
}

double shapeFlops(const ProgramProfile &profile, int64_t globalBatch,
                  double factor, double vocabularyDivisor) {
  double layers = static_cast<double>(profile.layerCount());
  double width = static_cast<double>(profile.width);
  double sequence = static_cast<double>(profile.sequence);
  double vocabulary = static_cast<double>(profile.vocabulary);
  return factor * globalBatch * sequence * layers * width * width *
         (1 + sequence / (6 * width) +
          vocabulary / (vocabularyDivisor * layers * width));
}

} // namespace

double megatronFlopsPerStep(const ProgramProfile &profile,
                            int64_t globalBatch) {
  return shapeFlops(profile, globalBatch, 96, 16);
}

double modelFlopsPerStep(const ProgramProfile &profile, int64_t globalBatch) {
  return shapeFlops(profile, globalBatch, 72, 12);
}

void printPipelinePlan(const PipelinePlan &plan, const ProgramProfile &profile,
                       const cost::Cluster &cluster,
                       const StageCostOracle &oracle, int64_t globalBatch,
                       StringRef title, raw_ostream &os) {
  StringRef precision = cost::precisionName(profile.precision);
  int64_t tokens = globalBatch * profile.sequence;
  const StagePlan &firstStage = plan.stages.front();
  os << "Pipeline plan: " << title << "\n";
  os << formatv("  cluster    {0}: {1} x {2} ({3} node(s) of {4}), {5:F1} "
                "GiB, {6:F0} TFLOP/s {7}\n",
                cluster.name, withCommas(plan.devices), cluster.device.name,
                cluster.nodes, cluster.devicesPerNode,
                cluster.device.memoryBytes / kGiB,
                cluster.device.matrixRate(profile.precision) / 1e12,
                precision);
  os << formatv("  program    {0} units (embedding, {1} layers, head), {2} "
                "distinct structures costed; {3} parameters\n",
                profile.units.size(), profile.layerCount(),
                profile.structures.size(),
                withCommas(profile.trainableParameters));
  os << formatv("  batch      global {0} x sequence {1} = {2} tokens per "
                "step, {3}\n",
                globalBatch, profile.sequence, withCommas(tokens), precision);
  os << formatv("  search     {0} layouts (stages x micro-batches x "
                "schedule), {1} dynamic programs, {2:F2} s",
                plan.layoutsConsidered, plan.dynamicPrograms,
                plan.searchSeconds);
  // Searched again where a compiled program missed: each bound and the
  // largest device as compiled.
  if (plan.compiledSearches.size() > 1) {
    os << formatv("; {0} searches, each bound -> its plan's largest device "
                  "as compiled:",
                  plan.compiledSearches.size());
    for (auto [bound, compiled] : plan.compiledSearches)
      os << formatv(" {0:F3} -> {1:F3} MiB", bound / (1024.0 * 1024.0),
                    compiled / (1024.0 * 1024.0));
  }
  os << "\n";
  os << "  stage plan " << oracle.describe() << "\n";
  os << formatv("  layout     PP {0} x DP {1} x TP {2}{3}; {4}, {5} "
                "micro-batches of {6} samples ({7} per replica)\n",
                plan.stages.size(), firstStage.cost.dataParallel,
                firstStage.cost.tensorParallel,
                firstStage.cost.zero ? ", ZeRO-1" : "", plan.schedule.name(),
                plan.microBatches, plan.microBatchSamples,
                firstStage.cost.replicaBatch);

  os << formatv("\n{0,-6}{1,-31}{2,-18}{3,-22}{4,-10}{5,9}{6,9}{7,9}{8,9}"
                "{9,9}{10,9}{11,10}{12,9}\n",
                "Stage", "layers", "devices", "intra-op", "remat",
                "in-fl.", "fwd ms", "bwd ms", "recomp", "TP ms", "p2p ms",
                "sync ms", "GiB");
  for (auto [index, stage] : llvm::enumerate(plan.stages)) {
    const StageCost &cost = stage.cost;
    os << formatv(
        "  {0,-4}{1,-30} {2,-17} {3,-21} {4,-10}{5,9:F1}{6,9:F2}{7,9:F2}{8,9:F2}"
        "{9,9:F2}{10,9:F2}{11,10:F1}{12,9:F1}\n",
        index, describeUnits(profile, stage.firstUnit, stage.endUnit),
        formatv("{0}-{1} ({2}x{3})", stage.firstDevice,
                stage.firstDevice + stage.submesh.devices() - 1,
                stage.submesh.nodes, stage.submesh.devicesPerNode)
            .str(),
        cost.intraOpPlan(), rematName(stage.remat), stage.inFlight,
        cost.forward * 1e3, cost.backward * 1e3, cost.recompute * 1e3,
        cost.tensorParallelCommunication * 1e3, cost.pointToPoint * 1e3,
        cost.gradientSync * 1e3, cost.memory.total(stage.inFlight) / kGiB);
  }

  // The schedule.
  double slowest = 0;
  size_t slowestStage = 0;
  for (auto [index, stage] : llvm::enumerate(plan.stages))
    if (stage.cost.perMicroBatch() > slowest) {
      slowest = stage.cost.perMicroBatch();
      slowestStage = index;
    }
  double bubble = plan.pipelineSeconds - plan.microBatches * slowest;
  os << formatv("\nSchedule: {0}, {1} stages, {2} micro-batches; bubble "
                "(p-1)/(v*m) = {3:F1}% of the ideal time; slowest stage {4} "
                "at {5:F2} ms per micro-batch\n",
                plan.schedule.name(), plan.stages.size(), plan.microBatches,
                100 * bubbleFraction(plan.schedule, plan.stages.size(),
                                     plan.microBatches),
                slowestStage, slowest * 1e3);
  if (plan.schedule.kind == ScheduleKind::Interleaved)
    os << formatv("  each device holds {0} chunks of its layers, placed "
                  "round-robin (Megatron-LM's interleaving)\n",
                  plan.schedule.virtualStages);

  // Remat per layer, as runs of equal choices.
  os << "Remat per layer:";
  std::optional<std::pair<size_t, RematMode>> run;
  size_t layer = 0;
  auto closeRun = [&](size_t endLayer) {
    if (!run)
      return;
    os << formatv(" {0}{1} {2};",
                  run->first + 1 == endLayer
                      ? formatv("{0}", run->first).str()
                      : formatv("{0}-{1}", run->first, endLayer - 1).str(),
                  "", rematName(run->second));
  };
  for (const StagePlan &stage : plan.stages)
    for (size_t unit = stage.firstUnit; unit < stage.endUnit; ++unit) {
      if (profile.units[unit].kind != UnitKind::Layer)
        continue;
      if (!run || run->second != stage.remat) {
        closeRun(layer);
        run = {layer, stage.remat};
      }
      ++layer;
    }
  closeRun(layer);
  os << "\n";

  // Memory of the fullest device.
  size_t fullest = 0;
  for (auto [index, stage] : llvm::enumerate(plan.stages))
    if (stage.cost.memory.total(stage.inFlight) >
        plan.stages[fullest].cost.memory.total(
            plan.stages[fullest].inFlight))
      fullest = index;
  const StagePlan &full = plan.stages[fullest];
  const StageMemory &memory = full.cost.memory;
  double total = memory.total(full.inFlight);
  auto memoryLine = [&](StringRef label, double bytes) {
    os << formatv("  {0,-52} {1,9:F2} {2,6:F1}%\n", label, bytes / kGiB,
                  100 * bytes / total);
  };
  os << formatv("\nMemory per device, stage {0} (the fullest)   GiB  share\n",
                fullest);
  memoryLine(formatv("weights (fp32 master{0} + {1} copy)",
                     full.cost.zero ? " / DP + fp32 mirror" : "", precision)
                 .str(),
             memory.weights);
  memoryLine("gradients", memory.gradients);
  memoryLine(formatv("optimizer state (AdamW m, v{0})",
                     full.cost.zero ? " / DP" : "")
                 .str(),
             memory.optimizerState);
  if (memory.accumulators)
    memoryLine("gradient accumulators (fp32 sums of micro-batches, replicas)",
               memory.accumulators);
  memoryLine(formatv("activations ({0:F1} micro-batches in flight x {1:F2} "
                     "GiB)",
                     full.inFlight, memory.activationsPerMicroBatch / kGiB)
                 .str(),
             full.inFlight * memory.activationsPerMicroBatch);
  memoryLine("backward working set of one layer", memory.working);
  os << formatv("  {0,-52} {1,9:F2} of {2:F1} GiB\n", "total", total / kGiB,
                cluster.device.memoryBytes / kGiB);

  // Step time by part, along the slowest stage.
  const StageCost &critical = plan.stages[slowestStage].cost;
  double step = plan.stepSeconds;
  auto timeLine = [&](StringRef label, double seconds) {
    os << formatv("  {0,-52} {1,10:F1} {2,6:F1}%\n", label, seconds * 1e3,
                  100 * seconds / step);
  };
  double steady = plan.microBatches;
  os << formatv("\nPredicted step time by part (slowest stage {0} x {1} "
                "micro-batches)   ms  share\n",
                slowestStage, plan.microBatches);
  timeLine("forward", steady * critical.forward);
  timeLine("backward", steady * critical.backward);
  timeLine("recomputation", steady * critical.recompute);
  timeLine("tensor-parallel all-reduces",
           steady * critical.tensorParallelCommunication);
  timeLine("pipeline send/receive", steady * critical.pointToPoint);
  timeLine("pipeline bubble (fill and drain)", bubble);
  timeLine("data-parallel gradient all-reduce", critical.gradientSync);
  timeLine("optimizer step (AdamW, weight casts)", critical.optimizer);
  if (plan.tiedGradientSeconds > 0)
    timeLine("tied embedding gradient (first <-> last stage)",
             plan.tiedGradientSeconds);
  os << formatv("  {0,-52} {1,10:F1} {2,6:F1}%\n", "step",
                step * 1e3, 100.0);

  double perGpu = static_cast<double>(plan.devices) * step;
  double model = modelFlopsPerStep(profile, globalBatch) / perGpu;
  double megatron = megatronFlopsPerStep(profile, globalBatch) / perGpu;
  double peak = cluster.device.peakMatrixRate(profile.precision);
  os << formatv("\nPredicted: {0:F3} s per step, {1} tokens/s\n", step,
                withCommas(static_cast<int64_t>(tokens / step)));
  os << formatv("  {0:F1} TFLOP/s per GPU of model FLOPs (72 B s l h^2 (1 + "
                "s/6h + V/12lh): 6 N tokens plus attention, no recomputation "
                "counted; MFU {1:F1}%)\n",
                model / 1e12, 100 * model / peak);
  os << formatv("  {0:F1} TFLOP/s per GPU by Megatron-LM's formula (96 B s l "
                "h^2 (1 + s/6h + V/16lh), full recomputation counted: the "
                "formula of its published numbers)\n",
                megatron / 1e12);
}

} // namespace tessera::pipeline
