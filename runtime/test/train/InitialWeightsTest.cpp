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
#include "TrainingBackend.h"

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

// Tests that a random start drawn on every core is the one-thread draw: each
// parameter from its own stream, whatever the thread and the order (the
// largest first), over parameters of many sizes and both init rules.
TEST(InitialWeights, RandomStartOnEveryCoreIsTheOneThreadDraw) {
  std::vector<std::string> names;
  std::vector<tessera_tensor_info> parameters;
  for (int i = 0; i < 24; ++i)
    names.push_back("layers." + std::to_string(i) +
                    (i % 3 == 0 ? ".norm.weight" : ".proj.weight"));
  for (int i = 0; i < 24; ++i)
    parameters.push_back(
        i % 3 == 0 ? tensorInfo(names[i].c_str(), TESSERA_F32, {8 + i})
                   : tensorInfo(names[i].c_str(), TESSERA_F32,
                                {1 + (i * 7) % 13, 64 + 5 * i}));
  tessera_program program{};
  program.parameter_count = static_cast<int32_t>(parameters.size());
  program.parameters = parameters.data();
  TrainingState state;
  allocateState(program, state, /*withMoments=*/false);
  state.seed = 1234;
  loadInitialWeights(program, randomStart(0), state);
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    std::vector<float> expected(state.parameters[i].size());
    initializeRandomly(parameters[i], randomInitSeed(1234, i), expected);
    EXPECT_EQ(state.parameters[i], expected) << names[i];
  }
}

// Tests the fresh start's memory: the moments are empty (zeros no host
// memory holds), flattening them writes zeros over whatever was there, and
// releaseTensors frees the parameters too once a backend holds them.
TEST(InitialWeights, FreshMomentsAreZerosNoHostMemoryHolds) {
  std::vector<tessera_tensor_info> parameters = {
      tensorInfo("a.weight", TESSERA_F32, {3, 4}),
      tensorInfo("b.bias", TESSERA_F32, {5})};
  tessera_program program{};
  program.parameter_count = 2;
  program.parameters = parameters.data();
  TrainingState state;
  allocateState(program, state, /*withMoments=*/false);
  ASSERT_EQ(state.firstMoments.size(), 2u);
  EXPECT_TRUE(state.firstMoments[0].empty());
  EXPECT_TRUE(state.secondMoments[1].empty());
  ParameterLayout layout(program);
  std::vector<float> flat(static_cast<size_t>(layout.totalElements()), 7.0f);
  flattenF32(layout, state.firstMoments, flat.data());
  for (int32_t i = 0; i < layout.size(); ++i)
    for (int64_t e = 0; e < layout.count(i); ++e)
      EXPECT_EQ(flat[static_cast<size_t>(layout.offset(i) + e)], 0.0f);
  releaseTensors(state);
  EXPECT_EQ(state.parameters.size(), 2u);
  EXPECT_EQ(state.parameters[0].capacity(), 0u);
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
