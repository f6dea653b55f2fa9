//===- FuzzCheckpoint.cpp - Fuzz target for loadCheckpoint ----------------===//
//
// The bytes as a checkpoint of a small fixed program: two f32 parameters and
// an i64 buffer, the shapes of seeds/checkpoint (make-seeds.py). Only a file
// with exactly this tensor set gets past checkTensorSet to the conversions
// and the metadata, so the seeds are such files and the mutations start
// from them. An accepted checkpoint must leave a state a run can go on from:
// finite weights and moments, a positive finite loss scale and learning-rate
// factor, finite recent norms, non-negative counters.
//
//===----------------------------------------------------------------------===//

#include "FuzzTarget.h"

#include "Checkpoint.h"
#include "TrainError.h"
#include "TrainingState.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tessera::fuzz {
namespace {

const tessera_tensor_info kParameters[] = {
    {"layer.weight", TESSERA_F32, 2, {2, 3}},
    {"layer.bias", TESSERA_F32, 1, {3}},
};
const tessera_tensor_info kBuffers[] = {
    {"position_ids", TESSERA_I64, 1, {4}},
};

tessera_program makeProgram() {
  tessera_program program{};
  program.model_name = "fuzz-checkpoint";
  program.parameter_count = 2;
  program.parameters = kParameters;
  program.buffer_count = 1;
  program.buffers = kBuffers;
  return program;
}

[[noreturn]] void reportBrokenPromise(const char *promise) {
  std::fprintf(stderr, "loadCheckpoint accepted the file, but %s\n", promise);
  std::abort();
}

void checkLoadedState(const train::TrainingState &state) {
  for (const auto *tensors :
       {&state.parameters, &state.firstMoments, &state.secondMoments})
    for (const std::vector<float> &values : *tensors)
      if (train::firstNonFinite(values.data(),
                                static_cast<int64_t>(values.size())) >= 0)
        reportBrokenPromise("a weight or moment is not finite");
  if (!(state.lossScale > 0) || !std::isfinite(state.lossScale))
    reportBrokenPromise("the loss scale is not a positive finite number");
  if (!(state.learningRateFactor > 0) ||
      !std::isfinite(state.learningRateFactor))
    reportBrokenPromise(
        "the learning-rate factor is not a positive finite number");
  for (double norm : state.recentGradientNorms)
    if (!std::isfinite(norm))
      reportBrokenPromise("a recent gradient norm is not finite");
  if (state.step < 0 || state.optimizerStep < 0 || state.dataPosition < 0 ||
      state.cleanSteps < 0 || state.overflowStreak < 0 ||
      state.gradientSpikes < 0)
    reportBrokenPromise("a counter is negative");
}

} // namespace

bool readCheckpointInput(const uint8_t *data, size_t size) {
  static const tessera_program program = makeProgram();
  std::string path =
      writeScratchFile("checkpoint_00000001.safetensors", data, size);
  train::TrainingState state;
  train::allocateState(program, state);
  try {
    train::loadCheckpoint(path, program, state);
  } catch (const train::TrainError &) {
    return false;
  }
  checkLoadedState(state);
  return true;
}

} // namespace tessera::fuzz
