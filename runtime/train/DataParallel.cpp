//===- DataParallel.cpp - Gradient reduction and agreement of a step ------===//

#include "DataParallel.h"

#include "Trace.h"
#include "TrainError.h"

#include <algorithm>
#include <cstdio>

namespace tessera::train {
namespace {

/// Rank `rank`'s shard of `gradients` as pieces of the flat buffers.
std::vector<ParameterLayout::Piece>
shardPieces(const comm::GradientLayout &gradients, int32_t rank) {
  std::vector<ParameterLayout::Piece> pieces;
  for (const comm::ShardSegment &segment : gradients.shardSegments(rank))
    pieces.push_back(
        {segment.parameter, segment.bufferOffset, segment.elements, -1});
  return pieces;
}

} // namespace

comm::GradientLayout gradientLayoutOf(const ParameterLayout &layout,
                                      int64_t bucketElements) {
  std::vector<comm::GradientSlot> slots;
  for (int32_t i = 0; i < layout.size(); ++i)
    slots.push_back({layout.offset(i), layout.count(i)});
  comm::GradientLayout gradients =
      comm::GradientLayout::fromSlots(std::move(slots), bucketElements);
  if (gradients.totalElements() > layout.totalElements())
    fail("internal error: the gradient buckets need " +
         std::to_string(gradients.totalElements()) +
         " elements, the flat buffers have " +
         std::to_string(layout.totalElements()));
  return gradients;
}

DataParallelPlan planDataParallel(const tessera_program &program,
                                  const TrainOptions &options, int32_t ranks,
                                  bool sharded) {
  // One micro-batch: the compute-precision gradients are reduced, as the
  // step writes them; several: the f32 sums the backend accumulates.
  bool accumulators = options.gradientAccumulation > 1;
  int32_t dtype = accumulators ? TESSERA_F32 : computeDtypeOf(program);
  int64_t bucketElements =
      std::max<int64_t>(1, (options.bucketMegabytes << 20) / dtypeSize(dtype));
  ParameterLayout unsharded(program);
  if (!sharded)
    return {gradientLayoutOf(unsharded, bucketElements), unsharded, false,
            accumulators};
  std::vector<int64_t> counts, offsets;
  for (int32_t i = 0; i < unsharded.size(); ++i)
    counts.push_back(unsharded.count(i));
  comm::GradientLayout gradients = comm::GradientLayout::plan(
      counts, bucketElements, ranks, ParameterLayout::kSliceAlignment);
  for (const comm::GradientSlot &slot : gradients.parameters())
    offsets.push_back(slot.offset);
  ParameterLayout placed(program, offsets, gradients.totalElements());
  return {std::move(gradients), std::move(placed), true, accumulators};
}

ParameterLayout DataParallelPlan::rankLayout(int32_t rank) const {
  ParameterLayout placed = parameters;
  if (sharded)
    placed.holdShard(shardPieces(gradients, rank));
  return placed;
}

DataParallelGradients::DataParallelGradients(RankWorld &world,
                                             TrainingBackend &backend,
                                             const DataParallelPlan &plan,
                                             Trace &trace)
    : backend(backend), trace(trace),
      ranks(tessera_comm_size(world.dataParallelComm())),
      rank(tessera_comm_rank(world.dataParallelComm())),
      reduceAfterLastMicroBatch(plan.reduceAccumulators), sharded(plan.sharded),
      agreement(world.dataParallelComm(), backend.stream()) {
  if (backend.getLayout().totalElements() != plan.parameters.totalElements())
    fail("internal error: the backend's buffers are not the plan's");
  FlatBuffer gradients = reduceAfterLastMicroBatch
                             ? backend.optimizerGradients()
                             : backend.computeGradients();
  reducer = std::make_unique<comm::GradientReducer>(
      world.dataParallelComm(), plan.gradients, gradients.data, gradients.dtype,
      sharded ? comm::ReduceMode::ReduceScatter : comm::ReduceMode::AllReduce,
      backend.stream(), world.commStream());
  if (backend.holdsShardOnly() && !sharded)
    fail("internal error: a backend holds a shard of an unsharded plan");
  if (sharded)
    backend.restrictOptimizer(shardPieces(plan.gradients, rank));
  // Per rank, so that what ZeRO saves shows (rank 0's line first is not
  // promised: the ranks print as they start).
  std::fprintf(stdout, "rank %d: %s\n", rank,
               describeResidentState(backend.residentState()).c_str());
  std::fflush(stdout);
  if (!reduceAfterLastMicroBatch) {
    tessera_step_context &context = backend.stepContext();
    context.gradient_ready = comm::GradientReducer::gradientReady;
    context.gradient_ready_user = reducer.get();
  }
}

DataParallelGradients::~DataParallelGradients() {
  tessera_step_context &context = backend.stepContext();
  context.gradient_ready = nullptr;
  context.gradient_ready_user = nullptr;
}

void DataParallelGradients::finishStep() {
  // With accumulation every gradient is final now; launched from the last
  // parameter back, as the backward pass would have.
  if (reduceAfterLastMicroBatch)
    for (int32_t i = backend.getLayout().size() - 1; i >= 0; --i)
      reducer->onGradientReady(i);
  TraceRange range(trace, "gradient_reduction_wait");
  reducer->finish();
}

double DataParallelGradients::gradientSumOfSquares() {
  // Unsharded, every rank holds the same reduced gradient (see the header);
  // sharded, each holds a part.
  double sum = backend.gradientSumOfSquares();
  return sharded ? agreement.sum(sum) : sum;
}

std::vector<double> DataParallelGradients::parameterSumsOfSquares() {
  std::vector<double> sums = backend.lastParameterSumsOfSquares();
  if (sharded)
    agreement.sumEach(sums);
  return sums;
}

void DataParallelGradients::afterOptimizer() {
  if (!sharded)
    return;
  if (backend.holdsShardOnly()) {
    // AdamW wrote this rank's shard of what the step reads; the masters
    // stay the shard's.
    for (const FlatBuffer &buffer : backend.shardedStepBuffers())
      reducer->allGatherShards(buffer.data, buffer.dtype);
    return;
  }
  reducer->allGatherShards(backend.masterWeights().data, TESSERA_F32);
  // AdamW rounded only this rank's shard into the copies the step reads.
  backend.refreshComputeCopies();
}

void DataParallelGradients::gatherOptimizerState() {
  if (!sharded)
    return;
  if (backend.holdsShardOnly()) {
    backend.gatherState(
        [&](const FlatBuffer &whole) {
          reducer->allGatherShards(whole.data, whole.dtype);
        },
        /*keep=*/rank == 0);
    return;
  }
  reducer->allGatherShards(backend.firstMoments().data, TESSERA_F32);
  reducer->allGatherShards(backend.secondMoments().data, TESSERA_F32);
}

void DataParallelGradients::gatherGradients() {
  if (!sharded)
    return;
  FlatBuffer gradients = backend.optimizerGradients();
  reducer->allGatherShards(gradients.data, gradients.dtype);
}

} // namespace tessera::train
