//===- StageMemoryTest.cpp - the training state a pipeline stage holds ----===//
//
// MegatronStageOracle's resident memory of a stage: the driver's state per
// parameter (tessera/Analysis/StepMemory.h's TrainingStateBytes), each
// parameter once per device even when several of the stage's units read it
// (GPT-2's embedding table, tied to its head), and fp32 accumulators when a
// step has several micro-batches.
//
//===----------------------------------------------------------------------===//

#include "../CostModel/GptTrainingProgram.h"

#include "tessera/CostModel/Cluster.h"
#include "tessera/Pipeline/StageCostOracle.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace tessera;
using namespace tessera::pipeline;
using tessera::cost::test_programs::GptShape;

namespace {

// Tests that the whole tied GPT as one stage on one device holds every
// parameter's state once, and the accumulators only with micro-batches.
TEST(StageMemory, TiedTableHeldOnceWithAccumulatorsPerMicroBatches) {
  mlir::MLIRContext context;
  GptShape shape;
  shape.layers = 2;
  shape.batch = 2;
  // A multiple of 64 classes: the head reads the table itself, not the
  // padded copy tess-build-training would make of it.
  shape.vocabulary = 50304;
  auto one = cost::test_programs::buildGptTrainingProgram(context, shape, "bf16");
  shape.batch = 3;
  auto two = cost::test_programs::buildGptTrainingProgram(context, shape, "bf16");
  ASSERT_TRUE(one && two);
  auto profile = profileProgram(*one, *two, 2);
  ASSERT_TRUE(static_cast<bool>(profile)) << llvm::toString(profile.takeError());
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

} // namespace
