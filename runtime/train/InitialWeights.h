//===- InitialWeights.h - The weights a fresh run starts from ---*- C++ -*-===//
//
// The ONNX initializers (from the safetensors file tesserac writes, or
// --weights) or a random initialization; see InitialWeights.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_INITIALWEIGHTS_H
#define TESSERA_RUNTIME_TRAIN_INITIALWEIGHTS_H

#include "Flags.h"
#include "TrainingState.h"

namespace tessera::train {

/// Fills state.parameters and state.buffers (already allocated) for a run
/// that does not resume. Throws TrainError when the weights file is missing,
/// malformed, or belongs to another model.
void loadInitialWeights(const tessera_program &program,
                        const TrainOptions &options, TrainingState &state);

/// The --init random rule for one parameter (exposed for tests): N(0, 0.02)
/// for rank >= 2, ones for rank <= 1 whose name ends in "weight" or "scale"
/// (normalization scales), zeros for the rest (biases).
void initializeRandomly(const tessera_tensor_info &info, uint64_t seed,
                        std::vector<float> &values);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_INITIALWEIGHTS_H
