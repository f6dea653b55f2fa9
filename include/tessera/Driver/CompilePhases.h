//===- CompilePhases.h - the compile pipeline as named phases --*- C++ -*-===//
//
// What tesserac runs between the ONNX file and the C++ of the training
// program, as an ordered list of named phases, each a pass pipeline built
// from one options struct (as IREE names its phases and stops after any with
// --compile-to). tesserac turns its flags into CompilePhaseOptions and runs
// the phases in order (`tesserac --compile-to=PHASE` prints the module after
// PHASE); tessera-opt registers every phase but the import as
// `--tess-phase-<name>` with the same options, so that any step of a compile
// can be rerun, and inspected, on the previous phase's IR.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_DRIVER_COMPILEPHASES_H
#define TESSERA_DRIVER_COMPILEPHASES_H

#include "tessera/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace tessera {

/// The phases in the order a compile runs them.
enum class CompilePhase {
  /// The importer's graph: one tess op per ONNX node (no pass; tesserac's
  /// --emit=tess-import).
  Import,
  /// Canonicalization and the fusions into Transformer-level ops
  /// (tesserac's --emit=mlir).
  Fusion,
  /// The recomputation and offload that fit (tess-fit-memory, the
  /// module's #tess.plan), then the sharding search on the forward, its
  /// plan written on the forward's ops (tess-search-sharding: on a mesh
  /// checked against the rank's compiled program, with `devices` the mesh
  /// chosen), which the training step inherits; or, for a pipeline, the
  /// pipeline search (tess-search-pipeline), its plan the module's
  /// #tess.plan; or, over N devices, its pins constraints on the decision, both weighed as
  /// one decision (tess-search-plan), the winner's written.
  Search,
  /// The training step: q/k/v packed on one device, tess-build-training,
  /// canonicalize, CSE.
  Training,
  /// The module's #tess.plan, which every later phase reads.
  Plan,
  /// The plan's recomputation (tess-rematerialize).
  Remat,
  /// A forced plan's layouts on the step (tess-annotate-sharding), or a
  /// searched one's from the plan the step's ops carry from the search
  /// phase (tess-annotate-from-plan).
  Shard,
  /// The program one rank of the mesh runs (tess-partition-spmd).
  Partition,
  /// The pipeline stages (tess-split-pipeline-stages).
  Stages,
  /// The lowering preparation (tess-lowering-preparation).
  Preparation,
  /// The step as EmitC over the runtime's kernels (tess-lower-to-emitc).
  EmitC,
};

/// A phase's name (its --compile-to value, tessera-opt's
/// --tess-phase-<name>) and what it does.
struct CompilePhaseInfo {
  CompilePhase phase;
  llvm::StringRef name;
  llvm::StringRef summary;
};

/// Every phase, in order.
llvm::ArrayRef<CompilePhaseInfo> compilePhases();

/// The phase called `name`, or nullopt.
std::optional<CompilePhase> parseCompilePhase(llvm::StringRef name);

/// The name of `phase`.
llvm::StringRef compilePhaseName(CompilePhase phase);

/// "import, fusion, ..., emitc": the valid names, for messages.
std::string compilePhaseNames();

/// Everything the phases are built from. A phase reads only its own
/// options; a phase whose options ask for nothing adds no pass (a one-device
/// compile has no Shard, Partition or Stages work).
struct CompilePhaseOptions
    : mlir::PassPipelineOptions<CompilePhaseOptions> {
  // Search (the mesh is the shard phase's `mesh`; the step's options are
  // the training and preparation phases').
  Option<bool> search{
      *this, "search",
      llvm::cl::desc("Fit the step's memory and search the sharding plan of "
                     "`mesh` on the forward"),
      llvm::cl::init(false)};
  Option<std::string> cluster{
      *this, "cluster",
      llvm::cl::desc("The search's cluster: a built-in name or a cluster "
                     "JSON file"),
      llvm::cl::init("h200")};
  Option<int64_t> devices{
      *this, "devices",
      llvm::cl::desc("Choose the search's mesh of N devices, dp x tp "
                     "(tess-search-sharding's devices; 0: `mesh`)"),
      llvm::cl::init(0)};
  Option<int64_t> memoryLimit{
      *this, "memory-limit",
      llvm::cl::desc("Bytes per device the searched plan must fit (0: the "
                     "cluster's device memory)"),
      llvm::cl::init(0)};
  Option<int> zero{*this, "zero",
                   llvm::cl::desc("Pin every parameter's ZeRO stage (-1: "
                                  "searched)"),
                   llvm::cl::init(-1)};
  ListOption<std::string> shard{
      *this, "shard", llvm::cl::desc("REGEX=SPEC pins on the search")};
  Option<std::string> rematPin{
      *this, "remat-pin",
      llvm::cl::desc("The search's pinned recomputation, none, selective or "
                     "full (tess-fit-memory's remat; empty: the least that "
                     "fits)"),
      llvm::cl::init("")};
  Option<std::string> offloadPin{
      *this, "offload-pin",
      llvm::cl::desc("The search's pinned optimizer offload, optimizer or "
                     "none (tess-fit-memory's offload; empty: only when "
                     "nothing else fits)"),
      llvm::cl::init("")};
  Option<double> searchTimeout{
      *this, "search-timeout",
      llvm::cl::desc("Seconds CBC may spend on the search's ILP"),
      llvm::cl::init(10)};
  Option<bool> searchPlan{
      *this, "search-plan",
      llvm::cl::desc("Weigh the mesh plan of `devices` against the pipeline "
                     "search's plan and write the winner (tess-search-plan, "
                     "with `cluster`, `memory-limit`, `zero`, "
                     "`remat-pin`, `search-timeout` and the pipeline-stages, "
                     "-micro-batches and -schedule pins)"),
      llvm::cl::init(false)};
  Option<bool> searchPipeline{
      *this, "search-pipeline",
      llvm::cl::desc("Search the pipeline plan of the forward at its global "
                     "batch instead (tess-search-pipeline, with `cluster`, "
                     "`memory-limit`, `zero`, `remat-pin` and the "
                     "pipeline-* pins)"),
      llvm::cl::init(false)};
  Option<int64_t> pipelineDevices{
      *this, "pipeline-devices",
      llvm::cl::desc("The devices the pipeline uses (0: the cluster's)"),
      llvm::cl::init(0)};
  Option<int64_t> pipelineStages{
      *this, "pipeline-stages",
      llvm::cl::desc("Pin the pipeline's stages (0: searched)"),
      llvm::cl::init(0)};
  Option<int64_t> pipelineMicroBatches{
      *this, "pipeline-micro-batches",
      llvm::cl::desc("Pin the pipeline's micro-batches (0: searched)"),
      llvm::cl::init(0)};
  Option<std::string> pipelineSchedule{
      *this, "pipeline-schedule",
      llvm::cl::desc("Pin the pipeline's schedule (empty: searched)"),
      llvm::cl::init("")};
  Option<int64_t> pipelineTensorParallel{
      *this, "pipeline-tensor-parallel",
      llvm::cl::desc("Pin the stages' tensor-parallel degree (0: searched)"),
      llvm::cl::init(0)};
  ListOption<int64_t> pipelineStageUnits{
      *this, "pipeline-stage-units",
      llvm::cl::desc("Pin the stage boundaries: each stage's unit count, "
                     "first to last (with pipeline-stages)")};
  Option<std::string> calibration{
      *this, "calibration",
      llvm::cl::desc("The compiled step's numbers the search is scaled to "
                     "(tess-search-sharding's calibration; empty: measured "
                     "from the module)"),
      llvm::cl::init("")};
  // Training.
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("causal-lm or mlm"),
                           llvm::cl::init("causal-lm")};
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("fp32, bf16 or fp16"),
                                llvm::cl::init("fp32")};
  Option<int64_t> vocabularyMultiple{
      *this, "vocabulary-multiple",
      llvm::cl::desc("Pad the head's classes to a multiple of N"),
      llvm::cl::init(64)};
  Option<bool> packQkv{
      *this, "pack-qkv",
      llvm::cl::desc("One GEMM for each attention's q/k/v projections (one "
                     "device: the sharding search plans them apart)"),
      llvm::cl::init(true)};
  Option<bool> packGateUp{
      *this, "pack-gate-up",
      llvm::cl::desc("One GEMM for each SwiGLU's gate/up projections (one "
                     "device; off until timed on a GPU)"),
      llvm::cl::init(false)};
  // Plan.
  Option<std::string> plan{
      *this, "plan",
      llvm::cl::desc("The module's #tess.plan as text (default: one device, "
                     "nothing recomputed)"),
      llvm::cl::init("")};
  // Remat (a module with a plan takes the plan's mode).
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("none, selective or full, for a module without a plan"),
      llvm::cl::init("none")};
  // Shard.
  Option<std::string> mesh{*this, "mesh",
                           llvm::cl::desc("The mesh of the search or of a "
                                          "forced plan: 2x2, 4 or dp=2,tp=2"),
                           llvm::cl::init("")};
  ListOption<std::string> axes{
      *this, "axes", llvm::cl::desc("The mesh's axis names, outermost first")};
  Option<std::string> strategy{
      *this, "strategy",
      llvm::cl::desc("A forced plan: dp, tp or dp-tp (empty: none)"),
      llvm::cl::init("")};
  Option<bool> searchedLayouts{
      *this, "searched-layouts",
      llvm::cl::desc("Write the searched plan the step's ops carry as "
                     "layouts (tess-annotate-from-plan)"),
      llvm::cl::init(false)};
  Option<bool> planRemarks{
      *this, "plan-remarks",
      llvm::cl::desc("With searched-layouts: a remark for each place the "
                     "partitioner departs from the plan"),
      llvm::cl::init(true)};
  Option<bool> deferGradientReduction{
      *this, "defer-gradient-reduction",
      llvm::cl::desc("Leave gradients as partial sums over dp (a "
                     "pipeline's stage mesh)"),
      llvm::cl::init(false)};
  // Partition.
  Option<bool> partition{
      *this, "partition",
      llvm::cl::desc("Rewrite the annotated step into one rank's program"),
      llvm::cl::init(false)};
  // Stages.
  Option<int64_t> stages{
      *this, "stages",
      llvm::cl::desc("Pipeline stages to cut the step into (0: not "
                     "pipelined; 1: one stage, still run by a schedule)"),
      llvm::cl::init(0)};
  Option<int64_t> virtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("Chunks per device (interleaved:V)"), llvm::cl::init(1)};
  // Preparation.
  Option<int64_t> logitsBlockBytes{
      *this, "logits-block-bytes",
      llvm::cl::desc("The most bytes one block of the head's logits may "
                     "take (0: never split)"),
      llvm::cl::init(int64_t(1) << 30)};
  // EmitC.
  Option<std::string> modelName{
      *this, "model-name",
      llvm::cl::desc("The model the program was compiled from"),
      llvm::cl::init("")};
  Option<std::string> weightsFile{
      *this, "weights-file",
      llvm::cl::desc("The initial weights the executable reads by default"),
      llvm::cl::init("")};
  Option<std::string> target{*this, "target",
                             llvm::cl::desc("cpu or cuda kernels"),
                             llvm::cl::init("cpu")};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("A pipelined module's schedule: gpipe, 1f1b or "
                     "interleaved:V"),
      llvm::cl::init("1f1b")};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("A pipelined module's micro-batches per step"),
      llvm::cl::init(1)};
};

/// The search phase's passes' options in `options`: tess-fit-memory's
/// (the step's memory fit) and tess-search-sharding's.
FitMemoryOptions fitMemoryOptions(const CompilePhaseOptions &options);
SearchShardingOptions searchShardingOptions(const CompilePhaseOptions &options);
/// Under `search-pipeline`, the search phase's one pass's options:
/// tess-search-pipeline's.
SearchPipelineOptions
searchPipelineOptions(const CompilePhaseOptions &options);
/// Under `search-plan`, the search phase's one pass's options:
/// tess-search-plan's.
SearchPlanOptions searchPlanOptions(const CompilePhaseOptions &options);

/// Adds the passes of `phase` to `pm` (a module pass manager).
void buildCompilePhase(mlir::OpPassManager &pm, CompilePhase phase,
                       const CompilePhaseOptions &options);

/// Registers `tess-phase-<name>` for every phase but the import, with
/// CompilePhaseOptions.
void registerCompilePhasePipelines();

} // namespace tessera

#endif // TESSERA_DRIVER_COMPILEPHASES_H
