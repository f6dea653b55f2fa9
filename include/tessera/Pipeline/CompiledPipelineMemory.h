//===- CompiledPipelineMemory.h - one device of a compiled pipeline -*- C++ -*-===//
//
// What each device (each rank of a stage mesh) holds while a pipelined
// training executable runs, read from the program the lowering gets: the
// module after tess-split-pipeline-stages and tess-lowering-preparation, its
// chunk functions (@stage{c}_prepare, _forward, _backward on device
// tess.pipeline_device) and its #tess.plan (schedule, micro-batches, the
// stage mesh, ZeRO-1). It is StepMemory.h's analysis for the pipeline's
// driver (runtime/train/PipelineParallel.cpp), term by term:
// - one arena, which every chunk function of the device shares (they run
//   one after another on one stream, and an arena holds only a call's
//   temporaries): the largest of their arenas, each planned by the
//   lowering's planner (planFunctionArena);
// - the prepare's residents, one set per chunk;
// - the messages: one set of sent activations and activation gradients per
//   chunk, and each received kind in as many slots as the device's task
//   order, run against its peers' send orders, holds at once;
// - the stash of saved values: as many slots per chunk as its forwards run
//   ahead of their backwards in the device's order (scheduleTaskOrder: a
//   micro-batch count under GPipe, stages - device under 1F1B);
// - the training state of the parameters the device holds (reads, owns or
//   holds a gradient part of), each padded to ParameterLayout's 128-element
//   slices, the masters read as f32 (a chunk reads no compute copy: its
//   casts are residents); the f32 accumulators when the step sums several
//   micro-batches, parts of a tied gradient or a stage mesh's replicas;
//   under ZeRO-1 the masters and moments as the dp group's shard of the
//   parameters the device owns (updates), beside an f32 mirror of all it
//   holds;
// - the owner's buffer for other stages' gradient parts, the micro-batches'
//   tokens and targets, the buffers, and the padded-GEMM scratch (CUDA).
// Not included, as for one device: the CUDA context and cuBLASLt's
// workspace; the bucket padding of a ZeRO-1 shard (at most a slice a
// bucket).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINE_COMPILEDPIPELINEMEMORY_H
#define TESSERA_PIPELINE_COMPILEDPIPELINEMEMORY_H

#include "tessera/Analysis/StepMemory.h"
#include "tessera/Pipeline/InterOpSearch.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <vector>

namespace tessera::pipeline {

struct PipelineDeviceMemory {
  int64_t device = 0;
  /// The device's one arena, which all its chunk functions share: the
  /// largest of their arenas.
  int64_t arenaBytes = 0;
  int64_t residentBytes = 0;
  /// Sent activations and activation gradients, and the receive slots.
  int64_t messageBytes = 0;
  /// The stash: saved values times the slots of each chunk.
  int64_t savedBytes = 0;
  /// The most micro-batches a chunk of the device has in flight.
  int64_t savedSlots = 0;
  /// The micro-batches' tokens and targets (every slot, and the working
  /// one).
  int64_t inputBytes = 0;
  /// The owner's f32 room for other stages' parts of a gradient.
  int64_t partBytes = 0;
  int64_t gemmScratchBytes = 0;
  /// The state of the held parameters; computeCopies is ZeRO-1's f32
  /// mirror.
  TrainingStateBytes state;

  int64_t totalBytes() const {
    return arenaBytes + residentBytes + messageBytes + savedBytes +
           inputBytes + partBytes + gemmScratchBytes + state.total();
  }
};

/// Every device's memory of the stage-split, prepared `module` (see the
/// file comment). Fails with a diagnostic on a module without chunk
/// functions or a pipelined #tess.plan, or an arena that cannot be planned.
mlir::FailureOr<std::vector<PipelineDeviceMemory>>
estimatePipelineMemory(mlir::ModuleOp module);

/// The largest device's total.
int64_t largestDeviceBytes(const std::vector<PipelineDeviceMemory> &devices);

/// The block's heading ("Device memory of the compiled pipeline ...", with
/// the device's capacity where `deviceBytes` is positive), then one line
/// per device: its total and what it is made of.
void printPipelineMemory(const std::vector<PipelineDeviceMemory> &devices,
                         llvm::raw_ostream &os, double deviceBytes = 0);

/// The stage model's prediction for each device of `plan` (its stage's
/// memory by the same terms: training state, working set, stash of the
/// micro-batches in flight, messages, inputs), beside `devices`, the
/// plan's compiled program, with how far the compiled total is from it:
/// what the search believed against what decided the fit.
void printStageModelMemory(const PipelinePlan &plan,
                           const std::vector<PipelineDeviceMemory> &devices,
                           llvm::raw_ostream &os);

} // namespace tessera::pipeline

#endif // TESSERA_PIPELINE_COMPILEDPIPELINEMEMORY_H
