//===- IntraOpIlp.cpp - Alpa's intra-op ILP, solved with CBC
//---------------===//

#include "tessera/Sharding/IntraOpSearch.h"

#include <Cbc_C_Interface.h>

#include <memory>

using namespace tessera;
using namespace tessera::sharding;

namespace {

/// The objective's unit given to CBC, per second: microseconds. CBC's
/// tolerances are absolute (1e-7 on reduced costs and on the gap), and a
/// small model's step of tens of microseconds priced in seconds falls below
/// them: CBC then proves optimal a plan slower than one it never told
/// apart (gpt2-tiny on mesh 2 under 2.3 MiB: 0.049 ms where 0.040 fits).
constexpr double kObjectivePerSecond = 1e6;

struct CbcModelDeleter {
  void operator()(Cbc_Model *model) const { Cbc_deleteModel(model); }
};

class IlpBuilder {
public:
  explicit IlpBuilder(const ShardingProblem &problem)
      : problem(problem), model(Cbc_newModel()) {}

  /// Lays out the columns (with their objective coefficients) and rows.
  void build() {
    // Strategy times plus the resharding of edges with a fixed end, folded
    // into the free end's coefficients.
    std::vector<std::vector<double>> nodeCost(problem.nodes.size());
    for (auto [node, current] : llvm::enumerate(problem.nodes))
      for (const ShardingStrategy &strategy : current.strategies)
        nodeCost[node].push_back(current.count * strategy.time());
    auto hasChoice = [&](std::optional<unsigned> node) {
      return node && problem.nodes[*node].strategies.size() > 1;
    };
    for (auto [index, edge] : llvm::enumerate(problem.edges)) {
      bool producerFree = hasChoice(edge.producer);
      bool consumerFree = hasChoice(edge.consumer);
      if (producerFree && consumerFree) {
        pairedEdges.push_back(index);
        continue;
      }
      if (producerFree) {
        for (size_t from = 0; from < edge.reshardTime.size(); ++from)
          nodeCost[*edge.producer][from] +=
              edge.count * edge.reshardTime[from][0];
      } else if (consumerFree) {
        for (size_t to = 0; to < edge.reshardTime[0].size(); ++to)
          nodeCost[*edge.consumer][to] += edge.count * edge.reshardTime[0][to];
      }
      // Both ends fixed: the same time in every plan, not a choice.
    }

    for (auto [node, costs] : llvm::enumerate(nodeCost)) {
      firstStrategyColumn.push_back(columnCount);
      for (double cost : costs)
        addColumn(cost, /*isInteger=*/true);
    }
    std::vector<int> edgeFirstColumn;
    for (unsigned index : pairedEdges) {
      edgeFirstColumn.push_back(columnCount);
      for (const std::vector<double> &row : problem.edges[index].reshardTime)
        for (double cost : row)
          addColumn(problem.edges[index].count * cost, /*isInteger=*/false);
    }

    // One strategy per node.
    for (auto [node, current] : llvm::enumerate(problem.nodes)) {
      std::vector<int> columns;
      for (size_t strategy = 0; strategy < current.strategies.size();
           ++strategy)
        columns.push_back(firstStrategyColumn[node] + strategy);
      addRow(columns, std::vector<double>(columns.size(), 1.0), 1.0);
    }
    // Alpa's memory bound: the chosen strategies' bytes fit the device.
    if (problem.memoryLimit) {
      std::vector<int> columns;
      std::vector<double> bytes;
      for (auto [node, current] : llvm::enumerate(problem.nodes))
        for (auto [strategy, choice] : llvm::enumerate(current.strategies)) {
          columns.push_back(firstStrategyColumn[node] + strategy);
          bytes.push_back(current.count * choice.memoryBytes);
        }
      addRow(columns, bytes, *problem.memoryLimit, 'L');
    }
    // e's rows sum to the producer's s, its columns to the consumer's.
    for (auto [pair, index] : llvm::enumerate(pairedEdges)) {
      const ShardingEdge &edge = problem.edges[index];
      int fromCount = edge.reshardTime.size();
      int toCount = edge.reshardTime[0].size();
      int first = edgeFirstColumn[pair];
      for (int from = 0; from < fromCount; ++from) {
        std::vector<int> columns;
        for (int to = 0; to < toCount; ++to)
          columns.push_back(first + from * toCount + to);
        columns.push_back(firstStrategyColumn[*edge.producer] + from);
        std::vector<double> coefficients(toCount, 1.0);
        coefficients.push_back(-1.0);
        addRow(columns, coefficients, 0.0);
      }
      for (int to = 0; to < toCount; ++to) {
        std::vector<int> columns;
        for (int from = 0; from < fromCount; ++from)
          columns.push_back(first + from * toCount + to);
        columns.push_back(firstStrategyColumn[*edge.consumer] + to);
        std::vector<double> coefficients(fromCount, 1.0);
        coefficients.push_back(-1.0);
        addRow(columns, coefficients, 0.0);
      }
    }
  }

  std::optional<ShardingPlan> solve(double timeLimitSeconds) {
    Cbc_setObjSense(model.get(), 1.0);
    Cbc_setLogLevel(model.get(), 0);
    Cbc_setMaximumSeconds(model.get(), timeLimitSeconds);
    Cbc_solve(model.get());
    const double *solution = Cbc_getColSolution(model.get());
    if (!solution || Cbc_isProvenInfeasible(model.get()))
      return std::nullopt;

    ShardingPlan plan;
    plan.method = PlanMethod::Ilp;
    for (auto [node, current] : llvm::enumerate(problem.nodes)) {
      // An integral solution has exactly one s(v, i) at 1; anything else
      // (no integral solution when the time ran out) is no plan.
      int chosen = -1;
      for (size_t strategy = 0; strategy < current.strategies.size();
           ++strategy) {
        if (solution[firstStrategyColumn[node] + strategy] > 0.5) {
          if (chosen >= 0)
            return std::nullopt;
          chosen = static_cast<int>(strategy);
        }
      }
      if (chosen < 0)
        return std::nullopt;
      plan.choice.push_back(static_cast<unsigned>(chosen));
    }
    if (!problem.fitsMemory(plan.choice))
      return std::nullopt;
    plan.time = problem.totalTime(plan.choice);
    plan.provenOptimal = Cbc_isProvenOptimal(model.get()) != 0;
    return plan;
  }

private:
  /// A column of `seconds` in the objective.
  void addColumn(double seconds, bool isInteger) {
    Cbc_addCol(model.get(), "", 0.0, 1.0, seconds * kObjectivePerSecond,
               isInteger ? 1 : 0, 0, nullptr, nullptr);
    ++columnCount;
  }

  void addRow(const std::vector<int> &columns,
              const std::vector<double> &coefficients, double rhs,
              char sense = 'E') {
    Cbc_addRow(model.get(), "", static_cast<int>(columns.size()),
               columns.data(), coefficients.data(), sense, rhs);
  }

  const ShardingProblem &problem;
  std::unique_ptr<Cbc_Model, CbcModelDeleter> model;
  int columnCount = 0;
  std::vector<int> firstStrategyColumn;
  std::vector<unsigned> pairedEdges;
};

} // namespace

std::optional<ShardingPlan> sharding::solveIlp(const ShardingProblem &problem,
                                               double timeLimitSeconds) {
  if (problem.nodes.empty()) {
    ShardingPlan plan;
    plan.method = PlanMethod::Ilp;
    plan.time = problem.totalTime(plan.choice);
    plan.provenOptimal = true;
    return plan;
  }
  IlpBuilder builder(problem);
  builder.build();
  return builder.solve(timeLimitSeconds);
}
