//===- TrainingStepReport.cpp - the table tesserac --explain prints -------===//
//
// Fixed-width columns with units in the header, so that a reader can lay
// two reports side by side and lit tests can match whole lines.
//
//===----------------------------------------------------------------------===//

#include "tessera/CostModel/TrainingStepEstimate.h"

#include "llvm/Support/FormatVariadic.h"

using namespace llvm;

namespace tessera::cost {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

std::string withCommas(int64_t value) {
  std::string digits = std::to_string(value);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(i, ",");
  return digits;
}

void memoryLine(raw_ostream &os, StringRef label, int64_t bytes,
                int64_t total) {
  os << formatv("  {0,-40} {1,12:F3} {2,6:F1}%\n", label, bytes / kMiB,
                total > 0 ? 100.0 * bytes / total : 0.0);
}

} // namespace

void printTrainingStepEstimate(const TrainingStepEstimate &estimate,
                               StringRef title, raw_ostream &os) {
  const StepMemory &memory = estimate.memory;
  StringRef precision = precisionName(estimate.precision);
  os << "Training step estimate: " << title << "\n";
  os << formatv("  cluster    {0} ({1}, {2:F1} GiB, {3:F0} TFLOP/s {4})\n",
                estimate.clusterName, estimate.device.name,
                estimate.device.memoryBytes / kGiB,
                estimate.device.matrixRate(estimate.precision) / 1e12,
                precision);
  os << "  mesh       " << estimate.mesh.describe();
  if (estimate.mesh.deviceCount() > 1) {
    os << " (";
    for (auto [index, axis] : llvm::enumerate(estimate.mesh.axes))
      os << (index ? ", " : "") << axis.name << " on "
         << (axis.level == LinkLevel::IntraNode ? "intra-node" : "inter-node")
         << " link";
    os << "); no sharding plan yet: priced as data parallelism";
  }
  os << "\n";
  os << formatv("  precision  {0}; {1} tokens per device, {2} per step\n",
                precision, withCommas(estimate.tokensPerDevice),
                withCommas(estimate.tokensPerStep));

  // The compiled step's memory (tessera/Analysis/StepMemory.h), the number
  // --summary prints and the executable allocates.
  const TrainingStateBytes &state = memory.state;
  int64_t total = memory.totalBytes();
  os << formatv("\n{0,-42} {1,12} {2,7}\n",
                "Memory per device (the compiled step)", "MiB", "share");
  memoryLine(os, "master weights (fp32)", state.masterWeights, total);
  memoryLine(os, formatv("compute copies of the weights ({0})", precision).str(),
             state.computeCopies, total);
  memoryLine(os, "gradients", state.gradients, total);
  memoryLine(os, "optimizer state (AdamW m, v)", state.optimizerState, total);
  if (state.accumulators)
    memoryLine(os, "gradient accumulators (fp32)", state.accumulators, total);
  if (state.gradientRing)
    memoryLine(os, "ZeRO-2 gradient ring (estimated)", state.gradientRing,
               total);
  memoryLine(os, "buffers", state.buffers, total);
  memoryLine(os, "step arena (activations, temporaries)",
             memory.arenaBytes, total);
  if (memory.gemmScratchBytes)
    memoryLine(os, "padded-GEMM scratch (CUDA)", memory.gemmScratchBytes,
               total);
  os << formatv("  {0,-40} {1,12:F3} of {2:F1} GiB ({3:F1}%)\n", "total",
                total / kMiB, estimate.device.memoryBytes / kGiB,
                100.0 * total / estimate.device.memoryBytes);
  os << formatv("  resident state: {0:F2} bytes per parameter ({1} "
                "parameters)\n",
                state.trainableElements
                    ? static_cast<double>(state.total() - state.buffers) /
                          state.trainableElements
                    : 0.0,
                withCommas(state.trainableElements));
  os << formatv("  the arena peaks at {0}; {1:F3} MiB kept by the forward "
                "for the backward\n",
                memory.peakOpName, memory.savedForBackwardBytes / kMiB);
  // The fit decision tesserac made with this analysis (--memory-limit, else
  // the device's memory).
  double limit = estimate.memoryLimitBytes;
  if (estimate.offloadOptimizer)
    os << formatv("  fits the limit of {0:F3} MiB per device only with the "
                  "optimizer offloaded{1}: {2:F3} MiB on the device\n",
                  limit / kMiB,
                  estimate.remat == "none"
                      ? std::string()
                      : formatv(" and --remat {0}", estimate.remat).str(),
                  memory.offloadedTotalBytes() / kMiB);
  else if (total <= limit)
    os << formatv("  fits the limit of {0:F3} MiB per device{1}\n", limit / kMiB,
                  estimate.remat == "none"
                      ? std::string()
                      : formatv(" with --remat {0}", estimate.remat).str());
  else
    os << formatv("  does not fit the limit of {0:F3} MiB on one device: the "
                  "sharding plan below divides it\n",
                  limit / kMiB);
  // The executable's --offload optimizer: the plan's only when nothing
  // else fits (the line above says so).
  os << formatv("  with --offload optimizer: {0:F3} MiB per device (fp32 "
                "master weights and AdamW moments, {1:F3} MiB, in pinned host "
                "memory)\n",
                memory.offloadedTotalBytes() / kMiB,
                state.offloadedToHost() / kMiB);

  double step = estimate.stepSeconds();
  os << formatv("\n{0,-28} {1,11} {2,10} {3,7} {4,12}\n",
                "Time per step on one device", "ops", "ms", "share", "GFLOP");
  for (size_t kind = 0; kind < kOpKindCount; ++kind) {
    if (static_cast<OpKind>(kind) == OpKind::Free)
      continue;
    os << formatv("  {0,-26} {1,11} {2,10:F4} {3,6:F1}% {4,12:F3}\n",
                  opKindName(static_cast<OpKind>(kind)),
                  estimate.opsByKind[kind],
                  estimate.secondsByKind[kind] * 1e3,
                  100.0 * estimate.secondsByKind[kind] / step,
                  estimate.flopsByKind[kind] / 1e9);
  }
  if (estimate.mesh.deviceCount() > 1)
    os << formatv("  {0,-26} {1,11} {2,10:F4} {3,6:F1}% {4,12}\n",
                  "gradient all-reduce", "",
                  estimate.gradientAllReduceSeconds * 1e3,
                  100.0 * estimate.gradientAllReduceSeconds / step,
                  formatv("{0:F1} MiB", estimate.gradientBytes / 1048576.0)
                      .str());
  os << formatv("  {0,-26} {1,11} {2,10:F4} {3,6:F1}% {4,12:F3}\n", "step", "",
                step * 1e3, 100.0, estimate.flops / 1e9);

  os << formatv("\nFLOPs per device per step: {0:F3} GFLOP executed, {1:F3} "
                "GFLOP model ({2:F4} GFLOP per token)\n",
                estimate.flops / 1e9, estimate.modelFlops / 1e9,
                estimate.modelFlops / estimate.tokensPerDevice / 1e9);
  os << formatv("Predicted: {0} tokens/s, {1:F1} TFLOP/s per device, MFU "
                "{2:F1}% of the {3:F0} TFLOP/s {4} peak\n",
                withCommas(static_cast<int64_t>(estimate.tokensPerSecond())),
                estimate.modelFlops / step / 1e12,
                100.0 * estimate.modelFlopsUtilization(),
                estimate.device.peakMatrixRate(estimate.precision) / 1e12,
                precision);
  if (!estimate.unmodelledOps.empty()) {
    os << "Not in the cost table (priced as copies):";
    for (const std::string &name : estimate.unmodelledOps)
      os << " " << name;
    os << "\n";
  }
}

} // namespace tessera::cost
