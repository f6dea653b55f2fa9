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
  /// it: a tensor the exporter's optimizer made (classified a constant).
  bool outsideSignature(llvm::StringRef name) const {
    return !exportKinds.empty() && !exportKinds.count(name);
  }

private:
  InitializerClassifier() = default;

  /// Initializer name -> torch.export's InputSpec kind ("PARAMETER",
  /// "BUFFER", "CONSTANT_TENSOR"), when the exporter recorded it.
  llvm::StringMap<std::string> exportKinds;
  std::optional<std::string> freezePattern;
  std::optional<std::string> trainPattern;
};

} // namespace tessera::onnx_import

#endif // TESSERA_LIB_IMPORT_ONNX_INITIALIZERCLASSIFICATION_H
