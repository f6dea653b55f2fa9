//===- MeshZero.cpp - per-parameter ZeRO-1/2 of a mesh program ------------===//

#include "MeshZero.h"

#include "TrainError.h"

#include <algorithm>

namespace tessera::train {

namespace {

/// The ZeRO stages a pending parameter's run gives it (0 to 2,
/// meshZeroParameterStages): one bucket group each, as a bucket is held
/// whole or sharded alike.
constexpr int32_t kPendingStages = 3;

/// planMeshZero's bucket group of a pending parameter: its stage's, and for
/// a gradient the step returns whole (program.h's gradient_whole) a group
/// past every stage's, so that a bucket never mixes whole gradients (taken,
/// not reduced) with partial sums (reduce-scattered).
int32_t pendingGroup(int32_t stage, bool whole) {
  return whole ? kPendingStages + stage : stage;
}

} // namespace

int32_t meshZeroAxes(const tessera_program &program) {
  if (program.pipeline || !program.gradient_partial_axes)
    return 0;
  int32_t axes = 0;
  for (int32_t p = 0; p < program.parameter_count; ++p) {
    const int32_t mine = program.gradient_partial_axes[p];
    if (mine == 0)
      continue;
    if (axes != 0 && mine != axes)
      fail(std::string("the program leaves the gradient of '") +
           program.parameters[p].name + "' pending over mesh axes " +
           std::to_string(mine) + " and another over " +
           std::to_string(axes) +
           "; the driver's ZeRO shards over one group of axes (compile "
           "with --zero 0 or 3, or pin the ZeRO axes alike)");
    axes = mine;
  }
  return axes;
}

tessera_comm *meshZeroComm(const comm::RankComms &comms, int32_t axes) {
  const auto count = static_cast<int32_t>(comms.axes.size());
  if (axes == (int32_t(1) << count) - 1)
    return comms.world;
  for (int32_t axis = 0; axis < count; ++axis)
    if (axes == int32_t(1) << axis)
      return comms.axes[static_cast<size_t>(axis)];
  fail("the program leaves gradients pending over mesh axes " +
       std::to_string(axes) +
       ", neither one axis nor the whole mesh, which the driver has no "
       "communicator for (compile with --zero 0 or 3)");
}

int32_t meshZeroPlannedStage(const tessera_program &program) {
  if (meshZeroAxes(program) == 0)
    return 0;
  if (program.gradient_whole)
    for (int32_t p = 0; p < program.parameter_count; ++p)
      if (program.gradient_whole[p] != 0 &&
          (program.gradient_whole[p] != 1 ||
           program.gradient_partial_axes[p] == 0))
        fail(std::string("malformed program (a compiler bug): the gradient "
                         "of '") +
             program.parameters[p].name + "' is marked whole (" +
             std::to_string(program.gradient_whole[p]) +
             ") but is not a ZeRO-1/2 one");
  int32_t stage = 1;
  if (!program.gradient_zero_stages)
    return stage;
  for (int32_t p = 0; p < program.parameter_count; ++p) {
    const int32_t mine = program.gradient_zero_stages[p];
    const bool pending = program.gradient_partial_axes[p] != 0;
    if (pending ? mine != 1 && mine != 2 : mine != 0)
      fail(std::string("malformed program (a compiler bug): the gradient of "
                       "'") +
           program.parameters[p].name + "' has ZeRO stage " +
           std::to_string(mine) +
           (pending ? ", pending: 1 or 2" : ", complete: 0"));
    stage = std::max(stage, mine);
  }
  return stage;
}

int32_t meshZeroStage(const tessera_program &program,
                      const TrainOptions &options) {
  const bool pending = meshZeroAxes(program) != 0;
  const int32_t stage =
      options.zeroStage < 0 ? meshZeroPlannedStage(program) : options.zeroStage;
  if (pending && stage == 2 && !options.dumpGradientsFile.empty())
    fail("--dump-grads: under ZeRO-2 the ranks hold only their shards of "
         "the ZeRO-1/2 parameters' gradients (run with --zero 0 or 1 to "
         "dump them)");
  if (options.zeroStage < 0)
    return stage;
  if (!pending && options.zeroStage > 0)
    fail("--zero " + std::to_string(options.zeroStage) +
         ": the driver's ZeRO shards the data-parallel ranks it launches; a "
         "partitioned program's sharding is the one it was compiled with");
  if (options.zeroStage > 2)
    fail("--zero " + std::to_string(options.zeroStage) +
         ": this program's plan leaves the optimizer state and the "
         "gradients of its ZeRO-1/2 parameters to the driver, which shards "
         "both (--zero 2), the state only (--zero 1) or neither (--zero 0), "
         "by default as the plan does; its other parameters' sharding is "
         "the one it was compiled with");
  return options.zeroStage;
}

std::vector<int32_t> meshZeroParameterStages(const tessera_program &program,
                                             const TrainOptions &options,
                                             int32_t stage) {
  std::vector<int32_t> stages;
  for (int32_t p = 0; p < program.parameter_count; ++p) {
    int32_t mine = program.gradient_partial_axes[p] != 0 ? stage : 0;
    if (mine == 2 && options.zeroStage < 0 && program.gradient_zero_stages)
      mine = program.gradient_zero_stages[p];
    stages.push_back(mine);
  }
  return stages;
}

DataParallelPlan planMeshZero(const tessera_program &program,
                              const TrainOptions &options, int32_t ranks,
                              int32_t stage) {
  // Buckets never mix stages (a ZeRO-1 parameter's bucket is held whole),
  // nor whole gradients with partial sums (a whole bucket is taken, not
  // reduced).
  const std::vector<int32_t> stages =
      meshZeroParameterStages(program, options, stage);
  auto whole = [&](int32_t p) {
    return program.gradient_whole && program.gradient_whole[p] != 0;
  };
  std::vector<int32_t> groups;
  for (int32_t p = 0; p < program.parameter_count; ++p)
    groups.push_back(program.gradient_partial_axes[p] == 0
                         ? comm::GradientLayout::kUnreduced
                         : pendingGroup(stages[static_cast<size_t>(p)],
                                        whole(p)));
  DataParallelPlan plan =
      planShardedGroups(program, groups, options, stage >= 1 ? ranks : 1);
  for (const comm::GradientBucket &bucket : plan.gradients.buckets())
    plan.wholeBuckets.push_back(whole(bucket.firstParameter));
  // One micro-batch: the compute-precision gradients, as the step's own
  // all-reduce would have summed them; several: their f32 sums.
  plan.reduceAccumulators = options.gradientAccumulation > 1;
  if (stage < 2)
    return plan;
  // ZeRO-2: every micro-batch's pending gradients are reduce-scattered as
  // the step writes them, out of the ring.
  std::vector<bool> held;
  for (const comm::GradientBucket &bucket : plan.gradients.buckets())
    held.push_back(stages[static_cast<size_t>(bucket.firstParameter)] == 1);
  plan.ring = comm::GradientRing::plan(
      plan.gradients, gradientWritePositions(program, 2), held);
  plan.reduceAccumulators = false;
  // As the backend sums micro-batches (FlatStateBackend::accumulating):
  // then the held buckets' f32 sums are reduced once, as ZeRO-1's are.
  plan.heldOncePerStep =
      options.gradientAccumulation > 1 || options.accumulateInF32;
  return plan;
}

std::vector<bool> meshZeroCountedInNorm(const MeshLayout &layout,
                                        const tessera_program &program,
                                        const std::vector<int32_t> &coordinates,
                                        int32_t axes) {
  std::vector<bool> counted = layout.countedInNorm(coordinates);
  // A shard counts on every rank of the group: as if at coordinate 0 of
  // each of its axes.
  std::vector<int32_t> firstOfGroup = coordinates;
  for (size_t axis = 0; axis < firstOfGroup.size(); ++axis)
    if ((axes >> axis) & 1)
      firstOfGroup[axis] = 0;
  const std::vector<bool> shards = layout.countedInNorm(firstOfGroup);
  for (int32_t p = 0; p < program.parameter_count; ++p)
    if (program.gradient_partial_axes[p] != 0)
      counted[static_cast<size_t>(p)] = shards[static_cast<size_t>(p)];
  return counted;
}

} // namespace tessera::train
