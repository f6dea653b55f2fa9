//===- ForwardFixtureTest.cpp - forward logits against PyTorch -----------===//
//
// The imported, fused forward graph, run on the CPU kernels, must compute
// PyTorch's logits for the bundled models: the fixture's sum over all logits
// and the first eight values.
//
//===----------------------------------------------------------------------===//

#include "FixtureChecks.h"
#include "FixtureSupport.h"

#include <gtest/gtest.h>

using namespace tessera;

namespace {

const std::map<std::string, int64_t> kDynamicDims = {{"batch", 2},
                                                     {"seq", 32}};

void checkForward(const std::string &model, const std::string &file,
                  const std::map<std::string, int64_t> &dims = kDynamicDims) {
  fixtures::checkForward(fixtures::loadFixture(model), file, dims);
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
