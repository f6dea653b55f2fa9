//===- StageZero.cpp - ZeRO-1 inside a pipeline's stage mesh --------------===//

#include "StageZero.h"

#include "TrainError.h"


namespace tessera::train {

int32_t stageDataParallelAxis(const tessera_program &program) {
  const tessera_pipeline *pipeline = program.pipeline;
  if (!pipeline || !pipeline->gradient_partial_axes ||
      program.parameter_count == 0)
    return -1;
  for (int32_t axis = 0; axis < program.mesh_axis_count; ++axis) {
    bool everyGradient = true;
    for (int32_t p = 0; p < program.parameter_count && everyGradient; ++p)
      everyGradient = ((pipeline->gradient_partial_axes[p] >> axis) & 1) != 0;
    if (everyGradient)
      return axis;
  }
  return -1;
}

int32_t pipelineZeroStage(const tessera_program &program,
                          const TrainOptions &options) {
  const bool flag = options.zeroStage >= 0;
  const int32_t stage = flag ? options.zeroStage : program.zero_stage;
  if (stage == 0)
    return 0;
  const std::string what =
      flag ? "--zero " + std::to_string(stage)
           : "the program's ZeRO stage " + std::to_string(stage);
  if (program.mesh_axis_count == 0)
    fail(what + ": the driver's ZeRO shards a stage's optimizer state over "
                "its data-parallel ranks, and this pipeline runs one rank a "
                "stage; each device already holds only its own chunks' "
                "optimizer state (run with --zero 0, or compile with "
                "--mesh M --strategy dp|dp-tp)");
  if (stageDataParallelAxis(program) < 0)
    fail(what + ": this pipeline's stage mesh has no data-parallel axis "
                "(no axis every gradient is summed over) to shard the "
                "optimizer state over (run with --zero 0, or compile with "
                "--strategy dp|dp-tp)");
  if (stage != 1)
    fail(what + ": inside a pipeline's stage mesh the driver shards the "
                "optimizer state (ZeRO-1) only; a stage's gradients and "
                "weights are written and read by its chunk calls whole (run "
                "with --zero 0 or 1)");
  return 1;
}

DataParallelPlan planStageZero(const PipelineLayout &layout, int32_t device,
                               const TrainOptions &options, int32_t ranks) {
  const tessera_program &program = layout.deviceProgram(device);
  // Planned as planDataParallel plans ZeRO-1, but with the owned
  // parameters bucketed apart from those the device only reads (or holds a
  // gradient part of): no rank's block mixes them, so each rank's shard of
  // the owned state is 1/ranks of it.
  std::vector<int32_t> groups;
  for (int32_t p = 0; p < program.parameter_count; ++p)
    groups.push_back(elementCount(program.parameters[p]) == 0 ? -1
                     : layout.ownerOf(p) == device          ? 0
                                                            : 1);
  DataParallelPlan plan = planShardedGroups(program, groups, options, ranks);
  // A pipeline's step accumulates its micro-batches in f32 (its dp sums
  // included), even with one: those sums are what is reduce-scattered,
  // after the step's tasks.
  plan.reduceAccumulators = true;
  plan.updated = layout.ownedBy(device);
  return plan;
}

} // namespace tessera::train
