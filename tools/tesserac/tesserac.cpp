//===- tesserac.cpp - the Tessera compiler driver ------------------------===//
//
//   tesserac MODEL.onnx [--dim NAME=N]... [--freeze RE] [--train RE]
//            [--emit=tess-import|mlir] [--summary] [-o FILE]
//
// Stages, like toyc's -emit: `tess-import` is the graph as the importer
// wrote it (one op per ONNX node, shapes folded); `mlir` is the forward
// function after canonicalization and fusion, the input of every later pass.
//
//===----------------------------------------------------------------------===//

#include "tessera/Analysis/ModelSummary.h"
#include "tessera/Import/ONNX/Importer.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

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

enum class EmitStage { None, TessImport, Mlir };
cl::opt<EmitStage> emit(
    "emit", cl::desc("What to write"), cl::init(EmitStage::None),
    cl::values(clEnumValN(EmitStage::TessImport, "tess-import",
                          "the imported graph, one op per ONNX node"),
               clEnumValN(EmitStage::Mlir, "mlir",
                          "the forward function in fused tess ops")),
    cl::cat(category));
cl::opt<bool> summary("summary",
                      cl::desc("Print ops, parameters, buffers, inputs, "
                               "outputs and training memory"),
                      cl::cat(category));
cl::opt<bool> loadWeights("load-weights",
                          cl::desc("Attach weight bytes to the parameters"),
                          cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("FILE"), cl::init("-"),
                                cl::cat(category));

int fail(const Twine &message) {
  WithColor::error(errs(), "tesserac") << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Tessera: ONNX Transformer -> "
                                          "training program\n");

  tessera::onnx_import::ImportOptions options;
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
  options.loadWeights = loadWeights;
  if (emit == EmitStage::None && !summary)
    return fail("nothing to do: pass --emit=mlir, --emit=tess-import or "
                "--summary");

  mlir::MLIRContext context;
  auto module =
      tessera::onnx_import::importOnnxModel(inputPath, options, context);
  if (!module)
    return fail(toString(module.takeError()));

  if (emit != EmitStage::TessImport) {
    mlir::PassManager pm(&context);
    tessera::buildImportCleanupPipeline(pm);
    if (mlir::failed(pm.run(**module)))
      return fail(inputPath + ": the import cleanup pipeline failed");
  }

  std::string error;
  auto output = mlir::openOutputFile(outputPath, &error);
  if (!output)
    return fail(error);
  if (summary)
    tessera::printModelSummary(tessera::summarizeModel(**module), inputPath,
                               output->os());
  if (emit != EmitStage::None)
    (*module)->print(output->os());
  output->keep();
  return 0;
}
