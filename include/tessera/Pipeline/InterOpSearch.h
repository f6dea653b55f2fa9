//===- InterOpSearch.h - stages, submeshes, micro-batches, schedule, remat -*- C++ -*-===//
//
// Alpa's inter-op dynamic program over the chain of units (ProgramUnits.h),
// around a StageCostOracle that plans each stage's intra-op layout.
//
// For a stage count p, micro-batch count m and schedule, every stage gets a
// submesh of N / p devices (whole nodes, or a power-of-two part of one node:
// Alpa's submesh shapes), and with r stages left to place (the stage then
// holds the in-flight activations of position p - r):
//
//   F(r, i) = min over k > i of  c(r, i, k) + F(r - 1, k),   F(0, U) = 0
//
// where c(r, i, k) is the cheapest plan of the oracle for units [i, k) at
// that position whose memory fits the device (over remat choices and intra-op
// plans): its time per micro-batch plus its once-per-step work (gradient
// synchronization, optimizer) spread over the m micro-batches. As in Alpa,
// the pipelined time sum + (m - 1) max is minimized by bounding every stage
// by t_max and enumerating t_max over the distinct stage costs in ascending
// order (binary search finds the smallest feasible one), stopping once
// (m - 1) t_max alone exceeds the best plan found; and a (p, m, schedule)
// whose lower bound exceeds the best plan is skipped.
//
// Submeshes are equal across stages: the Transformer's layers are equal, so
// balanced stages want equal meshes, and it keeps each DP O(p U^2); Alpa's
// heterogeneous submeshes would multiply it by the device count. The
// outer loops cover p (N / p a valid submesh, p <= U), m (divisors of the
// global batch) and the schedules (1F1B, interleaved with 2 or 4 chunks;
// GPipe takes as long as 1F1B with more memory, so only when forced). Every
// choice can be forced.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_PIPELINE_INTEROPSEARCH_H
#define TESSERA_PIPELINE_INTEROPSEARCH_H

#include "tessera/Pipeline/Schedule.h"
#include "tessera/Pipeline/StageCostOracle.h"

#include <optional>
#include <vector>

namespace tessera::pipeline {

struct SearchOptions {
  /// Samples per step over the whole cluster.
  int64_t globalBatch = 1;
  /// Devices to use (default: the whole cluster).
  std::optional<int64_t> devices;
  std::optional<int64_t> stages;
  std::optional<int64_t> microBatches;
  std::optional<Schedule> schedule;
  /// A forced remat mode for every layer; nothing lets the search choose.
  std::optional<RematMode> remat;
  /// A forced tensor-parallel degree of every stage's intra-op plan.
  std::optional<int64_t> tensorParallel;
  /// Whether every stage with data-parallel replicas shards its optimizer
  /// state over them (ZeRO-1): forced, or (nothing) the search's choice.
  std::optional<bool> zero;
  /// Forced stage boundaries: the unit count of each stage, first to last
  /// (as many as `stages`, summing to the program's units); empty: the
  /// dynamic program places them. With every choice forced the search
  /// returns that one plan, priced as when it was found (what `tesserac
  /// --explain --plan` reproduces).
  std::vector<size_t> stageUnitCounts;
  /// Only plans whose stages share one stage mesh: the same intra-op split
  /// (data x tensor parallel) and, with data-parallel replicas, the same
  /// ZeRO choice, which is what the compiled driver runs. The dynamic
  /// program picks each stage's cheapest intra-op plan on its own, so it
  /// may give stages different splits; then the search is run again with
  /// each tensor-parallel degree and ZeRO choice forced, and the fastest of
  /// those is the plan.
  bool oneStageMesh = false;
};

struct StagePlan {
  size_t firstUnit = 0;
  size_t endUnit = 0;
  int64_t firstDevice = 0;
  Submesh submesh;
  RematMode remat = RematMode::None;
  /// The stash in micro-batches of the stage's kept values
  /// (StashDepths::inFlight): the whole count for GPipe and 1F1B; an
  /// interleaved device's pools weighed by what their chunks keep.
  double inFlight = 0;
  StageCost cost;
};

struct PipelinePlan {
  std::vector<StagePlan> stages;
  Schedule schedule;
  int64_t microBatches = 1;
  int64_t microBatchSamples = 1;
  int64_t devices = 1;

  /// Seconds: the pipelined forward/backward (Schedule.h), the slowest
  /// stage's once-per-step work (plus the tied embedding's gradient
  /// exchange), and their sum.
  double pipelineSeconds = 0;
  double perStepSeconds = 0;
  double tiedGradientSeconds = 0;
  double stepSeconds = 0;

  /// Search statistics.
  int64_t layoutsConsidered = 0;
  int64_t dynamicPrograms = 0;
  double searchSeconds = 0;
  /// A plan checked against its compiled program
  /// (tessera/Transforms/PipelinePlan.h): each search's memory bound and
  /// the compiled program's largest device in bytes, the last this plan's;
  /// more than one where a compiled program missed the limit.
  std::vector<std::pair<double, double>> compiledSearches;
};

/// Finds the plan with the smallest predicted step time whose memory fits
/// every device (whose stages share one stage mesh, with oneStageMesh).
/// Errors: a forced choice is impossible (named), or nothing fits.
llvm::Expected<PipelinePlan> searchPipeline(const ProgramProfile &profile,
                                            const cost::Cluster &cluster,
                                            const StageCostOracle &oracle,
                                            const SearchOptions &options);

/// Whether every stage of `plan` has the first's intra-op split and, with
/// data-parallel replicas, its ZeRO choice.
bool sharesOneStageMesh(const PipelinePlan &plan);

/// The step time of `plan`'s stages as `searchPipeline` computes it: fills
/// in the times of `plan` from its stages' costs.
void evaluatePlan(PipelinePlan &plan, const ProgramProfile &profile,
                  const cost::Cluster &cluster);

} // namespace tessera::pipeline

#endif // TESSERA_PIPELINE_INTEROPSEARCH_H
