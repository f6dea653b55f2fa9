//===- HostTensor.h - Constant tensor values held on the host ---*- C++ -*-===//
//
// The ONNX importer folds shape arithmetic and constant subgraphs before it
// emits any MLIR, so it needs a tensor value that lives outside MLIR. A
// HostTensor is that value: an ONNX element type, a shape and the elements.
//
// Storage is deliberately coarse: every integer and bool type is held in one
// int64_t per element and every floating type (FLOAT, DOUBLE, FLOAT16,
// BFLOAT16) in one double per element. This keeps the evaluator's kernels to
// two storage cases instead of one per ONNX type. The price is an invariant
// that every producer must keep: an integer element is always already wrapped
// to its type's width (an INT8 holds -128..127, a BOOL holds 0 or 1, a UINT64
// holds its bit pattern) and a floating element is always exactly
// representable in its type (an fp32 element is a double that came from a
// float). The factory functions establish the invariant; code that writes the
// storage directly must call normalizeStorage() afterwards.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_IMPORT_ONNX_HOSTTENSOR_H
#define TESSERA_IMPORT_ONNX_HOSTTENSOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace onnx {
class TensorProto;
} // namespace onnx

namespace tessera::onnx_import {

/// Returns true for FLOAT, DOUBLE, FLOAT16 and BFLOAT16.
bool isFloatElementType(int32_t elementType);
/// Returns true for the signed and unsigned integer types and BOOL.
bool isIntegerElementType(int32_t elementType);
/// Returns true for the element types a HostTensor can hold: every numeric
/// type and BOOL; not STRING, the complex types or the 8-bit float types.
bool isSupportedElementType(int32_t elementType);
/// The ONNX spelling of an element type ("FLOAT", "INT64", ...), for messages.
std::string elementTypeName(int32_t elementType);
/// Size in bytes of one element in raw_data / external data, 0 if unknown.
int64_t elementByteSize(int32_t elementType);

/// Rounds `value` to the nearest value representable in the floating element
/// type (ties to even). FLOAT16 and BFLOAT16 round through fp32 first, which is
/// what onnxruntime does when it produces those types.
double roundToFloatElementType(double value, int32_t elementType);
/// Wraps `value` to the width of the integer element type the way a C++
/// conversion does (INT8: 200 -> -56; BOOL: nonzero -> 1).
int64_t wrapToIntegerElementType(int64_t value, int32_t elementType);

/// IEEE binary16 and bfloat16 bit conversions, rounding to nearest even.
float halfBitsToFloat(uint16_t bits);
uint16_t floatToHalfBits(float value);
float bfloat16BitsToFloat(uint16_t bits);
uint16_t floatToBfloat16Bits(float value);

class HostTensor {
public:
  /// An empty FLOAT tensor of shape [0]; prefer the factories.
  HostTensor() = default;

  /// Integer or bool tensor; `values` are wrapped to the element type.
  static HostTensor fromInts(int32_t elementType, std::vector<int64_t> shape,
                             std::vector<int64_t> values);
  /// Floating tensor; `values` are rounded to the element type.
  static HostTensor fromDoubles(int32_t elementType, std::vector<int64_t> shape,
                                std::vector<double> values);
  /// A tensor of the given type and shape filled with zeros (false).
  static HostTensor zeros(int32_t elementType, std::vector<int64_t> shape);
  /// Rank-0 tensors.
  static HostTensor scalarInt(int64_t value, int32_t elementType = /*INT64*/ 7);
  static HostTensor scalarDouble(double value,
                                 int32_t elementType = /*FLOAT*/ 1);
  /// Rank-1 INT64 (or other integer type) tensor, as produced by Shape.
  static HostTensor vectorOfInts(llvm::ArrayRef<int64_t> values,
                                 int32_t elementType = /*INT64*/ 7);

  int32_t getElementType() const { return elementType; }
  llvm::ArrayRef<int64_t> getShape() const { return shape; }
  int64_t getRank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numElements() const;

  bool isFloat() const { return isFloatElementType(elementType); }
  /// True for integer types and BOOL (both use the integer storage).
  bool isInteger() const { return !isFloat(); }
  bool isBool() const;
  bool isUnsigned64() const;

  /// Element `flatIndex` in row-major order. getInt truncates floating values
  /// toward zero; getDouble converts integers (UINT64 as unsigned).
  int64_t getInt(int64_t flatIndex) const;
  double getDouble(int64_t flatIndex) const;
  /// The single element of a one-element tensor (any rank).
  int64_t getScalarInt() const { return getInt(0); }
  double getScalarDouble() const { return getDouble(0); }
  /// All elements converted with getInt.
  std::vector<int64_t> toIntVector() const;

  /// Direct storage access. Only the vector matching isFloat() is populated.
  llvm::ArrayRef<int64_t> getIntData() const { return intData; }
  llvm::ArrayRef<double> getFloatData() const { return floatData; }
  std::vector<int64_t> &getMutableIntData() { return intData; }
  std::vector<double> &getMutableFloatData() { return floatData; }

  /// Replaces the shape; the element count must stay the same.
  void setShape(std::vector<int64_t> newShape) { shape = std::move(newShape); }
  /// Re-establishes the storage invariant after direct writes.
  void normalizeStorage();

  /// Same type, shape and elements (NaNs compare equal to NaNs).
  bool isIdenticalTo(const HostTensor &other) const;
  /// "INT64[2x3]" style summary for diagnostics and test output.
  std::string describe() const;

private:
  int32_t elementType = 1;
  std::vector<int64_t> shape = {0};
  std::vector<int64_t> intData;
  std::vector<double> floatData;
};

/// Decodes an initializer or Constant value. Reads raw_data (little endian),
/// the typed repeated fields, and external data (data_location == EXTERNAL,
/// keys "location", "offset", "length", the location relative to
/// `modelDirectory`). Errors name the tensor and, for external data, the file.
llvm::Expected<HostTensor> decodeTensorProto(const onnx::TensorProto &proto,
                                             llvm::StringRef modelDirectory);

} // namespace tessera::onnx_import

#endif // TESSERA_IMPORT_ONNX_HOSTTENSOR_H
