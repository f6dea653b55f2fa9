//===- GreedySharding.cpp - the fast fallback of the intra-op search
//-------===//

#include "tessera/Sharding/IntraOpSearch.h"

#include <limits>

using namespace tessera;
using namespace tessera::sharding;

ShardingPlan sharding::solveGreedy(const ShardingProblem &problem) {
  // Nodes are in program order, so every producer of a node is decided
  // before it.
  llvm::SmallVector<llvm::SmallVector<unsigned, 4>> edgesInto(
      problem.nodes.size());
  for (auto [index, edge] : llvm::enumerate(problem.edges)) {
    if (edge.consumer)
      edgesInto[*edge.consumer].push_back(index);
    else if (edge.producer)
      edgesInto[*edge.producer].push_back(index); // to a function result
  }

  ShardingPlan plan;
  plan.method = PlanMethod::Greedy;
  plan.choice.assign(problem.nodes.size(), 0);
  for (auto [node, current] : llvm::enumerate(problem.nodes)) {
    double best = std::numeric_limits<double>::infinity();
    unsigned bestStrategy = 0;
    for (unsigned strategy = 0; strategy < current.strategies.size();
         ++strategy) {
      plan.choice[node] = strategy;
      double time = current.strategies[strategy].time();
      for (unsigned edge : edgesInto[node])
        time += problem.edgeTime(problem.edges[edge], plan.choice);
      if (time < best) {
        best = time;
        bestStrategy = strategy;
      }
    }
    plan.choice[node] = bestStrategy;
  }
  plan.time = problem.totalTime(plan.choice);
  return plan;
}
