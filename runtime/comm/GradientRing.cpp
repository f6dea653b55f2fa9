//===- GradientRing.cpp - Which buckets share a slot of the ring ----------===//
//
// See gradient_ring.h. The busy interval of bucket b is [first write of its
// gradients, launch position], the launch position being the largest last
// write of buckets 0..b (the reducer launches in bucket order). Intervals
// are closed: a call that writes the last gradient of one bucket and the
// first of another needs both places at once.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/gradient_ring.h"

#include "RingPlacement.h"

#include <algorithm>
#include <string>

namespace tessera::comm {
namespace {

[[noreturn]] void fail(const std::string &message) {
  throw CommError("gradient ring: " + message);
}

} // namespace

GradientRing GradientRing::plan(const GradientLayout &layout,
                                const std::vector<int32_t> &writePositions,
                                const std::vector<bool> &heldBuckets) {
  const std::vector<GradientSlot> &slots = layout.parameters();
  const std::vector<GradientBucket> &buckets = layout.buckets();
  if (writePositions.size() != slots.size())
    fail(std::to_string(writePositions.size()) + " write positions for " +
         std::to_string(slots.size()) + " parameters");
  if (!heldBuckets.empty() && heldBuckets.size() != buckets.size())
    fail(std::to_string(heldBuckets.size()) + " held flags for " +
         std::to_string(buckets.size()) + " buckets");
  auto isHeld = [&](size_t bucket) {
    return !heldBuckets.empty() && heldBuckets[bucket];
  };
  GradientRing ring;
  ring.positions = writePositions;
  int32_t positionCount = 0;
  for (size_t p = 0; p < writePositions.size(); ++p) {
    if (writePositions[p] < 0)
      fail("parameter " + std::to_string(p) +
           "'s gradient has no write position");
    positionCount = std::max(positionCount, writePositions[p] + 1);
  }
  ring.gradientCounts.assign(static_cast<size_t>(positionCount), 0);
  for (int32_t position : writePositions)
    ++ring.gradientCounts[static_cast<size_t>(position)];
  ring.reusing.assign(static_cast<size_t>(positionCount), {});

  // Busy intervals, in bucket (launch) order.
  const size_t count = buckets.size();
  std::vector<int32_t> first(count), launched(count);
  int32_t launch = -1;
  for (size_t b = 0; b < count; ++b) {
    int32_t lo = positionCount, hi = -1;
    for (int32_t p = buckets[b].firstParameter; p <= buckets[b].lastParameter;
         ++p) {
      lo = std::min(lo, writePositions[static_cast<size_t>(p)]);
      hi = std::max(hi, writePositions[static_cast<size_t>(p)]);
    }
    // A held bucket takes no place but is launched in bucket order, so
    // it delays the launches after it (or, reduced after the last
    // micro-batch, frees them earlier than planned: still safe).
    launch = std::max(launch, hi);
    first[b] = lo;
    launched[b] = launch;
    if (!isHeld(b))
      ring.largest = std::max(ring.largest, buckets[b].elements);
  }
  auto busyTogether = [&](size_t a, size_t b) {
    return first[a] <= launched[b] && first[b] <= launched[a];
  };
  // Buckets busy together never share bytes; a held one takes none.
  std::vector<int64_t> sizes;
  for (size_t b = 0; b < count; ++b)
    sizes.push_back(isHeld(b) ? 0 : buckets[b].elements);
  RingPlacement placement = placeInRing(sizes, busyTogether);
  ring.bucketOffsets = std::move(placement.offsets);
  for (size_t b = 0; b < count; ++b)
    if (isHeld(b))
      ring.bucketOffsets[b] = -1;
  ring.total = placement.total;
  // Who waits for whom: the later of two buckets that share bytes.
  ring.reused.assign(count, {});
  for (size_t b = 0; b < count; ++b) {
    for (size_t other = 0; other < count; ++other) {
      const bool shareBytes =
          other != b && !isHeld(b) && !isHeld(other) &&
          ring.bucketOffsets[other] <
              ring.bucketOffsets[b] + buckets[b].elements &&
          ring.bucketOffsets[b] <
              ring.bucketOffsets[other] + buckets[other].elements;
      if (shareBytes && launched[other] < first[b])
        ring.reused[b].push_back(static_cast<int32_t>(other));
    }
    if (!ring.reused[b].empty())
      ring.reusing[static_cast<size_t>(first[b])].push_back(
          static_cast<int32_t>(b));
  }
  // A parameter in no bucket (kUnreduced) or a held one has no place in
  // the ring.
  ring.ringOffsets.assign(slots.size(), -1);
  for (size_t b = 0; b < count; ++b)
    for (int32_t p = buckets[b].firstParameter;
         !isHeld(b) && p <= buckets[b].lastParameter; ++p)
      ring.ringOffsets[static_cast<size_t>(p)] =
          ring.bucketOffsets[b] + slots[static_cast<size_t>(p)].offset -
          buckets[b].offset;
  return ring;
}

} // namespace tessera::comm
