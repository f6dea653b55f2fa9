//===- Importer.h - ONNX model -> tess forward function --------*- C++ -*-===//
//
// Reads an ONNX Transformer (as torch.onnx.export(dynamo=True) writes it),
// binds its symbolic dims, folds all shape arithmetic on the host and emits
// one `func.func @forward` of `tess` ops with static shapes. Weights are not
// read unless asked: parameters carry their name and location only.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_IMPORT_ONNX_IMPORTER_H
#define TESSERA_IMPORT_ONNX_IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera::onnx_import {

/// What the importer made of the model's initializers, by kind, to be read
/// against PyTorch's counts (`tesserac --summary`).
struct InitializerCounts {
  /// (kind, count), as printed: trained; of those, outside the signature
  /// (matrix products' weights torch.onnx.export(..., optimize=True) folded);
  /// copies of a parameter (imported as that parameter); buffers;
  /// constants.
  std::vector<std::pair<std::string, int64_t>> byKind;
};

struct ImportOptions {
  /// Values of the model's symbolic input dims (`--dim batch=8`).
  std::map<std::string, int64_t> dims;
  /// Parameters whose name matches are not trained (`--freeze`).
  std::optional<std::string> freezePattern;
  /// When set, only parameters whose name matches are trained (`--train`).
  std::optional<std::string> trainPattern;
  /// Attach every weight's bytes to its `tess.parameter` (`value`).
  bool loadWeights = false;
  /// When set, filled with the counts of the initializers by kind.
  InitializerCounts *initializerCounts = nullptr;
};

/// Imports the model at `path`. Every failure (unreadable or non-ONNX file,
/// unsupported op, unbound dim, contradicting shapes, missing weights when
/// they are needed) is an llvm::Error whose message names the file and the
/// node, op or flag concerned.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxModel(llvm::StringRef path, const ImportOptions &options,
                mlir::MLIRContext &context);

/// Imports a model held in memory (the bytes of an .onnx file), e.g. from a
/// fuzzer. `nameForMessages` stands for the file in diagnostics and
/// locations; external-data paths are resolved relative to its directory.
/// Fails exactly as importOnnxModel does, never by crashing.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxModelFromBuffer(llvm::StringRef bytes,
                          llvm::StringRef nameForMessages,
                          const ImportOptions &options,
                          mlir::MLIRContext &context);

} // namespace tessera::onnx_import

#endif // TESSERA_IMPORT_ONNX_IMPORTER_H
