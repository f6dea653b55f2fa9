//===- PipelineExecutor.h - one rank of a pipelined training step -*- C++ -*-===//
//
// Runs the stage functions of tess-split-pipeline-stages as one device of a
// pipeline: the device's forward and backward tasks in the order of a
// schedule (lib/Pipeline's scheduleTaskOrder: GPipe, 1F1B, interleaved
// 1F1B), each on the interpreter, sending activations to the next stage
// and activation gradients to the previous one with the point-to-point
// calls of comm.h (tessera_comm_send/recv, matched in order per pair of
// ranks). With the in-process backend a send never waits (mailboxes), so a
// device only ever waits in a receive for a message its peer sends after
// tasks that themselves only wait for earlier messages: the schedules'
// orders are deadlock-free. Messages from one peer arrive in that peer's
// task order, which on an interleaved schedule differs from the order this
// device needs them in; the executor knows every device's order, so it
// receives them as they come and keeps the early ones until their task.
//
// The loss and the gradients: every micro-batch's backward gets
// `loss_scale` = 1 / (micro-batches x data-parallel replicas), so the
// parameter gradients summed over micro-batches (and all-reduced over the
// data-parallel group) are those of the mean over the global batch, given
// micro-batches with equal counts of counted targets; the loss, the sum of
// the micro-batch losses times the same factor, is all-reduced over the
// pipeline (and data-parallel) group so every rank reports it.
//
// The optimizer (optional): once the gradients are complete, every device
// has the global gradient norm (its gradients' squares all-reduced over
// the pipeline group, and first over the tensor-parallel axes that split
// them; the data-parallel replicas hold the same sums), so
// clipping agrees across stages. Each device then runs one AdamW step on
// the parameters whose gradients its stages return, with the
// hyperparameters of the module's @optimizer_step, and sends each updated
// parameter to the other devices whose stages read it (a tied embedding's
// head stage), in one order every device follows (sorted by name, then by
// receiving device).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_EXECUTION_PIPELINEEXECUTOR_H
#define TESSERA_EXECUTION_PIPELINEEXECUTOR_H

#include "tessera/Execution/HostTensorBuffer.h"
#include "tessera/Execution/Interpreter.h"
#include "tessera/Pipeline/Schedule.h"
#include "tessera/runtime/comm.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace tessera::execution {

/// One AdamW step after the forward and backward (see the file comment).
struct PipelineOptimizerStep {
  double learningRate = 0;
  /// The step number AdamW's bias correction uses (1 for the first).
  int64_t step = 1;
  /// Clip the global gradient norm to this; 0 turns clipping off.
  double gradientClip = 0;
  /// The moments before this step, by parameter name; null: zero (the
  /// first step).
  const std::map<std::string, HostTensorBuffer> *firstMoments = nullptr;
  const std::map<std::string, HostTensorBuffer> *secondMoments = nullptr;
};

struct PipelineRankOptions {
  pipeline::Schedule schedule;
  /// Micro-batches this device runs (per data-parallel replica).
  int64_t microBatches = 1;
  /// The pipeline's group: one rank per stage device, in stage order.
  tessera_comm *pipelineComm = nullptr;
  /// The data-parallel group of this stage device, or none.
  tessera_comm *dataParallelComm = nullptr;
  /// Runs the optimizer after the backward when set.
  std::optional<PipelineOptimizerStep> optimizer;
  /// When the step was partitioned (tess-partition-spmd, e.g. tensor
  /// parallel) before it was split into stages: this rank of the module's
  /// tess.mesh, for the stage functions' collectives. Parameters,
  /// gradients and the updated parameters are then this rank's blocks (in
  /// the layouts @forward_backward records), and a gradient's squares are
  /// summed over the axes that split it for the global norm.
  std::optional<MeshRank> meshRank;
};

/// A parameter or buffer by its `tess.parameter` / `tess.buffer` name.
using PipelineParameters =
    std::function<llvm::Expected<HostTensorBuffer>(llvm::StringRef name)>;
/// A `tess.input` (input_ids, targets) of one micro-batch of this replica.
using PipelineInputs = std::function<llvm::Expected<HostTensorBuffer>(
    llvm::StringRef name, int64_t microBatch)>;

struct PipelineRankResult {
  /// The global batch's mean loss, agreed by every rank.
  double loss = 0;
  /// The gradients this device's stages compute, accumulated in f32 over
  /// the micro-batches (and summed over the data-parallel group), by
  /// parameter name.
  std::map<std::string, HostTensorBuffer> gradients;
  /// The most (stage, micro-batch) forwards whose saved values this device
  /// held at once: the schedule's activation memory, in chunks.
  int64_t peakInFlightChunks = 0;
  /// The L2 norm over every stage's gradients, agreed by every rank.
  double gradientNorm = 0;
  /// With the optimizer: the updated value of every trainable parameter
  /// this device's stages read or update, and the moments of those it
  /// updates, by name.
  std::map<std::string, HostTensorBuffer> parameters, firstMoments,
      secondMoments;
};

/// Runs one training step's forward and backward (and, with
/// `options.optimizer`, the AdamW step) as the device of rank
/// `pipelineComm` in a module split by tess-split-pipeline-stages. Errors:
/// the module is not split, its stage count or virtual stages disagree with
/// the group or the schedule, an input is missing, a parameter to update
/// has no tess.adamw in @optimizer_step, an op or a communication fails (a
/// failing peer fails this rank too).
llvm::Expected<PipelineRankResult>
runPipelineRank(mlir::ModuleOp module, const PipelineRankOptions &options,
                const PipelineParameters &parameters,
                const PipelineInputs &inputs);

} // namespace tessera::execution

#endif // TESSERA_EXECUTION_PIPELINEEXECUTOR_H
