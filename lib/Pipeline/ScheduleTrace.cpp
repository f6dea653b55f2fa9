//===- ScheduleTrace.cpp - one step replayed chunk by chunk ---------------===//

#include "tessera/Pipeline/PipelineReport.h"
#include "tessera/Pipeline/Schedule.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <map>

namespace tessera::pipeline {

llvm::Expected<std::vector<TraceSlice>>
simulateSchedule(const PipelinePlan &plan) {
  std::vector<TraceSlice> slices;
  int64_t stages = static_cast<int64_t>(plan.stages.size());
  int64_t chunks = plan.schedule.kind == ScheduleKind::Interleaved
                       ? plan.schedule.virtualStages
                       : 1;
  int64_t lastChunk = stages * chunks - 1;
  llvm::Expected<std::vector<std::vector<ScheduledTask>>> order =
      scheduleTaskOrder(plan.schedule, stages, plan.microBatches);
  if (!order)
    return order.takeError();
  std::vector<size_t> next(stages, 0);
  std::vector<double> free(stages, 0);
  // Finish times of (forward?, chunk, micro-batch).
  std::map<std::tuple<bool, int64_t, int64_t>, double> done;

  bool progress = true;
  while (progress) {
    progress = false;
    for (int64_t device = 0; device < stages; ++device) {
      while (next[device] < (*order)[device].size()) {
        const ScheduledTask &task = (*order)[device][next[device]];
        std::optional<double> ready = 0.0;
        auto after = [&](bool forward, int64_t chunk) {
          auto found = done.find({forward, chunk, task.microBatch});
          if (found == done.end())
            ready.reset();
          else if (ready)
            ready = std::max(*ready, found->second);
        };
        if (task.forward && task.chunk > 0)
          after(true, task.chunk - 1);
        if (!task.forward)
          after(task.chunk == lastChunk, task.chunk == lastChunk
                                             ? task.chunk
                                             : task.chunk + 1);
        if (!ready)
          break;
        const StageCost &cost = plan.stages[device].cost;
        double start = std::max(free[device], *ready);
        double sendCount = (device > 0) + (device + 1 < stages);
        double send = sendCount > 0 ? cost.pointToPoint /
                                          (2.0 * chunks * sendCount)
                                    : 0;
        double tensorParallel = cost.tensorParallelCommunication / 2;
        std::string label =
            llvm::formatv("{0}{1}", task.forward ? "F" : "B", task.microBatch)
                .str();
        if (chunks > 1)
          label += llvm::formatv(".{0}", task.chunk / stages).str();
        double at = start;
        auto slice = [&](llvm::StringRef name, llvm::StringRef category,
                         double duration) {
          if (duration <= 0)
            return;
          slices.push_back(
              {static_cast<size_t>(device), name.str(), category.str(), at,
               duration});
          at += duration;
        };
        if (task.forward) {
          slice(label, "forward", (cost.forward + tensorParallel) / chunks);
        } else {
          slice("recompute " + label, "recompute", cost.recompute / chunks);
          slice(label, "backward", (cost.backward + tensorParallel) / chunks);
        }
        bool sends = task.forward ? task.chunk < lastChunk : task.chunk > 0;
        if (sends)
          slice(task.forward ? "send activation" : "send gradient", "send",
                send);
        done[{task.forward, task.chunk, task.microBatch}] = at;
        free[device] = at;
        ++next[device];
        progress = true;
      }
    }
  }
  for (int64_t device = 0; device < stages; ++device) {
    const StageCost &cost = plan.stages[device].cost;
    double at = free[device];
    slices.push_back({static_cast<size_t>(device), "gradient all-reduce",
                      "all-reduce", at, cost.gradientSync});
    slices.push_back({static_cast<size_t>(device), "optimizer", "optimizer",
                      at + cost.gradientSync, cost.optimizer});
  }
  return slices;
}

void writeChromeTrace(const PipelinePlan &plan,
                      const std::vector<TraceSlice> &slices,
                      llvm::raw_ostream &os) {
  llvm::json::Array events;
  for (auto [index, stage] : llvm::enumerate(plan.stages))
    events.push_back(llvm::json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", 0},
        {"tid", static_cast<int64_t>(index)},
        {"args",
         llvm::json::Object{
             {"name", llvm::formatv("stage {0} (devices {1}-{2}, {3})", index,
                                    stage.firstDevice,
                                    stage.firstDevice +
                                        stage.submesh.devices() - 1,
                                    stage.cost.intraOpPlan())
                          .str()}}}});
  for (const TraceSlice &slice : slices)
    events.push_back(llvm::json::Object{
        {"name", slice.name},
        {"cat", slice.category},
        {"ph", "X"},
        {"pid", 0},
        {"tid", static_cast<int64_t>(slice.stage)},
        {"ts", slice.start * 1e6},
        {"dur", slice.duration * 1e6}});
  os << llvm::formatv(
      "{0:2}\n",
      llvm::json::Value(llvm::json::Object{
          {"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           llvm::json::Object{{"schedule", plan.schedule.name()},
                              {"microBatches", plan.microBatches},
                              {"predictedStepSeconds", plan.stepSeconds}}}}));
}

} // namespace tessera::pipeline
