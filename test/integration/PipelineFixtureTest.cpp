//===- PipelineFixtureTest.cpp - pipelined steps against PyTorch ----------===//
//
// tess-split-pipeline-stages on the fp32 training step of gpt2-tiny and
// bert-tiny (2 layers each: embedding, 2 layers, head = 4 units), run by
// the schedule executor (PipelineExecutor.h) as one thread rank per stage
// device, activations and their gradients sent with comm.h's send/recv
// over the in-process backend, must give PyTorch's first step: the loss
// within 1e-5 relative on every rank and every gradient norm within 1e-5
// relative (1e-8 absolute for gradients that are zero in exact arithmetic).
// Then the executor's AdamW step: every rank's global gradient norm is the
// fixture's within 1e-5 relative, and the updated parameters match the
// fixture (FixtureChecks.h's checkUpdatedParameters), the same on every
// device that reads them (a tied embedding's head stage gets its update
// from the embedding's) and on every data-parallel replica. Two cases (4
// stages; 2 stages x tp2) clip to half the global norm: every stage's first
// moments then hold the gradients scaled by the same global factor.
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
// any test model has); pipeline x data parallel: 2 stages x 2 replicas
// (mesh 2x2, pipeline axis first), each replica running 2 micro-batches;
// and pipeline x tensor parallel: the step partitioned for Megatron TP over
// 2 ranks (tess-annotate-sharding, tess-partition-spmd) and then split into
// 2 stages, run on 2 x 2 ranks (pipeline axis first), each stage's
// collectives over its tp pair, parameters and gradients as tp blocks
// (gathered for the checks).
// Also llama-tiny (1F1B, interleaved) and the generated 3-layer GPT-2
// (5 units over 4 stages, and 2 x 2 interleaved).
//
//===----------------------------------------------------------------------===//

#include "FixtureChecks.h"
#include "FixtureSupport.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Execution/PipelineExecutor.h"
#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/Passes.h"
#include "tessera/runtime/thread_comm.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

using namespace tessera;
using execution::HostTensorBuffer;
using sharding::TensorLayout;

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
  /// Clip the gradients to this fraction of the fixture's global norm
  /// (0: no clipping, the fixture's step).
  double clipFraction = 0;
  /// Megatron tensor parallelism inside every stage over this many ranks
  /// (tess-annotate-sharding's tp, partitioned before the split).
  int64_t tensorParallel = 1;
};

std::string describe(const PipelineCase &test) {
  std::string text = test.model + " " + std::to_string(test.stages) +
                     " stages " + test.schedule;
  if (test.replicas > 1)
    text += " x dp" + std::to_string(test.replicas);
  if (test.tensorParallel > 1)
    text += " x tp" + std::to_string(test.tensorParallel);
  if (test.clipFraction > 0)
    text += " clipped";
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
      fixtures::trainingPipeline(fixture, test.loss), build)));
  build.addPass(mlir::createCanonicalizerPass());
  build.addPass(mlir::createCSEPass());
  if (test.tensorParallel > 1) {
    ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(
        "tess-annotate-sharding{mesh=" + std::to_string(test.tensorParallel) +
            " axes=tp strategy=tp},tess-partition-spmd",
        build)));
  }
  ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(
      "tess-split-pipeline-stages{stages=" + std::to_string(test.stages) +
          " virtual=" + std::to_string(virtualStages) + "}",
      build)));
  ASSERT_TRUE(mlir::succeeded(build.run(*module)));

  // The stages run the partitioned step: Megatron's all-reduces over tp
  // are in their functions.
  int tensorCollectives = 0;
  module->walk([&](tess::AllReduceOp reduce) {
    auto function = reduce->getParentOfType<mlir::func::FuncOp>();
    tensorCollectives +=
        function && function->hasAttr("tess.pipeline_stage") &&
        reduce.getAxis() == "tp";
  });
  EXPECT_EQ(tensorCollectives > 0, test.tensorParallel > 1);

  // With tensor parallelism: the blocks of every parameter and gradient
  // (as the partitioned @forward_backward records them) on the tp axis.
  cost::DeviceMesh tensorMesh;
  std::map<std::string, TensorLayout> parameterLayouts, gradientLayouts;
  // The parameters stored piece by piece (tess.pieces), by name.
  std::map<std::string, std::vector<int64_t>> parameterPieces;
  if (test.tensorParallel > 1) {
    auto meshAttr = (*module)->getAttrOfType<tess::MeshAttr>("tess.mesh");
    ASSERT_TRUE(meshAttr);
    tensorMesh = sharding::deviceMesh(meshAttr);
    auto step = module->lookupSymbol<mlir::func::FuncOp>("forward_backward");
    ASSERT_TRUE(step);
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (auto name =
              step.getArgAttrOfType<mlir::StringAttr>(i, "tess.parameter")) {
        auto layout = sharding::readLayout(step.getArgument(i), tensorMesh);
        ASSERT_TRUE(static_cast<bool>(layout))
            << llvm::toString(layout.takeError());
        parameterLayouts[name.str()] = *layout;
        parameterPieces[name.str()] = fixtures::piecesOf(step, i, false);
      }
    for (unsigned i = 0; i < step.getNumResults(); ++i)
      if (auto name =
              step.getResultAttrOfType<mlir::StringAttr>(i, "tess.gradient")) {
        auto layout = sharding::readResultLayout(step, i, tensorMesh);
        ASSERT_TRUE(static_cast<bool>(layout))
            << llvm::toString(layout.takeError());
        gradientLayouts[name.str()] = *layout;
      }
  }

  double expectedNorm = fixtures::globalGradientNorm(fixture);
  execution::PipelineOptimizerStep optimizer;
  optimizer.learningRate = fixtures::learningRate(fixture);
  optimizer.gradientClip = test.clipFraction * expectedNorm;

  int64_t microBatchesPerReplica = kMicroBatches / test.replicas;
  comm::ThreadWorld world(
      {test.stages, std::max(test.replicas, test.tensorParallel)},
      /*timeoutSeconds=*/60);
  std::vector<execution::PipelineRankResult> results(world.size());
  std::vector<std::vector<int32_t>> coordinates(world.size());
  std::vector<std::string> errors(world.size());
  comm::runThreadRanks(world, [&](const comm::RankComms &comms) {
    coordinates[comms.rank] = comms.coordinates;
    int64_t replica = test.replicas > 1 ? comms.coordinates[1] : 0;
    execution::PipelineRankOptions options;
    options.schedule = *schedule;
    options.microBatches = microBatchesPerReplica;
    options.pipelineComm = comms.axes[0];
    options.dataParallelComm = test.replicas > 1 ? comms.axes[1] : nullptr;
    options.optimizer = optimizer;
    if (test.tensorParallel > 1)
      options.meshRank = execution::MeshRank{
          {"tp"}, {comms.axes[1]}, {comms.coordinates[1]}};
    auto parameters =
        [&](llvm::StringRef name) -> llvm::Expected<HostTensorBuffer> {
      auto found = weights.find(name.str());
      if (found == weights.end())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "no weight " + name);
      auto layout = parameterLayouts.find(name.str());
      if (layout == parameterLayouts.end())
        return found->second;
      return fixtures::localBlock(found->second, layout->second,
                                  {comms.coordinates[1]}, tensorMesh,
                                  parameterPieces[name.str()]);
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
  // model's in-flight count for the schedule says. Interleaved, the cost
  // model prices the compiled driver's stash, a pool per chunk as deep as
  // that chunk's own peak; the executor's one pool holds Megatron's peak of
  // chunk forwards, 2 (p - s - 1) + (v - 1) p + 1, at most that.
  for (size_t rank = 0; rank < results.size(); ++rank) {
    double held = static_cast<double>(results[rank].peakInFlightChunks);
    double priced = pipeline::inFlightMicroBatches(
        *schedule, test.stages, coordinates[rank][0], microBatchesPerReplica);
    if (virtualStages == 1) {
      EXPECT_DOUBLE_EQ(held, priced) << "in-flight activations on rank " << rank;
      continue;
    }
    int64_t stage = coordinates[rank][0];
    double megatron = std::min<double>(
        2 * (test.stages - stage - 1) + (virtualStages - 1) * test.stages + 1,
        microBatchesPerReplica * virtualStages);
    EXPECT_DOUBLE_EQ(held, megatron) << "in-flight chunks on rank " << rank;
    EXPECT_LE(held / virtualStages, priced)
        << "in-flight activations on rank " << rank;
  }

  double expectedLoss = *fixture.getNumber("loss");
  double lossError = 0, normError = 0;
  for (const execution::PipelineRankResult &rank : results) {
    lossError = std::max(lossError, std::abs(rank.loss - expectedLoss) /
                                        std::abs(expectedLoss));
    EXPECT_NEAR(rank.loss, expectedLoss, 1e-5 * std::abs(expectedLoss));
  }
  // Every gradient comes from exactly one stage device of each replica;
  // the replicas agree after the all-reduce, the first one is checked.
  // With tensor parallelism the stage device's tp ranks hold its blocks.
  auto gathered = [&](int64_t stage, const std::string &name,
                      const std::map<std::string, HostTensorBuffer>
                          execution::PipelineRankResult::*field,
                      const std::map<std::string, TensorLayout> &layouts) {
    std::vector<HostTensorBuffer> blocks;
    std::vector<std::vector<int32_t>> tensorCoordinates;
    for (size_t rank = 0; rank < results.size(); ++rank)
      if (coordinates[rank][0] == stage) {
        blocks.push_back((results[rank].*field).at(name));
        tensorCoordinates.push_back({coordinates[rank][1]});
      }
    auto layout = layouts.find(name);
    return layout == layouts.end()
               ? blocks.front()
               : fixtures::assemble(blocks, tensorCoordinates, layout->second,
                                    tensorMesh, parameterPieces[name]);
  };
  std::map<std::string, HostTensorBuffer> gradients;
  for (size_t rank = 0; rank < results.size(); ++rank) {
    if (coordinates[rank][1] != 0)
      continue;
    for (auto &[name, gradient] : results[rank].gradients)
      EXPECT_TRUE(gradients
                      .emplace(name, test.tensorParallel > 1
                                         ? gathered(coordinates[rank][0], name,
                                                    &execution::PipelineRankResult::gradients,
                                                    gradientLayouts)
                                         : gradient)
                      .second)
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

  // The optimizer: one global norm, and every copy of a parameter updated
  // alike.
  for (size_t rank = 0; rank < results.size(); ++rank)
    EXPECT_NEAR(results[rank].gradientNorm, expectedNorm, 1e-5 * expectedNorm)
        << "global gradient norm on rank " << rank;
  // Copies of a block: on the stages that read the parameter, on every
  // replica (a tp rank's block only on the same tp coordinate).
  std::map<std::pair<std::string, int32_t>, HostTensorBuffer> copies;
  std::map<std::string, HostTensorBuffer> updated;
  for (size_t rank = 0; rank < results.size(); ++rank)
    for (auto &[name, value] : results[rank].parameters) {
      int32_t block = test.tensorParallel > 1 ? coordinates[rank][1] : 0;
      auto [first, inserted] = copies.emplace(std::pair(name, block), value);
      if (!inserted) {
        std::vector<float> mine = value.toFloats(),
                           theirs = first->second.toFloats();
        EXPECT_EQ(mine, theirs)
            << name << " after the step differs on rank " << rank;
      }
      if (!updated.count(name))
        updated[name] = test.tensorParallel > 1
                            ? gathered(coordinates[rank][0], name,
                                       &execution::PipelineRankResult::parameters,
                                       parameterLayouts)
                            : value;
    }
  // Every device holds the update of every parameter its stages read.
  for (size_t rank = 0; rank < results.size(); ++rank)
    module->walk([&](mlir::func::FuncOp function) {
      auto device =
          function->getAttrOfType<mlir::IntegerAttr>("tess.pipeline_device");
      if (!device || device.getInt() != coordinates[rank][0])
        return;
      for (unsigned i = 0; i < function.getNumArguments(); ++i)
        if (auto name = function.getArgAttrOfType<mlir::StringAttr>(
                i, "tess.parameter");
            name && gradients.count(name.str())) {
          EXPECT_TRUE(results[rank].parameters.count(name.str()))
              << "rank " << rank << " reads " << name.str()
              << " but has no update of it";
        }
    });
  double updateError = NAN;
  if (test.clipFraction == 0) {
    updateError =
        fixtures::checkUpdatedParameters(fixture, updated, describe(test));
  } else {
    // Clipped: AdamW's first moment is (1 - beta1) x the scaled gradient,
    // with the scale of the global norm on every stage.
    double beta1 = *fixture.getObject("adamw")->getNumber("beta1");
    for (size_t rank = 0; rank < results.size(); ++rank) {
      double scale = optimizer.gradientClip / results[rank].gradientNorm;
      EXPECT_NEAR(scale, test.clipFraction, 1e-5);
      for (auto &[name, moment] : results[rank].firstMoments) {
        const HostTensorBuffer &gradient = results[rank].gradients.at(name);
        double largest = 0, difference = 0;
        for (int64_t e = 0; e < gradient.numElements(); ++e) {
          double expected = (1 - beta1) * scale * gradient.getDouble(e);
          largest = std::max(largest, std::abs(expected));
          difference =
              std::max(difference, std::abs(moment.getDouble(e) - expected));
        }
        EXPECT_LE(difference, 1e-6 * largest + 1e-12)
            << "first moment of " << name << " on rank " << rank;
      }
    }
  }
  // A clipped step has no PyTorch update to compare with: its moments were
  // checked against the scaled gradients instead.
  std::string update =
      test.clipFraction == 0
          ? llvm::formatv("AdamW vs PyTorch {0:e2}", updateError).str()
          : std::string("AdamW moments = clipped gradients");
  std::printf("[pipeline] %-40s loss rel err %.2e, grad-norm rel err %.2e, "
              "%s\n",
              describe(test).c_str(), lossError, normError, update.c_str());
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
  // Pipeline x tensor parallelism on 4 ranks: 2 stages x 2-way Megatron TP
  // (mesh 2x2, pipeline axis first); and clipping across it.
  for (PipelineCase test : {gpt2, bert}) {
    test.tensorParallel = 2;
    all.push_back(test);
  }
  PipelineCase clippedTensorParallel = gpt2;
  clippedTensorParallel.tensorParallel = 2;
  clippedTensorParallel.clipFraction = 0.5;
  all.push_back(clippedTensorParallel);
  // Clipping by the norm of all four stages' gradients.
  PipelineCase clipped = gpt2;
  clipped.stages = 4;
  clipped.clipFraction = 0.5;
  all.push_back(clipped);
  return all;
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineFixtureTest, testing::ValuesIn(cases()),
    fixtures::DescribedTestName());

} // namespace
