//===- GradientSpikesTest.cpp - The spike detector's band and actions -----===//

#include "GradientSpikes.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessera::train;

namespace {

TrainOptions detecting(uint32_t actions, int64_t window = 4) {
  TrainOptions options;
  options.onSpike.mask = actions;
  options.onSpike.learningRateFactor = 0.5;
  options.spikeWindow = window;
  options.spikeSigma = 3;
  return options;
}

// Tests the band: the window's mean +- 3 sample deviations, judged only
// once the window is full; inside, nothing happens.
TEST(GradientSpikes, TheBandIsTheWindowsMeanAndSampleDeviation) {
  TrainOptions options = detecting(SpikeActions::Report);
  TrainingState state;
  for (double norm : {1.0, 2.0, 3.0, 4.0}) {
    SpikeResponse response = respondToGradientNorm(options, 1, norm, state);
    EXPECT_FALSE(response.judged) << norm;
  }
  SpikeResponse inside = respondToGradientNorm(options, 5, 6.0, state);
  ASSERT_TRUE(inside.judged);
  EXPECT_FALSE(inside.spike);
  EXPECT_DOUBLE_EQ(inside.mean, 2.5);
  const double deviation = std::sqrt(5.0 / 3.0); // (2.25+0.25+0.25+2.25)/3
  EXPECT_DOUBLE_EQ(inside.deviation, deviation);
  EXPECT_DOUBLE_EQ(inside.upper, 2.5 + 3 * deviation);
  EXPECT_DOUBLE_EQ(inside.lower, 2.5 - 3 * deviation);
  EXPECT_FALSE(inside.skip);
  EXPECT_EQ(inside.clip, 1);
  EXPECT_EQ(state.recentGradientNorms, (std::vector<double>{2, 3, 4, 6}));
  EXPECT_EQ(state.gradientSpikes, 0);
}

// Tests a spike above the band: counted, recorded at the band's edge, and
// each action's effect.
TEST(GradientSpikes, ASpikeAppliesItsActionsAndEntersClamped) {
  TrainOptions options =
      detecting(SpikeActions::Skip | SpikeActions::Clip |
                SpikeActions::LowerLearningRate | SpikeActions::Checkpoint);
  TrainingState state;
  state.recentGradientNorms = {1.0, 1.1, 0.9, 1.0};
  SpikeResponse response = respondToGradientNorm(options, 9, 50.0, state);
  ASSERT_TRUE(response.spike);
  EXPECT_TRUE(response.skip);
  EXPECT_TRUE(response.checkpoint);
  EXPECT_FALSE(response.stop);
  EXPECT_DOUBLE_EQ(response.clip, response.upper / 50.0);
  EXPECT_EQ(state.gradientSpikes, 1);
  EXPECT_DOUBLE_EQ(state.learningRateFactor, 0.5);
  EXPECT_EQ(state.recentGradientNorms,
            (std::vector<double>{1.1, 0.9, 1.0, response.upper}));
  // Each spike lowers the rate again.
  state.recentGradientNorms = {1.0, 1.1, 0.9, 1.0};
  respondToGradientNorm(options, 10, 50.0, state);
  EXPECT_DOUBLE_EQ(state.learningRateFactor, 0.25);
}

// Tests a norm below the band: a spike (the band is two-sided), nothing to
// clip; stop implies no update.
TEST(GradientSpikes, BelowTheBandIsASpikeWithNothingToClip) {
  TrainOptions options = detecting(SpikeActions::Clip | SpikeActions::Stop);
  TrainingState state;
  state.recentGradientNorms = {1.0, 1.1, 0.9, 1.0};
  SpikeResponse response = respondToGradientNorm(options, 9, 0.01, state);
  ASSERT_TRUE(response.spike);
  EXPECT_EQ(response.clip, 1);
  EXPECT_TRUE(response.stop);
  EXPECT_TRUE(response.skip);
  EXPECT_DOUBLE_EQ(state.recentGradientNorms.back(), response.lower);
}

// Tests what is never judged nor recorded: detection off, warm-up steps, a
// non-finite norm (an fp16 overflow); and that a resumed run with a
// smaller window keeps the newest norms.
TEST(GradientSpikes, WarmupOverflowsAndWindowChanges) {
  TrainingState state;
  TrainOptions off;
  EXPECT_FALSE(respondToGradientNorm(off, 1, 1.0, state).judged);
  EXPECT_TRUE(state.recentGradientNorms.empty());

  TrainOptions options = detecting(SpikeActions::Skip, 3);
  options.warmupSteps = 5;
  EXPECT_FALSE(respondToGradientNorm(options, 5, 1.0, state).judged);
  EXPECT_TRUE(state.recentGradientNorms.empty());
  EXPECT_FALSE(respondToGradientNorm(options, 6, INFINITY, state).judged);
  EXPECT_TRUE(state.recentGradientNorms.empty());

  state.recentGradientNorms = {9, 9, 1, 2, 3};
  SpikeResponse response = respondToGradientNorm(options, 7, 2.0, state);
  EXPECT_TRUE(response.judged);
  EXPECT_DOUBLE_EQ(response.mean, 2.0);
  EXPECT_EQ(state.recentGradientNorms, (std::vector<double>{2, 3, 2}));
}

TEST(GradientSpikes, ActionsAreSpelledAsTheFlag) {
  SpikeActions actions;
  actions.mask =
      SpikeActions::Stop | SpikeActions::LowerLearningRate | SpikeActions::Skip;
  actions.learningRateFactor = 0.3;
  EXPECT_EQ(spikeActionsText(actions), "skip,lower-lr=0.3,stop");
}

} // namespace
