//===- TrainingStepEstimate.h - predicted time of one training step -*- C++ -*-===//
//
// Puts the pieces together for a module built by `tess-build-training`: the
// roofline time of every op of @forward_backward and @optimizer_step on one
// device of the cluster, summed by kind (one stream, no overlap between
// kernels), the FLOPs, and from them tokens/s and MFU; beside them the
// memory of the step as it is compiled (tessera/Analysis/StepMemory.h), which
// the caller analyses on the program the lowering gets.
//
// There is no sharding plan yet (the search of issue 5 will make one), so a
// mesh of more than one device is priced as pure data parallelism over all
// its axes: every device runs the given per-device program on its share of
// the batch, and the gradients are all-reduced over the whole mesh
// (one NCCL all-reduce over all of them, meshAllReduceTime) after the
// backward, without overlap.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_COSTMODEL_TRAININGSTEPESTIMATE_H
#define TESSERA_COSTMODEL_TRAININGSTEPESTIMATE_H

#include "tessera/Analysis/StepMemory.h"
#include "tessera/CostModel/Cluster.h"
#include "tessera/CostModel/DeviceMesh.h"
#include "tessera/CostModel/OpCost.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <array>
#include <string>
#include <vector>

namespace tessera::cost {

struct TrainingStepEstimate {
  std::string clusterName;
  DeviceModel device;
  DeviceMesh mesh;
  /// The compute precision (@forward_backward's `tess.precision`).
  Precision precision = Precision::FP32;

  /// Tokens one device processes per step (the per-device program's batch
  /// times sequence) and the whole mesh processes.
  int64_t tokensPerDevice = 0;
  int64_t tokensPerStep = 0;

  /// Per device, by OpKind: roofline seconds, executed FLOPs, and ops.
  std::array<double, kOpKindCount> secondsByKind{};
  std::array<double, kOpKindCount> flopsByKind{};
  std::array<int64_t, kOpKindCount> opsByKind{};
  /// Per device: executed FLOPs and model FLOPs (no recomputation).
  double flops = 0;
  double modelFlops = 0;

  /// Data parallelism: bytes of gradients all-reduced per step and its time.
  double gradientBytes = 0;
  double gradientAllReduceSeconds = 0;

  /// The compiled step's memory on one device, and the limit it is held
  /// to (--memory-limit, else the device's memory).
  StepMemory memory;
  double memoryLimitBytes = 0;
  /// The recomputation that makes the step fit (none, selective, full).
  std::string remat = "none";
  /// The plan offloads the optimizer state to the host (nothing else fit):
  /// the fit is the offloaded footprint's, the optimizer's time the host's.
  bool offloadOptimizer = false;
  /// Names of tess ops the cost table does not know (priced as copies).
  std::vector<std::string> unmodelledOps;

  double computeSeconds() const;
  double stepSeconds() const {
    return computeSeconds() + gradientAllReduceSeconds;
  }
  double tokensPerSecond() const { return tokensPerStep / stepSeconds(); }
  /// Model FLOPs per second per device over the device's peak rate in the
  /// compute precision.
  double modelFlopsUtilization() const;
};

/// Estimates the time of `module` (the per-device program: @forward_backward
/// and @optimizer_step) on `mesh`, which must already be placed on
/// `cluster`; `memory` is the same step's as compiled (see above).
llvm::Expected<TrainingStepEstimate>
estimateTrainingStep(mlir::ModuleOp module, const StepMemory &memory,
                     const Cluster &cluster, const DeviceMesh &mesh);

/// The report `tesserac --explain` prints (TrainingStepReport.cpp): the cluster and mesh, memory per
/// device by category (with the limit), time by op kind, FLOPs, predicted
/// tokens/s and MFU.
void printTrainingStepEstimate(const TrainingStepEstimate &estimate,
                               llvm::StringRef title, llvm::raw_ostream &os);

} // namespace tessera::cost

#endif // TESSERA_COSTMODEL_TRAININGSTEPESTIMATE_H
