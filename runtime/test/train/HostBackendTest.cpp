//===- HostBackendTest.cpp - The driver's host backend on its own ---------===//
//
// A hand-written program whose gradients are known numbers (micro-batch call
// c writes (c + 1) * (e + 1) / 8 * loss_scale into element e of every
// gradient), so the flat buffers, the accumulation over micro-batches, the
// norm and AdamW can be checked exactly against the CPU kernels.
//
//===----------------------------------------------------------------------===//

#include "HostBackend.h"
#include "TrainError.h"
#include "TrainTestSupport.h"

#include <gtest/gtest.h>

#include "../../cpu/DataTypes.h"

#include <cmath>

using namespace tessera::train;

namespace {

const tessera_tensor_info kParameters[] = {
    {"layer.weight", TESSERA_F32, 2, {3, 4}},
    {"layer.bias", TESSERA_F32, 1, {5}},
};

struct Calls {
  int count = 0;
  const tessera_step_context *lastContext = nullptr;
  /// The last call's parameters as it got them: dtype, and values widened.
  std::vector<int32_t> parameterDtypes;
  std::vector<std::vector<float>> parameterValues;
};
Calls calls;

float knownGradient(int call, int64_t element, float lossScale) {
  return static_cast<float>(call + 1) * static_cast<float>(element + 1) /
         8.0f * lossScale;
}

int knownProgram(const tessera_step_context *context,
                 const tessera_tensor *parameters,
                 const tessera_tensor * /*buffers*/,
                 const tessera_tensor * /*tokens*/,
                 const tessera_tensor * /*targets*/, float lossScale,
                 uint64_t /*seed*/, float *loss, tessera_tensor *gradients) {
  calls.lastContext = context;
  calls.parameterDtypes.clear();
  calls.parameterValues.clear();
  for (int i = 0; i < 2; ++i) {
    tessera_tensor widened = parameters[i];
    calls.parameterValues.emplace_back(
        static_cast<size_t>(elementCount(kParameters[i])));
    widened.data = calls.parameterValues.back().data();
    widened.dtype = TESSERA_F32;
    calls.parameterDtypes.push_back(parameters[i].dtype);
    if (tessera_cpu_cast(&parameters[i], &widened) != 0)
      return 1;
  }
  for (int i = 0; i < 2; ++i) {
    tessera_tensor &gradient = gradients[i];
    int64_t count = 1;
    for (int32_t d = 0; d < gradient.rank; ++d)
      count *= gradient.shape[d];
    std::vector<float> values(static_cast<size_t>(count));
    for (int64_t e = 0; e < count; ++e)
      values[static_cast<size_t>(e)] = knownGradient(calls.count, e, lossScale);
    tessera_tensor source = gradient;
    source.data = values.data();
    source.dtype = TESSERA_F32;
    if (tessera_cpu_cast(&source, &gradient) != 0)
      return 1;
  }
  *loss = static_cast<float>(calls.count + 1);
  ++calls.count;
  return 0;
}

tessera_program programOf(int32_t precision) {
  tessera_program program{};
  program.model_name = "known.onnx";
  program.precision = precision;
  program.batch = 2;
  program.sequence = 3;
  program.vocabulary = 8;
  program.parameter_count = 2;
  program.parameters = kParameters;
  program.forward_backward = knownProgram;
  program.device = TESSERA_DEVICE_HOST;
  return program;
}

/// A bf16 program that reads the weight as its compute copy and the bias
/// as f32 (what a mixed-precision export reads as f32: embedding tables).
tessera_program mixedProgram() {
  static const int32_t stepDtypes[] = {TESSERA_BF16, TESSERA_F32};
  tessera_program program = programOf(TESSERA_PRECISION_BF16);
  program.parameter_step_dtypes = stepDtypes;
  return program;
}

TrainingState stateOf(const tessera_program &program) {
  return tessera_train_test::knownState(program, 0.1f);
}

class HostBackendTest : public ::testing::Test {
protected:
  void SetUp() override { calls = Calls(); }
};

TEST_F(HostBackendTest, StateRoundTripsThroughTheFlatBuffers) {
  tessera_program program = programOf(TESSERA_PRECISION_FP32);
  TrainOptions options;
  std::unique_ptr<TrainingBackend> backend = makeHostBackend(program, options);
  EXPECT_EQ(backend->device(), TESSERA_DEVICE_HOST);
  TrainingState state = stateOf(program);
  backend->loadState(state);

  FlatBuffer master = backend->masterWeights();
  const ParameterLayout &layout = backend->getLayout();
  ASSERT_EQ(master.elements, layout.totalElements());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(master.data) % 256, 0u);
  const auto *flat = static_cast<const float *>(master.data);
  EXPECT_EQ(flat[layout.offset(1) + 4], state.parameters[1][4]);
  for (int64_t gap = layout.count(0); gap < layout.offset(1); ++gap)
    EXPECT_EQ(flat[gap], 0.0f);

  TrainingState copy = stateOf(program);
  for (auto &tensor : copy.parameters)
    for (float &value : tensor)
      value = -1;
  backend->storeState(copy);
  EXPECT_EQ(copy.parameters, state.parameters);
  EXPECT_EQ(copy.firstMoments, state.firstMoments);
  EXPECT_EQ(copy.secondMoments, state.secondMoments);
}

TEST_F(HostBackendTest, MicroBatchesAccumulateInF32) {
  for (int32_t precision : {TESSERA_PRECISION_FP32, TESSERA_PRECISION_BF16}) {
    SCOPED_TRACE("precision " + std::to_string(precision));
    calls = Calls();
    tessera_program program = programOf(precision);
    TrainOptions options;
    options.gradientAccumulation = 3;
    std::unique_ptr<TrainingBackend> backend =
        makeHostBackend(program, options);
    backend->loadState(stateOf(program));
    double losses = 0;
    for (int64_t micro = 0; micro < 3; ++micro)
      losses += backend->runMicroBatch(micro, 2.0f, 0);
    EXPECT_EQ(losses, 1 + 2 + 3);
    FlatBuffer sums = backend->optimizerGradients();
    EXPECT_EQ(sums.dtype, TESSERA_F32);
    EXPECT_NE(sums.data, backend->computeGradients().data);
    EXPECT_EQ(backend->computeGradients().dtype,
              precision == TESSERA_PRECISION_FP32 ? TESSERA_F32 : TESSERA_BF16);
    std::vector<std::vector<float>> gradients =
        backend->copyOptimizerGradients();
    double squares = 0;
    for (size_t i = 0; i < 2; ++i)
      for (size_t e = 0; e < gradients[i].size(); ++e) {
        // Every value here is exact in bf16: (e + 1) / 4 * (1 + 2 + 3).
        float expected = knownGradient(0, static_cast<int64_t>(e), 2.0f) +
                         knownGradient(1, static_cast<int64_t>(e), 2.0f) +
                         knownGradient(2, static_cast<int64_t>(e), 2.0f);
        EXPECT_EQ(gradients[i][e], expected) << i << ", " << e;
        squares += static_cast<double>(expected) * expected;
      }
    EXPECT_DOUBLE_EQ(backend->gradientSumOfSquares(), squares);
    // The next step's first micro-batch overwrites the sums.
    backend->runMicroBatch(0, 1.0f, 0);
    EXPECT_EQ(backend->copyOptimizerGradients()[1][2],
              knownGradient(3, 2, 1.0f));
  }
}

// Tests that the norm over flagged parameters (a mesh rank's first
// replicas) sums exactly those parameters' squares, whole or restricted to
// pieces (ZeRO-1's shard), and nothing of the others.
TEST_F(HostBackendTest, NormCountsOnlyTheFlaggedParameters) {
  tessera_program program = programOf(TESSERA_PRECISION_FP32);
  TrainOptions options;
  std::unique_ptr<TrainingBackend> backend = makeHostBackend(program, options);
  backend->loadState(stateOf(program));
  backend->runMicroBatch(0, 1.0f, 0);
  std::vector<std::vector<float>> gradients = backend->copyOptimizerGradients();
  ASSERT_EQ(gradients.size(), 2u);
  std::vector<double> squares(2, 0.0);
  for (size_t i = 0; i < 2; ++i)
    for (float value : gradients[i])
      squares[i] += static_cast<double>(value) * value;
  ASSERT_GT(squares[0], 0);
  ASSERT_GT(squares[1], 0);
  EXPECT_DOUBLE_EQ(backend->gradientSumOfSquares({true, false}), squares[0]);
  EXPECT_DOUBLE_EQ(backend->gradientSumOfSquares({false, true}), squares[1]);
  EXPECT_EQ(backend->gradientSumOfSquares({false, false}), 0.0);
  EXPECT_DOUBLE_EQ(backend->gradientSumOfSquares({true, true}),
                   backend->gradientSumOfSquares());
  // Restricted to the first element of each parameter.
  const ParameterLayout &layout = backend->getLayout();
  backend->restrictOptimizer(
      {{0, layout.offset(0), 1}, {1, layout.offset(1), 1}});
  double first = static_cast<double>(gradients[1][0]) * gradients[1][0];
  EXPECT_DOUBLE_EQ(backend->gradientSumOfSquares({false, true}), first);
}

TEST_F(HostBackendTest, OneMicroBatchNeedsNoAccumulator) {
  tessera_program program = programOf(TESSERA_PRECISION_BF16);
  TrainOptions options;
  std::unique_ptr<TrainingBackend> backend = makeHostBackend(program, options);
  EXPECT_EQ(backend->optimizerGradients().data,
            backend->computeGradients().data);
  EXPECT_EQ(backend->optimizerGradients().dtype, TESSERA_BF16);
}

TEST_F(HostBackendTest, AdamWMatchesTheKernelPerParameterWithNoDecay) {
  tessera_program program = programOf(TESSERA_PRECISION_FP32);
  TrainOptions options;
  options.noDecayPattern = "bias$";
  std::unique_ptr<TrainingBackend> backend = makeHostBackend(program, options);
  TrainingState expected = stateOf(program);
  backend->loadState(expected);
  backend->runMicroBatch(0, 4.0f, 0);
  AdamWUpdate update;
  update.step = 2;
  update.learningRate = 1e-2;
  update.beta1 = 0.9;
  update.beta2 = 0.95;
  update.epsilon = 1e-8;
  update.weightDecay = 0.1;
  update.gradientScale = 0.25;
  backend->applyAdamW(update);
  TrainingState actual = stateOf(program);
  backend->storeState(actual);

  for (int32_t i = 0; i < 2; ++i) {
    auto index = static_cast<size_t>(i);
    std::vector<float> gradient(expected.parameters[index].size());
    for (size_t e = 0; e < gradient.size(); ++e)
      gradient[e] = knownGradient(0, static_cast<int64_t>(e), 4.0f);
    const tessera_tensor_info &info = kParameters[i];
    tessera_tensor p =
        makeTensor(expected.parameters[index].data(), TESSERA_F32, info);
    tessera_tensor g = makeTensor(gradient.data(), TESSERA_F32, info);
    tessera_tensor m =
        makeTensor(expected.firstMoments[index].data(), TESSERA_F32, info);
    tessera_tensor v =
        makeTensor(expected.secondMoments[index].data(), TESSERA_F32, info);
    ASSERT_EQ(tessera_cpu_adamw(&p, &g, &m, &v, 2, 1e-2, 0.9, 0.95, 1e-8,
                                i == 0 ? 0.1 : 0.0, 0.25),
              0);
  }
  EXPECT_EQ(actual.parameters, expected.parameters);
  EXPECT_EQ(actual.firstMoments, expected.firstMoments);
  EXPECT_EQ(actual.secondMoments, expected.secondMoments);
}

TEST_F(HostBackendTest, TheProgramGetsTheBackendsStepContext) {
  tessera_program program = programOf(TESSERA_PRECISION_FP32);
  TrainOptions options;
  std::unique_ptr<TrainingBackend> backend = makeHostBackend(program, options);
  int marker = 0;
  backend->stepContext().gradient_ready_user = &marker;
  backend->runMicroBatch(0, 1.0f, 0);
  ASSERT_EQ(calls.lastContext, &backend->stepContext());
  EXPECT_EQ(calls.lastContext->gradient_ready_user, &marker);
  EXPECT_EQ(calls.lastContext->stream, nullptr);
  EXPECT_EQ(backend->stream(), nullptr);
}

/// `values` rounded to bf16 and widened back: what a bf16 copy holds.
std::vector<float> roundedToBf16(const std::vector<float> &values) {
  std::vector<float> rounded(values.size());
  for (size_t e = 0; e < values.size(); ++e)
    rounded[e] = tessera::cpu::bf16ToFloat(tessera::cpu::floatToBf16(values[e]));
  return rounded;
}

// Tests a program that reads its weight as the bf16 compute copy and its
// bias as the master (program.h's parameter_step_dtypes): the step gets the
// copy, the master rounded, after the load and after every AdamW update,
// including one that covered only a piece (ZeRO-1), once the copies are
// refreshed.
TEST_F(HostBackendTest, TheStepReadsComputeCopiesTheOptimizerKeepsCurrent) {
  tessera_program program = mixedProgram();
  TrainOptions options;
  std::unique_ptr<TrainingBackend> backend = makeHostBackend(program, options);
  EXPECT_TRUE(backend->readsComputeCopy(0));
  EXPECT_FALSE(backend->readsComputeCopy(1));
  TrainingState state = stateOf(program);
  // Values bf16 cannot hold, so a copy that is not rounded shows.
  state.parameters[0][5] = 1.0f + 1.0f / 1024.0f;
  backend->loadState(state);

  auto expectCopies = [&](const char *when) {
    SCOPED_TRACE(when);
    TrainingState now = stateOf(program);
    backend->storeState(now);
    backend->runMicroBatch(0, 1.0f, 0);
    ASSERT_EQ(calls.parameterDtypes, (std::vector<int32_t>{TESSERA_BF16,
                                                           TESSERA_F32}));
    EXPECT_EQ(calls.parameterValues[0], roundedToBf16(now.parameters[0]));
    EXPECT_EQ(calls.parameterValues[1], now.parameters[1]);
  };
  expectCopies("after the load");
  EXPECT_NE(calls.parameterValues[0][5], state.parameters[0][5]);

  AdamWUpdate update;
  update.learningRate = 1e-2;
  update.gradientScale = 0.25;
  backend->applyAdamW(update);
  expectCopies("after an update of every element");

  // An update of elements 0..4 of the weight only (a ZeRO-1 shard) rounds
  // their copies alone; a master written behind the optimizer's back (as
  // ZeRO-1's all-gather writes the other shards) reaches the copy only
  // through refreshComputeCopies.
  const ParameterLayout &layout = backend->getLayout();
  backend->restrictOptimizer({{0, layout.offset(0), 5}});
  update.step = 2;
  backend->applyAdamW(update);
  auto *flat = static_cast<float *>(backend->masterWeights().data);
  flat[layout.offset(0) + 7] = 3.0f;
  TrainingState masters = stateOf(program);
  backend->storeState(masters);
  backend->runMicroBatch(0, 1.0f, 0);
  std::vector<float> rounded = roundedToBf16(masters.parameters[0]);
  for (size_t e = 0; e < 5; ++e)
    EXPECT_EQ(calls.parameterValues[0][e], rounded[e]) << "element " << e;
  EXPECT_NE(calls.parameterValues[0][7], 3.0f);
  backend->refreshComputeCopies();
  expectCopies("after a piece's update and the refresh");
}

// Tests that a backend holding a ZeRO-1 shard (ParameterLayout::holdShard)
// allocates masters and moments for its pieces alone, reads the whole state
// at load into what the step reads (the bf16 copy of the weight, the f32
// mirror of the bias it reads as f32), each buffer holding its bucket only,
// updates the pieces bit for bit as a whole-state backend restricted to them
// does, and gives the whole state back only through gatherState (rank 0's
// checkpoint).
TEST_F(HostBackendTest, AShardedStateHoldsItsPiecesOnly) {
  tessera_program program = mixedProgram();
  TrainOptions options;
  ParameterLayout layout(program);
  const std::vector<ParameterLayout::Piece> pieces = {
      {0, layout.offset(0) + 2, 7, -1}, {1, layout.offset(1) + 1, 3, -1}};
  ParameterLayout sharded = layout;
  sharded.holdShard(pieces, tessera_train_test::spanPerParameter(layout));
  std::unique_ptr<TrainingBackend> whole = makeHostBackend(program, options);
  std::unique_ptr<TrainingBackend> backend =
      makeHostBackend(program, options, &sharded);
  ASSERT_TRUE(backend->holdsShardOnly());
  EXPECT_FALSE(whole->holdsShardOnly());
  const ResidentState resident = backend->residentState();
  EXPECT_EQ(resident.masters, 2 * 128 * 4);
  EXPECT_EQ(resident.moments, 2 * resident.masters);
  // The copies are the weight's bucket alone, the mirrors the bias's (read
  // as f32): neither keeps room for the other.
  const int64_t weightBucket = ParameterLayout::aligned(layout.count(0));
  EXPECT_EQ(resident.stepCopies, weightBucket * 2 + 128 * 4);
  EXPECT_EQ(resident.gradients, layout.totalElements() * 2);
  EXPECT_EQ(whole->residentState().masters, layout.totalElements() * 4);

  TrainingState state = stateOf(program);
  state.parameters[0][5] = 1.0f + 1.0f / 1024.0f;
  whole->loadState(state);
  backend->loadState(state);
  whole->restrictOptimizer(pieces);
  backend->restrictOptimizer(pieces);
  auto stepReads = [&](TrainingBackend &on) {
    calls.count = 0;
    on.runMicroBatch(0, 1.0f, 0);
    return std::make_pair(calls.parameterDtypes, calls.parameterValues);
  };
  EXPECT_EQ(stepReads(*backend), stepReads(*whole));
  AdamWUpdate update;
  update.learningRate = 1e-2;
  update.weightDecay = 0.1;
  update.gradientScale = 0.25;
  whole->applyAdamW(update);
  backend->applyAdamW(update);
  // The pieces' copies and mirrors are the updated ones; the rest is the
  // load's until the all-gather.
  EXPECT_EQ(stepReads(*backend), stepReads(*whole));
  // What the shards' all-gather completes: each buffer with its bucket at
  // its start.
  EXPECT_TRUE(whole->shardedStepBuffers().empty());
  const std::vector<FlatBuffer> gathered = backend->shardedStepBuffers();
  ASSERT_EQ(gathered.size(), 2u);
  EXPECT_EQ(gathered[0].dtype, TESSERA_BF16);
  EXPECT_EQ(gathered[0].elements, weightBucket);
  ASSERT_EQ(gathered[0].places.size(), 1u);
  EXPECT_EQ(gathered[0].places[0].bucketOffset, layout.offset(0));
  EXPECT_EQ(gathered[0].places[0].bufferOffset, 0);
  EXPECT_EQ(gathered[1].dtype, TESSERA_F32);
  EXPECT_EQ(gathered[1].elements, 128);
  ASSERT_EQ(gathered[1].places.size(), 1u);
  EXPECT_EQ(gathered[1].places[0].bucketOffset, layout.offset(1));
  EXPECT_EQ(gathered[1].places[0].bufferOffset, 0);
  const std::vector<float> updatedBias = stepReads(*whole).second[1];
  const auto *bias = static_cast<const float *>(gathered[1].data);
  for (int64_t e = 1; e < 4; ++e)
    EXPECT_EQ(bias[e], updatedBias[static_cast<size_t>(e)]) << "element " << e;

  TrainingState expected = stateOf(program), stored = stateOf(program);
  whole->storeState(expected);
  EXPECT_THROW(backend->storeState(stored), TrainError);
  EXPECT_THROW(backend->refreshComputeCopies(), TrainError);
  int gathers = 0;
  backend->gatherState([&](const FlatBuffer &buffer) {
    EXPECT_EQ(buffer.elements, layout.totalElements());
    ++gathers;
  }, /*keep=*/true);
  EXPECT_EQ(gathers, 3);
  backend->storeState(stored);
  for (const ParameterLayout::Piece &piece : pieces) {
    const auto p = static_cast<size_t>(piece.parameter);
    for (int64_t e = piece.offset - layout.offset(piece.parameter);
         e < piece.offset - layout.offset(piece.parameter) + piece.count;
         ++e) {
      const auto i = static_cast<size_t>(e);
      EXPECT_EQ(stored.parameters[p][i], expected.parameters[p][i]);
      EXPECT_EQ(stored.firstMoments[p][i], expected.firstMoments[p][i]);
      EXPECT_EQ(stored.secondMoments[p][i], expected.secondMoments[p][i]);
    }
  }
  // Outside the shard the gather (here none) fills in; this rank wrote 0.
  EXPECT_EQ(stored.parameters[0][0], 0.0f);
  // Gathered once, stored once.
  EXPECT_THROW(backend->storeState(stored), TrainError);
}

// Tests that a parameter every rank holds whole (its gradient reduced in the
// step: a mesh plan's ZeRO-0 parameter) read as f32 is read from its master
// under a sharded state, not mirrored: the backend keeps no mirrors when it
// is the only one, the step reads the loaded values, and AdamW's update as
// a whole-state backend restricted to the same pieces makes it.
TEST_F(HostBackendTest, AReplicatedParameterIsReadFromItsMaster) {
  tessera_program program = mixedProgram();
  TrainOptions options;
  ParameterLayout layout(program);
  const std::vector<ParameterLayout::Piece> pieces = {
      {0, layout.offset(0), 4, -1},
      {1, layout.offset(1), layout.count(1), -1, /*replicated=*/true}};
  ParameterLayout sharded = layout;
  // The bias is in no bucket.
  sharded.holdShard(pieces, {tessera_train_test::spanPerParameter(layout)[0]});
  std::unique_ptr<TrainingBackend> whole = makeHostBackend(program, options);
  std::unique_ptr<TrainingBackend> backend =
      makeHostBackend(program, options, &sharded);
  EXPECT_EQ(backend->residentState().stepCopies,
            ParameterLayout::aligned(layout.count(0)) * 2);
  ASSERT_EQ(backend->shardedStepBuffers().size(), 1u);
  TrainingState state = stateOf(program);
  whole->loadState(state);
  backend->loadState(state);
  whole->restrictOptimizer(pieces);
  backend->restrictOptimizer(pieces);
  auto biasRead = [&](TrainingBackend &on) {
    calls.count = 0;
    on.runMicroBatch(0, 1.0f, 0);
    return calls.parameterValues[1];
  };
  // Both steps run (each writes its gradients), then both updates.
  EXPECT_EQ(biasRead(*backend), state.parameters[1]);
  EXPECT_EQ(biasRead(*whole), state.parameters[1]);
  AdamWUpdate update;
  update.learningRate = 1e-2;
  update.gradientScale = 0.5;
  whole->applyAdamW(update);
  backend->applyAdamW(update);
  EXPECT_EQ(biasRead(*backend), biasRead(*whole));
  EXPECT_NE(biasRead(*backend), state.parameters[1]);
}

TEST_F(HostBackendTest, AComputeCopyOfAnotherPrecisionIsRefused) {
  tessera_program program = programOf(TESSERA_PRECISION_BF16);
  const int32_t stepDtypes[] = {TESSERA_F16, TESSERA_F32};
  program.parameter_step_dtypes = stepDtypes;
  TrainOptions options;
  try {
    makeHostBackend(program, options);
    FAIL() << "expected a TrainError";
  } catch (const TrainError &error) {
    EXPECT_NE(std::string(error.what()).find(
                  "reads parameter 'layer.weight' as f16, neither its f32 "
                  "master nor the bf16 compute precision"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(HostBackendTest, ACudaProgramIsRefused) {
  tessera_program program = programOf(TESSERA_PRECISION_FP32);
  program.device = TESSERA_DEVICE_CUDA;
  TrainOptions options;
  EXPECT_THROW(makeHostBackend(program, options), TrainError);
}

} // namespace
