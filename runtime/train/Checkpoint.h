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
/// Every checkpoint_*.safetensors in `directory`, by step; none when the
/// directory does not exist.
std::vector<std::string> listCheckpoints(const std::string &directory);
/// A fresh run's check of its --checkpoint-dir: refuses one that holds
/// another run's checkpoints (a later --resume would continue that run),
/// unless `overwrite` (--overwrite-checkpoints), which deletes them.
void claimCheckpointDirectory(const std::string &directory, bool overwrite,
                              bool remove);
/// A new run's identity, recorded in its checkpoints ("run"): 16 hex
/// digits from the system's random source.
std::string newRunId();
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
/// elements), through tessera_cpu_cast when the dtypes differ. A float
/// tensor is never read as an integer one nor the other way round (an
/// integer or bool tensor where a weight belongs is another file's).
void convertTensor(const std::string &path, const LoadedTensor &tensor,
                   int32_t dtype, void *destination);
/// convertTensor to f32 for a parameter or a moment, which must be finite:
/// a NaN or infinity names the tensor and element (it would otherwise
/// surface steps later as a diverged run).
void convertParameter(const std::string &path, const LoadedTensor &tensor,
                      float *destination);
/// Refuses to write `count` f32 `values` (tensor `name` of the file `path`)
/// when one is not finite: no checkpoint or dump ever holds a non-finite
/// weight.
void requireFiniteValues(const std::string &path, const std::string &name,
                         const float *values, int64_t count);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_CHECKPOINT_H
