//===- StageMemoryTest.cpp - the training state a pipeline stage holds ----===//
//
// MegatronStageOracle's resident memory of a stage: the driver's state per
// parameter (tessera/Analysis/StepMemory.h's TrainingStateBytes), each
// parameter once per device even when several of the stage's units read it
// (GPT-2's embedding table, tied to its head), fp32 accumulators when a
// step has several micro-batches or the stage several replicas, and
// ZeRO-1's f32 mirror beside the masters' shard.
//
//===----------------------------------------------------------------------===//

#include "../CostModel/GptTrainingProgram.h"

#include "tessera/CostModel/Cluster.h"
#include "tessera/Pipeline/StageCostOracle.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <optional>

using namespace tessera;
using namespace tessera::pipeline;
using tessera::cost::test_programs::GptShape;

namespace {

/// A two-layer tied GPT whose vocabulary is a multiple of 64 classes: the
/// head reads the table itself, not the padded copy tess-build-training
/// would make of it.
GptShape twoLayers() {
  GptShape shape;
  shape.layers = 2;
  shape.batch = 2;
  shape.vocabulary = 50304;
  return shape;
}

/// The profile of `shape`'s bf16 training program (at batches 2 and 3).
std::optional<ProgramProfile> tiedGptProfile(const GptShape &shape) {
  mlir::MLIRContext context;
  GptShape larger = shape;
  larger.batch = shape.batch + 1;
  auto one = cost::test_programs::buildGptTrainingProgram(context, shape, "bf16");
  auto two = cost::test_programs::buildGptTrainingProgram(context, larger, "bf16");
  if (!one || !two)
    return std::nullopt;
  auto profile = profileProgram(*one, *two, shape.batch);
  if (!profile) {
    ADD_FAILURE() << llvm::toString(profile.takeError());
    return std::nullopt;
  }
  return std::move(*profile);
}

// Tests that the whole tied GPT as one stage on one device holds every
// parameter's state once, and the accumulators only with micro-batches.
TEST(StageMemory, TiedTableHeldOnceWithAccumulatorsPerMicroBatches) {
  GptShape shape = twoLayers();
  std::optional<ProgramProfile> profile = tiedGptProfile(shape);
  ASSERT_TRUE(profile);
  ASSERT_EQ(profile->tiedParameters.size(), 1u); // lm_head.weight
  auto cluster = cost::loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(cluster));
  MegatronStageOracle oracle(*profile, *cluster);

  StageQuery whole;
  whole.endUnit = profile->units.size();
  whole.microBatchSamples = 2;
  std::vector<StageCost> plans = oracle.plans(whole);
  ASSERT_FALSE(plans.empty());
  double parameters = static_cast<double>(shape.parameters());
  const StageMemory &memory = plans.front().memory;
  EXPECT_DOUBLE_EQ(memory.weights, parameters * (4 + 2));
  EXPECT_DOUBLE_EQ(memory.gradients, parameters * 2);
  EXPECT_DOUBLE_EQ(memory.optimizerState, parameters * 8);
  EXPECT_EQ(memory.accumulators, 0);

  whole.microBatches = 2;
  whole.microBatchSamples = 1;
  EXPECT_DOUBLE_EQ(oracle.plans(whole).front().memory.accumulators,
                   parameters * 4);

  // The embedding alone holds the table too: each stage its copy.
  StageQuery embedding;
  embedding.endUnit = 1;
  embedding.microBatchSamples = 2;
  StageQuery rest;
  rest.firstUnit = 1;
  rest.endUnit = profile->units.size();
  rest.microBatchSamples = 2;
  double table = profile->tiedParameters.front().elements;
  EXPECT_DOUBLE_EQ(oracle.plans(embedding).front().memory.optimizerState +
                       oracle.plans(rest).front().memory.optimizerState,
                   (parameters + table) * 8);
}

// Tests a stage on two replicas as the pipeline driver keeps it
// (runtime/train/TrainMain.cpp, StageZero.h): the replicas' gradients
// summed in fp32 accumulators even with one micro-batch, and under ZeRO-1
// the masters and moments halved beside a whole f32 mirror the chunks read.
TEST(StageMemory, ReplicasAccumulateAndZeroOneKeepsAMirror) {
  GptShape shape = twoLayers();
  std::optional<ProgramProfile> profile = tiedGptProfile(shape);
  ASSERT_TRUE(profile);
  auto cluster = cost::loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(cluster));
  MegatronStageOracle oracle(*profile, *cluster);

  StageQuery whole;
  whole.endUnit = profile->units.size();
  whole.microBatchSamples = 2;
  whole.submesh.devicesPerNode = 2;
  double parameters = static_cast<double>(shape.parameters());
  int replicated = 0, sharded = 0;
  for (const StageCost &plan : oracle.plans(whole)) {
    if (plan.dataParallel != 2)
      continue;
    const StageMemory &memory = plan.memory;
    EXPECT_DOUBLE_EQ(memory.accumulators, parameters * 4);
    EXPECT_DOUBLE_EQ(memory.optimizerState,
                     parameters * 8 / (plan.zero ? 2 : 1));
    EXPECT_DOUBLE_EQ(memory.weights, plan.zero ? parameters * (4.0 / 2 + 4 + 2)
                                               : parameters * (4 + 2));
    ++(plan.zero ? sharded : replicated);
  }
  EXPECT_EQ(replicated, 1);
  EXPECT_EQ(sharded, 1);
}

} // namespace
