//===- PipelineExplain.cpp - the pipeline planner's flags and report ------===//

#include "PipelineExplain.h"

#include "tessera/CostModel/DeviceMesh.h"
#include "tessera/Pipeline/InterOpSearch.h"
#include "tessera/Pipeline/PipelineReport.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

namespace tessera::tesserac {

cl::OptionCategory &pipelineOptionCategory() {
  // Built on first use: the flags below register with it while this file's
  // statics are initialized, in an order relative to others C++ leaves open.
  static cl::OptionCategory category("tesserac pipeline planner options");
  return category;
}

namespace {

// The pipeline planner's flags, in their own --help category (documented
// in PipelineExplain.h and lib/Pipeline).
cl::opt<bool> pipeline("pipeline",
                       cl::desc("--explain: plan pipeline stages, DP x TP, "
                                "ZeRO-1, micro-batches, schedule and remat "
                                "over the cluster for the global --dim batch; "
                                "with --target or --emit=cpp, compile that "
                                "plan (--mesh pins the stage mesh, --devices "
                                "the devices, --zero 0|1 ZeRO-1)"),
                       cl::cat(pipelineOptionCategory()));
cl::opt<int64_t> stages("stages",
                        cl::desc("pipeline stages: forced for --pipeline's "
                                 "plan; with --target or --emit=cpp, the "
                                 "built step is cut into N stages, one rank "
                                 "each (with --mesh M --strategy S, each "
                                 "stage partitioned over M: M's ranks)"),
                        cl::value_desc("N"), cl::cat(pipelineOptionCategory()));
cl::opt<int64_t>
    microBatches("microbatches",
                 cl::desc("micro-batches per step: forced for --pipeline's "
                          "plan; with --stages, the built step's (default: "
                          "the stage count; each is --dim batch / M rows)"),
                 cl::value_desc("M"), cl::cat(pipelineOptionCategory()));
cl::opt<std::string>
    schedule("schedule",
             cl::desc("gpipe, 1f1b or interleaved[:V]: forced for "
                      "--pipeline's plan; with --stages, the built step's "
                      "(default 1f1b)"),
             cl::value_desc("NAME"), cl::cat(pipelineOptionCategory()));
cl::opt<std::string>
    remat("remat",
          cl::desc("none, selective or full: what each layer recomputes in "
                   "the backward, forced for --pipeline's plan and applied "
                   "to the step --target and --emit=cpp build; auto (the "
                   "--pipeline search chooses per stage) is the default"),
          cl::value_desc("MODE"), cl::cat(pipelineOptionCategory()));
cl::opt<int64_t> pipelineDevices(
    "pipeline-devices",
    cl::desc("--pipeline: plan for the first N devices of the cluster "
             "(default: all)"),
    cl::value_desc("N"), cl::cat(pipelineOptionCategory()));
cl::opt<std::string>
    tracePath("trace",
              cl::desc("--pipeline: write the predicted schedule of one step "
                       "as a Chrome/Perfetto trace"),
              cl::value_desc("FILE.json"), cl::cat(pipelineOptionCategory()));

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

int fail(const Twine &message) {
  WithColor::error(errs(), "tesserac") << message << "\n";
  return 1;
}

} // namespace

bool rematRequested() { return remat.getNumOccurrences() > 0; }

bool pipelinePlanRequested() {
  return pipeline || stages.getNumOccurrences() ||
         microBatches.getNumOccurrences() || schedule.getNumOccurrences() ||
         remat.getNumOccurrences() || pipelineDevices.getNumOccurrences() ||
         tracePath.getNumOccurrences();
}

Expected<pipeline::RematMode> stepRematMode() {
  if (!rematRequested())
    return pipeline::RematMode::None;
  if (std::optional<pipeline::RematMode> mode =
          pipeline::parseRematName(remat))
    return *mode;
  return createStringError(
      inconvertibleErrorCode(),
      "--remat " + remat + ": expected none, selective or full" +
          (remat == "auto" ? " (auto is --explain --pipeline's search)" : ""));
}

Error refuseTraceInCompile() {
  // The compile would otherwise ignore it: the schedule it predicts is
  // --explain's report.
  if (tracePath.getNumOccurrences())
    return createStringError(inconvertibleErrorCode(),
                             "--trace writes --explain --pipeline's "
                             "predicted schedule; drop it from the compile");
  return Error::success();
}

Expected<std::optional<StepPipeline>> stepPipeline(int64_t batch) {
  auto error = [](const Twine &message) {
    return createStringError(inconvertibleErrorCode(), message);
  };
  if (Error trace = refuseTraceInCompile())
    return std::move(trace);
  if (!stages.getNumOccurrences()) {
    if (microBatches.getNumOccurrences() || schedule.getNumOccurrences())
      return createStringError(inconvertibleErrorCode(),
                               "--microbatches and --schedule pipeline the "
                               "built step: add --stages N");
    return std::nullopt;
  }
  StepPipeline step;
  if (stages < 1)
    return error("--stages " + Twine(stages) + ": must be positive");
  step.stages = stages;
  step.microBatches = microBatches.getNumOccurrences() ? microBatches.getValue()
                                                       : step.stages;
  if (step.microBatches < 1)
    return error("--microbatches " + Twine(step.microBatches) +
                 ": must be positive");
  auto parsed = pipeline::parseSchedule(
      schedule.getNumOccurrences() ? StringRef(schedule) : "1f1b");
  if (!parsed)
    return parsed.takeError();
  step.schedule = parsed->name();
  if (parsed->kind == pipeline::ScheduleKind::Interleaved)
    step.virtualStages = parsed->virtualStages;
  if (batch % step.microBatches != 0)
    return error("--microbatches " + Twine(step.microBatches) +
                 " does not divide the batch " + Twine(batch) +
                 " (--dim batch is the step's global batch)");
  return step;
}

bool pipelineSearchRequested() {
  return pipeline || pipelineDevices.getNumOccurrences();
}

bool traceRequested() { return tracePath.getNumOccurrences() > 0; }

Error pinPipelineShape(CompilePhaseOptions &phase) {
  for (cl::opt<int64_t> *count : {&stages, &microBatches})
    if (count->getNumOccurrences() && *count < 1)
      return createStringError(inconvertibleErrorCode(),
                               "--" + count->ArgStr + " " +
                                   Twine(count->getValue()) +
                                   ": must be positive");
  if (stages.getNumOccurrences())
    phase.pipelineStages = stages.getValue();
  if (microBatches.getNumOccurrences())
    phase.pipelineMicroBatches = microBatches.getValue();
  if (schedule.getNumOccurrences()) {
    auto parsed = pipeline::parseSchedule(schedule);
    if (!parsed)
      return parsed.takeError();
    phase.pipelineSchedule = parsed->name();
  }
  return Error::success();
}

int64_t pinnedStages() {
  return stages.getNumOccurrences() ? stages.getValue() : 0;
}

bool rematAutoRequested() { return rematRequested() && remat == "auto"; }

int pipelineSearchOptions(const onnx_import::ImportOptions &options,
                          const cost::Cluster &cluster,
                          const PipelineSearchPins &pins,
                          pipeline::SearchOptions &search) {
  auto batch = options.dims.find("batch");
  if (batch == options.dims.end())
    return fail("--pipeline: bind the global batch with --dim batch=B (the "
                "samples of one step over all devices)");
  if (pins.plan) {
    // --explain --plan: the plan's own choices, all of them.
    search = *pins.plan;
    if (*search.devices > cluster.deviceCount())
      return fail(formatv("--plan: the plan runs on {0} devices; cluster "
                          "'{1}' has {2}",
                          *search.devices, cluster.name,
                          cluster.deviceCount()));
  }
  search.globalBatch = batch->second;
  if (stages.getNumOccurrences()) {
    if (stages < 1)
      return fail("--stages " + Twine(stages) + ": must be positive");
    search.stages = stages;
  }
  if (microBatches.getNumOccurrences()) {
    if (microBatches < 1)
      return fail("--microbatches " + Twine(microBatches) +
                  ": must be positive");
    search.microBatches = microBatches;
  }
  if (schedule.getNumOccurrences()) {
    auto parsed = pipeline::parseSchedule(schedule);
    if (!parsed)
      return fail(toString(parsed.takeError()));
    search.schedule = *parsed;
  }
  if (remat.getNumOccurrences() && remat != "auto") {
    std::optional<pipeline::RematMode> mode = pipeline::parseRematName(remat);
    if (!mode)
      return fail("--remat " + remat +
                  ": expected none, selective, full or auto");
    search.remat = *mode;
  }
  if (pins.zero) {
    if (*pins.zero < 0 || *pins.zero > 1)
      return fail("--zero " + Twine(*pins.zero) +
                  ": --pipeline's stage plans shard the optimizer state "
                  "over their data-parallel replicas (ZeRO-1) or not: give "
                  "--zero 0 or 1");
    search.zero = *pins.zero == 1;
  }
  if (pipelineDevices.getNumOccurrences() && pins.devices &&
      *pins.devices != pipelineDevices)
    return fail("--devices and --pipeline-devices give different device "
                "counts: give one");
  std::optional<int64_t> devices = pins.devices;
  if (pipelineDevices.getNumOccurrences())
    devices = pipelineDevices;
  if (devices) {
    if (*devices < 1 || *devices > cluster.deviceCount())
      return fail(formatv("--{0} {1}: cluster '{2}' has {3} devices",
                          pins.devices ? "devices" : "pipeline-devices",
                          *devices, cluster.name, cluster.deviceCount()));
    search.devices = *devices;
  }
  if (!pins.stageMesh.empty()) {
    auto mesh = cost::parseMesh(pins.stageMesh);
    if (!mesh)
      return fail(toString(mesh.takeError()));
    search.tensorParallel = 1;
    for (const cost::MeshAxis &axis : mesh->axes) {
      if (axis.name != "dp" && axis.name != "tp")
        return fail("--mesh " + pins.stageMesh + ": with --pipeline, the "
                    "stage mesh's axes are dp and tp (axis '" + axis.name +
                    "')");
      if (axis.name == "tp")
        search.tensorParallel = axis.size;
    }
    int64_t all = search.devices.value_or(cluster.deviceCount());
    int64_t perStage = mesh->deviceCount();
    if (all % perStage != 0 ||
        (search.stages && *search.stages * perStage != all))
      return fail(formatv("--mesh {0}: {1} devices are not {2}{3} of its "
                          "{4} devices",
                          pins.stageMesh, all,
                          search.stages ? "--stages " : "whole stages",
                          search.stages ? std::to_string(*search.stages)
                                        : std::string(),
                          perStage));
    search.stages = all / perStage;
  }
  return 0;
}

void printPipelineReport(StringRef title, const PipelinePlanDecision &decision,
                         raw_ostream &os) {
  const cost::Cluster &cluster = decision.cluster;
  pipeline::MegatronStageOracle oracle(decision.profile, cluster);
  pipeline::printPipelinePlan(decision.plan, decision.profile, cluster, oracle,
                              decision.search.globalBatch, title, os);
  if (decision.compiled)
    os << formatv("Peak device memory per GPU (the compiled step, as "
                  "--summary and --explain): {0:F3} MiB ({1:F2} GiB) of "
                  "{2:F1} GiB\n",
                  decision.compiled->totalBytes() / (1024.0 * 1024.0),
                  decision.compiled->totalBytes() / kGiB,
                  cluster.device.memoryBytes / kGiB);
  if (!decision.compiledDevices.empty()) {
    pipeline::printPipelineMemory(decision.compiledDevices, os,
                                  cluster.device.memoryBytes);
    pipeline::printStageModelMemory(decision.plan, decision.compiledDevices,
                                    os);
  }
}

int explainPipeline(StringRef title, const PipelinePlanDecision &decision,
                    tess::PlanAttr compiledPlan, StringRef outputPath,
                    const PlanChoice *choice) {
  std::string error;
  auto output = mlir::openOutputFile(outputPath, &error);
  if (!output)
    return fail(error);
  printPipelineReport(title, decision, output->os());
  if (choice)
    choice->print(output->os());
  // What --target and --emit=cpp compile for the same flags, or why they
  // refuse it.
  if (compiledPlan)
    output->os() << "Plan as compiled: " << mlir::Attribute(compiledPlan)
                 << "\n";
  else
    output->os() << "Not compiled: " << decision.notCompiled << "\n";
  output->keep();

  if (!tracePath.empty()) {
    auto slices = pipeline::simulateSchedule(decision.plan);
    if (!slices)
      return fail(toString(slices.takeError()));
    auto trace = mlir::openOutputFile(tracePath, &error);
    if (!trace)
      return fail(error);
    pipeline::writeChromeTrace(decision.plan, *slices, trace->os());
    trace->keep();
  }
  return 0;
}

} // namespace tessera::tesserac
