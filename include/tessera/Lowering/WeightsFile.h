//===- WeightsFile.h - the executable's initial weights ----------*- C++ -*-===//
//
// tesserac writes the ONNX initializers the program reads (its parameters
// and buffers) as safetensors next to the executable; the runtime loads
// them at start-up (runtime/train/InitialWeights.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_LOWERING_WEIGHTSFILE_H
#define TESSERA_LOWERING_WEIGHTSFILE_H

#include "tessera/Execution/HostTensorBuffer.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace tessera::lowering {

struct NamedTensor {
  std::string name;
  const execution::HostTensorBuffer *tensor = nullptr;
};

/// Writes `tensors` (in this order) as a safetensors file.
llvm::Error writeSafetensors(llvm::StringRef path,
                             llvm::ArrayRef<NamedTensor> tensors);

} // namespace tessera::lowering

#endif // TESSERA_LOWERING_WEIGHTSFILE_H
