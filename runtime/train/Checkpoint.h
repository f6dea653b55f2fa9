//===- Checkpoint.h - Saving and restoring a run ----------------*- C++ -*-===//
//
// Checkpoints, initial weights and --dump-params; see Checkpoint.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_CHECKPOINT_H
#define TESSERA_RUNTIME_TRAIN_CHECKPOINT_H

#include "Safetensors.h"
#include "TrainingState.h"

#include <string>

namespace tessera::train {

/// "<directory>/checkpoint_<step, 8 digits>.safetensors".
std::string checkpointPath(const std::string &directory, int64_t step);
/// The checkpoint with the highest step in `directory`, or "" if none.
std::string findLatestCheckpoint(const std::string &directory);
/// Creates `directory` (and its parents) if missing.
void ensureDirectory(const std::string &directory);

/// Writes the whole state atomically to `path`.
void saveCheckpoint(const std::string &path, const tessera_program &program,
                    const TrainingState &state);
/// Restores `state` (already allocated for `program`) from `path`. Throws
/// TrainError naming the tensor if the checkpoint belongs to another model:
/// a missing or extra tensor, or a shape mismatch.
void loadCheckpoint(const std::string &path, const tessera_program &program,
                    TrainingState &state);

/// Writes the parameters only (f32, ONNX names) for PyTorch.
void dumpParameters(const std::string &path, const tessera_program &program,
                    const TrainingState &state);

/// The gradients of a step (f32, parameter names and shapes), --dump-grads.
void dumpGradients(const std::string &path, const tessera_program &program,
                   const std::vector<std::vector<float>> &gradients,
                   int64_t step);

/// Checks that `file` (read from `path`) holds exactly the tensors named in
/// `expected`, with those shapes; throws naming the first offender.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};
void checkTensorSet(const std::string &path, const SafetensorsFile &file,
                    const std::vector<ExpectedTensor> &expected,
                    const char *modelName);

/// Converts a loaded tensor to `dtype` into `destination` (elementCount
/// elements), through tessera_cpu_cast when the dtypes differ.
void convertTensor(const std::string &path, const LoadedTensor &tensor,
                   int32_t dtype, void *destination);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_CHECKPOINT_H
