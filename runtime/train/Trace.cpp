//===- Trace.cpp - Recording a run's timeline -----------------------------===//
//
// Design: events are appended to one vector under a mutex (a few hundred
// host events and some thousands of GPU ones per traced step; the lock is
// uncontended but lets a comm thread record too) and sorted only when the
// file is written. A range is recorded when it ends, as one complete
// event, so a run that fails mid-range leaves no unmatched begin in the
// file.
//
//===----------------------------------------------------------------------===//

#include "Trace.h"

#include "Flags.h"
#include "TraceCupti.h"
#include "TraceFile.h"
#include "TraceJson.h"
#include "TrainError.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace tessera::train {
namespace {

/// An event of no duration stamped now, on the track record() gives it.
TraceEvent pointEvent(TraceEvent::Kind kind, std::string name,
                      const char *category) {
  TraceEvent event;
  event.kind = kind;
  event.name = std::move(name);
  event.category = category;
  event.startNanoseconds = Trace::now();
  return event;
}

} // namespace

int64_t Trace::now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TraceOptions traceOptionsFromFlags(const TrainOptions &flags,
                                   const std::string &programName,
                                   bool captureGpu, int32_t rank,
                                   int32_t worldSize) {
  TraceOptions options;
  options.file = flags.traceFile;
  options.firstStep = flags.traceFirstStep;
  options.lastStep = flags.traceLastStep;
  options.rank = rank;
  options.worldSize = worldSize;
  options.captureGpu = captureGpu;
  options.programName = programName;
  return options;
}

Trace::Trace() = default;

Trace::Trace(TraceOptions traceOptions) : options(std::move(traceOptions)) {
  if (!isEnabled())
    return;
  if (options.firstStep < 1 || options.lastStep < options.firstStep)
    fail("--trace-steps: the steps " + std::to_string(options.firstStep) +
         ".." + std::to_string(options.lastStep) + " are not a range of steps");
  path = traceFileForRank(options.file, options.rank, options.worldSize);
  checkTraceFileWritable(path);
  // The driver's thread makes the trace: it is "host", whichever thread
  // happens to record first.
  threads.push_back(std::this_thread::get_id());
  if (!options.captureGpu)
    return;
  gpu = openCuptiCollector(options.cuptiLibraries.empty()
                               ? defaultCuptiLibraries()
                               : options.cuptiLibraries,
                           gpuMissing);
  if (!gpu)
    warn("GPU activity will be missing from the trace (host ranges only): " +
         gpuMissing);
}

Trace::~Trace() {
  if (!isEnabled() || finished)
    return;
  try {
    record(pointEvent(TraceEvent::Kind::Instant, "run ended with an error",
                      "host"));
    finish();
  } catch (const std::exception &error) {
    warn(error.what());
  } catch (...) {
    warn("writing the trace of a failed run failed");
  }
}

bool Trace::isTracedStep(int64_t step) const {
  return step >= options.firstStep && step <= options.lastStep;
}

void Trace::beginStep(int64_t step) {
  if (!isEnabled() || finished || !isTracedStep(step))
    return;
  if (gpu && !gpuRecording)
    startGpu();
  stepStart = now();
  recording.store(true, std::memory_order_relaxed);
}

void Trace::endStep(int64_t step) {
  if (!isRecording())
    return;
  TraceEvent event;
  event.name = "step " + std::to_string(step);
  event.category = "step";
  event.startNanoseconds = stepStart;
  event.durationNanoseconds = now() - stepStart;
  event.addInteger("step", step);
  record(std::move(event));
  ++stepsTraced;
  if (step >= options.lastStep) {
    recording.store(false, std::memory_order_relaxed);
    stopGpu();
  }
}

void Trace::addRange(
    const char *name, int64_t start, int64_t end,
    std::vector<std::pair<std::string, std::string>> arguments) {
  TraceEvent event;
  event.name = name;
  event.category = "host";
  event.startNanoseconds = start;
  event.durationNanoseconds = std::max<int64_t>(end - start, 0);
  event.arguments = std::move(arguments);
  record(std::move(event));
}

void Trace::instant(const std::string &name) {
  if (!isRecording())
    return;
  record(pointEvent(TraceEvent::Kind::Instant, name, "host"));
}

void Trace::counter(const char *name, double value) {
  if (!isRecording() || !std::isfinite(value))
    return;
  TraceEvent event = pointEvent(TraceEvent::Kind::Counter, name, "counter");
  event.addNumber("value", value);
  record(std::move(event));
}

int64_t Trace::trackOfThisThread() {
  std::thread::id self = std::this_thread::get_id();
  auto found = std::find(threads.begin(), threads.end(), self);
  if (found != threads.end())
    return kHostTrack + (found - threads.begin());
  threads.push_back(self);
  return kHostTrack + static_cast<int64_t>(threads.size()) - 1;
}

void Trace::record(TraceEvent event) {
  std::lock_guard<std::mutex> lock(mutex);
  event.track = trackOfThisThread();
  events.push_back(std::move(event));
}

void Trace::startGpu() {
  std::string refused = gpu->start();
  if (refused.empty()) {
    gpuRecording = true;
    return;
  }
  gpuMissing = refused;
  gpu.reset();
  warn("GPU activity will be missing from the trace (host ranges only): " +
       gpuMissing);
}

void Trace::stopGpu() {
  if (!gpuRecording)
    return;
  gpu->stop();
  gpuRecording = false;
}

void Trace::warn(const std::string &message) const {
  if (!options.warnings)
    return;
  std::fflush(options.messages ? options.messages : stdout);
  std::fprintf(options.warnings, "%s: warning: --trace: %s\n",
               options.programName.c_str(), message.c_str());
  std::fflush(options.warnings);
}

TraceDocument Trace::buildDocument() {
  TraceDocument document;
  document.rank = options.rank;
  {
    std::lock_guard<std::mutex> lock(mutex);
    document.events = std::move(events);
    events.clear();
    for (size_t i = 0; i < threads.size(); ++i)
      document.trackNames[kHostTrack + static_cast<int64_t>(i)] =
          i == 0 ? "host" : "host thread " + std::to_string(i);
  }
  std::string gpuActivity = "not collected (a host program)";
  if (gpu) {
    gpu->collect(document);
    gpuActivity = gpu->describe();
    if (uint64_t dropped = gpu->droppedRecords())
      warn(std::to_string(dropped) +
           " GPU activity records were dropped by CUPTI");
  } else if (!gpuMissing.empty()) {
    gpuActivity = "missing: " + gpuMissing;
  }
  std::string steps = std::to_string(options.firstStep) + ":";
  if (options.lastStep != kTraceToLastStep)
    steps += std::to_string(options.lastStep);
  TraceEvent info; // only its argument encoders
  info.addInteger("rank", options.rank);
  info.addInteger("world_size", options.worldSize);
  info.addString("steps", steps);
  info.addInteger("steps_traced", stepsTraced);
  info.addString("gpu_activity", gpuActivity);
  info.addString("clock", "host steady_clock (CLOCK_MONOTONIC), shared by "
                          "the ranks of one machine");
  document.otherData = std::move(info.arguments);
  return document;
}

void Trace::finish() {
  if (!isEnabled() || finished)
    return;
  finished = true;
  recording.store(false, std::memory_order_relaxed);
  stopGpu();
  if (stepsTraced == 0)
    warn("no step of --trace-steps ran, so the trace holds no steps");
  writeTraceFile(path, renderChromeTrace(buildDocument()));
  if (options.messages)
    std::fprintf(options.messages, "trace: wrote %s\n", path.c_str());
}

} // namespace tessera::train
