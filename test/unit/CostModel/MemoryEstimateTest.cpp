//===- MemoryEstimateTest.cpp - resident state and activation liveness ----===//

#include "GptTrainingProgram.h"

#include "tessera/CostModel/MemoryEstimate.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace tessera::cost;
using tessera::cost::test_programs::GptShape;

namespace {

MemoryEstimate estimate(const GptShape &shape, const std::string &precision) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      test_programs::buildGptTrainingProgram(context, shape, precision);
  EXPECT_TRUE(module);
  if (!module)
    return MemoryEstimate();
  llvm::Expected<MemoryEstimate> result = estimateTrainingMemory(*module);
  EXPECT_TRUE(static_cast<bool>(result));
  if (!result) {
    ADD_FAILURE() << llvm::toString(result.takeError());
    return MemoryEstimate();
  }
  return *result;
}

// Tests the mixed-precision rule: 16 bytes per parameter resident, by
// category, for GPT-2 124M.
TEST(MemoryEstimate, SixteenBytesPerParameter) {
  GptShape shape = test_programs::gpt2Small();
  int64_t parameters = shape.parameters();
  EXPECT_EQ(parameters, 124439808); // PyTorch's count for GPT-2 124M.

  MemoryEstimate bf16 = estimate(shape, "bf16");
  EXPECT_EQ(bf16.trainableElements, parameters);
  EXPECT_EQ(bf16.masterWeights, 4 * parameters);
  EXPECT_EQ(bf16.computeWeights, 2 * parameters);
  EXPECT_EQ(bf16.gradients, 2 * parameters);
  EXPECT_EQ(bf16.optimizerState, 8 * parameters);
  EXPECT_EQ(bf16.resident() - bf16.inputsAndBuffers, 16 * parameters);
  // Token ids, targets (i64) and the loss scale.
  EXPECT_EQ(bf16.inputsAndBuffers, 2 * 8 * shape.batch * shape.sequence + 4);
  EXPECT_GE(bf16.activations, bf16.savedForBackward);

  // In fp32 the master weights are the compute weights: 4 + 4 + 8.
  MemoryEstimate fp32 = estimate(shape, "fp32");
  EXPECT_EQ(fp32.computeWeights, 0);
  EXPECT_EQ(fp32.gradients, 4 * parameters);
  EXPECT_EQ(fp32.resident() - fp32.inputsAndBuffers, 16 * parameters);
}

// Tests the activations one layer keeps for the backward against Korthikanti
// et al.'s sbh(34 + 5as/h) bytes (16-bit activations, with dropout, softmax
// stored). Our attention is fused and recomputes its scores, and GPT-2 as
// exported has no dropout, so a layer keeps: LN1 input and output (2 + 2),
// Q, K, V (6), the attention output (2), LN2 input and output (2 + 2), the
// MLP's up-projection and GELU output (8 + 8): 32 sbh, 34 sbh less the two
// dropout masks.
TEST(MemoryEstimate, ActivationsPerLayerMatchKorthikanti) {
  GptShape one = test_programs::gpt2Small(), two = test_programs::gpt2Small();
  one.batch = two.batch = 4;
  one.layers = 1;
  two.layers = 2;
  MemoryEstimate small = estimate(one, "bf16");
  MemoryEstimate large = estimate(two, "bf16");
  double perLayer =
      static_cast<double>(large.savedForBackward - small.savedForBackward);

  double s = one.sequence, b = one.batch, h = one.width, a = one.heads;
  double sbh = s * b * h;
  double korthikanti = sbh * (34 + 5 * a * s / h);
  std::printf("saved per layer: %.1f sbh; / 34 sbh = %.3f; / sbh(34 + 5as/h) "
              "= %.3f\n",
              perLayer / sbh, perLayer / (34 * sbh), perLayer / korthikanti);
  EXPECT_DOUBLE_EQ(perLayer, 32 * sbh);
  EXPECT_NEAR(perLayer / (34 * sbh), 32.0 / 34, 1e-12);
}

// Tests that the peak of a training step is not below what it keeps, and
// that the estimate reports where it peaks.
TEST(MemoryEstimate, PeakIsAtTheLoss) {
  GptShape shape = test_programs::gpt2Small();
  shape.layers = 2;
  shape.batch = 2;
  MemoryEstimate memory = estimate(shape, "bf16");
  // The logits and their gradient dominate: the peak is where both are
  // alive. Both are bf16: the loss reads the logits in the compute type and
  // writes its gradient in it (no f32 copies).
  EXPECT_EQ(memory.peakOpName, "tess.cross_entropy_grad");
  double logits = 2.0 * shape.batch * shape.sequence * shape.vocabulary;
  EXPECT_GE(memory.activations, memory.savedForBackward + logits);
}

} // namespace
