//===- GradientLayout.cpp - Parameters and buckets in one gradient buffer -===//
//
// Buckets are cut walking the parameters backwards (the backward pass
// finishes the last layers first), closing a bucket as soon as it holds
// bucketElements: the first bucket can start reducing while the early
// layers are still being differentiated. In memory the parameters stay in
// parameter order, so a bucket is one contiguous range and its collective
// is one call. Sharded layouts pad each bucket so it splits into equal,
// aligned blocks, one per rank.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/gradient_reducer.h"

#include <algorithm>
#include <string>

namespace tessera::comm {
namespace {

[[noreturn]] void fail(const std::string &message) {
  throw CommError("gradient layout: " + message);
}

/// Parameter ranges [first, last] of the buckets, last parameters first.
/// With `groups` (one per parameter), a bucket never holds parameters of
/// two groups (-1: none; an empty parameter joins any bucket), so that
/// each block of a sharded bucket is one group's; a kUnreduced parameter
/// closes the bucket before it and joins none.
std::vector<std::pair<int32_t, int32_t>>
cutBuckets(const std::vector<int64_t> &elements, int64_t bucketElements,
           const std::vector<int32_t> &groups) {
  if (bucketElements < 1)
    fail("the bucket size must be at least one element (--bucket-mb)");
  if (!groups.empty() && groups.size() != elements.size())
    fail("the parameter groups do not match the parameters");
  std::vector<std::pair<int32_t, int32_t>> buckets;
  int64_t filled = 0;
  int32_t group = -1;
  bool open = false;
  for (auto p = static_cast<int32_t>(elements.size()); p-- > 0;) {
    const int32_t mine = groups.empty() ? -1 : groups[static_cast<size_t>(p)];
    if (mine == GradientLayout::kUnreduced) {
      open = false;
      continue;
    }
    if (open && mine >= 0 && group >= 0 && mine != group)
      open = false;
    if (!open) {
      buckets.emplace_back(p, p);
      filled = 0;
      group = -1;
      open = true;
    }
    buckets.back().first = p;
    if (mine >= 0)
      group = mine;
    filled += elements[static_cast<size_t>(p)];
    if (filled >= bucketElements)
      open = false;
  }
  return buckets;
}

} // namespace

GradientLayout
GradientLayout::plan(const std::vector<int64_t> &parameterElements,
                     int64_t bucketElements, int32_t shardCount,
                     int64_t sliceAlignment,
                     const std::vector<int32_t> &groups) {
  if (shardCount < 1)
    fail("the shard count must be positive");
  if (sliceAlignment < 1)
    fail("the slice alignment must be positive");
  for (size_t p = 0; p < parameterElements.size(); ++p)
    if (parameterElements[p] < 0)
      fail("parameter " + std::to_string(p) + " has a negative size");
  GradientLayout layout;
  layout.shards = shardCount;
  layout.slots.resize(parameterElements.size());
  std::vector<std::pair<int32_t, int32_t>> ranges =
      cutBuckets(parameterElements, bucketElements, groups);
  auto roundUp = [](int64_t value, int64_t multiple) {
    return (value + multiple - 1) / multiple * multiple;
  };
  int64_t granule = shardCount > 1
                        ? shardCount * std::max(sliceAlignment, kShardAlignment)
                        : sliceAlignment;
  int64_t cursor = 0;
  // The kUnreduced parameters from `next` up to `end`, each at its slice
  // alignment, then the cursor at a block granule again for a bucket.
  int32_t next = 0;
  auto placeUnreduced = [&](int32_t end) {
    if (next == end)
      return;
    for (; next < end; ++next) {
      cursor = roundUp(cursor, sliceAlignment);
      layout.slots[static_cast<size_t>(next)] = {
          cursor, parameterElements[static_cast<size_t>(next)]};
      cursor += parameterElements[static_cast<size_t>(next)];
    }
    cursor = roundUp(cursor, granule);
  };
  // Place the buckets in memory order (first parameters first).
  for (auto range = ranges.rbegin(); range != ranges.rend(); ++range) {
    placeUnreduced(range->first);
    next = range->second + 1;
    GradientBucket bucket;
    bucket.firstParameter = range->first;
    bucket.lastParameter = range->second;
    bucket.offset = cursor;
    for (int32_t p = range->first; p <= range->second; ++p) {
      cursor = roundUp(cursor, sliceAlignment);
      layout.slots[static_cast<size_t>(p)] = {
          cursor, parameterElements[static_cast<size_t>(p)]};
      cursor += parameterElements[static_cast<size_t>(p)];
    }
    bucket.elements = roundUp(cursor - bucket.offset, granule);
    cursor = bucket.offset + bucket.elements;
    layout.bucketList.insert(layout.bucketList.begin(), bucket);
  }
  placeUnreduced(static_cast<int32_t>(parameterElements.size()));
  layout.total = cursor;
  return layout;
}

bool GradientLayout::isReduced(int32_t parameter) const {
  for (const GradientBucket &bucket : bucketList)
    if (parameter >= bucket.firstParameter &&
        parameter <= bucket.lastParameter)
      return true;
  return false;
}

GradientLayout GradientLayout::fromSlots(std::vector<GradientSlot> slots,
                                         int64_t bucketElements) {
  std::vector<int64_t> elements;
  int64_t end = 0;
  for (size_t p = 0; p < slots.size(); ++p) {
    if (slots[p].offset < end || slots[p].elements < 0)
      fail("parameter " + std::to_string(p) + " at element " +
           std::to_string(slots[p].offset) +
           " overlaps the previous one or is out of parameter order");
    end = slots[p].offset + slots[p].elements;
    elements.push_back(slots[p].elements);
  }
  GradientLayout layout;
  for (const auto &range : cutBuckets(elements, bucketElements, {})) {
    GradientBucket bucket;
    bucket.firstParameter = range.first;
    bucket.lastParameter = range.second;
    bucket.offset = slots[static_cast<size_t>(range.first)].offset;
    const GradientSlot &last = slots[static_cast<size_t>(range.second)];
    bucket.elements = last.offset + last.elements - bucket.offset;
    layout.bucketList.push_back(bucket);
  }
  layout.slots = std::move(slots);
  layout.total = end;
  return layout;
}

std::vector<ShardSegment> GradientLayout::shardSegments(int32_t rank) const {
  if (rank < 0 || rank >= shards)
    fail("rank " + std::to_string(rank) + " has no shard in a layout of " +
         std::to_string(shards) + " shards");
  std::vector<ShardSegment> segments;
  for (auto bucket = bucketList.rbegin(); bucket != bucketList.rend();
       ++bucket) {
    int64_t block = bucket->elements / shards;
    int64_t begin = bucket->offset + rank * block;
    int64_t end = begin + block;
    for (int32_t p = bucket->firstParameter; p <= bucket->lastParameter; ++p) {
      const GradientSlot &slot = slots[static_cast<size_t>(p)];
      int64_t from = std::max(begin, slot.offset);
      int64_t to = std::min(end, slot.offset + slot.elements);
      if (from < to)
        segments.push_back({p, from - slot.offset, from, to - from});
    }
  }
  return segments;
}

} // namespace tessera::comm
