//===- ReshardingTest.cpp - the collectives between two layouts
//------------===//

#include "ShardingTestSupport.h"

#include "tessera/Sharding/Resharding.h"

using namespace tessera;
using namespace tessera::sharding;
using tessera::sharding::testing::ShardingTest;

namespace {

class ReshardingTest : public ShardingTest {
protected:
  ReshardingTest() : mesh(meshOf("dp=2,tp=4")) {}

  ReshardPlan plan(llvm::StringRef from, llvm::StringRef to) {
    return planReshard(llvm::cantFail(parseTensorLayout(from, mesh)),
                       llvm::cantFail(parseTensorLayout(to, mesh)), shape,
                       /*elementBytes=*/2, mesh, cluster);
  }
  double time(cost::Collective collective, unsigned axis, double bytes) {
    return cost::axisCollectiveTime(mesh, cluster, axis, collective, bytes);
  }

  cost::DeviceMesh mesh;
  // 1024 x 4096 bf16: 8 MiB.
  llvm::SmallVector<int64_t, 2> shape = {1024, 4096};
  double bytes = 1024.0 * 4096 * 2;
  static constexpr unsigned dp = 0, tp = 1;
};

TEST_F(ReshardingTest, PartialToReplicatedIsAnAllReduce) {
  ReshardPlan reshard = plan("[-, -] partial(tp)", "[-, -]");
  ASSERT_EQ(reshard.steps.size(), 1u);
  EXPECT_EQ(reshard.steps[0].collective, cost::Collective::AllReduce);
  EXPECT_EQ(reshard.steps[0].axis, tp);
  EXPECT_DOUBLE_EQ(reshard.steps[0].bytes, bytes);
  EXPECT_DOUBLE_EQ(reshard.time, time(cost::Collective::AllReduce, tp, bytes));
  EXPECT_GT(reshard.time, 0);
}

TEST_F(ReshardingTest, SplitToReplicatedIsAnAllGatherOfTheWholeTensor) {
  ReshardPlan reshard = plan("[tp, -]", "[-, -]");
  ASSERT_EQ(reshard.steps.size(), 1u);
  EXPECT_EQ(reshard.steps[0].collective, cost::Collective::AllGather);
  EXPECT_DOUBLE_EQ(reshard.steps[0].bytes, bytes);
  EXPECT_DOUBLE_EQ(reshard.time, time(cost::Collective::AllGather, tp, bytes));
}

TEST_F(ReshardingTest, PartialToSplitIsAReduceScatter) {
  ReshardPlan reshard = plan("[-, -] partial(tp)", "[-, tp]");
  ASSERT_EQ(reshard.steps.size(), 1u);
  EXPECT_EQ(reshard.steps[0].collective, cost::Collective::ReduceScatter);
  EXPECT_DOUBLE_EQ(reshard.steps[0].bytes, bytes);
  // Half the traffic of the all-reduce (its ring factor is half) plus
  // one latency: cheaper.
  EXPECT_LT(reshard.time, plan("[-, -] partial(tp)", "[-, -]").time);
}

TEST_F(ReshardingTest, APartialSumEndingSplitIsScatteredBeforeTheOthers) {
  // A gradient partial over dp and tp whose layout splits it over tp (a
  // ZeRO or tensor-parallel shard): the tp reduce-scatter first, so the dp
  // all-reduce moves the rank's quarter, as the partition rewrites it.
  ReshardPlan reshard = plan("[-, -] partial(dp, tp)", "[-, tp]");
  ASSERT_EQ(reshard.steps.size(), 2u);
  EXPECT_EQ(reshard.steps[0].collective, cost::Collective::ReduceScatter);
  EXPECT_EQ(reshard.steps[0].axis, tp);
  EXPECT_DOUBLE_EQ(reshard.steps[0].bytes, bytes);
  EXPECT_EQ(reshard.steps[1].collective, cost::Collective::AllReduce);
  EXPECT_EQ(reshard.steps[1].axis, dp);
  EXPECT_DOUBLE_EQ(reshard.steps[1].bytes, bytes / 4);
}

TEST_F(ReshardingTest, SlicingAndZeroFillingAreFree) {
  EXPECT_TRUE(plan("[-, -]", "[tp, -]").steps.empty());
  EXPECT_TRUE(plan("[-, -]", "[dp, tp]").steps.empty());
  EXPECT_TRUE(plan("[-, -]", "[-, -] partial(tp)").steps.empty());
  EXPECT_TRUE(plan("[tp, -]", "[-, -] partial(tp)").steps.empty());
  EXPECT_TRUE(plan("[tp, dp]", "[tp, dp]").steps.empty());
  EXPECT_DOUBLE_EQ(plan("[-, -]", "[tp, -]").time, 0);
}

TEST_F(ReshardingTest, MovingASplitIsAnAllToAllOfTheLocalShard) {
  ReshardPlan reshard = plan("[tp, -]", "[-, tp]");
  ASSERT_EQ(reshard.steps.size(), 1u);
  EXPECT_EQ(reshard.steps[0].collective, cost::Collective::AllToAll);
  EXPECT_DOUBLE_EQ(reshard.steps[0].bytes, bytes / 4);
}

TEST_F(ReshardingTest, TwoAxesArePricedAtTheSizeEarlierStepsLeave) {
  // dp is gathered first, while tp still splits: 1/4 of the tensor; then
  // tp gathers the whole tensor.
  ReshardPlan reshard = plan("[dp, tp]", "[-, -]");
  ASSERT_EQ(reshard.steps.size(), 2u);
  EXPECT_EQ(reshard.steps[0].axis, dp);
  EXPECT_DOUBLE_EQ(reshard.steps[0].bytes, bytes / 4);
  EXPECT_EQ(reshard.steps[1].axis, tp);
  EXPECT_DOUBLE_EQ(reshard.steps[1].bytes, bytes);

  // A partial sum over dp with a tp split: the all-reduce moves the tp
  // shard only.
  reshard = plan("[tp, -] partial(dp)", "[tp, -]");
  ASSERT_EQ(reshard.steps.size(), 1u);
  EXPECT_EQ(reshard.steps[0].collective, cost::Collective::AllReduce);
  EXPECT_DOUBLE_EQ(reshard.steps[0].bytes, bytes / 4);

  // Swapping the axes of two dims: the axis still holding the slot is
  // gathered, then the other moves over with an all-to-all and the first
  // slices: a valid plan, ending where asked.
  reshard = plan("[dp, tp]", "[tp, dp]");
  ASSERT_EQ(reshard.steps.size(), 2u);
  EXPECT_EQ(reshard.steps[0].collective, cost::Collective::AllGather);
  EXPECT_EQ(reshard.steps[1].collective, cost::Collective::AllToAll);
}

} // namespace
