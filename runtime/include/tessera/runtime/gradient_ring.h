//===- gradient_ring.h - ZeRO-2's transient whole gradients -----*- C++ -*-===//
//
// Under ZeRO-2 a rank keeps only its shard of the reduced gradients; the
// whole gradients the step writes are needed only from a bucket's first
// write until its reduce-scatter. So the step writes them into a RING, one
// buffer where each bucket has a place, and a later bucket's place may be
// an earlier one's once that one is reduce-scattered: the rank's resident
// gradient memory is its shard (1/N) plus the ring.
//
// Which buckets may overlap follows from when the step writes each gradient
// (program.h's gradient_write_positions): bucket b is busy from the first
// write of any of its gradients to the position at which the reducer
// launches it, which is the last write of its own gradients or of an
// earlier bucket's (buckets are launched in bucket order). Buckets whose
// busy intervals meet never overlap in the ring. They are placed as the
// arena planner places tensors: largest first, each at the lowest offset
// free of the buckets busy with it, so the ring comes close to the most
// gradient memory busy at once (never below the largest bucket: a
// parameter's gradient is one call's output, whole).
//
// A bucket the rank holds whole (a mesh plan's ZeRO-1 parameters beside its
// ZeRO-2 ones: runtime/train/MeshZero.h) has no place in the ring: the
// driver keeps it for the whole step and reduce-scatters it in place.
//
// On a GPU the compute stream must also wait for the reduce-scatters that
// free a bucket's place before its first write: after the last gradient of
// write position p is announced, the reducer makes the compute stream wait
// for the buckets whose places those first written at p + 1 reuse
// (`bucketsReusingAt`, `reusedBuckets`).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_GRADIENT_RING_H
#define TESSERA_RUNTIME_GRADIENT_RING_H

#include "tessera/runtime/gradient_reducer.h"

#include <cstdint>
#include <vector>

namespace tessera::comm {

class GradientRing {
public:
  /// The ring of `layout`'s buckets for a step whose gradient p is written
  /// at position writePositions[p] (one per parameter, each >= 0), but for
  /// the buckets b with heldBuckets[b] (empty: none), which the rank holds
  /// whole elsewhere. Throws CommError when the positions do not fit the
  /// layout.
  static GradientRing plan(const GradientLayout &layout,
                           const std::vector<int32_t> &writePositions,
                           const std::vector<bool> &heldBuckets = {});

  /// Elements of the largest bucket in the ring, and of the whole ring.
  int64_t largestBucket() const { return largest; }
  int64_t totalElements() const { return total; }
  /// Where bucket `bucket` (launch order, as the layout's buckets) starts
  /// in the ring; -1 for a held bucket.
  int64_t bucketOffset(int32_t bucket) const {
    return bucketOffsets[static_cast<size_t>(bucket)];
  }
  /// Whether bucket `bucket` is held whole, outside the ring.
  bool held(int32_t bucket) const { return bucketOffset(bucket) < 0; }
  /// Where parameter `parameter`'s gradient is in the ring: its bucket's
  /// place, at its place in the bucket; -1 for a parameter in no bucket
  /// (GradientLayout::kUnreduced) or in a held one, whose whole gradient
  /// the driver keeps elsewhere.
  int64_t ringOffset(int32_t parameter) const {
    return ringOffsets[static_cast<size_t>(parameter)];
  }
  /// The write position of parameter `parameter`'s gradient (every
  /// parameter's, in a bucket or not: the step announces them all).
  int32_t writePosition(int32_t parameter) const {
    return positions[static_cast<size_t>(parameter)];
  }
  /// How many gradients are written at position `position`.
  int32_t gradientsAt(int32_t position) const {
    return gradientCounts[static_cast<size_t>(position)];
  }
  int32_t positionCount() const {
    return static_cast<int32_t>(gradientCounts.size());
  }
  /// The buckets whose first gradient is written at `position` and whose
  /// place overlaps earlier buckets' of the same step: before that write
  /// those buckets' reduce-scatters must be done.
  const std::vector<int32_t> &bucketsReusingAt(int32_t position) const {
    return reusing[static_cast<size_t>(position)];
  }
  /// The earlier buckets whose places bucket `bucket`'s overlaps.
  const std::vector<int32_t> &reusedBuckets(int32_t bucket) const {
    return reused[static_cast<size_t>(bucket)];
  }

private:
  int64_t largest = 0;
  int64_t total = 0;
  std::vector<int64_t> bucketOffsets;
  std::vector<std::vector<int32_t>> reused;
  std::vector<int64_t> ringOffsets;
  std::vector<int32_t> positions;
  std::vector<int32_t> gradientCounts;
  std::vector<std::vector<int32_t>> reusing;
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_GRADIENT_RING_H
