//===- LearningRateScheduleTest.cpp - Learning rate per step --------------===//

#include "LearningRateSchedule.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace tessera::train;

namespace {

// Tests that a constant schedule ignores the floor and ramps up in warmup.
TEST(LearningRateSchedule, ConstantWithWarmup) {
  LearningRateSchedule schedule(ScheduleKind::Constant, 0.1, 4, 10, 0.5);
  EXPECT_DOUBLE_EQ(schedule.at(1), 0.025);
  EXPECT_DOUBLE_EQ(schedule.at(2), 0.05);
  EXPECT_DOUBLE_EQ(schedule.at(4), 0.1);
  EXPECT_DOUBLE_EQ(schedule.at(5), 0.1);
  EXPECT_DOUBLE_EQ(schedule.at(10), 0.1);
  LearningRateSchedule noWarmup(ScheduleKind::Constant, 0.1, 0, 10, 0);
  EXPECT_DOUBLE_EQ(noWarmup.at(1), 0.1);
}

// Tests the cosine decay: half way between peak and floor at mid-decay,
// exactly the floor on the last step and after it.
TEST(LearningRateSchedule, Cosine) {
  LearningRateSchedule schedule(ScheduleKind::Cosine, 1.0, 2, 12, 0.1);
  EXPECT_DOUBLE_EQ(schedule.at(1), 0.5);
  EXPECT_DOUBLE_EQ(schedule.at(2), 1.0);
  // Decay over steps 3..12: progress (s - 2) / 10.
  EXPECT_DOUBLE_EQ(schedule.at(7), 0.1 + 0.9 * 0.5);
  EXPECT_NEAR(schedule.at(3), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.1)),
              1e-15);
  EXPECT_DOUBLE_EQ(schedule.at(12), 0.1);
  EXPECT_DOUBLE_EQ(schedule.at(20), 0.1);
  LearningRateSchedule toZero(ScheduleKind::Cosine, 2.0, 0, 4, 0);
  EXPECT_NEAR(toZero.at(2), 1.0, 1e-15);
  EXPECT_NEAR(toZero.at(4), 0.0, 1e-15);
}

// Tests the linear decay to the floor.
TEST(LearningRateSchedule, Linear) {
  LearningRateSchedule schedule(ScheduleKind::Linear, 1.0, 0, 10, 0.2);
  EXPECT_DOUBLE_EQ(schedule.at(1), 1.0 - 0.8 * 0.1);
  EXPECT_DOUBLE_EQ(schedule.at(5), 1.0 - 0.8 * 0.5);
  EXPECT_DOUBLE_EQ(schedule.at(10), 0.2);
  LearningRateSchedule warm(ScheduleKind::Linear, 1.0, 5, 5, 0.0);
  EXPECT_DOUBLE_EQ(warm.at(5), 1.0); // the warmup ends the run
}

} // namespace
