//===- HostTensorBuffer.h - an owned tensor for the CPU backend -*- C++ -*-===//
//
// The interpreter's values: dense row-major bytes with a runtime dtype and a
// static shape, viewable as the `tessera_tensor` descriptor that the CPU
// kernels (runtime/cpu) take.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_EXECUTION_HOSTTENSORBUFFER_H
#define TESSERA_EXECUTION_HOSTTENSORBUFFER_H

#include "tessera/runtime/cpu_kernels.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace tessera::execution {

class HostTensorBuffer {
public:
  HostTensorBuffer() = default;
  /// Zero-filled tensor of `type` (a ranked tensor of a supported element
  /// type; see dtypeOf).
  static llvm::Expected<HostTensorBuffer> zeros(mlir::RankedTensorType type);
  static HostTensorBuffer zeros(tessera_dtype dtype,
                                llvm::ArrayRef<int64_t> shape);
  /// The elements of a constant attribute.
  static llvm::Expected<HostTensorBuffer>
  fromAttribute(mlir::ElementsAttr attribute);
  static HostTensorBuffer fromFloats(llvm::ArrayRef<int64_t> shape,
                                     llvm::ArrayRef<float> values);
  static HostTensorBuffer fromInts(llvm::ArrayRef<int64_t> shape,
                                   llvm::ArrayRef<int64_t> values);

  tessera_dtype dtype() const { return elementType; }
  llvm::ArrayRef<int64_t> shape() const { return dims; }
  int64_t numElements() const;
  void *data() { return bytes.data(); }
  const void *data() const { return bytes.data(); }

  /// The descriptor the kernels take (points into this buffer).
  tessera_tensor descriptor();
  const tessera_tensor *constDescriptor();

  /// Element i converted to double / int64 (any dtype).
  double getDouble(int64_t index) const;
  int64_t getInt(int64_t index) const;
  std::vector<float> toFloats() const;

private:
  tessera_dtype elementType = TESSERA_F32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  tessera_tensor view{};
};

/// The kernels' dtype for an MLIR element type; an error for types the
/// CPU backend does not compute with.
llvm::Expected<tessera_dtype> dtypeOf(mlir::Type elementType);
int64_t dtypeSize(tessera_dtype dtype);

} // namespace tessera::execution

#endif // TESSERA_EXECUTION_HOSTTENSORBUFFER_H
