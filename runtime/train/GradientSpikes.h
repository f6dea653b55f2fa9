//===- GradientSpikes.h - Gradient-norm spike detection --------*- C++ -*-===//
//
// People who train large models watch the global gradient norm: a step
// whose norm leaves the band of the recent ones (mean +- sigma x standard
// deviation) often comes before a divergence. With --on-spike the driver
// keeps the last --spike-window norms and judges every step against them;
// on a spike it does what the user chose, any of (TrainOptions::onSpike):
//   skip      no AdamW update this step (the step still counts, as an fp16
//             overflow does: data, schedule slot; not the bias correction);
//   clip      scale the gradients so that the norm is the band's upper
//             edge (below the band there is nothing to clip);
//   lower-lr=F  multiply the learning rate by F from this step on (each
//             spike again; the product is part of the state);
//   checkpoint  write a checkpoint after the step (with skip: of the
//             weights before the spike);
//   stop      no update, then end the run after the step (and its
//             checkpoint) with an error naming the step;
//   report    only the report, which every action also gives: a console
//             line and the metrics' "spike" fields.
//
// The band's statistics: the mean and the sample standard deviation of the
// window, computed afresh from the window in order each step (no running
// sums that would drift). Steps of the learning-rate warm-up (--warmup) are
// neither judged nor recorded (their norms move by design), nor are fp16
// steps whose gradients overflowed; the window fills first, so the first
// judged step is the (window + 1)-th recorded one. A spike enters the window
// clamped to the band's edge: one outlier barely moves the band, while a
// lasting change of scale still moves it, step by step, instead of making
// every later step a spike.
//
// Every rank judges the same agreed norm with the same state, so data, mesh
// and pipeline ranks all decide alike; the window, the learning-rate factor
// and the spike count are in TrainingState (and so in checkpoints), so a
// resumed run decides as the uninterrupted one.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_GRADIENTSPIKES_H
#define TESSERA_RUNTIME_TRAIN_GRADIENTSPIKES_H

#include "Flags.h"
#include "TrainingState.h"

#include <cstdint>
#include <string>

namespace tessera::train {

/// What one step's norm meant and what the step does about it.
struct SpikeResponse {
  /// Whether the norm was judged (detection on, past warm-up, a full
  /// window, a finite norm).
  bool judged = false;
  bool spike = false;
  /// The band it was judged against: the window's mean and deviation and
  /// the edges mean -+ sigma x deviation.
  double mean = 0, deviation = 0, lower = 0, upper = 0;
  /// The actions' effect on this step: no update, a clip factor (1: none),
  /// a checkpoint after the step, the end of the run after it.
  bool skip = false;
  double clip = 1;
  bool checkpoint = false;
  bool stop = false;
};

/// Judges step `step`'s global gradient norm (unscaled, before clipping)
/// against state's recent norms, records it, and on a spike applies the
/// actions of options.onSpike that change the state (the spike count, the
/// learning-rate factor). Nothing happens when detection is off.
SpikeResponse respondToGradientNorm(const TrainOptions &options, int64_t step,
                                    double norm, TrainingState &state);

/// The console line of a spike: the step, the norm, the band, the actions.
std::string describeSpike(const TrainOptions &options, int64_t step,
                          double norm, const SpikeResponse &response);

/// The actions as --on-spike spells them ("skip,lower-lr=0.5").
std::string spikeActionsText(const SpikeActions &actions);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_GRADIENTSPIKES_H
