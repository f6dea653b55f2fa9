//===- MeshZero.h - per-parameter ZeRO-1/2 of a mesh program ----*- C++ -*-===//
//
// The whole-mesh search (tesserac --mesh/--devices with --cluster) picks a
// ZeRO stage per parameter (#tess.plan's `zero = mixed`). ZeRO-0 and ZeRO-3
// are the partitioned step's own: a ZeRO-0 gradient is all-reduced inside
// the step, a ZeRO-3 weight is split over its ZeRO axes (tessera_tensor_
// split) and gathered inside the step. A ZeRO-1 or ZeRO-2 parameter keeps
// its weight whole on those axes but not its optimizer state, which no
// step can hold: the step leaves its gradient a pending partial sum over
// them (program.h's gradient_partial_axes), and the driver runs its
// data-parallel ZeRO (DataParallel.h) on the axes' communicator for those
// parameters only (planShardedGroups: they are group 0, every other
// parameter kUnreduced, in no bucket):
//
// - ZeRO-1 (a plan whose pending parameters are all ZeRO-1, or --zero 1):
//   the pending gradients are written whole and reduce-scattered over the
//   group, once per micro-batch (one a step) or once a step over their f32
//   sums;
// - ZeRO-2 (a plan with any ZeRO-2 parameter, program.h's
//   gradient_zero_stages, or --zero 2): as the search prices it, a rank
//   holds only its shard of the ZeRO-2 gradients. The step writes them
//   whole into the ring of bucket places (gradient_ring.h), and each bucket
//   is reduce-scattered as the step announces its last gradient and folded
//   into the rank's compact gradient shard, every micro-batch (added in
//   f32 over several). The complete gradients (kUnreduced) are whole
//   pieces of that shard: the step writes them there itself, or, summing
//   micro-batches, into places past the ring's that the backend adds into
//   the shard after each micro-batch. The plan's ZeRO-1 parameters, if it
//   has any, keep their gradients whole, as the search prices them: their
//   buckets (the layout never mixes stages in a bucket) have no place in
//   the ring but one past the shard in its buffer, written as the complete
//   gradients are, and are reduce-scattered in place as ZeRO-1 does (as
//   the step writes them, or once a step over their f32 sums), each rank
//   updating its block of them;
// - a gradient the step computes whole and alike on every rank of the
//   group (its layer's compute replicated there: program.h's
//   gradient_whole) is no partial sum: its buckets (never mixed with
//   partial sums) are not reduced, each rank taking its block of them
//   where the reduce-scatter would have left it, at either stage (under
//   --zero 0 it is left as it is);
// - each rank of the group holds 1/N of their masters and moments and
//   updates that shard; the updated weights the step reads are
//   all-gathered over the group after AdamW;
// - every other parameter's block is updated whole by every rank, as
//   without ZeRO;
// - the norm counts a pending parameter's shard on every rank of the group
//   (the shards differ), any other block on its first replica only;
// - checkpoints gather the shards, then the blocks, into whole tensors.
//
// `--zero 0` keeps their state and gradients whole instead (the pending
// gradients all-reduced over the group): the same plan's run without the
// driver's sharding. With one micro-batch a step the sharded run equals it
// bit for bit: the reduction is ZeRO-0's in the step, a sum in rank order
// of the same addends. With several, ZeRO-1 sums the f32 sums over ranks
// as --zero 0 does (the same bits) but ZeRO-2 sums over the ranks first
// and the micro-batches second, --zero 0 the other way round: equal to f32
// rounding (a ZeRO-1 parameter of a ZeRO-2 run sums as ZeRO-1 does: the
// same bits). `--zero 1` or `2` runs every pending parameter at that
// stage. Under ZeRO-2 --dump-grads is refused (no rank holds the whole
// gradients).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_MESHZERO_H
#define TESSERA_RUNTIME_TRAIN_MESHZERO_H

#include "DataParallel.h"
#include "MeshParallel.h"

#include <cstdint>
#include <vector>

namespace tessera::train {

/// The mesh axes (bit a for axis a) the gradients of a partitioned, not
/// pipelined program are pending over, or 0 when every gradient is
/// complete. Throws TrainError when two parameters' differ (the driver
/// shards over one group).
int32_t meshZeroAxes(const tessera_program &program);

/// The communicator of the group over `axes` of the rank of `comms`: one
/// axis's, or the world's for every axis. Throws TrainError otherwise.
tessera_comm *meshZeroComm(const comm::RankComms &comms, int32_t axes);

/// The ZeRO stage the plan runs its pending parameters with: 2 when any of
/// them is ZeRO-2 (program.h's gradient_zero_stages), else 1; 0 without
/// pending gradients. Throws TrainError for a table that gives a pending
/// gradient a stage other than 1 or 2, or a complete one other than 0.
int32_t meshZeroPlannedStage(const tessera_program &program);

/// The ZeRO stage the driver runs the pending parameters with: the plan's
/// (meshZeroPlannedStage), or --zero 0 (whole), 1 (the state sharded) or 2
/// (the gradients too). Throws TrainError naming --zero for any other, or
/// for any --zero of a program without pending gradients (its sharding is
/// the one it was compiled with), and naming --dump-grads under stage 2 (no
/// rank holds the whole gradients).
int32_t meshZeroStage(const tessera_program &program,
                      const TrainOptions &options);

/// Per parameter, the ZeRO stage a run of stage `stage` (meshZeroStage)
/// gives it: 0 for a complete gradient; for a pending one `stage`, but the
/// plan's ZeRO-1 parameters stay ZeRO-1 in the plan's ZeRO-2 run (no
/// --zero; program.h's gradient_zero_stages).
std::vector<int32_t> meshZeroParameterStages(const tessera_program &program,
                                             const TrainOptions &options,
                                             int32_t stage);

/// The plan of a group of `ranks` for ZeRO stage `stage` (0 to 2): the
/// pending parameters sharded (or all-reduced whole), their gradients
/// through a ring under stage 2 (a ZeRO-1 parameter's bucket held whole:
/// meshZeroParameterStages), the whole ones' buckets taken, not reduced
/// (wholeBuckets), the others kUnreduced.
DataParallelPlan planMeshZero(const tessera_program &program,
                              const TrainOptions &options, int32_t ranks,
                              int32_t stage);

/// Per parameter, whether the rank at `coordinates` counts its block (a
/// pending parameter's shard) in the gradient norm.
std::vector<bool> meshZeroCountedInNorm(const MeshLayout &layout,
                                        const tessera_program &program,
                                        const std::vector<int32_t> &coordinates,
                                        int32_t axes);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_MESHZERO_H
