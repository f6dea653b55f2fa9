//===- TrainingFixtureTest.cpp - one training step against PyTorch -------===//
//
// tess-build-training's @forward_backward and @optimizer_step, run on the
// CPU kernels, must reproduce PyTorch's first step for the bundled models
// (fp32): the loss within 1e-5 relative, every parameter's gradient norm
// within 1e-4 relative, and the parameters after one AdamW step (lr 1e-3,
// betas 0.9/0.95, eps 1e-8, weight decay 0.1 on all) within 1e-5 absolute.
// Each model also with its head padded from 512 to 576 classes
// (vocabulary-multiple=96: zero weight rows, the lowest logit): the same
// numbers, since the padded classes get probability and gradient 0. And each
// model as the lowering takes it (tess-lowering-preparation: the fused ops
// of tess-fuse-epilogues, the head in blocks of rows), so that the kernel
// calls the executable makes are the ones checked against PyTorch.
//
//===----------------------------------------------------------------------===//

#include "FixtureChecks.h"
#include "FixtureSupport.h"

#include <gtest/gtest.h>

using namespace tessera;

namespace {

void checkTrainingStep(const std::string &model,
                       const fixtures::TrainingStepSetup &setup) {
  fixtures::checkTrainingStep(fixtures::loadFixture(model), setup);
}

TEST(TrainingFixtureTest, Gpt2TinyCausalLm) {
  checkTrainingStep("gpt2-tiny", {"gpt2-tiny.raw.dyn.onnx", "causal-lm", 31,
                                  /*shiftTargets=*/true});
}

TEST(TrainingFixtureTest, BertTinyMaskedLm) {
  checkTrainingStep("bert-tiny", {"bert-tiny.raw.dyn.onnx", "mlm", 32,
                                  /*shiftTargets=*/false});
}

TEST(TrainingFixtureTest, LlamaTinyCausalLm) {
  checkTrainingStep("llama-tiny", {"llama-tiny.raw.dyn.onnx", "causal-lm", 31,
                                   /*shiftTargets=*/true});
}

TEST(TrainingFixtureTest, Gpt2TinyPaddedVocabulary) {
  checkTrainingStep("gpt2-tiny", {"gpt2-tiny.raw.dyn.onnx", "causal-lm", 31,
                                  /*shiftTargets=*/true,
                                  /*vocabularyMultiple=*/96});
}

// bert-tiny's decoder has a bias, which gets the lowest logit.
TEST(TrainingFixtureTest, BertTinyPaddedVocabulary) {
  checkTrainingStep("bert-tiny", {"bert-tiny.raw.dyn.onnx", "mlm", 32,
                                  /*shiftTargets=*/false,
                                  /*vocabularyMultiple=*/96});
}

TEST(TrainingFixtureTest, LlamaTinyPaddedVocabulary) {
  checkTrainingStep("llama-tiny", {"llama-tiny.raw.dyn.onnx", "causal-lm", 31,
                                   /*shiftTargets=*/true,
                                   /*vocabularyMultiple=*/96});
}

// As lowered: one block of GPT-2's 62 x 512 logits is 31 rows (two blocks
// of 63,488 bytes), whose weight gradients sum through tess.matmul_add.
TEST(TrainingFixtureTest, Gpt2TinyAsLowered) {
  fixtures::TrainingStepSetup setup{"gpt2-tiny.raw.dyn.onnx", "causal-lm", 31,
                                    /*shiftTargets=*/true};
  setup.loweringPreparationLogitsBlock = 65536;
  setup.fusedOps = {"linear_gelu",      "linear_gelu_grad",
                    "linear_add",       "matmul_bias_grad",
                    "matmul_add",       "norm_grad_add",
                    "cross_entropy_with_grad"};
  checkTrainingStep("gpt2-tiny", setup);
}

TEST(TrainingFixtureTest, BertTinyAsLowered) {
  fixtures::TrainingStepSetup setup{"bert-tiny.raw.dyn.onnx", "mlm", 32,
                                    /*shiftTargets=*/false};
  setup.loweringPreparationLogitsBlock = int64_t(1) << 30;
  // Post-LN: the residual's gradient is summed before each norm's backward,
  // not after it; the bias gradients' sums are not next to their matmuls.
  setup.fusedOps = {"linear_add", "cross_entropy_with_grad"};
  checkTrainingStep("bert-tiny", setup);
}

TEST(TrainingFixtureTest, LlamaTinyAsLowered) {
  fixtures::TrainingStepSetup setup{"llama-tiny.raw.dyn.onnx", "causal-lm", 31,
                                    /*shiftTargets=*/true};
  setup.loweringPreparationLogitsBlock = 65536;
  setup.fusedOps = {"linear_add", "matmul_add", "norm_grad_add",
                    "cross_entropy_with_grad"};
  checkTrainingStep("llama-tiny", setup);
}

} // namespace
