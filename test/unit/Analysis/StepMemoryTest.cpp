//===- StepMemoryTest.cpp - the training state and the arena's liveness ---===//
//
// tessera/Analysis/StepMemory.h on GPT-2-shaped training programs written
// in tess IR (test/unit/CostModel/GptTrainingProgram.h).
//
//===----------------------------------------------------------------------===//

#include "../CostModel/GptTrainingProgram.h"

#include "tessera/Analysis/StepMemory.h"

#include "Tess/IR/TessDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cstdio>

using tessera::StepMemory;
using tessera::cost::test_programs::GptShape;
namespace test_programs = tessera::cost::test_programs;

namespace {

StepMemory estimate(const GptShape &shape, const std::string &precision,
                    int64_t microBatches = 1) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      test_programs::buildGptTrainingProgram(context, shape, precision);
  EXPECT_TRUE(module);
  if (!module)
    return StepMemory();
  auto step = module->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  EXPECT_TRUE(step);
  if (!step)
    return StepMemory();
  mlir::FailureOr<StepMemory> result =
      tessera::estimateStepMemory(step, microBatches);
  EXPECT_TRUE(mlir::succeeded(result));
  return mlir::succeeded(result) ? *result : StepMemory();
}

/// The @forward_backward of `text`, parsed in `context` into `module`
/// (which keeps it alive); null when it does not parse.
mlir::func::FuncOp parseStep(mlir::MLIRContext &context, llvm::StringRef text,
                             mlir::OwningOpRef<mlir::ModuleOp> &module) {
  context.loadDialect<tessera::tess::TessDialect, mlir::func::FuncDialect>();
  module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  return module ? module->lookupSymbol<mlir::func::FuncOp>("forward_backward")
                : mlir::func::FuncOp();
}

// Tests the driver's state per parameter, by category, for GPT-2 124M: the
// fp32 master and moments, the gradients as the step writes them, and fp32
// accumulators only when a step has several micro-batches. A step that casts
// its masters (as this one) has no compute copies in the state: its casts
// are in the arena.
TEST(StepMemory, TrainingStatePerParameter) {
  GptShape shape = test_programs::gpt2Small();
  int64_t parameters = shape.parameters();
  EXPECT_EQ(parameters, 124439808); // PyTorch's count for GPT-2 124M.

  StepMemory bf16 = estimate(shape, "bf16");
  EXPECT_EQ(bf16.state.trainableElements, parameters);
  EXPECT_EQ(bf16.state.masterWeights, 4 * parameters);
  EXPECT_EQ(bf16.state.computeCopies, 0);
  EXPECT_EQ(bf16.state.gradients, 2 * parameters);
  EXPECT_EQ(bf16.state.optimizerState, 8 * parameters);
  EXPECT_EQ(bf16.state.accumulators, 0);
  EXPECT_EQ(bf16.state.total(), 14 * parameters);
  // The bf16 casts of the weights live in the arena, beside what the
  // forward keeps (most of them across the loss, though not all: a bias's
  // cast is dead once the forward has added it).
  EXPECT_GE(bf16.arenaBytes, bf16.savedForBackwardBytes + parameters);
  EXPECT_EQ(bf16.totalBytes(), bf16.state.total() + bf16.arenaBytes +
                                   bf16.gemmScratchBytes);

  StepMemory accumulated = estimate(shape, "bf16", /*microBatches=*/4);
  EXPECT_EQ(accumulated.state.accumulators, 4 * parameters);
  EXPECT_EQ(accumulated.arenaBytes, bf16.arenaBytes);

  StepMemory fp32 = estimate(shape, "fp32");
  EXPECT_EQ(fp32.state.gradients, 4 * parameters);
  EXPECT_EQ(fp32.state.total(), 16 * parameters);
}

// Tests the activations one layer keeps for the backward against Korthikanti
// et al.'s sbh(34 + 5as/h) bytes (16-bit activations, with dropout, softmax
// stored). Our attention is fused and recomputes its scores, and GPT-2 as
// exported has no dropout, so a layer keeps: LN1 input and output (2 + 2),
// Q, K, V (6), the attention output (2), LN2 input and output (2 + 2), the
// MLP's up-projection and GELU output (8 + 8): 32 sbh, 34 sbh less the two
// dropout masks.
TEST(StepMemory, ActivationsPerLayerMatchKorthikanti) {
  GptShape one = test_programs::gpt2Small(), two = test_programs::gpt2Small();
  one.batch = two.batch = 4;
  one.layers = 1;
  two.layers = 2;
  StepMemory small = estimate(one, "bf16");
  StepMemory large = estimate(two, "bf16");
  double perLayer = static_cast<double>(large.savedForBackwardBytes -
                                        small.savedForBackwardBytes);

  double s = one.sequence, b = one.batch, h = one.width, a = one.heads;
  double sbh = s * b * h;
  double korthikanti = sbh * (34 + 5 * a * s / h);
  std::printf("saved per layer: %.1f sbh; / 34 sbh = %.3f; / sbh(34 + 5as/h) "
              "= %.3f\n",
              perLayer / sbh, perLayer / (34 * sbh), perLayer / korthikanti);
  EXPECT_DOUBLE_EQ(perLayer, 32 * sbh);
  EXPECT_NEAR(perLayer / (34 * sbh), 32.0 / 34, 1e-12);
}

// Tests that the loss's gradient takes no bytes of its own: the arena holds
// what the forward keeps (the logits among it), and dlogits are written over
// the logits (ArenaPlanning.h's in-place rule), so the peak is below the
// kept bytes plus a second copy of the logits.
TEST(StepMemory, LogitsGradientWrittenInPlace) {
  GptShape shape = test_programs::gpt2Small();
  shape.layers = 2;
  shape.batch = 2;
  StepMemory memory = estimate(shape, "bf16");
  double logits = 2.0 * shape.batch * shape.sequence * shape.vocabulary;
  EXPECT_GE(memory.arenaBytes, memory.savedForBackwardBytes);
  EXPECT_LT(memory.arenaBytes, memory.savedForBackwardBytes + logits);
  EXPECT_FALSE(memory.peakOpName.empty());
}

// Tests the state of a step that reads its weights as compute copies (as
// tess-read-compute-copies leaves it): a bf16 parameter argument is a copy
// the driver keeps beside its f32 master (4 + 2 bytes an element), an f32
// one is the master alone; gradients count in the type the step returns
// them, buffers whole, inputs not at all.
TEST(StepMemory, ComputeCopiesAreStateBesideTheMasters) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp step = parseStep(context, R"mlir(
    func.func @forward_backward(
        %x: tensor<4x8xbf16>,
        %w: tensor<16x8xbf16> {tess.parameter},
        %b: tensor<16xf32> {tess.parameter},
        %table: tensor<10x8xf32> {tess.buffer})
        -> (tensor<16x8xbf16> {tess.gradient}, tensor<16xf32> {tess.gradient}) {
      %y = tess.linear %x, %w {transpose_weight} : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
      %dw = tess.matmul %y, %x {transpose_lhs} : (tensor<4x16xbf16>, tensor<4x8xbf16>) -> tensor<16x8xbf16>
      return %dw, %b : tensor<16x8xbf16>, tensor<16xf32>
    })mlir",
                                      module);
  ASSERT_TRUE(step);
  mlir::FailureOr<tessera::TrainingStateBytes> state =
      tessera::trainingStateBytes(step, /*microBatches=*/2);
  ASSERT_TRUE(mlir::succeeded(state));
  int64_t elements = 16 * 8 + 16;
  EXPECT_EQ(state->trainableElements, elements);
  EXPECT_EQ(state->masterWeights, 4 * elements);
  EXPECT_EQ(state->computeCopies, 2 * 16 * 8);
  EXPECT_EQ(state->optimizerState, 8 * elements);
  EXPECT_EQ(state->gradients, 2 * 16 * 8 + 4 * 16);
  EXPECT_EQ(state->accumulators, 4 * elements);
  EXPECT_EQ(state->buffers, 4 * 10 * 8);

  // With --offload optimizer the masters and moments (12 bytes an element)
  // go to the host; the GPU keeps w's bf16 copy, an f32 mirror of b (read
  // as its master), the gradients, the accumulators and the buffers.
  EXPECT_EQ(state->masterReadWeights, 4 * 16);
  EXPECT_EQ(state->offloadedToHost(), 12 * elements);
  EXPECT_EQ(state->offloadedTotal(), 2 * 16 * 8 + 4 * 16 +
                                         (2 * 16 * 8 + 4 * 16) +
                                         4 * elements + 4 * 10 * 8);
  EXPECT_EQ(state->offloadedTotal() + state->offloadedToHost(),
            state->total() + state->masterReadWeights);
}

// Tests a mesh plan's ZeRO-1/2 gradients (pending over dp, the driver's
// runtime/train/MeshZero.h): their masters and moments are the rank's
// quarter, an f32 mirror of each whole beside them; a ZeRO-2 gradient
// (tess.zero_stage) is the rank's quarter too (its f32 sums with several
// micro-batches), beside a ring of the largest run of ZeRO-2 gradients and
// one reduced block; a ZeRO-1 one stays whole, and so does every gradient
// without a ZeRO-2 one.
TEST(StepMemory, MeshZeroTwoHoldsTheGradientsShard) {
  mlir::MLIRContext context;
  context.loadDialect<tessera::tess::TessDialect, mlir::func::FuncDialect>();
  auto parse = [&](const std::string &stages) {
    return mlir::parseSourceString<mlir::ModuleOp>(
        R"mlir(
    module attributes {tess.mesh = #tess.mesh<dp = 4>} {
      func.func @forward_backward(
          %w: tensor<16x8xf32> {tess.parameter = "w"},
          %v: tensor<32xf32> {tess.parameter = "v"},
          %b: tensor<16xf32> {tess.parameter = "b"})
          -> (tensor<16x8xf32> {tess.gradient = "w", tess.layout = #tess.layout<[-, -] partial(dp)>)mlir" +
            stages + R"mlir(},
              tensor<32xf32> {tess.gradient = "v", tess.layout = #tess.layout<[-] partial(dp)>, tess.zero_stage = 1 : i64},
              tensor<16xf32> {tess.gradient = "b"}) {
        return %w, %v, %b : tensor<16x8xf32>, tensor<32xf32>, tensor<16xf32>
      }
    })mlir",
        &context);
  };
  mlir::OwningOpRef<mlir::ModuleOp> zeroTwo =
      parse(", tess.zero_stage = 2 : i64");
  ASSERT_TRUE(zeroTwo);
  auto step = zeroTwo->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  mlir::FailureOr<tessera::TrainingStateBytes> one =
      tessera::trainingStateBytes(step, /*microBatches=*/1);
  ASSERT_TRUE(mlir::succeeded(one));
  const int64_t pending = 16 * 8 + 32, sharded = 16 * 8;
  EXPECT_EQ(one->masterWeights, 4 * (16 + pending / 4));
  EXPECT_EQ(one->computeCopies, 4 * pending);
  EXPECT_EQ(one->gradients, 4 * (16 + 32 + sharded / 4));
  EXPECT_EQ(one->accumulators, 0);
  EXPECT_EQ(one->gradientRing, 4 * (sharded + sharded / 4));
  mlir::FailureOr<tessera::TrainingStateBytes> two =
      tessera::trainingStateBytes(step, /*microBatches=*/2);
  ASSERT_TRUE(mlir::succeeded(two));
  EXPECT_EQ(two->gradients, 4 * (16 + 32));
  EXPECT_EQ(two->accumulators, 4 * (16 + 32 + sharded / 4));
  EXPECT_EQ(two->gradientRing, 4 * (sharded + sharded / 4));

  mlir::OwningOpRef<mlir::ModuleOp> zeroOne = parse("");
  ASSERT_TRUE(zeroOne);
  step = zeroOne->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  one = tessera::trainingStateBytes(step, /*microBatches=*/1);
  ASSERT_TRUE(mlir::succeeded(one));
  EXPECT_EQ(one->masterWeights, 4 * (16 + pending / 4));
  EXPECT_EQ(one->gradients, 4 * (16 + pending));
  EXPECT_EQ(one->gradientRing, 0);
}

// Tests that the offloaded prediction leaves the default one alone and
// takes the masters and moments of GPT-2 124M off the GPU: 12 of the 14
// bytes a parameter holds in bf16 go, the casting step's f32 reads stay.
TEST(StepMemory, OffloadedOptimizerKeepsTheStepsStateOnTheGpu) {
  GptShape shape = test_programs::gpt2Small();
  const int64_t parameters = shape.parameters();
  StepMemory bf16 = estimate(shape, "bf16");
  EXPECT_EQ(bf16.totalBytes(), bf16.state.total() + bf16.arenaBytes +
                                   bf16.gemmScratchBytes);
  EXPECT_EQ(bf16.state.offloadedToHost(), 12 * parameters);
  // This step casts its masters in the arena, so it reads every one: the
  // mirror is all of them (a compiled step reads copies instead).
  EXPECT_EQ(bf16.state.masterReadWeights, 4 * parameters);
  EXPECT_EQ(bf16.offloadedTotalBytes(),
            bf16.totalBytes() - 12 * parameters + 4 * parameters);
}

} // namespace

// Tests that a step with no loss op (a vocabulary-parallel loss, which
// tess-partition-spmd builds of tess ops) still says what its forward
// keeps for the backward: the blocks alive across the first read of the
// loss scale, where its backward starts.
TEST(StepMemory, TheBackwardOfALossOfTessOpsStartsAtTheLossScale) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp step = parseStep(context, R"mlir(
    func.func @forward_backward(
        %x: tensor<4x8xf32> {tess.input = "input_ids"},
        %scale: tensor<f32> {tess.input = "loss_scale"},
        %w: tensor<16x8xf32> {tess.parameter})
        -> (tensor<f32>, tensor<16x8xf32> {tess.gradient}) {
      %y = tess.linear %x, %w {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
      %e = tess.exp %y : tensor<4x16xf32>
      %s = tess.reduce_sum %e {dims = array<i64: 0, 1>} : (tensor<4x16xf32>) -> tensor<f32>
      %g = tess.mul %e, %scale : (tensor<4x16xf32>, tensor<f32>) -> tensor<4x16xf32>
      %h = tess.mul %g, %y : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
      %dw = tess.matmul %h, %x {transpose_lhs} : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
      return %s, %dw : tensor<f32>, tensor<16x8xf32>
    })mlir",
                                      module);
  ASSERT_TRUE(step);
  mlir::FailureOr<tessera::StepMemory> memory =
      tessera::estimateStepMemory(step, /*microBatches=*/1);
  ASSERT_TRUE(mlir::succeeded(memory));
  // %y, alive across the backward's first op (the one reading the loss
  // scale); %e dies there.
  EXPECT_EQ(memory->savedForBackwardBytes, 4 * 16 * 4);
}
