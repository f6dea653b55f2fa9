//===- Metrics.h - What a run reports per step ------------------*- C++ -*-===//
//
// One line a step on stdout, and with --metrics one JSON object a line; see
// Metrics.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_METRICS_H
#define TESSERA_RUNTIME_TRAIN_METRICS_H

#include "GradientNorms.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace tessera::train {

struct StepMetrics {
  int64_t step = 0;
  int64_t totalSteps = 0;
  double loss = 0;
  double learningRate = 0;
  double gradientNorm = 0;
  double tokensPerSecond = 0;
  double stepMilliseconds = 0;
  /// The loss scale the step ran with (1 unless the program is fp16).
  double lossScale = 1;
  /// True when AdamW did not run: an fp16 step overflowed, or a gradient
  /// spike's action skipped it (`spike`).
  bool skipped = false;
  /// --on-spike: whether detection is on, and whether this step's norm
  /// left the band [spikeLower, spikeUpper] (GradientSpikes.h), with the
  /// actions taken.
  bool spikeDetection = false;
  bool spike = false;
  double spikeLower = 0, spikeUpper = 0;
  std::string spikeActions;
  /// --grad-norms-every's steps: each parameter's and layer's norm (empty
  /// on other steps).
  GradientNorms gradientNorms;
  /// Model FLOPs utilization: the program's model FLOPs of the step over
  /// the step's time and --peak-tflops, a fraction; negative when the
  /// program does not say its FLOPs.
  double modelFlopsUtilization = -1;
  /// The most memory the run has held on its device so far (the host's
  /// peak resident set for a CPU program), in bytes.
  int64_t peakMemoryBytes = 0;
};

class MetricsWriter {
public:
  /// Opens `jsonlPath` (if not empty): truncated for a new run, appended to
  /// when `append` (a resumed run continues the same file). Throws
  /// TrainError naming the file if it cannot be opened.
  MetricsWriter(FILE *console, const std::string &jsonlPath, bool append);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter &) = delete;
  MetricsWriter &operator=(const MetricsWriter &) = delete;

  /// Writes the step's line and JSON object, flushed so a killed run keeps
  /// every finished step.
  void record(const StepMetrics &metrics);

private:
  FILE *console;
  FILE *jsonl = nullptr;
  std::string jsonlPath;
};

/// The JSON object of one step, without a newline.
std::string formatMetricsJson(const StepMetrics &metrics);
/// The console line of one step, without a newline.
std::string formatMetricsLine(const StepMetrics &metrics);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_METRICS_H
