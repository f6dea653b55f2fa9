//===- MeshShardingTest.cpp - the mesh search's price of ZeRO stages ------===//
//
// One trainable linear layer on a mesh of 2 (dp) of the built-in h200
// cluster, its weight pinned to a ZeRO stage: what the problem
// buildMeshShardingProblem builds charges for the weight's gradient on the
// edge to the linear, for every strategy the linear may run; the same for
// a weight read by two linears (a tied embedding's two reads); the memory
// of its gradient by stage (ZeRO-2's shard and ring). Then two linears on
// dp=2,tp=2: the search keeps their ZeRO-1 on one group of axes.
//
//===----------------------------------------------------------------------===//

#include "ShardingTestSupport.h"

#include "tessera/Sharding/IntraOpSearch.h"
#include "tessera/Sharding/MeshSharding.h"

#include <set>

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

/// One weight read by two linears, as a tied embedding is by the lookup
/// and the LM head: the step sums the two reads' gradients.
constexpr const char *kTwoReads = R"mlir(
func.func @layer(%x: tensor<8x16x64xbf16>) -> tensor<8x16x64xbf16> {
  %w = tess.parameter "fc.weight" trainable : tensor<64x64xbf16>
  %y = tess.linear %x, %w : (tensor<8x16x64xbf16>, tensor<64x64xbf16>) -> tensor<8x16x64xbf16>
  %z = tess.linear %y, %w : (tensor<8x16x64xbf16>, tensor<64x64xbf16>) -> tensor<8x16x64xbf16>
  return %z : tensor<8x16x64xbf16>
}
)mlir";

class MeshShardingTest : public ShardingTest {
protected:
  /// The problem of `source` with fc.weight at ZeRO stage `stage`.
  std::optional<MeshShardingProblem> problemAt(int stage,
                                               const char *source = kLinear) {
    mlir::func::FuncOp function = parseFunction(source);
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

  /// fc.weight's strategies with fc.weight at ZeRO stage `stage` (none
  /// after a failure).
  std::vector<ShardingStrategy> weightStrategies(int stage) {
    std::optional<MeshShardingProblem> built = problemAt(stage);
    if (!built)
      return {};
    return built->problem.nodes[built->nodeOf.at(firstOp("tess.parameter"))]
        .strategies;
  }

  /// Per strategy of the linear: the reduce-scatters and all-reduces on
  /// the weight's edge, and whether the linear leaves the weight's gradient
  /// a partial sum over dp (data-parallel compute), split over dp (the
  /// weight read in shards: tensor-parallel compute) or whole.
  struct EdgePrice {
    int reduceScatters = 0, allReduces = 0;
    double seconds = 0;
    bool partialGradient = false;
    bool splitGradient = false;
  };
  /// `reader`: which linear's edge is priced, in program order.
  std::vector<EdgePrice> weightEdgePrices(const MeshShardingProblem &built,
                                          unsigned reader = 0) {
    const ShardingProblem &problem = built.problem;
    const unsigned weight = built.nodeOf.at(firstOp("tess.parameter"));
    std::vector<mlir::Operation *> linears;
    module->walk([&](mlir::Operation *op) {
      if (op->getName().getStringRef() == "tess.linear")
        linears.push_back(op);
    });
    const unsigned linear = built.nodeOf.at(linears.at(reader));
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
        price.splitGradient =
            strategies[s].operandLayouts[edge.operandIndex].dimSplitOver(0) !=
            kUnsplit;
        prices.push_back(price);
      }
    }
    return prices;
  }

  /// The ZeRO-1/2 rule on one edge's prices (`what` names the case): a
  /// whole gradient pays nothing, any other one reduce-scatter, never an
  /// all-reduce; the prices have both kinds.
  void expectWholeGradientsFree(const std::vector<EdgePrice> &prices,
                                const std::string &what) {
    ASSERT_GE(prices.size(), 2u) << what;
    bool sawWhole = false, sawPartial = false;
    for (const EdgePrice &price : prices) {
      bool whole = !price.partialGradient && !price.splitGradient;
      EXPECT_EQ(price.reduceScatters, whole ? 0 : 1) << what;
      EXPECT_EQ(price.allReduces, 0) << what;
      if (whole)
        EXPECT_EQ(price.seconds, 0) << what;
      else
        EXPECT_GT(price.seconds, 0) << what;
      sawPartial = sawPartial || price.partialGradient;
      sawWhole = sawWhole || whole;
    }
    EXPECT_TRUE(sawWhole && sawPartial) << what;
  }

  cost::DeviceMesh mesh;
};

} // namespace

// Tests that a ZeRO-1/2 weight read by data-parallel compute pays the
// reduce-scatter of its gradient (a partial sum over dp) into the
// optimizer's shard, and one read by replicated compute pays no collective:
// every rank computes the whole gradient, which the step returns whole and
// the driver slices (tess-partition-spmd's tess.zero_axes,
// runtime/train/MeshZero.h). A gradient split over dp (the weight read in
// shards) still goes through the partial sum the driver reduce-scatters.
// ZeRO-0 reduces a partial sum with an all-reduce and nothing for a whole
// gradient.
TEST_F(MeshShardingTest, ZeroOneAndTwoSliceAWholeGradient) {
  for (int stage : {1, 2}) {
    std::optional<MeshShardingProblem> built = problemAt(stage);
    ASSERT_TRUE(built);
    expectWholeGradientsFree(weightEdgePrices(*built),
                             "ZeRO-" + std::to_string(stage));
  }
  std::optional<MeshShardingProblem> zeroZero = problemAt(0);
  ASSERT_TRUE(zeroZero);
  for (const EdgePrice &price : weightEdgePrices(*zeroZero)) {
    EXPECT_EQ(price.reduceScatters, 0);
    EXPECT_EQ(price.allReduces, price.partialGradient ? 1 : 0);
  }
}

// Tests that a ZeRO-1/2 weight read twice gets the single read's price on
// each edge, shared: a read by replicated compute pays nothing (the step
// sums the two whole gradients into a whole one, returned whole and sliced
// by the driver, as for one read: partition-spmd.mlir), a read that leaves
// a partial sum half the single read's reduce-scatter. Both reads whole:
// the gradient is free; both partial: one reduce-scatter. (One of each is
// priced half a reduce-scatter, where the step all-reduces the partial
// addend before the sum: the price the edges cannot see.)
TEST_F(MeshShardingTest, ZeroOneAndTwoSliceAWholeGradientReadTwice) {
  for (int stage : {1, 2}) {
    // (Each problem reads its own parsed module: priced before the next.)
    std::optional<MeshShardingProblem> once = problemAt(stage);
    ASSERT_TRUE(once);
    double partialPrice = 0;
    for (const EdgePrice &price : weightEdgePrices(*once))
      if (price.partialGradient && !price.splitGradient)
        partialPrice = price.seconds;
    ASSERT_GT(partialPrice, 0) << "ZeRO-" << stage;
    std::optional<MeshShardingProblem> twice = problemAt(stage, kTwoReads);
    ASSERT_TRUE(twice);
    for (unsigned reader : {0u, 1u}) {
      const std::string what = "ZeRO-" + std::to_string(stage) +
                               ", reader " + std::to_string(reader);
      std::vector<EdgePrice> prices = weightEdgePrices(*twice, reader);
      expectWholeGradientsFree(prices, what);
      for (const EdgePrice &price : prices)
        if (price.partialGradient && !price.splitGradient) {
          EXPECT_NEAR(price.seconds, partialPrice / 2, partialPrice * 1e-9)
              << what;
        }
    }
  }
}

// Tests that a ZeRO-1/2 weight's strategy that shards its state carries
// the all-gather of the updated weights (its communication time), a ZeRO-0
// one (or a layout already split over dp, nothing left to shard) none.
TEST_F(MeshShardingTest, ZeroOneAndTwoAllGatherTheWeights) {
  for (int stage : {0, 1, 2}) {
    std::vector<ShardingStrategy> strategies = weightStrategies(stage);
    ASSERT_FALSE(strategies.empty());
    int sharding = 0;
    for (const ShardingStrategy &strategy : strategies) {
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

// Tests the gradient memory the search counts for a weight by its ZeRO
// stage, as the compiled rank holds it (Analysis/StepMemory.cpp, runtime/
// comm's GradientRing): whole under ZeRO-0 and -1, the shard under ZeRO-3,
// and under ZeRO-2 the shard plus the whole gradient's place in the
// driver's ring and one rank's reduced block of it (the model's gradients
// fit a bucket), whether the step's gradient is whole (the driver slices
// it: a replicated linear) or a partial sum (reduce-scattered: a data-
// parallel one), on every layout that leaves the weight to shard alike:
// twice ZeRO-1's.
TEST_F(MeshShardingTest, ZeroTwoCountsItsGradientRing) {
  const double whole = 64 * 64;
  const double gradientBytes = MeshSearchOptions().gradientBytes;
  const double expected[] = {whole, whole, whole / 2 + whole + whole / 2,
                             whole / 2};
  for (int stage : {0, 1, 2, 3}) {
    std::vector<ShardingStrategy> strategies = weightStrategies(stage);
    ASSERT_FALSE(strategies.empty());
    int sharded = 0;
    for (const ShardingStrategy &strategy : strategies) {
      if (strategy.zeroAxes.empty())
        continue;
      ++sharded;
      EXPECT_EQ(strategy.parameterBytes.gradients,
                gradientBytes * expected[stage])
          << strategy.name;
    }
    EXPECT_EQ(sharded > 0, stage > 0) << "ZeRO-" << stage;
  }
}

// Tests that the search keeps every ZeRO-1/2 parameter on one group of axes,
// the driver's one group (runtime/train/MeshZero.cpp): on dp=2,tp=2 with two
// linears pinned to ZeRO-1, the second one's weight stored split over tp
// (its state sharded over dp only), the cheapest plan of the problem as
// built stores the first weight whole, its state sharded over dp and tp;
// the search returns one with both over dp.
TEST_F(MeshShardingTest, ZeroOneAndTwoShareOneGroupOfAxes) {
  mlir::func::FuncOp function = parseFunction(R"mlir(
func.func @layers(%x: tensor<8x16x64xbf16>) -> tensor<8x16x64xbf16> {
  %w1 = tess.parameter "fc1.weight" trainable : tensor<64x64xbf16>
  %y = tess.linear %x, %w1 : (tensor<8x16x64xbf16>, tensor<64x64xbf16>) -> tensor<8x16x64xbf16>
  %w2 = tess.parameter "fc2.weight" trainable : tensor<64x64xbf16>
  %z = tess.linear %y, %w2 : (tensor<8x16x64xbf16>, tensor<64x64xbf16>) -> tensor<8x16x64xbf16>
  return %z : tensor<8x16x64xbf16>
}
)mlir");
  ASSERT_TRUE(function);
  mesh = meshOf("dp=2,tp=2");
  MeshSearchOptions options;
  for (const char *text :
       {"fc1.weight=zero=1", "fc2.weight=[-, tp], zero=1"}) {
    llvm::Expected<ShardPin> pin = parseShardPin(text, mesh);
    ASSERT_TRUE(static_cast<bool>(pin)) << llvm::toString(pin.takeError());
    options.pins.push_back(*pin);
  }
  auto groups = [](llvm::ArrayRef<ParameterSharding> parameters) {
    std::set<std::vector<unsigned>> axes;
    for (const ParameterSharding &parameter : parameters)
      if (parameter.zeroStage == 1 || parameter.zeroStage == 2)
        axes.insert(std::vector<unsigned>(parameter.zeroAxes.begin(),
                                          parameter.zeroAxes.end()));
    return axes;
  };

  llvm::Expected<MeshShardingProblem> built =
      buildMeshShardingProblem(function, mesh, cluster, options);
  ASSERT_TRUE(static_cast<bool>(built)) << llvm::toString(built.takeError());
  ShardingPlan cheapest = searchIntraOp(built->problem, 10);
  std::set<std::vector<unsigned>> unconstrained;
  for (auto [node, chosen] :
       llvm::zip_equal(built->problem.nodes, cheapest.choice)) {
    const ShardingStrategy &strategy = node.strategies[chosen];
    if (strategy.zeroStage == 1 && !strategy.zeroAxes.empty())
      unconstrained.insert(std::vector<unsigned>(strategy.zeroAxes.begin(),
                                                 strategy.zeroAxes.end()));
  }
  EXPECT_EQ(unconstrained.size(), 2u);

  llvm::Expected<TrainingShardingPlan> plan =
      searchTrainingSharding(function, mesh, cluster, options);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  EXPECT_EQ(groups(plan->parameters), (std::set<std::vector<unsigned>>{{0u}}));
}
