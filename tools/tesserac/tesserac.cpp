//===- tesserac.cpp - the Tessera compiler driver ------------------------===//
//
//   tesserac MODEL.onnx [--dim NAME=N]... [--freeze RE] [--train RE]
//            [--emit=tess-import|mlir|cpp] [--summary] [-o FILE]
//            [--target cpu|cuda --loss causal-lm|mlm --precision fp32|bf16|fp16
//             [--cxx CXX] [--runtime-dir DIR] -o train]
//            [--explain [--loss ...] [--precision ...]
//             [--mesh 2x4|dp=2,tp=4] [--devices N]
//             [--cluster h200|h200-multinode|a100-megatron|FILE.json]
//             [--plan '#tess.plan<...>'|EXECUTABLE]]
//            [--partition --mesh SHAPE --emit=mlir [--strategy dp|tp|dp-tp]]
//            [--target cpu --mesh SHAPE [--strategy dp|tp|dp-tp] -o train]
//
// Stages, like toyc's -emit: `tess-import` is the graph as the importer
// wrote it (one op per ONNX node, shapes folded); `mlir` is the forward
// function after canonicalization and fusion, the input of every later pass;
// `cpp` is the training program lowered to C++ (tess-build-training,
// tess-lower-to-emitc, EmitC's C++ emitter). `--target cpu -o train` goes
// one stage further: it writes the initial weights as
// train.weights.safetensors and compiles and links the C++ with the runtime
// into the training executable `train`; `--target cuda` does the same with
// the CUDA kernels and the driver's GPU backend (the step, the optimizer and
// the training state on the GPU), when this tesserac was built with the CUDA
// runtime. `--explain` builds the training
// step and prints lib/CostModel's prediction of its time and the memory of
// the step as compiled (lib/Analysis/StepMemory.h, as --summary prints it),
// which decides whether the plan fits, and ends with that plan as the
// module's #tess.plan. `--target` and `--emit=cpp` given --cluster, the
// search's flags, --devices N (the mesh of N devices whose plan fits and is
// fastest) or a --mesh without --strategy make the same decision (the
// search phase, runSearchPhase) and compile its plan, which the executable
// carries and prints at start; `--explain --plan TEXT|FILE` predicts the
// step of such a plan (its mesh, ZeRO stage and recomputation pinned).
// `--summary` given the same flags (or --strategy, --remat) describes that
// step too (plannedStep): its plan and one device's or rank's memory.
// `--partition --mesh SHAPE --emit=mlir` writes the training step as one rank
// runs it (tess-partition-spmd): for the plan the search picks (the flags of
// --explain's search apply: --memory-limit, --zero, --shard,
// --search-timeout, --cluster), written into the step by
// lib/Transforms/Partition/AnnotateFromPlan.cpp, which prints a remark for
// each place where the partitioner cannot run the plan as the search priced
// it; or, with `--strategy dp|tp|dp-tp`, for a forced plan
// (tess-annotate-sharding; the mesh needs axes named dp and/or tp).
// `--target cpu|cuda --mesh SHAPE` (or `--emit=cpp --mesh SHAPE`) partitions
// the same way and compiles the program one rank runs; started plainly the
// executable runs the mesh's ranks as threads of one process, launched one
// rank per GPU over NCCL (runtime/train/MeshParallel.h).
//
// The passes all of this runs are lib/Driver's named phases (import,
// fusion, search, training, plan, remat, shard, partition, stages,
// preparation, emitc: tessera/Driver/CompilePhases.h), built from the flags;
// `--compile-to=PHASE` prints the module after PHASE, from which
// `tessera-opt --tess-phase-<next>` continues. The intra-op search is the
// search phase's passes (tess-fit-memory, tess-search-sharding, which
// checks a mesh plan against the rank's compiled program and chooses
// --devices' mesh), its flags the passes' options, run on the compile's
// own module; tesserac writes the weights and links; it adds no pass
// itself. A --pipeline compile's plan is the search phase's
// tess-search-pipeline decision on the model at the global batch, which
// leaves the forward at one micro-batch with the plan, the module every
// later phase continues from; `--explain --pipeline` makes the same
// decision from the same flags and reports it (runPipelineSearchPhase,
// printed as `tesserac: search:`). --devices N, or a --mesh without
// --strategy, --shard or --plan, weighs both searches as one decision, the
// search phase's tess-search-plan (tessera/Transforms/TrainingPlan.h) on the
// compile's module, whose options the pins become (--zero, --remat,
// --memory-limit, --search-timeout, --stages, --microbatches, --schedule,
// and --mesh: one stage's mesh, the devices its own times --stages unless
// --devices gives them); where the pipeline wins, the compile builds its
// step at one micro-batch (compileDecidedPipeline), as --explain and
// --summary report it.
//
// Every error is one `tesserac: error: ...` line naming the file, node or
// flag: the driver's own (fail), and a pass's, which PassDiagnostics prints
// in the same form instead of MLIR's raw `loc(...)` line.
//
//===----------------------------------------------------------------------===//

#include "CompiledPipelinePlan.h"
#include "PassDiagnostics.h"
#include "PipelineExplain.h"
#include "PlanArgument.h"
#include "tessera/Analysis/ModelSummary.h"
#include "tessera/Analysis/StepMemory.h"
#include "tessera/CostModel/TrainingStepEstimate.h"
#include "tessera/Driver/CompilePhases.h"
#include "tessera/Import/ONNX/Importer.h"
#include "tessera/Lowering/HostCompiler.h"
#include "tessera/Lowering/Passes.h"
#include "tessera/Lowering/WeightsFile.h"
#include "tessera/Sharding/MeshSharding.h"
#include "tessera/Sharding/PlanAnnotation.h"
#include "tessera/Transforms/CompiledStepMemory.h"
#include "tessera/Transforms/MeshPlan.h"
#include "tessera/Transforms/Passes.h"
#include "tessera/Transforms/TrainingPlan.h"

#include "Tess/IR/TessOps.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace llvm;
using tessera::tesserac::failUnlessReported;
using tessera::tesserac::PassDiagnostics;
using tessera::tesserac::printedErrorCount;
using tessera::tesserac::runPasses;

namespace {

cl::OptionCategory category("tesserac options");

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"),
                               cl::Required, cl::cat(category));
cl::list<std::string>
    dims("dim", cl::desc("Bind a symbolic input dim: --dim batch=8"),
         cl::value_desc("NAME=N"), cl::cat(category));
cl::opt<std::string>
    freeze("freeze",
           cl::desc("Parameters whose name matches are not trained"),
           cl::value_desc("REGEX"), cl::cat(category));
cl::opt<std::string>
    train("train", cl::desc("Train only the parameters whose name matches"),
          cl::value_desc("REGEX"), cl::cat(category));

enum class EmitStage { None, TessImport, Mlir, Cpp };
cl::opt<EmitStage> emit(
    "emit", cl::desc("What to write"), cl::init(EmitStage::None),
    cl::values(clEnumValN(EmitStage::TessImport, "tess-import",
                          "the imported graph, one op per ONNX node"),
               clEnumValN(EmitStage::Mlir, "mlir",
                          "the forward function in fused tess ops"),
               clEnumValN(EmitStage::Cpp, "cpp",
                          "the training program as C++ over the runtime")),
    cl::cat(category));
cl::opt<std::string> compileTo(
    "compile-to",
    cl::desc("Stop the compile after PHASE and print the module"),
    cl::value_desc("PHASE"), cl::cat(category));
/// --compile-to's phase, once the flags are read.
std::optional<tessera::CompilePhase> stopPhase;
cl::opt<bool> printPhasePipelines(
    "print-phase-pipelines",
    cl::desc("Print each compile phase's passes with their options to "
             "stderr as it runs, and each sharding search tesserac runs "
             "(one per mesh --devices weighs), in the form tessera-opt "
             "--pass-pipeline takes"),
    cl::cat(category));
cl::opt<bool> summary(
    "summary",
    cl::desc("Print ops, parameters, buffers, inputs, outputs and training "
             "memory; given a plan's flags (--mesh, --devices, --cluster, "
             "--memory-limit, --zero, --shard, --strategy, --remat), also "
             "the step --target compiles for them: its plan and one "
             "device's or rank's memory"),
    cl::cat(category));
cl::opt<bool> loadWeights("load-weights",
                          cl::desc("Attach weight bytes to the parameters"),
                          cl::cat(category));
cl::opt<bool> withoutWeights(
    "without-weights",
    cl::desc("With --target: build the executable without its initial "
             "weights file (the model's external data may be absent); it "
             "then starts from --weights FILE.safetensors or --init random"),
    cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("FILE"), cl::init("-"),
                                cl::cat(category));

// The training executable (and --emit=cpp).
enum class Target { None, Cpu, Cuda };
cl::opt<Target> target(
    "target", cl::desc("Build the training executable for this backend"),
    cl::init(Target::None),
    cl::values(clEnumValN(Target::Cpu, "cpu", "the CPU reference kernels"),
               clEnumValN(Target::Cuda, "cuda",
                          "the CUDA kernels (needs a tesserac built with "
                          "-DTESSERA_RUNTIME_CUDA=ON)")),
    cl::cat(category));
enum class Toggle { Off, On };
cl::opt<Toggle> packGateUp(
    "pack-gate-up",
    cl::desc("SwiGLU's gate and up projections as one GEMM of the "
             "concatenated weights, swiglu reading its halves in place "
             "(tess-pack-gate-up-projections; one device only). Off by "
             "default until timed against the unpacked step on a GPU (the "
             "Llama 3.2 1B benchmark); to become the default if faster"),
    cl::init(Toggle::Off),
    cl::values(clEnumValN(Toggle::Off, "off", "two GEMMs each way (default)"),
               clEnumValN(Toggle::On, "on", "one GEMM each way")),
    cl::cat(category));
cl::opt<std::string> loss("loss",
                          cl::desc("Training objective: causal-lm or mlm"),
                          cl::init("causal-lm"), cl::cat(category));
cl::opt<std::string>
    precision("precision",
              cl::desc("Compute precision of the step: fp32, bf16 or fp16"),
              cl::init("fp32"), cl::cat(category));
cl::opt<int64_t> vocabularyMultiple(
    "vocabulary-multiple",
    cl::desc("Pad the head's classes to a multiple of N, so that the logits "
             "and the head's GEMMs are aligned (default 64; 1: never)"),
    cl::value_desc("N"), cl::init(64), cl::cat(category));
cl::opt<std::string> logitsBlock(
    "logits-block",
    cl::desc("The most memory the head's logits may take at once: larger "
             "ones are computed a block of rows at a time, with their loss "
             "and gradients (tess-chunk-loss-head); 1GiB, 256MiB or bytes "
             "(default 1GiB; 0: always whole)"),
    cl::value_desc("SIZE"), cl::init("1GiB"), cl::cat(category));
/// --logits-block in bytes (0: never split), set once the flags are read.
int64_t logitsBlockBytes = 0;
cl::opt<std::string>
    cxx("cxx", cl::desc("The host C++ compiler (default: $CXX, else c++)"),
        cl::value_desc("PATH"), cl::cat(category));
cl::opt<std::string>
    runtimeDir("runtime-dir",
               cl::desc("Where libtessera_runtime_train.a, "
                        "libtessera_runtime_cpu.a (and for --target cuda "
                        "libtessera_runtime_train_cuda.a and "
                        "libtessera_runtime_cuda.a) are (default: this "
                        "build's)"),
               cl::value_desc("DIR"), cl::cat(category));

// --explain: the cost model's prediction for one training step.
cl::opt<bool> explain(
    "explain",
    cl::desc("Print the predicted memory per device, time by op kind, "
             "FLOPs, tokens/s and MFU of one training step (uses --loss, "
             "--precision, --mesh, --cluster)"),
    cl::cat(category));
cl::opt<std::string>
    meshSpec("mesh",
             cl::desc("Device mesh: 2x4 (axes dp, tp) or dp=2,tp=4 "
                      "(default: 1 device); with --target or --emit=cpp, "
                      "the program is partitioned for it. Without "
                      "--strategy, --shard or --plan, one stage's mesh pinned "
                      "in the plan decision: with --devices N or --stages S, "
                      "a pipeline of such stages"),
             cl::value_desc("SHAPE"), cl::cat(category));
cl::opt<int64_t> deviceCount(
    "devices",
    cl::desc("Instead of --mesh, with --explain, --target or --emit=cpp: "
             "the mesh of N of the cluster's devices (dp, tp or dp x tp) "
             "whose searched plan fits and is predicted fastest"),
    cl::value_desc("N"), cl::cat(category));
cl::opt<std::string> clusterName(
    "cluster",
    cl::desc("Cluster: h200, h200-multinode, a100-megatron or a cluster "
             "JSON file (lib/CostModel/README.md); given to --target or "
             "--emit=cpp, they compile the plan --explain prints on it"),
    cl::value_desc("NAME|FILE"), cl::init("h200"), cl::cat(category));
// --explain's sharding search (lib/Sharding/README.md).
cl::opt<std::string> memoryLimit(
    "memory-limit",
    cl::desc("Per-device memory the plan must fit: 40GiB, 512MiB, 80GB or "
             "bytes (default: the cluster's device memory), for --explain "
             "and the plan --target and --emit=cpp compile, the mesh "
             "search's, the pipeline search's (--pipeline) or both "
             "(--devices)"),
    cl::value_desc("SIZE"), cl::cat(category));
cl::opt<int> zeroStage("zero",
                       cl::desc("Force ZeRO stage N (0-3) for every "
                                "parameter (default: the search picks)"),
                       cl::value_desc("N"), cl::init(-1), cl::cat(category));
cl::list<std::string> shardPins(
    "shard",
    cl::desc("Pin the parameters matching REGEX and the ops reading them: "
             "SPEC is tp-column, tp-row, vocabulary-parallel, dp, "
             "replicated, zero=N or a layout like [-, tp], comma separated"),
    cl::value_desc("REGEX=SPEC"), cl::cat(category));
cl::opt<std::string> planArgument(
    "plan",
    cl::desc("With --explain: predict the step of this plan, a #tess.plan "
             "attribute's text or a file holding one (a training executable, "
             "or its output, which prints the plan at start): its mesh, ZeRO "
             "stage and recomputation are pinned"),
    cl::value_desc("TEXT|FILE"), cl::cat(category));
// --partition: the per-rank training step.
cl::opt<bool> partitionStep(
    "partition",
    cl::desc("With --mesh and --emit=mlir: write the training step as one "
             "rank runs it, for the searched plan (--explain's search flags "
             "apply) or a forced --strategy"),
    cl::cat(category));
cl::opt<std::string> forcedStrategy(
    "strategy",
    cl::desc("With --mesh and --partition, --target or --emit=cpp: a forced "
             "plan instead of the search: dp, tp or dp-tp (mesh axes named "
             "dp, tp)"),
    cl::value_desc("dp|tp|dp-tp"), cl::cat(category));
cl::opt<double> searchTimeout(
    "search-timeout",
    cl::desc("Seconds CBC may spend on the sharding ILP; beyond it the "
             "greedy plan answers (default: 10)"),
    cl::value_desc("SECONDS"), cl::init(10.0), cl::cat(category));

int fail(const Twine &message) {
  WithColor::error(errs(), "tesserac") << message << "\n";
  return 1;
}

/// Writes what `print` prints to -o (stdout by default). Returns 0, or 1
/// after printing the error.
int writeOutput(function_ref<void(raw_ostream &)> print) {
  std::string error;
  auto output = mlir::openOutputFile(outputPath, &error);
  if (!output)
    return fail(error);
  print(output->os());
  output->keep();
  return 0;
}

#ifdef TESSERA_RUNTIME_CUDA_LIBRARY
constexpr bool kHasCudaRuntime = true;
#else
constexpr bool kHasCudaRuntime = false;
#endif

/// The CUDA toolkit's part of the link of --target cuda, found when this
/// tesserac was built: its headers (cuda_kernels.h includes
/// cuda_runtime_api.h), the CUDA runtime linked statically and cuBLASLt (the
/// one shared library the GPU machine must have), and what they need.
void addCudaToolkit(tessera::lowering::HostCompileOptions &options) {
#ifdef TESSERA_RUNTIME_CUDA_LIBRARY
  options.includeDirectories.push_back(TESSERA_CUDA_INCLUDE_DIR);
  std::string cublasLt = TESSERA_CUBLASLT_LIBRARY;
  options.linkArguments = {TESSERA_CUDART_STATIC_LIBRARY, cublasLt};
#ifdef TESSERA_NCCL_LIBRARY
  // NCCL (data parallelism), shared like cuBLASLt.
  std::string nccl = TESSERA_NCCL_LIBRARY;
  options.linkArguments.push_back(nccl);
  options.linkArguments.push_back("-Wl,-rpath," +
                                  sys::path::parent_path(nccl).str());
#endif
  // Where cuBLASLt was here; elsewhere the loader's own search applies.
  options.linkArguments.push_back("-Wl,-rpath," +
                                  sys::path::parent_path(cublasLt).str());
  options.linkArguments.push_back("-ldl");
  options.linkArguments.push_back("-lrt");
#else
  (void)options;
#endif
}

/// Where this build's runtime is; --runtime-dir points elsewhere (a
/// standalone `cmake -S runtime` build keeps the driver in train/ and the
/// CUDA kernels in cuda/).
tessera::lowering::HostCompileOptions runtimeLocation(bool cuda) {
  tessera::lowering::HostCompileOptions options;
  options.runtimeIncludeDirectory = TESSERA_RUNTIME_INCLUDE_DIR;
  if (cuda)
    addCudaToolkit(options);
  // Link order: the driver's GPU backend (cuda: tessera_cuda_train_main,
  // what the program's main calls), the driver, the collectives (NCCL's,
  // then the common part), the CUDA kernels, then the CPU kernels all of
  // them use.
  if (runtimeDir.empty()) {
#ifdef TESSERA_RUNTIME_CUDA_LIBRARY
    if (cuda)
      options.libraries.push_back(TESSERA_RUNTIME_TRAIN_CUDA_LIBRARY);
#endif
    options.libraries.push_back(TESSERA_RUNTIME_TRAIN_LIBRARY);
#ifdef TESSERA_RUNTIME_NCCL_LIBRARY
    if (cuda)
      options.libraries.push_back(TESSERA_RUNTIME_NCCL_LIBRARY);
#endif
    options.libraries.push_back(TESSERA_RUNTIME_COMM_LIBRARY);
#ifdef TESSERA_RUNTIME_CUDA_LIBRARY
    if (cuda)
      options.libraries.push_back(TESSERA_RUNTIME_CUDA_LIBRARY);
#endif
    options.libraries.push_back(TESSERA_RUNTIME_CPU_LIBRARY);
    return options;
  }
  SmallVector<StringRef, 4> names;
  if (cuda)
    names.push_back("libtessera_runtime_train_cuda.a");
  names.push_back("libtessera_runtime_train.a");
#ifdef TESSERA_RUNTIME_NCCL_LIBRARY
  if (cuda)
    names.push_back("libtessera_runtime_nccl.a");
#endif
  names.push_back("libtessera_runtime_comm.a");
  if (cuda)
    names.push_back("libtessera_runtime_cuda.a");
  names.push_back("libtessera_runtime_cpu.a");
  for (StringRef name : names) {
    std::string found;
    for (StringRef folder : {"", "train", "cuda", "comm", "lib"}) {
      SmallString<256> candidate(runtimeDir);
      sys::path::append(candidate, folder, name);
      if (sys::fs::exists(candidate)) {
        found = candidate.str().str();
        break;
      }
    }
    SmallString<256> fallback(runtimeDir);
    sys::path::append(fallback, name);
    options.libraries.push_back(found.empty() ? fallback.str().str() : found);
  }
  SmallString<256> headers(runtimeDir);
  sys::path::append(headers, "include", "tessera", "runtime", "program.h");
  if (sys::fs::exists(headers))
    options.runtimeIncludeDirectory = runtimeDir + "/include";
  return options;
}

/// Writes the program's parameters and buffers, in its argument order, from
/// the values the importer attached to @forward's tess.parameter ops.
/// Returns 0, or 1 after printing the error.
/// Output files written under a staging name (FILE.partial) and renamed
/// over FILE together by commit(); the staged files are removed when the
/// object goes away uncommitted (a failed compile).
class StagedOutputs {
public:
  StagedOutputs() = default;
  StagedOutputs(const StagedOutputs &) = delete;
  StagedOutputs &operator=(const StagedOutputs &) = delete;
  ~StagedOutputs() {
    for (const auto &[final, staging] : files)
      sys::fs::remove(staging);
  }
  /// The name to write `final` under until commit.
  std::string stage(const std::string &final) {
    files.emplace_back(final, final + ".partial");
    return files.back().second;
  }
  /// Renames every staged file over its final name, in the order staged
  /// (the weights before the executable that reads them); "" on success.
  std::string commit() {
    for (const auto &[final, staging] : files)
      if (std::error_code code = sys::fs::rename(staging, final))
        return "cannot rename " + staging + " to " + final + ": " +
               code.message();
    files.clear();
    return "";
  }

private:
  std::vector<std::pair<std::string, std::string>> files;
};

int writeInitialWeights(mlir::ModuleOp module,
                                  mlir::func::FuncOp forwardBackward,
                                  StringRef path) {
  std::map<std::string, tessera::execution::HostTensorBuffer> values;
  std::string error;
  module.walk([&](tessera::tess::ParameterOp parameter) {
    std::optional<mlir::ElementsAttr> value = parameter.getValue();
    if (!value || values.count(parameter.getName().str()))
      return;
    auto buffer = tessera::execution::HostTensorBuffer::fromAttribute(*value);
    if (!buffer) {
      error = "parameter '" + parameter.getName().str() +
              "': " + toString(buffer.takeError());
      return;
    }
    values[parameter.getName().str()] = std::move(*buffer);
  });
  if (!error.empty())
    return fail(error);
  std::vector<tessera::lowering::NamedTensor> tensors;
  for (unsigned i = 0; i < forwardBackward.getNumArguments(); ++i) {
    mlir::DictionaryAttr attributes = forwardBackward.getArgAttrDict(i);
    if (!attributes)
      continue;
    auto name = attributes.getAs<mlir::StringAttr>("tess.parameter");
    if (!name)
      name = attributes.getAs<mlir::StringAttr>("tess.buffer");
    if (!name)
      continue;
    auto it = values.find(name.str());
    if (it == values.end())
      return fail("no initial value for '" + name.str() + "' in " +
                  inputPath);
    tensors.push_back({name.str(), &it->second});
  }
  if (Error written = tessera::lowering::writeSafetensors(path, tensors))
    return fail(toString(std::move(written)));
  return 0;
}

/// The compile phases' options from the flags (tessera/Driver/
/// CompilePhases.h); what the compile decides (the plan, the mesh, the
/// stages) its steps set.
std::unique_ptr<tessera::CompilePhaseOptions> phaseOptions() {
  auto options = std::make_unique<tessera::CompilePhaseOptions>();
  options->loss = loss.getValue();
  options->precision = precision.getValue();
  options->vocabularyMultiple = vocabularyMultiple.getValue();
  options->logitsBlockBytes = logitsBlockBytes;
  options->modelName = sys::path::filename(inputPath).str();
  options->target = target == Target::Cuda ? "cuda" : "cpu";
  return options;
}

/// Under --print-phase-pipelines, `phase`'s passes with `options` on
/// stderr as `tesserac: WHAT: PIPELINE`, in the form tessera-opt
/// --pass-pipeline takes.
void printPhasePipeline(mlir::MLIRContext &context,
                        tessera::CompilePhase phase,
                        const tessera::CompilePhaseOptions &options,
                        const Twine &what) {
  if (!printPhasePipelines)
    return;
  // Anchored on the module, as --pass-pipeline wants it.
  mlir::PassManager passes(&context, mlir::ModuleOp::getOperationName());
  tessera::buildCompilePhase(passes, phase, options);
  errs() << "tesserac: " << what << ": ";
  passes.printAsTextualPipeline(errs());
  errs() << "\n";
}

/// Runs `phase` with `options` on `module` (the compile's module or a copy
/// the analyses take). Returns 0, or 1 after printing the error (the
/// passes' own, else `failure`).
int runPhase(mlir::MLIRContext &context, mlir::ModuleOp module,
             tessera::CompilePhase phase,
             const tessera::CompilePhaseOptions &options,
             const Twine &failure) {
  // Every search tesserac runs is printed, here and in runSearchPhase.
  if (phase == tessera::CompilePhase::Search &&
      (options.search || options.searchPipeline))
    printPhasePipeline(context, phase, options, "search");
  mlir::PassManager passes(&context);
  tessera::buildCompilePhase(passes, phase, options);
  return runPasses(passes, module, failure);
}

/// What a step of the compile returns once --compile-to has ended it, the
/// module printed: main exits 0.
constexpr int kStoppedAtPhase = -1;

/// --summary of a pipelined program (--stages with --strategy, or
/// --pipeline): the compile runs to its preparation phase, and the model's
/// summary (taken from the imported forward) is printed with the plan and
/// each device's memory of the program the lowering would get.
bool pipelineSummary = false;
std::optional<tessera::ModelSummary> pipelineModelSummary;

/// The pipelined program `module` (prepared for the lowering) as --summary
/// describes it. Returns kStoppedAtPhase, or 1 after printing the error.
int summarizePipeline(mlir::ModuleOp module) {
  mlir::FailureOr<std::vector<tessera::pipeline::PipelineDeviceMemory>>
      devices = tessera::pipeline::estimatePipelineMemory(module);
  if (failed(devices))
    return 1;
  if (int status = writeOutput([&](raw_ostream &os) {
        if (pipelineModelSummary)
          tessera::printModelSummary(*pipelineModelSummary, inputPath, os);
        os << "\nPlan as compiled: "
           << mlir::Attribute(tessera::tess::PlanAttr::lookup(module)) << "\n";
        tessera::pipeline::printPipelineMemory(*devices, os);
        double largest = static_cast<double>(
            tessera::pipeline::largestDeviceBytes(*devices));
        os << formatv("Peak device memory per GPU (predicted, the largest "
                      "device): {0:F3} MiB ({1:F3} GiB; plus the CUDA "
                      "context and cuBLASLt's workspace)\n",
                      largest / double(1 << 20), largest / double(1 << 30));
      }))
    return status;
  return kStoppedAtPhase;
}

/// The compile's module after `phase`: printed when --compile-to names
/// `phase`, described after the preparation under a pipeline's --summary.
/// Returns kStoppedAtPhase then (1 when the output cannot be written),
/// else 0.
int stopAfter(tessera::CompilePhase phase, mlir::ModuleOp module) {
  if (pipelineSummary && phase == tessera::CompilePhase::Preparation)
    return summarizePipeline(module);
  if (stopPhase != phase)
    return 0;
  // With the blank line tessera-opt ends its output with, so that a phase
  // rerun there compares equal byte for byte.
  if (int status = writeOutput([&](raw_ostream &os) {
        module->print(os);
        os << "\n";
      }))
    return status;
  return kStoppedAtPhase;
}

/// runPhase on the compile's own module (its passes printed under
/// --print-phase-pipelines), then stopAfter.
int compilePhase(mlir::MLIRContext &context, mlir::ModuleOp module,
                 tessera::CompilePhase phase,
                 const tessera::CompilePhaseOptions &options,
                 const Twine &failure) {
  printPhasePipeline(context, phase, options,
                     "phase " + tessera::compilePhaseName(phase));
  if (int status = runPhase(context, module, phase, options, failure))
    return status;
  return stopAfter(phase, module);
}

/// --remat (a pin on the plan's recomputation), or --explain --plan's.
std::optional<tessera::pipeline::RematMode> rematPin;

/// The search phase's options that run tess-fit-memory (--remat pinning
/// its recomputation) and tess-search-sharding with `search`.
std::unique_ptr<tessera::CompilePhaseOptions>
searchPhaseOptions(const tessera::SearchShardingOptions &search) {
  std::unique_ptr<tessera::CompilePhaseOptions> options = phaseOptions();
  options->search = true;
  if (rematPin)
    options->rematPin = tessera::pipeline::rematName(*rematPin).str();
  options->mesh = search.mesh;
  options->devices = search.devices;
  options->cluster = search.cluster;
  options->memoryLimit = search.memoryLimit;
  options->zero = search.zero;
  options->shard = ArrayRef<std::string>(search.pins);
  options->searchTimeout = search.searchTimeout;
  options->calibration = search.calibration;
  return options;
}

/// The fusion phase's failure.
std::string importCleanupFailure() {
  return inputPath + ": the import cleanup pipeline failed";
}

/// The search phase's failure.
std::string searchFailure() {
  return inputPath + ": the sharding search failed";
}

/// The training phase's failure.
std::string trainingFailure() {
  return inputPath + ": building the training step failed";
}

/// The shard and partition phases' failure.
std::string partitionFailure() {
  return inputPath + ": partitioning the training step failed";
}

/// The remat phase's failure for `mode`.
std::string rematFailure(tessera::pipeline::RematMode mode) {
  return inputPath + ": --remat " + tessera::pipeline::rematName(mode).str() +
         " failed";
}

/// Parses --memory-limit: a number with an optional unit (B, KiB, MiB, GiB,
/// TiB, KB, MB, GB, TB).
std::optional<double> parseMemorySize(StringRef text) {
  StringRef number = text.trim();
  double scale = 1;
  for (auto [suffix, factor] :
       {std::pair<StringRef, double>{"KiB", 1024.0}, {"MiB", 1048576.0},
        {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"KB", 1e3},
        {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1.0}})
    if (number.consume_back(suffix)) {
      scale = factor;
      break;
    }
  double value;
  if (number.trim().getAsDouble(value) || !(value > 0))
    return std::nullopt;
  return value * scale;
}

/// The step's options from the flags: how the compile builds and prepares
/// it (tessera/Transforms/CompiledStepMemory.h).
tessera::CompiledStepOptions stepOptions() {
  tessera::CompiledStepOptions options;
  options.loss = loss;
  options.precision = precision;
  options.vocabularyMultiple = vocabularyMultiple;
  options.logitsBlockBytes = logitsBlockBytes;
  return options;
}

/// The memory of the training step in `step` (consumed) once prepared for
/// the lowering (tess-lowering-preparation), as the lowering will plan it.
/// Nullopt after printing the error.
std::optional<tessera::StepMemory> preparedStepMemory(mlir::ModuleOp step,
                                                      int64_t microBatches) {
  FailureOr<tessera::StepMemory> memory =
      tessera::preparedStepMemory(step, stepOptions(), microBatches);
  if (failed(memory))
    return std::nullopt;
  return *memory;
}

/// The memory of the step --target compiles for one device from the forward
/// in `module` (left as it is), recomputing `remat` in the backward, trained
/// with `microBatches` micro-batches a step (--grad-accum): the
/// training step, tess-rematerialize and tess-lowering-preparation on a
/// copy, then the arena analysis (tessera/Analysis/StepMemory.h). --summary
/// and --explain both read it, so that their numbers are the executable's.
/// Returns nullopt after printing the error.
std::optional<tessera::StepMemory>
compiledStepMemory(mlir::ModuleOp module, tessera::pipeline::RematMode remat,
                   int64_t microBatches = 1) {
  FailureOr<tessera::StepMemory> memory =
      tessera::compiledStepMemory(module, remat, stepOptions(), microBatches);
  if (failed(memory))
    return std::nullopt;
  return *memory;
}

/// The fusion phase's module of the model imported at `batch` samples, in
/// `context` (for the pipeline search, which plans before the model is
/// imported at the micro-batch it compiles). Failure after printing the
/// error.
FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
importedForward(mlir::MLIRContext &context,
                tessera::onnx_import::ImportOptions options, int64_t batch) {
  options.dims["batch"] = batch;
  auto module =
      tessera::onnx_import::importOnnxModel(inputPath, options, context);
  if (!module) {
    fail(toString(module.takeError()));
    return failure();
  }
  if (runPhase(context, **module, tessera::CompilePhase::Fusion,
               *phaseOptions(), importCleanupFailure()))
    return failure();
  return std::move(*module);
}

/// The search phase's options that run tess-search-pipeline with the
/// pins `search` (the pipeline flags, checked).
std::unique_ptr<tessera::CompilePhaseOptions>
pipelineSearchPhaseOptions(const tessera::pipeline::SearchOptions &search) {
  std::unique_ptr<tessera::CompilePhaseOptions> options = phaseOptions();
  options->searchPipeline = true;
  options->cluster = clusterName.getValue();
  options->pipelineDevices = search.devices.value_or(0);
  options->pipelineStages = search.stages.value_or(0);
  options->pipelineMicroBatches = search.microBatches.value_or(0);
  if (search.schedule)
    options->pipelineSchedule = search.schedule->name();
  if (search.remat)
    options->rematPin = tessera::pipeline::rematName(*search.remat).str();
  if (search.zero)
    options->zero = *search.zero ? 1 : 0;
  options->pipelineTensorParallel = search.tensorParallel.value_or(0);
  for (size_t units : search.stageUnitCounts)
    options->pipelineStageUnits.push_back(static_cast<int64_t>(units));
  // --memory-limit: the bytes a device may hold, every stage's plan.
  if (memoryLimit.getNumOccurrences())
    if (std::optional<double> bytes = parseMemorySize(memoryLimit))
      options->memoryLimit = static_cast<int64_t>(std::llround(*bytes));
  return options;
}

/// --pipeline's search pins: the pipeline flags with --zero, --devices and
/// the stage --mesh, or `plan`'s (--explain --plan's pipelined plan),
/// checked against `cluster`, for the global batch of `options`; --explain
/// and the compile read them alike. Returns 0, or 1 after printing the
/// error naming the flag.
int pipelineSearchFromFlags(
    const tessera::onnx_import::ImportOptions &options,
    const tessera::cost::Cluster &cluster,
    const std::optional<tessera::pipeline::SearchOptions> &plan,
    tessera::pipeline::SearchOptions &search) {
  if (shardPins.getNumOccurrences() || searchTimeout.getNumOccurrences())
    return fail("--shard and --search-timeout configure the one-stage "
                "sharding search, which --pipeline does not run");
  if (memoryLimit.getNumOccurrences() && !parseMemorySize(memoryLimit))
    return fail("--memory-limit " + memoryLimit +
                ": expected a positive size such as 40GiB, 512MiB or 80GB");
  tessera::tesserac::PipelineSearchPins pins;
  if (zeroStage.getNumOccurrences())
    pins.zero = zeroStage.getValue();
  if (deviceCount.getNumOccurrences())
    pins.devices = deviceCount.getValue();
  if (meshSpec.getNumOccurrences())
    pins.stageMesh = meshSpec;
  pins.plan = plan;
  return tessera::tesserac::pipelineSearchOptions(options, cluster, pins,
                                                  search);
}

/// Runs `use` on the fusion phase's module of the model imported at `batch`
/// samples, in a context of its own whose pass errors print as tesserac's.
/// Returns `use`'s status, or 1 after printing the error.
int withImportedForward(
    const tessera::onnx_import::ImportOptions &options, int64_t batch,
    function_ref<int(mlir::MLIRContext &, mlir::ModuleOp)> use) {
  mlir::MLIRContext context;
  PassDiagnostics diagnostics(context, inputPath);
  FailureOr<mlir::OwningOpRef<mlir::ModuleOp>> forward =
      importedForward(context, options, batch);
  if (failed(forward))
    return 1;
  return use(context, **forward);
}

/// tess-search-pipeline with the pins `search` on `module` (its forward at
/// the global batch), printed as `what` under --print-phase-pipelines: the
/// decision, the module's #tess.plan written when the compiled driver runs
/// the plan (and the forward left at one micro-batch). Failure after
/// printing the error.
FailureOr<tessera::PipelinePlanDecision>
searchPipelineOn(mlir::MLIRContext &context, mlir::ModuleOp module,
                 const tessera::pipeline::SearchOptions &search,
                 const Twine &what) {
  std::unique_ptr<tessera::CompilePhaseOptions> phase =
      pipelineSearchPhaseOptions(search);
  printPhasePipeline(context, tessera::CompilePhase::Search, *phase, what);
  unsigned before = tessera::tesserac::printedErrorCount();
  FailureOr<tessera::PipelinePlanDecision> decision =
      tessera::decidePipelinePlan(module,
                                  tessera::searchPipelineOptions(*phase));
  if (failed(decision))
    tessera::tesserac::failUnlessReported(
        before, inputPath + ": the pipeline search failed");
  return decision;
}

/// --explain --pipeline's decision: searchPipelineOn (printed as `tesserac:
/// search:`) on the forward imported at the global batch of `options`,
/// handed to `use` with the module's #tess.plan it wrote (null when the
/// decision says why the compiled driver cannot run its plan). Returns
/// `use`'s status, or 1 after printing the error.
int runPipelineSearchPhase(
    const tessera::onnx_import::ImportOptions &options,
    const tessera::pipeline::SearchOptions &search,
    function_ref<int(const tessera::PipelinePlanDecision &,
                     tessera::tess::PlanAttr)>
        use) {
  return withImportedForward(
      options, search.globalBatch,
      [&](mlir::MLIRContext &context, mlir::ModuleOp forward) {
        FailureOr<tessera::PipelinePlanDecision> decision =
            searchPipelineOn(context, forward, search, "search");
        if (failed(decision))
          return 1;
        return use(*decision, tessera::tess::PlanAttr::lookup(forward));
      });
}

/// --explain with a pipeline flag (or --plan's pipelined plan `plan`): the
/// plan of the pipeline search (runPipelineSearchPhase) as --target
/// compiles it for the same flags, reported in full. Returns 0, or 1 after
/// printing the error.
int explainPipelinePlan(
    const tessera::onnx_import::ImportOptions &options,
    const tessera::cost::Cluster &cluster,
    const std::optional<tessera::pipeline::SearchOptions> &plan) {
  tessera::pipeline::SearchOptions search;
  if (int status = pipelineSearchFromFlags(options, cluster, plan, search))
    return status;
  return runPipelineSearchPhase(
      options, search,
      [&](const tessera::PipelinePlanDecision &decision,
          tessera::tess::PlanAttr compiledPlan) {
        return tessera::tesserac::explainPipeline(
            sys::path::filename(inputPath), decision, compiledPlan,
            outputPath);
      });
}

/// The search phase's decision, as tesserac reports and compiles it.
struct SearchedPlan {
  /// The search's plan and calibration, the compiled rank's memory on a
  /// mesh (tessera/Transforms/MeshPlan.h); absent under --strategy.
  std::optional<tessera::MeshPlanDecision> decision;
  /// What every layer recomputes: the least that fits, or the pin.
  tessera::pipeline::RematMode remat = tessera::pipeline::RematMode::None;
  /// Whether the optimizer state goes to the host: only when nothing
  /// else fits one device.
  bool offload = false;
  /// The module's #tess.plan as the lowering reads it (on a mesh, with the
  /// mesh the partitioning added): what the executable carries.
  tessera::tess::PlanAttr compiledPlan;
  /// The copy searched when not compiling: the plan names its ops.
  mlir::OwningOpRef<mlir::ModuleOp> searchedCopy;
  /// The joint decision over --devices N (tess-search-plan): both
  /// searches' prices and which plan it took.
  std::optional<tessera::PlanChoice> choice;
  /// When that decision took the pipeline: the pipeline search's decision,
  /// `compiledPlan` its #tess.plan (the module's forward left at one
  /// micro-batch).
  std::optional<tessera::PipelinePlanDecision> pipeline;
  /// The search phase has run already (the joint decision's pipeline, whose
  /// step compileDecidedPipeline builds).
  bool decided = false;

  const tessera::sharding::TrainingShardingPlan *plan() const {
    return decision ? &decision->plan : nullptr;
  }
};

/// The cluster and mesh --explain, --target and --emit=cpp plan for:
/// searched (--cluster, --memory-limit, a --mesh without --strategy, or
/// --devices), or a --mesh's forced --strategy. `partitioned`: the program
/// is one rank's of a mesh; `joint`: --devices N (its pins the decision's), the
/// one-stage mesh plans and the pipelined ones weighed as one decision
/// (tess-search-plan).
struct PlanTarget {
  const tessera::cost::Cluster *cluster = nullptr;
  tessera::cost::DeviceMesh mesh;
  tessera::SearchShardingOptions searchOptions;
  bool partitioned = false;
  bool joint = false;
  /// A --pipeline compile: the pipeline search's pins, the search phase
  /// tess-search-pipeline alone.
  std::optional<tessera::pipeline::SearchOptions> pipeline;
};

/// What decidePlan returns when the joint decision took the pipeline, whose
/// step the compile builds at one micro-batch (compileDecidedPipeline).
constexpr int kPipelineChosen = -2;

/// `mesh` as tess-search-sharding's `mesh` option ("" for one device).
std::string meshOption(const tessera::cost::DeviceMesh &mesh) {
  return mesh.axes.empty() ? std::string() : mesh.describe();
}

/// Runs the search phase (tess-fit-memory, then tess-search-sharding with
/// `searchOptions` and `mesh`, or its `devices`) on the forward function in
/// `module`, in place, printed as `what` under --print-phase-pipelines: the
/// recomputation and offload that fit one device, then the search
/// calibrated by the step that recomputes them, its plan checked against
/// the rank's compiled program on a mesh and, with `devices`, the mesh
/// chosen; under `joint`, tess-search-plan instead, which weighs that plan
/// against the pipeline search's; for a --pipeline compile (`target`'s
/// pipeline pins), tess-search-pipeline alone. The forward's ops then carry
/// the plan and the module's #tess.plan the decision (or the module has the
/// pipeline's #tess.plan, its forward at one micro-batch, `result.pipeline`
/// set). Returns 0, or 1 after printing the error.
int runSearchPhase(mlir::MLIRContext &context, mlir::ModuleOp module,
                   const PlanTarget &target, const Twine &what,
                   SearchedPlan &result) {
  if (!module.lookupSymbol<mlir::func::FuncOp>("forward"))
    return fail(inputPath + ": the imported module has no @forward");
  result = SearchedPlan();
  if (target.pipeline) {
    FailureOr<tessera::PipelinePlanDecision> decision =
        searchPipelineOn(context, module, *target.pipeline, what);
    if (failed(decision))
      return 1;
    // The pass's error, in the compile.
    if (!decision->notCompiled.empty())
      return fail(inputPath + ": " + decision->notCompiled);
    result.pipeline = std::move(*decision);
    result.compiledPlan = tessera::tess::PlanAttr::lookup(module);
    return 0;
  }
  tessera::SearchShardingOptions searchOptions = target.searchOptions;
  bool joint = target.joint;
  searchOptions.mesh = meshOption(target.mesh);
  std::unique_ptr<tessera::CompilePhaseOptions> phase =
      searchPhaseOptions(searchOptions);
  phase->searchPlan = joint;
  if (joint)
    if (Error pinned = tessera::tesserac::pinPipelineShape(*phase))
      return fail(toString(std::move(pinned)));
  printPhasePipeline(context, tessera::CompilePhase::Search, *phase, what);
  auto note = [&](StringRef offloaded) {
    if (!offloaded.empty())
      llvm::errs() << "tesserac: note: " << inputPath << ": " << offloaded
                   << "\n";
  };
  std::string reason;
  FailureOr<tessera::MeshPlanDecision> decision = failure();
  tessera::tess::PlanAttr fitted;
  if (joint) {
    FailureOr<tessera::TrainingPlanDecision> chosen =
        tessera::decideTrainingPlan(module, tessera::searchPlanOptions(*phase),
                                    reason);
    if (succeeded(chosen)) {
      note(chosen->offloaded);
      result.choice = chosen->choice;
      if (chosen->pipelined()) {
        result.pipeline = std::move(chosen->pipeline);
        result.compiledPlan = tessera::tess::PlanAttr::lookup(module);
        return 0;
      }
      fitted = chosen->fitted;
      decision = std::move(*chosen->mesh);
    }
  } else {
    // The memory of the step as compiled decides what fits (the module's
    // plan), and calibrates the search's own per-op model.
    FailureOr<std::string> offloaded =
        tessera::fitMemory(module, tessera::fitMemoryOptions(*phase));
    if (failed(offloaded))
      return 1;
    note(*offloaded);
    fitted = tessera::tess::PlanAttr::lookup(module);
    decision = tessera::decideMeshPlan(
        module, tessera::searchShardingOptions(*phase), reason);
  }
  if (failed(decision)) {
    if (reason.empty())
      return 1;
    if (searchOptions.devices > 0)
      reason = formatv("--devices {0}: {1}", searchOptions.devices, reason);
    return fail(inputPath + ": " + reason);
  }
  result.remat = *tessera::pipeline::parseRematName(fitted.getRemat());
  result.offload = fitted.isOffloaded();
  result.decision = std::move(*decision);
  result.compiledPlan =
      result.decision->compiledPlan
          ? result.decision->compiledPlan
          : tessera::searchedModulePlan(&context, result.plan(), fitted);
  return 0;
}

/// The module's tess.plan with what this compile decided: the search's ZeRO
/// stage and recomputation (`searched`), and --stages, --schedule and
/// --microbatches (`stepPipeline`, with the pipeline search's chunks when
/// it gives them). The passes after it read the plan, not options: the
/// mesh joins it when the step is annotated, the chunks when
/// tess-split-pipeline-stages cuts it.
tessera::tess::PlanAttr modulePlan(
    mlir::MLIRContext &context, const SearchedPlan &searched,
    const std::optional<tessera::tesserac::StepPipeline> &stepPipeline) {
  using tessera::tess::PlanAttr;
  int64_t zero = 0;
  if (const tessera::sharding::TrainingShardingPlan *plan = searched.plan())
    zero = plan->zeroStage < 0 ? PlanAttr::kMixedZero : plan->zeroStage;
  int64_t stages = 1, microBatches = 1;
  std::string schedule;
  if (stepPipeline) {
    stages = stepPipeline->stages;
    microBatches = stepPipeline->microBatches;
    schedule = stepPipeline->schedule;
    // The pipeline search's ZeRO-1 inside the stage mesh.
    if (stepPipeline->zero)
      zero = stepPipeline->zero;
  }
  SmallVector<tessera::tess::ChunkAttr> chunks;
  if (stepPipeline)
    chunks = tessera::tesserac::chunkAttributes(context, *stepPipeline);
  return PlanAttr::get(&context, tessera::tess::MeshAttr(), zero,
                       tessera::pipeline::rematName(searched.remat), stages,
                       schedule, microBatches, chunks,
                       searched.offload ? "optimizer" : "");
}

/// The plan phase's options for `plan`: its text, which tess-write-plan
/// parses back (so that tessera-opt, given the same text, writes the same
/// plan).
std::unique_ptr<tessera::CompilePhaseOptions>
planPhaseOptions(tessera::tess::PlanAttr plan) {
  std::unique_ptr<tessera::CompilePhaseOptions> options = phaseOptions();
  std::string text;
  raw_string_ostream os(text);
  os << mlir::Attribute(plan);
  options->plan = os.str();
  return options;
}

/// The plan phase's failure.
std::string planFailure() {
  return inputPath + ": writing the plan failed";
}

/// The plan for `target`'s mesh (or --devices') of the forward function in
/// `module`: the search phase's decision, what --explain prints and what
/// --target and --emit=cpp compile, so that both are one decision (under
/// `target.joint`, the one-stage plan or the pipeline's); under --strategy
/// the forced one (whose layouts the shard phase writes) with the pinned
/// --remat, the search phase empty; nothing when `searched` is decided
/// already. `compiling`: `module` is the compile's own, which the search
/// phase changes and --compile-to may stop after; else the search runs on a
/// copy. Returns 0, kStoppedAtPhase when compiling, kPipelineChosen when
/// compiling and the joint decision took the pipeline, or 1 after printing
/// the error.
int decidePlan(mlir::MLIRContext &context, mlir::ModuleOp module,
               const PlanTarget &target, bool compiling,
               SearchedPlan &searched) {
  if (searched.decided)
    return 0;
  if (!forcedStrategy.empty()) {
    searched = SearchedPlan();
    searched.remat = rematPin.value_or(tessera::pipeline::RematMode::None);
    if (!compiling)
      return 0;
    return compilePhase(context, module, tessera::CompilePhase::Search,
                        *phaseOptions(), searchFailure());
  }
  if (!compiling) {
    mlir::OwningOpRef<mlir::ModuleOp> copy(module.clone());
    if (int status = runSearchPhase(context, *copy, target, "search", searched))
      return status;
    searched.searchedCopy = std::move(copy);
    return 0;
  }
  if (int status =
          runSearchPhase(context, module, target, "phase search", searched))
    return status;
  if (int status = stopAfter(tessera::CompilePhase::Search, module))
    return status;
  return searched.pipeline ? kPipelineChosen : 0;
}

/// --explain: the cost model's estimate of the unsharded step on one device,
/// the searched sharding plan on `target`'s mesh (or --devices'), with the
/// joint decision that took it (TrainingPlan.h), and the #tess.plan that
/// --target compiles for the same flags (and its executable prints at
/// start); or, where the joint decision took the pipeline, that plan as
/// --explain --pipeline reports it, with the decision.
int explainTrainingStep(mlir::MLIRContext &context, mlir::ModuleOp module,
                        const PlanTarget &target, StringRef title) {
  SearchedPlan searched;
  if (int status =
          decidePlan(context, module, target, /*compiling=*/false, searched))
    return status;
  if (searched.pipeline)
    return tessera::tesserac::explainPipeline(
        sys::path::filename(inputPath), *searched.pipeline,
        searched.compiledPlan, outputPath, &*searched.choice);
  if (!searched.decision)
    return fail("--explain predicts a searched plan: drop --strategy");
  const tessera::MeshPlanDecision &decision = *searched.decision;
  return writeOutput([&](raw_ostream &os) {
    tessera::cost::printTrainingStepEstimate(*decision.calibration.estimate,
                                             title, os);
    tessera::sharding::printTrainingShardingPlan(decision.plan,
                                                 *target.cluster, os);
    if (decision.rank)
      os << formatv("Peak device memory per rank as compiled (the partitioned "
                    "step's arena and training state): {0:F3} MiB; the "
                    "search's prediction: {1:F3} MiB\n",
                    decision.rank->totalBytes() / 1048576.0,
                    decision.plan.predicted.memoryBytes() / 1048576.0);
    if (searched.choice)
      searched.choice->print(os);
    os << "Plan as compiled: " << mlir::Attribute(searched.compiledPlan)
       << "\n";
  });
}

/// The training and plan phases on the forward function in `module`, whose
/// search phase has run: the training step (q/k/v, and under --pack-gate-up
/// gate/up, packed on `oneDevice`) with the #tess.plan of `searched` and `stepPipeline`. Returns 0,
/// kStoppedAtPhase, or 1 after printing the error.
int buildStepWithPlan(
    mlir::MLIRContext &context, mlir::ModuleOp module,
    const SearchedPlan &searched,
    const std::optional<tessera::tesserac::StepPipeline> &stepPipeline,
    bool oneDevice) {
  std::unique_ptr<tessera::CompilePhaseOptions> options = phaseOptions();
  options->packQkv = oneDevice;
  options->packGateUp = oneDevice && packGateUp == Toggle::On;
  if (int status = compilePhase(context, module,
                                tessera::CompilePhase::Training, *options,
                                trainingFailure()))
    return status;
  return compilePhase(context, module, tessera::CompilePhase::Plan,
                      *planPhaseOptions(
                          modulePlan(context, searched, stepPipeline)),
                      planFailure());
}

int partitionForMesh(mlir::MLIRContext &context, mlir::ModuleOp module,
                     bool deferGradientReduction = false,
                     bool compiling = false);

/// --partition: the training step as one rank of `mesh` runs it, for the
/// searched plan (which the step's ops carry from the search phase, written
/// as layouts by tess-annotate-from-plan, each place it cannot follow the
/// plan a remark) or the forced --strategy.
int partitionTrainingStep(mlir::MLIRContext &context, mlir::ModuleOp module,
                          const PlanTarget &target) {
  SearchedPlan searched;
  if (int status =
          decidePlan(context, module, target, /*compiling=*/true, searched))
    return status;
  if (int status = buildStepWithPlan(context, module, searched, std::nullopt,
                                     target.mesh.deviceCount() == 1))
    return status;
  if (int status = partitionForMesh(context, module))
    return status;
  return writeOutput([&](raw_ostream &os) { module->print(os); });
}

/// Rewrites the training step in `module` into one rank's program: the
/// forced --strategy, or the searched plan (which the step's ops carry,
/// written as layouts by tess-annotate-from-plan, each place it cannot
/// follow the plan a remark). `deferGradientReduction` (a pipeline's stage mesh): the
/// gradients leave pending over dp, which the driver sums once a step.
/// The shard phase (the layouts) then the partition phase; `compiling`: on
/// the compile's own module, which --compile-to may stop after either.
/// Returns 0, kStoppedAtPhase when compiling, or 1 after printing the error.
int partitionForMesh(mlir::MLIRContext &context, mlir::ModuleOp module,
                     bool deferGradientReduction, bool compiling) {
  auto run = compiling ? compilePhase : runPhase;
  std::unique_ptr<tessera::CompilePhaseOptions> options = phaseOptions();
  options->partition = true;
  if (!forcedStrategy.empty()) {
    options->mesh = meshSpec.getValue();
    options->strategy = forcedStrategy.getValue();
    options->deferGradientReduction = deferGradientReduction;
    // `--mesh 4 --strategy tp`: a one-axis mesh given by its size alone is
    // the tensor-parallel axis (its default name is dp).
    if (forcedStrategy == "tp" && !StringRef(meshSpec).contains('=') &&
        !StringRef(meshSpec).contains('x'))
      options->axes = ArrayRef<std::string>{"tp"};
  } else {
    // The plan the step's ops carry from the search phase, as layouts.
    options->searchedLayouts = true;
  }
  if (int status = run(context, module, tessera::CompilePhase::Shard, *options,
                       partitionFailure()))
    return status;
  return run(context, module, tessera::CompilePhase::Partition, *options,
             partitionFailure());
}

/// Refuses a searched mesh plan the compiled driver cannot run. Its ZeRO-1
/// and ZeRO-2 parameters leave their gradients pending over their ZeRO
/// axes, over whose group the driver shards their optimizer state
/// (runtime/train/MeshZero.h): one group for all of them, one mesh axis's or
/// the whole mesh's. Returns 0, or 1 after an error naming the flags that
/// pin a runnable plan.
int requireRunnableOnMesh(const SearchedPlan &searched) {
  const tessera::sharding::ParameterSharding *first = nullptr;
  auto axesText = [&](const tessera::sharding::ParameterSharding &parameter) {
    std::string text;
    for (unsigned axis : parameter.zeroAxes)
      text += (text.empty() ? "" : ",") + searched.plan()->mesh.axes[axis].name;
    return text;
  };
  for (const tessera::sharding::ParameterSharding &parameter :
       searched.plan()->parameters) {
    if ((parameter.zeroStage != 1 && parameter.zeroStage != 2) ||
        parameter.zeroAxes.empty())
      continue;
    if (!tessera::sharding::driverHasZeroGroup(parameter.zeroAxes,
                                               searched.plan()->mesh))
      return fail(formatv(
          "{0}: the searched plan shards the optimizer state of '{1}' "
          "(ZeRO-{2}) over the mesh axes {3}, which the compiled driver "
          "shards over one axis or the whole mesh only: pin a runnable plan "
          "with --zero 0 or --zero 3 (or --shard '{1}=zero=0'), or force "
          "one with --strategy dp|tp|dp-tp",
          inputPath, parameter.name, parameter.zeroStage,
          axesText(parameter)));
    if (!first) {
      first = &parameter;
      continue;
    }
    if (parameter.zeroAxes != first->zeroAxes)
      return fail(formatv(
          "{0}: the searched plan shards the optimizer state of '{1}' over "
          "{2} and of '{3}' over {4} (ZeRO-1/2), which the compiled driver "
          "shards over one group of axes: pin a runnable plan with --zero 0 "
          "or --zero 3, or force one with --strategy dp|tp|dp-tp",
          inputPath, first->name, axesText(*first), parameter.name,
          axesText(parameter)));
  }
  return 0;
}

/// The compile's plan and the phases up to the mesh's layouts, on the
/// forward function in `module`: with `planTarget`, the plan --explain
/// prints for the same flags (or the forced --strategy), else the step as
/// written with the pinned --remat (`searched` is the decision, unless
/// decided already); the training step with that plan (`stepPipeline`'s
/// stages in it), then its recomputation. Returns 0, kStoppedAtPhase,
/// kPipelineChosen (decidePlan), or 1 after printing the error.
int buildPlannedStep(
    mlir::MLIRContext &context, mlir::ModuleOp module,
    const std::optional<PlanTarget> &planTarget,
    const std::optional<tessera::tesserac::StepPipeline> &stepPipeline,
    SearchedPlan &searched) {
  if (!searched.decided)
    searched.remat = rematPin.value_or(tessera::pipeline::RematMode::None);
  bool oneDevice = true;
  if (planTarget) {
    if (int status = decidePlan(context, module, *planTarget,
                                /*compiling=*/true, searched))
      return status;
    if (planTarget->partitioned && searched.plan())
      if (int status = requireRunnableOnMesh(searched))
        return status;
    // The searched plan's mesh (--devices chose it), else the forced one.
    oneDevice = searched.plan()
                    ? searched.plan()->mesh.deviceCount() == 1
                    : planTarget->mesh.deviceCount() == 1;
  } else if (!searched.decided) {
    // Nothing to search: the step as written.
    if (int status = compilePhase(context, module,
                                  tessera::CompilePhase::Search,
                                  *phaseOptions(), searchFailure()))
      return status;
  }
  if (int status = buildStepWithPlan(context, module, searched, stepPipeline,
                                     oneDevice))
    return status;
  std::unique_ptr<tessera::CompilePhaseOptions> options = phaseOptions();
  options->remat = tessera::pipeline::rematName(searched.remat).str();
  return compilePhase(context, module, tessera::CompilePhase::Remat, *options,
                      rematFailure(searched.remat));
}

/// --emit=cpp and --target cpu -o FILE: the training program, lowered to
/// C++, and (for an executable) its weights and the compiled binary: the
/// planned step (buildPlannedStep); partitioned, the program one rank of
/// its mesh runs, whose weights file keeps the whole tensors (the driver
/// cuts each rank's blocks).
/// With `stepPipeline`, the program is cut into its stages
/// (tess-split-pipeline-stages) after remat and before the lowering's
/// fusions, which then apply to every chunk function. `searched`: as
/// buildPlannedStep's.
int compileTrainingProgram(
    mlir::MLIRContext &context, mlir::ModuleOp module, bool buildExecutable,
    const std::optional<PlanTarget> &planTarget,
    const std::optional<tessera::tesserac::StepPipeline> &stepPipeline,
    SearchedPlan &searched) {
  if (int status = buildPlannedStep(context, module, planTarget, stepPipeline,
                                    searched))
    return status;
  std::unique_ptr<tessera::CompilePhaseOptions> options = phaseOptions();

  // The weights file and the executable are written under staging names
  // and renamed over the outputs only once both exist: a compile that fails
  // half way leaves a previous FILE and FILE.weights.safetensors as they
  // were (a new weights file beside an old executable would not start).
  StagedOutputs staged;
  std::string weightsPath;
  if (buildExecutable && !withoutWeights) {
    SmallString<256> absolute(outputPath + ".weights.safetensors");
    if (std::error_code code = sys::fs::make_absolute(absolute))
      return fail("cannot resolve " + absolute.str() + ": " + code.message());
    weightsPath = absolute.str().str();
    auto forwardBackward =
        module.lookupSymbol<mlir::func::FuncOp>("forward_backward");
    if (!forwardBackward)
      return fail(inputPath + ": the training step has no @forward_backward");
    if (int status = writeInitialWeights(module, forwardBackward,
                                         staged.stage(weightsPath)))
      return status;
  }
  // A pipeline's stage mesh: partitioned first, then cut into stages, so
  // that every stage function is one mesh rank's.
  if (planTarget && planTarget->partitioned) {
    if (int status = partitionForMesh(context, module,
                                      /*deferGradientReduction=*/
                                      stepPipeline.has_value(),
                                      /*compiling=*/true))
      return status;
  } else {
    // Nothing to annotate or partition: the module after both phases is
    // the one after remat.
    for (tessera::CompilePhase phase :
         {tessera::CompilePhase::Shard, tessera::CompilePhase::Partition})
      if (int status = stopAfter(phase, module))
        return status;
  }

  // The stage split, the preparation and the lowering: one failure line
  // for the three, as before they were phases.
  std::string lowering =
      inputPath + ": lowering the training step to C++ failed";
  if (stepPipeline) {
    options->stages = stepPipeline->stages;
    options->virtualStages = stepPipeline->virtualStages;
    options->schedule = stepPipeline->schedule;
    options->microBatches = stepPipeline->microBatches;
  }
  options->weightsFile = weightsPath;
  for (tessera::CompilePhase phase :
       {tessera::CompilePhase::Stages, tessera::CompilePhase::Preparation,
        tessera::CompilePhase::EmitC})
    if (int status = compilePhase(context, module, phase, *options, lowering))
      return status;

  std::string cpp;
  raw_string_ostream cppStream(cpp);
  unsigned errorsBefore = printedErrorCount();
  if (mlir::failed(mlir::emitc::translateToCpp(module, cppStream)))
    return failUnlessReported(errorsBefore, inputPath +
                                  ": translating the step to C++ failed");

  if (!buildExecutable)
    return writeOutput([&](raw_ostream &os) { os << cpp; });

  // <temp>/<name>.cpp -> the executable.
  SmallString<256> directory;
  if (std::error_code code =
          sys::fs::createUniqueDirectory("tesserac", directory))
    return fail("cannot create a temporary directory: " + code.message());
  SmallString<256> sourcePath(directory);
  sys::path::append(sourcePath,
                    Twine(sys::path::filename(outputPath)) + ".cpp");
  {
    std::error_code code;
    raw_fd_ostream source(sourcePath, code);
    if (code)
      return fail("cannot write " + sourcePath.str() + ": " + code.message());
    source << cpp;
  }
  tessera::lowering::HostCompileOptions compile =
      runtimeLocation(target == Target::Cuda);
  compile.compiler = "c++";
  if (std::optional<std::string> environment = sys::Process::GetEnv("CXX");
      environment && !environment->empty())
    compile.compiler = *environment;
  if (!cxx.empty())
    compile.compiler = cxx;
  compile.sourcePath = sourcePath.str().str();
  compile.outputPath = staged.stage(outputPath);
  Error compiled = tessera::lowering::compileExecutable(compile);
  sys::fs::remove(sourcePath);
  sys::fs::remove(directory);
  if (compiled)
    return fail(toString(std::move(compiled)));
  if (std::string error = staged.commit(); !error.empty())
    return fail(error);
  return 0;
}

/// What --summary says of the step --target compiles for a plan's flags.
struct PlannedStep {
  /// Its #tess.plan, as the executable carries it.
  tessera::tess::PlanAttr plan;
  /// One device's or one rank's memory: the prepared step's arena and the
  /// training state (tessera/Analysis/StepMemory.h).
  tessera::StepMemory memory;
  /// The mesh a rank of which runs it; empty for one device.
  std::string mesh;
};

/// The step --target compiles for the flags (buildPlannedStep on a copy of
/// the forward function in `module`, partitioned for a mesh) as the
/// lowering plans it: the plan and the memory --explain predicts for them.
/// Nullopt after printing the error, or, `searched.pipeline` set, when the
/// joint decision took the pipeline (whose stages --summary does not
/// describe).
std::optional<PlannedStep>
plannedStep(mlir::MLIRContext &context, mlir::ModuleOp module,
            const std::optional<PlanTarget> &planTarget,
            SearchedPlan &searched) {
  mlir::OwningOpRef<mlir::ModuleOp> step(module.clone());
  if (buildPlannedStep(context, *step, planTarget, std::nullopt, searched) !=
      0)
    return std::nullopt;
  if (planTarget && planTarget->partitioned &&
      partitionForMesh(context, *step))
    return std::nullopt;
  PlannedStep planned;
  planned.plan = tessera::tess::PlanAttr::lookup(*step);
  // The mesh as the plan names its axes (`--mesh 4 --strategy tp`: tp=4).
  if (tessera::tess::MeshAttr mesh = planned.plan.getMesh())
    for (auto [name, size] : llvm::zip(mesh.getNames(), mesh.getSizes()))
      planned.mesh += formatv("{0}{1}={2}", planned.mesh.empty() ? "" : ",",
                              name.getValue(), size)
                          .str();
  std::optional<tessera::StepMemory> memory =
      preparedStepMemory(*step, /*microBatches=*/1);
  if (!memory)
    return std::nullopt;
  planned.memory = *memory;
  return planned;
}

/// --summary's block for `planned`: the plan, then the memory of one device
/// or rank as StepMemory prints it, and its peak in --explain's unit.
void printPlannedStep(const PlannedStep &planned, raw_ostream &os) {
  os << "\nPlan as compiled: " << mlir::Attribute(planned.plan) << "\n";
  std::string device =
      planned.mesh.empty() ? "one device" : "one rank of mesh " + planned.mesh;
  tessera::printStepMemory(planned.memory, os, device);
  os << formatv("Peak device memory per {0} as compiled (the step's arena "
                "and training state, as --explain predicts): {1:F3} MiB",
                planned.mesh.empty() ? "device" : "rank",
                planned.memory.totalBytes() / 1048576.0);
  if (planned.plan.getOffload() == "optimizer")
    os << formatv("; the plan offloads the optimizer state, leaving {0:F3} "
                  "MiB on the device",
                  planned.memory.offloadedTotalBytes() / 1048576.0);
  os << "\n";
}

/// The joint decision's pipeline (`decision`: the pipeline search's plan,
/// decided by the search phase on the forward at the global batch, which
/// left `module` as that forward at one micro-batch with the plan),
/// compiled as --pipeline compiles that search's plan: over its stage mesh
/// with its strategy, recomputation and chunks (CompiledPipelinePlan.h),
/// the phases after the search on `module` itself, so that tessera-opt
/// reruns them on --compile-to=search's module. Returns 0,
/// kStoppedAtPhase, or 1 after printing the error.
int compileDecidedPipeline(mlir::MLIRContext &context, mlir::ModuleOp module,
                           const tessera::cost::Cluster &cluster,
                           bool buildExecutable,
                           const SearchedPlan &decision) {
  tessera::tesserac::CompiledPipelinePlan compiled =
      tessera::tesserac::compiledPipelinePlan(decision.compiledPlan);
  meshSpec = compiled.mesh;
  forcedStrategy = compiled.strategy;
  rematPin = compiled.remat;
  std::optional<PlanTarget> planTarget;
  if (!compiled.mesh.empty()) {
    auto mesh = tessera::cost::parseMesh(compiled.mesh);
    if (!mesh)
      return fail(toString(mesh.takeError()));
    if (Error placed = tessera::cost::placeOnCluster(*mesh, cluster))
      return fail(toString(std::move(placed)));
    planTarget = PlanTarget{&cluster, std::move(*mesh), {},
                            /*partitioned=*/true};
  }
  SearchedPlan searched;
  searched.decided = true;
  searched.remat = compiled.remat;
  return compileTrainingProgram(context, module, buildExecutable, planTarget,
                                compiled.step, searched);
}

/// The driver once the flags are read: --explain, --summary, --partition
/// or the compile, for the import `options`.
int runDriver(tessera::onnx_import::ImportOptions options);

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(
      {&category, &tessera::tesserac::pipelineOptionCategory()});
  // The phases' names from the one list of them (CompilePhases.h).
  std::string compileToDescription =
      "Stop the compile after PHASE and print the module (as IREE's "
      "--compile-to), one of: " +
      tessera::compilePhaseNames() +
      "; tessera-opt --tess-phase-<next phase> continues from it";
  compileTo.setDescription(compileToDescription);
  cl::ParseCommandLineOptions(argc, argv, "Tessera: ONNX Transformer -> "
                                          "training program\n");
  if (compileTo.getNumOccurrences()) {
    stopPhase = tessera::parseCompilePhase(compileTo);
    if (!stopPhase)
      return fail("--compile-to=" + compileTo + ": expected one of " +
                  tessera::compilePhaseNames());
    if (emit != EmitStage::None || summary || explain || partitionStep)
      return fail("--compile-to=" + compileTo +
                  " prints the module after that phase: drop --emit, "
                  "--summary, --explain and --partition");
  }
  if (vocabularyMultiple < 1)
    return fail("--vocabulary-multiple " + Twine(vocabularyMultiple) +
                ": must be at least 1 (1 leaves the head as it is)");
  if (StringRef(logitsBlock).trim() == "0") {
    logitsBlockBytes = 0;
  } else if (std::optional<double> bytes = parseMemorySize(logitsBlock)) {
    logitsBlockBytes = static_cast<int64_t>(*bytes);
  } else {
    return fail("--logits-block " + logitsBlock +
                ": expected a size such as 1GiB, 256MiB or a byte count (0: "
                "never split the logits)");
  }

  tessera::onnx_import::ImportOptions options;
  tessera::onnx_import::InitializerCounts initializerCounts;
  options.initializerCounts = &initializerCounts;
  for (const std::string &binding : dims) {
    auto [name, value] = StringRef(binding).split('=');
    long long number;
    if (name.empty() || value.empty() || value.getAsInteger(10, number))
      return fail("--dim " + binding + ": expected NAME=N, e.g. --dim batch=8");
    if (number <= 0)
      return fail("--dim " + binding + ": a dim must be positive");
    if (!options.dims.emplace(name.str(), number).second)
      return fail("--dim " + binding + ": '" + name + "' is bound twice");
  }
  if (freeze.getNumOccurrences())
    options.freezePattern = freeze;
  if (train.getNumOccurrences())
    options.trainPattern = train;
  return runDriver(options);
}

namespace {

int runDriver(tessera::onnx_import::ImportOptions options) {
  options.initializerCounts->byKind.clear();
  bool buildExecutable =
      target != Target::None && emit == EmitStage::None && !stopPhase;
  // What compiles the training program: the C++ (--emit=cpp), the
  // executable, or the phases up to --compile-to's.
  bool compileRequested =
      buildExecutable || emit == EmitStage::Cpp || stopPhase.has_value();
  // --summary given a plan's flags also describes the step --target
  // compiles for them (the plan, one device's or rank's memory).
  bool planSummary =
      summary && !explain && !compileRequested && !partitionStep &&
      (meshSpec.getNumOccurrences() || deviceCount.getNumOccurrences() ||
       clusterName.getNumOccurrences() || memoryLimit.getNumOccurrences() ||
       zeroStage.getNumOccurrences() || shardPins.getNumOccurrences() ||
       searchTimeout.getNumOccurrences() ||
       forcedStrategy.getNumOccurrences() ||
       tessera::tesserac::rematRequested() ||
       tessera::tesserac::pipelineSearchRequested());
  StringRef targetName = target == Target::Cuda ? "cuda" : "cpu";
  // --emit=cpp --target cuda only writes C++; linking needs the runtime.
  if (buildExecutable && target == Target::Cuda && !kHasCudaRuntime)
    return fail("--target cuda: this tesserac was built without the CUDA "
                "runtime (configure with -DTESSERA_RUNTIME_CUDA=ON)");
  if (buildExecutable && (outputPath.empty() || outputPath == "-"))
    return fail("--target " + targetName +
                ": name the executable with -o, e.g. -o train");
  // The outputs must not replace the model they are made from, and a
  // directory is no executable's name (the linker's message would say
  // less).
  if (!outputPath.empty() && outputPath != "-") {
    if (sys::fs::is_directory(outputPath))
      return fail("-o " + outputPath +
                  ": is a directory; name the output file in it, e.g. -o " +
                  outputPath + "/train");
    // Checked before any work: the staging names would otherwise be the
    // ones an open failure names.
    StringRef parent = sys::path::parent_path(outputPath.getValue());
    if (!parent.empty() && !sys::fs::is_directory(parent))
      return fail("-o " + outputPath + ": the directory " + parent.str() +
                  (sys::fs::exists(parent) ? " is not a directory"
                                           : " does not exist"));
    for (const std::string &output :
         {outputPath.getValue(), outputPath + ".weights.safetensors"}) {
      bool same = false;
      if (!sys::fs::equivalent(output, inputPath, same) && same)
        return fail("-o " + outputPath + ": " + output +
                    " would overwrite the input model " + inputPath +
                    "; name another output");
    }
  }
  if (buildExecutable && summary)
    return fail("--summary cannot be combined with building an executable");
  if (tessera::tesserac::rematRequested() && !explain && !buildExecutable &&
      !compileRequested && !planSummary)
    return fail("--remat applies to --target, --emit=cpp, --summary or "
                "--explain --pipeline");
  // A search over several devices is one decision between the one-stage
  // mesh plans and the pipelined ones (the search phase's tess-search-plan,
  // tessera/Transforms/TrainingPlan.h); the flags that pin either search
  // are that pass's options, constraints on the one decision: --zero,
  // --remat, --memory-limit and --search-timeout, and a pipeline's shape,
  // --stages, --microbatches and --schedule (tess-search-plan says which
  // search each leaves out). --mesh pins one stage's mesh, a constraint too
  // (tess-search-plan's `mesh`): the devices are its own times --stages
  // unless --devices gives them; --shard, with it, pins its mesh search's
  // layouts (the pipeline search left out). --plan and --strategy name a
  // mesh's plan, which --devices chooses (refused together below);
  // --pipeline and --trace ask for the pipeline search's own report and
  // plan.
  bool meshPin = meshSpec.getNumOccurrences() && forcedStrategy.empty() &&
                 !planArgument.getNumOccurrences();
  int64_t pinnedMeshDevices = 0;
  if (meshPin) {
    if (auto parsed = tessera::cost::parseMesh(meshSpec))
      pinnedMeshDevices = parsed->deviceCount() *
                          std::max<int64_t>(1, tessera::tesserac::pinnedStages());
    else
      consumeError(parsed.takeError()); // said where the mesh is read
  }
  bool devicesDecision =
      ((deviceCount.getNumOccurrences() && deviceCount > 1) ||
       pinnedMeshDevices > 1) &&
      options.dims.count("batch") && !partitionStep &&
      !tessera::tesserac::pipelineSearchRequested() &&
      !tessera::tesserac::traceRequested() &&
      !planArgument.getNumOccurrences() && forcedStrategy.empty() &&
      (!shardPins.getNumOccurrences() || meshSpec.getNumOccurrences());
  bool jointSearch =
      devicesDecision &&
      (explain ? emit == EmitStage::None && !buildExecutable && !summary
               : compileRequested || planSummary);
  // --remat pins the built step's recomputation, and in the joint decision
  // the mesh search's too (auto is each search's own choice); --explain and
  // a pipelined compile hand it to the pipeline search, which reads auto.
  // (--summary too: it describes the program that compile builds.)
  bool pipelinedCompile = !explain && (compileRequested || planSummary) &&
                          tessera::tesserac::pipelineSearchRequested();
  if (tessera::tesserac::rematRequested() &&
      (jointSearch ? !tessera::tesserac::rematAutoRequested()
                   : !explain && !pipelinedCompile)) {
    Expected<tessera::pipeline::RematMode> mode =
        tessera::tesserac::stepRematMode();
    if (!mode)
      return fail(toString(mode.takeError()));
    rematPin = *mode;
  }
  // The pipeline search's pins from the flags, checked against --cluster
  // before the import. Returns 0, or 1 after printing the error.
  tessera::pipeline::SearchOptions pipelineSearch;
  auto readPipelineSearch = [&]() -> int {
    auto loaded = tessera::cost::loadCluster(clusterName);
    if (!loaded)
      return fail(toString(loaded.takeError()));
    return pipelineSearchFromFlags(options, *loaded, std::nullopt,
                                   pipelineSearch);
  };
  // --pipeline with --target or --emit=cpp: the pipeline search's plan, as
  // --explain --pipeline prints it for the same flags, the search phase of
  // the compile (tess-search-pipeline on the model at the global batch),
  // compiled from the module it leaves as the joint decision's pipeline is
  // (compileDecidedPipeline).
  bool searchedPipeline = pipelinedCompile;
  if (loss != "causal-lm" && loss != "mlm")
    return fail("--loss " + loss + ": expected causal-lm or mlm");
  if (precision != "fp32" && precision != "bf16" && precision != "fp16")
    return fail("--precision " + precision + ": expected fp32, bf16 or fp16");
  // --stages with --target or --emit=cpp: a pipelined program, built for
  // one micro-batch of the global --dim batch.
  std::optional<tessera::tesserac::StepPipeline> stepPipeline;
  if (searchedPipeline) {
    if (Error trace = tessera::tesserac::refuseTraceInCompile())
      return fail(toString(std::move(trace)));
    if (forcedStrategy.getNumOccurrences())
      return fail("--pipeline searches each stage's plan: drop --strategy "
                  "(--mesh pins the stage mesh; --stages N --mesh M "
                  "--strategy S without --pipeline forces a pipeline)");
    if (int status = readPipelineSearch())
      return status;
  } else if (!explain && (compileRequested || planSummary) && !jointSearch) {
    auto batch = options.dims.find("batch");
    auto pipelined = tessera::tesserac::stepPipeline(
        batch == options.dims.end() ? 0 : batch->second);
    if (!pipelined)
      return fail(toString(pipelined.takeError()));
    stepPipeline = *pipelined;
    if (stepPipeline) {
      if (batch == options.dims.end())
        return fail("--stages: bind the step's global batch with --dim "
                    "batch=B (each micro-batch is B / --microbatches rows)");
      // Each stage partitioned over --mesh by a forced plan (PP x DP,
      // PP x TP, PP x DP x TP); the sharding search plans no pipeline.
      if (meshSpec.getNumOccurrences() && forcedStrategy.empty())
        return fail("--stages with --mesh: give each stage's plan with "
                    "--strategy dp|tp|dp-tp (the sharding search plans a "
                    "mesh without pipeline stages; --explain --pipeline "
                    "plans both)");
      batch->second /= stepPipeline->microBatches;
    }
  }
  // A pipeline's --summary: the compile to its preparation phase, where
  // its devices' memory is read (summarizePipeline).
  if (planSummary && (stepPipeline ||
                      tessera::tesserac::pipelineSearchRequested())) {
    pipelineSummary = true;
    planSummary = false;
    compileRequested = true;
  }
  // --explain: read the cluster, the mesh and the search's flags first; the
  // program keeps the whole batch (the plan divides it).
  std::optional<tessera::cost::Cluster> cluster;
  tessera::cost::DeviceMesh mesh;
  tessera::SearchShardingOptions searchOptions;
  std::string explainTitle = sys::path::filename(inputPath).str();
  // --mesh with --target or --emit=cpp: the program of one rank of the mesh
  // (which --summary describes).
  bool compiling = !explain && (compileRequested || planSummary);
  // (--devices N with --pipeline is the pipeline's device count.)
  bool devicesGiven = deviceCount.getNumOccurrences() > 0 &&
                      !tessera::tesserac::pipelineSearchRequested() &&
                      !searchedPipeline;
  if (devicesGiven) {
    if (!explain && !compiling)
      return fail("--devices chooses the mesh of --explain, --target or "
                  "--emit=cpp");
    if (deviceCount < 1)
      return fail("--devices " + Twine(deviceCount.getValue()) +
                  ": must be positive");
    if (planArgument.getNumOccurrences())
      return fail("--devices chooses the mesh, which --plan pins: give one "
                  "of them");
    if (!forcedStrategy.empty() ||
        (shardPins.getNumOccurrences() && !meshSpec.getNumOccurrences()))
      return fail("--strategy and --shard name the axes of a --mesh: give "
                  "the --mesh instead of --devices");
    if (stepPipeline)
      return fail("--devices searches one stage's mesh; a pipeline given by "
                  "--stages runs one rank per stage (drop --devices)");
  }
  bool meshProgram =
      ((meshSpec.getNumOccurrences() && !searchedPipeline) ||
       (devicesGiven && deviceCount > 1)) &&
      !partitionStep && compiling;
  // (--zero with --pipeline pinned the pipeline search above.)
  bool searchFlags = memoryLimit.getNumOccurrences() ||
                     (zeroStage.getNumOccurrences() && !searchedPipeline) ||
                     shardPins.getNumOccurrences() ||
                     searchTimeout.getNumOccurrences();
  // --target and --emit=cpp compile the plan --explain prints for the same
  // flags when given its cluster or its search's flags, and for a --mesh
  // without --strategy; --stages is a pipeline given by hand. A GPU program
  // is planned without them too, on --explain's default cluster: the
  // recomputation or offload that fits its device is compiled, not a step
  // that runs out of memory where --explain says a plan fits (a CPU
  // program, whose memory is the host's, keeps the step as written).
  bool plannedProgram = compiling && !stepPipeline && forcedStrategy.empty() &&
                        (clusterName.getNumOccurrences() || searchFlags ||
                         devicesGiven || meshProgram || searchedPipeline ||
                         target == Target::Cuda);
  if (meshProgram && !forcedStrategy.empty() && searchFlags)
    return fail("--strategy forces the plan; --memory-limit, --zero, "
                "--shard and --search-timeout configure the search it "
                "replaces");
  if (partitionStep) {
    if (explain || emit != EmitStage::Mlir || summary)
      return fail("--partition writes the per-rank training step: use it "
                  "with --emit=mlir alone (not --explain, --summary or "
                  "another --emit)");
    if (!meshSpec.getNumOccurrences())
      return fail("--partition needs a --mesh, e.g. --mesh 2x2");
    if (!forcedStrategy.empty() &&
        (memoryLimit.getNumOccurrences() || zeroStage.getNumOccurrences() ||
         shardPins.getNumOccurrences() || searchTimeout.getNumOccurrences()))
      return fail("--strategy forces the plan; --memory-limit, --zero, "
                  "--shard and --search-timeout configure the search it "
                  "replaces");
  } else if (forcedStrategy.getNumOccurrences() && !meshProgram) {
    return fail("--strategy chooses the plan of a --mesh: add --partition "
                "--emit=mlir, or --target cpu|cuda / --emit=cpp with --mesh");
  }
  std::optional<tessera::tesserac::PlanPins> planPins;
  if (planArgument.getNumOccurrences()) {
    if (!explain)
      return fail("--plan is --explain's: it predicts the step of a plan "
                  "(--target compiles the plan --explain prints for the same "
                  "flags)");
    if (meshSpec.getNumOccurrences() || zeroStage.getNumOccurrences() ||
        tessera::tesserac::rematRequested())
      return fail("--plan gives the mesh, the ZeRO stage and the "
                  "recomputation: drop --mesh, --zero and --remat");
    Expected<tessera::tesserac::PlanPins> pins =
        tessera::tesserac::readPlanPins(planArgument);
    if (!pins)
      return fail(toString(pins.takeError()));
    planPins = *pins;
    meshSpec = planPins->mesh;
    rematPin = planPins->remat;
  }
  if (explain || partitionStep || meshProgram || plannedProgram) {
    if (explain && (emit != EmitStage::None || buildExecutable || summary))
      return fail("--explain cannot be combined with --emit, --summary or "
                  "--target");
    auto loaded = tessera::cost::loadCluster(clusterName);
    if (!loaded)
      return fail(toString(loaded.takeError()));
    cluster = std::move(*loaded);
    // --explain with a pipeline flag: the pipeline search's plan.
    std::optional<tessera::pipeline::SearchOptions> pipelinedPlan;
    if (planPins)
      pipelinedPlan = planPins->pipeline;
    if (explain &&
        ((tessera::tesserac::pipelinePlanRequested() && !jointSearch) ||
         pipelinedPlan))
      return explainPipelinePlan(options, *cluster, pipelinedPlan);
    auto parsed = tessera::cost::parseMesh(meshSpec);
    if (!parsed)
      return fail(toString(parsed.takeError()));
    mesh = std::move(*parsed);
    if (Error placed = tessera::cost::placeOnCluster(mesh, *cluster))
      return fail(toString(std::move(placed)));
    // A stage mesh's dp ranks split every micro-batch's rows (`--mesh 2
    // --strategy tp` names its one axis tp, not the parsed default dp).
    if (stepPipeline && forcedStrategy != "tp")
      for (const tessera::cost::MeshAxis &axis : mesh.axes) {
        int64_t rows = options.dims.at("batch");
        if (axis.name == "dp" && rows % axis.size != 0)
          return fail(formatv(
              "--mesh {0}: its dp axis of {1} ranks does not divide a "
              "micro-batch of {2} rows (--dim batch={3} / --microbatches "
              "{4}); each data-parallel rank takes its rows of every "
              "micro-batch",
              meshSpec, axis.size, rows, rows * stepPipeline->microBatches,
              stepPipeline->microBatches));
      }
    if (memoryLimit.getNumOccurrences()) {
      std::optional<double> bytes = parseMemorySize(memoryLimit);
      if (!bytes)
        return fail("--memory-limit " + memoryLimit +
                    ": expected a positive size such as 40GiB, 512MiB or "
                    "80GB");
      searchOptions.memoryLimit = static_cast<int64_t>(std::llround(*bytes));
    }
    if (zeroStage.getNumOccurrences()) {
      if (zeroStage < 0 || zeroStage > 3)
        return fail("--zero " + Twine(zeroStage.getValue()) +
                    ": expected a ZeRO stage 0, 1, 2 or 3");
      searchOptions.zero = zeroStage.getValue();
    }
    if (planPins && planPins->zero)
      searchOptions.zero = *planPins->zero;
    if (!(searchTimeout > 0))
      return fail("--search-timeout " + std::to_string(searchTimeout) +
                  ": expected a positive number of seconds");
    searchOptions.searchTimeout = searchTimeout;
    // --devices N: the search phase chooses the mesh.
    if (devicesGiven && deviceCount > 1)
      searchOptions.devices = deviceCount.getValue();
    searchOptions.cluster = clusterName.getValue();
    searchOptions.precision = precision.getValue();
    // Checked here, before the import, against the mesh they pin.
    for (const std::string &text : shardPins) {
      auto pin = tessera::sharding::parseShardPin(text, mesh);
      if (!pin)
        return fail(toString(pin.takeError()));
      searchOptions.pins.push_back(text);
    }
    std::string bound;
    for (const auto &[name, value] : options.dims)
      bound += (bound.empty() ? "" : ", ") + name + "=" + std::to_string(value);
    if (!bound.empty())
      explainTitle += " (" + bound + ")";
  } else if (searchFlags) {
    return fail("--memory-limit, --zero, --shard and --search-timeout "
                "configure --explain's sharding search; add --explain" +
                Twine(stepPipeline ? " (a pipeline given by --stages is not "
                                     "searched)"
                                   : " or --target/--emit=cpp"));
  }
  // The executable starts from the ONNX initializers, written beside it.
  options.loadWeights = loadWeights || (buildExecutable && !withoutWeights);
  if (emit == EmitStage::None && !summary && !buildExecutable && !explain &&
      !stopPhase)
    return fail("nothing to do: pass --emit=mlir, --emit=tess-import, "
                "--emit=cpp, --summary, --explain or --target cpu|cuda -o "
                "FILE");

  mlir::MLIRContext context;
  // Every pass error is printed once, in tesserac's own style.
  PassDiagnostics diagnostics(context, inputPath);
  auto module =
      tessera::onnx_import::importOnnxModel(inputPath, options, context);
  if (!module) {
    std::string message = toString(module.takeError());
    if (buildExecutable && StringRef(message).contains("external data"))
      message += "\n  the executable starts from the model's weights; "
                 "regenerate the model with its data file (python3 "
                 "../shared/tools/export_hf.py --model NAME --out DIR, see "
                 "shared/README.md), or write the C++ alone with --emit=cpp "
                 "and train with --init random, or build with --without-weights and "
                 "start it with --weights FILE.safetensors";
    return fail(message);
  }

  // --compile-to's module is printed by its phase; the compile ends there.
  auto exitStatus = [](int status) {
    return status == kStoppedAtPhase ? 0 : status;
  };
  if (int status = stopAfter(tessera::CompilePhase::Import, **module))
    return exitStatus(status);
  if (emit != EmitStage::TessImport)
    if (int status = compilePhase(context, **module,
                                  tessera::CompilePhase::Fusion,
                                  *phaseOptions(), importCleanupFailure()))
      return exitStatus(status);
  if (pipelineSummary) {
    pipelineModelSummary = tessera::summarizeModel(**module);
    pipelineModelSummary->initializerKinds = options.initializerCounts->byKind;
  }

  if (explain)
    return explainTrainingStep(
        context, **module,
        PlanTarget{&*cluster, mesh, searchOptions, false, jointSearch},
        explainTitle);
  if (partitionStep)
    return exitStatus(partitionTrainingStep(
        context, **module, PlanTarget{&*cluster, mesh, searchOptions}));

  // What --target, --emit=cpp and --summary plan for (else the step as
  // written, with the pinned --remat).
  std::optional<PlanTarget> planTarget;
  if (meshProgram || plannedProgram) {
    planTarget = PlanTarget{&*cluster, mesh, searchOptions, meshProgram,
                            jointSearch};
    if (searchedPipeline)
      planTarget->pipeline = pipelineSearch;
  }
  // The search phase's decision; where the joint decision takes the
  // pipeline, the compile builds its step at one micro-batch.
  SearchedPlan searched;
  if (compileRequested) {
    int status = compileTrainingProgram(context, **module, buildExecutable,
                                        planTarget, stepPipeline, searched);
    if (status == kPipelineChosen)
      status = compileDecidedPipeline(context, **module, *cluster,
                                      buildExecutable, searched);
    return exitStatus(status);
  }

  // --summary with a plan's flags: the step --target compiles for them;
  // else, with --loss or --precision, the device memory of the step as
  // written (its planned arena and the driver's state).
  std::optional<PlannedStep> planned;
  std::optional<tessera::StepMemory> stepMemory;
  if (planSummary) {
    planned = plannedStep(context, **module, planTarget, searched);
    if (!planned && !searched.pipeline)
      return 1;
  } else if (summary &&
             (loss.getNumOccurrences() || precision.getNumOccurrences())) {
    stepMemory = compiledStepMemory(**module,
                                    tessera::pipeline::RematMode::None);
    if (!stepMemory)
      return 1;
  }

  return writeOutput([&](raw_ostream &os) {
    if (summary) {
      tessera::ModelSummary numbers = tessera::summarizeModel(**module);
      numbers.initializerKinds = options.initializerCounts->byKind;
      tessera::printModelSummary(numbers, inputPath, os);
    }
    if (planned)
      printPlannedStep(*planned, os);
    // The joint decision's pipeline, as the compile builds it.
    if (searched.pipeline) {
      os << "\nPlan as compiled: " << mlir::Attribute(searched.compiledPlan)
         << "\n"
         << "The pipeline search's plan: " << searched.choice->pipelineLayout
         << "\n";
      // The memory that decided it: each device's compiled program (one
      // device's step where the plan runs on one).
      if (!searched.pipeline->compiledDevices.empty()) {
        tessera::pipeline::printPipelineMemory(
            searched.pipeline->compiledDevices, os);
      } else if (searched.pipeline->compiled) {
        tessera::printStepMemory(*searched.pipeline->compiled, os);
      }
    }
    if (stepMemory)
      tessera::printStepMemory(*stepMemory, os);
    if (emit != EmitStage::None)
      (*module)->print(os);
  });
}

} // namespace
