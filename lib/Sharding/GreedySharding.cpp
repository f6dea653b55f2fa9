//===- GreedySharding.cpp - the fast fallback of the intra-op search
//-------===//

#include "tessera/Sharding/IntraOpSearch.h"

#include <limits>

using namespace tessera;
using namespace tessera::sharding;

/// Ops in order, each the strategy minimizing its time plus `bytePrice`
/// seconds per byte of its memory, given its decided producers.
static ShardingPlan greedyWithPrice(
    const ShardingProblem &problem,
    llvm::ArrayRef<llvm::SmallVector<unsigned, 4>> edgesInto,
    double bytePrice) {
  ShardingPlan plan;
  plan.method = PlanMethod::Greedy;
  plan.choice.assign(problem.nodes.size(), 0);
  for (auto [node, current] : llvm::enumerate(problem.nodes)) {
    double best = std::numeric_limits<double>::infinity();
    unsigned bestStrategy = 0;
    for (unsigned strategy = 0; strategy < current.strategies.size();
         ++strategy) {
      plan.choice[node] = strategy;
      const ShardingStrategy &candidate = current.strategies[strategy];
      double time = current.count * (candidate.time() +
                                     bytePrice * candidate.memoryBytes);
      for (unsigned edge : edgesInto[node])
        time += problem.edges[edge].count *
                problem.edgeTime(problem.edges[edge], plan.choice);
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

ShardingPlan sharding::solveGreedy(const ShardingProblem &problem) {
  // Nodes are in program order, so every producer of a node is decided
  // before it, except the producers of edges that a repeated layer feeds
  // back into itself, which count at their current choice.
  llvm::SmallVector<llvm::SmallVector<unsigned, 4>> edgesInto(
      problem.nodes.size());
  for (auto [index, edge] : llvm::enumerate(problem.edges)) {
    if (edge.consumer)
      edgesInto[*edge.consumer].push_back(index);
    else if (edge.producer)
      edgesInto[*edge.producer].push_back(index); // to a function result
  }
  ShardingPlan plan = greedyWithPrice(problem, edgesInto, 0.0);
  if (!problem.memoryLimit ||
      problem.totalMemory(plan.choice) <= *problem.memoryLimit)
    return plan;

  // Over the memory bound: price memory (a Lagrange multiplier), searching
  // for the smallest price whose plan fits. A price of a second per byte
  // makes memory dominate every time, so the plan then uses about the
  // least memory there is; if even that does not fit, that plan answers
  // and the caller reports it infeasible.
  double low = 0, high = 1e-15;
  ShardingPlan fitting = greedyWithPrice(problem, edgesInto, 1.0);
  while (high < 1.0) {
    ShardingPlan candidate = greedyWithPrice(problem, edgesInto, high);
    if (problem.totalMemory(candidate.choice) <= *problem.memoryLimit) {
      fitting = std::move(candidate);
      break;
    }
    low = high;
    high *= 4;
  }
  for (int step = 0; step < 30 && high < 1.0; ++step) {
    double middle = (low + high) / 2;
    ShardingPlan candidate = greedyWithPrice(problem, edgesInto, middle);
    if (problem.totalMemory(candidate.choice) <= *problem.memoryLimit) {
      fitting = std::move(candidate);
      high = middle;
    } else {
      low = middle;
    }
  }
  return fitting;
}
