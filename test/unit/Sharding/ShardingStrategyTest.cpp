//===- ShardingStrategyTest.cpp - per-op strategy lists
//--------------------===//

#include "ShardingTestSupport.h"

#include "tessera/Sharding/ShardingStrategy.h"

using namespace tessera;
using namespace tessera::sharding;
using tessera::sharding::testing::ShardingTest;

namespace {

class ShardingStrategyTest : public ShardingTest {
protected:
  ShardingStrategyTest() : mesh(meshOf("1x4")) {
    strategyContext.mesh = &mesh;
    strategyContext.cluster = &cluster;
    strategyContext.axis = 1; // tp
  }

  /// "name: operand layouts -> result layouts" for each strategy of the
  /// first `opName` in `source`.
  std::vector<std::string> strategiesOf(const std::string &source,
                                        llvm::StringRef opName) {
    std::vector<std::string> lines;
    if (!parseFunction(source))
      return lines;
    for (const ShardingStrategy &strategy :
         enumerateStrategies(firstOp(opName), strategyContext)) {
      std::string line = strategy.name + ":";
      for (const TensorLayout &layout : strategy.operandLayouts)
        line += " " + layout.print(mesh);
      line += " ->";
      for (const TensorLayout &layout : strategy.resultLayouts)
        line += " " + layout.print(mesh);
      lines.push_back(line);
    }
    return lines;
  }

  const ShardingStrategy *find(const std::vector<ShardingStrategy> &list,
                               llvm::StringRef name) {
    for (const ShardingStrategy &strategy : list)
      if (strategy.name == name)
        return &strategy;
    ADD_FAILURE() << "no strategy " << name.str();
    return nullptr;
  }

  cost::DeviceMesh mesh;
  StrategyContext strategyContext;
};

const char *kLinear = R"(
  func.func @f(%x: tensor<8x16x64xbf16>, %w: tensor<64x256xbf16>, %b: tensor<256xbf16>) -> tensor<8x16x256xbf16> {
    %y = tess.linear %x, %w, %b : (tensor<8x16x64xbf16>, tensor<64x256xbf16>, tensor<256xbf16>) -> tensor<8x16x256xbf16>
    return %y : tensor<8x16x256xbf16>
  })";

TEST_F(ShardingStrategyTest, LinearHasTheMegatronAndDataParallelSplits) {
  EXPECT_EQ(strategiesOf(kLinear, "tess.linear"),
            (std::vector<std::string>{
                "replicated: [-, -, -] [-, -] [-] -> [-, -, -]",
                "column-parallel: [-, -, -] [-, tp] [tp] -> [-, -, tp]",
                "row-parallel: [-, -, tp] [tp, -] [-] partial(tp) -> [-, -, -] "
                "partial(tp)",
                "data-parallel: [tp, -, -] [-, -] [-] -> [tp, -, -]",
            }));

  // nn.Linear's [out, in] weight is split on its other dim.
  std::vector<std::string> lines = strategiesOf(R"(
    func.func @f(%x: tensor<32x64xf32>, %w: tensor<256x64xf32>) -> tensor<32x256xf32> {
      %y = tess.linear %x, %w {transpose_weight} : (tensor<32x64xf32>, tensor<256x64xf32>) -> tensor<32x256xf32>
      return %y : tensor<32x256xf32>
    })",
                                                "tess.linear");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1], "column-parallel: [-, -] [tp, -] -> [-, tp]");
  EXPECT_EQ(lines[2], "row-parallel: [-, tp] [-, tp] -> [-, -] partial(tp)");
}

TEST_F(ShardingStrategyTest, SplitStrategiesDivideTheComputeTime) {
  ASSERT_TRUE(parseFunction(kLinear));
  std::vector<ShardingStrategy> list =
      enumerateStrategies(firstOp("tess.linear"), strategyContext);
  const ShardingStrategy *replicated = find(list, "replicated");
  const ShardingStrategy *column = find(list, "column-parallel");
  ASSERT_TRUE(replicated && column);
  EXPECT_GT(replicated->computeTime, 0);
  EXPECT_DOUBLE_EQ(column->computeTime, replicated->computeTime / 4);
  EXPECT_DOUBLE_EQ(column->communicationTime, 0);
}

TEST_F(ShardingStrategyTest, TrainingAllReducesPartialGradients) {
  ASSERT_TRUE(parseFunction(kLinear));
  mlir::Operation *linear = firstOp("tess.linear");
  // Pretend the weight is trainable: it needs a gradient.
  llvm::DenseSet<mlir::Value> needsGradient;
  needsGradient.insert(linear->getOperand(1));
  strategyContext.training = true;
  strategyContext.needsGradient = &needsGradient;
  std::vector<ShardingStrategy> list =
      enumerateStrategies(linear, strategyContext);

  // Data parallelism reads the whole weight on every device with a quarter
  // of the batch: each holds a partial weight gradient, all-reduced.
  const ShardingStrategy *data = find(list, "data-parallel");
  const ShardingStrategy *replicated = find(list, "replicated");
  const ShardingStrategy *column = find(list, "column-parallel");
  ASSERT_TRUE(data && replicated && column);
  EXPECT_DOUBLE_EQ(data->communicationTime,
                   cost::axisCollectiveTime(mesh, cluster, 1,
                                            cost::Collective::AllReduce,
                                            64.0 * 256 * 2));
  // Replicated work has whole gradients; column-parallel splits the weight
  // (and the input needs no gradient here).
  EXPECT_DOUBLE_EQ(replicated->communicationTime, 0);
  EXPECT_DOUBLE_EQ(column->communicationTime, 0);
  // Forward plus backward: three forwards.
  strategyContext.training = false;
  EXPECT_DOUBLE_EQ(
      replicated->computeTime,
      3 * enumerateStrategies(linear, strategyContext)[0].computeTime);
}

TEST_F(ShardingStrategyTest, ElementwiseOpsFollowTheirResultDims) {
  // The bias [256] broadcasts along dims 0 and 1: it stays whole there.
  EXPECT_EQ(strategiesOf(R"(
    func.func @f(%x: tensor<8x256xf32>, %b: tensor<256xf32>) -> tensor<8x256xf32> {
      %y = tess.add %x, %b : (tensor<8x256xf32>, tensor<256xf32>) -> tensor<8x256xf32>
      return %y : tensor<8x256xf32>
    })",
                         "tess.add"),
            (std::vector<std::string>{
                "replicated: [-, -] [-] -> [-, -]",
                "split dim 0: [tp, -] [-] -> [tp, -]",
                "split dim 1: [-, tp] [tp] -> [-, tp]",
            }));
  // A dim that does not divide by 4 cannot be split.
  EXPECT_EQ(strategiesOf(R"(
    func.func @f(%x: tensor<6x8xf32>) -> tensor<6x8xf32> {
      %y = tess.gelu %x : tensor<6x8xf32>
      return %y : tensor<6x8xf32>
    })",
                         "tess.gelu"),
            (std::vector<std::string>{
                "replicated: [-, -] -> [-, -]",
                "split dim 1: [-, tp] -> [-, tp]",
            }));
}

TEST_F(ShardingStrategyTest, NormsSplitOnlyDimsTheyDoNotNormalize) {
  EXPECT_EQ(strategiesOf(R"(
    func.func @f(%x: tensor<4x8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<4x8x64xf32> {
      %y = tess.layer_norm %x scale %g bias %b {epsilon = 1.0e-05 : f64} : (tensor<4x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x8x64xf32>
      return %y : tensor<4x8x64xf32>
    })",
                         "tess.layer_norm"),
            (std::vector<std::string>{
                "replicated: [-, -, -] [-] [-] -> [-, -, -]",
                "split dim 0: [tp, -, -] [-] [-] -> [tp, -, -]",
                "split dim 1: [-, tp, -] [-] [-] -> [-, tp, -]",
            }));
  EXPECT_EQ(strategiesOf(R"(
    func.func @f(%x: tensor<4x8x64xf32>, %g: tensor<8x64xf32>) -> tensor<4x8x64xf32> {
      %y = tess.rms_norm %x scale %g {axis = 1 : i64} : (tensor<4x8x64xf32>, tensor<8x64xf32>) -> tensor<4x8x64xf32>
      return %y : tensor<4x8x64xf32>
    })",
                         "tess.rms_norm"),
            (std::vector<std::string>{
                "replicated: [-, -, -] [-, -] -> [-, -, -]",
                "split dim 0: [tp, -, -] [-, -] -> [tp, -, -]",
            }));
}

TEST_F(ShardingStrategyTest, AttentionSplitsBatchOrWholeHeadGroups) {
  // 8 query heads over 4 key/value heads: both divide by 4.
  EXPECT_EQ(
      strategiesOf(R"(
    func.func @f(%q: tensor<4x8x16x32xf32>, %k: tensor<4x4x16x32xf32>, %v: tensor<4x4x16x32xf32>) -> tensor<4x8x16x32xf32> {
      %o = tess.attention %q, %k, %v {causal, scale = 0.17677669529663687 : f64} : (tensor<4x8x16x32xf32>, tensor<4x4x16x32xf32>, tensor<4x4x16x32xf32>) -> tensor<4x8x16x32xf32>
      return %o : tensor<4x8x16x32xf32>
    })",
                   "tess.attention"),
      (std::vector<std::string>{
          "replicated: [-, -, -, -] [-, -, -, -] [-, -, -, -] -> [-, -, -, -]",
          "split batch: [tp, -, -, -] [tp, -, -, -] [tp, -, -, -] -> [tp, -, "
          "-, -]",
          "split heads: [-, tp, -, -] [-, tp, -, -] [-, tp, -, -] -> [-, tp, "
          "-, -]",
      }));
  // 8 query heads over 2 key/value heads: a device would need half a
  // group's K/V; no head split.
  std::vector<std::string> lines = strategiesOf(R"(
    func.func @f(%q: tensor<4x8x16x32xf32>, %k: tensor<4x2x16x32xf32>, %v: tensor<4x2x16x32xf32>) -> tensor<4x8x16x32xf32> {
      %o = tess.attention %q, %k, %v {scale = 0.17677669529663687 : f64} : (tensor<4x8x16x32xf32>, tensor<4x2x16x32xf32>, tensor<4x2x16x32xf32>) -> tensor<4x8x16x32xf32>
      return %o : tensor<4x8x16x32xf32>
    })",
                                                "tess.attention");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].rfind("split batch", 0), 0u);
}

TEST_F(ShardingStrategyTest, EmbeddingCanBeVocabularyParallel) {
  EXPECT_EQ(strategiesOf(R"(
    func.func @f(%t: tensor<512x64xf32>, %ids: tensor<4x32xi64>) -> tensor<4x32x64xf32> {
      %e = tess.embedding %t, %ids : (tensor<512x64xf32>, tensor<4x32xi64>) -> tensor<4x32x64xf32>
      return %e : tensor<4x32x64xf32>
    })",
                         "tess.embedding"),
            (std::vector<std::string>{
                "replicated: [-, -] [-, -] -> [-, -, -]",
                "vocabulary-parallel: [tp, -] [-, -] -> [-, -, -] partial(tp)",
                "split hidden: [-, tp] [-, -] -> [-, -, tp]",
                "split tokens: [-, -] [tp, -] -> [tp, -, -]",
            }));
}

TEST_F(ShardingStrategyTest, ReshapeAndTransposeMapSplitDims) {
  // [4, 8, 64] -> [4, 512]: dims 0 and 1 start at the same flat offsets as
  // result dims 0 and 1; dim 2 (offset 32) has no result dim at offset 32.
  EXPECT_EQ(strategiesOf(R"(
    func.func @f(%x: tensor<4x8x64xf32>) -> tensor<4x512xf32> {
      %y = tess.reshape %x : (tensor<4x8x64xf32>) -> tensor<4x512xf32>
      return %y : tensor<4x512xf32>
    })",
                         "tess.reshape"),
            (std::vector<std::string>{
                "replicated: [-, -, -] -> [-, -]",
                "split dim 0 -> 0: [tp, -, -] -> [tp, -]",
                "split dim 1 -> 1: [-, tp, -] -> [-, tp]",
                "partial sum: [-, -, -] partial(tp) -> [-, -] partial(tp)",
            }));
  EXPECT_EQ(strategiesOf(R"(
    func.func @f(%x: tensor<4x8x12xf32>) -> tensor<4x12x8xf32> {
      %y = tess.transpose %x {permutation = array<i64: 0, 2, 1>} : (tensor<4x8x12xf32>) -> tensor<4x12x8xf32>
      return %y : tensor<4x12x8xf32>
    })",
                         "tess.transpose"),
            (std::vector<std::string>{
                "replicated: [-, -, -] -> [-, -, -]",
                "split dim 0 -> 0: [tp, -, -] -> [tp, -, -]",
                "split dim 2 -> 1: [-, -, tp] -> [-, tp, -]",
                "split dim 1 -> 2: [-, tp, -] -> [-, -, tp]",
                "partial sum: [-, -, -] partial(tp) -> [-, -, -] partial(tp)",
            }));
}

TEST_F(ShardingStrategyTest, MatmulSplitsRowsColumnsContractionOrBatch) {
  EXPECT_EQ(
      strategiesOf(R"(
    func.func @f(%q: tensor<4x8x16x32xf32>, %k: tensor<4x8x16x32xf32>) -> tensor<4x8x16x16xf32> {
      %s = tess.matmul %q, %k {transpose_rhs} : (tensor<4x8x16x32xf32>, tensor<4x8x16x32xf32>) -> tensor<4x8x16x16xf32>
      return %s : tensor<4x8x16x16xf32>
    })",
                   "tess.matmul"),
      (std::vector<std::string>{
          "replicated: [-, -, -, -] [-, -, -, -] -> [-, -, -, -]",
          "split M: [-, -, tp, -] [-, -, -, -] -> [-, -, tp, -]",
          "split N: [-, -, -, -] [-, -, tp, -] -> [-, -, -, tp]",
          "split K: [-, -, -, tp] [-, -, -, tp] -> [-, -, -, -] partial(tp)",
          "split batch dim 0: [tp, -, -, -] [tp, -, -, -] -> [tp, -, -, -]",
          "split batch dim 1: [-, tp, -, -] [-, tp, -, -] -> [-, tp, -, -]",
      }));
}

// A dropout with a rate splits its dim 0 only: a rank's rows are one run of
// the mask's stream (stream_axis); any other split would change the mask.
TEST_F(ShardingStrategyTest, RandomOpsSplitOnlyTheirStreamedDims) {
  EXPECT_EQ(strategiesOf(R"(
    func.func @f(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
      %y = tess.dropout %x {rate = 0.1 : f64, seed = 3 : i64} : tensor<8x16xf32>
      return %y : tensor<8x16xf32>
    })",
                         "tess.dropout"),
            (std::vector<std::string>{"replicated: [-, -] -> [-, -]",
                                      "split dim 0: [tp, -] -> [tp, -]"}));
  // Attention with dropout: the batch and the heads (both streamed: the
  // dropout index's fixed head stride puts a block of either at a fixed
  // offset of the stream).
  EXPECT_EQ(strategiesOf(R"(
    func.func @f(%q: tensor<4x8x16x16xf32>) -> tensor<4x8x16x16xf32> {
      %o = tess.attention %q, %q, %q {causal, dropout = 0.1 : f64, scale = 0.25 : f64, seed = 1 : i64} : (tensor<4x8x16x16xf32>, tensor<4x8x16x16xf32>, tensor<4x8x16x16xf32>) -> tensor<4x8x16x16xf32>
      return %o : tensor<4x8x16x16xf32>
    })",
                         "tess.attention"),
            (std::vector<std::string>{
                "replicated: [-, -, -, -] [-, -, -, -] [-, -, -, -] -> "
                "[-, -, -, -]",
                "split batch: [tp, -, -, -] [tp, -, -, -] [tp, -, -, -] -> "
                "[tp, -, -, -]",
                "split heads: [-, tp, -, -] [-, tp, -, -] [-, tp, -, -] -> "
                "[-, tp, -, -]"}));
}

} // namespace
