//===- ShardedStateCudaTest.cpp - A ZeRO-1 shard's state on the GPU --------===//
//
// The GPU backend holding a ZeRO-1 shard (ParameterLayout::holdShard) against
// one holding the whole state restricted to the same pieces: a hand-written
// CUDA program whose gradients are known numbers records what the step
// reads. Needs a GPU (label gpu; skipped without one).
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"
#include "TrainError.h"
#include "TrainTestSupport.h"

#include "tessera/runtime/cpu_kernels.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <vector>

using namespace tessera::train;

namespace {

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    int devices = 0;                                                           \
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)           \
      GTEST_SKIP() << "no CUDA device";                                        \
  } while (0)

const tessera_tensor_info kParameters[] = {
    {"layer.weight", TESSERA_F32, 2, {30, 40}},
    {"layer.bias", TESSERA_F32, 1, {50}},
};

/// The last step's parameters, widened to f32, and their dtypes.
std::vector<std::vector<float>> parametersRead;
std::vector<int32_t> dtypesRead;

/// Gradient element e: (e + 1) / 64 * loss scale, in the step's dtype.
int knownProgram(const tessera_step_context *context,
                 const tessera_tensor *parameters,
                 const tessera_tensor * /*buffers*/,
                 const tessera_tensor * /*tokens*/,
                 const tessera_tensor * /*targets*/, float lossScale,
                 uint64_t /*seed*/, float *loss, tessera_tensor *gradients) {
  auto stream = static_cast<cudaStream_t>(context->stream);
  if (cudaStreamSynchronize(stream) != cudaSuccess)
    return 1;
  parametersRead.clear();
  dtypesRead.clear();
  for (int i = 0; i < 2; ++i) {
    const int64_t count = elementCount(kParameters[i]);
    const size_t bytes =
        static_cast<size_t>(count * dtypeSize(parameters[i].dtype));
    std::vector<unsigned char> stored(bytes);
    if (cudaMemcpy(stored.data(), parameters[i].data, bytes,
                   cudaMemcpyDeviceToHost) != cudaSuccess)
      return 1;
    parametersRead.emplace_back(static_cast<size_t>(count));
    tessera_tensor from = parameters[i], to = parameters[i];
    from.data = stored.data();
    to.data = parametersRead.back().data();
    to.dtype = TESSERA_F32;
    if (tessera_cpu_cast(&from, &to) != 0)
      return 1;
    dtypesRead.push_back(parameters[i].dtype);
  }
  for (int i = 0; i < 2; ++i) {
    const int64_t count = elementCount(kParameters[i]);
    std::vector<float> values(static_cast<size_t>(count));
    for (int64_t e = 0; e < count; ++e)
      values[static_cast<size_t>(e)] =
          static_cast<float>(e + 1) / 64.0f * lossScale;
    std::vector<unsigned char> stored(
        static_cast<size_t>(count * dtypeSize(gradients[i].dtype)));
    tessera_tensor from = gradients[i], to = gradients[i];
    from.data = values.data();
    from.dtype = TESSERA_F32;
    to.data = stored.data();
    if (tessera_cpu_cast(&from, &to) != 0 ||
        cudaMemcpy(gradients[i].data, stored.data(), stored.size(),
                   cudaMemcpyHostToDevice) != cudaSuccess)
      return 1;
  }
  *loss = 1.0f;
  return 0;
}

tessera_program programOf(int32_t precision, const int32_t *stepDtypes) {
  tessera_program program{};
  program.model_name = "known.onnx";
  program.precision = precision;
  program.batch = 1;
  program.sequence = 2;
  program.vocabulary = 8;
  program.parameter_count = 2;
  program.parameters = kParameters;
  program.parameter_step_dtypes = stepDtypes;
  program.forward_backward = knownProgram;
  program.device = TESSERA_DEVICE_CUDA;
  return program;
}

TrainingState stateOf(const tessera_program &program) {
  return tessera_train_test::knownState(program, 0.01f);
}

// Tests that a GPU backend holding a shard allocates masters and moments for
// its pieces alone, loads the whole state into what the step reads (a bf16
// copy of the weight, the f32 mirror of the bias, or both mirrors in f32),
// updates the pieces bit for bit as the whole-state backend restricted to
// them does (the multi-tensor AdamW at the chunks' state_offset), and gives
// the whole state back only through gatherState.
TEST(ShardedStateCuda, AShardedStateMatchesTheRestrictedWholeOne) {
  REQUIRE_GPU();
  const int32_t copyAndMirror[] = {TESSERA_BF16, TESSERA_F32};
  for (bool bf16 : {true, false}) {
    SCOPED_TRACE(bf16 ? "bf16, a copy and a mirror" : "fp32, mirrors");
    tessera_program program =
        bf16 ? programOf(TESSERA_PRECISION_BF16, copyAndMirror)
             : programOf(TESSERA_PRECISION_FP32, nullptr);
    TrainOptions options;
    options.cudaGraphs = false;
    ParameterLayout layout(program);
    const std::vector<ParameterLayout::Piece> pieces = {
        {0, layout.offset(0) + 100, 700, -1}, {1, layout.offset(1) + 1, 30, -1}};
    ParameterLayout sharded = layout;
    sharded.holdShard(pieces, tessera_train_test::spanPerParameter(layout));
    std::unique_ptr<TrainingBackend> whole = makeCudaBackend(program, options);
    std::unique_ptr<TrainingBackend> backend =
        makeCudaBackend(program, options, &sharded);
    ASSERT_TRUE(backend->holdsShardOnly());
    const ResidentState resident = backend->residentState();
    EXPECT_EQ(resident.masters, (768 + 128) * 4);
    EXPECT_EQ(resident.moments, 2 * resident.masters);
    // bf16: the weight's bucket of copies, the bias's of f32 mirrors.
    EXPECT_EQ(resident.stepCopies,
              bf16 ? ParameterLayout::aligned(layout.count(0)) * 2 +
                         ParameterLayout::aligned(layout.count(1)) * 4
                   : layout.totalElements() * 4);

    TrainingState state = stateOf(program);
    whole->loadState(state);
    backend->loadState(state);
    whole->restrictOptimizer(pieces);
    backend->restrictOptimizer(pieces);
    auto stepReads = [&](TrainingBackend &on) {
      on.runMicroBatch(0, 1.0f, 0);
      on.finishStep();
      return std::make_pair(dtypesRead, parametersRead);
    };
    EXPECT_EQ(stepReads(*backend), stepReads(*whole));
    AdamWUpdate update;
    update.learningRate = 1e-2;
    update.weightDecay = 0.1;
    update.gradientScale = 0.25;
    for (int64_t step = 1; step <= 2; ++step) {
      update.step = step;
      whole->applyAdamW(update);
      backend->applyAdamW(update);
      whole->finishStep();
      backend->finishStep();
      EXPECT_EQ(stepReads(*backend), stepReads(*whole));
    }
    EXPECT_EQ(backend->nonFiniteParameter(), -1);

    TrainingState expected = stateOf(program), stored = stateOf(program);
    whole->storeState(expected);
    EXPECT_THROW(backend->storeState(stored), TrainError);
    int gathers = 0;
    backend->gatherState([&](const FlatBuffer &) { ++gathers; },
                         /*keep=*/true);
    EXPECT_EQ(gathers, 3);
    backend->storeState(stored);
    for (const ParameterLayout::Piece &piece : pieces) {
      const auto p = static_cast<size_t>(piece.parameter);
      const int64_t first = piece.offset - layout.offset(piece.parameter);
      for (int64_t e = first; e < first + piece.count; ++e) {
        const auto i = static_cast<size_t>(e);
        EXPECT_EQ(stored.parameters[p][i], expected.parameters[p][i]);
        EXPECT_EQ(stored.firstMoments[p][i], expected.firstMoments[p][i]);
        EXPECT_EQ(stored.secondMoments[p][i], expected.secondMoments[p][i]);
      }
    }
    EXPECT_EQ(stored.parameters[0][0], 0.0f);
  }
}

} // namespace
