//===- IntraOpSearch.h - one strategy per op on one mesh axis ---*- C++ -*-===//
//
// Alpa's intra-op ILP, on one mesh axis: a binary variable s(v, i) per node v
// and strategy i with sum_i s(v, i) = 1; per edge (u, v) whose both ends
// have a choice, continuous variables e(u, v, i, j) in [0, 1] with
// sum_j e(i, j) = s(u, i) and sum_i e(i, j) = s(v, j), which an integral s
// forces to the product s(u, i) s(v, j) (the linearization of the quadratic
// resharding term); minimize
//   sum s(v, i) time(v, i) + sum e(u, v, i, j) reshard(u, v, i, j).
// Edges with a fixed end (a function argument or result, or a node with one
// strategy) fold their time into the other end's s coefficients.
// CBC solves it within a time limit; when it fails or times out without a
// solution, or its solution is worse than the greedy one, the greedy plan
// answers.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SHARDING_INTRAOPSEARCH_H
#define TESSERA_SHARDING_INTRAOPSEARCH_H

#include "tessera/Sharding/ShardingProblem.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::sharding {

enum class PlanMethod { Ilp, Greedy };

struct ShardingPlan {
  /// Per node of the problem, the index of its strategy.
  std::vector<unsigned> choice;
  /// The objective under `choice`, seconds (ShardingProblem::totalTime).
  double time = 0;
  PlanMethod method = PlanMethod::Greedy;
  /// CBC proved `choice` optimal.
  bool provenOptimal = false;
};

/// One line per node ("tess.linear: column-parallel") then one per
/// collective on an edge ("all_reduce over tp of 4194304 bytes after
/// tess.linear").
std::string describePlan(const ShardingProblem &problem,
                         const ShardingPlan &plan);

/// Ops in order, each given the strategy that is cheapest together with the
/// resharding from its already chosen producers (and to the function's
/// results). Always valid; not optimal in general (it cannot see that a
/// costlier strategy now saves resharding later).
ShardingPlan solveGreedy(const ShardingProblem &problem);

/// The ILP above with CBC, stopping after `timeLimitSeconds`. Nothing when
/// CBC ends without an integral solution.
std::optional<ShardingPlan> solveIlp(const ShardingProblem &problem,
                                     double timeLimitSeconds);

/// The ILP's plan, or the greedy plan when the ILP has none or a worse one.
ShardingPlan searchIntraOp(const ShardingProblem &problem,
                           double timeLimitSeconds);

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_INTRAOPSEARCH_H
