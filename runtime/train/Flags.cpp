//===- Flags.cpp - Parsing the training executable's flags ----------------===//
//
// Design: one table lists every flag with its value kind, help line and a
// setter, so the parser, --help and the error messages cannot drift apart.
// Values are parsed strictly (the whole string must be the number; "1e-3x",
// "", "nan" are errors) because a silently misread learning rate wastes a
// whole run. Both `--flag value` and `--flag=value` are accepted. After
// parsing, the checks that involve two flags run once (e.g. --resume needs
// --checkpoint-dir). Every problem throws TrainError with exit code 2 and a
// sentence that names the flag.
//
// Defaults follow torch.optim.AdamW (lr 1e-3, betas 0.9/0.999, eps 1e-8,
// weight decay 0.01) and common LM practice (gradient clipping at 1.0).
//
//===----------------------------------------------------------------------===//

#include "Flags.h"

#include "Trace.h"
#include "TrainError.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <regex>
#include <sstream>
#include <vector>

namespace tessera::train {
namespace {

[[noreturn]] void usageError(const std::string &message) {
  throw TrainError(message + " (run with --help for the flags)",
                   kUsageExitCode);
}

double parseReal(const std::string &flag, const std::string &text) {
  const char *begin = text.c_str();
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(begin, &end);
  if (!text.empty() && end == begin + text.size() && errno == ERANGE &&
      std::fabs(value) < 1.0)
    usageError(flag + ": '" + text +
               "' is too close to 0 for a double (it underflows; 0 or a "
               "value of at least 2.3e-308 is meant)");
  if (text.empty() || end != begin + text.size() || errno == ERANGE ||
      !std::isfinite(value))
    usageError(flag + ": '" + text + "' is not a finite number");
  return value;
}

int64_t parseInteger(const std::string &flag, const std::string &text) {
  const char *begin = text.c_str();
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(begin, &end, 10);
  if (text.empty() || end != begin + text.size() || errno == ERANGE)
    usageError(flag + ": '" + text + "' is not an integer");
  return static_cast<int64_t>(value);
}

uint64_t parseUnsigned(const std::string &flag, const std::string &text) {
  const char *begin = text.c_str();
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(begin, &end, 10);
  if (text.empty() || text[0] == '-' || end != begin + text.size() ||
      errno == ERANGE)
    usageError(flag + ": '" + text + "' is not a non-negative integer");
  return static_cast<uint64_t>(value);
}

bool parseOnOff(const std::string &flag, const std::string &text) {
  if (text != "on" && text != "off")
    usageError(flag + ": '" + text + "' is not one of on, off");
  return text == "on";
}

void requireAtLeast(const std::string &flag, double value, double minimum) {
  if (value < minimum) {
    std::ostringstream message;
    message << flag << ": " << value << " is below the minimum " << minimum;
    usageError(message.str());
  }
}

void requireBelow(const std::string &flag, double value, double bound) {
  if (!(value < bound)) {
    std::ostringstream message;
    message << flag << ": " << value << " must be below " << bound;
    usageError(message.str());
  }
}

/// The window is kept in checkpoints' metadata as text: bounded.
constexpr int64_t kMaxSpikeWindow = 100000;

SpikeActions parseSpikeActions(const std::string &flag,
                               const std::string &text) {
  SpikeActions actions;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string action = text.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::string lower = "lower-lr=";
    if (action == "report")
      actions.mask |= SpikeActions::Report;
    else if (action == "skip")
      actions.mask |= SpikeActions::Skip;
    else if (action == "clip")
      actions.mask |= SpikeActions::Clip;
    else if (action == "checkpoint")
      actions.mask |= SpikeActions::Checkpoint;
    else if (action == "stop")
      actions.mask |= SpikeActions::Stop;
    else if (action.rfind(lower, 0) == 0) {
      double factor = parseReal(flag, action.substr(lower.size()));
      if (!(factor > 0 && factor < 1))
        usageError(flag + ": lower-lr=" + action.substr(lower.size()) +
                   ": the factor must be in (0, 1)");
      actions.mask |= SpikeActions::LowerLearningRate;
      actions.learningRateFactor = factor;
    } else
      usageError(flag + ": unknown action '" + action +
                 "' (skip, clip, lower-lr=F, checkpoint, stop, report; "
                 "comma-separated)");
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return actions;
}

struct FlagSpec {
  const char *name;
  const char *valueName; // nullptr for switches such as --resume
  const char *help;
  std::function<void(TrainOptions &, const std::string &flag,
                     const std::string &value)>
      set;
};

const std::vector<FlagSpec> &flagTable() {
  static const std::vector<FlagSpec> table = {
      {"--data", "PATTERN",
       "training data: llm.c token shards (.bin) or .npy arrays; a glob "
       "pattern, files taken in sorted order",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         if (v.empty())
           usageError(flag + ": the pattern is empty");
         o.dataPattern = v;
       }},
      {"--steps", "N", "optimizer steps to run in total (default 10)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.steps = parseInteger(flag, v);
         requireAtLeast(flag, static_cast<double>(o.steps), 0);
       }},
      {"--lr", "X", "peak learning rate (default 1e-3)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.learningRate = parseReal(flag, v);
         requireAtLeast(flag, o.learningRate, 0);
       }},
      {"--warmup", "N", "steps of linear warmup from lr/N to lr (default 0)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.warmupSteps = parseInteger(flag, v);
         requireAtLeast(flag, static_cast<double>(o.warmupSteps), 0);
       }},
      {"--schedule", "constant|cosine|linear",
       "learning rate after warmup (default constant)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         if (v == "constant")
           o.schedule = ScheduleKind::Constant;
         else if (v == "cosine")
           o.schedule = ScheduleKind::Cosine;
         else if (v == "linear")
           o.schedule = ScheduleKind::Linear;
         else
           usageError(flag + ": '" + v +
                      "' is not one of constant, cosine, linear");
       }},
      {"--min-lr-ratio", "X",
       "floor of the cosine/linear decay as a fraction of lr (default 0)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.minLearningRateRatio = parseReal(flag, v);
         requireAtLeast(flag, o.minLearningRateRatio, 0);
         if (o.minLearningRateRatio > 1)
           usageError(flag + ": " + v + " is above 1");
       }},
      {"--beta1", "X", "AdamW first-moment decay, in [0, 1) (default 0.9)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.beta1 = parseReal(flag, v);
         requireAtLeast(flag, o.beta1, 0);
         requireBelow(flag, o.beta1, 1);
       }},
      {"--beta2", "X", "AdamW second-moment decay, in [0, 1) (default 0.999)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.beta2 = parseReal(flag, v);
         requireAtLeast(flag, o.beta2, 0);
         requireBelow(flag, o.beta2, 1);
       }},
      {"--eps", "X", "AdamW epsilon, > 0 (default 1e-8)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.epsilon = parseReal(flag, v);
         if (!(o.epsilon > 0))
           usageError(flag + ": " + v + " must be positive");
         // AdamW adds it in f32: one that rounds to 0 there divides 0 by 0
         // for every gradient element that is 0.
         if (static_cast<float>(o.epsilon) == 0.0f)
           usageError(flag + ": " + v +
                      " is 0 in f32, the precision AdamW adds it in (the "
                      "smallest is about 1.4e-45; 1e-8 is usual)");
       }},
      {"--weight-decay", "X",
       "decoupled weight decay, applied to every parameter (default 0.01)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.weightDecay = parseReal(flag, v);
         requireAtLeast(flag, o.weightDecay, 0);
       }},
      {"--no-decay", "REGEX",
       "parameters whose name matches get no weight decay (e.g. "
       "'bias|norm|ln_'; default: all decay)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         try {
           std::regex check(v);
         } catch (const std::regex_error &error) {
           usageError(flag + ": '" + v +
                      "' is not a valid regular expression: " + error.what());
         }
         o.noDecayPattern = v;
       }},
      {"--grad-clip", "X",
       "clip the global gradient norm to X; 0 turns clipping off "
       "(default 1.0)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.gradientClip = parseReal(flag, v);
         requireAtLeast(flag, o.gradientClip, 0);
       }},
      {"--grad-accum", "K",
       "micro-batches per optimizer step; gradients are averaged (default 1)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.gradientAccumulation = parseInteger(flag, v);
         requireAtLeast(flag, static_cast<double>(o.gradientAccumulation), 1);
       }},
      {"--seed", "S",
       "seed of the data order, --init random and dropout (default 1337)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.seed = parseUnsigned(flag, v);
       }},
      {"--no-shuffle", nullptr,
       "read the data in file order instead of a seeded shuffle",
       [](TrainOptions &o, const std::string &, const std::string &) {
         o.shuffle = false;
       }},
      {"--init", "onnx|random",
       "initial parameters: the ONNX initializers (default) or random "
       "(N(0, 0.02) for rank >= 2, ones for rank-1 names ending in "
       "'weight', zeros otherwise)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         if (v == "onnx")
           o.init = InitKind::Onnx;
         else if (v == "random")
           o.init = InitKind::Random;
         else
           usageError(flag + ": '" + v + "' is not one of onnx, random");
       }},
      {"--rope-theta", "X",
       "with --init random: the rotary frequencies (buffers named inv_freq) "
       "are 1 / X^(2i / head_dim), so a graph-only export needs no weights "
       "file (X is the model's rope_theta; unscaled rotary only)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.ropeTheta = parseReal(flag, v);
         if (!(o.ropeTheta > 1))
           usageError(flag + ": " + v + " is not above 1");
       }},
      {"--weights", "FILE",
       "safetensors with the initial weights, instead of the file tesserac "
       "wrote next to the executable",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         if (v.empty())
           usageError(flag + ": the file name is empty");
         o.weightsFile = v;
       }},
      {"--checkpoint-dir", "D",
       "directory for checkpoint_<step>.safetensors (created if missing)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         if (v.empty())
           usageError(flag + ": the directory name is empty");
         o.checkpointDirectory = v;
       }},
      {"--checkpoint-every", "N",
       "write a checkpoint every N steps (0: only at the end; default 0)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.checkpointEvery = parseInteger(flag, v);
         requireAtLeast(flag, static_cast<double>(o.checkpointEvery), 0);
       }},
      {"--resume", nullptr,
       "continue from the newest checkpoint in --checkpoint-dir",
       [](TrainOptions &o, const std::string &, const std::string &) {
         o.resume = true;
       }},
      {"--overwrite-checkpoints", nullptr,
       "a new run may replace the checkpoints already in --checkpoint-dir "
       "(deleted at start; without it such a directory is refused)",
       [](TrainOptions &o, const std::string &, const std::string &) {
         o.overwriteCheckpoints = true;
       }},
      {"--metrics", "FILE.jsonl",
       "also write one JSON object per step to FILE (replacing it at the "
       "first step; --resume continues it from the checkpoint's step)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         if (v.empty())
           usageError(flag + ": the file name is empty");
         o.metricsFile = v;
       }},
      {"--dump-params", "FILE.safetensors",
       "write the trained parameters (ONNX names, f32) at the end",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         if (v.empty())
           usageError(flag + ": the file name is empty");
         o.dumpParametersFile = v;
       }},
      {"--dump-grads", "FILE.safetensors",
       "write the last step's gradients (averaged, unscaled, before "
       "clipping; ONNX names, f32)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         if (v.empty())
           usageError(flag + ": the file name is empty");
         o.dumpGradientsFile = v;
       }},
      {"--loss-scale-init", "X",
       "fp16 programs: initial dynamic loss scale (default 65536)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.lossScaleInit = parseReal(flag, v);
         if (!(o.lossScaleInit > 0))
           usageError(flag + ": " + v + " must be positive");
         // The program scales its f32 loss by it.
         const float scale = static_cast<float>(o.lossScaleInit);
         if (!std::isfinite(scale) || scale == 0.0f)
           usageError(flag + ": " + v +
                      " is not a finite, nonzero f32, the precision the "
                      "loss is scaled in");
       }},
      {"--loss-scale-window", "N",
       "fp16 programs: double the loss scale after N clean steps "
       "(default 2000)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.lossScaleWindow = parseInteger(flag, v);
         requireAtLeast(flag, static_cast<double>(o.lossScaleWindow), 1);
       }},
      {"--loss-scale-hysteresis", "K",
       "fp16 programs: halve the loss scale only after K overflowed steps "
       "in a row (default 1)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.lossScaleHysteresis = parseInteger(flag, v);
         requireAtLeast(flag, static_cast<double>(o.lossScaleHysteresis), 1);
       }},
      {"--max-skipped-steps", "N",
       "end the run with an error after N skipped steps in a row (fp16 "
       "overflows, --on-spike skip; default 50, 0: no bound)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.maxSkippedSteps = parseInteger(flag, v);
         requireAtLeast(flag, static_cast<double>(o.maxSkippedSteps), 0);
       }},
      {"--grad-norms-every", "N",
       "every N steps, each parameter's and each layer's gradient norm in "
       "the metrics and the trace (default 0: off)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.gradientNormsEvery = parseInteger(flag, v);
         requireAtLeast(flag, static_cast<double>(o.gradientNormsEvery), 0);
       }},
      {"--on-spike", "ACTIONS",
       "detect gradient-norm spikes (outside mean +- sigma x deviation of "
       "the last --spike-window norms) and act, comma-separated: skip, clip, "
       "lower-lr=F, checkpoint, stop, report (default: no detection)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.onSpike = parseSpikeActions(flag, v);
       }},
      {"--spike-window", "N",
       "with --on-spike: the recent steps the band is computed from "
       "(default 50)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.spikeWindow = parseInteger(flag, v);
         requireAtLeast(flag, static_cast<double>(o.spikeWindow), 2);
         if (o.spikeWindow > kMaxSpikeWindow)
           usageError(flag + ": " + v + " is above the maximum " +
                      std::to_string(kMaxSpikeWindow));
       }},
      {"--spike-sigma", "X",
       "with --on-spike: the band's half-width in standard deviations "
       "(default 3)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.spikeSigma = parseReal(flag, v);
         if (!(o.spikeSigma > 0))
           usageError(flag + ": " + v + " must be positive");
       }},
      {"--peak-tflops", "X",
       "peak TFLOP/s of the device, the denominator of MFU (default 989: "
       "bf16 dense on an H100/H200)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.peakTeraflops = parseReal(flag, v);
         if (!(o.peakTeraflops > 0))
           usageError(flag + ": " + v + " must be positive");
       }},
      {"--trace", "FILE.json",
       "write a Chrome/Perfetto trace (host phases; GPU kernels, copies and "
       "collectives through CUPTI) of --trace-steps; with several ranks "
       "each writes FILE.rankN.json, or FILE with %r replaced by the rank",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         if (v.empty())
           usageError(flag + ": the file name is empty");
         o.traceFile = v;
       }},
      {"--trace-steps", "A:B",
       "the steps --trace records, A..B inclusive; 'A:' to the end, 'all' "
       "(default 2:4: skips the first step's warm-up)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         size_t colon = v.find(':');
         if (v == "all") {
           o.traceFirstStep = 1;
           o.traceLastStep = kTraceToLastStep;
           return;
         }
         if (colon == std::string::npos)
           usageError(flag + ": '" + v + "' is not A:B, A: or all");
         o.traceFirstStep = parseInteger(flag, v.substr(0, colon));
         requireAtLeast(flag, static_cast<double>(o.traceFirstStep), 1);
         o.traceLastStep = colon + 1 == v.size()
                               ? kTraceToLastStep
                               : parseInteger(flag, v.substr(colon + 1));
         if (o.traceLastStep < o.traceFirstStep)
           usageError(flag + ": '" + v + "' ends before it starts");
       }},
      {"--cuda-graphs", "on|off",
       "GPU programs: record the step (a pipeline: each stage call) once "
       "as a CUDA graph and replay it (default on; off launches every "
       "kernel every step)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.cudaGraphs = parseOnOff(flag, v);
       }},
      {"--gemm-autotune", "on|off",
       "GPU programs: each GEMM shape runs the fastest of cuBLASLt's "
       "heuristic candidates, timed in the first step (default off: the "
       "heuristic's first choice, the same bits in every run and resume)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.gemmAutotune = parseOnOff(flag, v);
       }},
      {"--attention-autotune", "on|off",
       "GPU programs: each attention shape cuDNN runs uses the fastest of "
       "the engine configurations its heuristics offer, timed in the first "
       "step (default off: the heuristic's first, the same bits in every "
       "run and resume)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.attentionAutotune = parseOnOff(flag, v);
       }},
      {"--deterministic", "on|off",
       "GPU programs: the same bits every run, as PyTorch's "
       "use_deterministic_algorithms: cuDNN's attention backward is built "
       "with a fixed reduction order (slower); default off (it adds dq "
       "atomically)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.deterministic = parseOnOff(flag, v);
       }},
      {"--offload", "none|optimizer",
       "GPU programs, one rank: 'optimizer' keeps the fp32 master weights "
       "(pinned) and AdamW's moments in host memory and runs AdamW on the "
       "host's cores, the GPU holding only what the step reads and writes "
       "(ZeRO-Offload; default: the compiled plan's, which offloads only "
       "when nothing else fit the device, else none)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.offloadGiven = true;
         if (v == "none")
           o.offloadOptimizer = false;
         else if (v == "optimizer")
           o.offloadOptimizer = true;
         else
           usageError(flag + ": '" + v + "' is not one of none, optimizer");
       }},
      {"--bucket-mb", "N",
       "data parallelism: all-reduce gradients in buckets of about N MiB "
       "(a fraction is fine: 0.05), overlapped with the backward pass "
       "(default 25)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.bucketMegabytes = parseReal(flag, v);
         if (!(o.bucketMegabytes > 0))
           usageError(flag + ": " + v + " is not a positive size in MiB");
         if (o.bucketMegabytes > double(int64_t(1) << 20))
           usageError(flag + ": " + v + " MiB is more than any GPU holds");
       }},
      {"--zero", "0|1|2|3",
       "data parallelism: ZeRO stage (1: each rank holds and updates only its "
       "shard of the optimizer state; 2: of the gradients too, reduce-"
       "scattered per bucket as the backward pass writes them; 3: of the "
       "weights the step reads too, all-gathered per bucket before the "
       "forward and the backward pass read them; a pipeline over a stage "
       "mesh: 1 shards each stage's optimizer state over its dp group; a "
       "mesh plan with a ZeRO stage per parameter: 1 shards its ZeRO-1/2 "
       "parameters' state over their group, 2 their gradients too, 0 "
       "keeps both whole; default: the program's, else 0)",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         if (v == "0")
           o.zeroStage = 0;
         else if (v == "1")
           o.zeroStage = 1;
         else if (v == "2")
           o.zeroStage = 2;
         else if (v == "3")
           o.zeroStage = 3;
         else
           usageError(flag + ": '" + v + "' is not one of 0, 1, 2, 3");
       }},
      {"--thread-ranks", "N",
       "data parallelism as N threads of this process over the in-process "
       "collectives, the same arithmetic as N launched ranks (a test bed "
       "for the reducer and ZeRO; default 1). GPU programs: the ranks share "
       "this machine's GPUs (rank r on GPU r mod their count), each with "
       "its own streams and arena, collectives staged through the host",
       [](TrainOptions &o, const std::string &flag, const std::string &v) {
         o.threadRanks = parseInteger(flag, v);
         requireAtLeast(flag, static_cast<double>(o.threadRanks), 1);
       }},
      {"--help", nullptr, "print this text and exit",
       [](TrainOptions &o, const std::string &, const std::string &) {
         o.help = true;
       }},
  };
  return table;
}

const FlagSpec *findFlag(const std::string &name) {
  for (const FlagSpec &spec : flagTable())
    if (name == spec.name)
      return &spec;
  return nullptr;
}

void checkCombinations(const TrainOptions &options) {
  if (options.overwriteCheckpoints && options.checkpointDirectory.empty())
    usageError("--overwrite-checkpoints: needs --checkpoint-dir");
  if (options.overwriteCheckpoints && options.resume)
    usageError("--overwrite-checkpoints: contradicts --resume");
  if (options.resume && options.checkpointDirectory.empty())
    usageError("--resume: needs --checkpoint-dir to find the checkpoint");
  if (options.checkpointEvery > 0 && options.checkpointDirectory.empty())
    usageError("--checkpoint-every: needs --checkpoint-dir");
  if (options.onSpike.has(SpikeActions::Checkpoint) &&
      options.checkpointDirectory.empty())
    usageError("--on-spike checkpoint: needs --checkpoint-dir");
  if (options.ropeTheta > 0 && options.init != InitKind::Random)
    usageError("--rope-theta: needs --init random (the ONNX initializers "
               "already hold the frequencies)");
  if (options.warmupSteps > options.steps)
    usageError("--warmup: " + std::to_string(options.warmupSteps) +
               " warmup steps exceed --steps " + std::to_string(options.steps));
}

} // namespace

TrainOptions parseFlags(int argc, const char *const *argv) {
  TrainOptions options;
  for (int index = 1; index < argc; ++index) {
    std::string argument = argv[index];
    std::string name = argument;
    std::string value;
    bool hasInlineValue = false;
    if (size_t equals = argument.find('=');
        argument.rfind("--", 0) == 0 && equals != std::string::npos) {
      name = argument.substr(0, equals);
      value = argument.substr(equals + 1);
      hasInlineValue = true;
    }
    const FlagSpec *spec = findFlag(name);
    if (!spec) {
      if (argument.rfind("-", 0) != 0)
        usageError("unexpected argument '" + argument +
                   "' (every input is given by a flag, e.g. --data)");
      usageError("unknown flag '" + name + "'");
    }
    if (!spec->valueName) {
      if (hasInlineValue)
        usageError(name + ": takes no value");
    } else if (!hasInlineValue) {
      if (index + 1 >= argc)
        usageError(name + ": missing value " + spec->valueName);
      value = argv[++index];
    }
    spec->set(options, name, value);
    if (options.help)
      return options;
  }
  checkCombinations(options);
  return options;
}

std::string usageText(const char *programName) {
  std::ostringstream text;
  text << "usage: " << programName << " --data PATTERN [flags]\n\n"
       << "Trains the model compiled into this executable.\n\nflags:\n";
  for (const FlagSpec &spec : flagTable()) {
    std::string left = std::string("  ") + spec.name;
    if (spec.valueName)
      left += std::string(" ") + spec.valueName;
    text << left;
    if (left.size() < 34)
      text << std::string(34 - left.size(), ' ');
    else
      text << "\n" << std::string(34, ' ');
    text << spec.help << "\n";
  }
  // Taken out of the command line before the flags above are parsed
  // (launch.h), so they are listed here rather than in the table.
  text << "\nlaunching (one process per GPU; also under torchrun, mpirun or "
          "srun):\n"
       << "  --nproc N                       start N ranks on this node, one "
          "per GPU (data parallel)\n"
       << "  --comm-timeout S                longest wait for a peer or a "
          "collective, in seconds (default 300)\n";
  return text.str();
}

const char *scheduleName(ScheduleKind schedule) {
  switch (schedule) {
  case ScheduleKind::Constant:
    return "constant";
  case ScheduleKind::Cosine:
    return "cosine";
  case ScheduleKind::Linear:
    return "linear";
  }
  return "constant";
}

} // namespace tessera::train
