//===- PipelineReport.h - the plan as text and as a Chrome trace -*- C++ -*-===//
//
// printPipelinePlan writes what `tesserac --explain` shows for a pipeline
// plan: the stages (layers, devices, intra-op plan, remat), the schedule
// and its bubble, memory per device by category, the step time by part and
// the predicted throughput. FLOPs per GPU are given two ways: model FLOPs,
// 72 B s l h^2 (1 + s/6h + V/12lh) (6 N tokens plus attention, no
// recomputation credited), and Megatron-LM's formula 96 B s l h^2 (1 + s/6h
// + V/16lh), which counts a full recomputation of the forward and is the
// one behind its published 140 TFLOP/s per GPU for GPT-3 175B.
//
// The trace (simulateSchedule) replays one step task by task: each device
// row of a stage runs its forward and backward chunks in the schedule's
// order (GPipe, 1F1B, Megatron's interleaved order), a chunk starting when
// the device is free and its input has arrived; then the gradient
// all-reduce and the optimizer step. Its length checks the closed form of
// Schedule.h.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINE_PIPELINEREPORT_H
#define TESSERA_PIPELINE_PIPELINEREPORT_H

#include "tessera/Pipeline/InterOpSearch.h"

#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace tessera::pipeline {

struct TraceSlice {
  size_t stage = 0;
  /// "F3.1" (micro-batch 3, chunk 1), "B3", "recompute", "send", ...
  std::string name;
  /// forward, backward, recompute, send, all-reduce, optimizer.
  std::string category;
  double start = 0;
  double duration = 0;
};

/// The slices of one step; the makespan is the largest end. Errors:
/// scheduleTaskOrder's (a plan the search did not make).
llvm::Expected<std::vector<TraceSlice>>
simulateSchedule(const PipelinePlan &plan);

/// Chrome/Perfetto trace-event JSON of `slices`, one row per stage.
void writeChromeTrace(const PipelinePlan &plan,
                      const std::vector<TraceSlice> &slices,
                      llvm::raw_ostream &os);

/// Megatron-LM's FLOPs per step with full recomputation (96 B s l h^2 ...)
/// and model FLOPs without (72 B s l h^2 ...).
double megatronFlopsPerStep(const ProgramProfile &profile,
                            int64_t globalBatch);
double modelFlopsPerStep(const ProgramProfile &profile, int64_t globalBatch);

void printPipelinePlan(const PipelinePlan &plan, const ProgramProfile &profile,
                       const cost::Cluster &cluster,
                       const StageCostOracle &oracle, int64_t globalBatch,
                       llvm::StringRef title, llvm::raw_ostream &os);

} // namespace tessera::pipeline

#endif // TESSERA_PIPELINE_PIPELINEREPORT_H
