//===- StageZero.h - ZeRO-1 inside a pipeline's stage mesh ------*- C++ -*-===//
//
// A pipeline over a stage mesh with a data-parallel axis (PP x DP, PP x DP
// x TP) holds each stage's optimizer state on every rank of the stage's dp
// group: the same masters and moments D times. ZeRO-1 there (--zero 1, or
// the program's zero_stage: the pipeline search's plan) shards them over
// the group, reusing the data-parallel ZeRO-1 (DataParallel.h) on the
// stage's dp axis communicator:
//
// - the one state layout both parts share: the device's program (its
//   parameters' blocks, the other devices' at no elements) planned by
//   planDataParallel for D shards, its OWNED parameters (PipelineLayout)
//   the ones the shard covers (DataParallelPlan::updated), bucketed apart
//   from the parameters it only reads (a tied embedding's head), so that
//   each rank's masters and moments are 1/D of its stage's owned state
//   within padding;
// - the step: the f32 sums over the micro-batches, the tied embedding's
//   parts added and other mesh axes summed (PipelineStep), are
//   reduce-scattered over the dp group once a step instead of all-reduced
//   (DataParallelGradients::finishStep); the norm counts each rank's shard
//   (the dp coordinate is no replica any more: countedInNorm at dp 0);
//   AdamW runs on the shard; the updated f32 mirrors the stage functions
//   read are all-gathered over the group before the owners send them to
//   their other readers;
// - checkpoints stay the whole model's: every rank gathers its group's
//   state (every rank of a pipeline takes part in gathering from owners
//   and blocks), so a run resumes on any layout.
//
// ZeRO-2/3 inside a stage mesh are refused: a stage's gradients and weights
// are written and read by chunk calls, which announce no buckets.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_STAGEZERO_H
#define TESSERA_RUNTIME_TRAIN_STAGEZERO_H

#include "DataParallel.h"
#include "Flags.h"
#include "PipelineParallel.h"

#include <cstdint>

namespace tessera::train {

/// The ZeRO stage a pipelined program runs with: --zero, else the
/// program's zero_stage. Throws TrainError naming --zero (or the program)
/// unless it is 0, or 1 over a stage mesh whose data-parallel axis every
/// gradient is pending over.
int32_t pipelineZeroStage(const tessera_program &program,
                          const TrainOptions &options);

/// The stage mesh's axis ZeRO-1 shards over: the one every parameter's
/// gradient is pending over (program.h's gradient_partial_axes: the dp
/// replicas' sum), or -1 when there is none.
int32_t stageDataParallelAxis(const tessera_program &program);

/// Device `device`'s plan for the `ranks` ranks of its dp group: its
/// owned parameters sharded, the f32 sums over the step's micro-batches
/// reduce-scattered once a step.
DataParallelPlan planStageZero(const PipelineLayout &layout, int32_t device,
                               const TrainOptions &options, int32_t ranks);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_STAGEZERO_H
