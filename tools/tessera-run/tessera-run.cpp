//===- tessera-run.cpp - run an imported model on the CPU backend --------===//
//
//   tessera-run MODEL.onnx [--dim NAME=N]... --input NAME=FILE.npy...
//               [--no-fusion] [-o OUT.npy]
//
// Imports the model with its weights, runs the forward function in the
// tess interpreter (the CPU kernels) and writes the first output. Tests use
// it to compare Tessera's numbers with onnxruntime's and PyTorch's, and
// --no-fusion against the fused graph, which checks the fusion passes.
//
//===----------------------------------------------------------------------===//

#include "tessera/Execution/Interpreter.h"
#include "tessera/Execution/Npy.h"
#include "tessera/Import/ONNX/Importer.h"
#include "tessera/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

#include <cmath>

using namespace llvm;
using namespace tessera::execution;

namespace {

cl::OptionCategory category("tessera-run options");
cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx>"),
                               cl::Required, cl::cat(category));
cl::list<std::string> dims("dim", cl::desc("Bind a symbolic input dim"),
                           cl::value_desc("NAME=N"), cl::cat(category));
cl::list<std::string> inputs("input",
                             cl::desc("A graph input from a .npy file"),
                             cl::value_desc("NAME=FILE.npy"), cl::cat(category));
cl::opt<bool> noFusion("no-fusion",
                       cl::desc("Run the graph as imported, unfused"),
                       cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("Write the first output here"),
                                cl::value_desc("FILE.npy"), cl::cat(category));

int fail(const Twine &message) {
  WithColor::error(errs(), "tessera-run") << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Run a model on Tessera's CPU backend\n");

  tessera::onnx_import::ImportOptions options;
  options.loadWeights = true;
  for (const std::string &binding : dims) {
    auto [name, value] = StringRef(binding).split('=');
    long long number;
    if (name.empty() || value.getAsInteger(10, number) || number <= 0)
      return fail("--dim " + binding + ": expected NAME=N with N > 0");
    options.dims[name.str()] = number;
  }
  std::map<std::string, HostTensorBuffer> given;
  for (const std::string &binding : inputs) {
    auto [name, file] = StringRef(binding).split('=');
    if (name.empty() || file.empty())
      return fail("--input " + binding + ": expected NAME=FILE.npy");
    Expected<HostTensorBuffer> buffer = readNpy(file);
    if (!buffer)
      return fail(toString(buffer.takeError()));
    given[name.str()] = std::move(*buffer);
  }

  mlir::MLIRContext context;
  auto module =
      tessera::onnx_import::importOnnxModel(inputPath, options, context);
  if (!module)
    return fail(toString(module.takeError()));
  if (!noFusion) {
    mlir::PassManager pm(&context);
    tessera::buildImportCleanupPipeline(pm);
    if (mlir::failed(pm.run(**module)))
      return fail("the import cleanup pipeline failed");
  }
  auto forward = (*module)->lookupSymbol<mlir::func::FuncOp>("forward");

  std::vector<HostTensorBuffer> arguments;
  for (mlir::BlockArgument argument : forward.getArguments()) {
    std::string name = "arg" + std::to_string(argument.getArgNumber());
    if (auto loc = dyn_cast<mlir::NameLoc>(argument.getLoc()))
      name = loc.getName().str();
    auto it = given.find(name);
    if (it == given.end())
      return fail("no --input for graph input '" + name + "'");
    // Token ids may come as int32 or int64; the graph says which it wants.
    auto type = cast<mlir::RankedTensorType>(argument.getType());
    Expected<HostTensorBuffer> converted = HostTensorBuffer::zeros(type);
    if (!converted)
      return fail(toString(converted.takeError()));
    if (it->second.shape() != type.getShape())
      return fail("--input " + name + ": shape does not match the graph's");
    tessera_tensor from = it->second.descriptor(), to = converted->descriptor();
    if (tessera_cpu_cast(&from, &to) != 0)
      return fail(tessera_cpu_last_error());
    arguments.push_back(std::move(*converted));
  }

  Interpreter interpreter;
  Expected<std::vector<HostTensorBuffer>> results =
      interpreter.run(forward, std::move(arguments));
  if (!results)
    return fail(inputPath + ": " + toString(results.takeError()));
  const HostTensorBuffer &output = results->front();
  double sum = 0;
  for (int64_t i = 0; i < output.numElements(); ++i)
    sum += output.getDouble(i);
  outs() << "output 0: [";
  interleaveComma(output.shape(), outs());
  outs() << "] sum " << format("%.9g", sum) << " first";
  for (int64_t i = 0; i < std::min<int64_t>(8, output.numElements()); ++i)
    outs() << " " << format("%.9g", output.getDouble(i));
  outs() << "\n";
  if (!outputPath.empty())
    if (Error error = writeNpy(outputPath, output))
      return fail(toString(std::move(error)));
  return 0;
}
