//===- Schedule.h - GPipe, 1F1B and interleaved 1F1B: time and memory -*- C++ -*-===//
//
// With p stages whose per-micro-batch times (forward + backward) are t_s,
// and m micro-batches:
//
//   GPipe, 1F1B      T = sum_s t_s + (m - 1) max_s t_s
//   interleaved (v)  T = sum_s t_s / v + (m - 1/v) max_s t_s
//
// The first term is the pipeline filling and draining; with equal stages it
// is the bubble (p - 1) t for 1F1B and (p - 1) t / v interleaved, i.e.
// (p - 1) / m and (p - 1) / (v m) of the ideal m t (Narayanan et al.,
// SC'21). Interleaving splits each device's layers into v chunks placed
// round-robin, so each micro-batch crosses v times as many stage
// boundaries: the caller prices v times the point-to-point traffic.
//
// Activations in flight on stage s (0-based), in micro-batches of the whole
// stage: GPipe m (every forward before any backward); 1F1B min(m, p - s);
// interleaved, Megatron-LM's warm-up count in chunks, 2 (p - s - 1) +
// (v - 1) p, plus the one in its steady state, each chunk 1/v of the stage.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINE_SCHEDULE_H
#define TESSERA_PIPELINE_SCHEDULE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::pipeline {

enum class ScheduleKind { GPipe, OneForwardOneBackward, Interleaved };

struct Schedule {
  ScheduleKind kind = ScheduleKind::OneForwardOneBackward;
  /// Chunks per device (interleaved only; 1 otherwise).
  int64_t virtualStages = 1;

  /// "gpipe", "1f1b", "interleaved:2".
  std::string name() const;
};

/// Parses `gpipe`, `1f1b`, `interleaved` (2 chunks) or `interleaved:V`.
llvm::Expected<Schedule> parseSchedule(llvm::StringRef text);

/// The stash of one device as the driver keeps it
/// (runtime/train/PipelineParallel.cpp's StashPool): one pool per saved
/// layout among the device's chunks, each slot one chunk's saved values of
/// one micro-batch, each pool as deep as its chunks' peak together.
/// Interleaved, the layer-only chunks share a pool; the program's first
/// chunk (the embedding's) and last (the head's) have their own where they
/// save values the layers do not. GPipe and 1F1B hold one chunk a device:
/// one pool.
struct StashDepths {
  /// The device's chunks (v interleaved, else 1).
  int64_t chunks = 1;
  /// Slots of the pool the layer-only chunks share.
  int64_t layers = 0;
  /// Slots of the embedding's and the head's chunk's own pools; 0 where the
  /// chunk is not on this device or shares the layers' pool.
  int64_t embedding = 0, head = 0;

  int64_t slots() const { return layers + embedding + head; }
  /// The stash as a multiple of the stage's kept bytes per micro-batch,
  /// `kept`, of which the program's first unit keeps `embeddingKept` and its
  /// last `headKept`: the layers' share is cut into equal chunks, and each
  /// pool holds its chunk's layers plus its edge unit's own values.
  double inFlight(double kept, double embeddingKept = 0,
                  double headKept = 0) const;
};

/// The stash pools on stage `stage` of `stages`: GPipe m slots, 1F1B
/// min(m, p - s); interleaved, each pool's peak walked over the device's
/// task order (deviceTaskOrder).
StashDepths stashDepths(const Schedule &schedule, int64_t stages,
                        int64_t stage, int64_t microBatches,
                        bool embeddingSavesOwn = true,
                        bool headSavesOwn = true);

/// Activations in flight on stage `stage` of `stages`, in micro-batches,
/// with the chunks' kept values equal: stashDepths' slots over v.
double inFlightMicroBatches(const Schedule &schedule, int64_t stages,
                            int64_t stage, int64_t microBatches,
                            bool embeddingSavesOwn = true,
                            bool headSavesOwn = true);

/// T above, from the per-micro-batch stage times.
double pipelinedSeconds(const Schedule &schedule,
                        llvm::ArrayRef<double> stageSeconds,
                        int64_t microBatches);

/// The bubble as a fraction of the ideal time with equal stages:
/// (p - 1) / (v m).
double bubbleFraction(const Schedule &schedule, int64_t stages,
                      int64_t microBatches);

/// One forward or backward of one pipeline stage (chunk) for one
/// micro-batch. Chunk c runs on device c mod p.
struct ScheduledTask {
  bool forward = true;
  int64_t chunk = 0;
  int64_t microBatch = 0;
};

/// Each device's tasks in the schedule's order (Megatron-LM's): GPipe all
/// forwards then all backwards; 1F1B p - s - 1 warm-up forwards on device s,
/// then one forward and one backward alternately, then the remaining
/// backwards; interleaved the same over chunks, micro-batches in groups of
/// p chunk by chunk, with 2 (p - s - 1) + (v - 1) p warm-up forwards.
/// Errors: interleaved needs a micro-batch count that divides by p.
llvm::Expected<std::vector<std::vector<ScheduledTask>>>
scheduleTaskOrder(const Schedule &schedule, int64_t stages,
                  int64_t microBatches);

/// Device `device`'s tasks of scheduleTaskOrder (its arguments checked).
std::vector<ScheduledTask> deviceTaskOrder(const Schedule &schedule,
                                           int64_t stages, int64_t device,
                                           int64_t microBatches);

/// The most micro-batches of `chunks` whose forward has run and backward
/// not yet, together, in `tasks` (a device's order): the slots of the stash
/// those chunks share.
int64_t stashSlots(llvm::ArrayRef<ScheduledTask> tasks,
                   llvm::ArrayRef<int64_t> chunks);

} // namespace tessera::pipeline

#endif // TESSERA_PIPELINE_SCHEDULE_H
