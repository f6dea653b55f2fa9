//===- HostTensor.cpp - Constant tensor values held on the host -----------===//
//
// Element type helpers, fp16/bf16 bit conversions and TensorProto decoding.
// Decoding is strict: a tensor whose payload does not match its declared shape
// is an error rather than a silently padded or truncated value, because a
// folded constant feeds shape arithmetic where a wrong number is a wrong
// program.
//
//===----------------------------------------------------------------------===//

#include "tessera/Import/ONNX/HostTensor.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

using namespace tessera::onnx_import;
using onnx::TensorProto;

namespace {

uint32_t floatToBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Product of `shape`, or -1 if a dimension is negative or the product does
/// not fit in int64_t.
int64_t checkedElementCount(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      return -1;
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim)
      return -1;
    count *= dim;
  }
  return count;
}

} // namespace

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

bool tessera::onnx_import::isFloatElementType(int32_t elementType) {
  switch (elementType) {
  case TensorProto::FLOAT:
  case TensorProto::DOUBLE:
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    return true;
  default:
    return false;
  }
}

bool tessera::onnx_import::isIntegerElementType(int32_t elementType) {
  switch (elementType) {
  case TensorProto::INT8:
  case TensorProto::INT16:
  case TensorProto::INT32:
  case TensorProto::INT64:
  case TensorProto::UINT8:
  case TensorProto::UINT16:
  case TensorProto::UINT32:
  case TensorProto::UINT64:
  case TensorProto::BOOL:
    return true;
  default:
    return false;
  }
}

bool tessera::onnx_import::isSupportedElementType(int32_t elementType) {
  return isFloatElementType(elementType) || isIntegerElementType(elementType);
}

std::string tessera::onnx_import::elementTypeName(int32_t elementType) {
  if (TensorProto::DataType_IsValid(elementType))
    return TensorProto::DataType_Name(
        static_cast<TensorProto::DataType>(elementType));
  return "<unknown element type " + std::to_string(elementType) + ">";
}

int64_t tessera::onnx_import::elementByteSize(int32_t elementType) {
  switch (elementType) {
  case TensorProto::BOOL:
  case TensorProto::INT8:
  case TensorProto::UINT8:
    return 1;
  case TensorProto::INT16:
  case TensorProto::UINT16:
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    return 2;
  case TensorProto::INT32:
  case TensorProto::UINT32:
  case TensorProto::FLOAT:
    return 4;
  case TensorProto::INT64:
  case TensorProto::UINT64:
  case TensorProto::DOUBLE:
    return 8;
  default:
    return 0;
  }
}

float tessera::onnx_import::halfBitsToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24 is exact in fp32.
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return bitsToFloat(sign | 0x7f800000 | (mantissa << 13));
  return bitsToFloat(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

uint16_t tessera::onnx_import::floatToHalfBits(float value) {
  uint32_t bits = floatToBits(value);
  uint32_t sign = (bits >> 16) & 0x8000;
  uint32_t magnitudeBits = bits & 0x7fffffff;
  if (magnitudeBits >= 0x7f800000) {
    // Infinity stays infinity; NaN keeps its top payload bits and stays quiet.
    uint32_t payload = magnitudeBits > 0x7f800000
                           ? (0x200 | ((magnitudeBits >> 13) & 0x3ff))
                           : 0;
    return static_cast<uint16_t>(sign | 0x7c00 | payload);
  }
  // 65520 is halfway between the largest half (65504) and 2^16; ties go to
  // the even neighbour, which is infinity.
  if (magnitudeBits >= 0x477ff000)
    return static_cast<uint16_t>(sign | 0x7c00);
  if (magnitudeBits < 0x38800000) {
    // Below 2^-14 the result is subnormal with a unit of 2^-24. Scaling by a
    // power of two is exact, and nearbyint rounds ties to even. A result of
    // 1024 is the encoding of the smallest normal, which is what we want.
    float scaled = bitsToFloat(magnitudeBits) * 0x1p24f;
    return static_cast<uint16_t>(sign |
                                 static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t exponent = (magnitudeBits >> 23) - 127 + 15;
  uint32_t mantissa = magnitudeBits & 0x7fffff;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  uint32_t dropped = mantissa & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent.
  if (dropped > 0x1000 || (dropped == 0x1000 && (half & 1)))
    ++half;
  return static_cast<uint16_t>(sign | half);
}

float tessera::onnx_import::bfloat16BitsToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

uint16_t tessera::onnx_import::floatToBfloat16Bits(float value) {
  uint32_t bits = floatToBits(value);
  if ((bits & 0x7fffffff) > 0x7f800000)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t roundingBias = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + roundingBias) >> 16);
}

double tessera::onnx_import::roundToFloatElementType(double value,
                                                     int32_t elementType) {
  switch (elementType) {
  case TensorProto::FLOAT:
    return static_cast<float>(value);
  case TensorProto::FLOAT16:
    return halfBitsToFloat(floatToHalfBits(static_cast<float>(value)));
  case TensorProto::BFLOAT16:
    return bfloat16BitsToFloat(floatToBfloat16Bits(static_cast<float>(value)));
  default:
    return value;
  }
}

int64_t tessera::onnx_import::wrapToIntegerElementType(int64_t value,
                                                       int32_t elementType) {
  switch (elementType) {
  case TensorProto::BOOL:
    return value != 0;
  case TensorProto::INT8:
    return static_cast<int8_t>(value);
  case TensorProto::UINT8:
    return static_cast<uint8_t>(value);
  case TensorProto::INT16:
    return static_cast<int16_t>(value);
  case TensorProto::UINT16:
    return static_cast<uint16_t>(value);
  case TensorProto::INT32:
    return static_cast<int32_t>(value);
  case TensorProto::UINT32:
    return static_cast<uint32_t>(value);
  default:
    return value;
  }
}

//===----------------------------------------------------------------------===//
// HostTensor
//===----------------------------------------------------------------------===//

HostTensor HostTensor::fromInts(int32_t elementType, std::vector<int64_t> shape,
                                std::vector<int64_t> values) {
  HostTensor tensor;
  tensor.elementType = elementType;
  tensor.shape = std::move(shape);
  if (isFloatElementType(elementType)) {
    tensor.floatData.assign(values.begin(), values.end());
  } else {
    tensor.intData = std::move(values);
  }
  tensor.normalizeStorage();
  return tensor;
}

HostTensor HostTensor::fromDoubles(int32_t elementType,
                                   std::vector<int64_t> shape,
                                   std::vector<double> values) {
  HostTensor tensor;
  tensor.elementType = elementType;
  tensor.shape = std::move(shape);
  if (isFloatElementType(elementType)) {
    tensor.floatData = std::move(values);
  } else {
    tensor.intData.reserve(values.size());
    for (double value : values)
      tensor.intData.push_back(static_cast<int64_t>(value));
  }
  tensor.normalizeStorage();
  return tensor;
}

HostTensor HostTensor::zeros(int32_t elementType, std::vector<int64_t> shape) {
  HostTensor tensor;
  tensor.elementType = elementType;
  tensor.shape = std::move(shape);
  int64_t count = tensor.numElements();
  if (tensor.isFloat())
    tensor.floatData.assign(count, 0.0);
  else
    tensor.intData.assign(count, 0);
  return tensor;
}

HostTensor HostTensor::scalarInt(int64_t value, int32_t elementType) {
  return fromInts(elementType, {}, {value});
}

HostTensor HostTensor::scalarDouble(double value, int32_t elementType) {
  return fromDoubles(elementType, {}, {value});
}

HostTensor HostTensor::vectorOfInts(llvm::ArrayRef<int64_t> values,
                                    int32_t elementType) {
  return fromInts(elementType, {static_cast<int64_t>(values.size())},
                  std::vector<int64_t>(values.begin(), values.end()));
}

int64_t HostTensor::numElements() const {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

bool HostTensor::isBool() const { return elementType == TensorProto::BOOL; }

bool HostTensor::isUnsigned64() const {
  return elementType == TensorProto::UINT64;
}

int64_t HostTensor::getInt(int64_t flatIndex) const {
  if (isFloat())
    return static_cast<int64_t>(floatData[flatIndex]);
  return intData[flatIndex];
}

double HostTensor::getDouble(int64_t flatIndex) const {
  if (isFloat())
    return floatData[flatIndex];
  if (isUnsigned64())
    return static_cast<double>(static_cast<uint64_t>(intData[flatIndex]));
  return static_cast<double>(intData[flatIndex]);
}

std::vector<int64_t> HostTensor::toIntVector() const {
  if (!isFloat())
    return intData;
  std::vector<int64_t> values;
  values.reserve(floatData.size());
  for (double value : floatData)
    values.push_back(static_cast<int64_t>(value));
  return values;
}

void HostTensor::normalizeStorage() {
  switch (elementType) {
  case TensorProto::FLOAT:
    for (double &value : floatData)
      value = static_cast<float>(value);
    return;
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    for (double &value : floatData)
      value = roundToFloatElementType(value, elementType);
    return;
  case TensorProto::DOUBLE:
  case TensorProto::INT64:
  case TensorProto::UINT64:
    return;
  default:
    for (int64_t &value : intData)
      value = wrapToIntegerElementType(value, elementType);
    return;
  }
}

bool HostTensor::isIdenticalTo(const HostTensor &other) const {
  if (elementType != other.elementType || shape != other.shape)
    return false;
  if (!isFloat())
    return intData == other.intData;
  if (floatData.size() != other.floatData.size())
    return false;
  for (size_t i = 0, e = floatData.size(); i != e; ++i) {
    double lhs = floatData[i], rhs = other.floatData[i];
    if (std::isnan(lhs) && std::isnan(rhs))
      continue;
    // Compare bits so that -0.0 and 0.0 are told apart.
    if (std::memcmp(&lhs, &rhs, sizeof(double)) != 0)
      return false;
  }
  return true;
}

std::string HostTensor::describe() const {
  std::string text = elementTypeName(elementType) + "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += "x";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

//===----------------------------------------------------------------------===//
// TensorProto decoding
//===----------------------------------------------------------------------===//

namespace {

/// Decodes `count` little-endian elements of `elementType` from `bytes`.
HostTensor decodeLittleEndianBytes(int32_t elementType,
                                   std::vector<int64_t> shape, int64_t count,
                                   const char *bytes) {
  using llvm::endianness;
  using llvm::support::endian::read;
  HostTensor tensor = HostTensor::zeros(elementType, std::move(shape));
  if (tensor.isFloat()) {
    std::vector<double> &out = tensor.getMutableFloatData();
    for (int64_t i = 0; i < count; ++i) {
      switch (elementType) {
      case TensorProto::FLOAT:
        out[i] = bitsToFloat(read<uint32_t, endianness::little>(bytes + 4 * i));
        break;
      case TensorProto::DOUBLE: {
        uint64_t bits = read<uint64_t, endianness::little>(bytes + 8 * i);
        std::memcpy(&out[i], &bits, sizeof(double));
        break;
      }
      case TensorProto::FLOAT16:
        out[i] =
            halfBitsToFloat(read<uint16_t, endianness::little>(bytes + 2 * i));
        break;
      default:
        out[i] = bfloat16BitsToFloat(
            read<uint16_t, endianness::little>(bytes + 2 * i));
        break;
      }
    }
    return tensor;
  }
  std::vector<int64_t> &out = tensor.getMutableIntData();
  for (int64_t i = 0; i < count; ++i) {
    switch (elementType) {
    case TensorProto::BOOL:
      out[i] = bytes[i] != 0;
      break;
    case TensorProto::INT8:
      out[i] = static_cast<int8_t>(bytes[i]);
      break;
    case TensorProto::UINT8:
      out[i] = static_cast<uint8_t>(bytes[i]);
      break;
    case TensorProto::INT16:
      out[i] = static_cast<int16_t>(
          read<uint16_t, endianness::little>(bytes + 2 * i));
      break;
    case TensorProto::UINT16:
      out[i] = read<uint16_t, endianness::little>(bytes + 2 * i);
      break;
    case TensorProto::INT32:
      out[i] = static_cast<int32_t>(
          read<uint32_t, endianness::little>(bytes + 4 * i));
      break;
    case TensorProto::UINT32:
      out[i] = read<uint32_t, endianness::little>(bytes + 4 * i);
      break;
    default: // INT64, UINT64: keep the bit pattern.
      out[i] = static_cast<int64_t>(
          read<uint64_t, endianness::little>(bytes + 8 * i));
      break;
    }
  }
  return tensor;
}

/// Decodes the typed repeated field that ONNX uses for `elementType`.
llvm::Expected<HostTensor> decodeTypedFields(const TensorProto &proto,
                                             const std::string &tensorName,
                                             std::vector<int64_t> shape,
                                             int64_t count) {
  int32_t elementType = proto.data_type();
  auto checkCount = [&](int64_t fieldSize,
                        llvm::StringRef fieldName) -> llvm::Error {
    if (fieldSize == count)
      return llvm::Error::success();
    return makeError("tensor '" + tensorName + "' has " +
                     llvm::Twine(fieldSize) + " values in " + fieldName +
                     " but its shape needs " + llvm::Twine(count));
  };
  HostTensor tensor = HostTensor::zeros(elementType, std::move(shape));
  switch (elementType) {
  case TensorProto::FLOAT: {
    if (llvm::Error error = checkCount(proto.float_data_size(), "float_data"))
      return error;
    std::vector<double> &out = tensor.getMutableFloatData();
    for (int64_t i = 0; i < count; ++i)
      out[i] = proto.float_data(i);
    return tensor;
  }
  case TensorProto::DOUBLE: {
    if (llvm::Error error = checkCount(proto.double_data_size(), "double_data"))
      return error;
    std::vector<double> &out = tensor.getMutableFloatData();
    for (int64_t i = 0; i < count; ++i)
      out[i] = proto.double_data(i);
    return tensor;
  }
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16: {
    // int32_data holds the 16-bit patterns, one per entry.
    if (llvm::Error error = checkCount(proto.int32_data_size(), "int32_data"))
      return error;
    std::vector<double> &out = tensor.getMutableFloatData();
    for (int64_t i = 0; i < count; ++i) {
      auto bits = static_cast<uint16_t>(proto.int32_data(i));
      out[i] = elementType == TensorProto::FLOAT16 ? halfBitsToFloat(bits)
                                                   : bfloat16BitsToFloat(bits);
    }
    return tensor;
  }
  case TensorProto::INT64: {
    if (llvm::Error error = checkCount(proto.int64_data_size(), "int64_data"))
      return error;
    std::vector<int64_t> &out = tensor.getMutableIntData();
    for (int64_t i = 0; i < count; ++i)
      out[i] = proto.int64_data(i);
    return tensor;
  }
  case TensorProto::UINT32:
  case TensorProto::UINT64: {
    if (llvm::Error error = checkCount(proto.uint64_data_size(), "uint64_data"))
      return error;
    std::vector<int64_t> &out = tensor.getMutableIntData();
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<int64_t>(proto.uint64_data(i));
    tensor.normalizeStorage();
    return tensor;
  }
  default: {
    // BOOL, INT8, UINT8, INT16, UINT16 and INT32 all live in int32_data.
    if (llvm::Error error = checkCount(proto.int32_data_size(), "int32_data"))
      return error;
    std::vector<int64_t> &out = tensor.getMutableIntData();
    for (int64_t i = 0; i < count; ++i)
      out[i] = proto.int32_data(i);
    tensor.normalizeStorage();
    return tensor;
  }
  }
}

llvm::Expected<HostTensor> decodeExternalData(const TensorProto &proto,
                                              const std::string &tensorName,
                                              llvm::StringRef modelDirectory,
                                              std::vector<int64_t> shape,
                                              int64_t count) {
  std::string location;
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  for (const onnx::StringStringEntryProto &entry : proto.external_data()) {
    llvm::StringRef value = entry.value();
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      if (value.getAsInteger(10, offset))
        return makeError("tensor '" + tensorName +
                         "' has an invalid external data offset '" + value +
                         "'");
    } else if (entry.key() == "length") {
      uint64_t parsed;
      if (value.getAsInteger(10, parsed))
        return makeError("tensor '" + tensorName +
                         "' has an invalid external data length '" + value +
                         "'");
      length = parsed;
    }
  }
  if (location.empty())
    return makeError("tensor '" + tensorName +
                     "' is stored externally but has no 'location' key");

  llvm::SmallString<256> path;
  if (llvm::sys::path::is_absolute(location)) {
    path = location;
  } else {
    path = modelDirectory;
    llvm::sys::path::append(path, location);
  }

  uint64_t expectedBytes =
      static_cast<uint64_t>(count) * elementByteSize(proto.data_type());
  if (length && *length != expectedBytes)
    return makeError("tensor '" + tensorName + "' declares " +
                     llvm::Twine(*length) + " bytes of external data in '" +
                     path + "' but its shape needs " +
                     llvm::Twine(expectedBytes));

  uint64_t fileSize = 0;
  if (std::error_code code = llvm::sys::fs::file_size(path, fileSize))
    return makeError("cannot read external data file '" + path +
                     "' of tensor '" + tensorName + "': " + code.message());
  if (offset > fileSize || fileSize - offset < expectedBytes)
    return makeError("external data file '" + path + "' of tensor '" +
                     tensorName + "' is too short: need " +
                     llvm::Twine(expectedBytes) + " bytes at offset " +
                     llvm::Twine(offset) + ", file has " +
                     llvm::Twine(fileSize) + " bytes");
  if (expectedBytes == 0)
    return HostTensor::zeros(proto.data_type(), std::move(shape));

  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFileSlice(path, expectedBytes, offset,
                                       /*IsVolatile=*/false);
  if (!buffer)
    return makeError("cannot read external data file '" + path +
                     "' of tensor '" + tensorName +
                     "': " + buffer.getError().message());
  if ((*buffer)->getBufferSize() != expectedBytes)
    return makeError("short read from external data file '" + path +
                     "' of tensor '" + tensorName + "'");
  return decodeLittleEndianBytes(proto.data_type(), std::move(shape), count,
                                 (*buffer)->getBufferStart());
}

} // namespace

llvm::Expected<HostTensor>
tessera::onnx_import::decodeTensorProto(const TensorProto &proto,
                                        llvm::StringRef modelDirectory) {
  std::string tensorName = proto.name().empty() ? "<unnamed>" : proto.name();
  int32_t elementType = proto.data_type();
  if (!isSupportedElementType(elementType))
    return makeError("tensor '" + tensorName + "' has element type " +
                     elementTypeName(elementType) +
                     ", which constant evaluation does not support");
  std::vector<int64_t> shape(proto.dims().begin(), proto.dims().end());
  int64_t count = checkedElementCount(shape);
  if (count < 0)
    return makeError("tensor '" + tensorName +
                     "' has a negative dimension or too many elements");
  if (proto.has_segment())
    return makeError("tensor '" + tensorName +
                     "' is segmented, which is not supported");

  if (proto.data_location() == TensorProto::EXTERNAL)
    return decodeExternalData(proto, tensorName, modelDirectory,
                              std::move(shape), count);

  if (proto.has_raw_data()) {
    uint64_t expectedBytes =
        static_cast<uint64_t>(count) * elementByteSize(elementType);
    if (proto.raw_data().size() != expectedBytes)
      return makeError("tensor '" + tensorName + "' has " +
                       llvm::Twine(proto.raw_data().size()) +
                       " bytes of raw_data but its shape needs " +
                       llvm::Twine(expectedBytes));
    return decodeLittleEndianBytes(elementType, std::move(shape), count,
                                   proto.raw_data().data());
  }
  return decodeTypedFields(proto, tensorName, std::move(shape), count);
}
