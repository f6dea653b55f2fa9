//===- DataParallel.cpp - Gradient reduction and agreement of a step ------===//

#include "DataParallel.h"

#include "Trace.h"
#include "TrainError.h"

#include <algorithm>
#include <cstdio>

namespace tessera::train {
namespace {

/// Rank `rank`'s shard of the plan's gradients as pieces of the flat
/// buffers (of the parameters it updates), and every parameter outside the
/// buckets whole (each rank updates its complete gradient alike), in
/// buffer order.
std::vector<ParameterLayout::Piece> shardPieces(const DataParallelPlan &plan,
                                                int32_t rank) {
  std::vector<ParameterLayout::Piece> pieces;
  auto updates = [&](int32_t parameter) {
    return plan.updated.empty() ||
           plan.updated[static_cast<size_t>(parameter)];
  };
  for (const comm::ShardSegment &segment : plan.gradients.shardSegments(rank))
    if (updates(segment.parameter))
      pieces.push_back(
          {segment.parameter, segment.bufferOffset, segment.elements, -1});
  const std::vector<comm::GradientSlot> &slots = plan.gradients.parameters();
  for (auto p = 0; p < static_cast<int32_t>(slots.size()); ++p)
    if (slots[static_cast<size_t>(p)].elements > 0 &&
        !plan.gradients.isReduced(p) && updates(p))
      pieces.push_back({p, slots[static_cast<size_t>(p)].offset,
                        slots[static_cast<size_t>(p)].elements, -1,
                        /*replicated=*/true});
  std::sort(pieces.begin(), pieces.end(),
            [](const ParameterLayout::Piece &a, const ParameterLayout::Piece &b) {
              return a.offset < b.offset;
            });
  return pieces;
}

/// `groups` (empty: none) refined by how the step reads each parameter, as
/// its compute copy or in f32, so that no bucket holds both: the weights a
/// sharded state's all-gather completes are then whole buckets of one kind
/// each, and the copies' buffer keeps no room for the parameters read in
/// f32 (an untied embedding table: 1 GiB of bf16 on Llama 3 8B) nor the
/// mirrors' for the copied ones (TrainingBackend). A mixed program's f32
/// parameters are few (its embedding tables), so this costs a bucket or
/// two, not one per layer.
std::vector<int32_t> splitByReadKind(const tessera_program &program,
                                     std::vector<int32_t> groups) {
  if (groups.empty())
    groups.assign(static_cast<size_t>(program.parameter_count), -1);
  for (int32_t p = 0; p < program.parameter_count; ++p) {
    int32_t &group = groups[static_cast<size_t>(p)];
    if (elementCount(program.parameters[p]) == 0 ||
        group == comm::GradientLayout::kUnreduced)
      continue;
    const int32_t kind = program.parameter_step_dtypes &&
                                 program.parameter_step_dtypes[p] != TESSERA_F32
                             ? 0
                             : 1;
    group = group < 0 ? kind : 2 * group + kind;
  }
  return groups;
}

/// The plan's buckets in buffer order: what each rank's shard is a block
/// of (ParameterLayout::holdShard).
std::vector<ParameterLayout::Span> bucketSpans(const DataParallelPlan &plan) {
  std::vector<ParameterLayout::Span> spans;
  for (const comm::GradientBucket &bucket : plan.gradients.buckets())
    if (bucket.elements > 0)
      spans.push_back({bucket.offset, bucket.elements});
  std::sort(spans.begin(), spans.end(),
            [](const ParameterLayout::Span &a, const ParameterLayout::Span &b) {
              return a.offset < b.offset;
            });
  return spans;
}

} // namespace

std::vector<int32_t> gradientWritePositions(const tessera_program &program,
                                            int32_t zeroStage) {
  if (!program.gradient_write_positions)
    fail("--zero " + std::to_string(zeroStage) +
         ": this program does not record when its step writes each "
         "gradient (program.h's gradient_write_positions), which the ring "
         "of whole gradients is planned from; compile it again with this "
         "tesserac, or run with --zero 1");
  return std::vector<int32_t>(program.gradient_write_positions,
                              program.gradient_write_positions +
                                  program.parameter_count);
}

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
                                  int32_t zeroStage) {
  if (zeroStage < 0 || zeroStage > 3)
    fail("ZeRO stage " + std::to_string(zeroStage) +
         ": the driver shards the optimizer state (1), the gradients (2) "
         "and the weights (3) at most (run with --zero 0, 1, 2 or 3)");
  // One micro-batch: the compute-precision gradients are reduced, as the
  // step writes them; several: the f32 sums the backend accumulates (ZeRO-2:
  // each micro-batch's, widened to f32).
  bool accumulators = options.gradientAccumulation > 1;
  int32_t dtype = accumulators ? TESSERA_F32 : computeDtypeOf(program);
  int64_t bucketElements = std::max<int64_t>(
      1, static_cast<int64_t>(options.bucketMegabytes * double(1 << 20)) /
             dtypeSize(dtype));
  ParameterLayout unsharded(program);
  if (zeroStage == 0)
    return {gradientLayoutOf(unsharded, bucketElements), unsharded, false,
            std::nullopt, accumulators};
  std::vector<int64_t> counts, offsets;
  for (int32_t i = 0; i < unsharded.size(); ++i)
    counts.push_back(unsharded.count(i));
  comm::GradientLayout gradients =
      comm::GradientLayout::plan(counts, bucketElements, ranks,
                                 ParameterLayout::kSliceAlignment,
                                 splitByReadKind(program, {}));
  for (const comm::GradientSlot &slot : gradients.parameters())
    offsets.push_back(slot.offset);
  ParameterLayout placed(program, offsets, gradients.totalElements());
  if (zeroStage == 1)
    return {std::move(gradients), std::move(placed), true, std::nullopt,
            accumulators};
  comm::GradientRing ring = comm::GradientRing::plan(
      gradients, gradientWritePositions(program, zeroStage));
  std::optional<comm::WeightRing> weights;
  if (zeroStage == 3) {
    if (!program.parameter_read_intervals)
      fail("--zero 3: this program does not record when its step reads "
           "each parameter (program.h's parameter_read_intervals), which "
           "the gathers of the weights are planned from; compile it again "
           "with this tesserac, or run with --zero 2");
    // Kind 0: read as the compute copy; 1: as f32 (a mirror of the master).
    std::vector<int32_t> kinds;
    for (int32_t i = 0; i < program.parameter_count; ++i)
      kinds.push_back(program.parameter_step_dtypes &&
                              program.parameter_step_dtypes[i] != TESSERA_F32
                          ? 0
                          : 1);
    weights = comm::WeightRing::plan(
        gradients,
        std::vector<int32_t>(program.parameter_read_intervals,
                             program.parameter_read_intervals +
                                 4 * program.parameter_count),
        kinds);
  }
  // ZeRO-2 reduces every micro-batch during its backward pass.
  return {std::move(gradients), std::move(placed), true, std::move(ring),
          false, std::move(weights)};
}

DataParallelPlan planShardedGroups(const tessera_program &program,
                                   const std::vector<int32_t> &groups,
                                   const TrainOptions &options,
                                   int32_t shards) {
  std::vector<int64_t> counts;
  for (int32_t p = 0; p < program.parameter_count; ++p)
    counts.push_back(elementCount(program.parameters[p]));
  const int64_t bucketElements = std::max<int64_t>(
      1, static_cast<int64_t>(options.bucketMegabytes * double(1 << 20)) /
             dtypeSize(TESSERA_F32));
  DataParallelPlan plan{
      comm::GradientLayout::plan(counts, bucketElements, shards,
                                 ParameterLayout::kSliceAlignment,
                                 splitByReadKind(program, groups)),
      ParameterLayout(program)};
  std::vector<int64_t> offsets;
  for (const comm::GradientSlot &slot : plan.gradients.parameters())
    offsets.push_back(slot.offset);
  plan.parameters =
      ParameterLayout(program, offsets, plan.gradients.totalElements());
  plan.sharded = shards > 1;
  return plan;
}

ParameterLayout DataParallelPlan::rankLayout(int32_t rank) const {
  ParameterLayout placed = parameters;
  if (sharded)
    placed.holdShard(shardPieces(*this, rank), bucketSpans(*this));
  if (ring) {
    ParameterLayout::GradientRingPlacement placement;
    for (int32_t i = 0; i < placed.size(); ++i)
      placement.offsets.push_back(ring->ringOffset(i));
    placement.elements = ring->totalElements();
    placement.largestBucket = ring->largestBucket();
    placement.largestBlock = ring->largestBucket() / gradients.shardCount();
    const std::vector<comm::GradientBucket> &buckets = gradients.buckets();
    const std::vector<comm::GradientSlot> &slots = gradients.parameters();
    // The held buckets one after another, past the shard's pieces.
    std::vector<int64_t> heldOffsets(buckets.size(), -1);
    std::vector<int32_t> bucketOf(slots.size(), -1);
    for (size_t b = 0; b < buckets.size(); ++b) {
      for (int32_t p = buckets[b].firstParameter; p <= buckets[b].lastParameter;
           ++p)
        bucketOf[static_cast<size_t>(p)] = static_cast<int32_t>(b);
      if (ring->held(static_cast<int32_t>(b))) {
        heldOffsets[b] = placement.heldElements;
        placement.heldElements += buckets[b].elements;
      }
    }
    auto heldBucketOf = [&](int32_t parameter) {
      const int32_t b = bucketOf[static_cast<size_t>(parameter)];
      return b >= 0 && heldOffsets[static_cast<size_t>(b)] >= 0 ? b : -1;
    };
    // The shard's gradients packed as its masters are, but for the pieces
    // of held buckets, whose gradients are in their buckets, past them.
    const std::vector<ParameterLayout::Piece> &pieces = placed.shard();
    int64_t packed = 0;
    for (const ParameterLayout::Piece &piece : pieces)
      if (heldBucketOf(piece.parameter) < 0)
        packed += ParameterLayout::aligned(piece.count);
    placement.gradientShardElements = packed + placement.heldElements;
    // Where flat element `offset` of held bucket `b` is in that buffer.
    auto heldPlace = [&](size_t b, int64_t offset) {
      return packed + heldOffsets[b] + offset - buckets[b].offset;
    };
    int64_t next = 0;
    for (const ParameterLayout::Piece &piece : pieces) {
      const int32_t b = heldBucketOf(piece.parameter);
      placement.pieceGradientOffsets.push_back(
          b >= 0 ? heldPlace(static_cast<size_t>(b), piece.offset) : next);
      if (b < 0)
        next += ParameterLayout::aligned(piece.count);
    }
    const std::vector<int64_t> &gradientOffsets =
        placement.pieceGradientOffsets;
    // The gradients the step writes whole outside the ring's slots: past
    // them when the shard sums micro-batches, else at `shardOffset`. Those
    // in no bucket are whole pieces of the shard; so are a held bucket's.
    auto writeWhole = [&](int32_t parameter, int64_t shardOffset,
                          int64_t count) {
      const int64_t at = placement.elements + placement.wholeElements;
      placement.offsets[static_cast<size_t>(parameter)] = at;
      placement.wholeGradients.push_back({parameter, at, shardOffset, count});
      placement.wholeElements += ParameterLayout::aligned(count);
    };
    for (size_t i = 0; i < pieces.size(); ++i)
      if (!gradients.isReduced(pieces[i].parameter))
        writeWhole(pieces[i].parameter, gradientOffsets[i], pieces[i].count);
    for (auto p = 0; p < static_cast<int32_t>(slots.size()); ++p) {
      const int32_t b = heldBucketOf(p);
      const comm::GradientSlot &slot = slots[static_cast<size_t>(p)];
      if (b >= 0 && slot.elements > 0)
        writeWhole(p, heldPlace(static_cast<size_t>(b), slot.offset),
                   slot.elements);
    }
    for (size_t b = 0; b < buckets.size(); ++b) {
      ParameterLayout::GradientRingPlacement::Bucket bucket;
      bucket.ringOffset = ring->bucketOffset(static_cast<int32_t>(b));
      bucket.elements = buckets[b].elements;
      // A held bucket's sum stays in place: nothing to fold.
      if (heldOffsets[b] >= 0) {
        bucket.heldOffset = heldPlace(b, buckets[b].offset);
        placement.buckets.push_back(std::move(bucket));
        continue;
      }
      const int64_t block = bucket.elements / gradients.shardCount();
      const int64_t begin = buckets[b].offset + rank * block;
      for (size_t i = 0; i < pieces.size(); ++i)
        if (pieces[i].offset >= begin && pieces[i].offset < begin + block)
          bucket.pieces.push_back(
              {pieces[i].offset - begin, gradientOffsets[i], pieces[i].count});
      placement.buckets.push_back(std::move(bucket));
    }
    placed.holdGradientShard(std::move(placement));
  }
  if (weights) {
    ParameterLayout::WeightShardPlacement placement;
    for (int32_t i = 0; i < placed.size(); ++i)
      placement.ringOffsets.push_back(weights->parameterRingOffset(i));
    for (int32_t kind = 0; kind < comm::WeightRing::kKinds; ++kind) {
      placement.ringElements[kind] = weights->ringElements(kind);
      placement.shardElements[kind] = weights->shardElements(kind);
    }
    // A piece is in this rank's block of one bucket, which sits in its
    // kind's shard at the bucket's shardOffset.
    const std::vector<comm::GradientBucket> &buckets = gradients.buckets();
    for (const ParameterLayout::Piece &piece : placed.shard()) {
      const int32_t kind = weights->kindOf(piece.parameter);
      int64_t at = -1;
      for (size_t b = 0; b < buckets.size() && at < 0; ++b) {
        const int64_t block = buckets[b].elements / gradients.shardCount();
        const int64_t begin = buckets[b].offset + rank * block;
        if (piece.offset >= begin && piece.offset < begin + block)
          at = weights->shardOffset(kind, static_cast<int32_t>(b)) +
               piece.offset - begin;
      }
      if (at < 0)
        fail("internal error: a shard piece of parameter " +
             std::to_string(piece.parameter) + " outside the rank's blocks");
      placement.pieceOffsets.push_back(at);
    }
    placed.holdWeightShard(std::move(placement));
  }
  return placed;
}

DataParallelGradients::DataParallelGradients(RankWorld &world,
                                             TrainingBackend &backend,
                                             const DataParallelPlan &plan,
                                             Trace &trace,
                                             const std::string &rankName,
                                             bool everyRankStores)
    : backend(backend), trace(trace),
      ranks(tessera_comm_size(world.dataParallelComm())),
      rank(tessera_comm_rank(world.dataParallelComm())),
      reduceAfterLastMicroBatch(plan.reduceAccumulators), sharded(plan.sharded),
      shardsGradients(plan.ring.has_value()),
      everyRankStores(everyRankStores),
      agreement(world.dataParallelComm(), backend.stream()) {
  if (backend.getLayout().totalElements() != plan.parameters.totalElements())
    fail("internal error: the backend's buffers are not the plan's");
  if (shardsGradients != backend.getLayout().gradientsSharded())
    fail("internal error: the backend's gradients are not the plan's");
  if (shardsGradients) {
    reducer = std::make_unique<comm::GradientReducer>(
        world.dataParallelComm(), plan.gradients, *plan.ring,
        *backend.gradientShardSink(), backend.optimizerGradients().dtype,
        backend.stream(), world.commStream(), plan.heldOncePerStep);
  } else {
    FlatBuffer gradients = reduceAfterLastMicroBatch
                               ? backend.optimizerGradients()
                               : backend.computeGradients();
    reducer = std::make_unique<comm::GradientReducer>(
        world.dataParallelComm(), plan.gradients, gradients.data,
        gradients.dtype,
        sharded ? comm::ReduceMode::ReduceScatter
                : comm::ReduceMode::AllReduce,
        backend.stream(), world.commStream());
  }
  reducer->setWholeBuckets(plan.wholeBuckets);
  if (plan.weights) {
    if (!backend.getLayout().weightsSharded())
      fail("internal error: the backend's weights are not the plan's");
    gatherer = std::make_unique<comm::WeightGatherer>(
        world.dataParallelComm(), plan.gradients, *plan.weights,
        backend.weightShardBuffers(), backend.stream(), world.commStream());
  }
  if (backend.holdsShardOnly() && !sharded)
    fail("internal error: a backend holds a shard of an unsharded plan");
  if (sharded)
    backend.restrictOptimizer(shardPieces(plan, rank));
  // Per rank, so that what ZeRO saves shows (rank 0's line first is not
  // promised: the ranks print as they start).
  const std::string name =
      rankName.empty() ? "rank " + std::to_string(rank) : rankName;
  std::fprintf(stdout, "%s: %s\n", name.c_str(),
               describeResidentState(backend.residentState()).c_str());
  if (shardsGradients)
    std::fprintf(stdout,
                 "%s: gradient ring: %lld elements for %zu buckets "
                 "(the largest %lld; the whole gradients %lld)\n",
                 name.c_str(),
                 static_cast<long long>(plan.ring->totalElements()),
                 plan.gradients.buckets().size(),
                 static_cast<long long>(plan.ring->largestBucket()),
                 static_cast<long long>(plan.gradients.totalElements()));
  if (plan.weights) {
    // What the step reads whole, against the ring it is gathered into.
    int64_t ringBytes = 0, wholeBytes = 0;
    const int32_t dtypes[] = {backend.computePrecision(), TESSERA_F32};
    for (int32_t kind = 0; kind < comm::WeightRing::kKinds; ++kind)
      ringBytes += plan.weights->ringElements(kind) * dtypeSize(dtypes[kind]);
    for (int32_t i = 0; i < backend.getLayout().size(); ++i)
      wholeBytes += backend.getLayout().count(i) *
                    dtypeSize(dtypes[plan.weights->kindOf(i)]);
    std::fprintf(stdout,
                 "rank %d: weight ring: %lld bytes for %zu gathers a "
                 "micro-batch (the whole weights read %lld bytes)\n",
                 rank, static_cast<long long>(ringBytes),
                 plan.weights->gathers().size(),
                 static_cast<long long>(wholeBytes));
    tessera_step_context &context = backend.stepContext();
    context.weights_needed = comm::WeightGatherer::weightsNeeded;
    context.weights_needed_user = gatherer.get();
  }
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
  context.weights_needed = nullptr;
  context.weights_needed_user = nullptr;
}

void DataParallelGradients::finishMicroBatch() {
  if (gatherer)
    gatherer->finishMicroBatch();
  if (!shardsGradients)
    return;
  TraceRange range(trace, "gradient_reduction_wait");
  reducer->finish();
}

void DataParallelGradients::finishStep() {
  // ZeRO-2 reduced every micro-batch as it ended, but for the sums of the
  // buckets it holds whole when it sums micro-batches.
  if (shardsGradients) {
    TraceRange range(trace, "gradient_reduction_wait");
    reducer->finishHeldBuckets();
    return;
  }
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
  // ZeRO-3: the step gathers what AdamW wrote into the shards as it
  // reads it.
  if (gatherer)
    return;
  if (backend.holdsShardOnly()) {
    // AdamW wrote this rank's shard of what the step reads; the masters
    // stay the shard's.
    for (const FlatBuffer &buffer : backend.shardedStepBuffers())
      reducer->allGatherShards(buffer.data, buffer.dtype, buffer.places);
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
        /*keep=*/rank == 0 || everyRankStores);
    return;
  }
  reducer->allGatherShards(backend.firstMoments().data, TESSERA_F32);
  reducer->allGatherShards(backend.secondMoments().data, TESSERA_F32);
}

void DataParallelGradients::gatherGradients() {
  if (!sharded)
    return;
  if (shardsGradients)
    fail("--dump-grads: under --zero 2 and 3 no rank holds the whole "
         "gradients (run with --zero 0 or 1 to dump them)");
  FlatBuffer gradients = backend.optimizerGradients();
  reducer->allGatherShards(gradients.data, gradients.dtype);
}

} // namespace tessera::train
