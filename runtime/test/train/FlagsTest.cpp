//===- FlagsTest.cpp - The training executable's command line -------------===//

#include "Flags.h"
#include "TrainError.h"
#include "TrainTestSupport.h"

#include <gtest/gtest.h>

using namespace tessera::train;
using tessera_train_test::Arguments;

namespace {

TrainOptions parse(std::vector<std::string> words) {
  Arguments arguments(std::move(words));
  return parseFlags(arguments.argc(), arguments.argv());
}

/// The message of the TrainError that parsing `words` throws (with exit
/// code 2), or "" if it does not throw.
std::string parseError(std::vector<std::string> words) {
  try {
    parse(std::move(words));
  } catch (const TrainError &error) {
    EXPECT_EQ(error.getExitCode(), 2);
    return error.what();
  }
  return "";
}

// Tests that no flag gives the documented defaults.
TEST(Flags, Defaults) {
  TrainOptions options = parse({});
  EXPECT_EQ(options.steps, 10);
  EXPECT_DOUBLE_EQ(options.learningRate, 1e-3);
  EXPECT_EQ(options.schedule, ScheduleKind::Constant);
  EXPECT_DOUBLE_EQ(options.beta2, 0.999);
  EXPECT_DOUBLE_EQ(options.gradientClip, 1.0);
  EXPECT_EQ(options.gradientAccumulation, 1);
  EXPECT_EQ(options.init, InitKind::Onnx);
  EXPECT_DOUBLE_EQ(options.lossScaleInit, 65536);
  EXPECT_EQ(options.lossScaleWindow, 2000);
  EXPECT_TRUE(options.shuffle);
  EXPECT_FALSE(options.resume);
  EXPECT_TRUE(options.cudaGraphs);
}

// Tests that every flag of issue 3 is parsed, in both spellings.
TEST(Flags, EveryFlag) {
  TrainOptions options = parse({"--data",
                                "shards/*.bin",
                                "--steps",
                                "200",
                                "--lr=3e-4",
                                "--warmup",
                                "20",
                                "--schedule",
                                "cosine",
                                "--min-lr-ratio",
                                "0.1",
                                "--beta1",
                                "0.8",
                                "--beta2=0.95",
                                "--eps",
                                "1e-6",
                                "--weight-decay",
                                "0.1",
                                "--grad-clip",
                                "0",
                                "--grad-accum",
                                "4",
                                "--seed",
                                "18446744073709551615",
                                "--init",
                                "random",
                                "--weights",
                                "w.safetensors",
                                "--checkpoint-dir",
                                "ckpt",
                                "--checkpoint-every",
                                "50",
                                "--resume",
                                "--metrics",
                                "m.jsonl",
                                "--dump-params",
                                "p.safetensors",
                                "--loss-scale-init",
                                "1024",
                                "--loss-scale-window",
                                "100",
                                "--no-shuffle",
                                "--cuda-graphs",
                                "off"});
  EXPECT_EQ(options.dataPattern, "shards/*.bin");
  EXPECT_EQ(options.steps, 200);
  EXPECT_DOUBLE_EQ(options.learningRate, 3e-4);
  EXPECT_EQ(options.warmupSteps, 20);
  EXPECT_EQ(options.schedule, ScheduleKind::Cosine);
  EXPECT_DOUBLE_EQ(options.minLearningRateRatio, 0.1);
  EXPECT_DOUBLE_EQ(options.beta1, 0.8);
  EXPECT_DOUBLE_EQ(options.beta2, 0.95);
  EXPECT_DOUBLE_EQ(options.epsilon, 1e-6);
  EXPECT_DOUBLE_EQ(options.weightDecay, 0.1);
  EXPECT_DOUBLE_EQ(options.gradientClip, 0);
  EXPECT_EQ(options.gradientAccumulation, 4);
  EXPECT_EQ(options.seed, UINT64_MAX);
  EXPECT_EQ(options.init, InitKind::Random);
  EXPECT_EQ(options.weightsFile, "w.safetensors");
  EXPECT_EQ(options.checkpointDirectory, "ckpt");
  EXPECT_EQ(options.checkpointEvery, 50);
  EXPECT_TRUE(options.resume);
  EXPECT_EQ(options.metricsFile, "m.jsonl");
  EXPECT_EQ(options.dumpParametersFile, "p.safetensors");
  EXPECT_DOUBLE_EQ(options.lossScaleInit, 1024);
  EXPECT_EQ(options.lossScaleWindow, 100);
  EXPECT_FALSE(options.shuffle);
  EXPECT_FALSE(options.cudaGraphs);
  EXPECT_TRUE(parse({"--cuda-graphs=on"}).cudaGraphs);
  EXPECT_FALSE(parse({}).gemmAutotune);
  EXPECT_TRUE(parse({"--gemm-autotune", "on"}).gemmAutotune);
  EXPECT_FALSE(parse({"--gemm-autotune=off"}).gemmAutotune);
  EXPECT_TRUE(parse({"--attention-autotune", "on"}).attentionAutotune);
  EXPECT_FALSE(parse({"--attention-autotune=off"}).attentionAutotune);
  EXPECT_FALSE(parse({}).deterministic);
  EXPECT_TRUE(parse({"--deterministic", "on"}).deterministic);
  EXPECT_FALSE(parse({}).offloadOptimizer);
  EXPECT_TRUE(parse({"--offload", "optimizer"}).offloadOptimizer);
  EXPECT_FALSE(parse({"--offload=none"}).offloadOptimizer);
  // Given or not: without the flag the compiled plan decides (TrainMain).
  EXPECT_FALSE(parse({}).offloadGiven);
  EXPECT_TRUE(parse({"--offload=none"}).offloadGiven);
  EXPECT_DOUBLE_EQ(parse({}).ropeTheta, 0);
  EXPECT_DOUBLE_EQ(
      parse({"--init", "random", "--rope-theta", "5e5"}).ropeTheta, 5e5);
  EXPECT_EQ(parse({"--schedule", "linear"}).schedule, ScheduleKind::Linear);
}

// Tests that --help stops parsing (even before a bad flag) and that the
// usage text lists every flag.
TEST(Flags, Help) {
  EXPECT_TRUE(parse({"--help", "--bogus"}).help);
  std::string usage = usageText("train");
  for (const char *flag : {"--data",
                           "--steps",
                           "--lr",
                           "--warmup",
                           "--schedule",
                           "--min-lr-ratio",
                           "--beta1",
                           "--beta2",
                           "--eps",
                           "--weight-decay",
                           "--grad-clip",
                           "--grad-accum",
                           "--seed",
                           "--init",
                           "--weights",
                           "--checkpoint-dir",
                           "--checkpoint-every",
                           "--resume",
                           "--metrics",
                           "--dump-params",
                           "--loss-scale-init",
                           "--loss-scale-window",
                           "--help"})
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
}

// Tests that each kind of mistake is reported with the flag it concerns.
TEST(Flags, Errors) {
  struct Case {
    std::vector<std::string> words;
    const char *expected;
  };
  const Case cases[] = {
      {{"--bogus"}, "unknown flag '--bogus'"},
      {{"data.bin"}, "unexpected argument 'data.bin'"},
      {{"--steps"}, "--steps: missing value N"},
      {{"--steps", "ten"}, "--steps: 'ten' is not an integer"},
      {{"--steps", "-1"}, "--steps: -1 is below the minimum 0"},
      {{"--steps", "99999999999999999999"}, "--steps: '99999999999999999999'"},
      {{"--lr", "1e-3x"}, "--lr: '1e-3x' is not a finite number"},
      {{"--lr", ""}, "--lr: '' is not a finite number"},
      {{"--lr", "nan"}, "--lr: 'nan' is not a finite number"},
      {{"--lr", "-1"}, "--lr: -1 is below the minimum 0"},
      {{"--beta1", "1"}, "--beta1: 1 must be below 1"},
      {{"--beta2", "-0.5"}, "--beta2: -0.5 is below the minimum 0"},
      {{"--eps", "0"}, "--eps: 0 must be positive"},
      {{"--grad-clip", "-1"}, "--grad-clip: -1 is below the minimum 0"},
      {{"--grad-accum", "0"}, "--grad-accum: 0 is below the minimum 1"},
      {{"--seed", "-3"}, "--seed: '-3' is not a non-negative integer"},
      {{"--schedule", "step"}, "--schedule: 'step' is not one of constant"},
      {{"--init", "zeros"}, "--init: 'zeros' is not one of onnx, random"},
      {{"--min-lr-ratio", "2"}, "--min-lr-ratio: 2 is above 1"},
      {{"--loss-scale-init", "0"}, "--loss-scale-init: 0 must be positive"},
      {{"--loss-scale-window", "0"}, "--loss-scale-window: 0 is below"},
      {{"--resume=yes"}, "--resume: takes no value"},
      {{"--cuda-graphs", "yes"}, "--cuda-graphs: 'yes' is not one of on, off"},
      {{"--gemm-autotune", "1"}, "--gemm-autotune: '1' is not one of on, off"},
      {{"--attention-autotune", "yes"},
       "--attention-autotune: 'yes' is not one of on, off"},
      {{"--offload", "moments"},
       "--offload: 'moments' is not one of none, optimizer"},
      {{"--rope-theta", "1", "--init", "random"}, "--rope-theta: 1 is not above 1"},
      {{"--rope-theta", "1e4"}, "--rope-theta: needs --init random"},
      {{"--data="}, "--data: the pattern is empty"},
      {{"--resume"}, "--resume: needs --checkpoint-dir"},
      {{"--checkpoint-every", "5"},
       "--checkpoint-every: needs --checkpoint-dir"},
      {{"--steps", "5", "--warmup", "6"}, "--warmup: 6 warmup steps exceed"},
      {{"--loss-scale-hysteresis", "0"},
       "--loss-scale-hysteresis: 0 is below the minimum 1"},
      {{"--grad-norms-every", "-2"}, "--grad-norms-every: -2 is below"},
      {{"--on-spike", "panic"}, "--on-spike: unknown action 'panic'"},
      {{"--on-spike", "skip,"}, "--on-spike: unknown action ''"},
      {{"--on-spike", "lower-lr=2"},
       "--on-spike: lower-lr=2: the factor must be in (0, 1)"},
      {{"--on-spike", "lower-lr=x"}, "--on-spike: 'x' is not a finite number"},
      {{"--on-spike", "checkpoint"},
       "--on-spike checkpoint: needs --checkpoint-dir"},
      {{"--spike-window", "1"}, "--spike-window: 1 is below the minimum 2"},
      {{"--spike-window", "1000000"},
       "--spike-window: 1000000 is above the maximum 100000"},
      {{"--spike-sigma", "0"}, "--spike-sigma: 0 must be positive"},
      {{"--max-skipped-steps", "-1"}, "--max-skipped-steps: -1 is below"},
      {{"--overwrite-checkpoints"},
       "--overwrite-checkpoints: needs --checkpoint-dir"},
      {{"--checkpoint-dir", "d", "--overwrite-checkpoints", "--resume"},
       "--overwrite-checkpoints: contradicts --resume"},
      {{"--eps", "1e-300"}, "--eps: 1e-300 is 0 in f32, the precision AdamW"},
      {{"--loss-scale-init", "1e39"},
       "--loss-scale-init: 1e39 is not a finite, nonzero f32"},
      {{"--lr", "1e-320"}, "--lr: '1e-320' is too close to 0 for a double"},
  };
  for (const Case &c : cases) {
    std::string message = parseError(c.words);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << "got '" << message << "', expected '" << c.expected << "'";
    EXPECT_NE(message.find("--help"), std::string::npos) << message;
  }
}

} // namespace

namespace {

// Tests the training-health flags: spike detection off unless --on-spike
// names actions, their combination, the window and the hysteresis.
TEST(Flags, GradientHealth) {
  TrainOptions defaults = parse({});
  EXPECT_FALSE(defaults.onSpike.enabled());
  EXPECT_EQ(defaults.spikeWindow, 50);
  EXPECT_DOUBLE_EQ(defaults.spikeSigma, 3);
  EXPECT_EQ(defaults.gradientNormsEvery, 0);
  EXPECT_EQ(defaults.lossScaleHysteresis, 1);
  TrainOptions options =
      parse({"--on-spike=skip,lower-lr=0.5,stop", "--spike-window", "20",
             "--spike-sigma", "4.5", "--grad-norms-every", "10",
             "--loss-scale-hysteresis", "2"});
  EXPECT_TRUE(options.onSpike.has(SpikeActions::Skip));
  EXPECT_TRUE(options.onSpike.has(SpikeActions::Stop));
  EXPECT_TRUE(options.onSpike.has(SpikeActions::LowerLearningRate));
  EXPECT_FALSE(options.onSpike.has(SpikeActions::Clip));
  EXPECT_DOUBLE_EQ(options.onSpike.learningRateFactor, 0.5);
  EXPECT_EQ(options.spikeWindow, 20);
  EXPECT_DOUBLE_EQ(options.spikeSigma, 4.5);
  EXPECT_EQ(options.gradientNormsEvery, 10);
  EXPECT_EQ(options.lossScaleHysteresis, 2);
  EXPECT_TRUE(parse({"--on-spike", "report"}).onSpike.enabled());
}

TEST(Flags, NoDecayAndDumpGrads) {
  TrainOptions options = parse({"--no-decay", "bias|ln_", "--dump-grads",
                                "g.safetensors"});
  EXPECT_EQ(options.noDecayPattern, "bias|ln_");
  EXPECT_EQ(options.dumpGradientsFile, "g.safetensors");
  EXPECT_TRUE(parse({}).noDecayPattern.empty());
  std::string error = parseError({"--no-decay", "("});
  EXPECT_NE(error.find("--no-decay: '(' is not a valid regular expression"),
            std::string::npos)
      << error;
  EXPECT_NE(parseError({"--dump-grads", ""}).find("--dump-grads: the file name is empty"),
            std::string::npos);
}

} // namespace
