//===- CrossEntropyTest.cpp - tessera_cpu_cross_entropy and its grad ------===//

#include "TestUtil.h"
#include "reference/TorchReferences.h"

using namespace tessera_test;

namespace {

TEST(CrossEntropy, MatchesPyTorchWithIgnoreIndex) {
  using namespace torch_reference;
  Tensor logits = Tensor::floats(
      {6, 7}, std::vector<float>(std::begin(cross_entropy_logits),
                                 std::end(cross_entropy_logits)));
  Tensor targets = Tensor::integers(
      {6}, std::vector<int64_t>(std::begin(cross_entropy_targets),
                                std::end(cross_entropy_targets)));
  Tensor loss(TESSERA_F32, {});
  EXPECT_KERNEL_OK(
      tessera_cpu_cross_entropy(logits.get(), targets.get(), nullptr, loss.get(), -100));
  EXPECT_NEAR(loss.at(0), cross_entropy_loss[0],
              2e-6 * std::fabs(cross_entropy_loss[0]));
}

TEST(CrossEntropy, I32TargetsAndLargeLogits) {
  Tensor logits = Tensor::floats({2, 3}, {1000, 0, -1000, 5, 5, 5});
  Tensor targets = Tensor::integers({2}, {0, 2}, TESSERA_I32);
  Tensor loss(TESSERA_F32, {});
  EXPECT_KERNEL_OK(
      tessera_cpu_cross_entropy(logits.get(), targets.get(), nullptr, loss.get(), -1));
  EXPECT_NEAR(loss.at(0), std::log(3.0) / 2, 1e-6);
}

TEST(CrossEntropyGrad, MatchesFiniteDifferencesWithIgnoredRows) {
  Tensor logits = randomTensor({5, 6}, 1, -3, 3);
  Tensor targets = Tensor::integers({5}, {2, 7, 0, 5, 7}); // 7 is ignore_index
  Tensor dloss = Tensor::floats({}, {1.7f});
  Tensor loss(TESSERA_F32, {}), dlogits(TESSERA_F32, {5, 6});
  EXPECT_KERNEL_OK(tessera_cpu_cross_entropy_grad(
      logits.get(), targets.get(), nullptr, dloss.get(), dlogits.get(), 7));
  auto objective = [&] {
    EXPECT_KERNEL_OK(
        tessera_cpu_cross_entropy(logits.get(), targets.get(), nullptr, loss.get(), 7));
    return 1.7 * loss.at(0);
  };
  expectGradientNear(dlogits, numericGradient(logits, objective), "dlogits");
  for (int64_t j = 0; j < 6; ++j) {
    EXPECT_EQ(dlogits.at(1 * 6 + j), 0.0f);
    EXPECT_EQ(dlogits.at(4 * 6 + j), 0.0f);
  }
}

// Tests that the call the lowering emits when the gradient follows the loss
// gives both kernels' results to the bit, and their errors.
TEST(CrossEntropyWithGrad, IsTheLossAndTheGradient) {
  Tensor logits = randomTensor({5, 6}, 2, -3, 3);
  Tensor targets = Tensor::integers({5}, {2, 7, 0, 5, 7});
  Tensor dloss = Tensor::floats({}, {1.7f});
  Tensor loss(TESSERA_F32, {}), dlogits(TESSERA_F32, {5, 6});
  EXPECT_KERNEL_OK(
      tessera_cpu_cross_entropy(logits.get(), targets.get(), nullptr, loss.get(), 7));
  EXPECT_KERNEL_OK(tessera_cpu_cross_entropy_grad(
      logits.get(), targets.get(), nullptr, dloss.get(), dlogits.get(), 7));
  Tensor fusedLoss(TESSERA_F32, {}), fusedDlogits(TESSERA_F32, {5, 6});
  EXPECT_KERNEL_OK(tessera_cpu_cross_entropy_with_grad(
      logits.get(), targets.get(), nullptr, dloss.get(), fusedLoss.get(),
      fusedDlogits.get(), 7));
  EXPECT_EQ(fusedLoss.values(), loss.values());
  EXPECT_EQ(fusedDlogits.values(), dlogits.values());

  // In place, as the arena planner runs it when nothing reads the logits
  // afterwards: dlogits is the logits' own storage.
  Tensor inPlace = logits;
  Tensor inPlaceLoss(TESSERA_F32, {});
  EXPECT_KERNEL_OK(tessera_cpu_cross_entropy_with_grad(
      inPlace.get(), targets.get(), nullptr, dloss.get(), inPlaceLoss.get(),
      inPlace.get(), 7));
  EXPECT_EQ(inPlaceLoss.values(), loss.values());
  EXPECT_EQ(inPlace.values(), dlogits.values());

  Tensor wrong(TESSERA_F32, {5, 5});
  EXPECT_NE(tessera_cpu_cross_entropy_with_grad(logits.get(), targets.get(), nullptr,
                                                dloss.get(), fusedLoss.get(),
                                                wrong.get(), 7),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error())
                .find("tessera_cpu_cross_entropy_grad"),
            std::string::npos)
      << tessera_cpu_last_error();
}

TEST(CrossEntropy, ATargetOutOfRangeIsAnErrorNamingTargetPositionAndRange) {
  Tensor logits(TESSERA_F32, {4, 7});
  Tensor targets = Tensor::integers({4}, {0, -100, 9, 1});
  Tensor loss(TESSERA_F32, {}), dloss = Tensor::floats({}, {1});
  Tensor dlogits(TESSERA_F32, {4, 7});
  EXPECT_NE(
      tessera_cpu_cross_entropy(logits.get(), targets.get(), nullptr, loss.get(), -100),
      0);
  EXPECT_STREQ(
      tessera_cpu_last_error(),
      "tessera_cpu_cross_entropy: target 9 at position [2] is outside the "
      "classes [0, 7) and is not ignore_index (-100)");
  EXPECT_NE(tessera_cpu_cross_entropy_grad(logits.get(), targets.get(), nullptr,
                                           dloss.get(), dlogits.get(), -100),
            0);
  EXPECT_NE(
      std::string(tessera_cpu_last_error()).find("target 9 at position [2]"),
      std::string::npos);
}

TEST(CrossEntropy, AllRowsIgnoredGivesNanLossAndZeroGradient) {
  Tensor logits = randomTensor({2, 3}, 2);
  Tensor targets = Tensor::integers({2}, {-100, -100});
  Tensor loss(TESSERA_F32, {}), dloss = Tensor::floats({}, {1});
  Tensor dlogits(TESSERA_F32, {2, 3});
  EXPECT_KERNEL_OK(
      tessera_cpu_cross_entropy(logits.get(), targets.get(), nullptr, loss.get(), -100));
  EXPECT_TRUE(std::isnan(loss.at(0)));
  EXPECT_KERNEL_OK(tessera_cpu_cross_entropy_grad(
      logits.get(), targets.get(), nullptr, dloss.get(), dlogits.get(), -100));
  EXPECT_EQ(dlogits.values(), std::vector<float>(6, 0.0f));
}

} // namespace
