//===- TrainingState.h - Everything a checkpoint must capture ---*- C++ -*-===//
//
// The complete state of a run between two steps. A resumed run that starts
// from an equal TrainingState (and the same flags and data) computes the same
// bits as one that never stopped, because nothing else carries over: the data
// order is a function of (seed, dataPosition), the learning rate of the step,
// and dropout seeds of (seed, step, micro-batch).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_TRAININGSTATE_H
#define TESSERA_RUNTIME_TRAIN_TRAININGSTATE_H

#include "tessera/runtime/program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::train {

struct TrainingState {
  /// Per program parameter, in program order: the fp32 master weights and
  /// AdamW's fp32 first and second moments. An empty moment vector means
  /// zeros (a fresh start holds no host memory for them), and after the
  /// backend's loadState the trainer releases all three (releaseTensors):
  /// the host copy of a large model would otherwise hold as much as the
  /// device, or beside an offloaded optimizer twice the state; storeState
  /// fills them again for a checkpoint.
  std::vector<std::vector<float>> parameters;
  std::vector<std::vector<float>> firstMoments;
  std::vector<std::vector<float>> secondMoments;
  /// Per program buffer: its bytes in the buffer's own dtype.
  std::vector<std::vector<unsigned char>> buffers;
  /// Training steps completed (the metrics' step of the last one).
  int64_t step = 0;
  /// AdamW updates applied: the step of AdamW's bias correction. It lags
  /// `step` by the fp16 steps skipped for overflowing gradients.
  int64_t optimizerStep = 0;
  /// The seed of the run (a resumed run keeps its checkpoint's).
  uint64_t seed = 0;
  /// Data samples consumed (DataLoader::getPosition).
  int64_t dataPosition = 0;
  /// fp16 dynamic loss scaling (LossScaling.h): the current scale, the
  /// clean steps since it last changed or overflowed, and the overflowed
  /// steps in a row (the hysteresis count).
  double lossScale = 1;
  int64_t cleanSteps = 0;
  int64_t overflowStreak = 0;
  /// Gradient-spike detection (GradientSpikes.h): the recent global norms
  /// the band comes from (oldest first), the product of the lower-lr
  /// factors applied, the spikes seen.
  std::vector<double> recentGradientNorms;
  double learningRateFactor = 1;
  int64_t gradientSpikes = 0;
  /// The run this state belongs to (newRunId at a fresh start; a resumed
  /// run keeps its checkpoint's), recorded in every checkpoint.
  std::string runId;
};

/// Elements of a tensor of this shape.
int64_t elementCount(const tessera_tensor_info &info);
std::vector<int64_t> shapeOf(const tessera_tensor_info &info);
std::string shapeText(const std::vector<int64_t> &shape);
/// A tessera_tensor over `data` with the shape of `info` and `dtype`.
tessera_tensor makeTensor(void *data, int32_t dtype,
                          const tessera_tensor_info &info);
/// Bytes per element of a tessera_dtype.
int64_t dtypeSize(int32_t dtype);
/// The index of the first of `count` f32 values that is not finite, or -1:
/// the check of weights read (a weights file), updated (AdamW on the host)
/// and written (checkpoints, dumps).
int64_t firstNonFinite(const float *values, int64_t count);

/// Sizes the vectors of `state` for `program` (zero-filled).
/// Sizes every parameter (zeros) and buffer; the moments too unless
/// `withMoments` is false (a fresh start: empty, meaning zeros).
void allocateState(const tessera_program &program, TrainingState &state,
                   bool withMoments = true);
/// Frees the parameters' and moments' host copies (the vectors stay, empty).
void releaseTensors(TrainingState &state);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_TRAININGSTATE_H
