//===- ForwardFixtureTest.cpp - forward logits against PyTorch -----------===//
//
// The imported, fused forward graph, run on the CPU kernels, must compute
// PyTorch's logits for the bundled models: the fixture's sum over all logits
// and the first eight values.
//
//===----------------------------------------------------------------------===//

#include "FixtureSupport.h"

#include "tessera/Execution/Interpreter.h"

#include <gtest/gtest.h>

using namespace tessera;

namespace {

const std::map<std::string, int64_t> kDynamicDims = {{"batch", 2},
                                                     {"seq", 32}};

void checkForward(const std::string &model, const std::string &file,
                  const std::map<std::string, int64_t> &dims = kDynamicDims) {
  llvm::json::Object fixture = fixtures::loadFixture(model);
  mlir::MLIRContext context;
  auto module = fixtures::importWithWeights(context, file, dims);
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<mlir::func::FuncOp>("forward");
  ASSERT_TRUE(forward);

  execution::Interpreter interpreter;
  std::vector<execution::HostTensorBuffer> arguments;
  arguments.push_back(fixtures::fixtureTokens(fixture, 0, 32));
  auto results = interpreter.run(forward, std::move(arguments));
  ASSERT_TRUE(static_cast<bool>(results)) << llvm::toString(results.takeError());
  const execution::HostTensorBuffer &logits = results->front();

  std::vector<double> first8 = fixtures::numbers(fixture.get("logits_first8"));
  ASSERT_EQ(first8.size(), 8u);
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(logits.getDouble(i), first8[i], 1e-5 + 1e-4 * std::abs(first8[i]))
        << "logit " << i;
  double sum = 0;
  for (int64_t i = 0; i < logits.numElements(); ++i)
    sum += logits.getDouble(i);
  double expected = fixture.getNumber("logits_sum").value_or(NAN);
  // The sum of 32k logits cancels to a few hundred: compare against the
  // magnitude of what was summed, not the small result.
  EXPECT_NEAR(sum, expected, 1e-5 * logits.numElements());
}

TEST(ForwardFixtureTest, Gpt2Tiny) {
  checkForward("gpt2-tiny", "gpt2-tiny.raw.dyn.onnx");
}

TEST(ForwardFixtureTest, Gpt2TinyOptimizedExport) {
  checkForward("gpt2-tiny", "gpt2-tiny.opt.static.onnx", {});
}

TEST(ForwardFixtureTest, BertTiny) {
  checkForward("bert-tiny", "bert-tiny.raw.dyn.onnx");
}

TEST(ForwardFixtureTest, LlamaTiny) {
  checkForward("llama-tiny", "llama-tiny.raw.dyn.onnx");
}

} // namespace
