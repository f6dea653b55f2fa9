//===- WeightRingTest.cpp - When ZeRO-3 gathers each bucket, and where ----===//

#include "tessera/runtime/weight_ring.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

using namespace tessera::comm;

namespace {

// Three parameters of 128 elements, one bucket each (bucket 0 holds the
// last parameter), split over 2 ranks: each bucket 256 elements, a block
// of 128 per rank. Read like three layers: forward 0, 1, 2, backward 3, 4,
// 5 in reverse.
GradientLayout threeLayers() {
  return GradientLayout::plan({128, 128, 128}, 128, /*shardCount=*/2, 128);
}

} // namespace

// Tests that each bucket is gathered before its reads in each pass, one
// gather ahead, a forward and a backward read that meet being one gather.
TEST(WeightRingTest, GathersOneAheadPerPass) {
  const std::vector<int32_t> reads = {0, 0, 5, 5, 1, 1, 4, 4, 2, 2, 3, 3};
  WeightRing ring = WeightRing::plan(threeLayers(), reads, {0, 0, 0});
  std::vector<std::tuple<int32_t, int32_t, int32_t, int32_t>> gathers;
  for (const WeightGather &gather : ring.gathers())
    gathers.emplace_back(gather.bucket, gather.launchAt, gather.firstRead,
                         gather.lastRead);
  // (bucket, launched at, first read, last read); parameter p is bucket
  // 2 - p.
  const std::vector<std::tuple<int32_t, int32_t, int32_t, int32_t>> expected =
      {{1, 0, 1, 1}, {2, 0, 0, 0}, {0, 1, 2, 3}, {1, 3, 4, 4}, {2, 4, 5, 5}};
  EXPECT_EQ(gathers, expected);
  EXPECT_EQ(ring.announcedPositions(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
}

// Tests that buckets never busy together share a place, one bucket keeping
// its place for both passes, and that each rank's shard is its blocks.
TEST(WeightRingTest, SharesPlacesOfBucketsNeverBusyTogether) {
  const std::vector<int32_t> reads = {0, 0, 5, 5, 1, 1, 4, 4, 2, 2, 3, 3};
  WeightRing ring = WeightRing::plan(threeLayers(), reads, {0, 0, 0});
  // The first and the last layer are never busy together: two places.
  EXPECT_EQ(ring.ringElements(0), 512);
  EXPECT_EQ(ring.ringOffset(0, 0), ring.ringOffset(0, 2));
  EXPECT_NE(ring.ringOffset(0, 0), ring.ringOffset(0, 1));
  EXPECT_EQ(ring.parameterRingOffset(0), ring.ringOffset(0, 2));
  EXPECT_EQ(ring.shardElements(0), 384);
  EXPECT_EQ(ring.shardOffset(0, 2), 256);
  EXPECT_EQ(ring.ringElements(1), 0);
  EXPECT_EQ(ring.shardOffset(1, 0), -1);
}

// Tests that the two kinds are rings of their own, each holding only the
// buckets with a parameter of its kind.
TEST(WeightRingTest, KindsHaveTheirOwnRings) {
  const std::vector<int32_t> reads = {0, 0, -1, -1, 1, 1, 4, 4, 2, 2, 3, 3};
  WeightRing ring = WeightRing::plan(threeLayers(), reads, {1, 0, 0});
  EXPECT_EQ(ring.shardElements(1), 128);
  EXPECT_EQ(ring.ringElements(1), 256);
  EXPECT_EQ(ring.shardOffset(1, 2), 0);
  EXPECT_EQ(ring.shardOffset(0, 2), -1);
  EXPECT_EQ(ring.shardElements(0), 256);
}

// Tests that read positions that are not intervals are refused.
TEST(WeightRingTest, RefusesReadsThatAreNotIntervals) {
  EXPECT_THROW(WeightRing::plan(threeLayers(),
                                {0, -1, 5, 5, 1, 1, 4, 4, 2, 2, 3, 3},
                                {0, 0, 0}),
               CommError);
  EXPECT_THROW(WeightRing::plan(threeLayers(), {0, 0, 5, 5}, {0, 0, 0}),
               CommError);
}
