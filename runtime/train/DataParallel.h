//===- DataParallel.h - The driver's side of data parallelism ---*- C++ -*-===//
//
// A data-parallel run is N ranks (one process per GPU, launch.h), each with
// the whole model, each reading its own slice of every global micro-batch
// (DataLoader::nextBatch's rank/ranks). What the driver adds to a step:
//
// - gradients: a GradientReducer (gradient_reducer.h) over the backend's
//   flat gradient buffer. With one micro-batch a step it hangs on the step
//   context's gradient_ready, so the buckets are all-reduced on the comm
//   stream while the backward pass runs, and finish() (traced as
//   gradient_reduction_wait) makes the compute stream wait for the rest.
//   With K > 1 micro-batches the f32 accumulators are reduced once, after
//   the last one (reducing every micro-batch would cost K times the
//   traffic).
// - the reduction is a SUM: the driver divides by K x N x loss scale where
//   a one-rank run divides by K x loss scale (AdamW's grad_scale and the
//   reported norm), so no pass over the buffer is spent on a divide.
// - agreement: after the all-reduce every rank holds the same bits (NCCL's
//   all-reduce ends with the same values everywhere), so each rank's sum of
//   squares, and with it the norm and the clip, is already the global one.
//   The loss printed is the mean over ranks (one scalar all-reduce a step)
//   and an fp16 overflow flag is the max over ranks, so every rank skips
//   the same steps.
// - ZeRO-1 (--zero 1, or the program's zero_stage): the buckets are
//   reduce-scattered instead, into a placement planned for N shards (the
//   backend's flat buffers then use its offsets: padding between buckets),
//   and the backend's norm and AdamW are restricted to this rank's shard
//   (ParameterLayout::Piece); the norm is the sum over ranks of the shards'
//   sums of squares, and the updated master weights are all-gathered after
//   AdamW. Before a checkpoint the moments' shards are all-gathered too, so
//   rank 0 writes the whole state, as without ZeRO, in one file that
//   resumes with any number of ranks. A backend made with the plan's
//   rankLayout holds only its shard of the masters and moments.
// - ZeRO-2 (--zero 2): the gradients too. The step writes its whole
//   gradients into a ring of bucket-sized slots (gradient_ring.h, planned
//   from program.h's gradient_write_positions), every micro-batch's buckets
//   are reduce-scattered as the backward pass completes them and folded
//   into the rank's compact gradient shard (copied with one micro-batch;
//   added in f32 over several, a bucket widened to f32 before its
//   reduction, so that the sum over ranks is f32's as ZeRO-0's is). The
//   norm, the clip and AdamW then read the shard; the rest is ZeRO-1's.
//   Several micro-batches sum over ranks first and over micro-batches
//   second, ZeRO-0 the other way round: equal to f32 rounding, not bit for
//   bit (one micro-batch is bit for bit).
// - ZeRO-3 (--zero 3): the weights the step reads too (FSDP). Each rank
//   holds its block of every bucket of the compute copies (and of the f32
//   mirrors of parameters read as f32), which AdamW rounds its masters
//   into; the step's parameters point into a ring of gathered buckets
//   (weight_ring.h, planned from program.h's parameter_read_intervals),
//   and a WeightGatherer all-gathers each bucket before its first read in
//   the forward pass and again in the backward pass, one gather ahead, as
//   the step announces its reads. Nothing is all-gathered after AdamW; the
//   gradients are ZeRO-2's. The arithmetic is ZeRO-2's, so are the bits.
//
// World size 1 makes none of this: the driver runs exactly as before.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_DATAPARALLEL_H
#define TESSERA_RUNTIME_TRAIN_DATAPARALLEL_H

#include "TrainingBackend.h"

#include "tessera/runtime/gradient_reducer.h"
#include "tessera/runtime/gradient_ring.h"
#include "tessera/runtime/launch.h"
#include "tessera/runtime/mesh.h"
#include "tessera/runtime/weight_gatherer.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera::train {

class Trace;

/// One rank's communicators, made by the executable's main before the
/// backend allocates anything (the NCCL world selects the GPU).
class RankWorld {
public:
  virtual ~RankWorld() = default;
  /// The data-parallel group: every rank.
  virtual tessera_comm *dataParallelComm() = 0;
  /// The cudaStream_t the gradient collectives run on (nullptr: host).
  virtual void *commStream() = 0;
  /// The world and the communicator of each axis of the world's mesh (one
  /// axis over every rank for data parallelism; a partitioned program's
  /// mesh otherwise), with this rank's coordinates.
  virtual const comm::RankComms &rankComms() = 0;
};

/// A thread rank's comm (one process's in-process world: host memory, or
/// on the GPU its device-staged wrapper, device_staged_comm.h) as the
/// driver's RankWorld: what `--thread-ranks N` runs each rank on; also a
/// pipeline stage's dp axis comm (any kind), the world of ZeRO-1 inside a
/// stage mesh (StageZero.h).
/// `commStream`: the rank's stream for the gradient collectives (nullptr on
/// the host).
class ThreadRankWorld final : public RankWorld {
public:
  explicit ThreadRankWorld(tessera_comm *comm, void *commStream = nullptr)
      : stream(commStream) {
    comms.world = comm;
    comms.axes.push_back(comm);
    comms.rank = tessera_comm_rank(comm);
    comms.coordinates.push_back(comms.rank);
  }
  tessera_comm *dataParallelComm() override { return comms.world; }
  void *commStream() override { return stream; }
  const comm::RankComms &rankComms() override { return comms; }

private:
  comm::RankComms comms;
  void *stream;
};

/// Makes the world of `launch` (world size > 1) arranged as `mesh` (its
/// rank count is the world size); throws TrainError or comm::CommError
/// when it cannot.
using RankWorldFactory = std::function<std::unique_ptr<RankWorld>(
    const comm::LaunchInfo &launch, const comm::MeshShape &mesh,
    double timeoutSeconds)>;

/// The reducer's view of the backend's flat buffers: ParameterLayout's
/// slices, in buckets of about `bucketElements`.
comm::GradientLayout gradientLayoutOf(const ParameterLayout &layout,
                                      int64_t bucketElements);

/// Where a data-parallel run's flat buffers put each parameter, and the
/// buckets the reducer works in.
struct DataParallelPlan {
  comm::GradientLayout gradients;
  /// The backend's placement (ParameterLayout(program) unless sharded).
  ParameterLayout parameters;
  bool sharded = false;
  /// ZeRO-2: the gradients are sharded too, the step writing the whole
  /// ones into `ring`'s slots; the ring's held buckets (a mesh plan's
  /// ZeRO-1 parameters, MeshZero.h) are kept whole (`heldOncePerStep`).
  std::optional<comm::GradientRing> ring;
  /// Several micro-batches a step: their f32 sums are reduced after the
  /// last one, instead of the compute-precision gradients during the
  /// backward pass.
  bool reduceAccumulators = false;
  /// ZeRO-3: the weights the step reads are sharded too, gathered into
  /// `weights`' rings as the step reads them.
  std::optional<comm::WeightRing> weights;
  /// Per parameter, whether this rank's optimizer updates it (empty: every
  /// parameter). A pipeline device over a stage mesh shards only the
  /// parameters it owns (PipelineParallel.h): a tied embedding's other
  /// readers get its weights from the owner, so no state of theirs is kept.
  std::vector<bool> updated;
  /// ZeRO-2: the ring's held buckets are reduced once a step, after the
  /// last micro-batch (the backend sums micro-batches in f32), else as the
  /// step writes them.
  bool heldOncePerStep = false;
  /// Per bucket (empty: none), whether its gradients are whole and the same
  /// on every rank (a mesh plan's replicated layers' ZeRO-1/2 gradients,
  /// MeshZero.h): each rank takes its block of it instead of reducing it.
  std::vector<bool> wholeBuckets;

  /// The placement of rank `rank`'s backend: `parameters`, and when
  /// sharded its masters and moments for the rank's shard only.
  ParameterLayout rankLayout(int32_t rank) const;
};

/// The plan of `ranks` ranks with --bucket-mb and --grad-accum of
/// `options` for ZeRO stage `zeroStage` (0 to 3); throws TrainError
/// when the program cannot run it.
DataParallelPlan planDataParallel(const tessera_program &program,
                                  const TrainOptions &options, int32_t ranks,
                                  int32_t zeroStage);

/// When the step writes each parameter's gradient (program.h's
/// gradient_write_positions), which a ZeRO-2/3 ring of whole gradients is
/// planned from; throws TrainError naming --zero `zeroStage` when the
/// program does not record it.
std::vector<int32_t> gradientWritePositions(const tessera_program &program,
                                            int32_t zeroStage);

/// ZeRO-1 of `shards` ranks by parameter group (one per parameter, as
/// GradientLayout::plan takes them): the buckets never mix groups, so each
/// rank's shard of a group is 1/shards of it, and a kUnreduced parameter
/// is in no bucket (its gradient complete as the step writes it, its state
/// whole on every rank). One shard: the buckets all-reduced, nothing
/// sharded. What ZeRO inside a mesh shards (StageZero.h, MeshZero.h); the
/// caller sets `reduceAccumulators` and `updated`.
DataParallelPlan planShardedGroups(const tessera_program &program,
                                   const std::vector<int32_t> &groups,
                                   const TrainOptions &options, int32_t shards);

/// Reduces one step's gradients over the ranks of `world` and agrees on the
/// step's scalars.
class DataParallelGradients {
public:
  /// Hooks the reducer into `backend`, which was made with
  /// `plan.rankLayout(rank)` (or `plan.parameters`: the state whole), and
  /// prints the rank's resident training state, as `rankName` ("rank R"
  /// of the data-parallel comm when empty). `everyRankStores`: every rank
  /// stores the gathered state (a pipeline over a stage mesh, whose ranks
  /// all take part in gathering the whole model), not rank 0 alone.
  DataParallelGradients(RankWorld &world, TrainingBackend &backend,
                        const DataParallelPlan &plan, Trace &trace,
                        const std::string &rankName = {},
                        bool everyRankStores = false);
  ~DataParallelGradients();
  DataParallelGradients(const DataParallelGradients &) = delete;
  DataParallelGradients &operator=(const DataParallelGradients &) = delete;

  /// After each micro-batch: ZeRO-2 launches what is not reduced yet and
  /// makes the compute stream wait, so the ring is free for the next one.
  void finishMicroBatch();
  /// After the step's last micro-batch: launches what is not reduced yet
  /// and makes the compute stream wait; the backend's optimizerGradients
  /// then hold the sum over ranks.
  void finishStep();
  /// The sum of squares of the whole reduced gradient (after finishStep).
  double gradientSumOfSquares();
  /// The same per parameter, from the sums gradientSumOfSquares just added
  /// (TrainingBackend::lastParameterSumsOfSquares), on every rank.
  /// Collective when sharded.
  std::vector<double> parameterSumsOfSquares();
  /// After AdamW: ZeRO-1 gives every rank every shard's new weights (what
  /// the step reads: the copies and mirrors of a sharded state, else the
  /// masters, then rounded into the copies).
  void afterOptimizer();
  /// ZeRO-1: every rank's shard of the optimizer state (before a
  /// checkpoint or --dump-params: rank 0 then stores the whole state) or
  /// of the reduced gradients (before --dump-grads) to every rank.
  /// Collective: every rank calls it.
  void gatherOptimizerState();
  void gatherGradients();
  /// The sum and the largest value of a host scalar over the ranks.
  double sum(double value) { return agreement.sum(value); }
  double max(double value) { return agreement.max(value); }
  int32_t size() const { return ranks; }

private:
  TrainingBackend &backend;
  Trace &trace;
  int32_t ranks;
  int32_t rank;
  bool reduceAfterLastMicroBatch;
  bool sharded;
  bool shardsGradients;
  bool everyRankStores;
  std::unique_ptr<comm::GradientReducer> reducer;
  /// ZeRO-3's gathers of the weights (null below stage 3).
  std::unique_ptr<comm::WeightGatherer> gatherer;
  comm::ScalarAgreement agreement;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_DATAPARALLEL_H
