//===- Flags.h - The training executable's command line ---------*- C++ -*-===//
//
// Every knob of a run, parsed once into TrainOptions. See Flags.cpp for the
// flag list, defaults and the rules each value must satisfy.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_FLAGS_H
#define TESSERA_RUNTIME_TRAIN_FLAGS_H

#include <cstdint>
#include <string>

namespace tessera::train {

enum class ScheduleKind { Constant, Cosine, Linear };

enum class InitKind { Onnx, Random };

/// What a gradient-norm spike makes the driver do (--on-spike, combinable;
/// GradientSpikes.h). No action: detection is off.
struct SpikeActions {
  enum Action : uint32_t {
    Report = 1,
    Skip = 2,
    Clip = 4,
    LowerLearningRate = 8,
    Checkpoint = 16,
    Stop = 32,
  };
  uint32_t mask = 0;
  /// lower-lr=F's F, in (0, 1).
  double learningRateFactor = 1;

  bool enabled() const { return mask != 0; }
  bool has(Action action) const { return (mask & action) != 0; }
};

struct TrainOptions {
  std::string dataPattern;
  int64_t steps = 10;
  double learningRate = 1e-3;
  int64_t warmupSteps = 0;
  ScheduleKind schedule = ScheduleKind::Constant;
  double minLearningRateRatio = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weightDecay = 0.01;
  /// Parameters whose name matches (ECMAScript regex, searched) get no
  /// weight decay; empty: every parameter decays.
  std::string noDecayPattern;
  double gradientClip = 1.0;
  int64_t gradientAccumulation = 1;
  /// Keep the fp32 accumulators even for one micro-batch a step (not a
  /// flag: a pipelined program whose gradients come in parts adds them in
  /// f32 there).
  bool accumulateInF32 = false;
  uint64_t seed = 1337;
  bool shuffle = true;
  InitKind init = InitKind::Onnx;
  std::string weightsFile;
  /// --rope-theta: with --init random, the rotary frequency buffers'
  /// base (InitialWeights.h); 0: read them from the weights file.
  double ropeTheta = 0;
  std::string checkpointDirectory;
  int64_t checkpointEvery = 0;
  bool resume = false;
  /// --overwrite-checkpoints: a fresh run may replace the checkpoints in
  /// --checkpoint-dir (deleted at start).
  bool overwriteCheckpoints = false;
  std::string metricsFile;
  std::string dumpParametersFile;
  /// The last step's gradients (averaged over micro-batches, unscaled, before
  /// clipping), for checking them against another framework.
  std::string dumpGradientsFile;
  double lossScaleInit = 65536.0;
  int64_t lossScaleWindow = 2000;
  /// --loss-scale-hysteresis: fp16 overflows in a row before the scale
  /// halves (LossScaling.h).
  int64_t lossScaleHysteresis = 1;
  /// --max-skipped-steps: skipped steps in a row (fp16 overflows, spike
  /// skips) that end the run with an error (0: no bound).
  int64_t maxSkippedSteps = 50;
  /// --grad-norms-every: every N steps each parameter's and each layer's
  /// gradient norm in the metrics and the trace (0: off).
  int64_t gradientNormsEvery = 0;
  /// --on-spike, --spike-window, --spike-sigma (GradientSpikes.h).
  SpikeActions onSpike;
  int64_t spikeWindow = 50;
  double spikeSigma = 3.0;
  /// The device's peak dense throughput in TFLOP/s that MFU is measured
  /// against (989: bf16 dense on an H100/H200).
  double peakTeraflops = 989.0;
  /// --trace: the Chrome/Perfetto trace file of each rank ("" = off) and
  /// the steps it covers, first..last inclusive (Trace.h; last is
  /// kTraceToLastStep for "A:").
  std::string traceFile;
  int64_t traceFirstStep = 2;
  int64_t traceLastStep = 4;
  /// Data parallelism (several ranks): gradients are reduced in buckets of
  /// about this many MiB, overlapped with the backward pass.
  double bucketMegabytes = 25;
  /// --zero: ZeRO stage over the data-parallel ranks (0; 1: optimizer
  /// state sharded; 2: gradients too; 3: the weights too); -1 when not
  /// given (the program's zero_stage applies).
  int32_t zeroStage = -1;
  /// --thread-ranks: data-parallel ranks as threads of this process.
  int64_t threadRanks = 1;
  /// --cuda-graphs: replay the step as a CUDA graph (CudaStepGraph.h).
  bool cudaGraphs = true;
  /// --gemm-autotune: time cuBLASLt's candidate algorithms per GEMM shape.
  bool gemmAutotune = false;
  /// --attention-autotune: time cuDNN's attention configurations per shape.
  bool attentionAutotune = false;
  /// --deterministic: a fixed reduction order wherever a kernel's is not
  /// (tessera_cuda_set_deterministic).
  bool deterministic = false;
  /// --offload optimizer: the fp32 master weights and AdamW's moments
  /// live in pinned host memory and AdamW runs on the host's cores; the GPU
  /// keeps what the step reads and writes (OffloadedOptimizer.h).
  bool offloadOptimizer = false;
  /// Whether --offload was given (else the program's plan decides).
  bool offloadGiven = false;
  bool help = false;
};

/// Parses argv[1..argc). Throws TrainError (exit code 2) naming the flag on
/// an unknown flag, a missing or malformed value, or an inconsistent
/// combination. Sets `help` and stops early on --help.
TrainOptions parseFlags(int argc, const char *const *argv);

/// The --help text, with the defaults above.
std::string usageText(const char *programName);

const char *scheduleName(ScheduleKind schedule);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_FLAGS_H
