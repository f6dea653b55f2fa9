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

// Tests count_targets (tess.cross_entropy's count_over): blocks of rows that
// divide by the whole batch's count give losses that add up to the batch's
// mean and the batch gradient's rows, and a block with no counted row has
// loss 0 (not NaN: the other blocks hold the counted ones).
TEST(CrossEntropy, BlocksCountedOverTheBatchSumToItsMean) {
  Tensor logits = randomTensor({6, 7}, 3, -3, 3);
  std::vector<int64_t> targetValues = {2, -100, 0, -100, -100, 6};
  Tensor targets = Tensor::integers({6}, targetValues);
  Tensor dloss = Tensor::floats({}, {0.5f});
  Tensor loss(TESSERA_F32, {}), dlogits(TESSERA_F32, {6, 7});
  EXPECT_KERNEL_OK(tessera_cpu_cross_entropy_with_grad(
      logits.get(), targets.get(), nullptr, dloss.get(), loss.get(),
      dlogits.get(), -100));
  std::vector<float> allLogits = logits.values();
  double blockSum = 0;
  std::vector<float> blockGradients;
  for (int64_t block = 0; block < 3; ++block) {
    Tensor rows = Tensor::floats(
        {2, 7}, std::vector<float>(allLogits.begin() + block * 14,
                                   allLogits.begin() + (block + 1) * 14));
    Tensor rowTargets = Tensor::integers(
        {2}, {targetValues[2 * block], targetValues[2 * block + 1]});
    Tensor blockLoss(TESSERA_F32, {}), blockDlogits(TESSERA_F32, {2, 7});
    EXPECT_KERNEL_OK(tessera_cpu_cross_entropy_with_grad(
        rows.get(), rowTargets.get(), targets.get(), dloss.get(),
        blockLoss.get(), blockDlogits.get(), -100));
    if (block == 1) { // rows 2 and 3: only row 2 counts
      EXPECT_GT(blockLoss.at(0), 0.0f);
    }
    blockSum += blockLoss.at(0);
    for (float value : blockDlogits.values())
      blockGradients.push_back(value);
  }
  EXPECT_NEAR(blockSum, loss.at(0), 1e-6 * std::fabs(loss.at(0)));
  std::vector<float> whole = dlogits.values();
  ASSERT_EQ(blockGradients.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i)
    EXPECT_NEAR(blockGradients[i], whole[i], 1e-7) << "dlogits " << i;

  Tensor ignored = Tensor::integers({2}, {-100, -100});
  Tensor ignoredLoss(TESSERA_F32, {});
  Tensor twoRows = Tensor::floats(
      {2, 7}, std::vector<float>(allLogits.begin(), allLogits.begin() + 14));
  EXPECT_KERNEL_OK(tessera_cpu_cross_entropy(twoRows.get(), ignored.get(),
                                             targets.get(), ignoredLoss.get(),
                                             -100));
  EXPECT_EQ(ignoredLoss.at(0), 0.0f);

  Tensor wrongType = Tensor::integers({6}, targetValues, TESSERA_I32);
  EXPECT_NE(tessera_cpu_cross_entropy(twoRows.get(), ignored.get(),
                                      wrongType.get(), ignoredLoss.get(),
                                      -100),
            0);
  EXPECT_NE(std::string(tessera_cpu_last_error()).find("count_targets"),
            std::string::npos)
      << tessera_cpu_last_error();
}

} // namespace
