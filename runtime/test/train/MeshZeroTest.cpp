//===- MeshZeroTest.cpp - per-parameter ZeRO-1/2 of a mesh program --------===//
//
// MeshZero.h over a hand-built program partitioned for a 2x2 mesh {dp, tp}
// whose step leaves two parameters' gradients pending over dp (a mesh
// plan's ZeRO-1/2 parameters): the group's axes and communicator, the
// stage --zero picks, the plan (the pending parameters sharded over the
// group, the other one whole on every rank) and the norm's counting; and
// the programs and flags the driver refuses.
//
//===----------------------------------------------------------------------===//

#include "MeshZero.h"
#include "HostTestProgram.h"
#include "TrainError.h"

#include "tessera/runtime/thread_comm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

using namespace tessera::train;

namespace {

/// "a" [256] and "c" [384] whole, pending over dp (bit 0); "b" [4] split
/// over tp, complete.
struct PendingProgram {
  PendingProgram() {
    for (tessera_tensor_split &split : splits)
      std::fill(std::begin(split.mesh_axis), std::end(split.mesh_axis), -1);
    splits[1].mesh_axis[0] = 1;
    program.parameter_count = 3;
    program.parameters = parameters;
    program.mesh_axis_count = 2;
    program.mesh_shape = shape;
    program.mesh_axis_names = names;
    program.parameter_splits = splits;
    program.gradient_partial_axes = pending;
  }
  tessera_tensor_info parameters[3] = {{"a", TESSERA_F32, 1, {256}},
                                       {"b", TESSERA_F32, 1, {4}},
                                       {"c", TESSERA_F32, 1, {384}}};
  tessera_tensor_split splits[3] = {};
  int64_t shape[2] = {2, 2};
  const char *names[2] = {"dp", "tp"};
  int32_t pending[3] = {1, 0, 1};
  tessera_program program =
      tessera_train_test::hostTestProgram("mesh.onnx");
};

std::string failureOf(const std::function<void()> &run) {
  try {
    run();
  } catch (const TrainError &error) {
    return error.what();
  }
  return "";
}

} // namespace

// Tests that the group is the pending gradients' axes, and that a program
// without pending gradients (or a pipelined one) has none.
TEST(MeshZero, GroupIsThePendingAxes) {
  PendingProgram mesh;
  EXPECT_EQ(meshZeroAxes(mesh.program), 1);
  mesh.program.gradient_partial_axes = nullptr;
  EXPECT_EQ(meshZeroAxes(mesh.program), 0);
}

// Tests that two parameters pending over different axes are refused,
// naming one of them (the driver shards over one group).
TEST(MeshZero, TwoGroupsAreRefused) {
  PendingProgram mesh;
  mesh.pending[2] = 2;
  EXPECT_NE(failureOf([&] { meshZeroAxes(mesh.program); })
                .find("the gradient of 'c' pending over mesh axes 2"),
            std::string::npos);
}

// Tests --zero: the plan's sharding by default (2 when a pending gradient
// is ZeRO-2's), 0 keeps the state whole, 1 and 2 shard it, 3 is refused,
// and so is --dump-grads under ZeRO-2; and any --zero of a program without
// pending gradients is refused (its sharding is compiled).
TEST(MeshZero, StageFromTheFlag) {
  PendingProgram mesh;
  TrainOptions options;
  EXPECT_EQ(meshZeroStage(mesh.program, options), 1);
  int32_t stages[3] = {1, 0, 2};
  mesh.program.gradient_zero_stages = stages;
  EXPECT_EQ(meshZeroPlannedStage(mesh.program), 2);
  EXPECT_EQ(meshZeroStage(mesh.program, options), 2);
  options.dumpGradientsFile = "grads.safetensors";
  EXPECT_NE(failureOf([&] { meshZeroStage(mesh.program, options); })
                .find("--dump-grads: under ZeRO-2 the ranks hold only their "
                      "shards"),
            std::string::npos);
  options.zeroStage = 1;
  EXPECT_EQ(meshZeroStage(mesh.program, options), 1);
  options.dumpGradientsFile.clear();
  options.zeroStage = 0;
  EXPECT_EQ(meshZeroStage(mesh.program, options), 0);
  stages[1] = 2;
  EXPECT_NE(failureOf([&] { meshZeroPlannedStage(mesh.program); })
                .find("malformed program (a compiler bug): the gradient of "
                      "'b' has ZeRO stage 2, complete: 0"),
            std::string::npos);
  stages[1] = 0;
  stages[2] = 3;
  EXPECT_NE(failureOf([&] { meshZeroPlannedStage(mesh.program); })
                .find("the gradient of 'c' has ZeRO stage 3, pending: 1 or 2"),
            std::string::npos);
  stages[2] = 1;
  options.zeroStage = 3;
  EXPECT_NE(failureOf([&] { meshZeroStage(mesh.program, options); })
                .find("--zero 3: this program's plan leaves the optimizer "
                      "state and the gradients of its ZeRO-1/2 parameters "
                      "to the driver"),
            std::string::npos);
  mesh.program.gradient_partial_axes = nullptr;
  options.zeroStage = 1;
  EXPECT_NE(failureOf([&] { meshZeroStage(mesh.program, options); })
                .find("a partitioned program's sharding is the one it was "
                      "compiled with"),
            std::string::npos);
}

// Tests the communicator of a group: one axis's, the world's for every
// axis, and no other (on 4 thread ranks of the 2x2 mesh).
TEST(MeshZero, CommunicatorOfTheGroup) {
  tessera::comm::ThreadWorld world({2, 2});
  std::vector<std::string> failures(4);
  tessera::comm::runThreadRanks(world, [&](const tessera::comm::RankComms &comms) {
    EXPECT_EQ(meshZeroComm(comms, 1), comms.axes[0]);
    EXPECT_EQ(meshZeroComm(comms, 2), comms.axes[1]);
    EXPECT_EQ(meshZeroComm(comms, 3), comms.world);
    failures[static_cast<size_t>(comms.rank)] =
        failureOf([&] { meshZeroComm(comms, 4); });
    return 0;
  });
  for (const std::string &failure : failures)
    EXPECT_NE(failure.find("neither one axis nor the whole mesh"),
              std::string::npos);
}

// Tests the plan of 2 ranks: each rank's shard holds half of each pending
// parameter (the two halves together all of it) and "b" whole; one shard
// (--zero 0) shards nothing.
TEST(MeshZero, PendingParametersAreShardedTheOthersWhole) {
  PendingProgram mesh;
  TrainOptions options;
  DataParallelPlan plan = planMeshZero(mesh.program, options, 2, 1);
  ASSERT_TRUE(plan.sharded);
  std::vector<int64_t> held(3, 0);
  for (int32_t rank = 0; rank < 2; ++rank) {
    std::vector<int64_t> mine(3, 0);
    const ParameterLayout placed = plan.rankLayout(rank);
    for (const ParameterLayout::Piece &piece : placed.shard())
      mine[static_cast<size_t>(piece.parameter)] += piece.count;
    EXPECT_EQ(mine[1], 4) << "rank " << rank;
    EXPECT_LT(mine[0], 256);
    EXPECT_LT(mine[2], 384);
    for (size_t p = 0; p < 3; ++p)
      held[p] += mine[p];
  }
  EXPECT_EQ(held, (std::vector<int64_t>{256, 8, 384}));
  EXPECT_FALSE(plan.gradients.isReduced(1));
  EXPECT_TRUE(plan.gradients.isReduced(0));
  EXPECT_FALSE(planMeshZero(mesh.program, options, 2, 0).sharded);
}

// Tests the ZeRO-2 plan of 2 ranks: the pending gradients reduced out of a
// ring (one slot: both are written at once), "b", in no bucket, whole in
// each rank's gradient shard at its state's place, written past the ring's
// slots when micro-batches are summed; and that a program that does not
// record its gradients' write positions is refused.
TEST(MeshZero, ZeroTwoShardsThePendingGradients) {
  PendingProgram mesh;
  int32_t positions[3] = {0, 0, 0};
  mesh.program.gradient_write_positions = positions;
  TrainOptions options;
  DataParallelPlan plan = planMeshZero(mesh.program, options, 2, 2);
  ASSERT_TRUE(plan.ring.has_value());
  EXPECT_FALSE(plan.reduceAccumulators);
  EXPECT_EQ(plan.ring->ringOffset(1), -1);
  for (int32_t rank = 0; rank < 2; ++rank) {
    const ParameterLayout placed = plan.rankLayout(rank);
    ASSERT_TRUE(placed.gradientsSharded());
    const ParameterLayout::GradientRingPlacement &ring = placed.gradientRing();
    EXPECT_EQ(ring.elements, plan.ring->totalElements());
    ASSERT_EQ(ring.wholeGradients.size(), 1u);
    const auto &whole = ring.wholeGradients[0];
    EXPECT_EQ(whole.parameter, 1);
    EXPECT_EQ(whole.count, 4);
    EXPECT_EQ(whole.ringOffset, ring.elements);
    EXPECT_EQ(ring.offsets[1], ring.elements);
    EXPECT_EQ(ring.wholeElements, ParameterLayout::kSliceAlignment);
    auto piece = std::find_if(
        placed.shard().begin(), placed.shard().end(),
        [](const ParameterLayout::Piece &p) { return p.parameter == 1; });
    ASSERT_NE(piece, placed.shard().end());
    EXPECT_EQ(whole.shardOffset, piece->stateOffset);
    // The gradient shard holds half the pending gradients (padded) and
    // "b" whole.
    EXPECT_LT(placed.stateElements(), 256 + 384);
  }
  mesh.program.gradient_write_positions = nullptr;
  EXPECT_NE(failureOf([&] { planMeshZero(mesh.program, options, 2, 2); })
                .find("--zero 2: this program does not record when its "
                      "step writes each gradient"),
            std::string::npos);
}

// Tests a plan that mixes ZeRO-1 ("a") and ZeRO-2 ("c") parameters: run as
// the plan's ZeRO-2, "a" keeps its stage (--zero 1 or 2 give every pending
// parameter theirs), its bucket has no place in the ring but is held whole
// in the gradient shard buffer, past the shard's packed pieces, where the
// step writes its gradient (past the ring's slots when summing
// micro-batches) and each rank's optimizer reads its block of it; "c" keeps
// only its shard. The held buckets wait for the step's end when the
// backend sums micro-batches.
TEST(MeshZero, ZeroOneParametersOfAZeroTwoPlanHoldTheirGradientsWhole) {
  PendingProgram mesh;
  int32_t positions[3] = {1, 0, 0};
  int32_t stages[3] = {1, 0, 2};
  mesh.program.gradient_write_positions = positions;
  mesh.program.gradient_zero_stages = stages;
  TrainOptions options;
  EXPECT_EQ(meshZeroParameterStages(mesh.program, options, 2),
            (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(meshZeroParameterStages(mesh.program, options, 1),
            (std::vector<int32_t>{1, 0, 1}));
  options.zeroStage = 2;
  EXPECT_EQ(meshZeroParameterStages(mesh.program, options, 2),
            (std::vector<int32_t>{2, 0, 2}));
  options.zeroStage = -1;
  DataParallelPlan plan = planMeshZero(mesh.program, options, 2, 2);
  ASSERT_TRUE(plan.ring.has_value());
  EXPECT_FALSE(plan.heldOncePerStep);
  ASSERT_EQ(plan.gradients.buckets().size(), 2u);
  // Bucket 0 holds "c" (the last parameter), bucket 1 "a".
  EXPECT_FALSE(plan.ring->held(0));
  EXPECT_TRUE(plan.ring->held(1));
  EXPECT_EQ(plan.ring->ringOffset(0), -1);
  EXPECT_GE(plan.ring->ringOffset(2), 0);
  EXPECT_EQ(plan.ring->totalElements(), plan.gradients.buckets()[0].elements);
  for (int32_t rank = 0; rank < 2; ++rank) {
    const ParameterLayout placed = plan.rankLayout(rank);
    const ParameterLayout::GradientRingPlacement &ring = placed.gradientRing();
    EXPECT_EQ(ring.heldElements, 256);
    // "c"'s block of its bucket and "b" packed, then "a" whole.
    int64_t packed = 0;
    for (const ParameterLayout::Piece &piece : placed.shard())
      if (piece.parameter != 0)
        packed += ParameterLayout::kSliceAlignment *
                  ((piece.count + ParameterLayout::kSliceAlignment - 1) /
                   ParameterLayout::kSliceAlignment);
    EXPECT_LT(packed, 384 + 128);
    EXPECT_EQ(placed.gradientShardElements(), packed + 256);
    EXPECT_EQ(ring.buckets[1].heldOffset, packed);
    EXPECT_EQ(ring.buckets[1].ringOffset, -1);
    EXPECT_TRUE(ring.buckets[1].pieces.empty());
    auto whole = std::find_if(
        ring.wholeGradients.begin(), ring.wholeGradients.end(),
        [](const auto &gradient) { return gradient.parameter == 0; });
    ASSERT_NE(whole, ring.wholeGradients.end());
    EXPECT_EQ(whole->count, 256);
    EXPECT_EQ(whole->shardOffset, packed);
    EXPECT_EQ(ring.offsets[0], whole->ringOffset);
    EXPECT_GE(whole->ringOffset, ring.elements);
    for (const ParameterLayout::Piece &piece : placed.shard()) {
      const int64_t at = placed.gradientShardOffset(piece.offset);
      if (piece.parameter == 0)
        EXPECT_EQ(at, packed + rank * 128) << "rank " << rank;
      else
        EXPECT_LT(at + piece.count, packed + 1) << "rank " << rank;
    }
  }
  options.gradientAccumulation = 2;
  EXPECT_TRUE(planMeshZero(mesh.program, options, 2, 2).heldOncePerStep);
}

// Tests the norm's counting: a pending parameter's shard on every rank of
// its dp group (at tp coordinate 0), "b" (split over tp) on dp coordinate
// 0 only.
TEST(MeshZero, ShardsCountOnEveryRankOfTheGroup) {
  PendingProgram mesh;
  MeshLayout layout(mesh.program);
  for (int32_t dp = 0; dp < 2; ++dp)
    for (int32_t tp = 0; tp < 2; ++tp) {
      std::vector<bool> counted =
          meshZeroCountedInNorm(layout, mesh.program, {dp, tp}, 1);
      EXPECT_EQ(counted[0], tp == 0) << dp << "," << tp;
      EXPECT_EQ(counted[1], dp == 0) << dp << "," << tp;
      EXPECT_EQ(counted[2], tp == 0) << dp << "," << tp;
    }
}
