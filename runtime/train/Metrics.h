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
#include <optional>
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
  /// Prepares `jsonlPath` (if not empty; Metrics.cpp's design says how it
  /// is written): a new run (`resumedStep` empty) starts it empty, a run
  /// resumed at step S keeps the existing file's whole lines of steps up to
  /// S. Nothing replaces the file before the first step is recorded.
  /// Throws TrainError naming the file if it cannot be read or written.
  MetricsWriter(FILE *console, const std::string &jsonlPath,
                std::optional<int64_t> resumedStep);
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
  /// The file being written, under its temporary name until the first
  /// step renames it over jsonlPath (then empty).
  std::string stagingPath;
};

/// The JSON object of one step, without a newline.
std::string formatMetricsJson(const StepMetrics &metrics);
/// The console line of one step, without a newline.
std::string formatMetricsLine(const StepMetrics &metrics);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_METRICS_H
