//===- InitialWeightsTest.cpp - Where a fresh run's weights come from -----===//
//
// The rotary frequencies --rope-theta defines (a graph-only export has no
// values for them): their formula, which buffers they are, and the run that
// then needs no weights file, next to the messages of the runs that still
// do.
//
//===----------------------------------------------------------------------===//

#include "InitialWeights.h"
#include "TrainError.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace tessera::train;

namespace {

tessera_tensor_info tensorInfo(const char *name, int32_t dtype,
                               std::vector<int64_t> shape) {
  tessera_tensor_info info{};
  info.name = name;
  info.dtype = dtype;
  info.rank = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i)
    info.shape[i] = shape[i];
  return info;
}

/// A program of one [4, 4] parameter and `buffers`, compiled without a
/// weights file, and the state a fresh run allocates for it.
struct FreshRun {
  std::vector<tessera_tensor_info> parameters = {
      tensorInfo("layers.0.mlp.weight", TESSERA_F32, {4, 4})};
  std::vector<tessera_tensor_info> buffers;
  tessera_program program{};
  TrainingState state;

  explicit FreshRun(std::vector<tessera_tensor_info> programBuffers)
      : buffers(std::move(programBuffers)) {
    program.model_name = "graph-only";
    program.parameter_count = static_cast<int32_t>(parameters.size());
    program.parameters = parameters.data();
    program.buffer_count = static_cast<int32_t>(buffers.size());
    program.buffers = buffers.data();
    state.parameters.assign(1, std::vector<float>(16));
    for (const tessera_tensor_info &buffer : buffers)
      state.buffers.emplace_back(
          static_cast<size_t>(elementCount(buffer)) * 4);
  }

  /// loadInitialWeights' error message, or "" when it succeeds.
  std::string load(const TrainOptions &options) {
    try {
      loadInitialWeights(program, options, state);
      return "";
    } catch (const TrainError &error) {
      return error.what();
    }
  }
};

TrainOptions randomStart(double ropeTheta) {
  TrainOptions options;
  options.init = InitKind::Random;
  options.ropeTheta = ropeTheta;
  return options;
}

// Tests the plain rotary formula at a base whose powers are exact: 10^4 over
// a head dim of 8 gives 1, 1/10, 1/100, 1/1000.
TEST(InitialWeights, RotaryFrequenciesAreTheUnscaledFormula) {
  std::vector<float> values = rotaryFrequencies(1e4, 4);
  ASSERT_EQ(values.size(), 4u);
  EXPECT_FLOAT_EQ(values[0], 1.0f);
  EXPECT_FLOAT_EQ(values[1], 0.1f);
  EXPECT_FLOAT_EQ(values[2], 0.01f);
  EXPECT_FLOAT_EQ(values[3], 0.001f);
}

// Tests which buffers are rotary frequencies: transformers' name for them,
// rank 1 and f32; nothing else that merely resembles it.
TEST(InitialWeights, RotaryFrequenciesAreRecognisedByNameRankAndType) {
  EXPECT_TRUE(isRotaryFrequencies(
      tensorInfo("model.rotary_emb.inv_freq", TESSERA_F32, {32})));
  EXPECT_TRUE(isRotaryFrequencies(tensorInfo("inv_freq", TESSERA_F32, {8})));
  EXPECT_FALSE(isRotaryFrequencies(
      tensorInfo("model.rotary_emb.inv_freq", TESSERA_F32, {2, 8})));
  EXPECT_FALSE(isRotaryFrequencies(
      tensorInfo("model.rotary_emb.inv_freq", TESSERA_BF16, {8})));
  EXPECT_FALSE(isRotaryFrequencies(
      tensorInfo("model.my_inv_freq", TESSERA_F32, {8})));
}

// Tests that a graph-only program whose only buffer is the rotary
// frequencies starts from --init random --rope-theta with no file, the
// buffer holding the formula's values.
TEST(InitialWeights, RopeThetaDefinesTheFrequenciesWithoutAFile) {
  FreshRun run({tensorInfo("model.rotary_emb.inv_freq", TESSERA_F32, {4})});
  ASSERT_EQ(run.load(randomStart(1e4)), "");
  std::vector<float> values(4);
  std::memcpy(values.data(), run.state.buffers[0].data(), 16);
  EXPECT_EQ(values, rotaryFrequencies(1e4, 4));
}

// Tests the messages of the runs that still need a file: the frequencies
// without --rope-theta (naming the flag and the buffer), and a buffer that
// is not rotary frequencies (naming it).
TEST(InitialWeights, MissingValuesNameTheBuffersAndTheWay) {
  FreshRun rotary({tensorInfo("model.rotary_emb.inv_freq", TESSERA_F32, {4})});
  std::string message = rotary.load(randomStart(0));
  EXPECT_NE(message.find("rotary frequencies (model.rotary_emb.inv_freq)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--rope-theta"), std::string::npos) << message;

  FreshRun positions(
      {tensorInfo("model.rotary_emb.inv_freq", TESSERA_F32, {4}),
       tensorInfo("model.position_ids", TESSERA_I64, {1, 16})});
  message = positions.load(randomStart(1e4));
  EXPECT_NE(message.find("buffers (model.position_ids) but no weights file"),
            std::string::npos)
      << message;
}

} // namespace
