//===- ArenaPlanningTest.cpp - the static arena's interval packing -------===//

#include "tessera/Analysis/ArenaPlanning.h"

#include "Tess/IR/TessOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using tessera::ArenaLayout;
using tessera::ArenaRequest;
using tessera::packArena;
using tessera::StorageKind;

namespace {

/// No two blocks live at the same time may share a byte.
void expectNoOverlap(const std::vector<ArenaRequest> &requests,
                     const ArenaLayout &layout) {
  for (size_t a = 0; a < requests.size(); ++a)
    for (size_t b = a + 1; b < requests.size(); ++b) {
      bool liveTogether = requests[a].first <= requests[b].last &&
                          requests[b].first <= requests[a].last;
      bool shareBytes =
          layout.offsets[a] < layout.offsets[b] + requests[b].bytes &&
          layout.offsets[b] < layout.offsets[a] + requests[a].bytes;
      EXPECT_FALSE(liveTogether && shareBytes && requests[a].bytes &&
                   requests[b].bytes)
          << "blocks " << a << " and " << b;
    }
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(layout.offsets[i] % 64, 0) << "block " << i;
    EXPECT_LE(layout.offsets[i] + requests[i].bytes, layout.totalBytes);
  }
}

TEST(ArenaPlanningTest, DisjointLifetimesShareBytes) {
  // A chain: each value dies where the next is defined + 1.
  std::vector<ArenaRequest> requests = {
      {1000, 0, 1}, {1000, 2, 3}, {1000, 4, 5}};
  ArenaLayout layout = packArena(requests);
  expectNoOverlap(requests, layout);
  EXPECT_EQ(layout.totalBytes, 1024);
  EXPECT_EQ(layout.offsets, (std::vector<int64_t>{0, 0, 0}));
}

TEST(ArenaPlanningTest, AnOutputNeverOverlapsItsInput) {
  // The input's last use is the op that defines the output: both live there.
  std::vector<ArenaRequest> requests = {{256, 0, 1}, {256, 1, 2}};
  ArenaLayout layout = packArena(requests);
  expectNoOverlap(requests, layout);
  EXPECT_NE(layout.offsets[0], layout.offsets[1]);
  EXPECT_EQ(layout.totalBytes, 512);
}

TEST(ArenaPlanningTest, OffsetsAreAlignedAndGapsReused) {
  // A long-lived small block, two short big ones one after the other, and a
  // late small one that fits in the gap they leave.
  std::vector<ArenaRequest> requests = {
      {10, 0, 9}, {500, 1, 2}, {700, 3, 4}, {100, 5, 6}};
  ArenaLayout layout = packArena(requests);
  expectNoOverlap(requests, layout);
  // Largest first: 700 at 0, 500 at 0 (disjoint in time), then 100 and 10.
  EXPECT_EQ(layout.offsets[2], 0);
  EXPECT_EQ(layout.offsets[1], 0);
  EXPECT_EQ(layout.totalBytes, 768);
}

TEST(ArenaPlanningTest, EmptyBlocksTakeNoSpace) {
  std::vector<ArenaRequest> requests = {{0, 0, 5}, {64, 0, 5}};
  ArenaLayout layout = packArena(requests);
  EXPECT_EQ(layout.totalBytes, 64);
}

TEST(ArenaPlanningTest, ManyRandomIntervalsNeverCollide) {
  std::vector<ArenaRequest> requests;
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int64_t>(state >> 33);
  };
  for (int i = 0; i < 200; ++i) {
    int64_t first = next() % 100;
    requests.push_back({1 + next() % 5000, first, first + next() % 20});
  }
  ArenaLayout layout = packArena(requests);
  expectNoOverlap(requests, layout);
  int64_t sum = 0;
  for (const ArenaRequest &request : requests)
    sum += (request.bytes + 63) / 64 * 64;
  EXPECT_LT(layout.totalBytes, sum);
}

/// The arena plan of the one function in `source`, parsed into `context`.
struct ParsedPlan {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  tessera::FunctionArenaPlan plan;
  mlir::func::FuncOp function;

  explicit ParsedPlan(const char *source) {
    context.loadDialect<tessera::tess::TessDialect, mlir::func::FuncDialect>();
    module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
    EXPECT_TRUE(module);
    function = *module->getOps<mlir::func::FuncOp>().begin();
    auto planned = tessera::planFunctionArena(function);
    EXPECT_TRUE(mlir::succeeded(planned));
    plan = *planned;
  }
  /// The value defined by the first op named `name`.
  mlir::Value resultOf(llvm::StringRef name) {
    mlir::Value found;
    function.walk([&](mlir::Operation *op) {
      if (!found && op->getName().getStringRef() == name)
        found = op->getResult(0);
    });
    return found;
  }
};

TEST(ArenaPlanningTest, TheLossGradientOverwritesLogitsNothingReadsAfter) {
  // The head's logits are read by the loss and its gradient only: dlogits
  // takes their bytes, and the step holds one [tokens, classes] block.
  ParsedPlan parsed(R"mlir(
    func.func @step(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %t: tensor<4xi64>, %s: tensor<f32>)
        -> (tensor<f32>, tensor<4x8xf32>) {
      %logits = tess.linear %x, %w {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
      %loss = tess.cross_entropy %logits, %t : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
      %d = tess.cross_entropy_grad %logits, %t, %s : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
      %dx = tess.linear %d, %w : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
      return %loss, %dx : tensor<f32>, tensor<4x8xf32>
    })mlir");
  mlir::Value logits = parsed.resultOf("tess.linear");
  mlir::Value dlogits = parsed.resultOf("tess.cross_entropy_grad");
  EXPECT_EQ(parsed.plan.storage.lookup(dlogits).kind, StorageKind::Alias);
  EXPECT_EQ(parsed.plan.resolveAlias(dlogits), logits);
  // The shared block lives on to the gradient's reader (position 3).
  const auto &block =
      parsed.plan.buffers[parsed.plan.storage.lookup(logits).index];
  EXPECT_EQ(block.last, 3);
  EXPECT_EQ(parsed.plan.buffers.size(), 1u); // dx is the caller's output
}

TEST(ArenaPlanningTest, LogitsReadAfterTheGradientKeepTheirBytes) {
  // A view of the logits is read after the gradient, and a function
  // argument's logits belong to the caller: both gradients get a block.
  ParsedPlan parsed(R"mlir(
    func.func @step(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %t: tensor<4xi64>, %s: tensor<f32>, %given: tensor<4x16xf32>)
        -> (tensor<4x16xf32>, tensor<4x16xf32>) {
      %logits = tess.linear %x, %w {transpose_weight} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
      %view = tess.reshape %logits : (tensor<4x16xf32>) -> tensor<64xf32>
      %d = tess.cross_entropy_grad %logits, %t, %s : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
      %e = tess.exp %view : tensor<64xf32>
      %back = tess.reshape %e : (tensor<64xf32>) -> tensor<4x16xf32>
      %sum = tess.add %d, %back : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
      %d2 = tess.cross_entropy_grad %given, %t, %s : (tensor<4x16xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x16xf32>
      %sum2 = tess.add %d2, %given : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
      return %sum, %sum2 : tensor<4x16xf32>, tensor<4x16xf32>
    })mlir");
  parsed.function.walk([&](tessera::tess::CrossEntropyGradOp grad) {
    EXPECT_EQ(parsed.plan.storage.lookup(grad.getResult()).kind,
              StorageKind::Arena);
  });
}

TEST(ArenaPlanningTest, ARotationOfADeadInputRunsInPlace) {
  // The packed q/k/v is read by its rotation only: the rotated tensor takes
  // its bytes (the value heads stay put). A rotation whose input is read
  // again (the second one's, by the add) gets a block of its own.
  ParsedPlan parsed(R"mlir(
    func.func @step(%x: tensor<2x4x6x8xf32>, %w: tensor<48x48xf32>, %cos: tensor<1x4x1x8xf32>, %sin: tensor<1x4x1x8xf32>)
        -> tensor<2x4x6x8xf32> {
      %flat = tess.reshape %x : (tensor<2x4x6x8xf32>) -> tensor<8x48xf32>
      %qkv = tess.linear %flat, %w {transpose_weight} : (tensor<8x48xf32>, tensor<48x48xf32>) -> tensor<8x48xf32>
      %heads = tess.reshape %qkv : (tensor<8x48xf32>) -> tensor<2x4x6x8xf32>
      %r = tess.rotary %heads, %cos, %sin {rotated_heads = 4 : i64} : (tensor<2x4x6x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>) -> tensor<2x4x6x8xf32>
      %e = tess.exp %r : tensor<2x4x6x8xf32>
      %r2 = tess.rotary %e, %cos, %sin : (tensor<2x4x6x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>) -> tensor<2x4x6x8xf32>
      %sum = tess.add %r2, %e : (tensor<2x4x6x8xf32>, tensor<2x4x6x8xf32>) -> tensor<2x4x6x8xf32>
      %t = tess.exp %sum : tensor<2x4x6x8xf32>
      return %t : tensor<2x4x6x8xf32>
    })mlir");
  std::vector<mlir::Value> rotations;
  parsed.function.walk([&](tessera::tess::RotaryOp rotary) {
    rotations.push_back(rotary.getResult());
  });
  ASSERT_EQ(rotations.size(), 2u);
  EXPECT_EQ(parsed.plan.storage.lookup(rotations[0]).kind,
            StorageKind::Alias);
  EXPECT_EQ(parsed.plan.resolveAlias(rotations[0]),
            parsed.resultOf("tess.linear"));
  EXPECT_EQ(parsed.plan.storage.lookup(rotations[1]).kind,
            StorageKind::Arena);
}

} // namespace

TEST(ArenaPlanningTest, AReturnedReshapesSourceIsWrittenIntoItsOutput) {
  // A pipeline chunk's forward returns its saved activations as the
  // [tokens, features] rows the backward's GEMMs read: %norm is written
  // into the second output (the reshape's), read there by the linear, and
  // takes no arena block until the return. %h, returned itself and by a
  // reshape, keeps its own output (the reshape is copied out); %y, viewed by
  // two returned reshapes, is written into the first one's.
  ParsedPlan parsed(R"mlir(
    func.func @chunk(%x: tensor<2x4x8xf32>, %w: tensor<8x8xf32>)
        -> (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<64xf32>) {
      %norm = tess.rms_norm %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
      %rows = tess.reshape %norm : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
      %h = tess.linear %norm, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
      %hrows = tess.reshape %h : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
      %y = tess.exp %h : tensor<2x4x8xf32>
      %yrows = tess.reshape %y : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
      %yflat = tess.reshape %yrows : (tensor<8x8xf32>) -> tensor<64xf32>
      return %h, %rows, %hrows, %yrows, %yflat : tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<64xf32>
    })mlir");
  auto storageOf = [&](llvm::StringRef name) {
    return parsed.plan.storage.lookup(parsed.resultOf(name));
  };
  EXPECT_EQ(storageOf("tess.rms_norm").kind, StorageKind::Output);
  EXPECT_EQ(storageOf("tess.rms_norm").index, 1u);
  EXPECT_EQ(storageOf("tess.linear").kind, StorageKind::Output);
  EXPECT_EQ(storageOf("tess.linear").index, 0u);
  EXPECT_EQ(storageOf("tess.exp").kind, StorageKind::Output);
  EXPECT_EQ(storageOf("tess.exp").index, 3u);
  EXPECT_TRUE(parsed.plan.buffers.empty());
}
