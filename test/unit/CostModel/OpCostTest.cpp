//===- OpCostTest.cpp - per-op FLOPs, bytes and roofline times -------------===//

#include "GptTrainingProgram.h"

#include "tessera/CostModel/Cluster.h"
#include "tessera/CostModel/OpCost.h"
#include "tessera/CostModel/TrainingStepEstimate.h"

#include "Tess/IR/TessOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

using namespace tessera;
using namespace tessera::cost;

namespace {

/// The cost of the first op named `name` in `source`.
class OpCostTest : public ::testing::Test {
protected:
  OpCostTest() { context.loadDialect<tess::TessDialect, mlir::func::FuncDialect>(); }

  OpCost costOf(const std::string &source, llvm::StringRef name) {
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    EXPECT_TRUE(module);
    OpCost found;
    bool seen = false;
    if (module)
      module->walk([&](mlir::Operation *op) {
        if (!seen && op->getName().getStringRef() == name) {
          found = estimateOpCost(op);
          seen = true;
        }
      });
    EXPECT_TRUE(seen) << name.str();
    return found;
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(OpCostTest, LinearIsTwoMnkPlusBias) {
  OpCost cost = costOf(R"(
    func.func @f(%x: tensor<4x8x64xbf16>, %w: tensor<64x192xbf16>, %b: tensor<192xbf16>) -> tensor<4x8x192xbf16> {
      %y = tess.linear %x, %w, %b : (tensor<4x8x64xbf16>, tensor<64x192xbf16>, tensor<192xbf16>) -> tensor<4x8x192xbf16>
      return %y : tensor<4x8x192xbf16>
    })", "tess.linear");
  EXPECT_EQ(cost.kind, OpKind::Linear);
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 32 * 64 * 192 + 32 * 192);
  EXPECT_DOUBLE_EQ(cost.bytes, 2.0 * (32 * 64 + 64 * 192 + 192 + 32 * 192));
  EXPECT_TRUE(cost.usesMatrixUnits);
  EXPECT_EQ(cost.precision, Precision::BF16);

  // nn.Linear's [out, in] weight: same FLOPs.
  cost = costOf(R"(
    func.func @f(%x: tensor<32x64xf32>, %w: tensor<192x64xf32>) -> tensor<32x192xf32> {
      %y = tess.linear %x, %w {transpose_weight} : (tensor<32x64xf32>, tensor<192x64xf32>) -> tensor<32x192xf32>
      return %y : tensor<32x192xf32>
    })", "tess.linear");
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 32 * 64 * 192);
  EXPECT_EQ(cost.precision, Precision::FP32);
}

TEST_F(OpCostTest, MatmulContractsTheRightDim) {
  // dW = x^T dy: [64, 512]^T @ [64, 64] contracts the 64 rows.
  OpCost cost = costOf(R"(
    func.func @f(%a: tensor<64x512xbf16>, %b: tensor<64x64xbf16>) -> tensor<512x64xbf16> {
      %y = tess.matmul %a, %b {transpose_lhs} : (tensor<64x512xbf16>, tensor<64x64xbf16>) -> tensor<512x64xbf16>
      return %y : tensor<512x64xbf16>
    })", "tess.matmul");
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 512 * 64 * 64);

  cost = costOf(R"(
    func.func @f(%q: tensor<2x4x32x16xf32>, %k: tensor<2x4x32x16xf32>) -> tensor<2x4x32x32xf32> {
      %s = tess.matmul %q, %k {transpose_rhs} : (tensor<2x4x32x16xf32>, tensor<2x4x32x16xf32>) -> tensor<2x4x32x32xf32>
      return %s : tensor<2x4x32x32xf32>
    })", "tess.matmul");
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 8 * 32 * 32 * 16);
}

TEST_F(OpCostTest, AttentionForwardAndRecomputingBackward) {
  std::string source = R"(
    func.func @f(%q: tensor<2x4x32x16xbf16>, %k: tensor<2x4x32x16xbf16>, %v: tensor<2x4x32x16xbf16>, %dy: tensor<2x4x32x16xbf16>)
        -> (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>) {
      %o = tess.attention %q, %k, %v {causal, scale = 2.500000e-01 : f64} : (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>) -> tensor<2x4x32x16xbf16>
      %dq, %dk, %dv = tess.attention_grad %q, %k, %v, %dy {causal, scale = 2.500000e-01 : f64}
        : (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>)
        -> (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>)
      return %o, %dq : tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>
    })";
  double forward = 4.0 * 2 * 4 * 32 * 32 * 16; // 4 b h s^2 d
  OpCost cost = costOf(source, "tess.attention");
  EXPECT_EQ(cost.kind, OpKind::Attention);
  EXPECT_DOUBLE_EQ(cost.flops, forward);
  EXPECT_DOUBLE_EQ(cost.bytes, 4 * 2.0 * (2 * 4 * 32 * 16));
  OpCost gradient = costOf(source, "tess.attention_grad");
  EXPECT_DOUBLE_EQ(gradient.flops, 2.5 * forward);
  EXPECT_DOUBLE_EQ(gradient.modelFlops, 2.0 * forward);
}

// Tests that a sliding window is priced at the keys each query visits: a
// window of 8 of 32 keys is a quarter of the causal attention's FLOPs, in
// the forward and the backward.
TEST_F(OpCostTest, SlidingWindowAttentionVisitsWindowKeys) {
  std::string source = R"(
    func.func @f(%q: tensor<2x4x32x16xbf16>, %k: tensor<2x4x32x16xbf16>, %v: tensor<2x4x32x16xbf16>, %dy: tensor<2x4x32x16xbf16>)
        -> (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>) {
      %o = tess.attention %q, %k, %v {causal, scale = 2.500000e-01 : f64, window = 8 : i64} : (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>) -> tensor<2x4x32x16xbf16>
      %dq, %dk, %dv = tess.attention_grad %q, %k, %v, %dy {causal, scale = 2.500000e-01 : f64, window = 8 : i64}
        : (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>)
        -> (tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>)
      return %o, %dq : tensor<2x4x32x16xbf16>, tensor<2x4x32x16xbf16>
    })";
  double forward = 4.0 * 2 * 4 * 32 * 8 * 16; // 4 b h s window d
  EXPECT_DOUBLE_EQ(costOf(source, "tess.attention").flops, forward);
  EXPECT_DOUBLE_EQ(costOf(source, "tess.attention_grad").flops, 2.5 * forward);
}

// Tests that a loss followed by its gradient moves no bytes of its own:
// the fused kernel's one pass is the gradient's (logits read, dlogits
// written), so the pair is priced once. Alone, the loss reads its logits.
TEST_F(OpCostTest, LossFollowedByItsGradientIsPricedOnce) {
  std::string fused = R"(
    func.func @f(%l: tensor<8x64xbf16>, %t: tensor<8xi64>, %d: tensor<f32>) -> (tensor<f32>, tensor<8x64xbf16>) {
      %loss = tess.cross_entropy %l, %t : (tensor<8x64xbf16>, tensor<8xi64>) -> tensor<f32>
      %g = tess.cross_entropy_grad %l, %t, %d : (tensor<8x64xbf16>, tensor<8xi64>, tensor<f32>) -> tensor<8x64xbf16>
      return %loss, %g : tensor<f32>, tensor<8x64xbf16>
    })";
  EXPECT_DOUBLE_EQ(costOf(fused, "tess.cross_entropy").bytes, 0);
  EXPECT_GE(costOf(fused, "tess.cross_entropy_grad").bytes,
            2.0 * (2 * 8 * 64));
  std::string alone = R"(
    func.func @f(%l: tensor<8x64xbf16>, %t: tensor<8xi64>) -> tensor<f32> {
      %loss = tess.cross_entropy %l, %t : (tensor<8x64xbf16>, tensor<8xi64>) -> tensor<f32>
      return %loss : tensor<f32>
    })";
  EXPECT_GE(costOf(alone, "tess.cross_entropy").bytes, 2.0 * 8 * 64);
}

// Tests the packed attention's FLOPs (the unpacked attention's for the
// same heads) and that attention is timed at the device's attention rate.
TEST_F(OpCostTest, PackedAttentionAtTheAttentionRate) {
  OpCost cost = costOf(R"(
    func.func @f(%qkv: tensor<2x32x192xbf16>) -> tensor<2x32x64xbf16> {
      %y, %lse = tess.packed_attention %qkv {causal, key_heads = 4 : i64, query_heads = 4 : i64, scale = 2.500000e-01 : f64}
        : (tensor<2x32x192xbf16>) -> (tensor<2x32x64xbf16>, tensor<2x4x32xf32>)
      return %y : tensor<2x32x64xbf16>
    })", "tess.packed_attention");
  double forward = 4.0 * 2 * 4 * 32 * 32 * 16;
  EXPECT_EQ(cost.kind, OpKind::Attention);
  EXPECT_DOUBLE_EQ(cost.flops, forward);
  DeviceModel device;
  device.memoryBandwidth = 1e12;
  device.matrixFlops = {8e14, 8e14, 6e13};
  device.attentionFlops = {2e14, 0, 0};
  EXPECT_DOUBLE_EQ(cost.time(device),
                   std::max(forward / 2e14, cost.bytes / 1e12));
}

TEST_F(OpCostTest, ViewsAreFreeAndElementwiseIsMemoryBound) {
  std::string source = R"(
    func.func @f(%x: tensor<1024x1024xbf16>) -> tensor<1024x4x256xbf16> {
      %r = tess.reshape %x : (tensor<1024x1024xbf16>) -> tensor<1024x4x256xbf16>
      %g = tess.gelu %r {approximation = #tess<gelu_approximation tanh>} : tensor<1024x4x256xbf16>
      return %g : tensor<1024x4x256xbf16>
    })";
  OpCost reshape = costOf(source, "tess.reshape");
  EXPECT_EQ(reshape.kind, OpKind::Free);
  EXPECT_EQ(reshape.bytes, 0);

  llvm::Expected<Cluster> h200 = loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(h200));
  OpCost gelu = costOf(source, "tess.gelu");
  EXPECT_EQ(gelu.kind, OpKind::Elementwise);
  EXPECT_DOUBLE_EQ(gelu.bytes, 2 * 2.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(gelu.time(h200->device), gelu.bytes / 4.8e12);
}

TEST_F(OpCostTest, LargeGemmIsComputeBound) {
  OpCost cost = costOf(R"(
    func.func @f(%a: tensor<8192x8192xbf16>, %b: tensor<8192x8192xbf16>) -> tensor<8192x8192xbf16> {
      %y = tess.matmul %a, %b : (tensor<8192x8192xbf16>, tensor<8192x8192xbf16>) -> tensor<8192x8192xbf16>
      return %y : tensor<8192x8192xbf16>
    })", "tess.matmul");
  llvm::Expected<Cluster> h200 = loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(h200));
  EXPECT_DOUBLE_EQ(cost.time(h200->device), 2.0 * 8192 * 8192 * 8192 / 790e12);
}

// Tests that a contraction records its GEMM's shape and is timed at the
// rate measured for it, and that every kernel pays the device's per-kernel
// cost on top of its roofline.
TEST_F(OpCostTest, ContractionsAtTheirShapesRate) {
  OpCost cost = costOf(R"(
    func.func @f(%x: tensor<16x1024x768xbf16>, %w: tensor<2304x768xbf16>) -> tensor<16x1024x2304xbf16> {
      %y = tess.linear %x, %w {transpose_weight} : (tensor<16x1024x768xbf16>, tensor<2304x768xbf16>) -> tensor<16x1024x2304xbf16>
      return %y : tensor<16x1024x2304xbf16>
    })", "tess.linear");
  EXPECT_DOUBLE_EQ(cost.m, 16384);
  EXPECT_DOUBLE_EQ(cost.n, 2304);
  EXPECT_DOUBLE_EQ(cost.k, 768);
  DeviceModel device;
  device.memoryBandwidth = 4e12;
  device.matrixFlops = {7.8e14, 7.8e14, 5e13};
  device.gemmShapes[static_cast<size_t>(Precision::BF16)] = {
      {16384, 2304, 768, 6e14}};
  device.kernelSeconds = 1e-6;
  EXPECT_DOUBLE_EQ(cost.time(device), cost.flops / 6e14 + 1e-6);

  OpCost batched = costOf(R"(
    func.func @f(%a: tensor<8x128x64xbf16>, %b: tensor<8x64x32xbf16>) -> tensor<8x128x32xbf16> {
      %y = tess.matmul %a, %b : (tensor<8x128x64xbf16>, tensor<8x64x32xbf16>) -> tensor<8x128x32xbf16>
      return %y : tensor<8x128x32xbf16>
    })", "tess.matmul");
  EXPECT_DOUBLE_EQ(batched.m, 8 * 128);
  EXPECT_DOUBLE_EQ(batched.n, 32);
  EXPECT_DOUBLE_EQ(batched.k, 64);
}

// Tests the FLOPs of a GPT-2 124M training step (batch 16 x 1024) against
// hand formulas: GEMMs exactly, attention exactly, and the whole against
// the usual 6 N + 12 L d T per token (about 0.86 GFLOP).
TEST(GptFlops, Gpt2SmallMatchesHandFormulas) {
  mlir::MLIRContext context;
  test_programs::GptShape shape = test_programs::gpt2Small();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      test_programs::buildGptTrainingProgram(context, shape, "bf16");
  ASSERT_TRUE(module);
  llvm::Expected<Cluster> h200 = loadCluster("h200");
  ASSERT_TRUE(static_cast<bool>(h200));
  DeviceMesh mesh;
  // The time does not depend on the memory; any step's will do.
  StepMemory memory;
  llvm::Expected<TrainingStepEstimate> estimate =
      estimateTrainingStep(*module, memory, *h200, mesh);
  ASSERT_TRUE(static_cast<bool>(estimate)) << llvm::toString(estimate.takeError());

  double tokens = shape.batch * shape.sequence;
  double d = shape.width, L = shape.layers, V = shape.vocabulary,
         T = shape.sequence;
  EXPECT_EQ(estimate->tokensPerDevice, shape.batch * shape.sequence);
  // Forward, input gradient and weight gradient of every weight matrix:
  // 3 x 2 m n k; plus the biases' adds in the forward (3d + d + 4d + d).
  // The head runs padded to 50,304 classes (tess-build-training's
  // vocabulary-multiple 64), with the padding's bias.
  double paddedV = std::ceil(V / 64) * 64;
  EXPECT_EQ(paddedV, 50304);
  double gemm = 3 * 2 * tokens * (12 * d * d * L + paddedV * d) +
                tokens * 9 * d * L + tokens * paddedV;
  EXPECT_DOUBLE_EQ(estimate->flopsByKind[size_t(OpKind::Linear)], gemm);
  // 4 b h s^2 d_head = 4 b s^2 d forward, 2.5x more in the backward.
  double attention = 4 * shape.batch * T * T * d * L;
  EXPECT_DOUBLE_EQ(estimate->flopsByKind[size_t(OpKind::Attention)],
                   3.5 * attention);

  double handPerToken = 6.0 * shape.parameters() + 12 * L * d * T;
  double perToken = estimate->modelFlops / tokens;
  EXPECT_NEAR(handPerToken / 1e9, 0.86, 0.005);
  std::printf("GPT-2 124M: %.4f GFLOP per token (model), %.4f executed; "
              "6N + 12LdT = %.4f; ratio %.4f\n",
              perToken / 1e9, estimate->flops / tokens / 1e9,
              handPerToken / 1e9, perToken / handPerToken);
  // Ours leaves out the position-embedding and bias/norm "multiplies" 6N
  // credits and adds the memory-bound ops' arithmetic: within 1%.
  EXPECT_NEAR(perToken / handPerToken, 1.0, 0.01);
}

} // namespace
