//===- LossScalingTest.cpp - fp16 dynamic loss scaling with hysteresis ----===//

#include "LossScaling.h"

#include <gtest/gtest.h>

using namespace tessera::train;

namespace {

// Tests GradScaler's recipe (hysteresis 1): every overflow halves, the
// window of clean steps doubles, an overflow restarts the window.
TEST(LossScaling, WithoutHysteresisEveryOverflowHalves) {
  LossScalePolicy policy{3, 1};
  TrainingState state;
  state.lossScale = 1024;
  EXPECT_TRUE(recordOverflow(policy, state));
  EXPECT_EQ(state.lossScale, 512);
  EXPECT_FALSE(recordCleanStep(policy, state));
  EXPECT_FALSE(recordCleanStep(policy, state));
  EXPECT_TRUE(recordOverflow(policy, state));
  EXPECT_EQ(state.cleanSteps, 0);
  EXPECT_FALSE(recordCleanStep(policy, state));
  EXPECT_FALSE(recordCleanStep(policy, state));
  EXPECT_TRUE(recordCleanStep(policy, state));
  EXPECT_EQ(state.lossScale, 512);
}

// Tests hysteresis 3: two overflows in a row keep the scale, the third and
// every one after it halve, and a clean step starts the count again.
TEST(LossScaling, HysteresisHalvesFromTheKthOverflowInARow) {
  LossScalePolicy policy{100, 3};
  TrainingState state;
  state.lossScale = 1024;
  EXPECT_FALSE(recordOverflow(policy, state));
  EXPECT_FALSE(recordOverflow(policy, state));
  EXPECT_TRUE(recordOverflow(policy, state));
  EXPECT_TRUE(recordOverflow(policy, state));
  EXPECT_EQ(state.lossScale, 256);
  EXPECT_EQ(state.overflowStreak, 4);
  recordCleanStep(policy, state);
  EXPECT_EQ(state.overflowStreak, 0);
  EXPECT_FALSE(recordOverflow(policy, state));
  EXPECT_FALSE(recordOverflow(policy, state));
  EXPECT_EQ(state.lossScale, 256);
}

} // namespace
