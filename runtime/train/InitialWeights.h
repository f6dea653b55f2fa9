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

/// The seed of parameter `index`'s own --init random stream in a run seeded
/// `runSeed` (so its values do not depend on which thread draws them).
uint64_t randomInitSeed(uint64_t runSeed, int32_t index);

/// The --init random rule for one parameter (exposed for tests): N(0, 0.02)
/// for rank >= 2, ones for rank <= 1 whose name ends in "weight" or "scale"
/// (normalization scales), zeros for the rest (biases).
void initializeRandomly(const tessera_tensor_info &info, uint64_t seed,
                        std::vector<float> &values);

/// Whether `info` is a rotary embedding's frequencies as transformers'
/// rotary modules name and shape them: a rank-1 f32 buffer named
/// `inv_freq` or ending in `.inv_freq`. A graph-only export (the meta
/// device) has no values for it; --rope-theta defines them.
bool isRotaryFrequencies(const tessera_tensor_info &info);

/// The plain (unscaled) rotary frequencies of a head dim of 2 x count:
/// 1 / theta^(2i / (2 count)), i < count, computed in f64 and rounded once,
/// as transformers' default rope initialization defines them.
std::vector<float> rotaryFrequencies(double theta, size_t count);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_INITIALWEIGHTS_H
