//===- TrainMain.cpp - The training executable's main loop ----------------===//
//
// Design: the compiled program knows one thing, how to compute the loss and
// the gradients of one micro-batch (forward_backward). Everything around it
// lives here, written once for every model:
//
//   for each step s = 1..N:
//     for each of K micro-batches: read B x T tokens, call forward_backward
//       with the current loss scale, add the gradients into f32 accumulators
//       (cast from the compute precision with tessera_cpu_cast);
//     global norm = sqrt(sum over gradients of sum_squares) / (K * scale);
//     fp16 only: a non-finite norm means the scaled gradients overflowed:
//       skip AdamW, halve the scale; after --loss-scale-window clean steps in
//       a row, double it (the GradScaler recipe). For fp32/bf16 a
//       non-finite norm means the run diverged and is an error;
//     clip = min(1, --grad-clip / norm) (1 when clipping is off);
//     AdamW (tessera_cpu_adamw) on the f32 master weights and moments, with
//       grad_scale = clip / (K * scale): averaging over micro-batches, loss
//       scale removal and clipping folded into one multiply;
//     report metrics; checkpoint every --checkpoint-every steps.
//
// Skipped steps still count as steps (they consume data and a slot of the
// learning-rate schedule), but not as AdamW steps: the bias correction uses
// the number of updates actually applied.
//
// Determinism: the data order depends on (seed, data position), the learning
// rate on the step, and the dropout seed of micro-batch k of step s on
// (seed, s, k). A checkpoint stores these counters with the tensors, which is
// why --resume reproduces the uninterrupted run bit for bit on the same
// machine. The resumed run keeps the checkpoint's seed (--seed is ignored
// then) for the same reason.
//
// Errors: everything the user can get wrong throws TrainError deep down;
// tessera_train_main turns it into "<program>: error: ..." on stderr and
// exit code 2 (flags) or 1 (everything else).
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/program.h"

#include "Checkpoint.h"
#include "DataLoader.h"
#include "Flags.h"
#include "InitialWeights.h"
#include "LearningRateSchedule.h"
#include "Metrics.h"
#include "Random.h"
#include "TrainError.h"
#include "TrainingState.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <regex>
#include <set>

namespace tessera::train {
namespace {

constexpr uint64_t kDropoutPurpose = 0xd209;
/// Below the smallest fp16 subnormal a loss scale cannot help any more: the
/// gradients overflow even when the loss is scaled down this far.
constexpr double kMinimumLossScale = 0x1.0p-24;

[[noreturn]] void programError(const std::string &message) {
  fail("malformed program (a compiler bug): " + message);
}

void checkTensorInfos(const tessera_tensor_info *infos, int32_t count,
                      const char *kind, std::set<std::string> &names) {
  if (count < 0 || (count > 0 && !infos))
    programError(std::string("bad ") + kind + " list");
  for (int32_t i = 0; i < count; ++i) {
    const tessera_tensor_info &info = infos[i];
    if (!info.name || !*info.name)
      programError(std::string(kind) + " " + std::to_string(i) +
                   " has no name");
    if (!names.insert(info.name).second)
      programError(std::string("tensor name '") + info.name +
                   "' is used twice");
    if (info.rank < 0 || info.rank > TESSERA_MAX_RANK)
      programError(std::string(kind) + " '" + info.name + "' has rank " +
                   std::to_string(info.rank));
    for (int32_t d = 0; d < info.rank; ++d)
      if (info.shape[d] < 0)
        programError(std::string(kind) + " '" + info.name +
                     "' has a negative dimension");
  }
}

void checkProgram(const tessera_program *program) {
  if (!program)
    programError("no program");
  if (!program->forward_backward)
    programError("no forward_backward function");
  if (program->batch <= 0 || program->sequence <= 0 || program->vocabulary <= 0)
    programError("batch, sequence and vocabulary must be positive");
  if (program->loss_kind != TESSERA_LOSS_CAUSAL_LM &&
      program->loss_kind != TESSERA_LOSS_MLM)
    programError("unknown loss kind " + std::to_string(program->loss_kind));
  if (program->precision != TESSERA_PRECISION_FP32 &&
      program->precision != TESSERA_PRECISION_BF16 &&
      program->precision != TESSERA_PRECISION_FP16)
    programError("unknown precision " + std::to_string(program->precision));
  std::set<std::string> names;
  checkTensorInfos(program->parameters, program->parameter_count, "parameter",
                   names);
  checkTensorInfos(program->buffers, program->buffer_count, "buffer", names);
  for (int32_t i = 0; i < program->parameter_count; ++i)
    if (program->parameters[i].dtype != TESSERA_F32)
      programError(std::string("parameter '") + program->parameters[i].name +
                   "' is not declared F32 (parameters are f32 master copies)");
  for (int32_t i = 0; i < program->buffer_count; ++i)
    (void)dtypeSize(program->buffers[i].dtype);
}

int32_t computeDtype(const tessera_program &program) {
  switch (program.precision) {
  case TESSERA_PRECISION_BF16:
    return TESSERA_BF16;
  case TESSERA_PRECISION_FP16:
    return TESSERA_F16;
  default:
    return TESSERA_F32;
  }
}

void checkKernel(int status, const char *what) {
  if (status != 0)
    fail(std::string(what) + ": " + tessera_cpu_last_error());
}

/// Runs the steps of one invocation; returns the exit code.
class Trainer {
public:
  Trainer(const tessera_program &program, const TrainOptions &options)
      : program(program), options(options),
        schedule(options.schedule, options.learningRate, options.warmupSteps,
                 options.steps, options.minLearningRateRatio) {}

  int run();

private:
  const tessera_program &program;
  const TrainOptions &options;
  LearningRateSchedule schedule;
  TrainingState state;
  std::unique_ptr<DataLoader> data;
  int64_t lastCheckpointStep = -1;

  // Per micro-batch inputs, and per parameter the f32 accumulators, the
  // compute-precision gradients forward_backward writes (unused for f32,
  // which writes straight into the accumulators or the f32 scratch), and f32
  // scratch for micro-batches after the first.
  std::vector<int64_t> tokens;
  std::vector<int64_t> targets;
  std::vector<std::vector<float>> accumulated;
  std::vector<std::vector<unsigned char>> computeGradients;
  std::vector<std::vector<float>> scratch;
  /// Per parameter: does weight decay apply (not matched by --no-decay)?
  std::vector<bool> decays;

  void start();
  void dumpGradients(const std::string &path, double divisor);
  void allocateGradients();
  double accumulateMicroBatches(int64_t step);
  double globalNormSquared();
  void writeCheckpoint();
};

void Trainer::start() {
  allocateState(program, state);
  std::regex noDecay(options.noDecayPattern.empty() ? "$^"
                                                    : options.noDecayPattern);
  for (int32_t i = 0; i < program.parameter_count; ++i)
    decays.push_back(options.noDecayPattern.empty() ||
                     !std::regex_search(program.parameters[i].name, noDecay));
  state.seed = options.seed;
  state.lossScale =
      program.precision == TESSERA_PRECISION_FP16 ? options.lossScaleInit : 1.0;
  if (!options.checkpointDirectory.empty())
    ensureDirectory(options.checkpointDirectory);
  if (options.resume) {
    std::string path = findLatestCheckpoint(options.checkpointDirectory);
    if (path.empty())
      fail("--resume: no checkpoint_*.safetensors in " +
           options.checkpointDirectory);
    loadCheckpoint(path, program, state);
    lastCheckpointStep = state.step;
    std::fprintf(stdout, "resuming from %s (step %lld)\n", path.c_str(),
                 static_cast<long long>(state.step));
  } else {
    loadInitialWeights(program, options, state);
  }
  if (state.step < options.steps) {
    if (options.dataPattern.empty())
      throw TrainError("--data: required to train (" +
                           std::to_string(options.steps - state.step) +
                           " steps to run); run with --help for the flags",
                       kUsageExitCode);
    DataLayout layout;
    layout.batch = program.batch;
    layout.sequence = program.sequence;
    layout.vocabulary = program.vocabulary;
    layout.maskedLanguageModel = program.loss_kind == TESSERA_LOSS_MLM;
    layout.ignoreIndex = program.ignore_index;
    data = std::make_unique<DataLoader>(options.dataPattern, layout, state.seed,
                                        options.shuffle);
    data->seek(state.dataPosition);
  }
}

void Trainer::allocateGradients() {
  size_t count = static_cast<size_t>(program.parameter_count);
  int32_t dtype = computeDtype(program);
  accumulated.assign(count, {});
  computeGradients.assign(count, {});
  scratch.assign(count, {});
  for (size_t i = 0; i < count; ++i) {
    auto elements = static_cast<size_t>(elementCount(program.parameters[i]));
    accumulated[i].assign(elements, 0.0f);
    if (dtype != TESSERA_F32)
      computeGradients[i].assign(
          elements * static_cast<size_t>(dtypeSize(dtype)), 0);
    if (options.gradientAccumulation > 1)
      scratch[i].assign(elements, 0.0f);
  }
  size_t tokenCount = static_cast<size_t>(program.batch * program.sequence);
  tokens.assign(tokenCount, 0);
  targets.assign(tokenCount, 0);
}

double Trainer::accumulateMicroBatches(int64_t step) {
  const int32_t dtype = computeDtype(program);
  const float lossScale = static_cast<float>(state.lossScale);
  std::vector<tessera_tensor> parameters, buffers, gradients;
  for (int32_t i = 0; i < program.parameter_count; ++i)
    parameters.push_back(
        makeTensor(state.parameters[static_cast<size_t>(i)].data(), TESSERA_F32,
                   program.parameters[i]));
  for (int32_t i = 0; i < program.buffer_count; ++i)
    buffers.push_back(makeTensor(state.buffers[static_cast<size_t>(i)].data(),
                                 program.buffers[i].dtype, program.buffers[i]));
  tessera_tensor_info tokenInfo{};
  tokenInfo.rank = 2;
  tokenInfo.shape[0] = program.batch;
  tokenInfo.shape[1] = program.sequence;
  tessera_tensor tokenTensor =
      makeTensor(tokens.data(), TESSERA_I64, tokenInfo);
  tessera_tensor targetTensor =
      makeTensor(targets.data(), TESSERA_I64, tokenInfo);

  double lossSum = 0;
  for (int64_t micro = 0; micro < options.gradientAccumulation; ++micro) {
    data->nextBatch(tokens.data(), targets.data());
    // Where forward_backward writes: the accumulators themselves for the
    // first f32 micro-batch, the f32 scratch for later f32 ones, the
    // compute-precision buffers otherwise.
    gradients.clear();
    for (int32_t i = 0; i < program.parameter_count; ++i) {
      auto index = static_cast<size_t>(i);
      void *target = dtype != TESSERA_F32 ? computeGradients[index].data()
                     : micro == 0
                         ? static_cast<void *>(accumulated[index].data())
                         : static_cast<void *>(scratch[index].data());
      gradients.push_back(makeTensor(target, dtype, program.parameters[i]));
    }
    uint64_t seed = deriveSeed(state.seed, kDropoutPurpose,
                               mixBits(static_cast<uint64_t>(step)) ^
                                   static_cast<uint64_t>(micro));
    float loss = 0;
    if (program.forward_backward(parameters.data(), buffers.data(),
                                 &tokenTensor, &targetTensor, lossScale, seed,
                                 &loss, gradients.data()) != 0)
      fail("step " + std::to_string(step) + ", micro-batch " +
           std::to_string(micro + 1) + ": " + tessera_cpu_last_error());
    lossSum += loss;

    for (int32_t i = 0; i < program.parameter_count; ++i) {
      auto index = static_cast<size_t>(i);
      if (dtype != TESSERA_F32) {
        tessera_tensor f32 = makeTensor(micro == 0 ? accumulated[index].data()
                                                   : scratch[index].data(),
                                        TESSERA_F32, program.parameters[i]);
        checkKernel(tessera_cpu_cast(&gradients[index], &f32),
                    "converting gradients to f32");
      }
      if (micro > 0) {
        float *sum = accumulated[index].data();
        const float *add = scratch[index].data();
        for (size_t e = 0, n = accumulated[index].size(); e < n; ++e)
          sum[e] += add[e];
      }
    }
  }
  return lossSum / static_cast<double>(options.gradientAccumulation);
}

double Trainer::globalNormSquared() {
  double sum = 0;
  for (int32_t i = 0; i < program.parameter_count; ++i) {
    tessera_tensor gradient =
        makeTensor(accumulated[static_cast<size_t>(i)].data(), TESSERA_F32,
                   program.parameters[i]);
    checkKernel(tessera_cpu_sum_squares(&gradient, &sum), "gradient norm");
  }
  return sum;
}

void Trainer::dumpGradients(const std::string &path, double divisor) {
  std::vector<std::vector<float>> gradients;
  for (const std::vector<float> &sum : accumulated) {
    gradients.emplace_back();
    for (float value : sum)
      gradients.back().push_back(static_cast<float>(value / divisor));
  }
  tessera::train::dumpGradients(path, program, gradients, state.step + 1);
}

void Trainer::writeCheckpoint() {
  saveCheckpoint(checkpointPath(options.checkpointDirectory, state.step),
                 program, state);
  lastCheckpointStep = state.step;
}

int Trainer::run() {
  start();
  allocateGradients();
  MetricsWriter metrics(stdout, options.metricsFile, options.resume);
  const bool fp16 = program.precision == TESSERA_PRECISION_FP16;
  const double tokensPerStep = static_cast<double>(
      program.batch * program.sequence * options.gradientAccumulation);

  for (int64_t step = state.step + 1; step <= options.steps; ++step) {
    auto begin = std::chrono::steady_clock::now();
    double usedScale = state.lossScale;
    double loss = accumulateMicroBatches(step);
    double scaledNorm = std::sqrt(globalNormSquared());
    double divisor =
        static_cast<double>(options.gradientAccumulation) * usedScale;
    double norm = scaledNorm / divisor;
    double learningRate = schedule.at(step);
    bool overflow = !std::isfinite(scaledNorm) || !std::isfinite(loss);

    if (overflow && !fp16)
      fail("step " + std::to_string(step) +
           ": the loss or the gradients are not finite (loss " +
           std::to_string(loss) + "); the run diverged (try a lower --lr)");
    if (overflow) {
      state.lossScale /= 2;
      state.cleanSteps = 0;
      if (state.lossScale < kMinimumLossScale) {
        char scale[32];
        std::snprintf(scale, sizeof(scale), "%g", state.lossScale);
        fail("step " + std::to_string(step) +
             ": fp16 gradients overflow at every loss scale (now " + scale +
             "); the run diverged (try a lower --lr)");
      }
    } else {
      double clip = 1.0;
      if (options.gradientClip > 0 && norm > options.gradientClip)
        clip = options.gradientClip / norm;
      double gradScale = clip / divisor;
      ++state.optimizerStep;
      if (!options.dumpGradientsFile.empty() && step == options.steps)
        dumpGradients(options.dumpGradientsFile, divisor);
      for (int32_t i = 0; i < program.parameter_count; ++i) {
        auto index = static_cast<size_t>(i);
        const tessera_tensor_info &info = program.parameters[i];
        tessera_tensor param =
            makeTensor(state.parameters[index].data(), TESSERA_F32, info);
        tessera_tensor gradient =
            makeTensor(accumulated[index].data(), TESSERA_F32, info);
        tessera_tensor m =
            makeTensor(state.firstMoments[index].data(), TESSERA_F32, info);
        tessera_tensor v =
            makeTensor(state.secondMoments[index].data(), TESSERA_F32, info);
        double weightDecay = decays[index] ? options.weightDecay : 0.0;
        checkKernel(
            tessera_cpu_adamw(&param, &gradient, &m, &v, state.optimizerStep,
                              learningRate, options.beta1, options.beta2,
                              options.epsilon, weightDecay, gradScale),
            "AdamW");
      }
      if (fp16 && ++state.cleanSteps >= options.lossScaleWindow) {
        state.lossScale *= 2;
        state.cleanSteps = 0;
      }
    }
    state.step = step;
    state.dataPosition = data->getPosition();

    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
            .count();
    StepMetrics record;
    record.step = step;
    record.totalSteps = options.steps;
    record.loss = loss;
    record.learningRate = learningRate;
    record.gradientNorm = norm;
    record.tokensPerSecond = seconds > 0 ? tokensPerStep / seconds : 0;
    record.stepMilliseconds = seconds * 1000;
    record.lossScale = usedScale;
    record.skipped = overflow;
    metrics.record(record);

    if (options.checkpointEvery > 0 && step % options.checkpointEvery == 0)
      writeCheckpoint();
  }

  if (!options.checkpointDirectory.empty() && lastCheckpointStep != state.step)
    writeCheckpoint();
  if (!options.dumpParametersFile.empty())
    dumpParameters(options.dumpParametersFile, program, state);
  return 0;
}

std::string programName(int argc, char **argv) {
  if (argc < 1 || !argv || !argv[0])
    return "train";
  const char *slash = std::strrchr(argv[0], '/');
  return slash ? slash + 1 : argv[0];
}

} // namespace
} // namespace tessera::train

extern "C" int tessera_train_main(int argc, char **argv,
                                  const tessera_program *program) {
  using namespace tessera::train;
  std::string name = programName(argc, argv);
  try {
    TrainOptions options = parseFlags(argc, argv);
    if (options.help) {
      std::fputs(usageText(name.c_str()).c_str(), stdout);
      return 0;
    }
    checkProgram(program);
    Trainer trainer(*program, options);
    return trainer.run();
  } catch (const TrainError &error) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), error.what());
    return error.getExitCode();
  } catch (const std::bad_alloc &) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: out of memory\n", name.c_str());
    return kFailureExitCode;
  } catch (const std::exception &error) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: internal error: %s\n", name.c_str(),
                 error.what());
    return kFailureExitCode;
  }
}
