//===- weight_gatherer.h - ZeRO-3's all-gathers as the step reads -*- C++ -*-===//
//
// Runs a WeightRing's gathers (weight_ring.h) while the step runs: the step
// calls onWeightsNeeded(position) (tessera_step_context's weights_needed)
// before each call that starts some parameter's reads. There the gatherer
// launches the gathers due at that position, on the comm stream after the
// compute stream's work so far (which includes the last reads of whatever
// the gathered places held before), and makes the compute stream wait for
// the gathers whose first read is that call. Every rank's step announces
// the same positions, so the ranks' all-gathers always match.
//
// On a host comm (the CPU backend's thread ranks) it runs synchronously:
// streams and events are no-ops, and a gather is done when its call
// returns.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_WEIGHT_GATHERER_H
#define TESSERA_RUNTIME_WEIGHT_GATHERER_H

#include "tessera/runtime/weight_ring.h"

#include <array>
#include <cstdint>
#include <vector>

namespace tessera::comm {

class WeightGatherer {
public:
  /// One kind's memory: the rank's shard (WeightRing::shardElements) and
  /// the ring (WeightRing::ringElements), of `dtype`; null for a kind the
  /// step does not read.
  struct KindBuffers {
    void *shard = nullptr;
    void *ring = nullptr;
    int32_t dtype = 0;
  };

  /// The gathers of `ring` (planned for `layout`, sharded for the comm's
  /// size) between `kinds`' shards and rings.
  WeightGatherer(tessera_comm *comm, GradientLayout layout, WeightRing ring,
                 std::array<KindBuffers, WeightRing::kKinds> kinds,
                 void *computeStream, void *commStream);
  ~WeightGatherer();
  WeightGatherer(const WeightGatherer &) = delete;
  WeightGatherer &operator=(const WeightGatherer &) = delete;

  /// tessera_step_context's weights_needed: `user` is the gatherer.
  static void weightsNeeded(void *user, int32_t position);
  void onWeightsNeeded(int32_t position);
  /// After each forward_backward call: checks that the step announced
  /// every position the plan expects, and starts the next call's count.
  void finishMicroBatch();

private:
  tessera_comm *comm;
  GradientLayout bucketLayout;
  WeightRing plan;
  std::array<KindBuffers, WeightRing::kKinds> buffers;
  void *computeStream;
  void *commStream;
  /// Recorded on the compute stream before a launch; per gather, recorded
  /// on the comm stream when it is done.
  void *readsDone = nullptr;
  std::vector<void *> gatherDone;
  /// Per announced position, the gathers whose first read it is.
  std::vector<std::vector<size_t>> firstReadAt;
  size_t nextAnnounced = 0;
  size_t nextGather = 0;
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_WEIGHT_GATHERER_H
