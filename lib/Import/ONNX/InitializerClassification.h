//===- InitializerClassification.h - parameter, buffer or constant -*- C++ -*-===//
//
// An ONNX initializer is one of three things to a training compiler: a
// trainable parameter (the optimizer updates it), a buffer (a named tensor
// the model reads but does not learn: rotary frequencies, position ids, a
// frozen weight), or a constant the exporter lifted out of the code. The
// trainable set must equal PyTorch's `model.parameters()`.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LIB_IMPORT_ONNX_INITIALIZERCLASSIFICATION_H
#define TESSERA_LIB_IMPORT_ONNX_INITIALIZERCLASSIFICATION_H

#include "tessera/Import/ONNX/Importer.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <onnx/onnx_pb.h>

namespace tessera::onnx_import {

enum class InitializerRole { TrainableParameter, Buffer, Constant };

class InitializerClassifier {
public:
  /// Reads the exporter's graph-signature metadata from `graph`'s value_info
  /// and compiles the user's patterns; a bad regex is an error naming the
  /// flag.
  static llvm::Expected<InitializerClassifier>
  create(const onnx::GraphProto &graph, const ImportOptions &options);

  InitializerRole classify(const onnx::TensorProto &initializer) const;

  /// Whether the graph has torch.export's signature and `name` is not in
  /// it: a tensor the exporter's optimizer made.
  bool outsideSignature(llvm::StringRef name) const {
    return !exportKinds.empty() && !exportKinds.count(name);
  }

  /// Whether the export's graph signature names `name` (a parameter or a
  /// buffer of the module): a tensor of its own, never a copy of another,
  /// even where its values equal another's (a frozen teacher's copy).
  bool inSignature(llvm::StringRef name) const {
    return exportKinds.count(name);
  }

  /// Whether `initializer` is outside the signature yet a matrix product's
  /// float weight matrix: what torch.onnx.export(..., optimize=True) makes
  /// of a parameter by folding its transpose (the parameter itself is then
  /// gone from the graph). classify() trains it.
  bool isFoldedWeight(const onnx::TensorProto &initializer) const {
    return isFoldedMatrixIn(initializer, productWeights);
  }

  /// Whether `initializer` is outside the signature and a Gather's float
  /// table: learned (an embedding the optimizer rewrote) or derived from a
  /// buffer (a rotary cos/sin cache), which nothing in the graph tells
  /// apart. classify() makes it a constant; the importer says so.
  bool isFoldedLookupTable(const onnx::TensorProto &initializer) const {
    return isFoldedMatrixIn(initializer, lookupTables);
  }

  /// The PyTorch name of the one parameter a folded weight was computed
  /// from, where the optimizer recorded it and dropped that parameter
  /// (onnxscript's `pkg.onnxscript.optimizer.folded_from`).
  std::optional<std::string>
  pytorchNameOf(const onnx::TensorProto &initializer) const {
    auto name = foldedFrom.find(initializer.name());
    if (name == foldedFrom.end() || !isFoldedWeight(initializer))
      return std::nullopt;
    return name->second;
  }

  /// The module tensors a float initializer was folded from that the
  /// export no longer holds (a parameter the optimizer gathered at fixed
  /// positions, a buffer it computed a table from): whether one was learned,
  /// nothing in the graph tells.
  llvm::ArrayRef<std::string>
  droppedOriginsOf(const onnx::TensorProto &initializer) const;

private:
  InitializerClassifier() = default;
  /// A float initializer of rank 2 or more, outside the signature, that
  /// `uses` (operands of one kind of node) holds.
  bool isFoldedMatrixIn(const onnx::TensorProto &initializer,
                        const llvm::StringSet<> &uses) const;

  /// Initializer name -> torch.export's InputSpec kind ("PARAMETER",
  /// "BUFFER", "CONSTANT_TENSOR"), when the exporter recorded it.
  llvm::StringMap<std::string> exportKinds;
  /// Initializer name -> the one value it was folded from, where that value
  /// is not in the graph.
  llvm::StringMap<std::string> foldedFrom;
  /// Initializer name -> the module tensors it was folded from that are not
  /// in the graph.
  llvm::StringMap<std::vector<std::string>> droppedOrigins;
  /// The right-hand operands of the graph's MatMul and Gemm nodes.
  llvm::StringSet<> productWeights;
  /// The tables (input 0) of the graph's Gather nodes.
  llvm::StringSet<> lookupTables;
  std::optional<std::string> freezePattern;
  std::optional<std::string> trainPattern;
};

/// How many initializers the import made of each kind, which `--summary`
/// prints against PyTorch's counts.
struct InitializerCensus {
  int64_t parameters = 0;
  int64_t buffers = 0;
  int64_t constants = 0;
  /// Copies of a parameter (ParameterViews.h), imported as that parameter.
  int64_t views = 0;
  /// Matrix products' weights outside the graph signature (trained).
  std::vector<std::string> foldedWeights;
  /// Of those, the ones named after the parameter they were folded from.
  int64_t pytorchNamed = 0;
  /// Lookup tables outside the graph signature (constants: undecidable).
  std::vector<std::string> foldedTables;
  /// Other constants folded from module tensors the export dropped, and
  /// those tensors (undecidable: learned or not).
  std::vector<std::string> foldedConstants;
  std::vector<std::string> droppedOrigins;

  void count(InitializerRole role);
  InitializerCounts byKind() const;
};

} // namespace tessera::onnx_import

#endif // TESSERA_LIB_IMPORT_ONNX_INITIALIZERCLASSIFICATION_H
