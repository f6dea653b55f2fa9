//===- GradientRingTest.cpp - ZeRO-2's ring of whole gradients ------------===//
//
// Where each bucket's whole gradients live between their first write and
// their reduce-scatter: buckets busy at the same time never share bytes,
// buckets never busy together do, and a write that reuses a place names the
// buckets it must wait for. Bad write positions are refused by name.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/gradient_ring.h"

#include "tessera/runtime/comm_error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace tessera::comm;

namespace {

// Four parameters of 128 elements, a bucket each (bucket 0 holds the last
// parameter), sharded over 2 ranks; written as a backward writes them, the
// last layer first: parameter 3 at position 0, ..., parameter 0 at 3.
GradientLayout fourLayers() {
  return GradientLayout::plan({128, 128, 128, 128}, 128, /*shardCount=*/2,
                              128);
}

bool overlap(const GradientRing &ring, const GradientLayout &layout,
             int32_t a, int32_t b) {
  auto size = [&](int32_t bucket) {
    return layout.buckets()[static_cast<size_t>(bucket)].elements;
  };
  int64_t a0 = ring.bucketOffset(a), b0 = ring.bucketOffset(b);
  return a0 < b0 + size(b) && b0 < a0 + size(a);
}

} // namespace

// Tests that a backward writing one bucket after another, each launched
// right after its write, needs a single bucket's place, every later bucket
// reusing the earlier ones', and that each reuse names the buckets to wait
// for before the write.
TEST(GradientRingTest, BucketsWrittenOneAfterAnotherShareOnePlace) {
  GradientLayout layout = fourLayers();
  GradientRing ring = GradientRing::plan(layout, {3, 2, 1, 0});
  ASSERT_EQ(layout.buckets().size(), 4u);
  EXPECT_EQ(ring.largestBucket(), layout.buckets()[0].elements);
  EXPECT_EQ(ring.totalElements(), ring.largestBucket());
  for (int32_t b = 1; b < 4; ++b) {
    EXPECT_EQ(ring.bucketOffset(b), ring.bucketOffset(0));
    EXPECT_FALSE(ring.reusedBuckets(b).empty()) << b;
  }
  EXPECT_TRUE(ring.reusedBuckets(0).empty());
  // Bucket b's first write is at position b: it waits there.
  for (int32_t position = 1; position < 4; ++position)
    EXPECT_EQ(ring.bucketsReusingAt(position),
              (std::vector<int32_t>{position}));
  EXPECT_TRUE(ring.bucketsReusingAt(0).empty());
  // A gradient sits at its bucket's place.
  for (int32_t p = 0; p < 4; ++p) {
    EXPECT_EQ(ring.writePosition(p), 3 - p);
    EXPECT_EQ(ring.gradientsAt(3 - p), 1);
  }
}

// Tests that buckets whose busy intervals meet never overlap: one call
// writing every gradient (one position) keeps all four busy at once, and
// a bucket written early but launched late (the launch order is the
// buckets') overlaps none of those written before its launch.
TEST(GradientRingTest, BucketsBusyTogetherNeverShareBytes) {
  GradientLayout layout = fourLayers();
  GradientRing together = GradientRing::plan(layout, {0, 0, 0, 0});
  for (int32_t a = 0; a < 4; ++a)
    for (int32_t b = a + 1; b < 4; ++b)
      EXPECT_FALSE(overlap(together, layout, a, b)) << a << " " << b;
  EXPECT_EQ(together.totalElements(), layout.totalElements());
  EXPECT_EQ(together.gradientsAt(0), 4);
  // Parameter 0 (bucket 3) written first, the others after: bucket 3 is
  // busy from position 0 to its launch, after bucket 0's at 3.
  GradientRing early = GradientRing::plan(layout, {0, 3, 2, 1});
  for (int32_t b = 0; b < 3; ++b)
    EXPECT_FALSE(overlap(early, layout, 3, b)) << b;
  EXPECT_GE(early.totalElements(), 2 * early.largestBucket());
  EXPECT_LE(early.totalElements(), layout.totalElements());
}

// Tests that write positions that do not fit the layout are refused with
// what is wrong.
TEST(GradientRingTest, RefusesPositionsThatDoNotFit) {
  GradientLayout layout = fourLayers();
  try {
    GradientRing::plan(layout, {0, 1, 2});
    FAIL() << "three positions for four parameters";
  } catch (const CommError &error) {
    EXPECT_NE(std::string(error.what()).find("3 write positions for 4"),
              std::string::npos)
        << error.what();
  }
  try {
    GradientRing::plan(layout, {0, -1, 2, 3});
    FAIL() << "a gradient without a position";
  } catch (const CommError &error) {
    EXPECT_NE(std::string(error.what()).find("parameter 1"),
              std::string::npos)
        << error.what();
  }
}

// Tests that a parameter in no bucket (a mesh program's complete gradient,
// kUnreduced) has no place in the ring but still its write position, and
// that the buckets around it are placed as if it were not there.
TEST(GradientRingTest, UnreducedParametersHaveNoPlace) {
  constexpr int32_t kOut = GradientLayout::kUnreduced;
  GradientLayout layout = GradientLayout::plan(
      {128, 128, 128}, 128, /*shardCount=*/2, 128, {0, kOut, 0});
  ASSERT_EQ(layout.buckets().size(), 2u);
  GradientRing ring = GradientRing::plan(layout, {2, 1, 0});
  EXPECT_EQ(ring.ringOffset(1), -1);
  EXPECT_EQ(ring.writePosition(1), 1);
  EXPECT_EQ(ring.gradientsAt(1), 1);
  EXPECT_GE(ring.ringOffset(0), 0);
  EXPECT_GE(ring.ringOffset(2), 0);
  // Written one after another, the two buckets share one place.
  EXPECT_EQ(ring.totalElements(), ring.largestBucket());
}

// Tests that a held bucket (a mesh plan's ZeRO-1 parameters beside its
// ZeRO-2 ones) takes no place in the ring and its parameters none, while
// the ring's buckets are placed as if it were not there; and that held
// flags of another count are refused.
TEST(GradientRingTest, HeldBucketsHaveNoPlace) {
  GradientLayout layout = fourLayers();
  ASSERT_EQ(layout.buckets().size(), 4u);
  // Bucket 1 (parameter 2) held; the others written one after another.
  GradientRing ring =
      GradientRing::plan(layout, {3, 2, 1, 0}, {false, true, false, false});
  EXPECT_TRUE(ring.held(1));
  EXPECT_EQ(ring.bucketOffset(1), -1);
  EXPECT_EQ(ring.ringOffset(2), -1);
  EXPECT_EQ(ring.writePosition(2), 1);
  for (int32_t bucket : {0, 2, 3}) {
    EXPECT_FALSE(ring.held(bucket));
    EXPECT_EQ(ring.bucketOffset(bucket), 0);
    for (int32_t other : ring.reusedBuckets(bucket))
      EXPECT_NE(other, 1) << "bucket " << bucket << " waits for the held one";
  }
  EXPECT_EQ(ring.totalElements(), ring.largestBucket());
  // All held: an empty ring.
  GradientRing none =
      GradientRing::plan(layout, {3, 2, 1, 0}, std::vector<bool>(4, true));
  EXPECT_EQ(none.totalElements(), 0);
  EXPECT_EQ(none.largestBucket(), 0);
  try {
    GradientRing::plan(layout, {3, 2, 1, 0}, {true});
    FAIL() << "held flags of one bucket for four";
  } catch (const CommError &error) {
    EXPECT_NE(std::string(error.what()).find("1 held flags for 4 buckets"),
              std::string::npos)
        << error.what();
  }
}
