//===- InitialWeights.cpp - ONNX initializers or a random start -----------===//
//
// Design: by default a run starts from the ONNX model's initializers, which
// tesserac writes next to the executable as safetensors (program->
// weights_file); --weights FILE names another such file. The file must hold
// exactly the program's parameters and buffers (extra or missing names and
// shape mismatches are errors naming the tensor, as for checkpoints); any
// float dtype is converted to the f32 master copy.
//
// --init random replaces the parameters (not the buffers, which may be
// constants the graph depends on, such as position ids; they still come from
// the weights file when the program has any) with the usual Transformer
// initialization: N(0, 0.02) for matrices and embeddings (rank >= 2), ones
// for rank-1 tensors whose name ends in "weight" or "scale" (LayerNorm and
// RMSNorm scales, by the exporters' naming), zeros for the rest (biases).
// Each parameter draws from its own stream, seeded from (seed, parameter
// index), so the values do not depend on the order tensors are visited:
// the parameters are drawn on every host core at once (a Llama 3 8B's 8e9
// draws take minutes on one), with the same bits as one thread.
//
// --rope-theta fills the buffers that are rotary frequencies (by
// transformers' name for them, `inv_freq`) with the plain rotary formula, so
// a graph-only export, whose only buffers they usually are, trains from
// --init random with no weights file at all. It is never guessed: the base
// is a model's configuration (10,000 for Llama 2, 500,000 for Llama 3, 10^6
// for Qwen2), absent from the graph, and a wrong one trains a different
// model without any error. Scaled variants (Llama 3.1's, YaRN) are not this
// formula and still need their file. Given, it wins over a weights file's
// copy of the frequencies.
//
//===----------------------------------------------------------------------===//

#include "InitialWeights.h"

#include "Checkpoint.h"
#include "HostThreadPool.h"
#include "Random.h"
#include "TrainError.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace tessera::train {
namespace {

constexpr uint64_t kInitPurpose = 0x1417;

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

uint64_t randomInitSeed(uint64_t runSeed, int32_t index) {
  return deriveSeed(runSeed, kInitPurpose, static_cast<uint64_t>(index));
}

void initializeRandomly(const tessera_tensor_info &info, uint64_t seed,
                        std::vector<float> &values) {
  if (info.rank >= 2) {
    RandomGenerator generator(seed);
    for (float &value : values)
      value = static_cast<float>(0.02 * generator.nextNormal());
    return;
  }
  std::string name = info.name;
  float fill =
      endsWith(name, "weight") || endsWith(name, "scale") ? 1.0f : 0.0f;
  for (float &value : values)
    value = fill;
}

bool isRotaryFrequencies(const tessera_tensor_info &info) {
  std::string name = info.name;
  return info.rank == 1 && info.dtype == TESSERA_F32 &&
         (name == "inv_freq" || endsWith(name, ".inv_freq"));
}

std::vector<float> rotaryFrequencies(double theta, size_t count) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = static_cast<float>(
        1.0 / std::pow(theta, static_cast<double>(2 * i) /
                                  static_cast<double>(2 * count)));
  return values;
}

void loadInitialWeights(const tessera_program &program,
                        const TrainOptions &options, TrainingState &state) {
  std::string path = options.weightsFile;
  if (path.empty() && program.weights_file)
    path = program.weights_file;
  bool random = options.init == InitKind::Random;
  // The buffers --rope-theta defines, and the names of the others.
  std::vector<bool> defined(static_cast<size_t>(program.buffer_count), false);
  std::string undefinedNames, rotaryNames;
  for (int32_t i = 0; i < program.buffer_count; ++i) {
    bool rotary = isRotaryFrequencies(program.buffers[i]);
    defined[static_cast<size_t>(i)] = rotary && options.ropeTheta > 0;
    std::string &names = rotary ? rotaryNames : undefinedNames;
    if (!defined[static_cast<size_t>(i)])
      names += std::string(names.empty() ? "" : ", ") + program.buffers[i].name;
  }
  bool needFile = !random || !undefinedNames.empty() || !rotaryNames.empty();
  if (needFile && path.empty()) {
    if (!random)
      fail("no initial weights: the program was compiled without a weights "
           "file; pass --weights FILE or --init random");
    if (undefinedNames.empty())
      fail("the program's rotary frequencies (" + rotaryNames +
           ") have no values: pass --rope-theta THETA (the model "
           "configuration's rope_theta) or --weights FILE");
    fail("the program has buffers (" + undefinedNames +
         ") but no weights file to read them from; pass --weights FILE");
  }

  if (!path.empty() && needFile) {
    SafetensorsFile file = readSafetensors(path);
    std::vector<ExpectedTensor> expected;
    for (int32_t i = 0; i < program.parameter_count; ++i)
      expected.push_back(
          {program.parameters[i].name, shapeOf(program.parameters[i])});
    // A defined buffer the file also holds is checked, not read.
    for (int32_t i = 0; i < program.buffer_count; ++i)
      if (!defined[static_cast<size_t>(i)] || file.find(program.buffers[i].name))
        expected.push_back(
            {program.buffers[i].name, shapeOf(program.buffers[i])});
    checkTensorSet(path, file, expected,
                   program.model_name ? program.model_name : "(unnamed)");
    if (!random)
      for (int32_t i = 0; i < program.parameter_count; ++i)
        convertParameter(path, *file.find(program.parameters[i].name),
                         state.parameters[static_cast<size_t>(i)].data());
    for (int32_t i = 0; i < program.buffer_count; ++i)
      if (!defined[static_cast<size_t>(i)])
        convertTensor(path, *file.find(program.buffers[i].name),
                      program.buffers[i].dtype,
                      state.buffers[static_cast<size_t>(i)].data());
  }
  for (int32_t i = 0; i < program.buffer_count; ++i)
    if (defined[static_cast<size_t>(i)]) {
      std::vector<float> values = rotaryFrequencies(
          options.ropeTheta,
          static_cast<size_t>(program.buffers[i].shape[0]));
      std::vector<unsigned char> &bytes =
          state.buffers[static_cast<size_t>(i)];
      std::memcpy(bytes.data(), values.data(), values.size() * sizeof(float));
    }
  if (!random)
    return;
  // The largest first, so no core is left with a big tensor at the end.
  std::vector<int32_t> order(static_cast<size_t>(program.parameter_count));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return elementCount(program.parameters[a]) >
           elementCount(program.parameters[b]);
  });
  HostThreadPool pool;
  pool.run(static_cast<int64_t>(order.size()), [&](int64_t k) {
    int32_t i = order[static_cast<size_t>(k)];
    initializeRandomly(program.parameters[i], randomInitSeed(state.seed, i),
                       state.parameters[static_cast<size_t>(i)]);
  });
}

} // namespace tessera::train
