//===- IntraOpSearch.cpp - ILP first, greedy as the fallback
//---------------===//

#include "tessera/Sharding/IntraOpSearch.h"

#include "tessera/CostModel/Collective.h"

#include "llvm/Support/raw_ostream.h"

using namespace tessera;
using namespace tessera::sharding;

std::string sharding::describePlan(const ShardingProblem &problem,
                                   const ShardingPlan &plan) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (auto [node, strategy] : llvm::zip_equal(problem.nodes, plan.choice))
    os << node.op->getName().getStringRef() << ": "
       << node.strategies[strategy].name << "\n";
  for (const ShardingEdge &edge : problem.edges) {
    ReshardPlan reshard = problem.edgeReshard(edge, plan.choice);
    for (const ReshardStep &step : reshard.steps) {
      os << cost::collectiveName(step.collective) << " over "
         << problem.mesh->axes[step.axis].name << " of "
         << static_cast<int64_t>(step.bytes) << " bytes after ";
      if (edge.producer)
        os << problem.nodes[*edge.producer].op->getName().getStringRef();
      else
        os << "a function argument";
      os << "\n";
    }
  }
  return text;
}

ShardingPlan sharding::searchIntraOp(const ShardingProblem &problem,
                                     double timeLimitSeconds) {
  ShardingPlan greedy = solveGreedy(problem);
  std::optional<ShardingPlan> ilp = solveIlp(problem, timeLimitSeconds);
  bool greedyFits = !problem.memoryLimit ||
                    problem.totalMemory(greedy.choice) <= *problem.memoryLimit;
  if (ilp && (ilp->time <= greedy.time || !greedyFits))
    return *ilp;
  return greedy;
}
