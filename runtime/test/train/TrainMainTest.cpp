//===- TrainMainTest.cpp - tessera_train_main end to end ------------------===//
//
// The driver is tested on a program written here by hand instead of one
// compiled by tesserac: softmax regression over one-hot tokens, logits[n] =
// W[token[n], :] + b (W [V, V], b [V]), mean cross-entropy against the
// targets, gradients by plain loops. It is small enough to run dozens of
// steps in milliseconds and learns the data's next-token rule, and hooks let
// a test make a call fail, return infinite gradients, or return gradients
// many times their size (a gradient spike) at a chosen call.
//
//===----------------------------------------------------------------------===//

#include "RunOutputs.h"
#include "tessera/runtime/program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <dirent.h>
#include <sys/stat.h>
#include <cmath>
#include <limits>
#include <set>

using namespace tessera::train;
using namespace tessera_train_test;

namespace {

constexpr int64_t kVocabulary = 8;

/// What the hand-written program does besides computing: counts its calls,
/// records the dropout seeds it receives, and fails or overflows on request.
struct ProgramHooks {
  int calls = 0;
  int failAtCall = -1;
  int overflowAtCall = -1;
  /// Further calls whose gradients overflow.
  std::set<int> overflowCalls;
  int spikeAtCall = -1;
  float spikeFactor = 100;
  int nanLossAtCall = -1;
  std::vector<uint64_t> seeds;
};
ProgramHooks hooks;

int softmaxRegression(const tessera_step_context * /*context*/,
                      const tessera_tensor *parameters,
                      const tessera_tensor * /*buffers*/,
                      const tessera_tensor *tokens,
                      const tessera_tensor *targets, float lossScale,
                      uint64_t seed, float *loss, tessera_tensor *gradients) {
  ++hooks.calls;
  hooks.seeds.push_back(seed);
  if (hooks.calls == hooks.failAtCall)
    return failLikeAKernel();
  const int64_t v = kVocabulary;
  const auto *weight = static_cast<const float *>(parameters[0].data);
  const auto *bias = static_cast<const float *>(parameters[1].data);
  const auto *ids = static_cast<const int64_t *>(tokens->data);
  const auto *labels = static_cast<const int64_t *>(targets->data);
  const int64_t count = tokens->shape[0] * tokens->shape[1];
  std::vector<float> dWeight(static_cast<size_t>(v * v), 0.0f);
  std::vector<float> dBias(static_cast<size_t>(v), 0.0f);
  double total = 0;
  for (int64_t n = 0; n < count; ++n) {
    std::vector<double> logits(static_cast<size_t>(v));
    double largest = -1e30;
    for (int64_t j = 0; j < v; ++j) {
      logits[static_cast<size_t>(j)] = weight[ids[n] * v + j] + bias[j];
      largest = std::max(largest, logits[static_cast<size_t>(j)]);
    }
    double sum = 0;
    for (double &logit : logits)
      sum += std::exp(logit - largest);
    total += largest + std::log(sum) - logits[static_cast<size_t>(labels[n])];
    for (int64_t j = 0; j < v; ++j) {
      double probability =
          std::exp(logits[static_cast<size_t>(j)] - largest) / sum;
      auto d = static_cast<float>((probability - (j == labels[n] ? 1.0 : 0.0)) /
                                  count * lossScale);
      dWeight[static_cast<size_t>(ids[n] * v + j)] += d;
      dBias[static_cast<size_t>(j)] += d;
    }
  }
  *loss = static_cast<float>(total / count);
  if (hooks.calls == hooks.nanLossAtCall)
    *loss = std::numeric_limits<float>::quiet_NaN();
  if (hooks.calls == hooks.overflowAtCall ||
      hooks.overflowCalls.count(hooks.calls))
    dWeight[3] = std::numeric_limits<float>::infinity();
  if (hooks.calls == hooks.spikeAtCall) {
    for (float &d : dWeight)
      d *= hooks.spikeFactor;
    for (float &d : dBias)
      d *= hooks.spikeFactor;
  }
  std::vector<float> *sources[] = {&dWeight, &dBias};
  for (int i = 0; i < 2; ++i) {
    tessera_tensor source = gradients[i];
    source.data = sources[i]->data();
    source.dtype = TESSERA_F32;
    if (tessera_cpu_cast(&source, &gradients[i]) != 0)
      return 1;
  }
  return 0;
}

/// Another model: the same computation with one more parameter (whose
/// gradient is zero), to check that checkpoints do not cross models.
int widerModel(const tessera_step_context *context,
               const tessera_tensor *parameters, const tessera_tensor *buffers,
               const tessera_tensor *tokens, const tessera_tensor *targets,
               float lossScale, uint64_t seed, float *loss,
               tessera_tensor *gradients) {
  float *extra = static_cast<float *>(gradients[2].data);
  extra[0] = extra[1] = 0;
  return softmaxRegression(context, parameters, buffers, tokens, targets,
                           lossScale, seed, loss, gradients);
}

const tessera_tensor_info kParameters[] = {
    {"linear.weight", TESSERA_F32, 2, {kVocabulary, kVocabulary}},
    {"linear.bias", TESSERA_F32, 1, {kVocabulary}},
    {"linear.extra", TESSERA_F32, 1, {2}},
};

/// The data's rule: the token after x is (3x + 1) mod 8, a permutation the
/// model can learn exactly.
int64_t successor(int64_t token) { return (3 * token + 1) % kVocabulary; }

struct TrainRun {
  int exitCode;
  std::string out;
  std::string err;
};

/// The names in `directory` that look like a writer's temporary file
/// (NAME.tmp.XXXXXX), space-separated: what a failed or finished run must
/// not leave behind.
std::string temporaryFilesIn(const std::string &directory) {
  std::string found;
  if (DIR *listing = ::opendir(directory.c_str())) {
    while (dirent *entry = ::readdir(listing))
      if (std::string(entry->d_name).find(".tmp.") != std::string::npos)
        found += std::string(found.empty() ? "" : " ") + entry->d_name;
    ::closedir(listing);
  }
  return found;
}

class TrainMainTest : public ::testing::Test {
protected:
  TemporaryDirectory temporary;
  std::string directory;
  std::string weightsPath;
  std::string dataPath;

  void SetUp() override {
    hooks = ProgramHooks();
    directory = temporary.getPath();
    weightsPath = directory + "/tiny.safetensors";
    std::vector<float> weight(kVocabulary * kVocabulary), bias(kVocabulary, 0);
    for (size_t i = 0; i < weight.size(); ++i)
      weight[i] = 0.01f * static_cast<float>(static_cast<int>(i * 7 % 5) - 2);
    writeSafetensors(weightsPath,
                     {{"linear.weight",
                       TESSERA_F32,
                       {kVocabulary, kVocabulary},
                       weight.data()},
                      {"linear.bias", TESSERA_F32, {kVocabulary}, bias.data()}},
                     {});
    // 24 rows of 5 tokens following the rule, each from its own start.
    dataPath = directory + "/rows.npy";
    std::vector<int64_t> rows;
    for (int row = 0; row < 24; ++row) {
      int64_t token = (row * 5) % kVocabulary;
      for (int column = 0; column < 5; ++column) {
        rows.push_back(token);
        token = successor(token);
      }
    }
    writeNpy(dataPath, "<i8", {24, 5}, rows);
  }

  tessera_program program(int64_t batch = 4,
                          int32_t precision = TESSERA_PRECISION_FP32) const {
    tessera_program p{};
    p.model_name = "softmax-regression.onnx";
    p.weights_file = weightsPath.c_str();
    p.loss_kind = TESSERA_LOSS_CAUSAL_LM;
    p.precision = precision;
    p.batch = batch;
    p.sequence = 4;
    p.vocabulary = kVocabulary;
    p.ignore_index = -100;
    p.parameter_count = 2;
    p.parameters = kParameters;
    p.forward_backward = softmaxRegression;
    return p;
  }

  TrainRun train(std::vector<std::string> words, const tessera_program &which) {
    Arguments arguments(std::move(words));
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    int code = tessera_train_main(arguments.argc(), arguments.argv(), &which);
    TrainRun run{code, ::testing::internal::GetCapturedStdout(),
                 ::testing::internal::GetCapturedStderr()};
    return run;
  }
};

// Tests that a few steps learn the data's rule: the loss falls, every step
// prints a line, and the metrics file has one object a step with its keys.
TEST_F(TrainMainTest, LossFalls) {
  std::string metrics = directory + "/metrics.jsonl";
  TrainRun run =
      train({"--data", dataPath, "--steps", "30", "--lr", "0.1", "--metrics",
             metrics, "--schedule", "cosine", "--warmup", "3"},
            program());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_NE(run.out.find("step     1/30 | loss "), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("step    30/30 | loss "), std::string::npos);
  EXPECT_NE(run.out.find("tokens/s"), std::string::npos);
  std::vector<JsonValue> records = readMetrics(metrics);
  ASSERT_EQ(records.size(), 30u);
  for (const char *key :
       {"step", "loss", "lr", "grad_norm", "tokens_per_s", "step_ms",
        "loss_scale", "skipped", "mfu", "peak_memory_gib"})
    EXPECT_TRUE(records[0].find(key)) << key;
  double first = records.front().find("loss")->number;
  double last = records.back().find("loss")->number;
  EXPECT_NEAR(first, std::log(8.0), 0.05) << "near-uniform start";
  EXPECT_LT(last, 0.5 * first);
  EXPECT_NEAR(records[0].find("lr")->number, 0.1 / 3, 1e-12);
  EXPECT_EQ(records[0].find("skipped")->boolean, false);
  EXPECT_EQ(records[0].find("loss_scale")->number, 1);
  EXPECT_EQ(hooks.calls, 30);
}

// Tests that killing a run (here: the program fails in step 5) and resuming
// from its last checkpoint gives exactly the bits of an uninterrupted run:
// parameters, moments, the data read and the dropout seeds.
TEST_F(TrainMainTest, ResumeIsBitForBit) {
  std::vector<std::string> common = {"--data",
                                     dataPath,
                                     "--steps",
                                     "8",
                                     "--lr",
                                     "0.05",
                                     "--warmup",
                                     "2",
                                     "--schedule",
                                     "cosine",
                                     "--grad-clip",
                                     "0.5",
                                     "--weight-decay",
                                     "0.1",
                                     "--seed",
                                     "99",
                                     "--checkpoint-every",
                                     "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> words = common;
    words.insert(words.end(), extra.begin(), extra.end());
    return words;
  };
  TrainRun whole = train(
      with({"--checkpoint-dir", directory + "/whole", "--dump-params",
            directory + "/whole.st", "--metrics", directory + "/whole.jsonl"}),
      program());
  ASSERT_EQ(whole.exitCode, 0) << whole.err;
  std::vector<uint64_t> wholeSeeds = hooks.seeds;

  hooks = ProgramHooks();
  hooks.failAtCall = 5;
  TrainRun killed = train(
      with({"--checkpoint-dir", directory + "/parts", "--dump-params",
            directory + "/parts.st", "--metrics", directory + "/parts.jsonl"}),
      program());
  EXPECT_EQ(killed.exitCode, 1);
  EXPECT_NE(killed.err.find("train: error: step 5, micro-batch 1: "
                            "tessera_cpu_embedding"),
            std::string::npos)
      << killed.err;
  EXPECT_TRUE(fileExists(directory + "/parts/checkpoint_00000004.safetensors"));
  EXPECT_FALSE(fileExists(directory + "/parts.st"));

  hooks = ProgramHooks();
  TrainRun resumed =
      train(with({"--checkpoint-dir", directory + "/parts", "--dump-params",
                  directory + "/parts.st", "--metrics",
                  directory + "/parts.jsonl", "--resume"}),
            program());
  ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("resuming from " + directory +
                             "/parts/checkpoint_00000004.safetensors (step 4)"),
            std::string::npos)
      << resumed.out;
  EXPECT_EQ(hooks.seeds,
            std::vector<uint64_t>(wholeSeeds.begin() + 4, wholeSeeds.end()));
  EXPECT_EQ(readBytes(directory + "/parts.st"),
            readBytes(directory + "/whole.st"));
  expectSameState(directory + "/parts/checkpoint_00000008.safetensors",
                  directory + "/whole/checkpoint_00000008.safetensors");

  // The resumed metrics continue the killed run's file: together they are the
  // uninterrupted run's, apart from the timings.
  std::vector<JsonValue> a = readMetrics(directory + "/whole.jsonl");
  std::vector<JsonValue> b = readMetrics(directory + "/parts.jsonl");
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].find("step")->number, static_cast<double>(i + 1));
    for (const char *key : {"loss", "lr", "grad_norm"})
      EXPECT_EQ(a[i].find(key)->numberText, b[i].find(key)->numberText) << key;
  }

  SafetensorsFile checkpoint =
      readSafetensors(directory + "/whole/checkpoint_00000008.safetensors");
  EXPECT_EQ(checkpoint.metadata.at("step"), "8");
  EXPECT_EQ(checkpoint.metadata.at("optimizer_step"), "8");
  EXPECT_EQ(checkpoint.metadata.at("seed"), "99");
  EXPECT_EQ(checkpoint.metadata.at("data_position"), "32");
  EXPECT_EQ(checkpoint.metadata.at("model"), "softmax-regression.onnx");
  EXPECT_TRUE(checkpoint.find("optimizer.m.linear.weight"));
  EXPECT_TRUE(checkpoint.find("optimizer.v.linear.bias"));
  EXPECT_EQ(checkpoint.tensors.size(), 6u);
}

// Tests that the metrics file of a resumed run holds each step once, as an
// uninterrupted run's does: the killed run wrote step 5 after its last
// checkpoint (step 4) and was cut short in the middle of step 6's line;
// resuming from step 4 drops both and writes them again.
TEST_F(TrainMainTest, ResumedMetricsHoldEachStepOnce) {
  std::vector<std::string> common = {"--data",  dataPath, "--steps",
                                     "8",       "--lr",   "0.05",
                                     "--seed",  "7",      "--checkpoint-every",
                                     "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> words = common;
    words.insert(words.end(), extra.begin(), extra.end());
    return words;
  };
  TrainRun whole = train(with({"--checkpoint-dir", directory + "/whole",
                               "--metrics", directory + "/whole.jsonl"}),
                         program());
  ASSERT_EQ(whole.exitCode, 0) << whole.err;

  hooks = ProgramHooks();
  hooks.failAtCall = 6;
  const std::string metrics = directory + "/parts.jsonl";
  TrainRun killed = train(
      with({"--checkpoint-dir", directory + "/parts", "--metrics", metrics}),
      program());
  ASSERT_EQ(killed.exitCode, 1);
  ASSERT_EQ(readMetrics(metrics).size(), 5u);
  writeBytes(metrics, readBytes(metrics) + "{\"step\":6,\"loss\":2.0");

  hooks = ProgramHooks();
  TrainRun resumed = train(with({"--checkpoint-dir", directory + "/parts",
                                 "--metrics", metrics, "--resume"}),
                           program());
  ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
  std::vector<JsonValue> a = readMetrics(directory + "/whole.jsonl");
  std::vector<JsonValue> b = readMetrics(metrics);
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u) << readBytes(metrics);
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i].find("step")->number, static_cast<double>(i + 1));
    EXPECT_EQ(a[i].find("loss")->numberText, b[i].find("loss")->numberText)
        << i;
  }
  EXPECT_EQ(temporaryFilesIn(directory), "");
}

// Tests that a run which fails before its first step leaves the previous
// run's metrics file as it was (a new run replaces it only when it has a
// step to write), and leaves no temporary file behind.
TEST_F(TrainMainTest, AFailedStartKeepsThePreviousMetrics) {
  const std::string metrics = directory + "/m.jsonl";
  TrainRun first =
      train({"--data", dataPath, "--steps", "2", "--metrics", metrics},
            program());
  ASSERT_EQ(first.exitCode, 0) << first.err;
  const std::string before = readBytes(metrics);
  ASSERT_EQ(readMetrics(metrics).size(), 2u);

  TrainRun failed = train({"--data", directory + "/missing.bin", "--steps",
                           "3", "--metrics", metrics},
                          program());
  EXPECT_EQ(failed.exitCode, 1);
  EXPECT_EQ(readBytes(metrics), before);
  hooks = ProgramHooks();
  hooks.failAtCall = 1;
  failed = train({"--data", dataPath, "--steps", "3", "--metrics", metrics},
                 program());
  EXPECT_EQ(failed.exitCode, 1);
  EXPECT_EQ(readBytes(metrics), before);
  EXPECT_EQ(temporaryFilesIn(directory), "");

  // The next run that trains replaces it.
  hooks = ProgramHooks();
  TrainRun next =
      train({"--data", dataPath, "--steps", "3", "--metrics", metrics},
            program());
  ASSERT_EQ(next.exitCode, 0) << next.err;
  EXPECT_EQ(readMetrics(metrics).size(), 3u);
}

// Tests that outputs on a file system that refuses new files are refused at
// start even for root (CI runs as root, for which access(2) says every
// directory is writable): sysfs takes no new files (EACCES for root, EROFS
// where it is mounted read-only). The driver probes by creating a file.
TEST_F(TrainMainTest, OutputsOnAFileSystemThatTakesNoFilesAreRefusedAtStart) {
  struct stat info;
  if (::stat("/sys", &info) != 0 || !S_ISDIR(info.st_mode))
    GTEST_SKIP() << "no /sys here";
  for (const auto &[flag, path] :
       std::vector<std::pair<std::string, std::string>>{
           {"--checkpoint-dir", "/sys"},
           {"--dump-params", "/sys/params.safetensors"},
           {"--dump-grads", "/sys/grads.safetensors"},
           {"--metrics", "/sys/metrics.jsonl"},
           {"--trace", "/sys/trace.json"}}) {
    hooks = ProgramHooks();
    TrainRun run = train({"--data", dataPath, "--steps", "1", flag, path},
                         program());
    EXPECT_EQ(run.exitCode, 1) << flag;
    EXPECT_NE(run.err.find(flag + ": "), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("/sys"), std::string::npos) << run.err;
    EXPECT_EQ(hooks.calls, 0) << flag;
  }
}

// Tests fp16 dynamic loss scaling: infinite gradients in step 3 skip that
// step's update and halve the scale; clean windows double it again.
TEST_F(TrainMainTest, Fp16OverflowSkipsStepAndHalvesScale) {
  hooks.overflowAtCall = 3;
  std::string metrics = directory + "/fp16.jsonl";
  TrainRun run = train({"--data", dataPath, "--steps", "6", "--lr", "0.05",
                        "--loss-scale-init", "1024", "--loss-scale-window", "2",
                        "--metrics", metrics, "--checkpoint-dir",
                        directory + "/ckpt", "--checkpoint-every", "1"},
                       program(4, TESSERA_PRECISION_FP16));
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("skipped: gradients overflowed at loss scale 2048"),
            std::string::npos)
      << run.out;
  std::vector<JsonValue> records = readMetrics(metrics);
  ASSERT_EQ(records.size(), 6u);
  const double scales[] = {1024, 1024, 2048, 1024, 1024, 2048};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(records[i].find("loss_scale")->number, scales[i]) << i;
    EXPECT_EQ(records[i].find("skipped")->boolean, i == 2) << i;
  }
  EXPECT_EQ(records[2].find("grad_norm")->kind, JsonValue::Kind::Null);

  auto at = [&](int step) {
    char name[64];
    std::snprintf(name, sizeof(name), "/ckpt/checkpoint_%08d.safetensors",
                  step);
    return readSafetensors(directory + name);
  };
  SafetensorsFile two = at(2), three = at(3), six = at(6);
  for (const char *name : {"linear.weight", "optimizer.m.linear.weight",
                           "optimizer.v.linear.bias"})
    EXPECT_EQ(floats(two, name), floats(three, name)) << name;
  EXPECT_NE(floats(three, "linear.weight"), floats(at(4), "linear.weight"));
  EXPECT_EQ(three.metadata.at("optimizer_step"), "2");
  EXPECT_EQ(six.metadata.at("optimizer_step"), "5");
  EXPECT_EQ(six.metadata.at("step"), "6");
  EXPECT_EQ(std::strtod(six.metadata.at("loss_scale").c_str(), nullptr), 2048);
}

// Tests --loss-scale-hysteresis: with K = 2 one overflow skips its step but
// keeps the scale; the second in a row halves it; a clean step in between
// starts the count again.
TEST_F(TrainMainTest, LossScaleHysteresisHalvesOnlyAfterKOverflowsInARow) {
  hooks.overflowCalls = {2, 4, 5, 6};
  std::string metrics = directory + "/fp16.jsonl";
  TrainRun run = train({"--data", dataPath, "--steps", "8", "--lr", "0.05",
                        "--loss-scale-init", "1024", "--loss-scale-window",
                        "100", "--loss-scale-hysteresis", "2", "--metrics",
                        metrics, "--checkpoint-dir", directory + "/ckpt",
                        "--checkpoint-every", "4"},
                       program(4, TESSERA_PRECISION_FP16));
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::vector<JsonValue> records = readMetrics(metrics);
  ASSERT_EQ(records.size(), 8u);
  // Step 2 overflows alone: skipped, scale kept. Steps 4, 5, 6 in a row:
  // the second (5) halves and so does the third (6).
  const double scales[] = {1024, 1024, 1024, 1024, 1024, 512, 256, 256};
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(records[i].find("loss_scale")->number, scales[i]) << i;
    EXPECT_EQ(records[i].find("skipped")->boolean,
              i == 1 || i == 3 || i == 4 || i == 5)
        << i;
  }
  // Mid-streak state is in the checkpoint: step 4 overflowed once so far.
  SafetensorsFile four =
      readSafetensors(directory + "/ckpt/checkpoint_00000004.safetensors");
  EXPECT_EQ(four.metadata.at("overflow_streak"), "1");
  EXPECT_EQ(four.metadata.at("clean_steps"), "0");
}

/// The flags of the spike tests: 16 constant-rate steps, a window of 6.
std::vector<std::string> spikeFlags(const std::string &data,
                                    const std::string &directory,
                                    std::vector<std::string> extra) {
  std::vector<std::string> words = {
      "--data",         data,   "--steps",     "16",
      "--lr",           "0.05", "--grad-clip", "0",
      "--spike-window", "6",    "--metrics",   directory + "/m.jsonl"};
  words.insert(words.end(), extra.begin(), extra.end());
  return words;
}

std::string checkpointName(const std::string &directory, int step) {
  char name[64];
  std::snprintf(name, sizeof(name), "/checkpoint_%08d.safetensors", step);
  return directory + name;
}

// Tests that a gradient 100 times its size in step 11 is the one spike
// found, reported on the console and in the metrics, and that `skip`
// leaves the weights and moments of step 10 and the AdamW step count as
// they were.
TEST_F(TrainMainTest, SpikeIsDetectedAtItsStepAndSkipped) {
  hooks.spikeAtCall = 11;
  std::string ckpt = directory + "/ckpt";
  TrainRun run = train(spikeFlags(dataPath, directory,
                                  {"--on-spike", "skip", "--checkpoint-dir",
                                   ckpt, "--checkpoint-every", "1"}),
                       program());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("step 11: gradient norm spike: "), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("over the last 6 steps); skip"), std::string::npos);
  EXPECT_NE(run.out.find("skipped: gradient norm spike"), std::string::npos);
  std::vector<JsonValue> records = readMetrics(directory + "/m.jsonl");
  ASSERT_EQ(records.size(), 16u);
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(records[i].find("spike")->boolean, i == 10) << "step " << i + 1;
    EXPECT_EQ(records[i].find("skipped")->boolean, i == 10) << i + 1;
  }
  const JsonValue *band = records[10].find("spike_band");
  ASSERT_TRUE(band);
  ASSERT_EQ(band->array.size(), 2u);
  EXPECT_GT(records[10].find("grad_norm")->number, band->array[1].number);
  EXPECT_EQ(records[10].find("spike_actions")->string, "skip");
  EXPECT_FALSE(records[9].find("spike_band"));

  SafetensorsFile ten = readSafetensors(checkpointName(ckpt, 10));
  SafetensorsFile eleven = readSafetensors(checkpointName(ckpt, 11));
  for (const char *name :
       {"linear.weight", "linear.bias", "optimizer.m.linear.weight",
        "optimizer.v.linear.bias"})
    EXPECT_EQ(floats(ten, name), floats(eleven, name)) << name;
  EXPECT_EQ(eleven.metadata.at("optimizer_step"), "10");
  EXPECT_EQ(eleven.metadata.at("gradient_spikes"), "1");
  // Six norms, the spike's clamped to the band's edge.
  std::string window = eleven.metadata.at("recent_grad_norms");
  EXPECT_EQ(std::count(window.begin(), window.end(), ','), 5) << window;
}

// Tests `clip`: the spiking step's gradient reaches AdamW scaled to the
// band's upper edge (read back from the first moment: m = b1 m' + (1 - b1) g),
// and the step is not skipped.
TEST_F(TrainMainTest, SpikeClipScalesTheGradientToTheBandsEdge) {
  hooks.spikeAtCall = 11;
  std::string ckpt = directory + "/ckpt";
  TrainRun run =
      train(spikeFlags(dataPath, directory,
                       {"--on-spike", "clip", "--checkpoint-dir", ckpt,
                        "--checkpoint-every", "1", "--weight-decay", "0"}),
            program());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::vector<JsonValue> records = readMetrics(directory + "/m.jsonl");
  ASSERT_TRUE(records[10].find("spike")->boolean);
  EXPECT_FALSE(records[10].find("skipped")->boolean);
  const double upper = records[10].find("spike_band")->array[1].number;
  SafetensorsFile ten = readSafetensors(checkpointName(ckpt, 10));
  SafetensorsFile eleven = readSafetensors(checkpointName(ckpt, 11));
  double squares = 0;
  for (const char *name : {"linear.weight", "linear.bias"}) {
    std::vector<float> before = floats(ten, std::string("optimizer.m.") + name);
    std::vector<float> after =
        floats(eleven, std::string("optimizer.m.") + name);
    for (size_t i = 0; i < before.size(); ++i) {
      double g = (after[i] - 0.9 * before[i]) / 0.1;
      squares += g * g;
    }
  }
  EXPECT_NEAR(std::sqrt(squares), upper, 1e-4 * upper);
  EXPECT_EQ(eleven.metadata.at("optimizer_step"), "11");
}

// Tests `lower-lr=F` (the rate from the spike on is F times the
// schedule's), and `checkpoint` (a checkpoint of the spiking step without
// --checkpoint-every).
TEST_F(TrainMainTest, SpikeLowersTheRateAndCheckpoints) {
  hooks.spikeAtCall = 11;
  std::string ckpt = directory + "/ckpt";
  TrainRun run =
      train(spikeFlags(dataPath, directory,
                       {"--on-spike", "lower-lr=0.25,checkpoint,skip",
                        "--checkpoint-dir", ckpt}),
            program());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::vector<JsonValue> records = readMetrics(directory + "/m.jsonl");
  ASSERT_EQ(records.size(), 16u);
  for (size_t i = 0; i < records.size(); ++i)
    EXPECT_DOUBLE_EQ(records[i].find("lr")->number, i < 10 ? 0.05 : 0.0125)
        << i + 1;
  EXPECT_EQ(records[10].find("spike_actions")->string,
            "skip,lower-lr=0.25,checkpoint");
  EXPECT_TRUE(fileExists(checkpointName(ckpt, 11)));
  EXPECT_TRUE(fileExists(checkpointName(ckpt, 16)));
  EXPECT_FALSE(fileExists(checkpointName(ckpt, 10)));
  EXPECT_FALSE(fileExists(checkpointName(ckpt, 12)));
  SafetensorsFile last = readSafetensors(checkpointName(ckpt, 16));
  EXPECT_EQ(
      std::strtod(last.metadata.at("learning_rate_factor").c_str(), nullptr),
      0.25);
}

// Tests `stop`: the run ends after the spiking step with exit code 1 and a
// message naming the step, its checkpoint written first.
TEST_F(TrainMainTest, SpikeStopEndsTheRunWithAnError) {
  hooks.spikeAtCall = 11;
  std::string ckpt = directory + "/ckpt";
  TrainRun run = train(
      spikeFlags(dataPath, directory,
                 {"--on-spike", "stop,checkpoint", "--checkpoint-dir", ckpt}),
      program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("train: error: step 11: gradient norm "),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("stopped (--on-spike stop); the checkpoint of step "
                         "11 is written"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(readMetrics(directory + "/m.jsonl").size(), 11u);
  EXPECT_TRUE(fileExists(checkpointName(ckpt, 11)));
  EXPECT_EQ(
      readSafetensors(checkpointName(ckpt, 11)).metadata.at("optimizer_step"),
      "10");
  EXPECT_EQ(hooks.calls, 11);
}

// Tests that a run killed after a checkpoint taken mid-window (step 8: the
// window holds steps 3..8) and resumed finds the same spike, takes the
// same actions and ends with the same bits as the uninterrupted run.
TEST_F(TrainMainTest, SpikeDecisionsResumeBitForBit) {
  auto flags = [&](const std::string &name) {
    return spikeFlags(dataPath, directory,
                      {"--on-spike", "skip,lower-lr=0.5", "--checkpoint-dir",
                       directory + "/" + name, "--checkpoint-every", "4",
                       "--metrics", directory + "/" + name + ".jsonl"});
  };
  hooks.spikeAtCall = 11;
  TrainRun whole = train(flags("whole"), program());
  ASSERT_EQ(whole.exitCode, 0) << whole.err;

  hooks = ProgramHooks();
  hooks.failAtCall = 9;
  TrainRun killed = train(flags("parts"), program());
  ASSERT_EQ(killed.exitCode, 1);
  hooks = ProgramHooks();
  hooks.spikeAtCall = 3; // the resumed run's third call is step 11
  std::vector<std::string> resume = flags("parts");
  resume.push_back("--resume");
  TrainRun resumed = train(resume, program());
  ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
  EXPECT_NE(resumed.out.find("step 11: gradient norm spike"), std::string::npos)
      << resumed.out;
  expectSameState(checkpointName(directory + "/parts", 16),
                  checkpointName(directory + "/whole", 16));
  std::vector<JsonValue> a = readMetrics(directory + "/whole.jsonl");
  std::vector<JsonValue> b = readMetrics(directory + "/parts.jsonl");
  ASSERT_EQ(a.size(), 16u);
  ASSERT_EQ(b.size(), 16u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].find("spike")->boolean, b[i].find("spike")->boolean) << i;
    for (const char *key : {"loss", "lr", "grad_norm"})
      EXPECT_EQ(a[i].find(key)->numberText, b[i].find(key)->numberText)
          << key << " " << i;
  }
}

// Tests --grad-norms-every: the per-parameter norms are those of the
// gradients --dump-grads writes, and the layer "linear" holds both.
TEST_F(TrainMainTest, GradientNormsMatchTheDumpedGradients) {
  std::string metrics = directory + "/m.jsonl";
  TrainRun run =
      train({"--data", dataPath, "--steps", "4", "--lr", "0.05",
             "--grad-norms-every", "2", "--grad-accum", "2", "--metrics",
             metrics, "--dump-grads", directory + "/grads.st"},
            program(2));
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::vector<JsonValue> records = readMetrics(metrics);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_FALSE(records[0].find("param_grad_norms"));
  EXPECT_FALSE(records[2].find("layer_grad_norms"));
  const JsonValue *parameters = records[3].find("param_grad_norms");
  const JsonValue *layers = records[3].find("layer_grad_norms");
  ASSERT_TRUE(parameters && layers);
  SafetensorsFile grads = readSafetensors(directory + "/grads.st");
  double total = 0;
  for (const char *name : {"linear.weight", "linear.bias"}) {
    double squares = 0;
    for (float g : floats(grads, name))
      squares += static_cast<double>(g) * g;
    total += squares;
    ASSERT_TRUE(parameters->find(name)) << name;
    EXPECT_NEAR(parameters->find(name)->number, std::sqrt(squares),
                1e-6 * std::sqrt(squares))
        << name;
  }
  ASSERT_TRUE(layers->find("linear"));
  EXPECT_NEAR(layers->find("linear")->number, std::sqrt(total),
              1e-6 * std::sqrt(total));
  EXPECT_NEAR(records[3].find("grad_norm")->number, std::sqrt(total),
              1e-6 * std::sqrt(total));
}

// Tests that an update too large for f32 (--lr 1e38: the step size
// overflows) ends the run at the step that made it, naming the parameter,
// with nothing of that step written: the previous checkpoint stays the
// newest, no dump appears, and every checkpoint holds finite weights.
TEST_F(TrainMainTest, NonFiniteUpdateEndsTheRunBeforeAnythingIsWritten) {
  std::string ckpt = directory + "/ckpt";
  TrainRun run = train({"--data", dataPath, "--steps", "4", "--lr", "1e-2",
                        "--checkpoint-dir", ckpt, "--checkpoint-every", "1",
                        "--dump-params", directory + "/params.st"},
                       program());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  run = train({"--data", dataPath, "--steps", "8", "--lr", "3e38",
               "--checkpoint-dir", ckpt, "--checkpoint-every", "1", "--resume",
               "--dump-params", directory + "/huge.st"},
              program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("train: error: step 5: the AdamW update made "
                         "'linear.weight' (or its second moment) non-finite: "
                         "the update at learning rate 3e+38 does not fit f32 "
                         "(try a lower --lr); nothing of this step is written "
                         "(the last checkpoint is step 4)"),
            std::string::npos)
      << run.err;
  EXPECT_FALSE(fileExists(checkpointName(ckpt, 5)));
  EXPECT_FALSE(fileExists(directory + "/huge.st"));
  SafetensorsFile four = readSafetensors(checkpointName(ckpt, 4));
  for (float value : floats(four, "linear.weight"))
    EXPECT_TRUE(std::isfinite(value));
}

// Tests that fp16 runs end with an error instead of skipping forever: a NaN
// forward loss is not an overflow the scale could fix, and steps skipped
// in a row beyond --max-skipped-steps stop the run (exit 0 only when the
// steps were trained).
TEST_F(TrainMainTest, Fp16DivergenceIsAnError) {
  hooks.nanLossAtCall = 2;
  TrainRun run = train({"--data", dataPath, "--steps", "4"},
                       program(4, TESSERA_PRECISION_FP16));
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("step 2: the forward loss is nan (fp16): the forward "
                         "pass itself overflowed or diverged"),
            std::string::npos)
      << run.err;

  hooks = ProgramHooks();
  hooks.overflowCalls = {3, 4, 5, 6, 7, 8};
  run = train({"--data", dataPath, "--steps", "8", "--max-skipped-steps", "3"},
              program(4, TESSERA_PRECISION_FP16));
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("step 5: 3 steps in a row were skipped (the fp16 "
                         "gradients overflow at loss scale"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("the run is not training (--max-skipped-steps 3)"),
            std::string::npos);
}

// Tests that a new run into a directory holding another run's checkpoints
// is refused (its later --resume would continue the other run), that
// --overwrite-checkpoints deletes them, and that checkpoints carry their
// run's id across a resume.
TEST_F(TrainMainTest, AStaleCheckpointDirectoryIsRefused) {
  std::string ckpt = directory + "/ckpt";
  TrainRun first = train({"--data", dataPath, "--steps", "6",
                          "--checkpoint-dir", ckpt, "--checkpoint-every", "3"},
                         program());
  ASSERT_EQ(first.exitCode, 0) << first.err;
  const std::string run =
      readSafetensors(checkpointName(ckpt, 6)).metadata.at("run");
  EXPECT_EQ(run.size(), 16u);

  TrainRun again =
      train({"--data", dataPath, "--steps", "2", "--checkpoint-dir", ckpt},
            program());
  EXPECT_EQ(again.exitCode, 1);
  EXPECT_NE(again.err.find("already holds 2 checkpoint(s) (newest " +
                           checkpointName(ckpt, 6) +
                           "): continue that run with --resume"),
            std::string::npos)
      << again.err;

  TrainRun resumed = train({"--data", dataPath, "--steps", "8",
                            "--checkpoint-dir", ckpt, "--resume"},
                           program());
  ASSERT_EQ(resumed.exitCode, 0) << resumed.err;
  EXPECT_EQ(readSafetensors(checkpointName(ckpt, 8)).metadata.at("run"), run);

  TrainRun fresh = train({"--data", dataPath, "--steps", "2",
                          "--checkpoint-dir", ckpt, "--overwrite-checkpoints"},
                         program());
  ASSERT_EQ(fresh.exitCode, 0) << fresh.err;
  EXPECT_FALSE(fileExists(checkpointName(ckpt, 8)));
  EXPECT_FALSE(fileExists(checkpointName(ckpt, 3)));
  EXPECT_NE(readSafetensors(checkpointName(ckpt, 2)).metadata.at("run"), run);
}

// Tests that K micro-batches of B/K rows give the parameters of one batch of
// B rows (gradients averaged in f32; the data order does not depend on B).
TEST_F(TrainMainTest, GradientAccumulationMatchesOneBigBatch) {
  std::vector<std::string> common = {"--data", dataPath, "--steps",     "5",
                                     "--lr",   "0.05",   "--grad-clip", "0.3"};
  auto run = [&](int64_t batch, const char *accumulation, const char *dump) {
    std::vector<std::string> words = common;
    words.insert(words.end(), {"--grad-accum", accumulation, "--dump-params",
                               directory + dump});
    TrainRun result = train(words, program(batch));
    EXPECT_EQ(result.exitCode, 0) << result.err;
    return readSafetensors(directory + dump);
  };
  SafetensorsFile one = run(4, "1", "/one.st");
  SafetensorsFile two = run(2, "2", "/two.st");
  for (const char *name : {"linear.weight", "linear.bias"}) {
    std::vector<float> a = floats(one, name), b = floats(two, name);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 1e-6) << name << "[" << i << "]";
  }
  std::vector<float> initial =
      floats(readSafetensors(weightsPath), "linear.weight");
  EXPECT_NE(floats(one, "linear.weight"), initial) << "the run must train";
}

// Tests a bf16 program: its bf16 gradients are widened to f32 before AdamW,
// and the run stays close to the f32 one.
TEST_F(TrainMainTest, Bf16TracksFp32) {
  auto run = [&](int32_t precision, const char *dump) {
    TrainRun result = train({"--data", dataPath, "--steps", "10", "--lr",
                             "0.05", "--dump-params", directory + dump},
                            program(4, precision));
    EXPECT_EQ(result.exitCode, 0) << result.err;
    return floats(readSafetensors(directory + dump), "linear.weight");
  };
  std::vector<float> f32 = run(TESSERA_PRECISION_FP32, "/f32.st");
  std::vector<float> bf16 = run(TESSERA_PRECISION_BF16, "/bf16.st");
  ASSERT_EQ(f32.size(), bf16.size());
  for (size_t i = 0; i < f32.size(); ++i)
    EXPECT_NEAR(f32[i], bf16[i], 2e-2) << i;
  EXPECT_NE(f32, bf16) << "bf16 rounding should be visible";
}

// Tests training from an llm.c token shard end to end.
TEST_F(TrainMainTest, TrainsOnTokenShards) {
  std::vector<uint16_t> tokens;
  int64_t token = 0;
  for (int i = 0; i < 4 * 16 * 4 + 1; ++i) {
    tokens.push_back(static_cast<uint16_t>(token));
    token = successor(token);
  }
  writeShard(directory + "/shard_000.bin", tokens);
  std::string metrics = directory + "/m.jsonl";
  TrainRun run = train({"--data", directory + "/shard_*.bin", "--steps", "20",
                        "--lr", "0.1", "--metrics", metrics},
                       program());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  std::vector<JsonValue> records = readMetrics(metrics);
  EXPECT_LT(records.back().find("loss")->number,
            0.5 * records.front().find("loss")->number);
}

// Tests --init random: N(0, 0.02) matrices and zero biases, and --steps 0
// (no data needed) just exporting the initial parameters.
TEST_F(TrainMainTest, RandomInitialization) {
  std::string dump = directory + "/init.st";
  TrainRun run = train({"--init", "random", "--steps", "0", "--seed", "3",
                        "--dump-params", dump},
                       program());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  SafetensorsFile file = readSafetensors(dump);
  EXPECT_EQ(file.tensors.size(), 2u);
  std::vector<float> weight = floats(file, "linear.weight");
  double sum = 0, squares = 0;
  for (float value : weight) {
    sum += value;
    squares += value * value;
  }
  double mean = sum / weight.size();
  double deviation = std::sqrt(squares / weight.size() - mean * mean);
  EXPECT_NEAR(mean, 0, 0.01);
  EXPECT_NEAR(deviation, 0.02, 0.007);
  EXPECT_EQ(floats(file, "linear.bias"), std::vector<float>(kVocabulary, 0.0f));
  EXPECT_EQ(file.metadata.at("format"), "pt");
}

// Tests the user errors a run can meet, each a message and a non-zero exit.
TEST_F(TrainMainTest, MfuComesFromTheProgramsFlopsAndThePeak) {
  std::string metrics = directory + "/mfu.jsonl";
  tessera_program counted = program();
  counted.flops_per_micro_batch = 2e9;
  TrainRun run = train({"--data", dataPath, "--steps", "2", "--grad-accum", "2",
                        "--peak-tflops", "0.5", "--metrics", metrics},
                       counted);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_NE(run.out.find("| MFU "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("| peak mem "), std::string::npos) << run.out;
  for (const JsonValue &record : readMetrics(metrics)) {
    // Two micro-batches of 2e9 FLOPs against 0.5 TFLOP/s: mfu * step_ms =
    // 8 ms, up to the rounding of step_ms (3 decimals) and mfu (6 digits).
    double milliseconds = record.find("step_ms")->number;
    double mfu = record.find("mfu")->number;
    EXPECT_GT(mfu, 0);
    EXPECT_NEAR(mfu * milliseconds, 8.0, mfu * 0.0006 + 1e-4);
    EXPECT_GT(record.find("peak_memory_gib")->number, 0);
  }
  // A program that does not count its FLOPs has no MFU.
  run = train({"--data", dataPath, "--steps", "1", "--metrics", metrics},
              program());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out.find("| MFU "), std::string::npos) << run.out;
}

TEST_F(TrainMainTest, Errors) {
  TrainRun run = train({"--bogus"}, program());
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("train: error: unknown flag '--bogus'"),
            std::string::npos);

  run = train({"--steps", "3"}, program());
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("--data: required to train (3 steps to run)"),
            std::string::npos)
      << run.err;

  run = train({"--help"}, program());
  EXPECT_EQ(run.exitCode, 0);
  EXPECT_NE(run.out.find("usage: train --data PATTERN"), std::string::npos);

  // A host program's optimizer state is in host memory already.
  run = train({"--data", dataPath, "--offload", "optimizer"}, program());
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("train: error: --offload optimizer: this is a host "
                         "(CPU) program"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(hooks.calls, 0);

  // A plan that offloads (program.h's offload_optimizer) asks the same
  // without the flag; --offload none overrides the plan.
  tessera_program offloading = program();
  offloading.offload_optimizer = 1;
  run = train({"--data", dataPath}, offloading);
  EXPECT_EQ(run.exitCode, 2);
  EXPECT_NE(run.err.find("train: error: --offload optimizer: this is a host "
                         "(CPU) program"),
            std::string::npos)
      << run.err;
  run = train({"--data", dataPath, "--steps", "1", "--offload", "none"},
              offloading);
  EXPECT_EQ(run.exitCode, 0) << run.err;
  hooks.calls = 0; // the checks below count from here

  run = train({"--data", directory + "/nothing_*.npy"}, program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("no file matches"), std::string::npos);

  run = train({"--data", dataPath, "--weights", directory + "/absent.st"},
              program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("absent.st: No such file or directory"),
            std::string::npos)
      << run.err;

  // Weights of another model.
  std::vector<float> wrong(kVocabulary * 4, 0);
  writeSafetensors(
      directory + "/wrong.st",
      {{"linear.weight", TESSERA_F32, {kVocabulary, 4}, wrong.data()},
       {"linear.bias", TESSERA_F32, {kVocabulary}, wrong.data()}},
      {});
  run = train({"--data", dataPath, "--weights", directory + "/wrong.st"},
              program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("tensor 'linear.weight' has shape [8, 4] but model "
                         "softmax-regression.onnx needs [8, 8]"),
            std::string::npos)
      << run.err;

  // A token outside the vocabulary.
  writeNpy(directory + "/bad.npy", "<i4", {4, 5},
           {1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 8, 4, 5});
  run = train({"--data", directory + "/bad.npy"}, program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("bad.npy: token id 8 at row 3, column 2 is outside "
                         "the vocabulary of 8 ids"),
            std::string::npos)
      << run.err;

  // Outputs that cannot be written fail before the first step, not after
  // the training.
  run = train(
      {"--data", dataPath, "--dump-params", directory + "/missing/params.st"},
      program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("--dump-params: " + directory +
                         "/missing: No such file or directory"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(hooks.calls, 0);
  run = train({"--data", dataPath, "--dump-grads", directory}, program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("--dump-grads: " + directory +
                         " is a directory; a file name is needed"),
            std::string::npos)
      << run.err;
  run = train({"--data", dataPath, "--trace", directory}, program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("--trace: " + directory + " is a directory"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(hooks.calls, 0);
  writeBytes(directory + "/plain", "x");
  run = train({"--data", dataPath, "--checkpoint-dir", directory + "/plain"},
              program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("--checkpoint-dir: cannot read " + directory +
                         "/plain: Not a directory"),
            std::string::npos)
      << run.err;

  // Weights that are not finite, or not float, are refused by name.
  std::vector<float> poisoned(kVocabulary * kVocabulary, 0.1f);
  poisoned[3] = std::nanf("");
  std::vector<float> bias(kVocabulary, 0);
  writeSafetensors(directory + "/nan.st",
                   {{"linear.weight",
                     TESSERA_F32,
                     {kVocabulary, kVocabulary},
                     poisoned.data()},
                    {"linear.bias", TESSERA_F32, {kVocabulary}, bias.data()}},
                   {});
  run = train({"--data", dataPath, "--weights", directory + "/nan.st"},
              program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("nan.st: tensor 'linear.weight' holds nan at "
                         "element 3; the weights must be finite"),
            std::string::npos)
      << run.err;
  std::vector<int32_t> integers(kVocabulary, 1);
  poisoned[3] = 0.1f;
  writeSafetensors(
      directory + "/int.st",
      {{"linear.weight",
        TESSERA_F32,
        {kVocabulary, kVocabulary},
        poisoned.data()},
       {"linear.bias", TESSERA_I32, {kVocabulary}, integers.data()}},
      {});
  run = train({"--data", dataPath, "--weights", directory + "/int.st"},
              program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("int.st: tensor 'linear.bias' is I32 but the "
                         "program's needs a float type"),
            std::string::npos)
      << run.err;

  // Resuming with nothing to resume from, then from another model's
  // checkpoint.
  run = train({"--data", dataPath, "--checkpoint-dir", directory + "/empty",
               "--resume"},
              program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("--resume: no checkpoint_*.safetensors in"),
            std::string::npos)
      << run.err;
  run = train({"--data", dataPath, "--steps", "2", "--checkpoint-dir",
               directory + "/other"},
              program());
  ASSERT_EQ(run.exitCode, 0) << run.err;
  tessera_program wider = program();
  wider.parameter_count = 3;
  wider.forward_backward = widerModel;
  run = train({"--data", dataPath, "--steps", "4", "--checkpoint-dir",
               directory + "/other", "--resume"},
              wider);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("tensor 'linear.extra' of model "
                         "softmax-regression.onnx is missing"),
            std::string::npos)
      << run.err;

  // fp32 gradients that are not finite mean divergence, not a skipped step.
  hooks = ProgramHooks();
  hooks.overflowAtCall = 2;
  run = train({"--data", dataPath, "--steps", "3"}, program());
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("step 2: the loss or the gradients are not finite"),
            std::string::npos)
      << run.err;

  // A malformed program is reported as a compiler bug, not a crash.
  tessera_program broken = program();
  broken.batch = 0;
  run = train({"--data", dataPath}, broken);
  EXPECT_EQ(run.exitCode, 1);
  EXPECT_NE(run.err.find("malformed program (a compiler bug)"),
            std::string::npos);
}

} // namespace
