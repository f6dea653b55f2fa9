//===- StreamedRandomOpsTest.cpp - a rank's block of a split random op ---===//
//
// tess.dropout, tess.attention and tess.attention_grad with dropout, split
// over a mesh axis along their outermost dim (LabelKind::Streamed), carry
// `stream_axis`; an attention split over its heads carries
// `head_stream_axis`. The interpreter then draws the rank's block of the
// stream, from the block's first element on. Each rank's results on its
// block must be the unsplit op's bit for bit, for every coordinate, so a
// partitioned step drops exactly what the single-device step drops.
//
//===----------------------------------------------------------------------===//

#include "Tess/IR/TessOps.h"
#include "tessera/Execution/Interpreter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir;
using namespace tessera;
using execution::HostTensorBuffer;

namespace {

// @whole on the batch of 4, @block on a rank's 2 rows of it (mesh dp = 2).
constexpr const char *kModule = R"mlir(
module attributes {tess.mesh = #tess.mesh<dp = 2>} {
  func.func @whole(%x: tensor<4x6x5xf32>, %q: tensor<4x2x8x4xf32>, %dy: tensor<4x2x8x4xf32>)
      -> (tensor<4x6x5xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>) {
    %y = tess.dropout %x {rate = 3.000000e-01 : f64, seed = 5 : i64} : tensor<4x6x5xf32>
    %o = tess.attention %q, %q, %q {causal, dropout = 2.500000e-01 : f64, scale = 5.000000e-01 : f64, seed = 6 : i64} : (tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>) -> tensor<4x2x8x4xf32>
    %dq, %dk, %dv = tess.attention_grad %q, %q, %q, %dy {causal, dropout = 2.500000e-01 : f64, scale = 5.000000e-01 : f64, seed = 6 : i64} : (tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>) -> (tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>)
    return %y, %o, %dq : tensor<4x6x5xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>
  }
  func.func @block(%x: tensor<2x6x5xf32>, %q: tensor<2x2x8x4xf32>, %dy: tensor<2x2x8x4xf32>)
      -> (tensor<2x6x5xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) {
    %y = tess.dropout %x {rate = 3.000000e-01 : f64, seed = 5 : i64, stream_axis = "dp"} : tensor<2x6x5xf32>
    %o = tess.attention %q, %q, %q {causal, dropout = 2.500000e-01 : f64, scale = 5.000000e-01 : f64, seed = 6 : i64, stream_axis = "dp"} : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32>
    %dq, %dk, %dv = tess.attention_grad %q, %q, %q, %dy {causal, dropout = 2.500000e-01 : f64, scale = 5.000000e-01 : f64, seed = 6 : i64, stream_axis = "dp"} : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>)
    return %y, %o, %dq : tensor<2x6x5xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>
  }
}
)mlir";

// The attention of @whole split over batch (dp) and heads (tp): @block holds
// 2 batch rows and 1 of the 2 heads.
constexpr const char *kHeadsModule = R"mlir(
module attributes {tess.mesh = #tess.mesh<dp = 2, tp = 2>} {
  func.func @whole(%q: tensor<4x2x8x4xf32>, %dy: tensor<4x2x8x4xf32>)
      -> (tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>) {
    %o = tess.attention %q, %q, %q {causal, dropout = 2.500000e-01 : f64, scale = 5.000000e-01 : f64, seed = 6 : i64} : (tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>) -> tensor<4x2x8x4xf32>
    %dq, %dk, %dv = tess.attention_grad %q, %q, %q, %dy {causal, dropout = 2.500000e-01 : f64, scale = 5.000000e-01 : f64, seed = 6 : i64} : (tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>) -> (tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>)
    return %o, %dq, %dk, %dv : tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>, tensor<4x2x8x4xf32>
  }
  func.func @block(%q: tensor<2x1x8x4xf32>, %dy: tensor<2x1x8x4xf32>)
      -> (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) {
    %o = tess.attention %q, %q, %q {causal, dropout = 2.500000e-01 : f64, head_stream_axis = "tp", scale = 5.000000e-01 : f64, seed = 6 : i64, stream_axis = "dp"} : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
    %dq, %dk, %dv = tess.attention_grad %q, %q, %q, %dy {causal, dropout = 2.500000e-01 : f64, head_stream_axis = "tp", scale = 5.000000e-01 : f64, seed = 6 : i64, stream_axis = "dp"} : (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>) -> (tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>)
    return %o, %dq, %dk, %dv : tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>
  }
}
)mlir";

std::vector<float> randomValues(int64_t count, std::mt19937 &random) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float &value : values)
    value = uniform(random);
  return values;
}

/// Rows [first, first + count) of a row-major tensor of `rowElements`.
std::vector<float> rows(const std::vector<float> &values, int64_t rowElements,
                        int64_t first, int64_t count) {
  return std::vector<float>(values.begin() + first * rowElements,
                            values.begin() + (first + count) * rowElements);
}

class StreamedRandomOpsTest : public ::testing::Test {
protected:
  void SetUp() override {
    context.loadDialect<tess::TessDialect, func::FuncDialect>();
    module = parseSourceString<ModuleOp>(kModule, &context);
    ASSERT_TRUE(module);
    std::mt19937 random(7);
    x = randomValues(4 * 6 * 5, random);
    q = randomValues(4 * 2 * 8 * 4, random);
    dy = randomValues(4 * 2 * 8 * 4, random);
  }

  std::vector<HostTensorBuffer> arguments(int64_t first, int64_t batch) {
    std::vector<HostTensorBuffer> buffers;
    buffers.push_back(
        HostTensorBuffer::fromFloats({batch, 6, 5}, rows(x, 30, first, batch)));
    buffers.push_back(HostTensorBuffer::fromFloats(
        {batch, 2, 8, 4}, rows(q, 64, first, batch)));
    buffers.push_back(HostTensorBuffer::fromFloats(
        {batch, 2, 8, 4}, rows(dy, 64, first, batch)));
    return buffers;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::vector<float> x, q, dy;
};

// Tests that each coordinate's block of every random op equals the unsplit
// op's rows, bit for bit.
TEST_F(StreamedRandomOpsTest, EachRanksBlockIsTheWholeOpsRows) {
  execution::Interpreter single;
  auto whole = single.run(module->lookupSymbol<func::FuncOp>("whole"),
                          arguments(0, 4));
  ASSERT_TRUE(static_cast<bool>(whole)) << llvm::toString(whole.takeError());
  const int64_t rowElements[] = {30, 64, 64};
  for (int32_t coordinate : {0, 1}) {
    SCOPED_TRACE("coordinate " + std::to_string(coordinate));
    execution::Interpreter rank;
    rank.setMeshRank({{"dp"}, {nullptr}, {coordinate}});
    auto block = rank.run(module->lookupSymbol<func::FuncOp>("block"),
                          arguments(2 * coordinate, 2));
    ASSERT_TRUE(static_cast<bool>(block)) << llvm::toString(block.takeError());
    for (size_t result = 0; result < 3; ++result) {
      std::vector<float> expected = rows((*whole)[result].toFloats(),
                                         rowElements[result], 2 * coordinate, 2);
      EXPECT_EQ((*block)[result].toFloats(), expected) << "result " << result;
    }
  }
  // The dropout drew something: some of the whole tensor's elements are 0.
  std::vector<float> dropped = (*whole)[0].toFloats();
  EXPECT_GT(std::count(dropped.begin(), dropped.end(), 0.0f), 10);
}

/// Batch rows [firstRow, firstRow + rowCount) and head `head` of a
/// [4, 2, 8, 4] tensor.
std::vector<float> headBlock(const std::vector<float> &values,
                             int64_t firstRow, int64_t rowCount,
                             int64_t head) {
  std::vector<float> block;
  for (int64_t b = firstRow; b < firstRow + rowCount; ++b) {
    auto start = values.begin() + (b * 2 + head) * 32;
    block.insert(block.end(), start, start + 32);
  }
  return block;
}

// Tests that each (dp, tp) coordinate's block of an attention split over
// batch and heads, forward and backward, equals the unsplit op's rows and
// heads bit for bit.
TEST_F(StreamedRandomOpsTest, EachRanksHeadsAreTheWholeOpsHeads) {
  OwningOpRef<ModuleOp> heads =
      parseSourceString<ModuleOp>(kHeadsModule, &context);
  ASSERT_TRUE(heads);
  execution::Interpreter single;
  auto whole = single.run(
      heads->lookupSymbol<func::FuncOp>("whole"),
      {HostTensorBuffer::fromFloats({4, 2, 8, 4}, q),
       HostTensorBuffer::fromFloats({4, 2, 8, 4}, dy)});
  ASSERT_TRUE(static_cast<bool>(whole)) << llvm::toString(whole.takeError());
  for (int32_t dp : {0, 1})
    for (int32_t tp : {0, 1}) {
      SCOPED_TRACE("coordinate (" + std::to_string(dp) + ", " +
                   std::to_string(tp) + ")");
      execution::Interpreter rank;
      rank.setMeshRank({{"dp", "tp"}, {nullptr, nullptr}, {dp, tp}});
      auto block = rank.run(
          heads->lookupSymbol<func::FuncOp>("block"),
          {HostTensorBuffer::fromFloats({2, 1, 8, 4}, headBlock(q, 2 * dp, 2, tp)),
           HostTensorBuffer::fromFloats({2, 1, 8, 4},
                                        headBlock(dy, 2 * dp, 2, tp))});
      ASSERT_TRUE(static_cast<bool>(block))
          << llvm::toString(block.takeError());
      for (size_t result = 0; result < 4; ++result)
        EXPECT_EQ((*block)[result].toFloats(),
                  headBlock((*whole)[result].toFloats(), 2 * dp, 2, tp))
            << "result " << result;
    }
}

// Tests that a block run without the mesh rank it names is an error that
// names the op, not a silently different mask.
TEST_F(StreamedRandomOpsTest, NeedsTheMeshRank) {
  execution::Interpreter noRank;
  auto block = noRank.run(module->lookupSymbol<func::FuncOp>("block"),
                          arguments(0, 2));
  ASSERT_FALSE(static_cast<bool>(block));
  std::string message = llvm::toString(block.takeError());
  EXPECT_NE(message.find("tess.dropout"), std::string::npos) << message;
  EXPECT_NE(message.find("a stream_axis needs a mesh rank"), std::string::npos)
      << message;
}

} // namespace
