//===- weight_ring.h - ZeRO-3's transient whole weights ---------*- C++ -*-===//
//
// Under ZeRO-3 a rank keeps only its shard of the weights the step reads
// (the compute copies, and f32 mirrors of the parameters read as f32), as
// blocks of the gradient layout's buckets (a bucket being a few layers'
// parameters, split into one block per rank exactly as the gradients'
// reduce-scatter splits it). A bucket's whole weights are needed only while
// the step reads them, so each is all-gathered into a place in a RING
// before its first read in the forward pass, and again before its first
// read in the backward pass (between the two its place may serve other
// buckets, FSDP's free after forward and re-gather for backward).
//
// When: program.h's parameter_read_intervals gives, per parameter, the
// first and last read position in each pass; a bucket's interval in a pass
// runs from its parameters' earliest first read to their latest last read
// (a forward and a backward interval that meet are one). Each such GATHER
// is launched one gather ahead: at the first read of the gather before it
// (prefetch, so that on a GPU the all-gather of layer l + 1 runs behind
// layer l's kernels), the first gather at its own first read. Its place is
// busy from its launch to its last read.
//
// Where: a bucket keeps ONE place for both of its gathers (the step may
// keep a view of a weight from the forward pass for the backward, so a
// weight's address must not move); buckets whose gathers are never busy
// together share bytes (RingPlacement). Compute copies and f32 mirrors are
// two rings (two dtypes), each holding the buckets with a parameter of its
// kind.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_WEIGHT_RING_H
#define TESSERA_RUNTIME_WEIGHT_RING_H

#include "tessera/runtime/gradient_reducer.h"

#include <cstdint>
#include <vector>

namespace tessera::comm {

/// One all-gather of one bucket's weights of one kind.
struct WeightGather {
  int32_t kind = 0;
  int32_t bucket = 0;
  /// Read positions: launched before the call at `launchAt`, waited for
  /// before the call at `firstRead`, needed until after `lastRead`.
  int32_t launchAt = 0, firstRead = 0, lastRead = 0;
};

class WeightRing {
public:
  /// The kinds of weights the step reads: compute copies (the compute
  /// dtype) and f32 mirrors.
  static constexpr int32_t kKinds = 2;

  /// The ring of `layout`'s buckets (planned for the comm's size) for a
  /// step that reads parameter p in positions readIntervals[4p .. 4p + 3]
  /// (program.h's parameter_read_intervals) as kind kinds[p]. Throws
  /// CommError when they do not fit the layout.
  static WeightRing plan(const GradientLayout &layout,
                         const std::vector<int32_t> &readIntervals,
                         const std::vector<int32_t> &kinds);

  /// Elements of kind `kind`'s ring, and of one rank's shard of that kind
  /// (its block of every bucket holding a parameter of the kind).
  int64_t ringElements(int32_t kind) const { return rings[kind]; }
  int64_t shardElements(int32_t kind) const { return shards[kind]; }
  /// Where bucket `bucket`'s weights of kind `kind` are in the ring and
  /// where this rank's block of them is in its shard; -1 when the bucket
  /// holds no parameter of that kind.
  int64_t ringOffset(int32_t kind, int32_t bucket) const {
    return bucketRing[kind][static_cast<size_t>(bucket)];
  }
  int64_t shardOffset(int32_t kind, int32_t bucket) const {
    return bucketShard[kind][static_cast<size_t>(bucket)];
  }
  /// Where the step reads parameter `parameter`: in its kind's ring.
  int64_t parameterRingOffset(int32_t parameter) const {
    return parameterRing[static_cast<size_t>(parameter)];
  }
  int32_t kindOf(int32_t parameter) const {
    return parameterKinds[static_cast<size_t>(parameter)];
  }
  /// Every gather of a step, by launch position (then kind, bucket): the
  /// order every rank launches them in.
  const std::vector<WeightGather> &gathers() const { return gatherList; }
  /// The read positions the step announces (tessera_weights_needed): the
  /// parameters' interval starts, increasing.
  const std::vector<int32_t> &announcedPositions() const { return announced; }

private:
  int64_t rings[kKinds] = {0, 0};
  int64_t shards[kKinds] = {0, 0};
  std::vector<int64_t> bucketRing[kKinds], bucketShard[kKinds];
  std::vector<int64_t> parameterRing;
  std::vector<int32_t> parameterKinds;
  std::vector<WeightGather> gatherList;
  std::vector<int32_t> announced;
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_WEIGHT_RING_H
