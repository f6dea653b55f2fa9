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
// index), so the values do not depend on the order tensors are visited.
//
//===----------------------------------------------------------------------===//

#include "InitialWeights.h"

#include "Checkpoint.h"
#include "Random.h"
#include "TrainError.h"

namespace tessera::train {
namespace {

constexpr uint64_t kInitPurpose = 0x1417;

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

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

void loadInitialWeights(const tessera_program &program,
                        const TrainOptions &options, TrainingState &state) {
  std::string path = options.weightsFile;
  if (path.empty() && program.weights_file)
    path = program.weights_file;
  bool random = options.init == InitKind::Random;
  bool needFile = !random || program.buffer_count > 0;
  if (needFile && path.empty())
    fail(random ? "the program has buffers but no weights file to read them "
                  "from; pass --weights FILE"
                : "no initial weights: the program was compiled without a "
                  "weights file; pass --weights FILE or --init random");

  if (!path.empty() && needFile) {
    SafetensorsFile file = readSafetensors(path);
    std::vector<ExpectedTensor> expected;
    for (int32_t i = 0; i < program.parameter_count; ++i)
      expected.push_back(
          {program.parameters[i].name, shapeOf(program.parameters[i])});
    for (int32_t i = 0; i < program.buffer_count; ++i)
      expected.push_back(
          {program.buffers[i].name, shapeOf(program.buffers[i])});
    checkTensorSet(path, file, expected,
                   program.model_name ? program.model_name : "(unnamed)");
    if (!random)
      for (int32_t i = 0; i < program.parameter_count; ++i)
        convertParameter(path, *file.find(program.parameters[i].name),
                         state.parameters[static_cast<size_t>(i)].data());
    for (int32_t i = 0; i < program.buffer_count; ++i)
      convertTensor(path, *file.find(program.buffers[i].name),
                    program.buffers[i].dtype,
                    state.buffers[static_cast<size_t>(i)].data());
  }
  if (random)
    for (int32_t i = 0; i < program.parameter_count; ++i)
      initializeRandomly(
          program.parameters[i],
          deriveSeed(state.seed, kInitPurpose, static_cast<uint64_t>(i)),
          state.parameters[static_cast<size_t>(i)]);
}

} // namespace tessera::train
