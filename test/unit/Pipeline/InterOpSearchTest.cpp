//===- InterOpSearchTest.cpp - the inter-op DP against enumeration --------===//
//
// A synthetic chain of units priced by a stand-in oracle (time proportional
// to a per-unit weight, memory per unit), so that every partition can be
// enumerated and the DP's answer compared with the true optimum.
//
//===----------------------------------------------------------------------===//

#include "tessera/Pipeline/InterOpSearch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

using namespace tessera;
using namespace tessera::pipeline;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// Units with a compute weight (seconds per sample), resident bytes and
/// activation bytes per sample.
struct SyntheticUnit {
  double secondsPerSample;
  double residentBytes;
  double activationBytesPerSample;
};

class SyntheticOracle : public StageCostOracle {
public:
  explicit SyntheticOracle(std::vector<SyntheticUnit> units)
      : units(std::move(units)) {}

  std::vector<StageCost> plans(const StageQuery &query) const override {
    StageCost cost;
    int64_t devices = query.submesh.devices();
    if (query.microBatchSamples % devices != 0)
      return {};
    cost.dataParallel = devices;
    cost.replicaBatch = query.microBatchSamples / devices;
    for (size_t unit = query.firstUnit; unit < query.endUnit; ++unit) {
      cost.forward += units[unit].secondsPerSample * cost.replicaBatch;
      cost.memory.weights += units[unit].residentBytes;
      cost.memory.activationsPerMicroBatch +=
          units[unit].activationBytesPerSample * cost.replicaBatch;
    }
    cost.backward = 2 * cost.forward;
    // A fixed cost per boundary, as the send/receive of activations.
    cost.pointToPoint = 0.001 * ((query.firstUnit > 0) +
                                 (query.endUnit < units.size()));
    return {cost};
  }
  std::string describe() const override { return "synthetic"; }

private:
  std::vector<SyntheticUnit> units;
};

ProgramProfile profileOf(size_t unitCount) {
  ProgramProfile profile;
  for (size_t unit = 0; unit < unitCount; ++unit) {
    UnitKind kind = unit == 0               ? UnitKind::Embedding
                    : unit + 1 == unitCount ? UnitKind::Head
                                            : UnitKind::Layer;
    profile.units.push_back({kind, "unit", {}});
    profile.structureOf.push_back(0);
  }
  profile.structures.resize(1);
  profile.boundary.resize(unitCount);
  return profile;
}

/// The best 1F1B step time over every contiguous partition into `stages`.
double enumerate(const ProgramProfile &profile, const cost::Cluster &cluster,
                 const StageCostOracle &oracle, int64_t stages,
                 int64_t microBatches, int64_t globalBatch) {
  size_t units = profile.units.size();
  int64_t devices = cluster.deviceCount() / stages;
  Schedule schedule{ScheduleKind::OneForwardOneBackward, 1};
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> ends;
  std::function<void(size_t)> extend = [&](size_t first) {
    if (static_cast<int64_t>(ends.size()) == stages) {
      if (first != units)
        return;
      std::vector<double> times;
      size_t start = 0;
      for (auto [position, end] : llvm::enumerate(ends)) {
        StageQuery query;
        query.firstUnit = start;
        query.endUnit = end;
        query.submesh = {1, devices};
        query.microBatchSamples = globalBatch / microBatches;
        query.microBatches = microBatches;
        std::vector<StageCost> plans = oracle.plans(query);
        if (plans.empty())
          return;
        double inFlight = inFlightMicroBatches(
            schedule, stages, static_cast<int64_t>(position), microBatches);
        if (plans[0].memory.total(inFlight) > cluster.device.memoryBytes)
          return;
        times.push_back(plans[0].perMicroBatch());
        start = end;
      }
      best = std::min(best, pipelinedSeconds(schedule, times, microBatches));
      return;
    }
    for (size_t end = first + 1; end <= units; ++end) {
      ends.push_back(end);
      extend(end);
      ends.pop_back();
    }
  };
  extend(0);
  return best;
}

cost::Cluster eightDevices() {
  auto cluster = cost::loadCluster("h200");
  EXPECT_TRUE(static_cast<bool>(cluster));
  return *cluster;
}

std::vector<SyntheticUnit> unevenUnits() {
  // Unequal layers so that the balanced cut is not the even one.
  std::vector<SyntheticUnit> units;
  double weights[] = {0.5, 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 0.7};
  for (double weight : weights)
    units.push_back({weight * 1e-3, 4 * kGiB, 0.5 * kGiB});
  return units;
}

// Tests the DP against enumeration for every stage count and several
// micro-batch counts: same optimum (with 1F1B, nothing per step).
TEST(InterOpSearch, MatchesEnumeration) {
  cost::Cluster cluster = eightDevices();
  std::vector<SyntheticUnit> units = unevenUnits();
  ProgramProfile profile = profileOf(units.size());
  SyntheticOracle oracle(units);
  for (int64_t stages : {1, 2, 4, 8})
    for (int64_t microBatches : {1, 2, 8, 16}) {
      SearchOptions options;
      options.globalBatch = 64;
      options.stages = stages;
      options.microBatches = microBatches;
      options.schedule = Schedule{ScheduleKind::OneForwardOneBackward, 1};
      auto plan = searchPipeline(profile, cluster, oracle, options);
      double expected =
          enumerate(profile, cluster, oracle, stages, microBatches, 64);
      if (std::isinf(expected)) {
        // No partition runs (a micro-batch smaller than the submesh).
        EXPECT_FALSE(static_cast<bool>(plan));
        llvm::consumeError(plan.takeError());
        continue;
      }
      ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
      EXPECT_NEAR(plan->stepSeconds, expected, 1e-12 * expected)
          << stages << " stages, " << microBatches << " micro-batches";
      EXPECT_EQ(plan->stages.size(), static_cast<size_t>(stages));
    }
}

// Tests that the memory bound binds by position: with 1F1B the first stage
// holds p micro-batches, so a too-large activation footprint there moves
// units to later stages (or makes the cut infeasible), as enumeration says.
TEST(InterOpSearch, MemoryBoundByPosition) {
  cost::Cluster cluster = eightDevices();
  std::vector<SyntheticUnit> units = unevenUnits();
  for (SyntheticUnit &unit : units)
    unit.activationBytesPerSample = 3 * kGiB;
  ProgramProfile profile = profileOf(units.size());
  SyntheticOracle oracle(units);
  SearchOptions options;
  options.globalBatch = 16;
  options.stages = 4;
  options.microBatches = 8;
  options.schedule = Schedule{ScheduleKind::OneForwardOneBackward, 1};
  auto plan = searchPipeline(profile, cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  double expected = enumerate(profile, cluster, oracle, 4, 8, 16);
  EXPECT_NEAR(plan->stepSeconds, expected, 1e-12 * expected);
  for (const StagePlan &stage : plan->stages)
    EXPECT_LE(stage.cost.memory.total(stage.inFlight),
              cluster.device.memoryBytes);
}

// Tests the unforced search: the best over stage and micro-batch counts is
// the best of the enumerations.
TEST(InterOpSearch, SearchesStagesAndMicroBatches) {
  cost::Cluster cluster = eightDevices();
  std::vector<SyntheticUnit> units = unevenUnits();
  ProgramProfile profile = profileOf(units.size());
  SyntheticOracle oracle(units);
  SearchOptions options;
  options.globalBatch = 32;
  options.schedule = Schedule{ScheduleKind::OneForwardOneBackward, 1};
  auto plan = searchPipeline(profile, cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  double expected = std::numeric_limits<double>::infinity();
  for (int64_t stages : {1, 2, 4, 8})
    for (int64_t microBatches : {1, 2, 4, 8, 16, 32})
      expected = std::min(expected, enumerate(profile, cluster, oracle, stages,
                                              microBatches, 32));
  EXPECT_NEAR(plan->stepSeconds, expected, 1e-12 * expected);
}

// Tests the errors of impossible forced choices.
TEST(InterOpSearch, ForcedChoiceErrors) {
  cost::Cluster cluster = eightDevices();
  std::vector<SyntheticUnit> units = unevenUnits();
  ProgramProfile profile = profileOf(units.size());
  SyntheticOracle oracle(units);
  SearchOptions options;
  options.globalBatch = 32;
  options.stages = 3;
  auto plan = searchPipeline(profile, cluster, oracle, options);
  ASSERT_FALSE(static_cast<bool>(plan));
  EXPECT_NE(llvm::toString(plan.takeError()).find("equal submeshes"),
            std::string::npos);
  options.stages = 2;
  options.microBatches = 5;
  plan = searchPipeline(profile, cluster, oracle, options);
  ASSERT_FALSE(static_cast<bool>(plan));
  EXPECT_NE(llvm::toString(plan.takeError()).find("must divide"),
            std::string::npos);
}

// Tests that an interleaved schedule never leaves a chunk without a layer:
// unpinned on a chain of 2 layers, interleaved:2 over 2 stages is not
// considered (each stage would need 2 layers), and pinned it is refused
// with the counts, not searched into a plan the compile cannot cut.
TEST(InterOpSearch, InterleavedChunksEachHoldALayer) {
  cost::Cluster cluster = eightDevices();
  std::vector<SyntheticUnit> units(4, {1e-3, 1 * kGiB, 0.1 * kGiB});
  ProgramProfile profile = profileOf(units.size());
  SyntheticOracle oracle(units);
  SearchOptions options;
  options.globalBatch = 8;
  options.stages = 2;
  options.schedule = Schedule{ScheduleKind::Interleaved, 2};
  auto plan = searchPipeline(profile, cluster, oracle, options);
  ASSERT_FALSE(static_cast<bool>(plan));
  EXPECT_NE(llvm::toString(plan.takeError())
                .find("the program has 2 layers, fewer than 4"),
            std::string::npos);
  options.schedule.reset();
  plan = searchPipeline(profile, cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  EXPECT_NE(plan->schedule.kind, ScheduleKind::Interleaved);
}

// Tests forced stage boundaries: the search returns exactly them, priced as
// when it found them unforced (what `tesserac --explain --plan` relies on),
// and a split that does not cover the units is an error.
TEST(InterOpSearch, ForcedBoundariesReturnThePlan) {
  cost::Cluster cluster = eightDevices();
  std::vector<SyntheticUnit> units = unevenUnits();
  ProgramProfile profile = profileOf(units.size());
  SyntheticOracle oracle(units);
  SearchOptions options;
  options.globalBatch = 32;
  options.stages = 2;
  options.microBatches = 4;
  options.schedule = Schedule{ScheduleKind::OneForwardOneBackward, 1};
  auto found = searchPipeline(profile, cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(found)) << llvm::toString(found.takeError());
  for (const StagePlan &stage : found->stages)
    options.stageUnitCounts.push_back(stage.endUnit - stage.firstUnit);
  auto pinned = searchPipeline(profile, cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(pinned)) << llvm::toString(pinned.takeError());
  ASSERT_EQ(pinned->stages.size(), found->stages.size());
  for (size_t stage = 0; stage < found->stages.size(); ++stage)
    EXPECT_EQ(pinned->stages[stage].endUnit, found->stages[stage].endUnit);
  EXPECT_EQ(pinned->stepSeconds, found->stepSeconds);

  // Another split is taken as given, even when it is slower.
  options.stageUnitCounts = {1, units.size() - 1};
  auto lopsided = searchPipeline(profile, cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(lopsided))
      << llvm::toString(lopsided.takeError());
  EXPECT_EQ(lopsided->stages.front().endUnit, 1u);
  EXPECT_GE(lopsided->stepSeconds, found->stepSeconds);

  options.stageUnitCounts = {1, 1};
  auto uncovered = searchPipeline(profile, cluster, oracle, options);
  ASSERT_FALSE(static_cast<bool>(uncovered));
  EXPECT_NE(llvm::toString(uncovered.takeError()).find("forced stage "
                                                       "boundaries"),
            std::string::npos);
}

// Tests the forced intra-op choices: only the oracle's plans with that
// tensor-parallel degree and ZeRO-1 choice are taken.
TEST(InterOpSearch, ForcedIntraOpChoices) {
  cost::Cluster cluster = eightDevices();
  std::vector<SyntheticUnit> units = unevenUnits();
  ProgramProfile profile = profileOf(units.size());
  SyntheticOracle oracle(units);
  SearchOptions options;
  options.globalBatch = 32;
  options.stages = 2;
  options.tensorParallel = 2;
  auto plan = searchPipeline(profile, cluster, oracle, options);
  ASSERT_FALSE(static_cast<bool>(plan)); // the stand-in has TP 1 only
  llvm::consumeError(plan.takeError());
  options.tensorParallel = 1;
  options.zero = true;
  plan = searchPipeline(profile, cluster, oracle, options);
  ASSERT_FALSE(static_cast<bool>(plan)); // nor ZeRO-1 over its replicas
  llvm::consumeError(plan.takeError());
  options.zero = false;
  plan = searchPipeline(profile, cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  for (const StagePlan &stage : plan->stages)
    EXPECT_EQ(stage.cost.tensorParallel, 1);
}

/// Two intra-op plans a stage, all data parallel or all tensor parallel,
/// the first half of the units cheaper under tensor parallelism and the
/// second under data parallelism: the cheapest plan of each stage differs.
class TwoSplitsOracle : public StageCostOracle {
public:
  /// `exclusive`: a unit's dearer split does not fit a device at all.
  TwoSplitsOracle(size_t units, bool exclusive = false)
      : units(units), exclusive(exclusive) {}
  std::vector<StageCost> plans(const StageQuery &query) const override {
    int64_t devices = query.submesh.devices();
    std::vector<StageCost> costs;
    for (bool tensor : {false, true}) {
      StageCost cost;
      cost.dataParallel = tensor ? 1 : devices;
      cost.tensorParallel = tensor ? devices : 1;
      cost.replicaBatch = query.microBatchSamples / cost.dataParallel;
      cost.memory.weights = 1e6;
      for (size_t unit = query.firstUnit; unit < query.endUnit; ++unit) {
        bool cheap = (unit < units / 2) == tensor;
        cost.forward += cheap ? 1e-3 : 3e-3;
        if (!cheap && exclusive)
          cost.memory.weights = 1e15;
      }
      cost.backward = 2 * cost.forward;
      costs.push_back(cost);
    }
    return costs;
  }
  std::string describe() const override { return "two splits"; }

private:
  size_t units;
  bool exclusive;
};

// The DP picks each stage's intra-op plan on its own, so its fastest
// two-stage plan runs one stage tensor parallel and the other data
// parallel; with oneStageMesh (what the compiled driver runs) the plan is
// the fastest whose stages share one split: the fastest over each forced
// tensor-parallel degree, slower than the mixed one.
TEST(InterOpSearch, OneStageMeshGivesEveryStageOneSplit) {
  cost::Cluster cluster = eightDevices();
  ProgramProfile profile = profileOf(8);
  TwoSplitsOracle oracle(8);
  SearchOptions options;
  options.globalBatch = 8;
  options.stages = 2;
  options.microBatches = 1;
  auto mixed = searchPipeline(profile, cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(mixed)) << llvm::toString(mixed.takeError());
  EXPECT_FALSE(sharesOneStageMesh(*mixed));
  options.oneStageMesh = true;
  auto one = searchPipeline(profile, cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(one)) << llvm::toString(one.takeError());
  EXPECT_TRUE(sharesOneStageMesh(*one));
  EXPECT_GT(one->stepSeconds, mixed->stepSeconds);
  double fastestForced = std::numeric_limits<double>::infinity();
  for (int64_t degree : {1, 4}) {
    SearchOptions forced = options;
    forced.oneStageMesh = false;
    forced.tensorParallel = degree;
    auto plan = searchPipeline(profile, cluster, oracle, forced);
    ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
    fastestForced = std::min(fastestForced, plan->stepSeconds);
  }
  EXPECT_DOUBLE_EQ(one->stepSeconds, fastestForced);
}

// When no split fits every stage, the search says so instead of returning
// a plan the compiled driver cannot run.
TEST(InterOpSearch, OneStageMeshErrorWhenNoSplitFitsEveryStage) {
  cost::Cluster cluster = eightDevices();
  ProgramProfile profile = profileOf(8);
  TwoSplitsOracle oracle(8, /*exclusive=*/true);
  SearchOptions options;
  options.globalBatch = 8;
  options.stages = 2;
  options.microBatches = 1;
  auto mixed = searchPipeline(profile, cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(mixed)) << llvm::toString(mixed.takeError());
  options.oneStageMesh = true;
  auto one = searchPipeline(profile, cluster, oracle, options);
  ASSERT_FALSE(static_cast<bool>(one));
  std::string message = llvm::toString(one.takeError());
  EXPECT_NE(message.find("no pipeline plan whose stages share one stage mesh "
                         "fits on 8 devices"),
            std::string::npos)
      << message;
}

/// Two nodes of two devices, the link between the nodes 100 times slower
/// than inside one.
llvm::Expected<cost::Cluster> twoNodesOfTwo() {
  return cost::parseCluster(R"json({
    "name": "two-by-two", "nodes": 2, "devices_per_node": 2,
    "device": {"memory_bytes": 1e12, "memory_bandwidth": 1e12,
               "flops": {"bf16": 1e12, "fp16": 1e12, "fp32": 1e12}},
    "links": {"intra_node": {"latency": 0, "bandwidth": 1e11},
              "inter_node": {"latency": 0, "bandwidth": 1e9}}})json",
                            "two-by-two.json");
}

/// Each stage's send/receive seconds, first to last.
std::vector<double> pointToPointOf(const PipelinePlan &plan) {
  std::vector<double> perStage;
  for (const StagePlan &stage : plan.stages)
    perStage.push_back(stage.cost.pointToPoint);
  return perStage;
}

/// One second of send/receive per boundary a stage's queries say crosses
/// nodes, nothing else.
class LinkCountingOracle : public StageCostOracle {
public:
  explicit LinkCountingOracle(size_t units) : units(units) {}
  std::vector<StageCost> plans(const StageQuery &query) const override {
    StageCost cost;
    cost.dataParallel = query.submesh.devices();
    cost.forward = 1e-3 * static_cast<double>(query.endUnit - query.firstUnit);
    if (query.firstUnit > 0)
      cost.pointToPoint += query.previousLink == cost::LinkLevel::InterNode;
    if (query.endUnit < units)
      cost.pointToPoint += query.nextLink == cost::LinkLevel::InterNode;
    // Ten seconds per crossing of an interleaved schedule's wrap across
    // nodes.
    cost.pointToPoint += 10.0 * static_cast<double>(query.wrapCrossings) *
                         (query.wrapLink == cost::LinkLevel::InterNode);
    return {cost};
  }
  std::string describe() const override { return "link counting"; }

private:
  size_t units;
};

// Tests that the search tells each stage the links its boundaries cross:
// stages of one device on two nodes of two, stages 0 and 1 on node 0, 2 and
// 3 on node 1, so only the boundary between stages 1 and 2 crosses nodes
// (issue 22: every boundary of stages smaller than a node was intra-node);
// stages of a node each cross at every boundary.
TEST(InterOpSearch, BoundaryLinksByPosition) {
  auto cluster = twoNodesOfTwo();
  ASSERT_TRUE(static_cast<bool>(cluster))
      << llvm::toString(cluster.takeError());
  ProgramProfile profile = profileOf(4);
  LinkCountingOracle oracle(4);
  SearchOptions options;
  options.globalBatch = 4;
  options.stages = 4;
  options.microBatches = 1;
  auto plan = searchPipeline(profile, *cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  ASSERT_EQ(plan->stages.size(), 4u);
  EXPECT_EQ(pointToPointOf(*plan), (std::vector<double>{0, 1, 1, 0}));

  options.stages = 2;
  plan = searchPipeline(profile, *cluster, oracle, options);
  ASSERT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
  for (const StagePlan &stage : plan->stages)
    EXPECT_EQ(stage.cost.pointToPoint, 1);

  EXPECT_EQ(linkBetweenStages(*cluster, {1, 1}, 0, 1),
            cost::LinkLevel::IntraNode);
  EXPECT_EQ(linkBetweenStages(*cluster, {1, 1}, 1, 2),
            cost::LinkLevel::InterNode);
  EXPECT_EQ(linkBetweenStages(*cluster, {1, 1}, 0, 3),
            cost::LinkLevel::InterNode);
  EXPECT_EQ(linkBetweenStages(*cluster, {1, 2}, 0, 1),
            cost::LinkLevel::InterNode);
}

// Tests that an interleaved schedule's wrap, the last device's chunk
// feeding the first device's next chunk, is priced on the link between
// them, for the first stage (which receives) and the last (which sends):
// v - 1 crossings a micro-batch. Two stages of a node each cross nodes at
// the wrap too; two stages inside one node do not; 1F1B has no wrap.
TEST(InterOpSearch, InterleavedWrapCrossesTheLastToFirstLink) {
  auto cluster = twoNodesOfTwo();
  ASSERT_TRUE(static_cast<bool>(cluster))
      << llvm::toString(cluster.takeError());
  ProgramProfile profile = profileOf(6);
  LinkCountingOracle oracle(6);
  auto crossings = [&](int64_t devices, const char *schedule) {
    SearchOptions options;
    options.globalBatch = 4;
    options.stages = 2;
    options.devices = devices;
    options.microBatches = 2;
    options.schedule = *parseSchedule(schedule);
    options.stageUnitCounts = {3, 3};
    auto plan = searchPipeline(profile, *cluster, oracle, options);
    EXPECT_TRUE(static_cast<bool>(plan)) << llvm::toString(plan.takeError());
    return plan ? pointToPointOf(*plan) : std::vector<double>{};
  };
  EXPECT_EQ(crossings(4, "interleaved:2"), (std::vector<double>{11, 11}));
  EXPECT_EQ(crossings(4, "1f1b"), (std::vector<double>{1, 1}));
  EXPECT_EQ(crossings(2, "interleaved:2"), (std::vector<double>{0, 0}));
}

} // namespace
