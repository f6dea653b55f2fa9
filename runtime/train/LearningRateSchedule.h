//===- LearningRateSchedule.h - Learning rate per step ----------*- C++ -*-===//
//
// The learning rate of each optimizer step; see LearningRateSchedule.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_LEARNINGRATESCHEDULE_H
#define TESSERA_RUNTIME_TRAIN_LEARNINGRATESCHEDULE_H

#include "Flags.h"

#include <cstdint>

namespace tessera::train {

class LearningRateSchedule {
public:
  LearningRateSchedule(ScheduleKind kind, double peak, int64_t warmupSteps,
                       int64_t totalSteps, double minRatio)
      : kind(kind), peak(peak), warmupSteps(warmupSteps),
        totalSteps(totalSteps), minRatio(minRatio) {}

  /// Learning rate of step `step`, counted from 1 like the metrics.
  double at(int64_t step) const;

private:
  ScheduleKind kind;
  double peak;
  int64_t warmupSteps;
  int64_t totalSteps;
  double minRatio;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_LEARNINGRATESCHEDULE_H
