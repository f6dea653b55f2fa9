//===- Npy.h - NumPy .npy files for tensors --------------------*- C++ -*-===//
//
// Test inputs and outputs cross the Python boundary (onnxruntime, PyTorch)
// as .npy files: version 1.0 headers, little-endian, C order.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_EXECUTION_NPY_H
#define TESSERA_EXECUTION_NPY_H

#include "tessera/Execution/HostTensorBuffer.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace tessera::execution {

/// Reads f32/f64/f16/i64/i32/i16/i8/bool arrays; errors name the file.
llvm::Expected<HostTensorBuffer> readNpy(llvm::StringRef path);
/// Writes the buffer (bf16 is written as f32, which NumPy lacks).
llvm::Error writeNpy(llvm::StringRef path, const HostTensorBuffer &buffer);

} // namespace tessera::execution

#endif // TESSERA_EXECUTION_NPY_H
