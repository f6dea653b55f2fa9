//===- PipelineExplain.h - tesserac --explain for a pipeline plan -*- C++ -*-===//
//
// `tesserac MODEL --dim batch=B --dim seq=S --explain --pipeline [--stages N]
// [--microbatches M] [--schedule gpipe|1f1b|interleaved[:V]]
// [--remat none|selective|full|auto] [--pipeline-devices N]
// [--trace FILE.json] --cluster NAME|FILE`: plans data, tensor and pipeline
// parallelism, ZeRO-1, micro-batches, schedule and remat over the cluster's
// devices for the global batch B and prints the plan. The plan is the
// search phase's tess-search-pipeline decision (PipelinePlan.h), made with
// the options the compile makes it with for the same flags, on the forward
// at the global batch: what --explain prints is what --target compiles. The
// flags live in PipelineExplain.cpp; with --explain any of them asks for the
// plan. --remat also means the same choice for the step that --target and
// --emit=cpp build: tess-rematerialize applies it to every layer; and
// --stages, --microbatches and --schedule there build a pipelined program
// (stepPipeline). --pipeline (or --pipeline-devices) there compiles the
// search's plan instead (CompiledPipelinePlan.h).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_TOOLS_TESSERAC_PIPELINEEXPLAIN_H
#define TESSERA_TOOLS_TESSERAC_PIPELINEEXPLAIN_H

#include "tessera/CostModel/Cluster.h"
#include "tessera/Driver/CompilePhases.h"
#include "tessera/Import/ONNX/Importer.h"
#include "tessera/Pipeline/InterOpSearch.h"
#include "tessera/Pipeline/Remat.h"
#include "tessera/Transforms/PipelinePlan.h"
#include "tessera/Transforms/TrainingPlan.h"

#include "llvm/Support/CommandLine.h"

#include <optional>

namespace tessera::tesserac {

/// The --help category of the flags above, for tesserac's
/// cl::HideUnrelatedOptions.
llvm::cl::OptionCategory &pipelineOptionCategory();

/// Whether --remat was given.
bool rematRequested();

/// Whether a pipeline flag was given (--pipeline, --stages, --microbatches,
/// --schedule, --remat, --pipeline-devices, --trace): with --explain, each
/// asks for the pipeline plan.
bool pipelinePlanRequested();

/// --remat for the training step --target and --emit=cpp build: the mode
/// tess-rematerialize applies to every layer (None when the flag is absent).
/// Errors: "auto", which only --explain --pipeline's search resolves, or an
/// unknown mode.
llvm::Expected<pipeline::RematMode> stepRematMode();

/// --stages S [--microbatches M] [--schedule NAME] for the step --target
/// and --emit=cpp build: the program is cut into S stages (S x V chunks
/// for interleaved:V) that one rank each runs, M micro-batches per step.
struct StepPipeline {
  int64_t stages = 1, virtualStages = 1, microBatches = 1;
  std::string schedule; // scheduleTaskOrder's name: gpipe, 1f1b, interleaved:V
  /// The first and last unit of each chunk, as the searched plan places
  /// them (CompiledPipelinePlan.h); empty: tess-split-pipeline-stages'
  /// even split.
  std::vector<std::pair<int64_t, int64_t>> chunks;
  /// Per chunk of `chunks`, what its layers recompute where the searched
  /// plan's stages differ ("none", "selective", "full"; "": the plan's
  /// remat); empty: every chunk the plan's.
  std::vector<std::string> chunkRemats;
  /// ZeRO over each stage's data-parallel group: 1 when the searched plan
  /// shards the stages' optimizer state (the plan's zero, which the
  /// executable runs by default: runtime/train/StageZero.h), else 0.
  int64_t zero = 0;
};

/// An error when --trace was given: it writes --explain --pipeline's
/// predicted schedule, which no compile does.
llvm::Error refuseTraceInCompile();

/// std::nullopt without --stages. Otherwise the pipeline of the built step
/// given by hand (--microbatches defaults to the stage count, --schedule to
/// 1f1b); errors: --trace (refuseTraceInCompile), a non-positive count, an
/// unknown schedule, or a global batch `batch` that the micro-batches do
/// not divide. (With --pipeline the compile takes the search's plan instead:
/// tess-search-pipeline's.)
llvm::Expected<std::optional<StepPipeline>> stepPipeline(int64_t batch);

/// Whether --pipeline or --pipeline-devices asks for the search's plan:
/// with --target or --emit=cpp, that plan is compiled.
bool pipelineSearchRequested();

/// Whether --trace was given: it writes --explain --pipeline's predicted
/// schedule.
bool traceRequested();

/// The pipeline's shape pins, --stages, --microbatches and --schedule, as
/// the search phase's (tess-search-plan's stages, micro-batches and
/// schedule) in `phase`; errors: a non-positive count, an unknown schedule.
llvm::Error pinPipelineShape(CompilePhaseOptions &phase);

/// --stages' count, or 0 when not given.
int64_t pinnedStages();

/// Whether --remat auto was given: the search's choice, no pin.
bool rematAutoRequested();

/// What --pipeline's search takes from tesserac's own flags.
struct PipelineSearchPins {
  /// --zero 0|1: whether stages with replicas shard the optimizer state.
  std::optional<int> zero;
  /// --devices N: the devices the pipeline uses.
  std::optional<int64_t> devices;
  /// --mesh M: every stage's mesh (axes dp and tp), which pins the stages'
  /// tensor-parallel degree and their count (the devices / M's).
  std::string stageMesh;
  /// --explain --plan's pipelined plan as pins (PipelinePlan.h's
  /// pipelineSearchPins): every choice forced, so the search returns that plan.
  std::optional<pipeline::SearchOptions> plan;
};

/// The pipeline search's pins from the flags and `pins`, for the global
/// batch --dim binds in `options`, checked against `cluster`. Returns 0, or
/// 1 after printing "tesserac: error: ..." naming the flag.
int pipelineSearchOptions(const onnx_import::ImportOptions &options,
                          const cost::Cluster &cluster,
                          const PipelineSearchPins &pins,
                          pipeline::SearchOptions &search);

/// The plan and its compiled step's memory, as explainPipeline's report
/// opens, to `os`.
void printPipelineReport(llvm::StringRef title,
                         const PipelinePlanDecision &decision,
                         llvm::raw_ostream &os);

/// --explain --pipeline's report of `decision` (tess-search-pipeline's, for
/// the model `title`) to `outputPath` ("-": stdout): the plan
/// (PipelineReport.h), the compiled step's memory on one device, and
/// `compiledPlan`, the module's #tess.plan the decision wrote, which --target
/// compiles for the same flags ("Plan as compiled: ..."), or, null, why the
/// compiled driver cannot run the plan ("Not compiled: ..."); with --trace,
/// the plan's predicted schedule; with `choice`, the joint decision that
/// took the plan (TrainingPlan.h) before it. Returns 0, or 1 after printing
/// the error.
int explainPipeline(llvm::StringRef title,
                    const PipelinePlanDecision &decision,
                    tess::PlanAttr compiledPlan, llvm::StringRef outputPath,
                    const PlanChoice *choice = nullptr);

} // namespace tessera::tesserac

#endif // TESSERA_TOOLS_TESSERAC_PIPELINEEXPLAIN_H
