//===- MeshShardingTest.cpp - the mesh search's price of ZeRO stages ------===//
//
// One trainable linear layer on a mesh of 2 (dp) of the built-in h200
// cluster, its weight pinned to a ZeRO stage: what the problem
// buildMeshShardingProblem builds charges for the weight's gradient on the
// edge to the linear, for every strategy the linear may run.
//
//===----------------------------------------------------------------------===//

#include "ShardingTestSupport.h"

#include "tessera/Sharding/MeshSharding.h"

using namespace tessera;
using namespace tessera::sharding;
using tessera::sharding::testing::ShardingTest;

namespace {

constexpr const char *kLinear = R"mlir(
func.func @layer(%x: tensor<8x16x64xbf16>) -> tensor<8x16x64xbf16> {
  %w = tess.parameter "fc.weight" trainable : tensor<64x64xbf16>
  %y = tess.linear %x, %w : (tensor<8x16x64xbf16>, tensor<64x64xbf16>) -> tensor<8x16x64xbf16>
  return %y : tensor<8x16x64xbf16>
}
)mlir";

class MeshShardingTest : public ShardingTest {
protected:
  /// The problem with fc.weight at ZeRO stage `stage`.
  std::optional<MeshShardingProblem> problemAt(int stage) {
    mlir::func::FuncOp function = parseFunction(kLinear);
    if (!function)
      return std::nullopt;
    mesh = meshOf("dp=2");
    MeshSearchOptions options;
    llvm::Expected<ShardPin> pin =
        parseShardPin("fc.weight=zero=" + std::to_string(stage), mesh);
    if (!pin) {
      ADD_FAILURE() << llvm::toString(pin.takeError());
      return std::nullopt;
    }
    options.pins.push_back(*pin);
    llvm::Expected<MeshShardingProblem> problem =
        buildMeshShardingProblem(function, mesh, cluster, options);
    if (!problem) {
      ADD_FAILURE() << llvm::toString(problem.takeError());
      return std::nullopt;
    }
    return std::move(*problem);
  }

  /// Per strategy of the linear: the reduce-scatters and all-reduces on
  /// the weight's edge, and whether the linear leaves the weight's gradient
  /// a partial sum over dp (data-parallel compute) or whole.
  struct EdgePrice {
    int reduceScatters = 0, allReduces = 0;
    double seconds = 0;
    bool partialGradient = false;
  };
  std::vector<EdgePrice> weightEdgePrices(const MeshShardingProblem &built) {
    const ShardingProblem &problem = built.problem;
    const unsigned weight = built.nodeOf.at(firstOp("tess.parameter"));
    const unsigned linear = built.nodeOf.at(firstOp("tess.linear"));
    std::vector<EdgePrice> prices;
    for (const ShardingEdge &edge : problem.edges) {
      if (edge.producer != weight || edge.consumer != linear)
        continue;
      const std::vector<ShardingStrategy> &strategies =
          problem.nodes[linear].strategies;
      for (unsigned s = 0; s < strategies.size(); ++s) {
        std::vector<unsigned> choice(problem.nodes.size(), 0);
        choice[linear] = s;
        EdgePrice price;
        ReshardPlan plan = problem.edgeReshard(edge, choice);
        for (const ReshardStep &step : plan.steps) {
          price.reduceScatters +=
              step.collective == cost::Collective::ReduceScatter;
          price.allReduces += step.collective == cost::Collective::AllReduce;
        }
        price.seconds = plan.time;
        const llvm::SmallVectorImpl<unsigned> &partial =
            strategies[s].gradientPartialAxes;
        price.partialGradient = edge.operandIndex < partial.size() &&
                                partial[edge.operandIndex] != 0;
        prices.push_back(price);
      }
    }
    return prices;
  }

  cost::DeviceMesh mesh;
};

} // namespace

// Tests that a ZeRO-2 weight pays the reduce-scatter of its gradient into
// the optimizer's shard on the edge to every reader, whatever the reader's
// compute: data-parallel compute leaves a partial sum to reduce, and a
// replicated one computes the gradient whole, which the step then scales
// into such a sum and the driver reduce-scatters all the same
// (runtime/train/MeshZero.h); before, the replicated reader's gradient was
// priced as a free slice. ZeRO-1 pays the same; ZeRO-0 reduces a partial
// sum with an all-reduce and nothing for a whole gradient.
TEST_F(MeshShardingTest, ZeroTwoPaysTheReduceScatterForEveryReader) {
  for (int stage : {1, 2}) {
    std::optional<MeshShardingProblem> built = problemAt(stage);
    ASSERT_TRUE(built);
    std::vector<EdgePrice> prices = weightEdgePrices(*built);
    ASSERT_GE(prices.size(), 2u);
    bool sawWhole = false, sawPartial = false;
    for (const EdgePrice &price : prices) {
      EXPECT_EQ(price.reduceScatters, 1) << "ZeRO-" << stage;
      EXPECT_EQ(price.allReduces, 0) << "ZeRO-" << stage;
      EXPECT_GT(price.seconds, 0) << "ZeRO-" << stage;
      (price.partialGradient ? sawPartial : sawWhole) = true;
    }
    EXPECT_TRUE(sawWhole && sawPartial) << "ZeRO-" << stage;
  }
  std::optional<MeshShardingProblem> zeroZero = problemAt(0);
  ASSERT_TRUE(zeroZero);
  for (const EdgePrice &price : weightEdgePrices(*zeroZero)) {
    EXPECT_EQ(price.reduceScatters, 0);
    EXPECT_EQ(price.allReduces, price.partialGradient ? 1 : 0);
  }
}

// Tests that a ZeRO-1/2 weight's strategy that shards its state carries
// the all-gather of the updated weights (its communication time), a ZeRO-0
// one (or a layout already split over dp, nothing left to shard) none.
TEST_F(MeshShardingTest, ZeroOneAndTwoAllGatherTheWeights) {
  for (int stage : {0, 1, 2}) {
    std::optional<MeshShardingProblem> built = problemAt(stage);
    ASSERT_TRUE(built);
    const unsigned weight = built->nodeOf.at(firstOp("tess.parameter"));
    int sharding = 0;
    for (const ShardingStrategy &strategy :
         built->problem.nodes[weight].strategies) {
      EXPECT_EQ(strategy.zeroStage, stage);
      if (stage == 0 || strategy.zeroAxes.empty()) {
        EXPECT_EQ(strategy.communicationTime, 0);
        continue;
      }
      ++sharding;
      ASSERT_EQ(strategy.collectives.size(), 1u);
      EXPECT_EQ(strategy.collectives[0].collective,
                cost::Collective::AllGather);
      EXPECT_GT(strategy.communicationTime, 0);
    }
    EXPECT_EQ(sharding > 0, stage > 0) << "ZeRO-" << stage;
  }
}
