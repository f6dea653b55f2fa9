//===- Schedule.cpp - bubble, in-flight activations, pipelined time -------===//

#include "tessera/Pipeline/Schedule.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace tessera::pipeline {

std::string Schedule::name() const {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneForwardOneBackward:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return llvm::formatv("interleaved:{0}", virtualStages).str();
  }
  return "unknown";
}

llvm::Expected<Schedule> parseSchedule(llvm::StringRef text) {
  Schedule schedule;
  if (text == "gpipe") {
    schedule.kind = ScheduleKind::GPipe;
    return schedule;
  }
  if (text == "1f1b")
    return schedule;
  auto [name, chunks] = text.split(':');
  if (name == "interleaved") {
    schedule.kind = ScheduleKind::Interleaved;
    schedule.virtualStages = 2;
    if (text.contains(':') &&
        (chunks.getAsInteger(10, schedule.virtualStages) ||
         schedule.virtualStages < 2))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "--schedule " + text +
              ": the chunks per device must be an integer >= 2, e.g. "
              "interleaved:2");
    return schedule;
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--schedule " + text +
                                     ": expected gpipe, 1f1b or "
                                     "interleaved[:V]");
}

double StashDepths::inFlight(double kept, double embeddingKept,
                             double headKept) const {
  if (kept <= 0)
    return static_cast<double>(slots()) / chunks;
  double own = (embedding > 0 ? embeddingKept : 0) + (head > 0 ? headKept : 0);
  double perChunk = (kept - own) / chunks;
  double bytes = layers * perChunk + embedding * (perChunk + embeddingKept) +
                 head * (perChunk + headKept);
  return bytes / kept;
}

StashDepths stashDepths(const Schedule &schedule, int64_t stages,
                        int64_t stage, int64_t microBatches,
                        bool embeddingSavesOwn, bool headSavesOwn) {
  StashDepths depths;
  switch (schedule.kind) {
  case ScheduleKind::GPipe:
    depths.layers = microBatches;
    return depths;
  case ScheduleKind::OneForwardOneBackward:
    depths.layers = std::min(microBatches, stages - stage);
    return depths;
  case ScheduleKind::Interleaved: {
    int64_t chunks = schedule.virtualStages;
    depths.chunks = chunks;
    if (microBatches % stages != 0) {
      // No such order (scheduleTaskOrder refuses it): Megatron's peak.
      depths.layers =
          std::min(2 * (stages - stage - 1) + (chunks - 1) * stages + 1,
                   microBatches * chunks);
      return depths;
    }
    std::vector<ScheduledTask> tasks =
        deviceTaskOrder(schedule, stages, stage, microBatches);
    int64_t last = stages * chunks - 1;
    std::vector<int64_t> layers;
    for (int64_t local = 0; local < chunks; ++local) {
      int64_t chunk = local * stages + stage;
      if (chunk == 0 && embeddingSavesOwn)
        depths.embedding = stashSlots(tasks, {chunk});
      else if (chunk == last && headSavesOwn)
        depths.head = stashSlots(tasks, {chunk});
      else
        layers.push_back(chunk);
    }
    depths.layers = stashSlots(tasks, layers);
    return depths;
  }
  }
  depths.layers = microBatches;
  return depths;
}

double inFlightMicroBatches(const Schedule &schedule, int64_t stages,
                            int64_t stage, int64_t microBatches,
                            bool embeddingSavesOwn, bool headSavesOwn) {
  StashDepths depths = stashDepths(schedule, stages, stage, microBatches,
                                   embeddingSavesOwn, headSavesOwn);
  return static_cast<double>(depths.slots()) / depths.chunks;
}

double pipelinedSeconds(const Schedule &schedule,
                        llvm::ArrayRef<double> stageSeconds,
                        int64_t microBatches) {
  double sum = 0, slowest = 0;
  for (double seconds : stageSeconds) {
    sum += seconds;
    slowest = std::max(slowest, seconds);
  }
  double chunks = schedule.kind == ScheduleKind::Interleaved
                      ? static_cast<double>(schedule.virtualStages)
                      : 1.0;
  // Every device runs m micro-batches at its own pace; the slowest paces
  // the steady state, and filling/draining adds the other stages' chunks:
  // with equal stages m t + (p - 1) t / v.
  return sum / chunks + (microBatches - 1.0 / chunks) * slowest;
}

double bubbleFraction(const Schedule &schedule, int64_t stages,
                      int64_t microBatches) {
  double chunks = schedule.kind == ScheduleKind::Interleaved
                      ? static_cast<double>(schedule.virtualStages)
                      : 1.0;
  return (stages - 1) / (chunks * microBatches);
}

llvm::Expected<std::vector<std::vector<ScheduledTask>>>
scheduleTaskOrder(const Schedule &schedule, int64_t stages,
                  int64_t microBatches) {
  int64_t chunks = schedule.kind == ScheduleKind::Interleaved
                       ? schedule.virtualStages
                       : 1;
  if (stages < 1 || microBatches < 1 || chunks < 1)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "schedule: stages, micro-batches and chunks must be at least 1");
  if (chunks > 1 && microBatches % stages != 0)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "schedule: interleaved 1F1B runs micro-batches in groups of the "
        "stage count; " +
            std::to_string(microBatches) + " micro-batches do not divide by " +
            std::to_string(stages) + " stages");
  std::vector<std::vector<ScheduledTask>> order(stages);
  for (int64_t device = 0; device < stages; ++device)
    order[device] = deviceTaskOrder(schedule, stages, device, microBatches);
  return order;
}

int64_t stashSlots(llvm::ArrayRef<ScheduledTask> tasks,
                   llvm::ArrayRef<int64_t> chunks) {
  int64_t inFlight = 0, most = 0;
  for (const ScheduledTask &task : tasks)
    if (llvm::is_contained(chunks, task.chunk)) {
      inFlight += task.forward ? 1 : -1;
      most = std::max(most, inFlight);
    }
  return most;
}

std::vector<ScheduledTask> deviceTaskOrder(const Schedule &schedule,
                                           int64_t stages, int64_t device,
                                           int64_t microBatches) {
  int64_t chunks = schedule.kind == ScheduleKind::Interleaved
                       ? schedule.virtualStages
                       : 1;
  std::vector<ScheduledTask> forwards, backwards;
  // Megatron's order: micro-batches in groups of p, chunk by chunk; the
  // backwards visit the chunks in reverse.
  for (int64_t k = 0; k < microBatches * chunks; ++k) {
    int64_t chunk = (k % (stages * chunks)) / stages;
    int64_t microBatch =
        chunks == 1 ? k : (k / (stages * chunks)) * stages + k % stages;
    forwards.push_back({true, chunk * stages + device, microBatch});
    backwards.push_back(
        {false, (chunks - 1 - chunk) * stages + device, microBatch});
  }
  int64_t total = static_cast<int64_t>(forwards.size());
  int64_t warmup = total;
  if (schedule.kind == ScheduleKind::OneForwardOneBackward)
    warmup = std::min(stages - device - 1, total);
  else if (schedule.kind == ScheduleKind::Interleaved)
    warmup = std::min((stages - device - 1) * 2 + (chunks - 1) * stages,
                      total);
  std::vector<ScheduledTask> tasks;
  tasks.reserve(static_cast<size_t>(2 * total));
  int64_t nextForward = 0, nextBackward = 0;
  for (; nextForward < warmup; ++nextForward)
    tasks.push_back(forwards[nextForward]);
  while (nextForward < total) {
    tasks.push_back(forwards[nextForward++]);
    tasks.push_back(backwards[nextBackward++]);
  }
  while (nextBackward < total)
    tasks.push_back(backwards[nextBackward++]);
  return tasks;
}

} // namespace tessera::pipeline
