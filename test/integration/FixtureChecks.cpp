//===- FixtureChecks.cpp - a model's numbers against its fixture ---------===//

#include "FixtureChecks.h"
#include "FixtureSupport.h"

#include "Tess/IR/TessOps.h"
#include "tessera/Execution/Interpreter.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessera;
using execution::HostTensorBuffer;

void fixtures::checkForward(const llvm::json::Object &fixture,
                            const std::string &file,
                            const std::map<std::string, int64_t> &dims) {
  mlir::MLIRContext context;
  auto module = fixtures::importWithWeights(context, file, dims);
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  ASSERT_TRUE(forward);

  execution::Interpreter interpreter;
  std::vector<execution::HostTensorBuffer> arguments;
  arguments.push_back(fixtures::fixtureTokens(fixture, 0, 32));
  auto results = interpreter.run(forward, std::move(arguments));
  ASSERT_TRUE(static_cast<bool>(results))
      << llvm::toString(results.takeError());
  const execution::HostTensorBuffer &logits = results->front();

  std::vector<double> first8 = fixtures::numbers(fixture.get("logits_first8"));
  ASSERT_EQ(first8.size(), 8u);
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(logits.getDouble(i), first8[i],
                1e-5 + 1e-4 * std::abs(first8[i]))
        << "logit " << i;
  double sum = 0;
  for (int64_t i = 0; i < logits.numElements(); ++i)
    sum += logits.getDouble(i);
  double expected = fixture.getNumber("logits_sum").value_or(NAN);
  // The sum of 32k logits cancels to a few hundred: compare against the
  // magnitude of what was summed, not the small result.
  EXPECT_NEAR(sum, expected, 1e-5 * logits.numElements());
}

namespace {

/// The `value` of every tess.parameter, by name, before the training
/// builder turns parameters into arguments.
std::map<std::string, HostTensorBuffer> collectWeights(mlir::ModuleOp module) {
  std::map<std::string, HostTensorBuffer> weights;
  module.walk([&](tess::ParameterOp parameter) {
    auto value = parameter.getValue();
    ASSERT_TRUE(value.has_value()) << parameter.getName().str();
    auto buffer = HostTensorBuffer::fromAttribute(*value);
    ASSERT_TRUE(static_cast<bool>(buffer));
    weights[parameter.getName().str()] = std::move(*buffer);
  });
  return weights;
}

/// The name in the argument's (or result's) tess.* attribute `kind`.
std::string nameOf(mlir::DictionaryAttr attributes, llvm::StringRef kind) {
  if (!attributes)
    return "";
  if (auto name = attributes.getAs<mlir::StringAttr>(kind))
    return name.str();
  return "";
}

} // namespace

std::string fixtures::trainingPipeline(const llvm::json::Object &fixture,
                                       llvm::StringRef loss,
                                       int64_t vocabularyMultiple) {
  const llvm::json::Object *adamw = fixture.getObject("adamw");
  EXPECT_TRUE(adamw) << "the fixture has no adamw hyperparameters";
  auto exact = [&](llvm::StringRef key) {
    std::optional<double> value =
        adamw ? adamw->getNumber(key) : std::optional<double>();
    EXPECT_TRUE(value.has_value()) << "the fixture has no adamw." << key.str();
    return llvm::formatv("{0:e16}", value.value_or(0)).str();
  };
  return "tess-build-training{loss=" + loss.str() +
         " precision=fp32 beta1=" + exact("beta1") +
         " beta2=" + exact("beta2") + " adam-epsilon=" + exact("eps") +
         " weight-decay=" + exact("weight_decay") +
         " vocabulary-multiple=" + std::to_string(vocabularyMultiple) + "}";
}

double fixtures::learningRate(const llvm::json::Object &fixture) {
  const llvm::json::Object *adamw = fixture.getObject("adamw");
  std::optional<double> lr = adamw ? adamw->getNumber("lr") : std::nullopt;
  EXPECT_TRUE(lr.has_value()) << "the fixture has no adamw.lr";
  return lr.value_or(NAN);
}

double fixtures::globalGradientNorm(const llvm::json::Object &fixture) {
  const llvm::json::Object *parameters = fixture.getObject("params");
  EXPECT_TRUE(parameters);
  double squares = 0;
  if (parameters)
    for (const auto &[name, entry] : *parameters) {
      double norm = entry.getAsObject()->getNumber("grad_norm").value_or(NAN);
      squares += norm * norm;
    }
  return std::sqrt(squares);
}

std::map<std::string, HostTensorBuffer>
fixtures::firstStepInputs(const llvm::json::Object &fixture,
                          double gradientScale) {
  std::map<std::string, HostTensorBuffer> inputs;
  inputs["lr"] = HostTensorBuffer::fromFloats(
      {}, {static_cast<float>(learningRate(fixture))});
  inputs["step"] = HostTensorBuffer::fromInts({}, {1});
  inputs["grad_scale"] =
      HostTensorBuffer::fromFloats({}, {static_cast<float>(gradientScale)});
  return inputs;
}

std::vector<HostTensorBuffer> fixtures::bindArguments(
    mlir::func::FuncOp function,
    const std::map<std::string, HostTensorBuffer> &parameters,
    const std::map<std::string, HostTensorBuffer> &gradients,
    const std::map<std::string, HostTensorBuffer> &inputs) {
  std::vector<HostTensorBuffer> arguments;
  for (unsigned i = 0; i < function.getNumArguments(); ++i) {
    mlir::DictionaryAttr attributes = function.getArgAttrDict(i);
    auto type =
        llvm::cast<mlir::RankedTensorType>(function.getArgument(i).getType());
    std::string name;
    const std::map<std::string, HostTensorBuffer> *source = nullptr;
    if (!(name = nameOf(attributes, "tess.parameter")).empty() ||
        !(name = nameOf(attributes, "tess.buffer")).empty())
      source = &parameters;
    else if (!(name = nameOf(attributes, "tess.gradient")).empty())
      source = &gradients;
    else if (!(name = nameOf(attributes, "tess.input")).empty())
      source = &inputs;
    if (!source) {
      // Optimizer moments start at zero.
      arguments.push_back(std::move(*HostTensorBuffer::zeros(type)));
      continue;
    }
    auto it = source->find(name);
    if (it == source->end()) {
      ADD_FAILURE() << "no value for argument " << i << " '" << name
                    << "' of @" << function.getSymName().str();
      arguments.push_back(std::move(*HostTensorBuffer::zeros(type)));
      continue;
    }
    arguments.push_back(it->second);
  }
  return arguments;
}

std::map<std::string, HostTensorBuffer>
fixtures::resultsNamed(mlir::func::FuncOp function,
                       const std::vector<HostTensorBuffer> &results,
                       llvm::StringRef role) {
  std::map<std::string, HostTensorBuffer> named;
  for (unsigned i = 0; i < function.getNumResults() && i < results.size(); ++i) {
    std::string name = nameOf(function.getResultAttrDict(i), role);
    if (!name.empty())
      named[name] = results[i];
  }
  return named;
}

double fixtures::checkUpdatedParameters(
    const llvm::json::Object &fixture,
    const std::map<std::string, HostTensorBuffer> &updated,
    const std::string &where) {
  const llvm::json::Object *parameters = fixture.getObject("params");
  EXPECT_TRUE(parameters);
  if (!parameters)
    return NAN;
  double largest = 0;
  for (const auto &[pytorchName, entry] : *parameters) {
    const llvm::json::Object *info = entry.getAsObject();
    std::string name = programNameOf(pytorchName, *info, updated);
    auto found = updated.find(name);
    if (found == updated.end()) {
      ADD_FAILURE() << where << ": no updated value of " << name;
      continue;
    }
    const HostTensorBuffer &after = found->second;
    std::vector<double> first8 = numbers(info->get("after_step_first8"));
    EXPECT_FALSE(first8.empty()) << pytorchName.str() << " has no after_step_first8";
    for (size_t i = 0; i < first8.size(); ++i) {
      double difference = std::abs(after.getDouble(i) - first8[i]);
      largest = std::max(largest, difference);
      EXPECT_LE(difference, 1e-5)
          << where << ": " << pytorchName.str() << "[" << i << "] after one "
          << "AdamW step is " << after.getDouble(i) << ", PyTorch's "
          << first8[i];
    }
    double sum = 0;
    for (int64_t i = 0; i < after.numElements(); ++i)
      sum += after.getDouble(i);
    std::optional<double> expectedSum = info->getNumber("after_step_sum");
    EXPECT_TRUE(expectedSum.has_value())
        << pytorchName.str() << " has no after_step_sum";
    EXPECT_NEAR(sum, expectedSum.value_or(NAN), 1e-5 * after.numElements())
        << where << ": the sum of " << pytorchName.str()
        << " after one AdamW step";
  }
  return largest;
}

void fixtures::checkTrainingStep(const llvm::json::Object &fixture,
                                 const TrainingStepSetup &setup) {
  mlir::MLIRContext context;
  auto module = fixtures::importWithWeights(
      context, setup.file, {{"batch", 2}, {"seq", setup.sequence}});
  ASSERT_TRUE(module);
  std::map<std::string, HostTensorBuffer> weights = collectWeights(*module);

  std::string pipeline =
      trainingPipeline(fixture, setup.loss, setup.vocabularyMultiple);
  registerTesseraPasses();
  mlir::PassManager pm(&context);
  ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(pipeline, pm)))
      << pipeline;
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  if (setup.loweringPreparationLogitsBlock) {
    LoweringPreparationOptions options;
    options.logitsBlockBytes = *setup.loweringPreparationLogitsBlock;
    buildLoweringPreparationPipeline(pm, options);
  }
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  std::map<std::string, int> fused = countFusedOps(*module);
  for (const std::string &kind : setup.fusedOps)
    EXPECT_GT(fused[kind], 0) << "no " << kind << " in the prepared step";

  std::map<std::string, HostTensorBuffer> inputs;
  inputs["input_ids"] = fixtures::fixtureTokens(fixture, 0, setup.sequence);
  inputs["targets"] = fixtures::fixtureTokens(
      fixture, setup.shiftTargets ? 1 : 0, setup.sequence);
  inputs["loss_scale"] = HostTensorBuffer::fromFloats({}, {1.0f});

  execution::Interpreter interpreter;
  auto forwardBackward =
      module->lookupSymbol<mlir::func::FuncOp>("forward_backward");
  ASSERT_TRUE(forwardBackward);
  auto results = interpreter.run(
      forwardBackward, bindArguments(forwardBackward, weights, {}, inputs));
  ASSERT_TRUE(static_cast<bool>(results))
      << llvm::toString(results.takeError());

  double expectedLoss = *fixture.getNumber("loss");
  EXPECT_NEAR((*results)[0].getDouble(0), expectedLoss,
              1e-5 * std::abs(expectedLoss));

  // Gradients by ONNX initializer name.
  std::map<std::string, HostTensorBuffer> gradients =
      resultsNamed(forwardBackward, *results, "tess.gradient");
  const llvm::json::Object *parameters = fixture.getObject("params");
  ASSERT_TRUE(parameters);
  EXPECT_EQ(gradients.size(), parameters->size());
  for (const auto &[pytorchName, entry] : *parameters) {
    const llvm::json::Object *info = entry.getAsObject();
    std::string name = fixtures::programNameOf(pytorchName, *info, gradients);
    auto gradient = gradients.find(name);
    ASSERT_NE(gradient, gradients.end()) << "no gradient for " << name;
    double expectedNorm = *info->getNumber("grad_norm");
    // Gradients that are zero in exact arithmetic (BERT's key bias) are
    // PyTorch's rounding noise: compare those absolutely.
    EXPECT_NEAR(fixtures::norm(gradient->second), expectedNorm,
                std::max(1e-4 * expectedNorm, 1e-8))
        << "gradient norm of " << pytorchName.str();
  }

  // One AdamW step.
  auto optimizerStep =
      module->lookupSymbol<mlir::func::FuncOp>("optimizer_step");
  ASSERT_TRUE(optimizerStep);
  auto updated = interpreter.run(
      optimizerStep, bindArguments(optimizerStep, weights, gradients,
                                   firstStepInputs(fixture)));
  ASSERT_TRUE(static_cast<bool>(updated))
      << llvm::toString(updated.takeError());
  // Results are (params..., m..., v...).
  checkUpdatedParameters(
      fixture, resultsNamed(optimizerStep, *updated, "tess.parameter"),
      setup.file);
}

std::map<std::string, int> fixtures::countFusedOps(mlir::ModuleOp module) {
  std::map<std::string, int> counts;
  module.walk([&](mlir::Operation *op) {
    if (mlir::isa<tess::LinearGeluOp, tess::LinearGeluGradOp,
                  tess::LinearAddOp, tess::MatmulAddOp,
                  tess::MatmulBiasGradOp, tess::CrossEntropyWithGradOp>(op))
      ++counts[op->getName().stripDialect().str()];
    if (auto grad = mlir::dyn_cast<tess::LayerNormGradOp>(op))
      counts["norm_grad_add"] += grad.getResidual() ? 1 : 0;
    if (auto grad = mlir::dyn_cast<tess::RmsNormGradOp>(op))
      counts["norm_grad_add"] += grad.getResidual() ? 1 : 0;
  });
  return counts;
}
