//===- RematFixtureTest.cpp - rematerialization leaves the numbers alone --===//
//
// tess-rematerialize recomputes forward values in the backward instead of
// keeping them; the recomputation runs the same kernels on the same
// operands, and dropout redraws its mask from its seed, so on the CPU
// kernels the training step must give bit-identical loss and gradients in
// every mode, and PyTorch's fixture numbers (loss within 1e-5 relative,
// gradient norms within 1e-4 relative, the parameters after one AdamW step)
// as TrainingFixtureTest checks them.
//
//===----------------------------------------------------------------------===//

#include "FixtureChecks.h"
#include "FixtureSupport.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Execution/Interpreter.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace tessera;
using execution::HostTensorBuffer;

namespace {

struct StepResults {
  std::vector<HostTensorBuffer> values;
  /// The gradient's parameter name per result (empty for the loss).
  std::vector<std::string> names;
  /// Ops of @forward_backward: the clones make it grow.
  size_t opCount = 0;
  /// The parameters after @optimizer_step's AdamW on these gradients.
  std::map<std::string, HostTensorBuffer> updated;
};

/// Builds the fp32 training step of test/models/<file>, rematerializes it
/// under `mode` and runs @forward_backward on the fixture's tokens with the
/// model's initial weights.
StepResults runStep(const llvm::json::Object &fixture, const std::string &file,
                    const std::string &loss, int64_t sequence,
                    bool shiftTargets, const std::string &mode) {
  StepResults step;
  mlir::MLIRContext context;
  auto module = fixtures::importWithWeights(context, file,
                                            {{"batch", 2}, {"seq", sequence}});
  EXPECT_TRUE(module);
  if (!module)
    return step;
  std::map<std::string, HostTensorBuffer> weights;
  module->walk([&](tess::ParameterOp parameter) {
    if (auto value = parameter.getValue())
      if (auto buffer = HostTensorBuffer::fromAttribute(*value))
        weights[parameter.getName().str()] = std::move(*buffer);
  });

  registerTesseraPasses();
  mlir::PassManager pm(&context);
  std::string build = fixtures::trainingPipeline(fixture, loss);
  std::string remat = "tess-rematerialize{mode=" + mode + "}";
  EXPECT_TRUE(mlir::succeeded(mlir::parsePassPipeline(build, pm)));
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  EXPECT_TRUE(mlir::succeeded(mlir::parsePassPipeline(remat, pm)));
  EXPECT_TRUE(mlir::succeeded(pm.run(*module))) << remat;
  auto function = module->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  auto optimizer = module->lookupSymbol<mlir::func::FuncOp>("optimizer_step");
  EXPECT_TRUE(function && optimizer);
  if (!function || !optimizer)
    return step;

  step.opCount = function.getBody().front().getOperations().size();

  std::map<std::string, HostTensorBuffer> inputs;
  inputs["input_ids"] = fixtures::fixtureTokens(fixture, 0, sequence);
  inputs["targets"] =
      fixtures::fixtureTokens(fixture, shiftTargets ? 1 : 0, sequence);
  inputs["loss_scale"] = HostTensorBuffer::fromFloats({}, {1.0f});
  execution::Interpreter interpreter;
  auto results = interpreter.run(
      function, fixtures::bindArguments(function, weights, {}, inputs));
  EXPECT_TRUE(static_cast<bool>(results))
      << llvm::toString(results.takeError());
  if (!results)
    return step;
  step.values = std::move(*results);
  for (unsigned i = 0; i < function.getNumResults(); ++i) {
    auto name = function.getResultAttrOfType<mlir::StringAttr>(
        i, "tess.gradient");
    step.names.push_back(name ? name.str() : "");
  }
  // The AdamW step on these gradients.
  auto updated = interpreter.run(
      optimizer,
      fixtures::bindArguments(
          optimizer, weights,
          fixtures::resultsNamed(function, step.values, "tess.gradient"),
          fixtures::firstStepInputs(fixture)));
  EXPECT_TRUE(static_cast<bool>(updated))
      << llvm::toString(updated.takeError());
  if (updated)
    step.updated = fixtures::resultsNamed(optimizer, *updated, "tess.parameter");
  return step;
}

bool bitIdentical(const HostTensorBuffer &a, const HostTensorBuffer &b) {
  std::vector<float> left = a.toFloats(), right = b.toFloats();
  return left.size() == right.size() &&
         std::memcmp(left.data(), right.data(), left.size() * sizeof(float)) ==
             0;
}

void checkEveryMode(const std::string &model, const std::string &file,
                    const std::string &loss, int64_t sequence,
                    bool shiftTargets) {
  llvm::json::Object fixture = fixtures::loadFixture(model);
  StepResults reference =
      runStep(fixture, file, loss, sequence, shiftTargets, "none");
  ASSERT_FALSE(reference.values.empty());

  // The fixture's gradient norm per ONNX initializer.
  const llvm::json::Object *parameters = fixture.getObject("params");
  ASSERT_TRUE(parameters);
  std::map<std::string, double> expectedNorms;
  for (const auto &[pytorchName, entry] : *parameters) {
    const llvm::json::Object *info = entry.getAsObject();
    expectedNorms[fixtures::initializerOf(pytorchName, *info)] =
        *info->getNumber("grad_norm");
  }

  for (const std::string mode : {"selective", "full"}) {
    SCOPED_TRACE("mode=" + mode);
    StepResults step =
        runStep(fixture, file, loss, sequence, shiftTargets, mode);
    ASSERT_EQ(step.values.size(), reference.values.size());
    EXPECT_GT(step.opCount, reference.opCount) << "nothing was recomputed";
    for (size_t i = 0; i < step.values.size(); ++i)
      EXPECT_TRUE(bitIdentical(step.values[i], reference.values[i]))
          << "result " << i << " (" << step.names[i]
          << ") differs from mode=none";

    double expectedLoss = *fixture.getNumber("loss");
    EXPECT_NEAR(step.values[0].getDouble(0), expectedLoss,
                1e-5 * std::abs(expectedLoss));
    for (size_t i = 1; i < step.values.size(); ++i) {
      auto expected = expectedNorms.find(step.names[i]);
      ASSERT_NE(expected, expectedNorms.end()) << step.names[i];
      EXPECT_NEAR(fixtures::norm(step.values[i]), expected->second,
                  std::max(1e-4 * expected->second, 1e-8))
          << "gradient norm of " << step.names[i];
    }
    fixtures::checkUpdatedParameters(fixture, step.updated, file + " " + mode);
  }
}

TEST(RematFixtureTest, Gpt2TinyEveryModeMatchesNone) {
  checkEveryMode("gpt2-tiny", "gpt2-tiny.raw.dyn.onnx", "causal-lm", 31,
                 /*shiftTargets=*/true);
}

TEST(RematFixtureTest, BertTinyEveryModeMatchesNone) {
  checkEveryMode("bert-tiny", "bert-tiny.raw.dyn.onnx", "mlm", 32,
                 /*shiftTargets=*/false);
}

TEST(RematFixtureTest, LlamaTinyEveryModeMatchesNone) {
  checkEveryMode("llama-tiny", "llama-tiny.raw.dyn.onnx", "causal-lm", 31,
                 /*shiftTargets=*/true);
}

} // namespace
