//===- LearningRateSchedule.cpp - Warmup, then constant/cosine/linear -----===//
//
// Design: the schedule is a pure function of the step number, with no state,
// so a resumed run needs nothing but the step to continue the exact curve.
// Steps count from 1. With W warmup steps, step s <= W uses lr * s / W (the
// first step already moves, as in llm.c; lr * 0 would waste it). After warmup,
// progress p = (s - W) / (N - W) runs from just above 0 to 1 at the last step
// N, and the rate decays from lr to the floor lr * min-lr-ratio:
//   constant: lr (the floor is ignored)
//   cosine:   floor + (lr - floor) * (1 + cos(pi p)) / 2
//   linear:   lr - (lr - floor) * p
// So the last step of a decaying schedule runs exactly at the floor. Steps
// past N (a resume with a smaller --steps) stay at the floor.
//
//===----------------------------------------------------------------------===//

#include "LearningRateSchedule.h"

#include <algorithm>
#include <cmath>

namespace tessera::train {

double LearningRateSchedule::at(int64_t step) const {
  if (warmupSteps > 0 && step <= warmupSteps)
    return peak * static_cast<double>(step) / static_cast<double>(warmupSteps);
  if (kind == ScheduleKind::Constant)
    return peak;
  double floor = peak * minRatio;
  int64_t decaySteps = totalSteps - warmupSteps;
  double progress = decaySteps <= 0 ? 1.0
                                    : static_cast<double>(step - warmupSteps) /
                                          static_cast<double>(decaySteps);
  progress = std::clamp(progress, 0.0, 1.0);
  if (kind == ScheduleKind::Cosine)
    return floor + (peak - floor) * 0.5 * (1.0 + std::cos(M_PI * progress));
  return peak - (peak - floor) * progress;
}

} // namespace tessera::train
