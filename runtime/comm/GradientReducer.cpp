//===- GradientReducer.cpp - Bucketed, overlapped gradient reduction ------===//
//
// See gradient_reducer.h for the design. Two events suffice: the compute
// stream is in order, so one event recorded when a bucket completes covers
// every gradient of that bucket (and of earlier ones); cudaStreamWaitEvent
// captures the event as it is at the call, so the event can be re-recorded
// for the next bucket at once.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/gradient_reducer.h"
#include "tessera/runtime/gradient_ring.h"

#include "CommBase.h"
#include "TensorBlocks.h"

#include <algorithm>

namespace tessera::comm {

GradientReducer::GradientReducer(tessera_comm *comm, GradientLayout layout,
                                 void *gradients, int32_t dtype,
                                 ReduceMode mode, void *computeStream,
                                 void *commStream)
    : comm(comm), bucketLayout(std::move(layout)), gradients(gradients),
      dtype(dtype), mode(mode), computeStream(computeStream),
      commStream(commStream) {
  if (!comm)
    throw CommError("gradient reducer: no communicator");
  if (dtypeBytes(dtype) == 0)
    throw CommError("gradient reducer: unknown dtype " + std::to_string(dtype));
  if (mode == ReduceMode::ReduceScatter &&
      bucketLayout.shardCount() != comm->size())
    throw CommError("gradient reducer: ZeRO needs a layout planned for " +
                    std::to_string(comm->size()) + " shards, not " +
                    std::to_string(bucketLayout.shardCount()));
  size_t parameters = bucketLayout.parameters().size();
  bucketOfParameter.assign(parameters, -1);
  const std::vector<GradientBucket> &buckets = bucketLayout.buckets();
  for (size_t b = 0; b < buckets.size(); ++b)
    for (int32_t p = buckets[b].firstParameter; p <= buckets[b].lastParameter;
         ++p)
      bucketOfParameter[static_cast<size_t>(p)] = static_cast<int32_t>(b);
  StreamOps &ops = comm->streamOps();
  bucketEvent = ops.createEvent();
  doneEvent = ops.createEvent();
  resetStep();
}

GradientReducer::GradientReducer(tessera_comm *comm, GradientLayout layout,
                                 const GradientRing &gradientRing,
                                 ShardedGradientSink &shardSink,
                                 int32_t dtype, void *computeStream,
                                 void *commStream, bool heldOncePerStep)
    : GradientReducer(comm, std::move(layout), nullptr, dtype,
                      ReduceMode::ReduceScatter, computeStream, commStream) {
  mode = ReduceMode::ReduceScatterToShards;
  this->heldOncePerStep = heldOncePerStep;
  ring = std::make_unique<GradientRing>(gradientRing);
  sink = &shardSink;
  if (bucketLayout.buckets().empty())
    throw CommError("gradient reducer: a ring without buckets");
  for (size_t b = 0; b < bucketLayout.buckets().size(); ++b)
    bucketFreed.push_back(comm->streamOps().createEvent());
  resetStep();
}

GradientReducer::~GradientReducer() {
  StreamOps &ops = comm->streamOps();
  ops.destroyEvent(bucketEvent);
  ops.destroyEvent(doneEvent);
  for (void *event : bucketFreed)
    ops.destroyEvent(event);
}

void GradientReducer::resetStep() {
  const std::vector<GradientBucket> &buckets = bucketLayout.buckets();
  pendingInBucket.clear();
  for (const GradientBucket &bucket : buckets)
    pendingInBucket.push_back(bucket.lastParameter - bucket.firstParameter + 1);
  parameterReady.assign(bucketOfParameter.size(), false);
  launchedBuckets = 0;
  if (!ring)
    return;
  pendingAtPosition.clear();
  for (int32_t p = 0; p < ring->positionCount(); ++p)
    pendingAtPosition.push_back(ring->gradientsAt(p));
  currentPosition = 0;
}

void GradientReducer::gradientReady(void *user, int32_t parameter) {
  static_cast<GradientReducer *>(user)->onGradientReady(parameter);
}

void GradientReducer::onGradientReady(int32_t parameter) {
  if (parameter < 0 ||
      static_cast<size_t>(parameter) >= bucketOfParameter.size())
    throw CommError("gradient reducer: gradient " + std::to_string(parameter) +
                    " is not a parameter (there are " +
                    std::to_string(bucketOfParameter.size()) + ")");
  auto index = static_cast<size_t>(parameter);
  if (parameterReady[index])
    throw CommError("gradient reducer: gradient " + std::to_string(parameter) +
                    " was reported ready twice in one step");
  parameterReady[index] = true;
  // A kUnreduced parameter's gradient is complete as the step wrote it;
  // its write position still counts towards the ring's waits.
  if (bucketOfParameter[index] >= 0) {
    --pendingInBucket[static_cast<size_t>(bucketOfParameter[index])];
    launchReadyBuckets();
  }
  if (ring)
    followRing(parameter);
}

void GradientReducer::followRing(int32_t parameter) {
  const int32_t position = ring->writePosition(parameter);
  if (position < currentPosition)
    throw CommError("gradient reducer: gradient " + std::to_string(parameter) +
                    " was announced at write position " +
                    std::to_string(position) + " after position " +
                    std::to_string(currentPosition) +
                    ": the program's gradient_write_positions are not its "
                    "step's order");
  currentPosition = position;
  if (--pendingAtPosition[static_cast<size_t>(position)] > 0 ||
      position + 1 >= ring->positionCount())
    return;
  // The next call writes the first gradients of these buckets over
  // earlier buckets' places, which must be reduced by then.
  StreamOps &ops = comm->streamOps();
  for (int32_t bucket : ring->bucketsReusingAt(position + 1))
    for (int32_t before : ring->reusedBuckets(bucket)) {
      if (static_cast<size_t>(before) >= launchedBuckets)
        throw CommError("gradient reducer: bucket " + std::to_string(bucket) +
                        "'s first gradient comes before bucket " +
                        std::to_string(before) +
                        " left its place in the ring (a wrong ring plan)");
      ops.waitEvent(computeStream, bucketFreed[static_cast<size_t>(before)]);
    }
}

void GradientReducer::launchReadyBuckets() {
  // In bucket order only, so every rank issues the same collectives in the
  // same order even if gradients arrive in a different order.
  const std::vector<GradientBucket> &buckets = bucketLayout.buckets();
  while (launchedBuckets < buckets.size() &&
         (pendingInBucket[launchedBuckets] == 0 ||
          reducedOncePerStep(launchedBuckets))) {
    if (!reducedOncePerStep(launchedBuckets))
      launchBucket(launchedBuckets);
    ++launchedBuckets;
  }
}

bool GradientReducer::reducedOncePerStep(size_t index) const {
  return heldOncePerStep && ring->held(static_cast<int32_t>(index));
}

void GradientReducer::setWholeBuckets(std::vector<bool> whole) {
  if (!whole.empty() && whole.size() != bucketLayout.buckets().size())
    throw CommError("gradient reducer: " + std::to_string(whole.size()) +
                    " whole-bucket flags for " +
                    std::to_string(bucketLayout.buckets().size()) +
                    " buckets");
  wholeBuckets = std::move(whole);
}

void GradientReducer::launchBucket(size_t index) {
  const GradientBucket &bucket = bucketLayout.buckets()[index];
  const bool wholeOnEveryRank =
      index < wholeBuckets.size() && wholeBuckets[index];
  StreamOps &ops = comm->streamOps();
  ops.recordEvent(bucketEvent, computeStream);
  ops.waitEvent(commStream, bucketEvent);
  if (mode == ReduceMode::ReduceScatterToShards) {
    const auto at = static_cast<int32_t>(index);
    // A held bucket keeps its sum in place, in this rank's block, where a
    // whole one holds its block already.
    const bool held = ring->held(at);
    if (!(held && wholeOnEveryRank)) {
      tessera_tensor whole = sink->bucketForReduction(at, commStream);
      const int64_t elements = bucket.elements / comm->size();
      tessera_tensor mine = flatView(whole.data, whole.dtype,
                                     comm->rank() * elements, elements);
      tessera_tensor block =
          held || wholeOnEveryRank ? mine : sink->blockForReduction(elements);
      if (!wholeOnEveryRank)
        checkComm(
            tessera_comm_reduce_scatter(comm, &whole, &block, 0, commStream));
      if (!held)
        sink->foldBlock(at, block, commStream);
    }
    ops.recordEvent(bucketFreed[index], commStream);
    return;
  }
  // A bucket of empty parameters only (a pipeline device's layout keeps
  // the other devices' parameters at no elements) has nothing to reduce;
  // a whole one is where a reduce-scatter or an all-reduce would leave it.
  if (bucket.elements == 0 || wholeOnEveryRank)
    return;
  tessera_tensor whole =
      flatView(gradients, dtype, bucket.offset, bucket.elements);
  if (mode == ReduceMode::AllReduce) {
    checkComm(
        tessera_comm_all_reduce(comm, &whole, TESSERA_REDUCE_SUM, commStream));
    return;
  }
  int64_t block = bucket.elements / comm->size();
  tessera_tensor shard =
      flatView(gradients, dtype, bucket.offset + comm->rank() * block, block);
  checkComm(tessera_comm_reduce_scatter(comm, &whole, &shard, 0, commStream));
}

void GradientReducer::finish() {
  // Gradients that never reported ready (a step without the callback) are
  // written by now on the compute stream; the bucket event covers them.
  const std::vector<GradientBucket> &buckets = bucketLayout.buckets();
  for (; launchedBuckets < buckets.size(); ++launchedBuckets)
    if (!reducedOncePerStep(launchedBuckets))
      launchBucket(launchedBuckets);
  StreamOps &ops = comm->streamOps();
  ops.recordEvent(doneEvent, commStream);
  ops.waitEvent(computeStream, doneEvent);
  resetStep();
}

void GradientReducer::finishHeldBuckets() {
  if (!heldOncePerStep)
    return;
  // Their sums were written on the compute stream.
  StreamOps &ops = comm->streamOps();
  for (size_t b = 0; b < bucketLayout.buckets().size(); ++b)
    if (reducedOncePerStep(b))
      launchBucket(b);
  ops.recordEvent(doneEvent, commStream);
  ops.waitEvent(computeStream, doneEvent);
}

void GradientReducer::allGatherShards(void *buffer, int32_t bufferDtype) {
  gatherShards(buffer, bufferDtype, nullptr);
}

void GradientReducer::allGatherShards(void *buffer, int32_t bufferDtype,
                                      const std::vector<BucketPlace> &places) {
  // Looked up by binary search once per bucket and step: the order is the
  // caller's promise, checked.
  if (!std::is_sorted(places.begin(), places.end(),
                      [](const BucketPlace &a, const BucketPlace &b) {
                        return a.bucketOffset < b.bucketOffset;
                      }))
    throw CommError("gradient reducer: the buckets' places in a packed "
                    "buffer are not in buffer order");
  gatherShards(buffer, bufferDtype, &places);
}

void GradientReducer::gatherShards(void *buffer, int32_t bufferDtype,
                                   const std::vector<BucketPlace> *places) {
  if (bucketLayout.shardCount() != comm->size())
    throw CommError("gradient reducer: all-gathering shards needs a layout "
                    "planned for " +
                    std::to_string(comm->size()) + " shards");
  // Where `bucket` is in the buffer: at its own offset, or its place (-1:
  // not the buffer's).
  auto placeOf = [&](const GradientBucket &bucket) -> int64_t {
    if (!places)
      return bucket.offset;
    auto place = std::lower_bound(
        places->begin(), places->end(), bucket.offset,
        [](const BucketPlace &candidate, int64_t offset) {
          return candidate.bucketOffset < offset;
        });
    return place != places->end() && place->bucketOffset == bucket.offset
               ? place->bufferOffset
               : -1;
  };
  StreamOps &ops = comm->streamOps();
  ops.recordEvent(bucketEvent, computeStream);
  ops.waitEvent(commStream, bucketEvent);
  // Every rank walks the buckets in the same order, so the gathers match.
  for (const GradientBucket &bucket : bucketLayout.buckets()) {
    const int64_t at = placeOf(bucket);
    if (bucket.elements == 0 || at < 0)
      continue;
    int64_t block = bucket.elements / comm->size();
    tessera_tensor whole = flatView(buffer, bufferDtype, at, bucket.elements);
    tessera_tensor shard =
        flatView(buffer, bufferDtype, at + comm->rank() * block, block);
    checkComm(tessera_comm_all_gather(comm, &shard, &whole, 0, commStream));
  }
  ops.recordEvent(doneEvent, commStream);
  ops.waitEvent(computeStream, doneEvent);
}

ScalarAgreement::ScalarAgreement(tessera_comm *comm, void *stream)
    : comm(comm), stream(stream) {
  if (!comm)
    throw CommError("scalar agreement: no communicator");
  deviceScalars = comm->streamOps().allocate(capacity * sizeof(double));
}

ScalarAgreement::~ScalarAgreement() {
  comm->streamOps().release(deviceScalars);
}

void ScalarAgreement::reduce(double *values, size_t count, int32_t op) {
  StreamOps &ops = comm->streamOps();
  if (count > capacity) {
    ops.release(deviceScalars);
    deviceScalars = ops.allocate(count * sizeof(double));
    capacity = count;
  }
  const size_t bytes = count * sizeof(double);
  ops.copyToComm(deviceScalars, values, bytes, stream);
  tessera_tensor tensor =
      flatView(deviceScalars, TESSERA_F64, 0, static_cast<int64_t>(count));
  checkComm(tessera_comm_all_reduce(comm, &tensor, op, stream));
  ops.copyToHost(values, deviceScalars, bytes, stream);
}

double ScalarAgreement::sum(double value) {
  reduce(&value, 1, TESSERA_REDUCE_SUM);
  return value;
}

double ScalarAgreement::max(double value) {
  reduce(&value, 1, TESSERA_REDUCE_MAX);
  return value;
}

void ScalarAgreement::sumEach(std::vector<double> &values) {
  if (!values.empty())
    reduce(values.data(), values.size(), TESSERA_REDUCE_SUM);
}

} // namespace tessera::comm
