//===- PipelineParallel.h - The driver's side of a pipelined program -*- C++ -*-===//
//
// A pipelined program (`tesserac --stages S --microbatches M`, program.h's
// tessera_pipeline) is the step cut into chunks, each a forward and a
// backward stage function, and per pipeline device the order of its tasks.
// The driver runs one rank per device: started plainly, S threads of one
// process over the in-process comm (staged through host memory on the
// GPU); launched (--nproc S, torchrun, ...), one process per GPU on NCCL.
// The model to follow is lib/Execution/PipelineExecutor.cpp, which runs the
// same tables on the interpreter.
//
// What the driver adds, per rank (device d):
// - parameters: a parameter is OWNED by the device whose chunk completes
//   its gradient (gradient_parameters), and READ by the devices whose
//   chunks list it in read_parameters. The rank's backend holds only those:
//   every other parameter is a zero-element slice (the rank's program, a
//   copy of the whole one with those parameters at shape [0]), which is the
//   point of pipelining: a device holds its layers' weights, moments and
//   gradients, not the model's.
// - data: every rank reads all M micro-batches of the step, in order, as
//   one device with --grad-accum M does (dropout seeds likewise), so a
//   pipelined run trains exactly as that run up to the order of sums.
// - the step (PipelineStep::run): the device's tasks in order. A forward
//   receives its activations from the previous chunk's device, sends its
//   activations on and keeps its SAVED outputs in a stash slot of (chunk,
//   micro-batch); a backward reads that slot and the next chunk's
//   activation gradients, sends its own back, frees the slot, and adds the
//   gradients it completed into the f32 accumulators (the first
//   contribution of a parameter in a step replaces, later ones add). Sends
//   of task i and receives of task i + 1 are one comm group, so NCCL's
//   blocking sends cannot deadlock on a 1F1B order (Megatron's pairing);
//   the in-process comms buffer sends, so there the order is enough (the
//   schedules never wait on a message sent later; checkPipeline simulates
//   the task orders to make sure).
// - memory: the stash (per chunk, as many slots as that chunk has
//   micro-batches in flight at most in the device's order) and the message
//   buffers are allocated once, in the backend's memory; the step loop
//   allocates nothing.
// - gradients in parts: a parameter whose gradient chunks on several devices
//   return parts of (a tied embedding: its embedding's and its head's) is
//   owned by the first; after the step's tasks each other holder sends its
//   f32 sum over the micro-batches to the owner, which adds it: once a
//   step, as Megatron-LM all-reduces the embedding's gradient between its
//   first and last stage, instead of with every micro-batch.
// - the loss: the last chunk's forward returns each micro-batch's; their
//   mean is summed over the ranks (the others add 0), so all agree. The
//   gradient norm sums each rank's OWNED gradients' squares over the
//   ranks; AdamW runs on the owned parameters only, then each owner sends
//   the updated master weights to the devices that read them (a tied
//   embedding's head), in one order every rank follows.
// - checkpoints and dumps: every parameter, moment and gradient comes
//   from its owner (gathered on every rank); rank 0 writes the whole
//   model's file, the same as an unpipelined run's, so either resumes the
//   other.
//
// Interleaved schedules (virtual_stages > 1): a peer may send a message
// before this device needs it (chunk 2's activations before chunk 0's
// gradients); receiving follows the peer's order and keeps such messages
// in slots until their task (pools sized from the task orders).
//
// Over a stage mesh (program.h's mesh fields with a pipeline: PP x DP,
// PP x TP, PP x DP x TP), each pipeline device is the mesh's ranks: the
// world is the pipeline axis (outermost) times the mesh, the pipeline's
// messages go between the ranks of one mesh coordinate, and the stage
// functions call their collectives on the mesh's axes themselves (a tensor-
// parallel layer's all-reduce, a data-parallel rank's block of the micro-
// batch and its share of the loss). What the driver adds is the data-
// parallel sum: the gradients the chunks return pending over a mesh axis
// are summed over it once a step (sumOverMesh), after the tied
// embedding's parts and before the norm, as each device's f32 sum over its
// micro-batches, not once per micro-batch. Blocks, the norm's counting and
// the gathered checkpoints are MeshParallel.h's, composed with the owners'.
// Under ZeRO-1 (StageZero.h) the dp axis's sum is a reduce-scatter of the
// data-parallel layer instead, and each rank of the stage's dp group holds
// and updates its shard of the owned parameters' masters and moments.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_PIPELINEPARALLEL_H
#define TESSERA_RUNTIME_TRAIN_PIPELINEPARALLEL_H

#include "Trace.h"
#include "TrainingBackend.h"
#include "TrainingState.h"

#include "tessera/runtime/gradient_reducer.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace tessera::train {

/// Throws TrainError ("malformed program (a compiler bug): pipeline: ...")
/// when program.pipeline's tables break program.h's contract: the counts,
/// the roles and shapes of the messages between neighbouring chunks, every
/// parameter owned by exactly one chunk, every device running each of its
/// chunks' forward and backward once per micro-batch, backwards after their
/// forwards, and task orders that finish (no device waits for a message
/// that is sent after it).
void checkPipeline(const tessera_program &program);

/// Which device owns and reads each parameter, and each device's program.
class PipelineLayout {
public:
  /// `program` is pipelined and checked (checkPipeline).
  explicit PipelineLayout(const tessera_program &program);
  PipelineLayout(const PipelineLayout &) = delete;
  PipelineLayout &operator=(const PipelineLayout &) = delete;

  static bool isPipelined(const tessera_program &program) {
    return program.pipeline != nullptr;
  }
  /// Whether chunks on more than one device return parts of one gradient
  /// (a tied embedding's), which the driver adds once per step.
  static bool hasGradientParts(const tessera_program &program);

  const tessera_program &wholeProgram() const { return whole; }
  const tessera_pipeline &pipeline() const { return *whole.pipeline; }
  int32_t stages() const { return whole.pipeline->stages; }
  int32_t deviceOfChunk(int32_t chunk) const { return chunk % stages(); }
  /// The device that owns parameter `parameter`.
  int32_t ownerOf(int32_t parameter) const {
    return owners[static_cast<size_t>(parameter)];
  }
  /// The devices other than its owner that read `parameter`, ascending.
  const std::vector<int32_t> &otherReaders(int32_t parameter) const {
    return readers[static_cast<size_t>(parameter)];
  }
  /// The devices other than its owner whose chunks return a part of
  /// `parameter`'s gradient, ascending (the owner's chunk returns the
  /// first part; the owner adds the others' after the step's tasks).
  const std::vector<int32_t> &partHolders(int32_t parameter) const {
    return parts[static_cast<size_t>(parameter)];
  }
  /// Whether `device` holds `parameter` (owns or reads it).
  bool holds(int32_t device, int32_t parameter) const;

  /// Device `device`'s program: the whole one with every parameter it does
  /// not hold at shape [0] (valid while the layout lives).
  const tessera_program &deviceProgram(int32_t device) const {
    return devicePrograms[static_cast<size_t>(device)];
  }
  /// `state` (the whole program's) with what `device` does not hold
  /// dropped: its program's state.
  TrainingState takeHeld(const TrainingState &state, int32_t device) const;
  /// Per parameter: whether `device` owns it (what its norm counts).
  std::vector<bool> ownedBy(int32_t device) const;
  /// The whole tensors from the per-parameter values of each rank's
  /// program (each taken from its owner), on every rank. Collective over
  /// `comm` (the pipeline's ranks, in device order); `stream` is the comm's
  /// staging stream (nullptr on the host).
  std::vector<std::vector<float>>
  gatherFromOwners(const std::vector<std::vector<float>> &held,
                   tessera_comm *comm, int32_t device, void *stream) const;

private:
  tessera_program whole;
  std::vector<int32_t> owners;
  std::vector<std::vector<int32_t>> readers, parts;
  /// Per device: whether it reads each parameter.
  std::vector<std::vector<bool>> reads;
  std::vector<std::vector<tessera_tensor_info>> deviceParameters;
  std::vector<tessera_program> devicePrograms;
};

/// One rank's part of every step of a pipelined program, on its backend
/// (made for layout.deviceProgram(device)). Allocates its stash and
/// message buffers and restricts the backend's optimizer to the owned
/// parameters when made.
class PipelineStep {
public:
  /// `trace` gets a range per task and per group of sends and receives.
  /// Over a stage mesh, `meshAxes` are this rank's communicators of the
  /// program's mesh axes (the gradients pending over them are summed there),
  /// except `shardedAxis` (-1: none), the stage's dp axis under ZeRO-1, whose
  /// sum a DataParallelGradients reduce-scatters (the backend then holds
  /// the owned parameters' shard: see planStageZero).
  PipelineStep(const PipelineLayout &layout, int32_t device,
               TrainingBackend &backend, tessera_comm *comm, Trace &trace,
               const std::vector<tessera_comm *> &meshAxes = {},
               int32_t shardedAxis = -1);
  ~PipelineStep();
  PipelineStep(const PipelineStep &) = delete;
  PipelineStep &operator=(const PipelineStep &) = delete;

  /// Runs the device's tasks of step `step` on the micro-batches in the
  /// backend's slots 0..M-1 (seeds[k] is micro-batch k's dropout seed);
  /// returns the step's mean loss, agreed by every rank. Throws TrainError
  /// naming the step, the micro-batch and the stage function, or the peer.
  double run(int64_t step, float lossScale, const std::vector<uint64_t> &seeds);
  /// The sum of squares of every parameter's gradient, each counted by its
  /// owner, agreed by every rank.
  double gradientSumOfSquares();
  /// The same per parameter, from the sums the last gradientSumOfSquares
  /// added (of the whole program: the device programs keep its parameter
  /// order), on every rank.
  std::vector<double> parameterSumsOfSquares();
  /// The largest value of a host scalar over the pipeline's ranks (a
  /// failure flag every rank must see).
  double max(double value);
  /// After AdamW: the owners' updated parameters to their other readers.
  void afterOptimizer();
  /// After the tasks: each gradient part held by a device other than its
  /// parameter's owner goes to the owner, which adds it (f32).
  void sumGradientParts(int64_t step);
  /// Then, over a stage mesh: every owned gradient's f32 sum that is
  /// pending over a mesh axis (program.h's gradient_partial_axes: the
  /// data-parallel replicas' parts) all-reduced over that axis, once a step
  /// and before the norm.
  void sumOverMesh(int64_t step);

private:
  struct Chunk;
  struct StashPool;
  /// Receives task `index`'s inputs or sends its outputs (comm calls).
  void receiveInputs(int64_t step, int32_t index);
  void sendOutputs(int64_t step, int32_t index);
  void runTask(int64_t step, int32_t index, float lossScale,
               const std::vector<uint64_t> &seeds);
  Chunk &chunkOf(int32_t chunk);

  const PipelineLayout &layout;
  int32_t device;
  TrainingBackend &backend;
  tessera_comm *comm;
  Trace &trace;
  std::vector<tessera_comm *> meshAxes;
  int32_t shardedAxis;
  std::vector<std::unique_ptr<Chunk>> chunks;
  /// The stashes of saved values, one per distinct saved layout among the
  /// device's chunks (Chunk::stash).
  std::vector<std::unique_ptr<StashPool>> stashPools;
  std::vector<bool> owned;
  /// Per parameter, whether this step's gradient has its first
  /// contribution yet.
  std::vector<bool> contributed;
  /// The updated parameters this rank sends (or receives) after AdamW.
  struct Transfer {
    tessera_tensor master;
    int32_t peer;
    bool send;
    int32_t parameter;
  };
  std::vector<Transfer> transfers;
  /// Where an owner receives another device's part (f32), allocated once.
  float *partBuffer = nullptr;
  /// Per peer, the messages it sends this device in its order (forward,
  /// receiving chunk, micro-batch), and how many of them this step has
  /// received.
  std::vector<std::vector<tessera_pipeline_task>> incoming;
  std::vector<size_t> nextArrival;
  comm::ScalarAgreement agreement;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_PIPELINEPARALLEL_H
