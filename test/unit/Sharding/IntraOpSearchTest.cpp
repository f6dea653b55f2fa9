//===- IntraOpSearchTest.cpp - the ILP's choice where the optimum is known
//-===//
//
// A two-layer MLP, linear -> gelu -> linear, with trainable weights, priced
// as a training step (forward plus backward) on the built-in h200 cluster.
// Every case checks the ILP against an exhaustive enumeration of all plans
// (the graphs are small enough), so "optimal" is verified, not assumed; the
// comments argue why the optimum is the plan it is.
//
//===----------------------------------------------------------------------===//

#include "ShardingTestSupport.h"

#include "tessera/Sharding/IntraOpSearch.h"

#include <cmath>
#include <limits>

using namespace tessera;
using namespace tessera::sharding;
using tessera::sharding::testing::ShardingTest;

namespace {

/// The MLP on input [batch, sequence, width] in bf16, hidden 4 x width.
std::string mlpText(int64_t batch, int64_t sequence, int64_t width) {
  std::string x = "tensor<" + std::to_string(batch) + "x" +
                  std::to_string(sequence) + "x" + std::to_string(width) +
                  "xbf16>";
  std::string h = "tensor<" + std::to_string(batch) + "x" +
                  std::to_string(sequence) + "x" + std::to_string(4 * width) +
                  "xbf16>";
  std::string w1 = "tensor<" + std::to_string(width) + "x" +
                   std::to_string(4 * width) + "xbf16>";
  std::string w2 = "tensor<" + std::to_string(4 * width) + "x" +
                   std::to_string(width) + "xbf16>";
  return "func.func @mlp(%x: " + x + ") -> " + x + " {\n" +
         "  %w1 = tess.parameter \"fc1.weight\" trainable : " + w1 + "\n" +
         "  %w2 = tess.parameter \"fc2.weight\" trainable : " + w2 + "\n" +
         "  %h = tess.linear %x, %w1 : (" + x + ", " + w1 + ") -> " + h + "\n" +
         "  %g = tess.gelu %h {approximation = "
         "#tess<gelu_approximation tanh>} : " +
         h + "\n" + "  %y = tess.linear %g, %w2 : (" + h + ", " + w2 + ") -> " +
         x + "\n" + "  return %y : " + x + "\n}\n";
}

class IntraOpSearchTest : public ShardingTest {
protected:
  /// Builds the training problem of the MLP on `meshSpec`'s axis `axisName`.
  std::optional<ShardingProblem> mlpProblem(llvm::StringRef meshSpec,
                                            llvm::StringRef axisName,
                                            int64_t batch, int64_t sequence,
                                            int64_t width) {
    mesh = meshOf(meshSpec);
    mlir::func::FuncOp function =
        parseFunction(mlpText(batch, sequence, width));
    if (!function)
      return std::nullopt;
    llvm::Expected<ShardingProblem> problem = buildShardingProblem(
        function, mesh, cluster, mesh.axisIndex(axisName), /*training=*/true);
    if (!problem) {
      ADD_FAILURE() << llvm::toString(problem.takeError());
      return std::nullopt;
    }
    return std::move(*problem);
  }

  /// The cheapest plan by trying all of them.
  static double exhaustiveOptimum(const ShardingProblem &problem) {
    std::vector<unsigned> choice(problem.nodes.size(), 0);
    double best = std::numeric_limits<double>::infinity();
    while (true) {
      best = std::min(best, problem.totalTime(choice));
      size_t node = 0;
      while (node < choice.size() &&
             ++choice[node] == problem.nodes[node].strategies.size())
        choice[node++] = 0;
      if (node == choice.size())
        return best;
    }
  }

  /// Strategy names of the non-parameter ops, in order.
  static std::vector<std::string> strategyNames(const ShardingProblem &problem,
                                                const ShardingPlan &plan) {
    std::vector<std::string> names;
    for (auto [node, strategy] : llvm::zip_equal(problem.nodes, plan.choice))
      if (!llvm::isa<tess::ParameterOp>(node.op))
        names.push_back(node.op->getName().getStringRef().str() + " " +
                        node.strategies[strategy].name);
    return names;
  }

  /// Collectives on edges under `plan`.
  static std::vector<ReshardStep>
  edgeCollectives(const ShardingProblem &problem, const ShardingPlan &plan) {
    std::vector<ReshardStep> steps;
    for (const ShardingEdge &edge : problem.edges)
      for (const ReshardStep &step :
           problem.edgeReshard(edge, plan.choice).steps)
        steps.push_back(step);
    return steps;
  }

  /// Checks that the ILP answers, proves optimality, agrees with the
  /// exhaustive optimum, and is what searchIntraOp returns.
  ShardingPlan solveAndCheck(const ShardingProblem &problem) {
    std::optional<ShardingPlan> plan = solveIlp(problem, 10.0);
    if (!plan) {
      ADD_FAILURE() << "CBC found no plan";
      return solveGreedy(problem);
    }
    EXPECT_EQ(plan->method, PlanMethod::Ilp);
    EXPECT_TRUE(plan->provenOptimal);
    EXPECT_NEAR(plan->time, exhaustiveOptimum(problem), 1e-12);
    ShardingPlan searched = searchIntraOp(problem, 10.0);
    EXPECT_EQ(searched.method, PlanMethod::Ilp);
    EXPECT_NEAR(searched.time, plan->time, 1e-12);
    return *plan;
  }

  cost::DeviceMesh mesh;
};

TEST_F(IntraOpSearchTest, TensorParallelMlpIsMegatron) {
  // 512 tokens of width 4096 (hidden 16384) on a 1x4 mesh, searched on tp.
  // Each linear is 2 * 512 * 4096 * 16384 = 68.7 GFLOP forward, ~87 us at
  // 790 TFLOP/s, ~261 us with the backward.
  //  - Replicated: ~522 us of GEMMs, no communication.
  //  - Megatron (column, gelu on the split hidden dim, row): a quarter of
  //    the GEMMs (~130 us) plus one all-reduce of the 4 MiB output (the row
  //    layer's partial sum, needed whole at the return), ~0.1 ms. The
  //    column layer's input is the function's argument, which needs no
  //    gradient, so its backward all-reduce (Megatron's `f`) is not needed.
  //  - Data parallel: the same quarter of the GEMMs, but the backward must
  //    all-reduce both 128 MiB weight gradients (~1.3 ms) and the output
  //    must be gathered.
  //  - Any other mix pays at least one collective on the 16 MiB hidden
  //    activation (the row layer fed a non-split input, a column layer fed
  //    a split one, a row first layer's partial sum before the gelu, which
  //    is not linear) and/or on the output, each costlier than the one
  //    4 MiB all-reduce.
  std::optional<ShardingProblem> problem = mlpProblem("1x4", "tp", 8, 64, 4096);
  ASSERT_TRUE(problem);
  ShardingPlan plan = solveAndCheck(*problem);
  EXPECT_EQ(strategyNames(*problem, plan),
            (std::vector<std::string>{"tess.linear column-parallel",
                                      "tess.gelu split dim 2",
                                      "tess.linear row-parallel"}));
  std::vector<ReshardStep> collectives = edgeCollectives(*problem, plan);
  ASSERT_EQ(collectives.size(), 1u) << describePlan(*problem, plan);
  EXPECT_EQ(collectives[0].collective, cost::Collective::AllReduce);
  EXPECT_DOUBLE_EQ(collectives[0].bytes, 8.0 * 64 * 4096 * 2);
  EXPECT_NE(describePlan(*problem, plan)
                .find("all_reduce over tp of 4194304 bytes after tess.linear"),
            std::string::npos);
}

TEST_F(IntraOpSearchTest, TinyBatchOnDataParallelAxisStaysReplicated) {
  // 8 tokens against 2 x 4M weights on dp=4. Every plan other than the
  // replicated one needs a collective: a split or partial result must be
  // made whole for the return, and splitting the batch makes the backward
  // all-reduce the weight gradients. Every collective costs at least its
  // latency (51 us on h200), while the whole replicated step (reading
  // 16 MiB of weights three times, memory-bound) is ~10 us. So replicated
  // weights and replicated work are optimal.
  std::optional<ShardingProblem> problem = mlpProblem("4", "dp", 4, 2, 1024);
  ASSERT_TRUE(problem);
  ShardingPlan plan = solveAndCheck(*problem);
  EXPECT_EQ(strategyNames(*problem, plan),
            (std::vector<std::string>{"tess.linear replicated",
                                      "tess.gelu replicated",
                                      "tess.linear replicated"}));
  EXPECT_TRUE(edgeCollectives(*problem, plan).empty());
  // The argument's premise, checked: the cheapest collective exceeds the
  // replicated step.
  for (cost::Collective collective : cost::allCollectives())
    if (collective != cost::Collective::SendRecv) {
      EXPECT_GT(cost::axisCollectiveTime(mesh, cluster, 0, collective, 1),
                plan.time);
    }
}

TEST_F(IntraOpSearchTest, HugeBatchOnDataParallelAxisIsDataParallel) {
  // 65536 tokens of width 1024 on dp=4: ~4.2 ms of GEMMs and ~0.7 ms of
  // gelu replicated, so splitting the work four ways is worth milliseconds.
  // The two ways of splitting all of it:
  //  - data parallel: all-reduce the 2 x 8 MiB weight gradients (~0.1 ms)
  //    and all-gather the 128 MiB output for the return ((n-1)/n of it on
  //    the ring, ~0.3 ms);
  //  - Megatron: all-reduce the 128 MiB output (2(n-1)/n of it on the ring,
  //    twice the all-gather's traffic, ~0.65 ms).
  // The weight gradients are small next to the activations at this batch,
  // so data parallelism wins; mixes pay for both kinds of collectives.
  std::optional<ShardingProblem> problem =
      mlpProblem("4", "dp", 64, 1024, 1024);
  ASSERT_TRUE(problem);
  ShardingPlan plan = solveAndCheck(*problem);
  EXPECT_EQ(strategyNames(*problem, plan),
            (std::vector<std::string>{"tess.linear data-parallel",
                                      "tess.gelu split dim 0",
                                      "tess.linear data-parallel"}));
  std::vector<ReshardStep> collectives = edgeCollectives(*problem, plan);
  ASSERT_EQ(collectives.size(), 1u) << describePlan(*problem, plan);
  EXPECT_EQ(collectives[0].collective, cost::Collective::AllGather);
  // The two data-parallel linears carry the weight-gradient all-reduces.
  double weightSync = 0;
  for (auto [node, strategy] : llvm::zip_equal(problem->nodes, plan.choice))
    weightSync += node.strategies[strategy].communicationTime;
  EXPECT_DOUBLE_EQ(weightSync,
                   2 * cost::axisCollectiveTime(mesh, cluster, 0,
                                                cost::Collective::AllReduce,
                                                1024.0 * 4096 * 2));
}

TEST_F(IntraOpSearchTest, GreedyGivesAValidPlanNoBetterThanTheIlp) {
  for (auto [spec, axis, batch, sequence, width] :
       {std::make_tuple("1x4", "tp", 8, 64, 4096),
        std::make_tuple("4", "dp", 4, 2, 1024),
        std::make_tuple("4", "dp", 64, 1024, 1024)}) {
    std::optional<ShardingProblem> problem =
        mlpProblem(spec, axis, batch, sequence, width);
    ASSERT_TRUE(problem);
    ShardingPlan greedy = solveGreedy(*problem);
    EXPECT_EQ(greedy.method, PlanMethod::Greedy);
    EXPECT_FALSE(greedy.provenOptimal);
    ASSERT_EQ(greedy.choice.size(), problem->nodes.size());
    for (auto [node, strategy] : llvm::zip_equal(problem->nodes, greedy.choice))
      EXPECT_LT(strategy, node.strategies.size());
    // Every consumer's required layout is reachable from its producer's:
    // the edge has a finite price.
    for (const ShardingEdge &edge : problem->edges)
      EXPECT_TRUE(std::isfinite(problem->edgeTime(edge, greedy.choice)));
    EXPECT_DOUBLE_EQ(greedy.time, problem->totalTime(greedy.choice));
    std::optional<ShardingPlan> ilp = solveIlp(*problem, 10.0);
    ASSERT_TRUE(ilp);
    EXPECT_GE(greedy.time, ilp->time - 1e-12);
  }
}

TEST_F(IntraOpSearchTest, GreedyCanMissTheOptimum) {
  // On the huge batch, greedy decides the first linear alone: column- and
  // row-parallel cost the same there (a quarter of the GEMM, the input a
  // free slice of the argument) and data parallelism also pays the weight
  // gradient all-reduce, so it takes column-parallel and is then held to
  // tensor parallelism, which the ILP shows to be worse.
  std::optional<ShardingProblem> problem =
      mlpProblem("4", "dp", 64, 1024, 1024);
  ASSERT_TRUE(problem);
  ShardingPlan greedy = solveGreedy(*problem);
  std::optional<ShardingPlan> ilp = solveIlp(*problem, 10.0);
  ASSERT_TRUE(ilp);
  EXPECT_GT(greedy.time, ilp->time * 1.05) << describePlan(*problem, greedy);
}

TEST_F(IntraOpSearchTest, RejectsAnAxisNotInTheMesh) {
  mesh = meshOf("4");
  mlir::func::FuncOp function = parseFunction(mlpText(4, 2, 64));
  ASSERT_TRUE(function);
  llvm::Expected<ShardingProblem> problem =
      buildShardingProblem(function, mesh, cluster, 3, false);
  ASSERT_FALSE(static_cast<bool>(problem));
  EXPECT_EQ(llvm::toString(problem.takeError()),
            "cannot plan the sharding of @mlp: mesh axis 3 is not in dp=4");
}

} // namespace
