//===- WeightRing.cpp - When ZeRO-3 gathers each bucket, and where --------===//
//
// See weight_ring.h. Busy intervals are closed, in read positions: a gather
// launched at position a and last read at position z needs its place from
// the hook before call a until call z has run.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/weight_ring.h"

#include "RingPlacement.h"

#include <algorithm>
#include <set>
#include <string>

namespace tessera::comm {
namespace {

[[noreturn]] void fail(const std::string &message) {
  throw CommError("weight ring: " + message);
}

} // namespace

WeightRing WeightRing::plan(const GradientLayout &layout,
                            const std::vector<int32_t> &readIntervals,
                            const std::vector<int32_t> &kinds) {
  const std::vector<GradientSlot> &slots = layout.parameters();
  const std::vector<GradientBucket> &buckets = layout.buckets();
  if (readIntervals.size() != 4 * slots.size() || kinds.size() != slots.size())
    fail(std::to_string(readIntervals.size()) + " read positions and " +
         std::to_string(kinds.size()) + " kinds for " +
         std::to_string(slots.size()) + " parameters");
  WeightRing ring;
  ring.parameterKinds = kinds;
  std::set<int32_t> starts;
  for (size_t p = 0; p < slots.size(); ++p) {
    if (kinds[p] < 0 || kinds[p] >= kKinds)
      fail("parameter " + std::to_string(p) + " has kind " +
           std::to_string(kinds[p]));
    for (int pass = 0; pass < 2; ++pass) {
      const int32_t first = readIntervals[4 * p + 2 * pass];
      const int32_t last = readIntervals[4 * p + 2 * pass + 1];
      if ((first < 0) != (last < 0) || last < first)
        fail("parameter " + std::to_string(p) + "'s reads [" +
             std::to_string(first) + ", " + std::to_string(last) +
             "] are not an interval");
      if (first >= 0)
        starts.insert(first);
    }
  }
  ring.announced.assign(starts.begin(), starts.end());

  // Per kind and bucket: its block in the shard, and its gathers.
  const int64_t ranks = layout.shardCount();
  struct Placed {
    int32_t kind, bucket;
    std::vector<WeightGather> gathers;
  };
  std::vector<Placed> placed;
  for (int32_t kind = 0; kind < kKinds; ++kind) {
    ring.bucketShard[kind].assign(buckets.size(), -1);
    ring.bucketRing[kind].assign(buckets.size(), -1);
    for (size_t b = 0; b < buckets.size(); ++b) {
      const GradientBucket &bucket = buckets[b];
      int32_t lo[2] = {-1, -1}, hi[2] = {-1, -1};
      bool holds = false;
      for (int32_t p = bucket.firstParameter; p <= bucket.lastParameter; ++p) {
        if (kinds[static_cast<size_t>(p)] != kind)
          continue;
        holds = true;
        for (int pass = 0; pass < 2; ++pass) {
          const int32_t first = readIntervals[4 * p + 2 * pass];
          const int32_t last = readIntervals[4 * p + 2 * pass + 1];
          if (first < 0)
            continue;
          lo[pass] = lo[pass] < 0 ? first : std::min(lo[pass], first);
          hi[pass] = std::max(hi[pass], last);
        }
      }
      if (!holds)
        continue;
      ring.bucketShard[kind][b] = ring.shards[kind];
      ring.shards[kind] += bucket.elements / ranks;
      Placed entry{kind, static_cast<int32_t>(b), {}};
      // A forward and a backward interval that meet are one gather.
      if (lo[0] >= 0 && lo[1] >= 0 && lo[1] <= hi[0] + 1) {
        lo[0] = std::min(lo[0], lo[1]);
        hi[0] = std::max(hi[0], hi[1]);
        lo[1] = -1;
      }
      for (int pass = 0; pass < 2; ++pass)
        if (lo[pass] >= 0)
          entry.gathers.push_back(
              {kind, static_cast<int32_t>(b), lo[pass], lo[pass], hi[pass]});
      placed.push_back(std::move(entry));
    }
  }
  // Prefetch: launched at the gather start before its own.
  for (Placed &entry : placed)
    for (WeightGather &gather : entry.gathers) {
      auto at = starts.find(gather.firstRead);
      gather.launchAt = at == starts.begin() ? *at : *std::prev(at);
    }

  // One place per bucket and kind, clear of what is busy with it.
  for (int32_t kind = 0; kind < kKinds; ++kind) {
    std::vector<const Placed *> members;
    std::vector<int64_t> sizes;
    for (const Placed &entry : placed)
      if (entry.kind == kind) {
        members.push_back(&entry);
        sizes.push_back(buckets[static_cast<size_t>(entry.bucket)].elements);
      }
    auto busyTogether = [&](size_t a, size_t b) {
      for (const WeightGather &x : members[a]->gathers)
        for (const WeightGather &y : members[b]->gathers)
          if (x.launchAt <= y.lastRead && y.launchAt <= x.lastRead)
            return true;
      return false;
    };
    RingPlacement placement = placeInRing(sizes, busyTogether);
    for (size_t m = 0; m < members.size(); ++m)
      ring.bucketRing[kind][static_cast<size_t>(members[m]->bucket)] =
          placement.offsets[m];
    ring.rings[kind] = placement.total;
  }
  ring.parameterRing.assign(slots.size(), 0);
  for (size_t b = 0; b < buckets.size(); ++b)
    for (int32_t p = buckets[b].firstParameter; p <= buckets[b].lastParameter;
         ++p) {
      const int32_t kind = kinds[static_cast<size_t>(p)];
      ring.parameterRing[static_cast<size_t>(p)] =
          ring.bucketRing[kind][b] + slots[static_cast<size_t>(p)].offset -
          buckets[b].offset;
    }
  for (const Placed &entry : placed)
    ring.gatherList.insert(ring.gatherList.end(), entry.gathers.begin(),
                           entry.gathers.end());
  std::stable_sort(ring.gatherList.begin(), ring.gatherList.end(),
                   [](const WeightGather &a, const WeightGather &b) {
                     return a.launchAt < b.launchAt;
                   });
  return ring;
}

} // namespace tessera::comm
