//===- PipelineParallelTest.cpp - Pipelined programs through the driver ---===//
//
// A pipelined program written here by hand, with its unpipelined twin: per
// token n of the micro-batch, x = token, h = w0 * x (chunk 0), y = w1 * h +
// w0 and loss = mean((y - target)^2) (chunk 1), gradients by hand. Chunk 0
// saves x for its backward, chunk 1 saves h. Chunk 1 also reads w0, as a
// tied embedding's head does: its backward returns its part of w0's
// gradient (dL/dy), chunk 0's the part through h, the driver adds them on
// w0's owner once a step, and the owner's updates must reach chunk 1's
// copy. Chunk 1 reads w0 only through its prepare, which copies it into a
// resident value once a step, as a stage casts its weights: the copy is
// stale unless the driver runs the prepare after every update. Both
// programs share the arithmetic below, so a
// pipelined run over 2 thread ranks must match the twin run with
// --grad-accum M: the same losses, norms, gradients and parameters (to the
// order of the norm's sums), and their checkpoints resume each other.
//
//===----------------------------------------------------------------------===//

#include "RunOutputs.h"
#include "tessera/runtime/program.h"

#include <gtest/gtest.h>

#include <mutex>

using namespace tessera::train;
using namespace tessera_train_test;

namespace {

constexpr int64_t kBatch = 2, kSequence = 2, kTokens = kBatch * kSequence;
constexpr int32_t kMicroBatches = 4;

const float *floatsOf(const tessera_tensor &tensor) {
  return static_cast<const float *>(tensor.data);
}
float *floatsOf(tessera_tensor *tensor) {
  return static_cast<float *>(tensor->data);
}

/// What the stage functions saw: the w0 each chunk read per call (the
/// reader's copy must be the owner's), and a failure to inject.
struct Hooks {
  std::mutex mutex;
  std::vector<float> chunk0Reads, chunk1Reads;
  int backward1Calls = 0;
  int failBackward1AtCall = -1;
};
Hooks hooks;

void stage0Math(const float *w0, const int64_t *tokens, float *x, float *h) {
  for (int64_t n = 0; n < kTokens; ++n) {
    x[n] = static_cast<float>(tokens[n]);
    h[n] = w0[n] * x[n];
  }
}

float lossOf(const float *w0, const float *w1, const float *h,
             const int64_t *targets) {
  double total = 0;
  for (int64_t n = 0; n < kTokens; ++n) {
    float r = w1[n] * h[n] + w0[n] - static_cast<float>(targets[n]);
    total += static_cast<double>(r) * r;
  }
  return static_cast<float>(total / kTokens);
}

/// dL*scale/dw1, dL*scale/dh and chunk 1's part of dL*scale/dw0 (dL/dy).
void stage1Gradients(const float *w0, const float *w1, const float *h,
                     const int64_t *targets, float scale, float *dw1,
                     float *dh, float *dw0Part) {
  for (int64_t n = 0; n < kTokens; ++n) {
    float r = w1[n] * h[n] + w0[n] - static_cast<float>(targets[n]);
    float dy = 2.0f * r / static_cast<float>(kTokens) * scale;
    dw1[n] = dy * h[n];
    dh[n] = dy * w1[n];
    dw0Part[n] = dy;
  }
}

/// Chunk 0's part of dL*scale/dw0 (through h).
void stage0Gradients(const float *dh, const float *x, float *dw0) {
  for (int64_t n = 0; n < kTokens; ++n)
    dw0[n] = dh[n] * x[n];
}

const int64_t *idsOf(const tessera_tensor *tensor) {
  return static_cast<const int64_t *>(tensor->data);
}

int twinForwardBackward(const tessera_step_context *,
                        const tessera_tensor *parameters,
                        const tessera_tensor *, const tessera_tensor *tokens,
                        const tessera_tensor *targets, float scale, uint64_t,
                        float *loss, tessera_tensor *gradients) {
  float x[kTokens], h[kTokens], dh[kTokens], part[kTokens];
  stage0Math(floatsOf(parameters[0]), idsOf(tokens), x, h);
  *loss = lossOf(floatsOf(parameters[0]), floatsOf(parameters[1]), h,
                 idsOf(targets));
  stage1Gradients(floatsOf(parameters[0]), floatsOf(parameters[1]), h,
                  idsOf(targets), scale, floatsOf(&gradients[1]), dh, part);
  float *dw0 = floatsOf(&gradients[0]);
  stage0Gradients(dh, x, dw0);
  for (int64_t n = 0; n < kTokens; ++n)
    dw0[n] += part[n];
  return 0;
}

// inputs/outputs as program.h orders them (see the tables below).
int forward0(const tessera_step_context *, const tessera_tensor *parameters,
             const tessera_tensor *, const tessera_tensor *tokens,
             const tessera_tensor *, const tessera_tensor *, float, uint64_t,
             float *, tessera_tensor *, tessera_tensor *outputs) {
  {
    std::lock_guard<std::mutex> lock(hooks.mutex);
    hooks.chunk0Reads.push_back(floatsOf(parameters[0])[0]);
  }
  // outputs: h (activation), x (saved).
  stage0Math(floatsOf(parameters[0]), idsOf(tokens), floatsOf(&outputs[1]),
             floatsOf(&outputs[0]));
  return 0;
}

int prepare0(const tessera_step_context *, const tessera_tensor *,
             const tessera_tensor *, const tessera_tensor *,
             const tessera_tensor *, const tessera_tensor *, float, uint64_t,
             float *, tessera_tensor *, tessera_tensor *) {
  return 0;
}

int prepare1(const tessera_step_context *, const tessera_tensor *parameters,
             const tessera_tensor *, const tessera_tensor *,
             const tessera_tensor *, const tessera_tensor *, float, uint64_t,
             float *, tessera_tensor *, tessera_tensor *outputs) {
  // outputs: w0 (resident).
  const float *w0 = floatsOf(parameters[0]);
  std::copy(w0, w0 + kTokens, floatsOf(&outputs[0]));
  return 0;
}

int forward1(const tessera_step_context *, const tessera_tensor *parameters,
             const tessera_tensor *, const tessera_tensor *,
             const tessera_tensor *targets, const tessera_tensor *inputs,
             float, uint64_t, float *loss, tessera_tensor *,
             tessera_tensor *outputs) {
  {
    std::lock_guard<std::mutex> lock(hooks.mutex);
    hooks.chunk1Reads.push_back(floatsOf(inputs[0])[0]);
  }
  // inputs: w0 (resident), h; outputs: h (saved).
  const float *h = floatsOf(inputs[1]);
  *loss = lossOf(floatsOf(inputs[0]), floatsOf(parameters[1]), h,
                 idsOf(targets));
  std::copy(h, h + kTokens, floatsOf(&outputs[0]));
  return 0;
}

int backward1(const tessera_step_context *, const tessera_tensor *parameters,
              const tessera_tensor *, const tessera_tensor *,
              const tessera_tensor *targets, const tessera_tensor *inputs,
              float scale, uint64_t, float *, tessera_tensor *gradients,
              tessera_tensor *outputs) {
  {
    std::lock_guard<std::mutex> lock(hooks.mutex);
    if (++hooks.backward1Calls == hooks.failBackward1AtCall)
      return failLikeAKernel();
  }
  // inputs: w0 (resident), h (saved); outputs: dh; gradients: w1's, and
  // its part of w0's.
  stage1Gradients(floatsOf(inputs[0]), floatsOf(parameters[1]),
                  floatsOf(inputs[1]), idsOf(targets), scale,
                  floatsOf(&gradients[1]), floatsOf(&outputs[0]),
                  floatsOf(&gradients[0]));
  return 0;
}

int backward0(const tessera_step_context *, const tessera_tensor *,
              const tessera_tensor *, const tessera_tensor *,
              const tessera_tensor *, const tessera_tensor *inputs, float,
              uint64_t, float *, tessera_tensor *gradients, tessera_tensor *) {
  // inputs: x (saved), dh.
  stage0Gradients(floatsOf(inputs[1]), floatsOf(inputs[0]),
                  floatsOf(&gradients[0]));
  return 0;
}

const tessera_tensor_info kParameters[] = {
    {"w0", TESSERA_F32, 1, {kTokens}},
    {"w1", TESSERA_F32, 1, {kTokens}},
};

constexpr tessera_stage_tensor tensorOfRole(int32_t role) {
  return {role, TESSERA_F32, 1, {kTokens}};
}

/// Owns the pipelined program's tables; tests edit them to break them.
struct PipelinedProgram {
  tessera_stage_tensor resident[1] = {tensorOfRole(TESSERA_STAGE_RESIDENT)};
  tessera_stage_tensor forward1Inputs[2] = {
      tensorOfRole(TESSERA_STAGE_RESIDENT),
      tensorOfRole(TESSERA_STAGE_ACTIVATION)};
  tessera_stage_tensor backward1Inputs[2] = {
      tensorOfRole(TESSERA_STAGE_RESIDENT), tensorOfRole(TESSERA_STAGE_SAVED)};
  tessera_stage_tensor forward0Outputs[2] = {
      tensorOfRole(TESSERA_STAGE_ACTIVATION), tensorOfRole(TESSERA_STAGE_SAVED)};
  tessera_stage_tensor saved[1] = {tensorOfRole(TESSERA_STAGE_SAVED)};
  tessera_stage_tensor gradient[1] = {
      tensorOfRole(TESSERA_STAGE_ACTIVATION_GRADIENT)};
  tessera_stage_tensor backward0Inputs[2] = {
      tensorOfRole(TESSERA_STAGE_SAVED),
      tensorOfRole(TESSERA_STAGE_ACTIVATION_GRADIENT)};
  int32_t readsW0[1] = {0};
  int32_t readsW1[1] = {1};
  int32_t ownsW0[1] = {0};
  int32_t ownsW1[1] = {1};
  /// Chunk 1's gradients: w1's, and its part of w0's.
  int32_t ownsW1PartW0[2] = {1, 0};
  tessera_stage_function prepares[2] = {};
  tessera_stage_function forwards[2] = {};
  tessera_stage_function backwards[2] = {};
  std::vector<std::vector<tessera_pipeline_task>> orders;
  std::vector<const tessera_pipeline_task *> taskLists;
  std::vector<int32_t> taskCounts;
  tessera_pipeline pipeline{};
  tessera_program program{};

  PipelinedProgram(const tessera_program &twin, const char *schedule) {
    prepares[0] = {prepare0, 0, nullptr, 0, nullptr, 0, 0, nullptr,
                   0, nullptr, 0.0};
    prepares[1] = {prepare1, 0, nullptr, 1, resident, 0, 1, readsW0,
                   0, nullptr, 0.0};
    forwards[0] = {forward0, 0, nullptr, 2, forward0Outputs, 0, 1, readsW0,
                   0, nullptr, 4.0};
    forwards[1] = {forward1, 2, forward1Inputs, 1, saved, 1, 1, readsW1,
                   0, nullptr, 4.0};
    backwards[1] = {backward1, 2, backward1Inputs, 1, gradient, 0, 1, readsW1,
                    2, ownsW1PartW0, 8.0};
    backwards[0] = {backward0, 2, backward0Inputs, 0, nullptr, 0, 0, nullptr,
                    1, ownsW0, 4.0};
    auto f = [](int32_t chunk, int32_t micro) {
      return tessera_pipeline_task{1, chunk, micro};
    };
    auto b = [](int32_t chunk, int32_t micro) {
      return tessera_pipeline_task{0, chunk, micro};
    };
    if (std::string(schedule) == "gpipe") {
      orders.resize(2);
      for (int32_t d = 0; d < 2; ++d) {
        for (int32_t k = 0; k < kMicroBatches; ++k)
          orders[d].push_back(f(d, k));
        for (int32_t k = 0; k < kMicroBatches; ++k)
          orders[d].push_back(b(d, k));
      }
    } else {
      // lib/Pipeline's 1F1B: device d warms up with S - d - 1 forwards.
      orders = {{f(0, 0), f(0, 1), b(0, 0), f(0, 2), b(0, 1), f(0, 3), b(0, 2),
                 b(0, 3)},
                {f(1, 0), b(1, 0), f(1, 1), b(1, 1), f(1, 2), b(1, 2), f(1, 3),
                 b(1, 3)}};
    }
    update();
    pipeline.stages = 2;
    pipeline.virtual_stages = 1;
    pipeline.micro_batches = kMicroBatches;
    pipeline.schedule = schedule;
    pipeline.prepares = prepares;
    pipeline.forwards = forwards;
    pipeline.backwards = backwards;
    program = twin;
    program.forward_backward = nullptr;
    program.pipeline = &pipeline;
  }
  /// After editing `orders`.
  void update() {
    taskLists.clear();
    taskCounts.clear();
    for (const auto &order : orders) {
      taskLists.push_back(order.data());
      taskCounts.push_back(static_cast<int32_t>(order.size()));
    }
    pipeline.task_counts = taskCounts.data();
    pipeline.tasks = taskLists.data();
  }
};

struct TrainRun {
  int exitCode;
  std::string out;
  std::string err;
};

class PipelineParallelTest : public ::testing::Test {
protected:
  TemporaryDirectory temporary;
  std::string directory, weightsPath, dataPath;
  tessera_program twin{};

  void SetUp() override {
    hooks.chunk0Reads.clear();
    hooks.chunk1Reads.clear();
    hooks.backward1Calls = 0;
    hooks.failBackward1AtCall = -1;
    directory = temporary.getPath();
    weightsPath = directory + "/weights.safetensors";
    std::vector<float> w0 = {0.3f, -0.2f, 0.1f, 0.25f};
    std::vector<float> w1 = {0.5f, 0.4f, -0.3f, 0.2f};
    writeSafetensors(weightsPath,
                     {{"w0", TESSERA_F32, {kTokens}, w0.data()},
                      {"w1", TESSERA_F32, {kTokens}, w1.data()}},
                     {});
    // 64 rows of 3 tokens (sequence 2 and its next token).
    dataPath = directory + "/rows.npy";
    std::vector<int64_t> rows;
    for (int row = 0; row < 64; ++row)
      for (int column = 0; column < 3; ++column)
        rows.push_back((row * 5 + column * 3 + row / 3) % 8);
    writeNpy(dataPath, "<i8", {64, 3}, rows);

    twin.model_name = "two-stage.onnx";
    twin.weights_file = weightsPath.c_str();
    twin.loss_kind = TESSERA_LOSS_CAUSAL_LM;
    twin.precision = TESSERA_PRECISION_FP32;
    twin.batch = kBatch;
    twin.sequence = kSequence;
    twin.vocabulary = 8;
    twin.ignore_index = -100;
    twin.parameter_count = 2;
    twin.parameters = kParameters;
    twin.forward_backward = twinForwardBackward;
    twin.flops_per_micro_batch = 20;
  }

  TrainRun train(std::vector<std::string> words,
                 const tessera_program &program) {
    Arguments arguments(std::move(words));
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    int code = tessera_train_main(arguments.argc(), arguments.argv(), &program);
    return {code, ::testing::internal::GetCapturedStdout(),
            ::testing::internal::GetCapturedStderr()};
  }

  std::vector<std::string> flags(const std::string &tag, int steps = 3) const {
    return {"--data",         dataPath,
            "--steps",        std::to_string(steps),
            "--lr",           "0.05",
            "--grad-clip",    "0.5",
            "--metrics",      directory + "/" + tag + ".jsonl",
            "--dump-params",  directory + "/" + tag + ".params",
            "--dump-grads",   directory + "/" + tag + ".grads"};
  }

  std::vector<JsonValue> metrics(const std::string &tag) const {
    return readMetrics(directory + "/" + tag + ".jsonl");
  }

  void expectSameFile(const std::string &a, const std::string &b) const {
    SafetensorsFile first = readSafetensors(directory + "/" + a);
    SafetensorsFile second = readSafetensors(directory + "/" + b);
    for (const char *name : {"w0", "w1"}) {
      std::vector<float> x = floats(first, name), y = floats(second, name);
      ASSERT_EQ(x.size(), y.size()) << name;
      for (size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(x[i], y[i], 1e-6) << a << " vs " << b << ": " << name
                                      << "[" << i << "]";
    }
  }

  void expectSameRun(const std::string &a, const std::string &b) const {
    std::vector<JsonValue> first = metrics(a), second = metrics(b);
    ASSERT_EQ(first.size(), second.size());
    for (size_t i = 0; i < first.size(); ++i)
      for (const char *key : {"loss", "grad_norm"})
        EXPECT_NEAR(first[i].find(key)->number, second[i].find(key)->number,
                    1e-6)
            << key << " of step " << i + 1;
    expectSameFile(a + ".params", b + ".params");
    expectSameFile(a + ".grads", b + ".grads");
  }
};

// Tests that GPipe and 1F1B over 2 thread ranks train as the unpipelined
// twin with --grad-accum 4 does, and that the reader's copy of w0 follows
// the owner's updates.
TEST_F(PipelineParallelTest, SchedulesMatchGradientAccumulation) {
  std::vector<std::string> words = flags("twin");
  words.insert(words.end(), {"--grad-accum", "4"});
  TrainRun run = train(words, twin);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  for (const char *schedule : {"gpipe", "1f1b"}) {
    hooks.chunk0Reads.clear();
    hooks.chunk1Reads.clear();
    PipelinedProgram pipelined(twin, schedule);
    run = train(flags(schedule), pipelined.program);
    ASSERT_EQ(run.exitCode, 0) << schedule << ": " << run.err;
    EXPECT_NE(run.out.find("step     3/3"), std::string::npos) << run.out;
    expectSameRun("twin", schedule);
    EXPECT_EQ(hooks.chunk0Reads, hooks.chunk1Reads) << schedule;
    EXPECT_EQ(hooks.chunk0Reads.size(), size_t{3 * kMicroBatches});
  }
  // The run trains at all.
  EXPECT_NE(floats(readSafetensors(directory + "/1f1b.params"), "w0"),
            floats(readSafetensors(weightsPath), "w0"));
  // --grad-accum M is the pipeline's own accumulation, and accepted.
  PipelinedProgram pipelined(twin, "1f1b");
  words = flags("explicit");
  words.insert(words.end(), {"--grad-accum", "4"});
  run = train(words, pipelined.program);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  expectSameRun("twin", "explicit");
}

// Tests that a pipelined run's checkpoint resumes the unpipelined twin and
// the twin's resumes the pipelined run, both as the straight run.
TEST_F(PipelineParallelTest, CheckpointsResumeEitherWay) {
  PipelinedProgram pipelined(twin, "1f1b");
  auto withCheckpoints = [&](const std::string &tag, int steps,
                             const std::string &checkpoints, bool resume,
                             bool accumulate) {
    std::vector<std::string> words = flags(tag, steps);
    words.insert(words.end(), {"--checkpoint-dir", directory + checkpoints});
    if (resume)
      words.push_back("--resume");
    if (accumulate)
      words.insert(words.end(), {"--grad-accum", "4"});
    return words;
  };
  std::vector<std::string> straight = flags("straight", 5);
  straight.insert(straight.end(), {"--grad-accum", "4"});
  TrainRun run = train(straight, twin);
  ASSERT_EQ(run.exitCode, 0) << run.err;

  run = train(withCheckpoints("first", 3, "/a", false, false),
              pipelined.program);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  run = train(withCheckpoints("resumedTwin", 5, "/a", true, true), twin);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  expectSameFile("straight.params", "resumedTwin.params");

  run = train(withCheckpoints("firstTwin", 3, "/b", false, true), twin);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  run = train(withCheckpoints("resumedPipeline", 5, "/b", true, false),
              pipelined.program);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  expectSameFile("straight.params", "resumedPipeline.params");
  expectSameFile("straight.grads", "resumedPipeline.grads");
}

// Tests that a stage call's failure names the step, micro-batch and stage
// function, and ends every rank instead of hanging the others.
TEST_F(PipelineParallelTest, StageFailureNamesTheStageFunction) {
  PipelinedProgram pipelined(twin, "1f1b");
  hooks.failBackward1AtCall = 2;
  TrainRun run = train(flags("failing"), pipelined.program);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("rank 1: step 1, micro-batch 2: chunk 1 backward: "),
            std::string::npos)
      << run.err;
}

// Tests that --grad-accum other than 1 or the pipeline's micro-batches is
// a usage error naming the flag.
TEST_F(PipelineParallelTest, GradientAccumulationConflictIsRefused) {
  PipelinedProgram pipelined(twin, "1f1b");
  std::vector<std::string> words = flags("conflict");
  words.insert(words.end(), {"--grad-accum", "3"});
  TrainRun run = train(words, pipelined.program);
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("--grad-accum 3: this program is pipelined over 4 "
                         "micro-batches a step"),
            std::string::npos)
      << run.err;
}

// Tests that checkPipeline refuses malformed tables as compiler bugs,
// naming what is wrong.
TEST_F(PipelineParallelTest, MalformedTablesAreRefused) {
  auto expectRefused = [&](PipelinedProgram &pipelined,
                           const std::string &message) {
    TrainRun run = train(flags("malformed"), pipelined.program);
    EXPECT_EQ(run.exitCode, 1) << run.out << run.err;
    EXPECT_NE(run.err.find("malformed program (a compiler bug): pipeline: " +
                           message),
              std::string::npos)
        << run.err;
  };
  {
    PipelinedProgram pipelined(twin, "1f1b");
    pipelined.ownsW1PartW0[1] = 1;
    expectRefused(pipelined, "chunk 1 backward returns the gradient of 'w1' "
                             "twice");
  }
  {
    PipelinedProgram pipelined(twin, "1f1b");
    pipelined.backwards[0].gradient_count = 0;
    pipelined.backwards[1].gradient_count = 1; // w1's, not its part of w0's
    expectRefused(pipelined, "parameter 'w0' is owned by no chunk");
  }
  {
    PipelinedProgram pipelined(twin, "1f1b");
    pipelined.forward1Inputs[1].shape[0] = 3;
    expectRefused(pipelined, "activations 0 of chunk 0 forward is dtype 0 [4] "
                             "but chunk 1 forward takes dtype 0 [3]");
  }
  {
    PipelinedProgram pipelined(twin, "1f1b");
    std::swap(pipelined.forward0Outputs[0], pipelined.forward0Outputs[1]);
    expectRefused(pipelined, "chunk 0 forward output 1 has role 0 out of "
                             "program.h's order");
  }
  {
    PipelinedProgram pipelined(twin, "1f1b");
    pipelined.backward1Inputs[0].shape[0] = 3;
    expectRefused(pipelined, "resident values 0 of chunk 1 prepare is dtype 0 "
                             "[4] but chunk 1 backward takes dtype 0 [3]");
  }
  {
    PipelinedProgram pipelined(twin, "1f1b");
    pipelined.orders[1].pop_back();
    pipelined.update();
    expectRefused(pipelined, "device 1 has 7 tasks");
  }
  {
    PipelinedProgram pipelined(twin, "1f1b");
    pipelined.orders[0][1] = pipelined.orders[0][0];
    pipelined.update();
    expectRefused(pipelined, "device 0 runs chunk 0 forward of micro-batch 0 "
                             "twice");
  }
  {
    // Device 1 waits for micro-batch 1's activations first, which device 0
    // sends only after micro-batch 0's backward, which waits for device 1.
    PipelinedProgram pipelined(twin, "1f1b");
    std::vector<tessera_pipeline_task> &first = pipelined.orders[0];
    std::vector<tessera_pipeline_task> &second = pipelined.orders[1];
    first = {{1, 0, 0}, {0, 0, 0}, {1, 0, 1}, {0, 0, 1},
             {1, 0, 2}, {0, 0, 2}, {1, 0, 3}, {0, 0, 3}};
    std::swap(second[0], second[2]);
    std::swap(second[1], second[3]);
    pipelined.update();
    expectRefused(pipelined, "the task orders never finish");
  }
  {
    // A gradient pending over a mesh axis in a program of no mesh: the
    // driver would have no axis to sum it over.
    PipelinedProgram pipelined(twin, "1f1b");
    int32_t pending[2] = {0, 1};
    pipelined.pipeline.gradient_partial_axes = pending;
    expectRefused(pipelined, "the gradient of 'w1' is pending over mesh axes "
                             "1 (a bit each) of a mesh of 0");
  }
}

} // namespace
