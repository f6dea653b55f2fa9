//===- tessera-fuzz-onnx.cpp - libFuzzer target for the ONNX importer ----===//
//
// Feeds arbitrary bytes to the ONNX importer as if they were an .onnx file,
// with the symbolic dims that the test models use bound (batch=2, seq=8)
// when the input declares them (tesserac rejects a --dim naming a dim the
// model does not have, which would stop every static-shape input early).
// The importer must turn every input into either a module that verifies or
// an llvm::Error; a crash, an ASan report, a hang or an invalid module is a
// bug. Built only with TESSERA_BUILD_FUZZERS=ON (see CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "tessera/Import/ONNX/Importer.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>

namespace {

/// The symbolic dims of the graph inputs, when the bytes parse as a model.
std::set<std::string> symbolicInputDims(llvm::StringRef bytes) {
  std::set<std::string> symbols;
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return symbols;
  for (const onnx::ValueInfoProto &input : model.graph().input())
    for (const auto &dim : input.type().tensor_type().shape().dim())
      if (!dim.dim_param().empty())
        symbols.insert(dim.dim_param());
  return symbols;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  tessera::onnx_import::ImportOptions options;
  std::set<std::string> symbols = symbolicInputDims(bytes);
  for (auto [name, value] : {std::pair<const char *, int64_t>{"batch", 2},
                             std::pair<const char *, int64_t>{"seq", 8}})
    if (symbols.count(name))
      options.dims[name] = value;

  // A fresh context per input: types and attributes uniqued for one input
  // must not accumulate over millions of runs, and no state may leak from
  // one input into the next (that would make crashes irreproducible).
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  // Diagnostics that escape the importer's own capture would be printed for
  // every input; the import result alone decides success.
  context.printOpOnDiagnostic(false);
  context.getDiagEngine().registerHandler(
      [](mlir::Diagnostic &) { return mlir::success(); });

  auto module = tessera::onnx_import::importOnnxModelFromBuffer(
      bytes, "fuzz-input.onnx", options, context);
  if (!module) {
    // Build the message as tesserac would, so that its code runs too.
    std::string message = llvm::toString(module.takeError());
    if (message.empty()) {
      llvm::errs() << "the importer failed with an empty error message\n";
      std::abort();
    }
    return 0;
  }
  // A module the importer accepted must be valid IR: later passes assume it.
  if (mlir::failed(mlir::verify(**module))) {
    llvm::errs() << "the importer produced a module that does not verify\n";
    std::abort();
  }
  return 0;
}
