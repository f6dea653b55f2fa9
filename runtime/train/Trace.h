//===- Trace.h - --trace: a Chrome/Perfetto timeline of a run ---*- C++ -*-===//
//
// A Trace records, for the steps of --trace-steps, what the driver's host
// thread did (ranges such as data, forward_backward, optimizer; instants;
// counters such as the loss scale) and, for a CUDA program, what the GPU
// ran (kernels, NCCL's included, copies, memsets; TraceCupti.h). At the end
// of the run, and best effort when it fails, it writes one Chrome trace
// JSON file per rank (TraceFile.h, TraceJson.h), which ui.perfetto.dev
// opens; the files of several ranks open together in one Perfetto window.
//
// Steps: the driver marks each step (TraceStep); only steps first..last
// (1-based, inclusive; default 2..4, which skips the first step's warm-up:
// the program's arena, cuBLASLt's heuristics, lazy module loading, and
// keeps files to a few MB) are recorded. Outside them, and always when
// --trace is not given, recording is one relaxed atomic load: a TraceRange
// costs a branch.
//
// Usage:
//   Trace trace(options);              // once per run
//   { TraceStep traced(trace, step);   // per step
//     { TraceRange range(trace, "optimizer"); ... }
//     trace.counter("loss scale", scale); }
//   trace.finish();                    // writes the file
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_TRACE_H
#define TESSERA_RUNTIME_TRAIN_TRACE_H

#include "TraceEvent.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera::train {

class GpuActivityCollector;
struct TraceDocument;
struct TrainOptions;

/// --trace-steps A: (no end) records to the last step of the run.
constexpr int64_t kTraceToLastStep = std::numeric_limits<int64_t>::max();

struct TraceOptions {
  /// The --trace name (TraceFile.h: ".rankN" or "%r"); empty: tracing off.
  std::string file;
  int64_t firstStep = 2;
  int64_t lastStep = 4;
  int32_t rank = 0;
  int32_t worldSize = 1;
  /// Collect GPU activity (CUDA programs).
  bool captureGpu = false;
  /// Where CUPTI is looked for (defaultCuptiLibraries() when empty).
  std::vector<std::string> cuptiLibraries;
  /// Warnings go to `warnings` as "<programName>: warning: --trace: ...".
  std::string programName = "train";
  std::FILE *warnings = stderr;
  /// Where "trace: wrote FILE" goes; nullptr: nowhere.
  std::FILE *messages = stdout;
};

/// The options of --trace and --trace-steps for `rank` of `worldSize`;
/// GPU activity is collected when `captureGpu` (a CUDA program).
TraceOptions traceOptionsFromFlags(const TrainOptions &flags,
                                   const std::string &programName,
                                   bool captureGpu, int32_t rank = 0,
                                   int32_t worldSize = 1);

class Trace {
public:
  /// A trace that records nothing (no --trace).
  Trace();
  /// Checks that the file can be written (throws TrainError now rather
  /// than after training) and opens CUPTI when asked; a CUPTI that cannot
  /// be used is one warning line, and the trace holds the host side only.
  explicit Trace(TraceOptions options);
  /// A run that ends without finish() (an error) still writes its file,
  /// marked as such; problems become warnings here, never exceptions.
  ~Trace();
  Trace(const Trace &) = delete;
  Trace &operator=(const Trace &) = delete;

  bool isEnabled() const { return !options.file.empty(); }
  /// Inside a traced step: what every recording call checks first.
  bool isRecording() const {
    return recording.load(std::memory_order_relaxed);
  }
  /// The file this rank writes ("" when off).
  const std::string &getPath() const { return path; }
  /// Why GPU activity is not in the trace ("" when it is, or not asked).
  const std::string &getGpuMissingReason() const { return gpuMissing; }

  /// Step boundaries (TraceStep calls these). Steps at or past `firstStep`
  /// start recording, the end of `lastStep` stops it.
  void beginStep(int64_t step);
  void endStep(int64_t step);

  /// Records [start, end] (host nanoseconds, now()) on the calling thread's
  /// track. TraceRange is the usual way in.
  void addRange(const char *name, int64_t start, int64_t end,
                std::vector<std::pair<std::string, std::string>> arguments);
  /// A point in time on the calling thread's track.
  void instant(const std::string &name);
  /// A sample of the named counter (non-finite values are skipped).
  void counter(const char *name, double value);

  /// Stops GPU collection and writes the file. Throws TrainError when it
  /// cannot be written. Later calls do nothing.
  void finish();

  /// The clock of every host event: steady_clock in nanoseconds.
  static int64_t now();

private:
  TraceOptions options;
  std::string path;
  std::atomic<bool> recording{false};
  bool finished = false;
  int64_t stepStart = 0;
  int64_t stepsTraced = 0;
  std::unique_ptr<GpuActivityCollector> gpu;
  bool gpuRecording = false;
  std::string gpuMissing;
  std::mutex mutex;
  std::vector<TraceEvent> events;
  /// Host threads: the one that made the trace, then the others in the
  /// order they first recorded (track = index).
  std::vector<std::thread::id> threads;

  bool isTracedStep(int64_t step) const;
  int64_t trackOfThisThread();
  void record(TraceEvent event);
  void startGpu();
  void stopGpu();
  void warn(const std::string &message) const;
  TraceDocument buildDocument();
};

/// Records the enclosing scope as a range when the trace is recording at
/// construction; a branch otherwise.
class TraceRange {
public:
  TraceRange(Trace &trace, const char *name)
      : trace(trace.isRecording() ? &trace : nullptr), name(name),
        start(this->trace ? Trace::now() : 0) {}
  ~TraceRange() {
    if (trace)
      trace->addRange(name, start, Trace::now(), std::move(arguments));
  }
  TraceRange(const TraceRange &) = delete;
  TraceRange &operator=(const TraceRange &) = delete;

  /// Shown in Perfetto's details of the range (e.g. the micro-batch).
  void addInteger(const char *key, int64_t value) {
    if (trace)
      arguments.emplace_back(key, std::to_string(value));
  }

private:
  Trace *trace;
  const char *name;
  int64_t start;
  std::vector<std::pair<std::string, std::string>> arguments;
};

/// Marks one optimizer step: beginStep on construction, endStep when the
/// scope ends (also when it ends by an exception).
class TraceStep {
public:
  TraceStep(Trace &trace, int64_t step) : trace(trace), step(step) {
    trace.beginStep(step);
  }
  ~TraceStep() { trace.endStep(step); }
  TraceStep(const TraceStep &) = delete;
  TraceStep &operator=(const TraceStep &) = delete;

private:
  Trace &trace;
  int64_t step;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_TRACE_H
