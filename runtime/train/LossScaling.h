//===- LossScaling.h - fp16 dynamic loss scaling ---------------*- C++ -*-===//
//
// The scale fp16 programs multiply their loss by, adjusted once a step from
// whether the scaled gradients overflowed: GradScaler's recipe (halve on an
// overflow, double after --loss-scale-window clean steps in a row) with
// DeepSpeed's and Megatron's hysteresis (--loss-scale-hysteresis K: only the
// K-th overflow in a row halves, and every one after it while the overflows
// go on; a clean step starts the count again). K = 1 is GradScaler's.
//
// An overflowed step is always skipped (no AdamW), whether or not it halves
// the scale, and it restarts the clean-step window. The state lives in
// TrainingState, so a resumed run scales as the uninterrupted one.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_LOSSSCALING_H
#define TESSERA_RUNTIME_TRAIN_LOSSSCALING_H

#include "TrainingState.h"

#include <cstdint>

namespace tessera::train {

struct LossScalePolicy {
  /// Clean steps in a row after which the scale doubles (>= 1).
  int64_t window = 2000;
  /// Overflows in a row before the scale halves (>= 1).
  int64_t hysteresis = 1;
};

/// After a step whose scaled gradients overflowed: counts it and halves
/// state.lossScale when it is the hysteresis-th overflow in a row or later.
/// Returns whether it halved.
bool recordOverflow(const LossScalePolicy &policy, TrainingState &state);

/// After a clean (applied) step: resets the overflow count and doubles
/// state.lossScale once `window` clean steps have followed its last change
/// or overflow. Returns whether it doubled.
bool recordCleanStep(const LossScalePolicy &policy, TrainingState &state);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_LOSSSCALING_H
