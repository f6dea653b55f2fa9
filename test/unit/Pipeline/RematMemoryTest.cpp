//===- RematMemoryTest.cpp - activation memory per remat vs Megatron ------===//
//
// Korthikanti et al. (2022) count the activations a GPT layer keeps for its
// backward, in 16-bit precision, as s b h (34 + 5 a s / h) bytes: 34 s b h
// for the tensors of size s b h (with 2 s b h of dropout masks, one byte per
// element each) plus 5 a s^2 b for the attention scores, their softmax and
// its dropout. The liveness model of UnitProfile counts what the backward
// of tess-build-training's program actually reads, on the GPT-2 program
// tesserac imports: no dropout (the exports run without it) and fused
// FlashAttention-style attention whose backward recomputes the scores from
// Q, K, V. So it should find Megatron's 34 s b h less the 2 s b h of masks,
// 32 s b h, and no s^2 term: exactly Megatron's "selective recomputation"
// figure less the masks. Full recomputation keeps the layer input, 2 s b h,
// as Megatron's full recompute does.
//
//===----------------------------------------------------------------------===//

#include "../CostModel/GptTrainingProgram.h"

#include "tessera/Pipeline/Remat.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace tessera;
using namespace tessera::pipeline;
using tessera::cost::test_programs::GptShape;

namespace {

struct Profiled {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> one, two;
  std::optional<ProgramProfile> profile;
};

void profileGpt(Profiled &result, GptShape shape) {
  shape.batch = 2;
  result.one = cost::test_programs::buildGptTrainingProgram(result.context,
                                                            shape, "bf16");
  shape.batch = 3;
  result.two = cost::test_programs::buildGptTrainingProgram(result.context,
                                                            shape, "bf16");
  ASSERT_TRUE(result.one && result.two);
  auto profile = profileProgram(*result.one, *result.two, 2);
  ASSERT_TRUE(static_cast<bool>(profile)) << llvm::toString(profile.takeError());
  result.profile = std::move(*profile);
}

/// A small GPT of `layers` layers: width 256, 4 heads, 128 tokens.
GptShape smallGpt(int64_t layers) {
  GptShape shape;
  shape.layers = layers;
  shape.width = 256;
  shape.heads = 4;
  shape.vocabulary = 1024;
  shape.sequence = 128;
  return shape;
}

// Tests the units: an embedding, one unit per layer, a head. The layers after
// the first share one structure (costed once); the first differs by the
// gradient sums of the residual stream that its backward hands to the
// embedding.
TEST(RematMemory, LayersShareOneStructure) {
  GptShape shape = smallGpt(4);
  Profiled profiled;
  profileGpt(profiled, shape);
  ASSERT_TRUE(profiled.profile);
  const ProgramProfile &profile = *profiled.profile;
  ASSERT_EQ(profile.units.size(), 6u);
  EXPECT_EQ(profile.units[0].kind, UnitKind::Embedding);
  EXPECT_EQ(profile.units[1].name, "transformer.h.0");
  EXPECT_EQ(profile.units[5].kind, UnitKind::Head);
  EXPECT_EQ(profile.structures.size(), 4u);
  for (size_t layer = 3; layer <= 4; ++layer)
    EXPECT_EQ(profile.structureOf[layer], profile.structureOf[2]);
  // The residual stream crosses every cut between layers: s h bf16 bytes
  // per sample.
  EXPECT_DOUBLE_EQ(profile.boundary[2].atOne, 2.0 * 128 * 256);
  EXPECT_DOUBLE_EQ(profile.boundary[2].perSample, 2.0 * 128 * 256);
  // Each layer: 12 h^2 + 13 h parameters (its weights split by TP, its
  // vectors not).
  const UnitProfile &layer = profile.unit(1);
  double elements = 0;
  for (const HeldParameter &parameter : layer.parameters)
    elements += parameter.elements;
  EXPECT_DOUBLE_EQ(elements, 12.0 * 256 * 256 + 13 * 256);
  // Megatron's layer all-reduces: two forward, two backward.
  EXPECT_EQ(layer.forwardAllReduces.size(), 2u);
  EXPECT_EQ(layer.backwardAllReduces.size(), 2u);
}

// Tests the kept activations of a GPT-3-shaped layer against
// s b h (34 + 5 a s / h), per remat mode.
// A TP rank holds each parameter's block as the driver lays it out: the
// block rounded up to a whole 128-element slice (runtime/train/
// ParameterLayout.h), so a tiny model's vectors take twice their size.
TEST(RematMemory, HeldElementsAreWholeSlices) {
  ProgramProfile profile;
  profile.vocabulary = 512;
  EXPECT_DOUBLE_EQ(profile.heldElements(64, ParameterSplit::Replicated, 2), 128);
  EXPECT_DOUBLE_EQ(profile.heldElements(192, ParameterSplit::TensorParallel, 2),
                   128);
  EXPECT_DOUBLE_EQ(
      profile.heldElements(64 * 192, ParameterSplit::TensorParallel, 2), 6144);
  // A vocabulary-parallel table splits where TP divides the vocabulary.
  EXPECT_DOUBLE_EQ(
      profile.heldElements(512 * 64, ParameterSplit::Vocabulary, 2), 16384);
  profile.vocabulary = 511;
  EXPECT_DOUBLE_EQ(
      profile.heldElements(511 * 64, ParameterSplit::Vocabulary, 2), 32768);
}

TEST(RematMemory, AgainstMegatronFormula) {
  GptShape shape;
  shape.layers = 2;
  shape.width = 1024;
  shape.heads = 16;
  shape.vocabulary = 2048;
  shape.sequence = 1024;
  Profiled profiled;
  profileGpt(profiled, shape);
  ASSERT_TRUE(profiled.profile);
  const UnitProfile &layer = profiled.profile->unit(1);
  double s = 1024, h = 1024, a = 16;
  for (double b : {1.0, 4.0}) {
    double sbh = s * b * h;
    double megatron = sbh * (34 + 5 * a * s / h);
    double megatronSelective = 34 * sbh;
    double none = keptActivations(layer, RematMode::None).at(b, 1);
    double selective = keptActivations(layer, RematMode::Selective).at(b, 1);
    double full = keptActivations(layer, RematMode::Full).at(b, 1);
    std::printf("b=%.0f: kept %.1f sbh (Megatron %.1f sbh, %.1f without "
                "scores), selective %.1f sbh, full %.1f sbh\n",
                b, none / sbh, megatron / sbh, megatronSelective / sbh,
                selective / sbh, full / sbh);
    // 32 s b h: Megatron's 34 less its two dropout masks; no s^2 term.
    EXPECT_DOUBLE_EQ(none, 32 * sbh);
    EXPECT_NEAR(none / megatronSelective, 32.0 / 34, 1e-12);
    // Selective (tess-rematerialize's rule) drops the two layer-norm
    // outputs (2 s b h each) and the GELU output (8 s b h), re-run from the
    // layer input, the mid residual and the kept fc1 output.
    EXPECT_DOUBLE_EQ(selective, 20 * sbh);
    EXPECT_DOUBLE_EQ(full, 2 * sbh);
    // Tensor parallelism divides all but the replicated [s, b, h] tensors:
    // layer input, the two norm outputs and the mid residual (Megatron's
    // 10 s b h without sequence parallelism, less its mask).
    EXPECT_DOUBLE_EQ(keptActivations(layer, RematMode::None).at(b, 8),
                     8 * sbh + 24 * sbh / 8);
    // Selective rebuilds the two replicated norm outputs and the split GELU
    // output.
    EXPECT_DOUBLE_EQ(keptActivations(layer, RematMode::Selective).at(b, 8),
                     4 * sbh + 16 * sbh / 8);
  }
  EXPECT_FALSE(layer.selectiveRecompute.empty());
}

} // namespace

// Tests that an attention with dropout is priced as the partitioner runs
// it under tensor parallelism: split over its heads (the dropout index has a
// fixed head stride, so each rank draws its heads' masks from the one
// stream), so what it keeps for the backward and its work are divided by the
// TP degree, as for the same layer without dropout.
TEST(RematMemory, AttentionWithDropoutIsSplitOverHeads) {
  GptShape shape = smallGpt(2);
  Profiled plain, dropped;
  profileGpt(plain, shape);
  shape.attentionDropout = 0.1;
  profileGpt(dropped, shape);
  ASSERT_TRUE(plain.profile && dropped.profile);
  const UnitProfile &without = plain.profile->unit(2);
  const UnitProfile &with = dropped.profile->unit(2);
  EXPECT_DOUBLE_EQ(with.savedAll.replicated.perSample,
                   without.savedAll.replicated.perSample);
  EXPECT_DOUBLE_EQ(with.savedAll.split.perSample,
                   without.savedAll.split.perSample);
  auto attentionDivided = [](const std::vector<OpRecord> &records) {
    for (const OpRecord &record : records)
      if (record.kind == cost::OpKind::Attention)
        return record.tensorParallel;
    ADD_FAILURE() << "no attention record";
    return false;
  };
  EXPECT_TRUE(attentionDivided(without.forward));
  EXPECT_TRUE(attentionDivided(with.forward));
  EXPECT_TRUE(attentionDivided(with.backward));
}
