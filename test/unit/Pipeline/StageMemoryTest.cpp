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
#include "tessera/Pipeline/Remat.h"
#include "tessera/Pipeline/StageCostOracle.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <algorithm>
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
std::optional<ProgramProfile> gptProfile(const GptShape &shape) {
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

/// Bytes of the values the units [first, end) read that the stage's
/// prepare computes from parameters alone (the position embeddings'
/// gather): resident beside the weights.
double preparedBytes(const ProgramProfile &profile, size_t first, size_t end) {
  double bytes = 0;
  for (size_t unit = first; unit < end; ++unit)
    bytes += profile.unit(unit).preparedBytes;
  return bytes;
}

/// The two-layer tied GPT's profile (twoLayers()) and the oracle pricing
/// its stages on an H200.
class TwoLayerGptStage : public ::testing::Test {
protected:
  void SetUp() override {
    profile = gptProfile(shape);
    ASSERT_TRUE(profile);
    auto loaded = cost::loadCluster("h200");
    ASSERT_TRUE(static_cast<bool>(loaded));
    cluster.emplace(std::move(*loaded));
    oracle.emplace(*profile, *cluster);
  }

  GptShape shape = twoLayers();
  std::optional<ProgramProfile> profile;
  std::optional<cost::Cluster> cluster;
  std::optional<MegatronStageOracle> oracle;
};

// Tests that the whole tied GPT as one stage on one device holds every
// parameter's state once, and the accumulators only with micro-batches.
TEST_F(TwoLayerGptStage, TiedTableHeldOnceWithAccumulatorsPerMicroBatches) {
  ASSERT_EQ(profile->tiedParameters.size(), 1u); // lm_head.weight

  StageQuery whole;
  whole.endUnit = profile->units.size();
  whole.microBatchSamples = 2;
  std::vector<StageCost> plans = oracle->plans(whole);
  ASSERT_FALSE(plans.empty());
  double parameters = static_cast<double>(shape.parameters());
  const StageMemory &memory = plans.front().memory;
  double prepared = preparedBytes(*profile, 0, profile->units.size());
  EXPECT_GT(prepared, 0);
  EXPECT_DOUBLE_EQ(memory.weights, parameters * (4 + 2) + prepared);
  EXPECT_DOUBLE_EQ(memory.gradients, parameters * 2);
  EXPECT_DOUBLE_EQ(memory.optimizerState, parameters * 8);
  EXPECT_EQ(memory.accumulators, 0);

  whole.microBatches = 2;
  whole.microBatchSamples = 1;
  EXPECT_DOUBLE_EQ(oracle->plans(whole).front().memory.accumulators,
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
  EXPECT_DOUBLE_EQ(oracle->plans(embedding).front().memory.optimizerState +
                       oracle->plans(rest).front().memory.optimizerState,
                   (parameters + table) * 8);
}

// Tests a stage on two replicas as the pipeline driver keeps it
// (runtime/train/TrainMain.cpp, StageZero.h): the replicas' gradients
// summed in fp32 accumulators even with one micro-batch, and under ZeRO-1
// the masters and moments halved beside a whole f32 mirror the chunks read.
TEST_F(TwoLayerGptStage, ReplicasAccumulateAndZeroOneKeepsAMirror) {

  StageQuery whole;
  whole.endUnit = profile->units.size();
  whole.microBatchSamples = 2;
  whole.submesh.devicesPerNode = 2;
  double parameters = static_cast<double>(shape.parameters());
  int replicated = 0, sharded = 0;
  for (const StageCost &plan : oracle->plans(whole)) {
    if (plan.dataParallel != 2)
      continue;
    const StageMemory &memory = plan.memory;
    EXPECT_DOUBLE_EQ(memory.accumulators, parameters * 4);
    EXPECT_DOUBLE_EQ(memory.optimizerState,
                     parameters * 8 / (plan.zero ? 2 : 1));
    EXPECT_DOUBLE_EQ(memory.weights,
                     (plan.zero ? parameters * (4.0 / 2 + 4 + 2)
                                : parameters * (4 + 2)) +
                         preparedBytes(*profile, 0, profile->units.size()));
    ++(plan.zero ? sharded : replicated);
  }
  EXPECT_EQ(replicated, 1);
  EXPECT_EQ(sharded, 1);
}

// Tests that under ZeRO-1 a stage keeps masters and moments only for what
// it updates: the head's stage reads the tied table, which the embedding's
// stage owns, so it holds the table's f32 mirror, gradient and accumulator
// but no shard of its master or moments (CompiledPipelineMemory.h, the
// driver's StageZero buckets). Without ZeRO-1 every stage updates its copy.
TEST_F(TwoLayerGptStage, ZeroOneKeepsNoMomentsOfATableAnotherStageOwns) {
  StageQuery head;
  head.firstUnit = profile->units.size() - 1;
  head.endUnit = profile->units.size();
  head.microBatchSamples = 2;
  head.submesh.devicesPerNode = 2;
  double table = static_cast<double>(shape.vocabulary) * shape.width;
  double norm = 2.0 * shape.width; // ln_f's scale and bias
  int checked = 0;
  for (const StageCost &plan : oracle->plans(head)) {
    if (plan.dataParallel != 2)
      continue;
    const StageMemory &memory = plan.memory;
    double updated = plan.zero ? norm : norm + table;
    double shard = plan.zero ? 2 : 1;
    EXPECT_DOUBLE_EQ(memory.optimizerState, updated * 8 / shard);
    // The head reads the table itself (a vocabulary of 64s: no padded
    // copy): a bf16 compute copy of everything it holds.
    EXPECT_DOUBLE_EQ(memory.weights,
                     updated * 4 / shard +
                         (norm + table) * ((plan.zero ? 4 : 0) + 2));
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

} // namespace

// Tests the pipeline's own buffers, as the compiled program holds them
// (CompiledPipelineMemory.h): each boundary a stage has holds the tensor it
// sends and a slot for the one it receives, whole on every TP rank (the
// residual stream, [b, s, h] in bf16); every device keeps each micro-batch's
// tokens and targets and a working pair, whole; the embedding's stage owns
// the tied table's gradient and keeps an f32 buffer for the head's part.
TEST_F(TwoLayerGptStage, MessagesInputsAndTheTiedGradientsPart) {
  const size_t units = profile->units.size();
  const double stream = 2.0 * shape.sequence * shape.width * 2; // 2 samples
  const double tokens = 2.0 * shape.sequence * 8;               // i64

  StageQuery first, middle, last;
  first.endUnit = 2;
  middle.firstUnit = 2;
  middle.endUnit = 3;
  last.firstUnit = 3;
  last.endUnit = units;
  for (StageQuery *query : {&first, &middle, &last}) {
    query->microBatchSamples = 2;
    query->microBatches = 4;
  }
  StageMemory head = oracle->plans(first).front().memory;
  StageMemory inner = oracle->plans(middle).front().memory;
  StageMemory tail = oracle->plans(last).front().memory;
  EXPECT_DOUBLE_EQ(head.messages, 2 * stream);
  EXPECT_DOUBLE_EQ(inner.messages, 4 * stream);
  EXPECT_DOUBLE_EQ(tail.messages, 2 * stream);
  // Tokens and targets of 4 micro-batches and the working pair.
  EXPECT_DOUBLE_EQ(inner.inputs, 5 * 2 * tokens);
  double table = profile->tiedParameters.front().elements;
  EXPECT_DOUBLE_EQ(head.gradientParts, table * 4);
  EXPECT_EQ(inner.gradientParts, 0);
  EXPECT_EQ(tail.gradientParts, 0);
  EXPECT_DOUBLE_EQ(head.total(3), head.fixed() + 3 * head.activationsPerMicroBatch);

  // Interleaved over 2 chunks: the middle stage's 2 chunks hold both sides
  // each.
  middle.boundaryCrossings = 2;
  EXPECT_DOUBLE_EQ(oracle->plans(middle).front().memory.messages, 8 * stream);
}

// Tests that the token table is split over a TP group as a stage mesh
// compiles it (MegatronPartition.h): vocabulary-parallel, tied to the LM
// head (GPT-2's, read by the head itself where the vocabulary needs no
// padding) or untied (Llama 3's), where the group divides the vocabulary;
// whole where it does not (GPT-3's 50,257). The position table is no lookup
// of the token ids: whole.
TEST(StageMemory, AVocabularyParallelTableSplitsWhereTheGroupDividesIt) {
  auto cluster = cost::loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(cluster));
  auto gradientsOfEmbedding = [&](const ProgramProfile &program) {
    MegatronStageOracle oracle(program, *cluster);
    StageQuery embedding;
    embedding.endUnit = 1;
    embedding.microBatchSamples = 2;
    embedding.submesh.devicesPerNode = 2;
    for (const StageCost &plan : oracle.plans(embedding))
      if (plan.tensorParallel == 2)
        return plan.memory.gradients;
    return -1.0;
  };
  GptShape shape = twoLayers();
  // bf16 gradients of the token table and the position table.
  double positions = static_cast<double>(shape.sequence) * shape.width;
  double table = 50304.0 * shape.width;

  std::optional<ProgramProfile> tied = gptProfile(shape);
  ASSERT_TRUE(tied);
  EXPECT_EQ(tied->vocabularyDivisor(2), 2);
  EXPECT_DOUBLE_EQ(gradientsOfEmbedding(*tied), (table / 2 + positions) * 2);

  shape.tied = false;
  std::optional<ProgramProfile> untied = gptProfile(shape);
  ASSERT_TRUE(untied);
  EXPECT_EQ(untied->vocabularyDivisor(2), 2);
  EXPECT_DOUBLE_EQ(gradientsOfEmbedding(*untied),
                   (table / 2 + positions) * 2);

  shape.vocabulary = 50257;
  std::optional<ProgramProfile> undivided = gptProfile(shape);
  ASSERT_TRUE(undivided);
  EXPECT_EQ(undivided->vocabularyDivisor(2), 1);
  EXPECT_DOUBLE_EQ(gradientsOfEmbedding(*undivided),
                   (50257.0 * shape.width + positions) * 2);
}

// Tests that the head's unit carries what only its tensor-parallel program
// holds, as tess-partition-spmd builds the vocabulary-parallel loss
// (VocabularyParallelLoss.h): the kept f32 softmax and the target mask (one
// byte) of every logit instead of the bf16 logits, and three f32 blocks of
// the logits' shape at once in the forward and three in the backward, in
// turn in the device's one arena, under every recomputation mode, in place
// of the bf16 logits the fused loss kernel reads at TP 1 (dead once cast);
// at TP 1 none of it is there.
TEST_F(TwoLayerGptStage, TheVocabularyParallelLossOnlyUnderTensorParallelism) {
  const UnitProfile &head = profile->unit(profile->units.size() - 1);
  double logits = 2.0 * shape.sequence * shape.vocabulary; // 2 samples
  EXPECT_DOUBLE_EQ(head.savedAll.tensorParallelOnly.at(2), logits * (4 + 1 - 2));
  EXPECT_DOUBLE_EQ(head.working.tensorParallelOnly.at(2), logits * (3 * 4 - 2));
  EXPECT_DOUBLE_EQ(head.workingSelective.tensorParallelOnly.at(2),
                   logits * (3 * 4 - 2));
  EXPECT_DOUBLE_EQ(head.workingRecomputing.tensorParallelOnly.at(2),
                   logits * (3 * 4 - 2));
  // At TP 2: the split part and this, halved, beside the replicated part.
  EXPECT_DOUBLE_EQ(head.savedAll.at(2, 2) - head.savedAll.at(2, 1) / 2,
                   logits * (4 + 1 - 2) / 2 +
                       head.savedAll.replicated.at(2) / 2);
  // No layer has it.
  EXPECT_DOUBLE_EQ(profile->unit(1).working.tensorParallelOnly.at(2), 0);
}

// Tests a layer's working set under each recomputation mode: the backward
// that re-runs forward ops first holds what they rebuild only until its
// last reader, so it needs more than without recomputation (selective
// rebuilds some values, full all of them) and less than the working set
// with every saved value beside it (the count before liveness).
TEST_F(TwoLayerGptStage, RecomputingHoldsRebuiltValuesUntilTheirLastReader) {
  const UnitProfile &layer = profile->unit(1);
  double none = layer.working.at(2, 1);
  double selective = layer.workingSelective.at(2, 1);
  double full = layer.workingRecomputing.at(2, 1);
  EXPECT_GT(selective, none);
  EXPECT_GT(full, selective);
  EXPECT_LT(full, none + layer.savedAll.at(2, 1));
  EXPECT_DOUBLE_EQ(backwardWorkingBytes(layer, RematMode::Selective).at(2, 1),
                   selective);
  EXPECT_DOUBLE_EQ(backwardWorkingBytes(layer, RematMode::Full).at(2, 1),
                   full);
}

// Tests the working set of the whole tied GPT as one stage on two replicas
// (compiled as chunk functions sharing one arena, not as the one-device
// step whose calibration scales the one-device plan): the head's part of
// the table's gradient (bf16) stays in the arena from the head's backward
// to the embedding's, beside the working set of every unit before the head
// and beside the embedding's own part at their sum.
TEST_F(TwoLayerGptStage, OneStageOnAMeshHoldsTheHeadsPartOfTheTiedGradient) {
  StageQuery whole;
  whole.endUnit = profile->units.size();
  whole.microBatchSamples = 2;
  whole.submesh.devicesPerNode = 2;
  double part = profile->tiedParameters.front().elements * 2;
  size_t head = profile->units.size() - 1;
  double before = 0;
  for (size_t unit = 0; unit < head; ++unit)
    before = std::max(before, profile->unit(unit).working.at(1, 1));
  double headWorking = profile->unit(head).working.at(1, 1);
  bool found = false;
  for (const StageCost &plan : oracle->plans(whole)) {
    if (plan.dataParallel != 2)
      continue;
    found = true;
    EXPECT_DOUBLE_EQ(plan.memory.working,
                     std::max(headWorking, std::max(before, part) + part));
  }
  EXPECT_TRUE(found);
}

// Tests the LM head reading the padded copy of its tied table (50,257
// classes padded to 50,304): split over the classes as the compile splits
// it (MegatronPartition.h), each rank keeping its block of the copy the
// prepare makes (built whole beside the table's cast first), and the copy's
// bf16 gradient gathered whole for the table in the backward.
TEST(PaddedHead, SplitOverTheClassesWithItsGradientGathered) {
  GptShape shape = twoLayers();
  shape.vocabulary = 50257;
  std::optional<ProgramProfile> profile = gptProfile(shape);
  ASSERT_TRUE(profile);
  const UnitProfile &head = profile->unit(profile->units.size() - 1);
  double padded = 50304.0 * shape.width * 2;
  ASSERT_EQ(head.backwardAllGathers.size(), 1u);
  EXPECT_DOUBLE_EQ(head.backwardAllGathers.front().at(2), padded);
  EXPECT_GE(head.preparedSplitBytes, padded);
  EXPECT_DOUBLE_EQ(head.prepareWorking, padded + 50257.0 * shape.width * 2);
  EXPECT_TRUE(llvm::is_contained(head.tensorParallelDivisors, 50304));

  auto cluster = cost::loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(cluster));
  MegatronStageOracle oracle(*profile, *cluster);
  StageQuery last;
  last.firstUnit = profile->units.size() - 1;
  last.endUnit = profile->units.size();
  last.microBatchSamples = 2;
  last.submesh.devicesPerNode = 2;
  bool split = false;
  for (const StageCost &plan : oracle.plans(last))
    if (plan.tensorParallel == 2) {
      split = true;
      EXPECT_GE(plan.memory.working, head.prepareWorking);
      EXPECT_GT(plan.tensorParallelCommunication, 0);
    }
  EXPECT_TRUE(split);
}

// Tests that a saved activation is kept by the unit whose backward reads
// it, as a pipeline stage stashes what its own backward reads: the
// embedding's backward reads no activation, so the embedding keeps
// nothing, and the first layer keeps its input (the embedding's output,
// [batch, sequence, width] in bf16) with the rest of what it saves.
TEST_F(TwoLayerGptStage, ASavedActivationIsKeptByTheUnitThatReadsIt) {
  EXPECT_DOUBLE_EQ(profile->unit(0).savedAll.at(2, 1), 0);
  double input = 2.0 * shape.sequence * shape.width * 2;
  EXPECT_GE(profile->unit(1).savedAll.at(2, 1), input);
  // The two layers keep the same.
  EXPECT_DOUBLE_EQ(profile->unit(1).savedAll.at(2, 1),
                   profile->unit(2).savedAll.at(2, 1));
}
