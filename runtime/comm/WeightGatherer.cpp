//===- WeightGatherer.cpp - ZeRO-3's all-gathers as the step reads --------===//

#include "tessera/runtime/weight_gatherer.h"

#include "CommBase.h"
#include "TensorBlocks.h"

#include <algorithm>
#include <string>

namespace tessera::comm {

WeightGatherer::WeightGatherer(
    tessera_comm *comm, GradientLayout layout, WeightRing ring,
    std::array<KindBuffers, WeightRing::kKinds> kinds, void *computeStream,
    void *commStream)
    : comm(comm), bucketLayout(std::move(layout)), plan(std::move(ring)),
      buffers(kinds), computeStream(computeStream), commStream(commStream) {
  if (!comm)
    throw CommError("weight gatherer: no communicator");
  if (bucketLayout.shardCount() != comm->size())
    throw CommError("weight gatherer: ZeRO-3 needs a layout planned for " +
                    std::to_string(comm->size()) + " shards, not " +
                    std::to_string(bucketLayout.shardCount()));
  const std::vector<int32_t> &announced = plan.announcedPositions();
  firstReadAt.assign(announced.size(), {});
  for (size_t g = 0; g < plan.gathers().size(); ++g) {
    const WeightGather &gather = plan.gathers()[g];
    if (!buffers[static_cast<size_t>(gather.kind)].ring)
      throw CommError("weight gatherer: no buffers for kind " +
                      std::to_string(gather.kind));
    auto at = std::lower_bound(announced.begin(), announced.end(),
                               gather.firstRead);
    firstReadAt[static_cast<size_t>(at - announced.begin())].push_back(g);
  }
  StreamOps &ops = comm->streamOps();
  readsDone = ops.createEvent();
  for (size_t g = 0; g < plan.gathers().size(); ++g)
    gatherDone.push_back(ops.createEvent());
}

WeightGatherer::~WeightGatherer() {
  StreamOps &ops = comm->streamOps();
  ops.destroyEvent(readsDone);
  for (void *event : gatherDone)
    ops.destroyEvent(event);
}

void WeightGatherer::weightsNeeded(void *user, int32_t position) {
  static_cast<WeightGatherer *>(user)->onWeightsNeeded(position);
}

void WeightGatherer::onWeightsNeeded(int32_t position) {
  const std::vector<int32_t> &announced = plan.announcedPositions();
  if (nextAnnounced >= announced.size() ||
      announced[nextAnnounced] != position)
    throw CommError(
        "weight gatherer: the step announced read position " +
        std::to_string(position) + " where the program's "
        "parameter_read_intervals expect " +
        (nextAnnounced < announced.size()
             ? std::to_string(announced[nextAnnounced])
             : std::string("no more")));
  StreamOps &ops = comm->streamOps();
  const std::vector<WeightGather> &gathers = plan.gathers();
  if (nextGather < gathers.size() && gathers[nextGather].launchAt == position) {
    // The places about to be written were last read before this call.
    ops.recordEvent(readsDone, computeStream);
    ops.waitEvent(commStream, readsDone);
  }
  const int64_t ranks = comm->size();
  for (; nextGather < gathers.size() && gathers[nextGather].launchAt == position;
       ++nextGather) {
    const WeightGather &gather = gathers[nextGather];
    const KindBuffers &kind = buffers[static_cast<size_t>(gather.kind)];
    const int64_t elements =
        bucketLayout.buckets()[static_cast<size_t>(gather.bucket)].elements;
    tessera_tensor block =
        flatView(kind.shard, kind.dtype,
                 plan.shardOffset(gather.kind, gather.bucket), elements / ranks);
    tessera_tensor whole =
        flatView(kind.ring, kind.dtype,
                 plan.ringOffset(gather.kind, gather.bucket), elements);
    checkComm(tessera_comm_all_gather(comm, &block, &whole, 0, commStream));
    ops.recordEvent(gatherDone[nextGather], commStream);
  }
  for (size_t g : firstReadAt[nextAnnounced])
    ops.waitEvent(computeStream, gatherDone[g]);
  ++nextAnnounced;
}

void WeightGatherer::finishMicroBatch() {
  if (nextAnnounced != plan.announcedPositions().size() ||
      nextGather != plan.gathers().size())
    throw CommError("weight gatherer: the step announced " +
                    std::to_string(nextAnnounced) + " of " +
                    std::to_string(plan.announcedPositions().size()) +
                    " read positions and launched " +
                    std::to_string(nextGather) + " of " +
                    std::to_string(plan.gathers().size()) + " gathers");
  nextAnnounced = 0;
  nextGather = 0;
}

} // namespace tessera::comm
