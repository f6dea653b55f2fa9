//===- InterOpSearch.cpp - Alpa's inter-op dynamic program ----------------===//

#include "tessera/Pipeline/InterOpSearch.h"

#include "tessera/CostModel/MemoryText.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

namespace tessera::pipeline {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

llvm::Error searchError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Whether `devices` is a submesh shape: whole nodes, or a power-of-two
/// part of one node dividing it.
std::optional<Submesh> submeshOf(int64_t devices,
                                 const cost::Cluster &cluster) {
  int64_t perNode = cluster.devicesPerNode;
  if (devices <= 0)
    return std::nullopt;
  if (devices >= perNode) {
    if (devices % perNode != 0)
      return std::nullopt;
    return Submesh{devices / perNode, perNode};
  }
  if (perNode % devices != 0 || (devices & (devices - 1)) != 0)
    return std::nullopt;
  return Submesh{1, devices};
}

size_t layersIn(const ProgramProfile &profile, size_t first, size_t end) {
  size_t layers = 0;
  for (size_t unit = first; unit < end; ++unit)
    layers += profile.units[unit].kind == UnitKind::Layer;
  return layers;
}

/// One (p, m, schedule): the stage-cost table and the DP over it.
class StageTable {
public:
  StageTable(const ProgramProfile &profile, const cost::Cluster &cluster,
             const StageCostOracle &oracle, const SearchOptions &options,
             int64_t stages, int64_t microBatches, Schedule schedule,
             Submesh submesh)
      : profile(profile), cluster(cluster), oracle(oracle), options(options),
        stages(stages), microBatches(microBatches), schedule(schedule),
        submesh(submesh), units(profile.units.size()),
        cost(stages * units * (units + 1), kInfinity),
        choice(stages * units * (units + 1)) {
    // Per position, once: interleaved walks each device's task order. The
    // embedding's and the head's chunks stash apart from the layer-only
    // ones where their units keep values of their own (a saved value is
    // kept by the unit whose backward first reads it, so an embedding's
    // output is its first layer's).
    size_t last = profile.units.size() - 1;
    bool embeddingSavesOwn = profile.unit(0).savedAll.at(1, 1) > 0;
    bool headSavesOwn = profile.unit(last).savedAll.at(1, 1) > 0;
    for (int64_t position = 0; position < stages; ++position)
      depths.push_back(stashDepths(schedule, stages, position, microBatches,
                                   embeddingSavesOwn, headSavesOwn));
  }

  /// Fills c(r, i, k) and returns its distinct finite values, ascending.
  std::vector<double> build();
  /// The DP with every stage bounded by `bound`: the ranges, first to last,
  /// or nothing if no partition fits.
  std::optional<std::vector<std::pair<size_t, size_t>>>
  partition(double bound) const;
  /// The stage plans of a partition (the oracle asked again for the chosen
  /// plan of each range).
  PipelinePlan planOf(const std::vector<std::pair<size_t, size_t>> &ranges,
                      int64_t devices) const;
  /// The plan of `ranges` (`plan`, planOf's) with boundaries moved one
  /// unit at a time while the step (evaluatePlan) gets shorter: the
  /// dynamic program sums the stages' times, a step adds once-a-step work
  /// at its slowest stage (the gradient exchange, the optimizer), which a
  /// sum cannot price.
  PipelinePlan refined(std::vector<std::pair<size_t, size_t>> ranges,
                       PipelinePlan plan, int64_t devices) const;

private:
  struct Chosen {
    RematMode remat = RematMode::None;
    unsigned plan = 0;
  };
  /// Whether the forced intra-op choices (SearchOptions) admit `plan`.
  bool allowed(const StageCost &plan) const {
    if (options.tensorParallel && plan.tensorParallel != *options.tensorParallel)
      return false;
    return !options.zero || plan.dataParallel == 1 || plan.zero == *options.zero;
  }
  /// Whether units [first, end) may be the stage at `position` (the forced
  /// boundaries, when given).
  bool forcedRange(int64_t position, size_t first, size_t end) const {
    if (options.stageUnitCounts.empty())
      return true;
    size_t start = 0;
    for (int64_t stage = 0; stage < position; ++stage)
      start += options.stageUnitCounts[stage];
    return first == start && end == start + options.stageUnitCounts[position];
  }
  size_t index(int64_t remaining, size_t first, size_t end) const {
    return ((remaining - 1) * units + first) * (units + 1) + end;
  }
  /// The query for units [first, end) as the stage at `position`.
  StageQuery query(size_t first, size_t end, RematMode remat,
                   int64_t position) const {
    StageQuery stageQuery;
    stageQuery.firstUnit = first;
    stageQuery.endUnit = end;
    stageQuery.submesh = submesh;
    stageQuery.microBatchSamples = options.globalBatch / microBatches;
    stageQuery.microBatches = microBatches;
    stageQuery.remat = remat;
    stageQuery.boundaryCrossings =
        schedule.kind == ScheduleKind::Interleaved ? schedule.virtualStages
                                                   : 1;
    if (position > 0)
      stageQuery.previousLink =
          linkBetweenStages(cluster, submesh, position - 1, position);
    if (position + 1 < stages)
      stageQuery.nextLink =
          linkBetweenStages(cluster, submesh, position, position + 1);
    // The interleaved chunks wrap from the last device to the first: each
    // micro-batch crosses that link v - 1 times, received by the first
    // stage and sent by the last.
    if (schedule.kind == ScheduleKind::Interleaved && stages > 1 &&
        (position == 0 || position + 1 == stages)) {
      stageQuery.wrapCrossings = schedule.virtualStages - 1;
      stageQuery.wrapLink = linkBetweenStages(cluster, submesh, stages - 1, 0);
    }
    return stageQuery;
  }

  const ProgramProfile &profile;
  const cost::Cluster &cluster;
  const StageCostOracle &oracle;
  const SearchOptions &options;
  int64_t stages, microBatches;
  Schedule schedule;
  Submesh submesh;
  size_t units;
  std::vector<double> cost;
  std::vector<Chosen> choice;
  /// The stash pools at each position.
  std::vector<StashDepths> depths;
};

std::vector<double> StageTable::build() {
  std::vector<double> values;
  double memory = cluster.device.memoryBytes;
  size_t longest = units - stages + 1;
  struct Candidate {
    double time;
    double fixedBytes;
    /// Kept bytes per micro-batch: the stage's, its embedding's, its head's.
    double kept, embeddingKept, headKept;
    RematMode remat;
    unsigned plan;
  };
  // A range's candidates, fastest first, depend on its position only
  // through the links to its neighbours (and an interleaved schedule's
  // wrap): priced once per set of links.
  std::map<std::tuple<cost::LinkLevel, cost::LinkLevel, int64_t,
                      cost::LinkLevel>,
           std::vector<Candidate>>
      candidatesByLinks;
  auto candidatesAt = [&](size_t first, size_t end, size_t layers,
                          int64_t position) -> const std::vector<Candidate> & {
    StageQuery links = query(first, end, RematMode::None, position);
    auto [found, added] = candidatesByLinks.try_emplace(
        std::make_tuple(links.previousLink, links.nextLink,
                        links.wrapCrossings, links.wrapLink));
    std::vector<Candidate> &candidates = found->second;
    if (!added)
      return candidates;
    for (RematMode remat :
         {RematMode::None, RematMode::Selective, RematMode::Full}) {
      if (options.remat && remat != *options.remat && layers > 0)
        continue;
      if (layers == 0 && remat != RematMode::None)
        continue;
      std::vector<StageCost> plans =
          oracle.plans(query(first, end, remat, position));
      for (auto [planIndex, plan] : llvm::enumerate(plans)) {
        if (!allowed(plan))
          continue;
        candidates.push_back(
            {plan.perMicroBatch() + plan.perStep() / microBatches,
             plan.memory.fixed(), plan.memory.activationsPerMicroBatch,
             plan.memory.embeddingActivations, plan.memory.headActivations,
             remat,
             static_cast<unsigned>(planIndex)});
      }
    }
    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate &a, const Candidate &b) {
                return a.time < b.time;
              });
    return candidates;
  };
  for (size_t first = 0; first < units; ++first) {
    for (size_t end = first + 1; end <= std::min(units, first + longest);
         ++end) {
      size_t layers = layersIn(profile, first, end);
      // Interleaved:V cuts a stage's layers into V chunks, each of at least
      // one layer (the first stage's first chunk and the last stage's last
      // hold the embedding and the head besides): a stage of no layers
      // has chunks of nothing, which the compile cannot build.
      if (schedule.kind == ScheduleKind::Interleaved &&
          (layers == 0 || layers % schedule.virtualStages != 0))
        continue;
      candidatesByLinks.clear();
      for (int64_t remaining = 1; remaining <= stages; ++remaining) {
        int64_t position = stages - remaining;
        if (!forcedRange(position, first, end))
          continue;
        const StashDepths &depthsHere = depths[static_cast<size_t>(position)];
        for (const Candidate &candidate :
             candidatesAt(first, end, layers, position))
          if (candidate.fixedBytes +
                  depthsHere.inFlight(candidate.kept, candidate.embeddingKept,
                                      candidate.headKept) *
                      candidate.kept <=
              memory) {
            cost[index(remaining, first, end)] = candidate.time;
            choice[index(remaining, first, end)] = {candidate.remat,
                                                    candidate.plan};
            values.push_back(candidate.time);
            break;
          }
      }
    }
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

std::optional<std::vector<std::pair<size_t, size_t>>>
StageTable::partition(double bound) const {
  // best[r][i]: the least sum of stage times placing units [i, U) on the
  // last r stages; next[r][i] the end of the first of them.
  std::vector<std::vector<double>> best(
      stages + 1, std::vector<double>(units + 1, kInfinity));
  std::vector<std::vector<size_t>> next(stages + 1,
                                        std::vector<size_t>(units + 1, 0));
  best[0][units] = 0;
  for (int64_t remaining = 1; remaining <= stages; ++remaining)
    for (size_t first = 0; first < units; ++first)
      for (size_t end = first + 1; end <= units; ++end) {
        double stage = cost[index(remaining, first, end)];
        if (stage > bound || best[remaining - 1][end] == kInfinity)
          continue;
        double total = stage + best[remaining - 1][end];
        if (total < best[remaining][first]) {
          best[remaining][first] = total;
          next[remaining][first] = end;
        }
      }
  if (best[stages][0] == kInfinity)
    return std::nullopt;
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t first = 0;
  for (int64_t remaining = stages; remaining >= 1; --remaining) {
    size_t end = next[remaining][first];
    ranges.push_back({first, end});
    first = end;
  }
  return ranges;
}

PipelinePlan
StageTable::planOf(const std::vector<std::pair<size_t, size_t>> &ranges,
                   int64_t devices) const {
  PipelinePlan plan;
  plan.schedule = schedule;
  plan.microBatches = microBatches;
  plan.microBatchSamples = options.globalBatch / microBatches;
  plan.devices = devices;
  for (auto [position, range] : llvm::enumerate(ranges)) {
    int64_t remaining = stages - static_cast<int64_t>(position);
    const Chosen &chosen = choice[index(remaining, range.first, range.second)];
    StagePlan stage;
    stage.firstUnit = range.first;
    stage.endUnit = range.second;
    stage.firstDevice = static_cast<int64_t>(position) * submesh.devices();
    stage.submesh = submesh;
    stage.remat = chosen.remat;
    StageQuery stageQuery = query(range.first, range.second, chosen.remat,
                                  static_cast<int64_t>(position));
    stage.cost = oracle.plans(stageQuery)[chosen.plan];
    const StageMemory &memory = stage.cost.memory;
    stage.inFlight = depths[position].inFlight(memory.activationsPerMicroBatch,
                                               memory.embeddingActivations,
                                               memory.headActivations);
    plan.stages.push_back(stage);
  }
  evaluatePlan(plan, profile, cluster);
  return plan;
}

PipelinePlan
StageTable::refined(std::vector<std::pair<size_t, size_t>> ranges,
                    PipelinePlan best, int64_t devices) const {
  auto fits = [&](const std::vector<std::pair<size_t, size_t>> &candidate) {
    for (auto [position, range] : llvm::enumerate(candidate)) {
      int64_t remaining = stages - static_cast<int64_t>(position);
      if (cost[index(remaining, range.first, range.second)] == kInfinity)
        return false;
    }
    return true;
  };
  for (bool improved = true; improved;) {
    improved = false;
    for (size_t cut = 0; cut + 1 < ranges.size(); ++cut)
      for (int delta : {-1, 1}) {
        size_t boundary = ranges[cut].second + delta;
        if (boundary <= ranges[cut].first ||
            boundary >= ranges[cut + 1].second)
          continue;
        std::vector<std::pair<size_t, size_t>> moved = ranges;
        moved[cut].second = boundary;
        moved[cut + 1].first = boundary;
        if (!fits(moved))
          continue;
        PipelinePlan plan = planOf(moved, devices);
        if (plan.stepSeconds < best.stepSeconds * (1 - 1e-9)) {
          best = std::move(plan);
          ranges = std::move(moved);
          improved = true;
        }
      }
  }
  return best;
}

} // namespace

void evaluatePlan(PipelinePlan &plan, const ProgramProfile &profile,
                  const cost::Cluster &cluster) {
  std::vector<double> perMicroBatch;
  plan.perStepSeconds = 0;
  for (const StagePlan &stage : plan.stages) {
    perMicroBatch.push_back(stage.cost.perMicroBatch());
    plan.perStepSeconds = std::max(plan.perStepSeconds, stage.cost.perStep());
  }
  plan.pipelineSeconds =
      pipelinedSeconds(plan.schedule, perMicroBatch, plan.microBatches);
  // A tied embedding on two stages: its gradient is summed between the
  // first and last stage (each TP rank exchanges its 1/t slice), on the
  // link between their devices.
  plan.tiedGradientSeconds = 0;
  if (plan.stages.size() > 1 && profile.tiedGradientBytes > 0) {
    const StagePlan &first = plan.stages.front();
    const cost::LinkModel &link = cluster.link(linkBetweenStages(
        cluster, first.submesh, 0,
        static_cast<int64_t>(plan.stages.size()) - 1));
    plan.tiedGradientSeconds =
        link.time(cost::Collective::AllReduce,
                  profile.tiedGradientBytes / first.cost.tensorParallel, 2);
  }
  plan.stepSeconds =
      plan.pipelineSeconds + plan.perStepSeconds + plan.tiedGradientSeconds;
}

namespace {

/// The search over every (stages, micro-batches, schedule) with the
/// stages' intra-op plans chosen each on its own.
llvm::Expected<PipelinePlan> searchEachStage(const ProgramProfile &profile,
                                             const cost::Cluster &cluster,
                                             const StageCostOracle &oracle,
                                             const SearchOptions &options) {
  auto started = std::chrono::steady_clock::now();
  int64_t devices = options.devices.value_or(cluster.deviceCount());
  int64_t units = static_cast<int64_t>(profile.units.size());
  int64_t batch = options.globalBatch;

  std::vector<int64_t> stageCounts;
  if (options.stages) {
    int64_t stages = *options.stages;
    if (stages < 1 || stages > units)
      return searchError(llvm::formatv("--stages {0}: the program has {1} "
                                       "units (embedding, {2} layers, head); "
                                       "expected 1 to {1}",
                                       stages, units, profile.layerCount()));
    if (devices % stages != 0 || !submeshOf(devices / stages, cluster))
      return searchError(llvm::formatv(
          "--stages {0}: {1} devices do not split into {0} equal submeshes "
          "of whole nodes or a power-of-two part of a node of {2}",
          stages, devices, cluster.devicesPerNode));
    stageCounts.push_back(stages);
  } else if (!options.stageUnitCounts.empty()) {
    return searchError("forced stage boundaries need the stage count");
  } else {
    for (int64_t stages = 1; stages <= std::min(units, devices); ++stages)
      if (devices % stages == 0 && submeshOf(devices / stages, cluster))
        stageCounts.push_back(stages);
  }
  if (!options.stageUnitCounts.empty()) {
    size_t forced = 0;
    for (size_t count : options.stageUnitCounts)
      forced += count;
    if (static_cast<int64_t>(options.stageUnitCounts.size()) !=
            *options.stages ||
        forced != static_cast<size_t>(units) ||
        llvm::is_contained(options.stageUnitCounts, size_t(0)))
      return searchError(llvm::formatv(
          "the forced stage boundaries place {0} units on {1} stages; the "
          "program has {2} units on {3} stages, at least one each",
          forced, options.stageUnitCounts.size(), units, *options.stages));
  }
  std::vector<int64_t> microBatchCounts;
  if (options.microBatches) {
    if (*options.microBatches < 1 || batch % *options.microBatches != 0)
      return searchError(llvm::formatv("--microbatches {0}: must divide the "
                                       "global batch {1}",
                                       *options.microBatches, batch));
    microBatchCounts.push_back(*options.microBatches);
  } else {
    for (int64_t count = 1; count <= batch; ++count)
      if (batch % count == 0)
        microBatchCounts.push_back(count);
  }
  std::vector<Schedule> schedules;
  if (options.schedule)
    schedules.push_back(*options.schedule);
  else
    for (int64_t chunks : {1, 2, 4})
      schedules.push_back(
          {chunks == 1 ? ScheduleKind::OneForwardOneBackward
                       : ScheduleKind::Interleaved,
           chunks});

  // A pinned interleaved:V over pinned stages needs V layers a stage at
  // least: every chunk holds one (see the stage table).
  if (options.schedule &&
      options.schedule->kind == ScheduleKind::Interleaved && options.stages &&
      static_cast<int64_t>(profile.layerCount()) <
          *options.stages * options.schedule->virtualStages)
    return searchError(llvm::formatv(
        "--schedule {0} over {1} stages cuts each stage's layers into {2} "
        "chunks of at least one layer: the program has {3} layers, fewer "
        "than {4} (pin fewer stages or another --schedule)",
        options.schedule->name(), *options.stages,
        options.schedule->virtualStages, profile.layerCount(),
        *options.stages * options.schedule->virtualStages));

  std::optional<PipelinePlan> best;
  int64_t layouts = 0, programs = 0;
  for (int64_t stages : stageCounts) {
    Submesh submesh = *submeshOf(devices / stages, cluster);
    for (const Schedule &schedule : schedules) {
      if (schedule.kind == ScheduleKind::Interleaved && stages == 1)
        continue;
      for (int64_t microBatches : microBatchCounts) {
        // Megatron's interleaved schedule runs micro-batches in groups of p.
        if (schedule.kind == ScheduleKind::Interleaved &&
            microBatches % stages != 0)
          continue;
        StageTable table(profile, cluster, oracle, options, stages,
                         microBatches, schedule, submesh);
        std::vector<double> bounds = table.build();
        ++layouts;
        if (bounds.empty())
          continue;
        // The smallest bound with a partition (feasibility grows with it).
        size_t low = 0, high = bounds.size();
        while (low < high) {
          size_t middle = (low + high) / 2;
          ++programs;
          if (table.partition(bounds[middle]))
            high = middle;
          else
            low = middle + 1;
        }
        // With one micro-batch only the sum counts: no bound.
        if (microBatches == 1)
          low = bounds.size() - 1;
        // The layout's best partition and plan, its boundaries then
        // refined.
        std::optional<std::pair<std::vector<std::pair<size_t, size_t>>,
                                PipelinePlan>>
            layoutBest;
        for (size_t at = low; at < bounds.size(); ++at) {
          double bound = bounds[at];
          if (best && (microBatches - 1) * bound >= best->stepSeconds)
            break;
          ++programs;
          auto ranges = table.partition(bound);
          if (!ranges)
            continue;
          PipelinePlan plan = table.planOf(*ranges, devices);
          if (!best || plan.stepSeconds < best->stepSeconds)
            best = plan;
          if (!layoutBest || plan.stepSeconds < layoutBest->second.stepSeconds)
            layoutBest.emplace(std::move(*ranges), std::move(plan));
        }
        if (layoutBest) {
          PipelinePlan plan = table.refined(std::move(layoutBest->first),
                                            std::move(layoutBest->second),
                                            devices);
          if (!best || plan.stepSeconds < best->stepSeconds)
            best = std::move(plan);
        }
      }
    }
  }
  if (!best)
    return searchError(llvm::formatv(
        "no pipeline plan fits in {0} per device on {1} devices with "
        "the forced choices (try more devices, more micro-batches or "
        "--remat full)",
        cost::memoryText(cluster.device.memoryBytes), devices));
  best->layoutsConsidered = layouts;
  best->dynamicPrograms = programs;
  best->searchSeconds = std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - started)
                            .count();
  return *best;
}

} // namespace

bool sharesOneStageMesh(const PipelinePlan &plan) {
  if (plan.stages.empty())
    return true;
  const StageCost &first = plan.stages.front().cost;
  return llvm::all_of(plan.stages, [&](const StagePlan &stage) {
    return stage.cost.tensorParallel == first.tensorParallel &&
           stage.cost.dataParallel == first.dataParallel &&
           (first.dataParallel == 1 || stage.cost.zero == first.zero);
  });
}

llvm::Expected<PipelinePlan> searchPipeline(const ProgramProfile &profile,
                                            const cost::Cluster &cluster,
                                            const StageCostOracle &oracle,
                                            const SearchOptions &options) {
  llvm::Expected<PipelinePlan> best =
      searchEachStage(profile, cluster, oracle, options);
  if (!best || !options.oneStageMesh || sharesOneStageMesh(*best))
    return best;
  // Every stage's submesh has as many devices, so one tensor-parallel
  // degree gives every stage one split, and one ZeRO choice the same state
  // sharding: the fastest plan over those forced choices is the fastest
  // plan on one stage mesh.
  PipelinePlan unconstrained = std::move(*best);
  int64_t devices = options.devices.value_or(cluster.deviceCount());
  std::vector<int64_t> degrees;
  if (options.tensorParallel)
    degrees.push_back(*options.tensorParallel);
  else
    for (int64_t degree = 1; degree <= devices; ++degree)
      if (devices % degree == 0)
        degrees.push_back(degree);
  std::vector<bool> zeros;
  if (options.zero)
    zeros.push_back(*options.zero);
  else
    zeros = {false, true};
  std::optional<PipelinePlan> uniform;
  int64_t layouts = unconstrained.layoutsConsidered,
          programs = unconstrained.dynamicPrograms;
  double seconds = unconstrained.searchSeconds;
  for (int64_t degree : degrees)
    for (bool zero : zeros) {
      SearchOptions forced = options;
      forced.tensorParallel = degree;
      forced.zero = zero;
      llvm::Expected<PipelinePlan> plan =
          searchEachStage(profile, cluster, oracle, forced);
      if (!plan) {
        llvm::consumeError(plan.takeError());
        continue;
      }
      layouts += plan->layoutsConsidered;
      programs += plan->dynamicPrograms;
      seconds += plan->searchSeconds;
      if (sharesOneStageMesh(*plan) &&
          (!uniform || plan->stepSeconds < uniform->stepSeconds))
        uniform = std::move(*plan);
    }
  if (!uniform)
    return searchError(llvm::formatv(
        "no pipeline plan whose stages share one stage mesh fits on {0} "
        "devices (the fastest plan runs stage 0 as {1} and another stage "
        "otherwise; the compiled driver runs every stage on one stage mesh)",
        devices, unconstrained.stages.front().cost.intraOpPlan()));
  uniform->layoutsConsidered = layouts;
  uniform->dynamicPrograms = programs;
  uniform->searchSeconds = seconds;
  return *uniform;
}

} // namespace tessera::pipeline
