//===- GradientReducerTest.cpp - Buckets, ZeRO shards, agreement ----------===//
//
// The reducer on thread ranks (host memory, synchronous): bucketed
// reduction equals one plain all-reduce whatever order the gradients
// arrive in; ZeRO-1's reduce-scatter leaves each rank the sums of its
// shard, and the all-gather restores every element everywhere.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/gradient_reducer.h"
#include "tessera/runtime/thread_comm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>

using namespace tessera::comm;

namespace {

const std::vector<int64_t> kParameters = {5, 300, 7, 64, 1, 129};

float gradientValue(int32_t rank, int64_t element) {
  return static_cast<float>(rank + 1) * 0.25f + static_cast<float>(element);
}

/// Fills `gradients` with the rank's gradientValues and reduce-scatters
/// every bucket of `layout` (ZeRO-1), the gradients reported last one
/// first; returns the reducer for its all-gathers.
std::unique_ptr<GradientReducer> reduceScatter(const RankComms &comms,
                                               const GradientLayout &layout,
                                               std::vector<float> &gradients) {
  gradients.resize(static_cast<size_t>(layout.totalElements()));
  for (size_t e = 0; e < gradients.size(); ++e)
    gradients[e] = gradientValue(comms.rank, static_cast<int64_t>(e));
  auto reducer = std::make_unique<GradientReducer>(
      comms.world, layout, gradients.data(), TESSERA_F32,
      ReduceMode::ReduceScatter, nullptr, nullptr);
  for (auto p = static_cast<int32_t>(layout.parameters().size()); p-- > 0;)
    reducer->onGradientReady(p);
  reducer->finish();
  return reducer;
}

} // namespace

// Tests that buckets are cut from the last parameter backwards and the
// parameters stay in order in memory.
TEST(GradientLayoutTest, BucketsInReverseOrder) {
  GradientLayout layout = GradientLayout::plan(kParameters, 100);
  ASSERT_EQ(layout.buckets().size(), 3u);
  EXPECT_EQ(layout.buckets()[0].firstParameter, 5); // 129 >= 100
  EXPECT_EQ(layout.buckets()[1].firstParameter, 1); // 300 + 7 + 64 + 1
  EXPECT_EQ(layout.buckets()[1].lastParameter, 4);
  EXPECT_EQ(layout.buckets()[2].firstParameter, 0);
  EXPECT_EQ(layout.buckets()[2].lastParameter, 0);
  int64_t offset = 0;
  for (size_t p = 0; p < kParameters.size(); ++p) {
    EXPECT_EQ(layout.parameters()[p].offset, offset);
    offset += kParameters[p];
  }
  EXPECT_EQ(layout.totalElements(), offset);
}

// Tests that a sharded layout pads each bucket to aligned equal blocks and
// that the shards cover every parameter element exactly once.
TEST(GradientLayoutTest, ShardsCoverEveryElementOnce) {
  GradientLayout layout = GradientLayout::plan(kParameters, 100, 3);
  for (const GradientBucket &bucket : layout.buckets()) {
    EXPECT_EQ(bucket.elements % (3 * kShardAlignment), 0);
    EXPECT_EQ(bucket.offset % (3 * kShardAlignment), 0);
  }
  std::vector<int> covered(static_cast<size_t>(layout.totalElements()), 0);
  for (int32_t rank = 0; rank < 3; ++rank)
    for (const ShardSegment &segment : layout.shardSegments(rank)) {
      const GradientSlot &slot =
          layout.parameters()[static_cast<size_t>(segment.parameter)];
      EXPECT_EQ(segment.bufferOffset, slot.offset + segment.parameterOffset);
      for (int64_t e = 0; e < segment.elements; ++e)
        ++covered[static_cast<size_t>(segment.bufferOffset + e)];
    }
  for (size_t p = 0; p < kParameters.size(); ++p)
    for (int64_t e = 0; e < kParameters[p]; ++e)
      EXPECT_EQ(covered[static_cast<size_t>(layout.parameters()[p].offset + e)],
                1);
}

// Tests the driver's placement (slices at multiples of 128 elements): the
// same offsets as ParameterLayout, and sharded blocks on 128 boundaries.
TEST(GradientLayoutTest, SliceAlignment) {
  GradientLayout layout = GradientLayout::plan(kParameters, 100, 1, 128);
  int64_t offset = 0;
  for (size_t p = 0; p < kParameters.size(); ++p) {
    EXPECT_EQ(layout.parameters()[p].offset, offset);
    offset = (offset + kParameters[p] + 127) / 128 * 128;
  }
  EXPECT_EQ(layout.totalElements(), offset);
  GradientLayout sharded = GradientLayout::plan(kParameters, 100, 2, 128);
  for (const GradientBucket &bucket : sharded.buckets())
    EXPECT_EQ(bucket.elements % 256, 0);
  for (const GradientSlot &slot : sharded.parameters())
    EXPECT_EQ(slot.offset % 128, 0);
}

// Tests that with groups no bucket holds two groups' parameters (a pipeline
// device's owned ones apart from those it only reads), empty parameters
// joining whichever bucket is open, and a bucket of empty ones having no
// elements.
TEST(GradientLayoutTest, BucketsKeepGroupsApart) {
  const std::vector<int64_t> sizes = {0, 300, 40, 0, 64, 0};
  const std::vector<int32_t> groups = {-1, 1, 0, -1, 0, -1};
  GradientLayout layout = GradientLayout::plan(sizes, 1000, 2, 128, groups);
  ASSERT_EQ(layout.buckets().size(), 2u);
  // The last parameters first: 5 (empty), 4 and 3 and 2 (group 0), then 1
  // (group 1) with the empty 0.
  EXPECT_EQ(layout.buckets()[0].firstParameter, 2);
  EXPECT_EQ(layout.buckets()[0].lastParameter, 5);
  EXPECT_EQ(layout.buckets()[1].firstParameter, 0);
  EXPECT_EQ(layout.buckets()[1].lastParameter, 1);
  for (int32_t rank = 0; rank < 2; ++rank)
    for (const ShardSegment &segment : layout.shardSegments(rank))
      EXPECT_NE(segment.elements, 0);
  GradientLayout empty = GradientLayout::plan({0, 0}, 10, 2, 128, {-1, -1});
  ASSERT_EQ(empty.buckets().size(), 1u);
  EXPECT_EQ(empty.buckets()[0].elements, 0);
  EXPECT_THROW(GradientLayout::plan({1, 2}, 10, 2, 128, {0}), CommError);
}

// Tests that a kUnreduced parameter (a mesh program's gradient the step
// completed) is in no bucket: the buckets around it close, it is placed
// between them at its slice alignment, the next bucket starts on a block
// granule, no shard holds it, and the reducer leaves it as written while
// it reduce-scatters the others.
TEST(GradientLayoutTest, UnreducedParametersStayOutOfBuckets) {
  constexpr int32_t kOut = GradientLayout::kUnreduced;
  const std::vector<int64_t> sizes = {64, 40, 100, 7};
  const std::vector<int32_t> groups = {0, kOut, 0, kOut};
  GradientLayout layout = GradientLayout::plan(sizes, 1000, 2, 128, groups);
  ASSERT_EQ(layout.buckets().size(), 2u);
  EXPECT_EQ(layout.buckets()[0].firstParameter, 2);
  EXPECT_EQ(layout.buckets()[0].lastParameter, 2);
  EXPECT_EQ(layout.buckets()[1].firstParameter, 0);
  EXPECT_EQ(layout.buckets()[1].lastParameter, 0);
  EXPECT_FALSE(layout.isReduced(1));
  EXPECT_FALSE(layout.isReduced(3));
  EXPECT_TRUE(layout.isReduced(0));
  EXPECT_TRUE(layout.isReduced(2));
  const std::vector<GradientSlot> &slots = layout.parameters();
  EXPECT_EQ(slots[1].offset, layout.buckets()[1].elements);
  EXPECT_EQ(layout.buckets()[0].offset % 256, 0);
  EXPECT_GE(layout.buckets()[0].offset, slots[1].offset + 40);
  EXPECT_GE(slots[3].offset,
            layout.buckets()[0].offset + layout.buckets()[0].elements);
  EXPECT_GE(layout.totalElements(), slots[3].offset + 7);
  for (int32_t rank = 0; rank < 2; ++rank)
    for (const ShardSegment &segment : layout.shardSegments(rank))
      EXPECT_TRUE(segment.parameter == 0 || segment.parameter == 2);

  ThreadWorld world({2});
  runThreadRanks(world, [&](const RankComms &comms) {
    std::vector<float> gradients;
    reduceScatter(comms, layout, gradients);
    for (int32_t p : {1, 3})
      for (int64_t e = 0; e < sizes[static_cast<size_t>(p)]; ++e) {
        const int64_t at = slots[static_cast<size_t>(p)].offset + e;
        EXPECT_EQ(gradients[static_cast<size_t>(at)],
                  gradientValue(comms.rank, at));
      }
    for (const ShardSegment &segment : layout.shardSegments(comms.rank))
      for (int64_t e = 0; e < segment.elements; ++e) {
        const int64_t at = segment.bufferOffset + e;
        EXPECT_EQ(gradients[static_cast<size_t>(at)],
                  gradientValue(0, at) + gradientValue(1, at));
      }
    return 0;
  });
}

TEST(GradientLayoutTest, RejectsOverlappingSlots) {
  EXPECT_THROW(GradientLayout::fromSlots({{0, 10}, {5, 10}}, 4), CommError);
  GradientLayout layout = GradientLayout::fromSlots({{0, 10}, {16, 10}}, 1);
  EXPECT_EQ(layout.buckets().size(), 2u);
  EXPECT_EQ(layout.totalElements(), 26);
}

// Tests that bucketed reduction, gradients arriving in a scrambled order,
// gives exactly what one all-reduce of the whole buffer gives.
TEST(GradientReducerTest, BucketsEqualOnePlainAllReduce) {
  ThreadWorld world({3});
  GradientLayout layout = GradientLayout::plan(kParameters, 100);
  runThreadRanks(world, [&](const RankComms &comms) {
    std::vector<float> buffer(static_cast<size_t>(layout.totalElements()));
    for (size_t e = 0; e < buffer.size(); ++e)
      buffer[e] = gradientValue(comms.rank, static_cast<int64_t>(e));
    std::vector<float> plain = buffer;
    tessera_tensor whole{};
    whole.data = plain.data();
    whole.dtype = TESSERA_F32;
    whole.rank = 1;
    whole.shape[0] = static_cast<int64_t>(plain.size());
    if (tessera_comm_all_reduce(comms.world, &whole, TESSERA_REDUCE_SUM,
                                nullptr))
      throw CommError(tessera_comm_last_error());

    GradientReducer reducer(comms.world, layout, buffer.data(), TESSERA_F32,
                            ReduceMode::AllReduce, nullptr, nullptr);
    for (int step = 0; step < 2; ++step) {
      for (size_t e = 0; e < buffer.size(); ++e)
        buffer[e] = gradientValue(comms.rank, static_cast<int64_t>(e));
      for (int32_t p : {5, 2, 4, 3, 1, 0})
        GradientReducer::gradientReady(&reducer, p);
      reducer.finish();
      EXPECT_EQ(buffer, plain);
    }
    return 0;
  });
}

// Tests ZeRO-1's pieces: reduce-scatter leaves each rank the sums of its
// shard; after an update of the shard only, the all-gather gives every rank
// the same updated buffer.
TEST(GradientReducerTest, ZeroOneShardsAndAllGather) {
  ThreadWorld world({2});
  GradientLayout layout = GradientLayout::plan(kParameters, 100, 2);
  std::vector<std::vector<float>> finalWeights(2);
  runThreadRanks(world, [&](const RankComms &comms) {
    std::vector<float> gradients;
    std::unique_ptr<GradientReducer> reducer =
        reduceScatter(comms, layout, gradients);
    std::vector<float> weights(gradients.size(), 0.0f);
    for (const ShardSegment &segment : layout.shardSegments(comms.rank))
      for (int64_t e = 0; e < segment.elements; ++e) {
        int64_t at = segment.bufferOffset + e;
        float expected = gradientValue(0, at) + gradientValue(1, at);
        EXPECT_EQ(gradients[static_cast<size_t>(at)], expected);
        weights[static_cast<size_t>(at)] = -expected; // the "update"
      }
    reducer->allGatherShards(weights.data(), TESSERA_F32);
    finalWeights[static_cast<size_t>(comms.rank)] = weights;
    return 0;
  });
  EXPECT_EQ(finalWeights[0], finalWeights[1]);
  for (size_t p = 0; p < kParameters.size(); ++p) {
    int64_t at = layout.parameters()[p].offset;
    EXPECT_EQ(finalWeights[0][static_cast<size_t>(at)],
              -(gradientValue(0, at) + gradientValue(1, at)));
  }
}

// Tests the all-gather of a buffer that holds only some buckets, packed
// (ZeRO-1's compute copies apart from the f32 mirrors): each named bucket
// is gathered at its place in the buffer, each rank's block from that rank,
// and the buffer's elements past the named buckets are left alone; places
// out of buffer order are an error.
TEST(GradientReducerTest, AllGatherFillsThePackedBucketsItNames) {
  ThreadWorld world({2});
  GradientLayout layout = GradientLayout::plan(kParameters, 100, 2);
  const std::vector<GradientBucket> &buckets = layout.buckets();
  ASSERT_GE(buckets.size(), 2u);
  // The second bucket in launch order first, then the first; the others
  // are not the buffer's.
  const std::vector<BucketPlace> places = {
      {buckets[1].offset, 0}, {buckets[0].offset, buckets[1].elements}};
  const int64_t packed = buckets[0].elements + buckets[1].elements;
  std::vector<std::vector<float>> gathered(2);
  runThreadRanks(world, [&](const RankComms &comms) {
    std::vector<float> buffer(static_cast<size_t>(packed + 1), -1.0f);
    // Each rank writes its own block of each named bucket.
    for (const BucketPlace &place : places) {
      const GradientBucket &bucket =
          place.bucketOffset == buckets[0].offset ? buckets[0] : buckets[1];
      const int64_t block = bucket.elements / 2;
      for (int64_t e = 0; e < block; ++e)
        buffer[static_cast<size_t>(place.bufferOffset + comms.rank * block +
                                   e)] =
            static_cast<float>(comms.rank * 1000 + e);
    }
    GradientReducer reducer(comms.world, layout, buffer.data(), TESSERA_F32,
                            ReduceMode::ReduceScatter, nullptr, nullptr);
    // Places out of buffer order are refused before any collective.
    EXPECT_THROW(reducer.allGatherShards(buffer.data(), TESSERA_F32,
                                         {places[1], places[0]}),
                 CommError);
    reducer.allGatherShards(buffer.data(), TESSERA_F32, places);
    gathered[static_cast<size_t>(comms.rank)] = buffer;
    return 0;
  });
  EXPECT_EQ(gathered[0], gathered[1]);
  for (const BucketPlace &place : places) {
    const GradientBucket &bucket =
        place.bucketOffset == buckets[0].offset ? buckets[0] : buckets[1];
    const int64_t block = bucket.elements / 2;
    for (int32_t rank = 0; rank < 2; ++rank)
      for (int64_t e = 0; e < block; ++e)
        EXPECT_EQ(gathered[0][static_cast<size_t>(place.bufferOffset +
                                                  rank * block + e)],
                  static_cast<float>(rank * 1000 + e));
  }
  EXPECT_EQ(gathered[0][static_cast<size_t>(packed)], -1.0f);
}

// Tests that a bucket marked whole (every rank computed the same whole
// gradient: a mesh plan's replicated layer under ZeRO-1/2) is taken as it
// is, no collective, while the other buckets are reduce-scattered: each
// rank's block of a whole bucket keeps the rank's own values, not a sum.
TEST(GradientReducerTest, WholeBucketsAreTakenNotReduced) {
  ThreadWorld world({2});
  GradientLayout layout = GradientLayout::plan(kParameters, 100, 2);
  ASSERT_GE(layout.buckets().size(), 2u);
  std::vector<bool> whole(layout.buckets().size(), false);
  whole[0] = true;
  runThreadRanks(world, [&](const RankComms &comms) {
    std::vector<float> gradients(static_cast<size_t>(layout.totalElements()));
    for (size_t e = 0; e < gradients.size(); ++e)
      gradients[e] = gradientValue(comms.rank, static_cast<int64_t>(e));
    GradientReducer reducer(comms.world, layout, gradients.data(), TESSERA_F32,
                            ReduceMode::ReduceScatter, nullptr, nullptr);
    EXPECT_THROW(reducer.setWholeBuckets({true}), CommError);
    reducer.setWholeBuckets(whole);
    for (auto p = static_cast<int32_t>(kParameters.size()); p-- > 0;)
      reducer.onGradientReady(p);
    reducer.finish();
    const GradientBucket &taken = layout.buckets()[0];
    for (const ShardSegment &segment : layout.shardSegments(comms.rank))
      for (int64_t e = 0; e < segment.elements; ++e) {
        int64_t at = segment.bufferOffset + e;
        bool inTaken = at >= taken.offset && at < taken.offset + taken.elements;
        EXPECT_EQ(gradients[static_cast<size_t>(at)],
                  inTaken ? gradientValue(comms.rank, at)
                          : gradientValue(0, at) + gradientValue(1, at));
      }
    return 0;
  });
}

// Tests the agreement helpers: a global sum of squares and an overflow flag.
TEST(GradientReducerTest, ScalarAgreement) {
  ThreadWorld world({4});
  runThreadRanks(world, [&](const RankComms &comms) {
    ScalarAgreement agree(comms.world, nullptr);
    EXPECT_EQ(agree.sum(static_cast<double>(comms.rank) + 0.5), 8.0);
    EXPECT_EQ(agree.max(comms.rank == 2 ? 1.0 : 0.0), 1.0);
    return 0;
  });
}

TEST(GradientReducerTest, RejectsRepeatedGradient) {
  ThreadWorld world({1});
  runThreadRanks(world, [&](const RankComms &comms) {
    GradientLayout layout = GradientLayout::plan({4, 4}, 1000);
    std::vector<float> buffer(8, 1.0f);
    GradientReducer reducer(comms.world, layout, buffer.data(), TESSERA_F32,
                            ReduceMode::AllReduce, nullptr, nullptr);
    reducer.onGradientReady(1);
    EXPECT_THROW(reducer.onGradientReady(1), CommError);
    EXPECT_THROW(reducer.onGradientReady(7), CommError);
    return 0;
  });
}
