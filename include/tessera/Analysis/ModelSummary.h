//===- ModelSummary.h - what a tess module holds, in numbers ---*- C++ -*-===//
#ifndef TESSERA_ANALYSIS_MODELSUMMARY_H
#define TESSERA_ANALYSIS_MODELSUMMARY_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessera {

struct ModelSummary {
  /// Op name -> count, over the whole module.
  std::map<std::string, int64_t> opCounts;
  int64_t trainableTensors = 0;
  int64_t trainableElements = 0;
  /// Element type ("f32", ...) -> bytes of trainable parameters.
  std::map<std::string, int64_t> trainableBytesByType;
  int64_t bufferTensors = 0;
  int64_t bufferElements = 0;
  int64_t bufferBytes = 0;
  /// The importer's count of the model's initializers by what it made of
  /// each (onnx_import::InitializerCounts); empty unless the caller sets it.
  std::vector<std::pair<std::string, int64_t>> initializerKinds;
  /// "name: tensor<...>" for each function argument and result.
  std::vector<std::string> inputs, outputs;

  /// Mixed-precision AdamW keeps 16 bytes a parameter: bf16 weight and
  /// gradient (2 + 2), fp32 master weight (4), two fp32 moments (8).
  int64_t trainingStateBytes() const { return 16 * trainableElements; }
};

ModelSummary summarizeModel(mlir::ModuleOp module);

/// The table `tesserac --summary` prints.
void printModelSummary(const ModelSummary &summary, llvm::StringRef title,
                       llvm::raw_ostream &os);

} // namespace tessera

#endif // TESSERA_ANALYSIS_MODELSUMMARY_H
