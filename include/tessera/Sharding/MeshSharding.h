//===- MeshSharding.h - the training plan on a whole mesh ------*- C++ -*-===//
//
// The search `tesserac --explain` runs: Alpa's intra-op ILP over every axis
// of the mesh at once, with the per-device memory bound, ZeRO stages per
// parameter and repeated layers solved once.
//
// Strategies over axes: an op's strategy on a mesh is one 1-D strategy per
// axis (ShardingStrategy.h), combined when their layouts do not split one
// dim over two axes (as Alpa enumerates 2-D strategies). Its work is divided
// by the product of the axes that divide it; its activation gradients are
// all-reduced over each axis where it reads them whole.
//
// Parameters are nodes too: a strategy per layout some consumer needs the
// weight in, times a ZeRO stage 0-3 over the axes the layout leaves it
// replicated on. The stage sets the parameter's memory (fp32 master, compute
// copy, gradient, AdamW moments; Analysis/StepMemory.h's bytes), its optimizer
// time (on the local shard) and its collectives: the gradient's way back on
// the parameter's edges (ShardingProblem.h; an all-reduce, or with ZeRO a
// reduce-scatter), the all-gather of the updated weight for stages 1-2, the
// forward and backward all-gathers for stage 3.
//
// Memory (Alpa's constraint): per device, parameter state plus activations,
// the latter as the op results' local bytes times `activationScale`, which
// calibrates the sum to the liveness peak of the unsharded training step
// (Analysis/StepMemory.h), plus `fixedMemoryBytes` (buffers), must fit
// `memoryLimitBytes`.
//
// Repeated layers (LayerRepetition.h): every instance of a run takes its
// first instance's strategies, so the problem holds one instance whose
// nodes and edges count once per layer; an edge between consecutive layers
// becomes an edge of the instance to itself counted (layers - 1) times.
// Exact under that constraint, and the problem's size is independent of
// depth.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_SHARDING_MESHSHARDING_H
#define TESSERA_SHARDING_MESHSHARDING_H

#include "tessera/CostModel/GroupCollective.h"
#include "tessera/Sharding/LayerRepetition.h"
#include "tessera/Sharding/ShardingProblem.h"
#include "tessera/Sharding/TrainingShardingPlan.h"

#include "llvm/Support/Regex.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tessera::sharding {

/// `--shard REGEX=SPEC`: the parameters whose name REGEX matches (anywhere
/// in the name) and the ops reading them are held to SPEC, a comma list of:
///   tp-column    the reading linear/matmul ops are column-parallel on some
///                axis (Megatron's first MLP/QKV layer)
///   tp-row       ... row-parallel on some axis
///   dp           ... divide their work on some axis while the parameters
///                stay whole (data parallelism), and neither of the above
///   replicated   ... replicated on every axis
///   zero=N       the parameters' ZeRO stage is N (0-3)
///   [A, B]       the parameters' layout (TensorLayout.h's text form)
struct ShardPin {
  std::string text;
  std::shared_ptr<llvm::Regex> pattern;
  // tp-column, tp-row, vocabulary-parallel, dp, replicated
  std::optional<std::string> opKind;
  std::optional<int> zeroStage;
  std::optional<TensorLayout> layout;
};

/// Parses one `--shard` value against `mesh`. Errors name the bad part.
llvm::Expected<ShardPin> parseShardPin(llvm::StringRef text,
                                       const cost::DeviceMesh &mesh);

struct MeshSearchOptions {
  /// Price forward plus backward and the optimizer (the default), or the
  /// forward alone.
  bool training = true;
  /// Unsharded forward+backward seconds on one device of the training step
  /// (TrainingStepEstimate) and the bytes of its compiled peak
  /// (Analysis/StepMemory.h) beyond the parameters' state and the fixed
  /// bytes: the ops' times and activation bytes are scaled so that the
  /// replicated plan predicts them exactly. 0: no scaling.
  double trainingComputeSeconds = 0;
  double activationPeakBytes = 0;
  /// Of activationPeakBytes, what the forward keeps for the backward
  /// (StepMemory::savedForBackwardBytes): the ops' activation bytes scale to
  /// it, and the rest of the peak, the temporaries live on top of it, is
  /// priced apart (PlanPrediction::transientBytes). 0: the whole peak
  /// scales.
  double activationSavedBytes = 0;
  /// The lowering's largest block of logits (--logits-block; 0: none): the
  /// head's logits live at the peak are at most this.
  double logitsBlockBytes = 0;
  /// Seconds of AdamW per parameter element (0: not priced).
  double optimizerSecondsPerElement = 0;
  /// Bytes per parameter element of the compute copy (0 in fp32, where the
  /// master is used) and of the gradient.
  double computeWeightBytes = 2;
  double gradientBytes = 2;
  /// Per device memory the plan must fit, and memory outside it (inputs).
  std::optional<double> memoryLimitBytes;
  double fixedMemoryBytes = 0;
  /// `--zero N`: every trainable parameter at this stage.
  std::optional<int> zeroStage;
  std::vector<ShardPin> pins;
  /// Training: the function's results are the logits a token-wise loss
  /// reads, so they may stay sharded (ShardingProblem.h); otherwise they
  /// leave replicated.
  bool lossReadsResults = true;
  /// Bucket size of the coalesced gradient and ZeRO collectives (PyTorch
  /// DDP's default), capped at the whole model's gradient.
  double gradientBucketBytes = cost::kGradientBucketBytes;
  /// Solve repeated layers once.
  bool reuseLayers = true;
  /// CBC's time limit; the greedy plan answers beyond it.
  double timeLimitSeconds = 10;
};

/// The reduced problem: one node per op outside repeated layers and per op
/// of each run's first instance.
struct MeshShardingProblem {
  ShardingProblem problem;
  LayerStructure layers;
  /// Every op of the function (but the terminator) to its node.
  llvm::DenseMap<mlir::Operation *, unsigned> nodeOf;
  /// Per node: its op's layer ("" outside layers) and, for a parameter, its
  /// name; for the report.
  std::vector<std::string> layerOfNode;
  size_t functionOps = 0;
  /// The replicated plan's activation bytes (unscaled) and the one-device
  /// step's temporaries beyond what it keeps (activationPeakBytes less
  /// activationSavedBytes): a plan's share of those is the share of the
  /// activations it holds.
  double replicatedActivations = 0;
  double layerTransientBytes = 0;
};

/// Builds the problem. Errors: a function the search cannot handle, a pin
/// that matches no parameter or leaves an op no strategy.
llvm::Expected<MeshShardingProblem>
buildMeshShardingProblem(mlir::func::FuncOp function,
                         const cost::DeviceMesh &mesh,
                         const cost::Cluster &cluster,
                         const MeshSearchOptions &options);

/// Whether the compiled driver can shard ZeRO-1/2 optimizer state over the
/// mesh axes `axes`: it has a communicator for one axis or for the whole
/// mesh (runtime/train/MeshZero.cpp). The search and tesserac's refusal of
/// a pinned plan both apply it.
bool driverHasZeroGroup(llvm::ArrayRef<unsigned> axes,
                        const cost::DeviceMesh &mesh);

/// Builds, solves (ILP with CBC, greedy fallback) and expands the plan to
/// every op. Its ZeRO-1/2 parameters share one group of axes the driver
/// shards over (one axis or the whole mesh) unless pins leave no such plan
/// (README.md, "One ZeRO group"). Errors as above, and when no plan fits the memory bound: the
/// error gives the least memory any plan needs.
llvm::Expected<TrainingShardingPlan>
searchTrainingSharding(mlir::func::FuncOp function,
                       const cost::DeviceMesh &mesh,
                       const cost::Cluster &cluster,
                       const MeshSearchOptions &options);

/// Gives every f32 tensor value of `function` (a copy used for planning
/// only) the element type `computeType`, so that the search prices a mixed
/// precision step's kernels and collectives at the compute precision. The
/// function is not verified afterwards and must not be run.
void setPlanningPrecision(mlir::func::FuncOp function, mlir::Type computeType);

/// Writes the plan as `tesserac --explain` prints it: per layer (a run of
/// identical layers once, with its count) each op's strategy and each
/// parameter's layout and ZeRO stage, then memory per device by category,
/// time per step by part and communication volume.
void printTrainingShardingPlan(const TrainingShardingPlan &plan,
                               const cost::Cluster &cluster,
                               llvm::raw_ostream &os);

} // namespace tessera::sharding

#endif // TESSERA_SHARDING_MESHSHARDING_H
