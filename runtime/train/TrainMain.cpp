//===- TrainMain.cpp - The training executable's main loop ----------------===//
//
// Design: the compiled program knows one thing, how to compute the loss and
// the gradients of one micro-batch (forward_backward). Everything around it
// lives here, written once for every model:
//
//   for each step s = 1..N:
//     for each of K micro-batches: read B x T tokens, call forward_backward
//       with the current loss scale, add the gradients into f32 accumulators
//       (cast from the compute precision);
//     global norm = sqrt(sum over gradients of sum_squares) / (K * scale);
//     fp16 only: a non-finite norm means the scaled gradients overflowed:
//       skip AdamW, halve the scale (from the --loss-scale-hysteresis-th
//       overflow in a row); after --loss-scale-window clean steps in a row,
//       double it (GradScaler's recipe, LossScaling.h). For fp32/bf16 a
//       non-finite norm means the run diverged and is an error;
//     --on-spike: judge the norm against the recent ones and, on a spike,
//       skip, clip to the band, lower the rate, checkpoint or stop
//       (GradientSpikes.h); --grad-norms-every: per-parameter and per-layer
//       norms from the same sums (GradientNorms.h);
//     clip = min(spike clip, --grad-clip / norm) (1 when neither applies);
//     AdamW on the f32 master weights and moments, with
//       grad_scale = clip / (K * scale): averaging over micro-batches, loss
//       scale removal and clipping folded into one multiply;
//     report metrics; checkpoint every --checkpoint-every steps.
//
// Where the tensors live and which kernels do the arithmetic is the
// TrainingBackend's (TrainingBackend.h): host memory and the CPU kernels for
// a CPU program, device memory and the CUDA kernels for a CUDA one
// (tessera_cuda_train_main). Either way the state is allocated once before
// the first step, and the loop below touches only scalars: the loss of each
// micro-batch and the gradient's sum of squares come back to the host, the
// tensors stay where they are until a checkpoint copies them out.
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
// Data parallelism (DataParallel.h, world size N > 1 from launch.h): every
// rank runs this loop on its slice of each global micro-batch, micro-batch k
// of rank r being the global micro-batch k * N + r (the data, the dropout
// seed); gradients are summed over the ranks before the norm, and the
// divisor becomes K x N x loss scale. So N ranks with --grad-accum K follow
// one rank with --grad-accum N*K (the same tokens, the same arithmetic up to
// the order of the sums). Only rank 0 prints steps and writes the metrics
// file, checkpoints and dumps; the others print only their errors, as
// "rank R: ...". A checkpoint holds the global data position, so it resumes
// with any number of ranks. With --thread-ranks N the N ranks are threads of
// this process instead (on the host; a GPU program's share this machine's
// GPUs, each with its own backend, streams and arena), the same loop over
// the in-process collectives.
//
// Partitioned programs (MeshParallel.h, program.h's mesh fields) started
// plainly run their mesh's ranks as threads of this process, each with this
// loop over its blocks of the tensors; every rank reads the same
// micro-batches (the step takes its block), so the data, the seeds and the
// divisors are one device's. Rank 0 speaks and writes, as above.
//
// Pipelined programs (PipelineParallel.h, program.h's pipeline) run one
// rank per pipeline device, threads of this process when started plainly;
// every rank reads every micro-batch of the step, which are the step's
// gradient accumulation (the effective --grad-accum is the program's
// micro-batch count), so the data, the seeds and the divisors are one
// device's with --grad-accum M. Rank 0 speaks and writes, as above. A
// pipeline over a stage mesh (both at once: PP x DP, PP x TP) runs
// stages x mesh ranks, each both a pipeline rank and a mesh rank: the
// mesh's blocks of its own chunks' parameters; with --zero 1 (or the
// program's zero_stage) each stage's dp group shards their optimizer state
// (StageZero.h).
//
// Errors: everything the user can get wrong throws TrainError deep down;
// runTrainMain (tessera_train_main, tessera_cuda_train_main) turns it into "<program>: error: ..." on stderr and
// exit code 2 (flags) or 1 (everything else).
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/program.h"
#include "tessera/runtime/thread_comm.h"

#include "Checkpoint.h"
#include "DataLoader.h"
#include "DataParallel.h"
#include "Flags.h"
#include "GradientNorms.h"
#include "GradientSpikes.h"
#include "HostBackend.h"
#include "InitialWeights.h"
#include "LearningRateSchedule.h"
#include "LossScaling.h"
#include "MeshParallel.h"
#include "MeshZero.h"
#include "Metrics.h"
#include "OptimizerOffload.h"
#include "OutputPaths.h"
#include "PipelineParallel.h"
#include "Random.h"
#include "StageZero.h"
#include "Trace.h"
#include "TrainError.h"
#include "TrainMain.h"
#include "TrainingState.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <vector>

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
  if (!program->forward_backward && !program->pipeline)
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
  if (program->device != TESSERA_DEVICE_HOST &&
      program->device != TESSERA_DEVICE_CUDA)
    programError("unknown device kind " + std::to_string(program->device));
  if (!(program->flops_per_micro_batch >= 0) ||
      !std::isfinite(program->flops_per_micro_batch))
    programError("flops_per_micro_batch is negative or not finite");
  if (program->pipeline)
    checkPipeline(*program);
  if (program->gradient_partial_axes) {
    if (program->pipeline || program->mesh_axis_count == 0)
      programError("gradient_partial_axes of a program that is pipelined "
                   "or not partitioned");
    const int32_t axes = (int32_t(1) << program->mesh_axis_count) - 1;
    for (int32_t i = 0; i < program->parameter_count; ++i)
      if ((program->gradient_partial_axes[i] & ~axes) != 0)
        programError(std::string("the gradient of '") +
                     program->parameters[i].name +
                     "' is pending over an axis the mesh does not have");
  }
}

/// One rank of a partitioned program's mesh (MeshParallel.h): a thread of
/// this process, or a launched process of its own. `commStream`: the
/// stream the driver's own collectives run on (the ZeRO of a mesh plan's
/// ZeRO-1/2 parameters, MeshZero.h; nullptr on the host).
struct MeshRank {
  const MeshLayout &layout;
  const comm::RankComms &comms;
  void *commStream = nullptr;
};

/// One rank of a pipelined program (PipelineParallel.h): pipeline device
/// `device` of the ranks of `comm`; `commStream` is the stream its
/// data-parallel collectives run on (ZeRO-1 inside a stage mesh; nullptr on
/// the host).
struct PipelineRank {
  const PipelineLayout &layout;
  tessera_comm *comm;
  int32_t device;
  void *commStream = nullptr;
};

/// Runs the steps of one invocation; returns the exit code.
class Trainer {
public:
  /// `world`: the data-parallel ranks' comms (nullptr for one rank);
  /// `mesh`: this rank of a partitioned program (nullptr for none), with
  /// `rank` its mesh rank and `ranks` 1 (it reads every micro-batch);
  /// `pipeline`: this device of a pipelined program (nullptr for none),
  /// likewise, `program` being the device's (PipelineLayout).
  Trainer(const tessera_program &program, const TrainOptions &options,
          const BackendFactory &makeBackend, Trace &trace, RankWorld *world,
          int32_t rank, int32_t ranks, const MeshRank *mesh = nullptr,
          const PipelineRank *pipeline = nullptr)
      : program(program), options(options), makeBackend(makeBackend),
        trace(trace), world(world), rank(rank), ranks(ranks), mesh(mesh),
        pipeline(pipeline),
        schedule(options.schedule, options.learningRate, options.warmupSteps,
                 options.steps, options.minLearningRateRatio),
        lossScalePolicy{options.lossScaleWindow, options.lossScaleHysteresis} {}

  int run();

private:
  const tessera_program &program;
  const TrainOptions &options;
  const BackendFactory &makeBackend;
  Trace &trace;
  /// The ranks' communicators; nullptr for one rank.
  RankWorld *world;
  int32_t rank;
  int32_t ranks;
  const MeshRank *mesh;
  const PipelineRank *pipeline;
  LearningRateSchedule schedule;
  LossScalePolicy lossScalePolicy;
  TrainingState state;
  std::unique_ptr<TrainingBackend> backend;
  std::unique_ptr<DataLoader> data;
  std::unique_ptr<DataParallelGradients> dataParallel;
  int64_t lastCheckpointStep = -1;
  /// Steps in a row without an update (--max-skipped-steps).
  int64_t skippedInARow = 0;
  /// A mesh rank's: which of its parameter blocks count in the norm, and
  /// the whole buffers (they never change) for checkpoints.
  std::vector<bool> countedInNorm;
  std::vector<std::vector<unsigned char>> wholeBuffers;
  /// A mesh rank's agreement on the world comm (the gradient norm).
  std::unique_ptr<comm::ScalarAgreement> meshAgreement;
  /// A pipeline rank's step, and its micro-batches' dropout seeds.
  std::unique_ptr<PipelineStep> pipelineStep;
  /// ZeRO-1 inside a stage mesh: the stage's dp group as the
  /// data-parallel layer's world (StageZero.h).
  std::unique_ptr<RankWorld> stageGroup;
  std::vector<uint64_t> microBatchSeeds;

  /// Rank 0 speaks and writes files for the run.
  bool isLeader() const { return rank == 0; }
  /// This rank's share of the data: a mesh or pipeline rank reads every
  /// micro-batch.
  int32_t dataRank() const { return mesh || pipeline ? 0 : rank; }
  /// Whether gathering the whole state takes every rank (a mesh's blocks,
  /// a pipeline's owners).
  bool gathersState() const { return mesh || pipeline; }
  /// The program of the tensors in files: the whole ones for a mesh or a
  /// pipeline.
  const tessera_program &storedProgram() const {
    return mesh       ? mesh->layout.wholeProgram()
           : pipeline ? pipeline->layout.wholeProgram()
                      : program;
  }
  /// Dropout's seed of micro-batch `micro` of `step` (of this rank's
  /// micro-batches).
  uint64_t dropoutSeed(int64_t step, int64_t micro) const;
  /// The whole tensors of per-parameter values of this rank (its blocks,
  /// or its held parameters), on every rank. Collective.
  std::vector<std::vector<float>>
  wholeParameters(const std::vector<std::vector<float>> &values);
  /// The state with whole tensors (a mesh rank's blocks gathered; every
  /// rank calls it, rank 0's is complete). Fetches the backend's state.
  TrainingState wholeState();

  void start();
  double accumulateMicroBatches(int64_t step);
  /// Per parameter of storedProgram(), the sums of squares of the step's
  /// gradient the global norm was just made of, agreed over the ranks
  /// (--grad-norms-every). Collective.
  std::vector<double> parameterSumsOfSquares();
  /// Ends the run, before anything of step `step` is written, when its
  /// AdamW update left a weight or moment non-finite on any rank.
  /// Collective.
  void requireFiniteUpdate(int64_t step, double learningRate);
  void writeCheckpoint();
};

uint64_t Trainer::dropoutSeed(int64_t step, int64_t micro) const {
  // The global micro-batch's index: the seed one rank with N*K
  // micro-batches would use for the same rows.
  return deriveSeed(state.seed, kDropoutPurpose,
                    mixBits(static_cast<uint64_t>(step)) ^
                        static_cast<uint64_t>(micro * ranks + dataRank()));
}

std::vector<std::vector<float>>
Trainer::wholeParameters(const std::vector<std::vector<float>> &values) {
  void *stream = backend->stream();
  if (!pipeline)
    return mesh->layout.gatherParameters(values, mesh->comms, stream);
  // Over a stage mesh: every rank's blocks from their owners (within its
  // mesh coordinate), then the blocks of the mesh into whole tensors.
  std::vector<std::vector<float>> blocks = pipeline->layout.gatherFromOwners(
      values, pipeline->comm, pipeline->device, stream);
  return mesh ? mesh->layout.gatherParameters(blocks, mesh->comms, stream)
              : blocks;
}

TrainingState Trainer::wholeState() {
  backend->storeState(state);
  if (!gathersState())
    return state;
  TrainingState whole = state;
  whole.parameters = wholeParameters(state.parameters);
  whole.firstMoments = wholeParameters(state.firstMoments);
  whole.secondMoments = wholeParameters(state.secondMoments);
  if (mesh)
    whole.buffers = wholeBuffers;
  return whole;
}

void Trainer::start() {
  const tessera_program &stored = storedProgram();
  // A fresh start's moments are zeros no host memory holds (TrainingState).
  allocateState(stored, state, /*withMoments=*/options.resume);
  state.seed = options.seed;
  state.lossScale =
      program.precision == TESSERA_PRECISION_FP16 ? options.lossScaleInit : 1.0;
  // Every rank checks (a refusal must end them all); the leader deletes.
  if (!options.checkpointDirectory.empty() && !options.resume)
    claimCheckpointDirectory(options.checkpointDirectory,
                             options.overwriteCheckpoints, isLeader());
  if (!options.checkpointDirectory.empty() && isLeader()) {
    ensureDirectory(options.checkpointDirectory);
    requireWritableDirectory("--checkpoint-dir", options.checkpointDirectory);
  }
  // What is written at the end is checked now, not after the training.
  if (isLeader()) {
    if (!options.dumpParametersFile.empty())
      requireWritableFile("--dump-params", options.dumpParametersFile);
    if (!options.dumpGradientsFile.empty())
      requireWritableFile("--dump-grads", options.dumpGradientsFile);
    if (!options.traceFile.empty())
      requireWritableFile("--trace", options.traceFile);
    if (!options.metricsFile.empty())
      requireWritableFile("--metrics", options.metricsFile);
  }
  state.runId = newRunId();
  // The plan tesserac compiled (its --explain --plan TEXT predicts this run).
  if (isLeader() && program.plan)
    std::fprintf(stdout, "plan: %s\n", program.plan);
  if (options.resume) {
    std::string path = findLatestCheckpoint(options.checkpointDirectory);
    if (path.empty())
      fail("--resume: no checkpoint_*.safetensors in " +
           options.checkpointDirectory);
    loadCheckpoint(path, stored, state);
    lastCheckpointStep = state.step;
    if (isLeader())
      std::fprintf(stdout, "resuming from %s (step %lld)\n", path.c_str(),
                   static_cast<long long>(state.step));
  } else {
    loadInitialWeights(stored, options, state);
  }
  if (mesh) {
    wholeBuffers = state.buffers;
    state = mesh->layout.takeBlocks(state, mesh->comms.coordinates);
    countedInNorm = mesh->layout.countedInNorm(mesh->comms.coordinates);
  }
  if (pipeline)
    state = pipeline->layout.takeHeld(state, pipeline->device);
  const int32_t zeroStage =
      pipeline ? pipelineZeroStage(program, options)
      : options.zeroStage >= 0 ? options.zeroStage
                               : program.zero_stage;
  // ZeRO-1 inside a stage mesh: each rank of the stage's dp group holds a
  // shard of its gradients' sums, which all count in the norm.
  const int32_t shardedAxis =
      pipeline && mesh && zeroStage == 1 ? stageDataParallelAxis(program) : -1;
  if (shardedAxis >= 0) {
    std::vector<int32_t> firstReplica = mesh->comms.coordinates;
    firstReplica[static_cast<size_t>(shardedAxis)] = 0;
    countedInNorm = mesh->layout.countedInNorm(firstReplica);
  }
  // Per-parameter ZeRO-1/2 of a mesh program: its pending parameters'
  // shards count on every rank of their group.
  const int32_t meshZeroGroup = mesh && !pipeline ? meshZeroAxes(program) : 0;
  const int32_t meshZero =
      meshZeroGroup != 0 ? meshZeroStage(program, options) : 0;
  if (meshZero >= 1)
    countedInNorm = meshZeroCountedInNorm(
        mesh->layout, program, mesh->comms.coordinates, meshZeroGroup);
  // Over a stage mesh a block counts in the norm on the first replica of
  // its owning stage only.
  if (mesh && pipeline)
    for (size_t p = 0; p < countedInNorm.size(); ++p)
      countedInNorm[p] = countedInNorm[p] &&
                         pipeline->layout.ownerOf(static_cast<int32_t>(p)) ==
                             pipeline->device;
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
  // Everything the steps need, allocated once; the host copy of the
  // tensors is only the checkpoints' from here on.
  if (zeroStage < 0 || zeroStage > 3)
    fail("the program asks for ZeRO stage " + std::to_string(zeroStage) +
         "; the driver shards the optimizer state (stage 1), the gradients "
         "(stage 2) and the weights (stage 3) at most (run with --zero 0, 1, "
         "2 or 3)");
  if (!world) {
    std::optional<DataParallelPlan> stagePlan;
    std::optional<ParameterLayout> placed;
    int32_t groupRank = 0;
    tessera_comm *groupComm = nullptr;
    void *groupStream = pipeline ? pipeline->commStream
                        : mesh   ? mesh->commStream
                                 : nullptr;
    if (shardedAxis >= 0) {
      groupComm = mesh->comms.axes[static_cast<size_t>(shardedAxis)];
      stagePlan = planStageZero(pipeline->layout, pipeline->device, options,
                                tessera_comm_size(groupComm));
    } else if (meshZeroGroup != 0) {
      groupComm = meshZeroComm(mesh->comms, meshZeroGroup);
      stagePlan = planMeshZero(program, options, tessera_comm_size(groupComm),
                               meshZero);
    }
    if (stagePlan) {
      groupRank = tessera_comm_rank(groupComm);
      placed = stagePlan->rankLayout(groupRank);
    }
    backend = makeBackend(program, options, placed ? &*placed : nullptr);
    backend->loadState(state);
    releaseTensors(state);
    if (mesh) {
      tessera_step_context &context = backend->stepContext();
      context.mesh_axis_count =
          static_cast<int32_t>(mesh->comms.axes.size());
      context.axis_comms = mesh->comms.axes.data();
      context.mesh_coordinates = mesh->comms.coordinates.data();
      meshAgreement = std::make_unique<comm::ScalarAgreement>(
          mesh->comms.world, backend->stream());
    }
    // Per pipeline rank, what it holds for the run (under ZeRO-1 its
    // shard of the stage's owned state: StageZero.h).
    const std::string rankName =
        "rank " + std::to_string(rank) +
        (pipeline ? " (stage " + std::to_string(pipeline->device) + ")"
                  : std::string());
    if (stagePlan) {
      stageGroup = std::make_unique<ThreadRankWorld>(groupComm, groupStream);
      dataParallel = std::make_unique<DataParallelGradients>(
          *stageGroup, *backend, *stagePlan, trace, rankName,
          /*everyRankStores=*/true);
    }
    if (meshZeroGroup != 0) {
      // Against the rank's blocks: the driver's parameters' state is 1/N
      // of theirs (under ZeRO-1 and 2; their gradients too under 2), the
      // others' whole.
      // Under ZeRO-2, the plan's ZeRO-1 parameters' gradients stay whole.
      const std::vector<int32_t> stages =
          meshZeroParameterStages(program, options, meshZero);
      int64_t pendingElements = 0, pendingCount = 0, blockElements = 0;
      int64_t wholeElements = 0, wholeCount = 0;
      int64_t slicedElements = 0, slicedCount = 0;
      for (int32_t p = 0; p < program.parameter_count; ++p) {
        const int64_t elements = elementCount(program.parameters[p]);
        blockElements += elements;
        if (program.gradient_partial_axes[p] != 0) {
          pendingElements += elements;
          ++pendingCount;
        }
        if (program.gradient_whole && program.gradient_whole[p] != 0) {
          slicedElements += elements;
          ++slicedCount;
        }
        if (meshZero == 2 && stages[static_cast<size_t>(p)] == 1) {
          wholeElements += elements;
          ++wholeCount;
        }
      }
      const std::string wholeGradients =
          wholeCount == 0
              ? std::string()
              : "; the gradients of the " + std::to_string(wholeCount) +
                    " ZeRO-1 parameters' " + std::to_string(wholeElements) +
                    " elements whole";
      // The replicated layers' gradients, whole on every rank of the
      // group: each rank takes its shard, no collective (MeshZero.h).
      const std::string slicedGradients =
          slicedCount == 0
              ? std::string()
              : "; the " + std::to_string(slicedCount) +
                    " replicated parameters' gradients (" +
                    std::to_string(slicedElements) +
                    " elements) " +
                    (meshZero == 0 ? "left whole" : "sliced") +
                    ", not reduced";
      std::string axes;
      for (int32_t axis = 0; axis < program.mesh_axis_count; ++axis)
        if ((meshZeroGroup >> axis) & 1)
          axes += (axes.empty() ? "" : ",") +
                  std::string(program.mesh_axis_names[axis]);
      std::fprintf(stdout,
                   "%s: ZeRO-%d over %s (group rank %d of %d) of the %lld "
                   "ZeRO-1/2 parameters' %lld elements: masters of %lld "
                   "elements for the rank's %lld block elements%s%s\n",
                   rankName.c_str(), meshZero, axes.c_str(), groupRank,
                   tessera_comm_size(groupComm),
                   static_cast<long long>(pendingCount),
                   static_cast<long long>(pendingElements),
                   static_cast<long long>(
                       backend->residentState().masters /
                       dtypeSize(TESSERA_F32)),
                   static_cast<long long>(blockElements),
                   wholeGradients.c_str(), slicedGradients.c_str());
      std::fflush(stdout);
    } else if (stagePlan) {
      // Against what the stage owns: the shard is 1/dp of it.
      int64_t ownedElements = 0, ownedCount = 0;
      for (int32_t p = 0; p < program.parameter_count; ++p)
        if (pipeline->layout.ownerOf(p) == pipeline->device) {
          ownedElements += elementCount(program.parameters[p]);
          ownedCount += elementCount(program.parameters[p]) > 0;
        }
      std::fprintf(stdout,
                   "%s: ZeRO-1 over dp rank %d of %d: masters of %lld of "
                   "the stage's %lld owned elements (%lld parameters)\n",
                   rankName.c_str(), groupRank,
                   static_cast<int>(program.mesh_shape[shardedAxis]),
                   static_cast<long long>(
                       backend->residentState().masters /
                       dtypeSize(TESSERA_F32)),
                   static_cast<long long>(ownedElements),
                   static_cast<long long>(ownedCount));
      std::fflush(stdout);
    } else if (pipeline && mesh) {
      std::fprintf(stdout, "%s: %s\n", rankName.c_str(),
                   describeResidentState(backend->residentState()).c_str());
      std::fflush(stdout);
    }
    if (pipeline) {
      pipelineStep = std::make_unique<PipelineStep>(
          pipeline->layout, pipeline->device, *backend, pipeline->comm,
          trace, mesh ? mesh->comms.axes : std::vector<tessera_comm *>(),
          shardedAxis);
      microBatchSeeds.assign(
          static_cast<size_t>(options.gradientAccumulation), 0);
    }
    return;
  }
  if (zeroStage >= 2 && !options.dumpGradientsFile.empty())
    fail("--dump-grads: under --zero " + std::to_string(zeroStage) +
         " each rank holds only its shard of the gradients (run with --zero "
         "0 or --zero 1 to dump them)");
  // The offloaded optimizer keeps whole masters on the host and uploads
  // whole weights; ZeRO-3's are gathered from shards on the device.
  if (zeroStage == 3 && options.offloadOptimizer)
    fail("--zero 3 with --offload optimizer: the offloaded optimizer keeps "
         "every weight whole, which ZeRO-3 shards (run with --offload none, "
         "or --zero 1 or 2)");
  DataParallelPlan plan = planDataParallel(program, options, ranks, zeroStage);
  const ParameterLayout placed = plan.rankLayout(rank);
  backend = makeBackend(program, options, &placed);
  backend->loadState(state);
  releaseTensors(state);
  dataParallel =
      std::make_unique<DataParallelGradients>(*world, *backend, plan, trace);
}

double Trainer::accumulateMicroBatches(int64_t step) {
  const float lossScale = static_cast<float>(state.lossScale);
  if (pipelineStep) {
    // Every micro-batch of the step first: a device runs micro-batch k's
    // forward and backward far apart, each with k's data and seed.
    for (int64_t micro = 0; micro < options.gradientAccumulation; ++micro) {
      TraceRange range(trace, "data");
      data->nextBatch(backend->tokens(), backend->targets(), dataRank(),
                      ranks);
      backend->storeMicroBatch(micro);
      microBatchSeeds[static_cast<size_t>(micro)] = dropoutSeed(step, micro);
    }
    double loss;
    {
      TraceRange range(trace, "pipeline");
      loss = pipelineStep->run(step, lossScale, microBatchSeeds);
    }
    // ZeRO-1 inside a stage mesh: the dp group's sums, reduce-scattered.
    if (dataParallel)
      dataParallel->finishStep();
    return loss;
  }
  double lossSum = 0;
  for (int64_t micro = 0; micro < options.gradientAccumulation; ++micro) {
    {
      TraceRange range(trace, "data");
      data->nextBatch(backend->tokens(), backend->targets(), dataRank(),
                      ranks);
    }
    uint64_t seed = dropoutSeed(step, micro);
    try {
      TraceRange range(trace, "forward_backward");
      range.addInteger("micro_batch", micro);
      lossSum += backend->runMicroBatch(micro, lossScale, seed);
    } catch (const TrainError &error) {
      fail("step " + std::to_string(step) + ", micro-batch " +
           std::to_string(micro + 1) + ": " + error.what());
    }
    // ZeRO-2: the ring is free for the next micro-batch.
    if (dataParallel)
      dataParallel->finishMicroBatch();
  }
  double loss = lossSum / static_cast<double>(options.gradientAccumulation);
  if (!dataParallel)
    return loss;
  dataParallel->finishStep();
  // Every rank of a mesh has the micro-batches' loss already.
  if (mesh)
    return loss;
  return dataParallel->sum(loss) / ranks;
}

std::vector<double> Trainer::parameterSumsOfSquares() {
  if (mesh)
    return meshParameterSumsOfSquares(*backend, *meshAgreement);
  if (pipelineStep)
    return pipelineStep->parameterSumsOfSquares();
  if (dataParallel)
    return dataParallel->parameterSumsOfSquares();
  return backend->lastParameterSumsOfSquares();
}

void Trainer::requireFiniteUpdate(int64_t step, double learningRate) {
  const int32_t parameter = backend->nonFiniteParameter();
  double anywhere = parameter >= 0 ? 1.0 : 0.0;
  if (mesh)
    anywhere = meshAgreement->max(anywhere);
  else if (pipelineStep)
    anywhere = pipelineStep->max(anywhere);
  else if (dataParallel)
    anywhere = dataParallel->max(anywhere);
  if (anywhere == 0)
    return;
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%g", learningRate);
  const std::string which =
      parameter >= 0
          ? "'" + std::string(storedProgram().parameters[parameter].name) + "'"
          : std::string("a parameter another rank holds");
  fail("step " + std::to_string(step) + ": the AdamW update made " + which +
       " (or its second moment) non-finite: the update at learning rate " +
       rate +
       " does not fit f32 (try a lower --lr); nothing of this step "
       "is written" +
       (lastCheckpointStep > 0 ? " (the last checkpoint is step " +
                                     std::to_string(lastCheckpointStep) + ")"
                               : std::string()));
}

void Trainer::writeCheckpoint() {
  TraceRange range(trace, "checkpoint");
  lastCheckpointStep = state.step;
  // Every rank takes part in gathering the state; rank 0 writes it.
  if (dataParallel)
    dataParallel->gatherOptimizerState();
  if (!isLeader() && !gathersState())
    return;
  TrainingState whole = wholeState();
  if (isLeader())
    saveCheckpoint(checkpointPath(options.checkpointDirectory, state.step),
                   storedProgram(), whole);
}

int Trainer::run() {
  start();
  MetricsWriter metrics(isLeader() ? stdout : nullptr,
                        isLeader() ? options.metricsFile : std::string(),
                        options.resume ? std::optional<int64_t>(state.step)
                                       : std::nullopt);
  const bool fp16 = program.precision == TESSERA_PRECISION_FP16;
  // Tokens of all ranks; MFU stays per GPU (each rank's FLOPs over its
  // own peak). A pipelined program counts every chunk's FLOPs: a stage's
  // GPU does its share, the average of which is the whole over the stages.
  const double tokensPerStep = static_cast<double>(
      program.batch * program.sequence * options.gradientAccumulation * ranks);
  const double flopsPerStep =
      program.flops_per_micro_batch *
      static_cast<double>(options.gradientAccumulation) /
      (program.pipeline ? static_cast<double>(program.pipeline->stages) : 1.0);

  for (int64_t step = state.step + 1; step <= options.steps; ++step) {
    TraceStep traced(trace, step);
    auto begin = std::chrono::steady_clock::now();
    double usedScale = state.lossScale;
    double loss = accumulateMicroBatches(step);
    double scaledNorm;
    {
      TraceRange range(trace, "gradient_norm");
      scaledNorm = std::sqrt(
          mesh ? meshGradientSumOfSquares(*backend, countedInNorm,
                                          *meshAgreement)
          : pipelineStep ? pipelineStep->gradientSumOfSquares()
          : dataParallel ? dataParallel->gradientSumOfSquares()
                         : backend->gradientSumOfSquares());
    }
    // The reduction summed the ranks' gradients: their mean is a divide
    // by the rank count more.
    double divisor = static_cast<double>(options.gradientAccumulation) *
                     static_cast<double>(ranks) * usedScale;
    double norm = scaledNorm / divisor;
    bool overflow = !std::isfinite(scaledNorm) || !std::isfinite(loss);
    // Every rank holds the same reduced gradients and loss, so they agree
    // already; the flag's max makes a skipped fp16 step everyone's even if
    // a rank's arithmetic differed.
    if (fp16 && dataParallel)
      overflow = dataParallel->max(overflow ? 1.0 : 0.0) > 0;

    if (overflow && !fp16)
      fail("step " + std::to_string(step) +
           ": the loss or the gradients are not finite (loss " +
           std::to_string(loss) + "); the run diverged (try a lower --lr)");
    // Loss scaling rescues gradients that overflow fp16, not a forward pass
    // that did: a non-finite loss is a diverged (or overflowing) model.
    if (fp16 && !std::isfinite(loss))
      fail("step " + std::to_string(step) + ": the forward loss is " +
           std::to_string(loss) +
           " (fp16): the forward pass itself overflowed or diverged, which "
           "loss scaling cannot fix (try a lower --lr, or bf16)");
    // Every rank judges the same agreed norm: the same decisions.
    SpikeResponse spike;
    if (!overflow)
      spike = respondToGradientNorm(options, step, norm, state);
    if (spike.spike && isLeader()) {
      std::fprintf(stdout, "%s\n",
                   describeSpike(options, step, norm, spike).c_str());
      std::fflush(stdout);
    }
    // The schedule's rate times the lower-lr factors of the spikes so far
    // (this step's included).
    double learningRate = schedule.at(step) * state.learningRateFactor;
    GradientNorms norms;
    if (options.gradientNormsEvery > 0 &&
        step % options.gradientNormsEvery == 0)
      norms = gradientNorms(storedProgram(), parameterSumsOfSquares(), divisor);
    const bool update = !overflow && !spike.skip;

    if (overflow) {
      recordOverflow(lossScalePolicy, state);
      if (state.lossScale < kMinimumLossScale) {
        char scale[32];
        std::snprintf(scale, sizeof(scale), "%g", state.lossScale);
        fail("step " + std::to_string(step) +
             ": fp16 gradients overflow at every loss scale (now " + scale +
             "); the run diverged (try a lower --lr)");
      }
    } else if (update) {
      double clip = spike.clip;
      if (options.gradientClip > 0 && norm * clip > options.gradientClip)
        clip = options.gradientClip / norm;
      ++state.optimizerStep;
      bool dumpNow = !options.dumpGradientsFile.empty() && step == options.steps;
      if (dumpNow && dataParallel)
        dataParallel->gatherGradients();
      // A mesh's blocks and a pipeline's owned gradients are gathered by
      // every rank.
      if (dumpNow && (isLeader() || gathersState())) {
        std::vector<std::vector<float>> gradients =
            backend->copyOptimizerGradients();
        for (std::vector<float> &gradient : gradients)
          for (float &value : gradient)
            value = static_cast<float>(value / divisor);
        if (gathersState())
          gradients = wholeParameters(gradients);
        if (isLeader())
          dumpGradients(options.dumpGradientsFile, storedProgram(), gradients,
                        state.step + 1);
      }
      AdamWUpdate update;
      update.step = state.optimizerStep;
      update.learningRate = learningRate;
      update.beta1 = options.beta1;
      update.beta2 = options.beta2;
      update.epsilon = options.epsilon;
      update.weightDecay = options.weightDecay;
      update.gradientScale = clip / divisor;
      {
        TraceRange range(trace, "optimizer");
        backend->applyAdamW(update);
        if (dataParallel)
          dataParallel->afterOptimizer();
        if (pipelineStep)
          pipelineStep->afterOptimizer();
      }
      if (fp16)
        recordCleanStep(lossScalePolicy, state);
    }
    {
      TraceRange range(trace, "wait_for_device");
      backend->finishStep();
    }
    if (update)
      requireFiniteUpdate(step, learningRate);
    skippedInARow = update ? 0 : skippedInARow + 1;
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
    record.skipped = !update;
    record.spikeDetection = options.onSpike.enabled();
    record.spike = spike.spike;
    record.spikeLower = spike.lower;
    record.spikeUpper = spike.upper;
    if (spike.spike)
      record.spikeActions = spikeActionsText(options.onSpike);
    if (flopsPerStep > 0 && seconds > 0)
      record.modelFlopsUtilization =
          flopsPerStep / seconds / (options.peakTeraflops * 1e12);
    record.peakMemoryBytes = backend->peakMemoryBytes();
    record.gradientNorms = std::move(norms);
    metrics.record(record);
    trace.counter("loss", loss);
    trace.counter("loss scale", usedScale);
    trace.counter("grad norm", norm);
    for (const auto &[layer, value] : record.gradientNorms.layers)
      trace.counter(("grad norm " + layer).c_str(), value);
    for (const auto &[parameter, value] : record.gradientNorms.parameters)
      trace.counter(("grad norm " + parameter).c_str(), value);
    if (overflow)
      trace.instant("fp16 overflow: step skipped");
    if (spike.spike)
      trace.instant("gradient norm spike: " + record.spikeActions);

    if ((options.checkpointEvery > 0 && step % options.checkpointEvery == 0) ||
        spike.checkpoint)
      writeCheckpoint();
    if (options.maxSkippedSteps > 0 && skippedInARow >= options.maxSkippedSteps)
      fail("step " + std::to_string(step) + ": " +
           std::to_string(skippedInARow) + " steps in a row were skipped (" +
           (overflow ? "the fp16 gradients overflow at loss scale " +
                           std::to_string(usedScale)
                     : std::string("gradient norm spikes")) +
           "); the run is not training (--max-skipped-steps " +
           std::to_string(options.maxSkippedSteps) + ")");
    if (spike.stop)
      fail("step " + std::to_string(step) + ": gradient norm " +
           std::to_string(norm) + " left the band [" +
           std::to_string(spike.lower) + ", " + std::to_string(spike.upper) +
           "] of the last " + std::to_string(options.spikeWindow) +
           " steps; stopped (--on-spike stop)" +
           (spike.checkpoint ? "; the checkpoint of step " +
                                   std::to_string(step) + " is written"
                             : std::string()));
  }

  if (!options.checkpointDirectory.empty() && lastCheckpointStep != state.step)
    writeCheckpoint();
  // ZeRO-1's masters are shards: every rank takes part in gathering them.
  if (!options.dumpParametersFile.empty() && dataParallel)
    dataParallel->gatherOptimizerState();
  if (!options.dumpParametersFile.empty() && (isLeader() || gathersState())) {
    TrainingState whole = wholeState();
    if (isLeader())
      dumpParameters(options.dumpParametersFile, storedProgram(), whole);
  }
  return 0;
}

/// The ranks of `shape` as threads of this process over the in-process
/// comm (adopted by `adoptRank`, the device's view of them, when given),
/// each running `runRank` with its comms, its comm stream (the device's;
/// nullptr on the host) and its own trace (FILE.rankN.json, as launched
/// ranks write; rank 0 alone prints where). The first rank to fail is the
/// run's error (the others then fail waiting for it); returns the exit
/// code.
int runRankThreads(
    const comm::MeshShape &shape, const TrainOptions &options,
    const ThreadRankFactory &adoptRank, const std::string &name,
    double timeoutSeconds,
    const std::function<int(const comm::RankComms &, void *commStream,
                            Trace &)> &runRank) {
  comm::ThreadWorld world(shape, timeoutSeconds);
  // One process's GPU activity would mix every rank's kernels: the thread
  // ranks trace the host side only. Made here, before any rank starts, so
  // that an unwritable file fails the run at once.
  std::vector<std::unique_ptr<Trace>> traces;
  const int32_t ranks = world.size();
  for (int32_t r = 0; r < ranks; ++r) {
    TraceOptions traceOptions = traceOptionsFromFlags(
        options, name, /*captureGpu=*/false, r, ranks);
    if (r != 0)
      traceOptions.messages = nullptr;
    traces.push_back(std::make_unique<Trace>(std::move(traceOptions)));
  }
  std::mutex mutex;
  std::optional<TrainError> firstError;
  try {
    comm::runThreadRanks(world, [&](const comm::RankComms &hostComms) {
      try {
        std::unique_ptr<ThreadRankDevice> device =
            adoptRank ? adoptRank(hostComms) : nullptr;
        const comm::RankComms &comms = device ? device->comms() : hostComms;
        return runRank(comms, device ? device->commStream() : nullptr,
                       *traces[static_cast<size_t>(hostComms.rank)]);
      } catch (const TrainError &error) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!firstError)
          firstError.emplace("rank " + std::to_string(hostComms.rank) + ": " +
                                 error.what(),
                             error.getExitCode());
        return error.getExitCode();
      }
    });
  } catch (const comm::CommError &) {
    if (firstError)
      throw *firstError;
    throw;
  }
  for (std::unique_ptr<Trace> &trace : traces)
    trace->finish();
  return 0;
}

/// A partitioned program started plainly: its mesh's ranks as threads,
/// each running the steps on its blocks.
int runMeshRanks(const tessera_program &program, const MeshLayout &layout,
                 const TrainOptions &options, const BackendFactory &makeBackend,
                 const ThreadRankFactory &adoptRank, const std::string &name,
                 double timeoutSeconds) {
  return runRankThreads(
      layout.getShape(), options, adoptRank, name, timeoutSeconds,
      [&](const comm::RankComms &comms, void *commStream, Trace &trace) {
        MeshRank rank{layout, comms, commStream};
        Trainer trainer(program, options, makeBackend, trace, nullptr,
                        comms.rank, 1, &rank);
        return trainer.run();
      });
}

/// The ranks of a pipelined program: one per pipeline device, or over a
/// stage mesh (`meshLayout`) the pipeline axis (outermost) times its mesh.
comm::MeshShape pipelineShape(const PipelineLayout &layout,
                              const MeshLayout *meshLayout) {
  comm::MeshShape shape{layout.stages()};
  if (meshLayout)
    shape.insert(shape.end(), meshLayout->getShape().begin(),
                 meshLayout->getShape().end());
  return shape;
}

/// Runs the steps of the pipeline rank whose comms are `comms` (of the
/// world pipelineShape describes): a pipeline device, and over a stage
/// mesh also the mesh rank of the axes after the pipeline's.
int runPipelineRank(const PipelineLayout &layout, const MeshLayout *meshLayout,
                    const comm::RankComms &comms, void *commStream,
                    const std::function<int(const tessera_program &,
                                            const MeshRank *,
                                            const PipelineRank &)> &train) {
  if (!meshLayout) {
    PipelineRank rank{layout, comms.world, comms.rank, commStream};
    return train(layout.deviceProgram(comms.rank), nullptr, rank);
  }
  const int32_t device = comms.coordinates[0];
  PipelineRank rank{layout, comms.axes[0], device, commStream};
  comm::RankComms meshComms;
  meshComms.rank = comms.rank;
  meshComms.world = comms.world;
  meshComms.axes.assign(comms.axes.begin() + 1, comms.axes.end());
  meshComms.coordinates.assign(comms.coordinates.begin() + 1,
                               comms.coordinates.end());
  MeshRank meshRank{*meshLayout, meshComms};
  return train(layout.deviceProgram(device), &meshRank, rank);
}

/// A pipelined program started plainly: one thread rank per pipeline
/// device (times the stage mesh's ranks), each running the steps of its
/// chunks on its parameters (its blocks of them).
int runPipelineRanks(const PipelineLayout &layout, const MeshLayout *meshLayout,
                     const TrainOptions &options,
                     const BackendFactory &makeBackend,
                     const ThreadRankFactory &adoptRank,
                     const std::string &name, double timeoutSeconds) {
  return runRankThreads(
      pipelineShape(layout, meshLayout), options, adoptRank, name,
      timeoutSeconds,
      [&](const comm::RankComms &comms, void *commStream, Trace &trace) {
        return runPipelineRank(
            layout, meshLayout, comms, commStream,
            [&](const tessera_program &program, const MeshRank *mesh,
                const PipelineRank &rank) {
              Trainer trainer(program, options, makeBackend, trace, nullptr,
                              comms.rank, 1, mesh, &rank);
              return trainer.run();
            });
      });
}

/// The steps of this process's rank, traced per rank (rank 0 alone
/// prints the trace's messages): a data-parallel rank of `world` (nullptr
/// for one rank), or with `mesh` (`pipeline`) a launched rank of a
/// partitioned (pipelined) program, which reads every micro-batch.
int runProcessRank(const tessera_program &program, const TrainOptions &options,
                   const BackendFactory &makeBackend,
                   const comm::LaunchInfo &place, const std::string &name,
                   RankWorld *world, const MeshRank *mesh,
                   const PipelineRank *pipeline = nullptr) {
  // Made before the backend and destroyed after it, so that a failing
  // run's trace is still written (Trace.h).
  TraceOptions traceOptions =
      traceOptionsFromFlags(options, name, program.device == TESSERA_DEVICE_CUDA,
                            place.rank, place.worldSize);
  if (place.rank != 0)
    traceOptions.messages = nullptr;
  Trace trace(std::move(traceOptions));
  const bool readsEveryMicroBatch = mesh || pipeline;
  Trainer trainer(program, options, makeBackend, trace,
                  readsEveryMicroBatch ? nullptr : world, place.rank,
                  readsEveryMicroBatch ? 1 : place.worldSize, mesh, pipeline);
  int exitCode = trainer.run();
  trace.finish();
  return exitCode;
}

/// One launched rank (a process: --nproc, torchrun, mpirun, srun) of a
/// partitioned program: the world arranged as the program's mesh, whose
/// axis communicators the step's collectives run on. Every rank reads every
/// micro-batch, as the thread ranks do; rank 0 prints and writes.
int runLaunchedMeshRank(const tessera_program &program,
                        const MeshLayout &layout, const TrainOptions &options,
                        const BackendFactory &makeBackend,
                        const RankWorldFactory &makeWorld,
                        const comm::LaunchInfo &place, const std::string &name,
                        double timeoutSeconds) {
  const int64_t meshRanks = comm::meshRankCount(layout.getShape());
  if (meshRanks != place.worldSize)
    fail("this program is partitioned for the mesh " +
         comm::formatMesh(layout.getShape()) + " of " +
         std::to_string(meshRanks) + " ranks, but " + place.source +
         " started " + std::to_string(place.worldSize) +
         " (launch one rank per device of the mesh, or start it plainly to "
         "run the ranks as threads)");
  // Before the backend: the world picks this rank's GPU.
  std::unique_ptr<RankWorld> world =
      makeWorld(place, layout.getShape(), timeoutSeconds);
  MeshRank rank{layout, world->rankComms(), world->commStream()};
  return runProcessRank(program, options, makeBackend, place, name,
                        world.get(), &rank);
}

/// One launched rank of a pipelined program: pipeline device `place.rank`
/// (over a stage mesh, a rank of the pipeline axis times the mesh), its
/// peers on the world's NCCL communicators.
int runLaunchedPipelineRank(const PipelineLayout &layout,
                            const MeshLayout *meshLayout,
                            const TrainOptions &options,
                            const BackendFactory &makeBackend,
                            const RankWorldFactory &makeWorld,
                            const comm::LaunchInfo &place,
                            const std::string &name, double timeoutSeconds) {
  // Before the backend: the world picks this rank's GPU.
  std::unique_ptr<RankWorld> world = makeWorld(
      place, pipelineShape(layout, meshLayout), timeoutSeconds);
  return runPipelineRank(
      layout, meshLayout, world->rankComms(), world->commStream(),
      [&](const tessera_program &program, const MeshRank *mesh,
          const PipelineRank &rank) {
        return runProcessRank(program, options, makeBackend, place, name,
                              world.get(), mesh, &rank);
      });
}

/// The options of a pipelined program's run: its micro-batches are the
/// step's gradient accumulation. Refuses what the driver cannot run (yet)
/// before any rank starts, so that the run says it once.
TrainOptions pipelineOptions(const tessera_program &program,
                             const TrainOptions &options,
                             const comm::LaunchInfo &place,
                             bool canLaunch) {
  const tessera_pipeline &pipeline = *program.pipeline;
  const std::string schedule =
      pipeline.schedule ? pipeline.schedule : "(unnamed)";
  if (pipeline.virtual_stages > 1 && pipeline.stages < 2)
    fail("this program's schedule '" + schedule + "' interleaves " +
         std::to_string(pipeline.virtual_stages) +
         " chunks on one stage; interleaving needs 2 or more stages "
         "(compile it with more --stages, or with gpipe or 1f1b)");
  const int64_t micro = pipeline.micro_batches;
  if (options.gradientAccumulation != 1 &&
      options.gradientAccumulation != micro)
    throw TrainError(
        "--grad-accum " + std::to_string(options.gradientAccumulation) +
            ": this program is pipelined over " + std::to_string(micro) +
            " micro-batches a step (tesserac --microbatches), which are its "
            "gradient accumulation; leave --grad-accum out (or give " +
            std::to_string(micro) + ")",
        kUsageExitCode);
  (void)pipelineZeroStage(program, options);
  // Over a stage mesh every stage is that mesh's ranks.
  const int64_t stageRanks =
      program.mesh_axis_count > 0
          ? comm::meshRankCount(comm::MeshShape(
                program.mesh_shape, program.mesh_shape + program.mesh_axis_count))
          : 1;
  const std::string ranksText =
      stageRanks > 1 ? std::to_string(pipeline.stages) + " stages x " +
                           std::to_string(stageRanks) + " mesh ranks"
                     : std::to_string(pipeline.stages) + " stages (one rank each)";
  if (place.worldSize > 1) {
    if (!canLaunch)
      fail("this program is pipelined over " + ranksText +
           ", whose ranks run as threads of one process (a CPU "
           "program); start it without a launcher (" + place.source +
           " started " + std::to_string(place.worldSize) + " ranks)");
    if (place.worldSize != pipeline.stages * stageRanks)
      fail("this program is pipelined over " + ranksText + ", but " +
           place.source + " started " + std::to_string(place.worldSize) +
           " ranks (launch one rank per stage and mesh rank, or start it "
           "plainly to run them as threads)");
  }
  TrainOptions pipelined = options;
  pipelined.gradientAccumulation = micro;
  // Parts of a gradient from several stages are added in f32, and so are
  // the data-parallel replicas' sums.
  pipelined.accumulateInF32 = PipelineLayout::hasGradientParts(program) ||
                              pipeline.gradient_partial_axes != nullptr;
  return pipelined;
}

/// --thread-ranks N runs a plain program's data-parallel ranks as threads
/// of one process. Refuses, before any rank starts, what it cannot run.
void requireThreadRanksSupported(const tessera_program &program,
                                 const TrainOptions &options,
                                 const comm::LaunchInfo &place) {
  const std::string flag =
      "--thread-ranks " + std::to_string(options.threadRanks);
  if (place.worldSize > 1)
    fail(flag + ": " + place.source + " started " +
         std::to_string(place.worldSize) +
         " ranks; data-parallel ranks run either as threads of one process "
         "(--thread-ranks) or as launched processes (--nproc, torchrun, "
         "mpirun, srun), not both");
  if (PipelineLayout::isPipelined(program) ||
      MeshLayout::isPartitioned(program))
    fail(flag + ": this program is " +
         (PipelineLayout::isPipelined(program) ? "pipelined"
                                               : "partitioned for a mesh") +
         ", whose ranks already run as threads when it is started plainly; "
         "leave --thread-ranks out");
}

std::string programName(int argc, char **argv) {
  if (argc < 1 || !argv || !argv[0])
    return "train";
  const char *slash = std::strrchr(argv[0], '/');
  return slash ? slash + 1 : argv[0];
}

} // namespace

int runTrainMain(int argc, char **argv, const tessera_program *program,
                 const BackendFactory &makeBackend,
                 const RankWorldFactory &makeWorld,
                 const ThreadRankFactory &adoptThreadRank) {
  std::string name = programName(argc, argv);
  // "rank R: " before every error of a multi-rank run.
  std::string rankPrefix;
  try {
    // First: a launcher (--nproc N) only starts the ranks and waits.
    comm::Launch launch =
        comm::launchFromCommandLine(argc, argv, comm::processEnvironment());
    if (launch.launcherExitCode)
      return *launch.launcherExitCode;
    const comm::LaunchInfo &place = launch.info;
    if (place.worldSize > 1)
      rankPrefix = "rank " + std::to_string(place.rank) + ": ";
    std::vector<const char *> arguments;
    for (const std::string &argument : launch.remainingArguments)
      arguments.push_back(argument.c_str());
    TrainOptions options = parseFlags(static_cast<int>(arguments.size()),
                                      arguments.data());
    if (options.help) {
      if (place.rank == 0)
        std::fputs(usageText(name.c_str()).c_str(), stdout);
      return 0;
    }
    checkProgram(program);
    // The plan tesserac compiled offloads when nothing else fit the device;
    // --offload none|optimizer overrides it.
    if (!options.offloadGiven && program->offload_optimizer)
      options.offloadOptimizer = true;
    requireOffloadSupported(*program, options,
                            std::max<int64_t>(place.worldSize,
                                              options.threadRanks));
    if (options.threadRanks > 1)
      requireThreadRanksSupported(*program, options, place);
    if (PipelineLayout::isPipelined(*program)) {
      TrainOptions pipelined = pipelineOptions(
          *program, options, place,
          program->device != TESSERA_DEVICE_HOST && makeWorld != nullptr);
      PipelineLayout layout(*program);
      // A pipeline over a stage mesh: the stage functions are one mesh
      // rank's.
      std::optional<MeshLayout> meshLayout;
      if (MeshLayout::isPartitioned(*program))
        meshLayout.emplace(*program);
      const MeshLayout *stageMesh = meshLayout ? &*meshLayout : nullptr;
      if (place.worldSize == 1)
        return runPipelineRanks(layout, stageMesh, pipelined, makeBackend,
                                adoptThreadRank, name,
                                launch.commTimeoutSeconds);
      return runLaunchedPipelineRank(layout, stageMesh, pipelined, makeBackend,
                                     makeWorld, place, name,
                                     launch.commTimeoutSeconds);
    }
    if (MeshLayout::isPartitioned(*program)) {
      MeshLayout layout(*program);
      // Before the ranks start, so that the run says it once.
      (void)meshZeroStage(*program, options);
      if (place.worldSize == 1)
        return runMeshRanks(*program, layout, options, makeBackend,
                            adoptThreadRank, name, launch.commTimeoutSeconds);
      if (program->device == TESSERA_DEVICE_HOST || !makeWorld)
        fail("this program is partitioned for the mesh " +
             comm::formatMesh(layout.getShape()) +
             ", whose ranks run as threads of one process; start it "
             "without a launcher (" + place.source + " started " +
             std::to_string(place.worldSize) + " ranks)");
      return runLaunchedMeshRank(*program, layout, options, makeBackend,
                                 makeWorld, place, name,
                                 launch.commTimeoutSeconds);
    }
    // --thread-ranks N: the data-parallel ranks as threads (a CPU
    // program's only data parallelism; a GPU program's ranks share this
    // machine's GPUs, their collectives staged through the host).
    if (options.threadRanks > 1) {
      const auto ranks = static_cast<int32_t>(options.threadRanks);
      return runRankThreads(
          comm::MeshShape{ranks}, options, adoptThreadRank, name,
          launch.commTimeoutSeconds,
          [&](const comm::RankComms &comms, void *commStream, Trace &trace) {
            ThreadRankWorld world(comms.world, commStream);
            Trainer trainer(*program, options, makeBackend, trace, &world,
                            comms.rank, ranks);
            return trainer.run();
          });
    }
    // Before the backend: the NCCL world picks this rank's GPU.
    std::unique_ptr<RankWorld> world;
    if (place.worldSize > 1) {
      if (!makeWorld)
        fail("this executable trains on one rank (a CPU program), but " +
             std::to_string(place.worldSize) + " ranks were launched (" +
             place.source + "); compile with --target cuda for data "
             "parallelism");
      world = makeWorld(place, comm::MeshShape{place.worldSize},
                        launch.commTimeoutSeconds);
    }
    return runProcessRank(*program, options, makeBackend, place, name,
                          world.get(), nullptr);
  } catch (const TrainError &error) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s%s: error: %s\n", rankPrefix.c_str(), name.c_str(),
                 error.what());
    return error.getExitCode();
  } catch (const comm::CommError &error) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s%s: error: %s\n", rankPrefix.c_str(), name.c_str(),
                 error.what());
    return kFailureExitCode;
  } catch (const std::bad_alloc &) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s%s: error: out of memory\n", rankPrefix.c_str(),
                 name.c_str());
    return kFailureExitCode;
  } catch (const std::exception &error) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s%s: error: internal error: %s\n",
                 rankPrefix.c_str(), name.c_str(), error.what());
    return kFailureExitCode;
  }
}

} // namespace tessera::train

extern "C" int tessera_train_main(int argc, char **argv,
                                  const tessera_program *program) {
  return tessera::train::runTrainMain(argc, argv, program,
                                      tessera::train::makeHostBackend);
}
