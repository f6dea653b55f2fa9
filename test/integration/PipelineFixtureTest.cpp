//===- PipelineFixtureTest.cpp - pipelined steps against PyTorch ----------===//
//
// tess-split-pipeline-stages on the fp32 training step of gpt2-tiny and
// bert-tiny (2 layers each: embedding, 2 layers, head = 4 units), run by
// the schedule executor (PipelineExecutor.h) as one thread rank per stage
// device, activations and their gradients sent with comm.h's send/recv
// over the in-process backend, must give PyTorch's first step: the loss
// within 1e-5 relative on every rank and every gradient norm within 1e-5
// relative (1e-8 absolute for gradients that are zero in exact arithmetic).
//
// 4 micro-batches of one row each: the step is built for a batch of 1 and
// micro-batch k runs the fixture's row k mod 2, so the global batch is the
// fixture's two rows twice. Every row has the same number of counted
// targets, so the mean of the micro-batch means (what the executor's loss
// scale of 1/4 computes) is the fixture's mean loss, and the accumulated
// gradients are the fixture's.
//
// Stages 2 (embedding + layer 0 | layer 1 + head) and 4 (one unit each)
// with GPipe and 1F1B; interleaved 1F1B with 2 devices x 2 virtual stages
// (4 chunks, one unit each; 4 devices x 2 would need 8 units, more than
// any test model has); and pipeline x data parallel: 2 stages x 2 replicas
// (mesh 2x2, pipeline axis first), each replica running 2 micro-batches.
// Also llama-tiny (1F1B, interleaved) and the generated 3-layer GPT-2
// (5 units over 4 stages, and 2 x 2 interleaved).
//
//===----------------------------------------------------------------------===//

#include "FixtureSupport.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Execution/PipelineExecutor.h"
#include "tessera/Transforms/Passes.h"
#include "tessera/runtime/thread_comm.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

using namespace tessera;
using execution::HostTensorBuffer;

namespace {

struct PipelineCase {
  /// The fixture: test/fixtures/<model>.reference.json, or
  /// test/models/<file stem>.reference.json for a generated model.
  std::string model, file, loss;
  int64_t sequence;
  bool shiftTargets;
  int64_t stages = 2;
  std::string schedule = "1f1b";
  int64_t replicas = 1;
  bool generated = false;
};

std::string describe(const PipelineCase &test) {
  std::string text = test.model + " " + std::to_string(test.stages) +
                     " stages " + test.schedule;
  if (test.replicas > 1)
    text += " x dp" + std::to_string(test.replicas);
  return text;
}

void PrintTo(const PipelineCase &test, std::ostream *os) {
  *os << describe(test);
}

constexpr int64_t kMicroBatches = 4;

/// Row `row` of the fixture's ids from `firstColumn`, as a batch of one.
HostTensorBuffer row(const llvm::json::Object &fixture, int64_t firstColumn,
                     int64_t sequence, int64_t row) {
  HostTensorBuffer rows =
      fixtures::fixtureTokens(fixture, firstColumn, sequence);
  std::vector<int64_t> values;
  for (int64_t i = 0; i < sequence; ++i)
    values.push_back(rows.getInt(row * sequence + i));
  return HostTensorBuffer::fromInts({1, sequence}, values);
}

void runPipelined(const PipelineCase &test) {
  SCOPED_TRACE(describe(test));
  llvm::json::Object fixture =
      test.generated
          ? fixtures::loadFixtureFile(fixtures::testDirectory() + "/models/" +
                                      llvm::StringRef(test.file)
                                          .rsplit(".raw.")
                                          .first.str() +
                                      ".reference.json")
          : fixtures::loadFixture(test.model);
  mlir::MLIRContext context;
  auto module = fixtures::importWithWeights(
      context, test.file, {{"batch", 1}, {"seq", test.sequence}});
  ASSERT_TRUE(module);
  std::map<std::string, HostTensorBuffer> weights;
  module->walk([&](tess::ParameterOp parameter) {
    weights[parameter.getName().str()] =
        std::move(*HostTensorBuffer::fromAttribute(*parameter.getValue()));
  });

  auto schedule = pipeline::parseSchedule(test.schedule);
  ASSERT_TRUE(static_cast<bool>(schedule)) << llvm::toString(schedule.takeError());
  int64_t virtualStages =
      schedule->kind == pipeline::ScheduleKind::Interleaved
          ? schedule->virtualStages
          : 1;
  registerTesseraPasses();
  mlir::PassManager build(&context);
  ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(
      "tess-build-training{loss=" + test.loss + " precision=fp32}", build)));
  build.addPass(mlir::createCanonicalizerPass());
  build.addPass(mlir::createCSEPass());
  ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(
      "tess-split-pipeline-stages{stages=" + std::to_string(test.stages) +
          " virtual=" + std::to_string(virtualStages) + "}",
      build)));
  ASSERT_TRUE(mlir::succeeded(build.run(*module)));

  int64_t microBatchesPerReplica = kMicroBatches / test.replicas;
  comm::ThreadWorld world({test.stages, test.replicas},
                          /*timeoutSeconds=*/60);
  std::vector<execution::PipelineRankResult> results(world.size());
  std::vector<std::vector<int32_t>> coordinates(world.size());
  std::vector<std::string> errors(world.size());
  comm::runThreadRanks(world, [&](const comm::RankComms &comms) {
    coordinates[comms.rank] = comms.coordinates;
    int64_t replica = comms.coordinates[1];
    execution::PipelineRankOptions options;
    options.schedule = *schedule;
    options.microBatches = microBatchesPerReplica;
    options.pipelineComm = comms.axes[0];
    options.dataParallelComm = test.replicas > 1 ? comms.axes[1] : nullptr;
    auto parameters =
        [&](llvm::StringRef name) -> llvm::Expected<HostTensorBuffer> {
      auto found = weights.find(name.str());
      if (found == weights.end())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "no weight " + name);
      return found->second;
    };
    auto inputs = [&](llvm::StringRef name,
                      int64_t microBatch) -> llvm::Expected<HostTensorBuffer> {
      int64_t fixtureRow = (replica * microBatchesPerReplica + microBatch) % 2;
      if (name == "input_ids")
        return row(fixture, 0, test.sequence, fixtureRow);
      if (name == "targets")
        return row(fixture, test.shiftTargets ? 1 : 0, test.sequence,
                   fixtureRow);
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "no input " + name);
    };
    auto out = execution::runPipelineRank(*module, options, parameters, inputs);
    if (!out) {
      errors[comms.rank] = llvm::toString(out.takeError());
      return 1;
    }
    results[comms.rank] = std::move(*out);
    return 0;
  });
  for (const std::string &error : errors)
    ASSERT_TRUE(error.empty()) << error;

  // The executor holds as many micro-batches' activations as the cost
  // model's in-flight count for the schedule says.
  for (size_t rank = 0; rank < results.size(); ++rank)
    EXPECT_DOUBLE_EQ(static_cast<double>(results[rank].peakInFlightChunks) /
                         virtualStages,
                     pipeline::inFlightMicroBatches(*schedule, test.stages,
                                                    coordinates[rank][0],
                                                    microBatchesPerReplica))
        << "in-flight activations on rank " << rank;

  double expectedLoss = *fixture.getNumber("loss");
  double lossError = 0, normError = 0;
  for (const execution::PipelineRankResult &rank : results) {
    lossError = std::max(lossError, std::abs(rank.loss - expectedLoss) /
                                        std::abs(expectedLoss));
    EXPECT_NEAR(rank.loss, expectedLoss, 1e-5 * std::abs(expectedLoss));
  }
  // Every gradient comes from exactly one stage device of each replica;
  // the replicas agree after the all-reduce, the first one is checked.
  std::map<std::string, HostTensorBuffer> gradients;
  for (size_t rank = 0; rank < results.size(); ++rank) {
    if (coordinates[rank][1] != 0)
      continue;
    for (auto &[name, gradient] : results[rank].gradients)
      EXPECT_TRUE(gradients.emplace(name, gradient).second)
          << "gradient of " << name << " from two stages";
  }
  const llvm::json::Object *parameters = fixture.getObject("params");
  ASSERT_TRUE(parameters);
  for (const auto &[pytorchName, entry] : *parameters) {
    const llvm::json::Object *info = entry.getAsObject();
    std::string name = fixtures::initializerOf(pytorchName, *info);
    auto gradient = gradients.find(name);
    ASSERT_NE(gradient, gradients.end()) << name;
    double expected = *info->getNumber("grad_norm");
    double actual = fixtures::norm(gradient->second);
    if (expected > 1e-6)
      normError = std::max(normError, std::abs(actual - expected) / expected);
    EXPECT_NEAR(actual, expected, std::max(1e-5 * expected, 1e-8))
        << "gradient norm of " << name;
  }
  std::printf("[pipeline] %-40s loss rel err %.2e, grad-norm rel err %.2e\n",
              describe(test).c_str(), lossError, normError);
}

class PipelineFixtureTest : public testing::TestWithParam<PipelineCase> {};

TEST_P(PipelineFixtureTest, FirstStepMatchesPyTorch) {
  runPipelined(GetParam());
}

std::vector<PipelineCase> cases() {
  const PipelineCase gpt2{"gpt2-tiny", "gpt2-tiny.raw.dyn.onnx", "causal-lm",
                          31, true};
  const PipelineCase bert{"bert-tiny", "bert-tiny.raw.dyn.onnx", "mlm", 32,
                          false};
  const PipelineCase llama{"llama-tiny", "llama-tiny.raw.dyn.onnx",
                           "causal-lm", 31, true};
  PipelineCase gpt2Layers3{"gpt2-layers3", "generated/gpt2-layers3.raw.dyn.onnx",
                           "causal-lm", 31, true};
  gpt2Layers3.generated = true;
  std::vector<PipelineCase> all;
  // Llama: rotary tables as buffers every stage reads, RMSNorm, SwiGLU, an
  // untied head.
  for (const char *schedule : {"1f1b", "interleaved:2"}) {
    PipelineCase test = llama;
    test.schedule = schedule;
    all.push_back(test);
  }
  // Three layers: 5 units over 4 stages (2 | 1 | 1 | 1), and over 2 x 2.
  for (const char *schedule : {"1f1b", "interleaved:2"}) {
    PipelineCase test = gpt2Layers3;
    test.stages = std::string(schedule) == "1f1b" ? 4 : 2;
    test.schedule = schedule;
    all.push_back(test);
  }
  for (PipelineCase test : {gpt2, bert}) {
    for (int64_t stages : {2, 4})
      for (const char *schedule : {"gpipe", "1f1b"}) {
        test.stages = stages;
        test.schedule = schedule;
        all.push_back(test);
      }
    test.stages = 2;
    test.schedule = "interleaved:2";
    all.push_back(test);
    test.schedule = "1f1b";
    test.replicas = 2;
    all.push_back(test);
    test.replicas = 1;
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineFixtureTest, testing::ValuesIn(cases()),
    fixtures::DescribedTestName());

} // namespace
