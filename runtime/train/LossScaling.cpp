//===- LossScaling.cpp - fp16 dynamic loss scaling ------------------------===//
//
// See LossScaling.h. Kept apart from the step loop so that the schedule of
// halvings and doublings is tested on its own (LossScalingTest.cpp).
//
//===----------------------------------------------------------------------===//

#include "LossScaling.h"

namespace tessera::train {

bool recordOverflow(const LossScalePolicy &policy, TrainingState &state) {
  state.cleanSteps = 0;
  if (++state.overflowStreak < policy.hysteresis)
    return false;
  state.lossScale /= 2;
  return true;
}

bool recordCleanStep(const LossScalePolicy &policy, TrainingState &state) {
  state.overflowStreak = 0;
  if (++state.cleanSteps < policy.window)
    return false;
  state.lossScale *= 2;
  state.cleanSteps = 0;
  return true;
}

} // namespace tessera::train
