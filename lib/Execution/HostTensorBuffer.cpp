//===- HostTensorBuffer.cpp - an owned tensor for the CPU backend --------===//

#include "tessera/Execution/HostTensorBuffer.h"

#include <cstring>

using namespace mlir;
using namespace tessera::execution;

namespace {

float bf16ToFloat(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

float f16ToFloat(uint16_t bits) {
  // APFloat does the IEEE half decoding (subnormals, inf, nan) for us.
  APFloat half(APFloat::IEEEhalf(), APInt(16, bits));
  bool lost;
  half.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
  return half.convertToFloat();
}

} // namespace

llvm::Expected<tessera_dtype>
tessera::execution::dtypeOf(Type elementType) {
  if (elementType.isF32())
    return TESSERA_F32;
  if (elementType.isBF16())
    return TESSERA_BF16;
  if (elementType.isF16())
    return TESSERA_F16;
  if (elementType.isF64())
    return TESSERA_F64;
  if (elementType.isInteger(64))
    return TESSERA_I64;
  if (elementType.isInteger(32))
    return TESSERA_I32;
  if (elementType.isInteger(16))
    return TESSERA_I16;
  if (elementType.isInteger(8))
    return TESSERA_I8;
  if (elementType.isInteger(1))
    return TESSERA_BOOL;
  std::string name;
  llvm::raw_string_ostream os(name);
  elementType.print(os);
  return llvm::createStringError("the CPU backend does not compute with " +
                                 name);
}

int64_t tessera::execution::dtypeSize(tessera_dtype dtype) {
  switch (dtype) {
  case TESSERA_F64:
  case TESSERA_I64:
    return 8;
  case TESSERA_F32:
  case TESSERA_I32:
    return 4;
  case TESSERA_BF16:
  case TESSERA_F16:
  case TESSERA_I16:
    return 2;
  case TESSERA_I8:
  case TESSERA_BOOL:
    return 1;
  }
  return 0;
}

HostTensorBuffer HostTensorBuffer::zeros(tessera_dtype dtype,
                                         llvm::ArrayRef<int64_t> shape) {
  HostTensorBuffer buffer;
  buffer.elementType = dtype;
  buffer.dims.assign(shape.begin(), shape.end());
  buffer.bytes.assign(buffer.numElements() * dtypeSize(dtype), 0);
  return buffer;
}

llvm::Expected<HostTensorBuffer>
HostTensorBuffer::zeros(RankedTensorType type) {
  llvm::Expected<tessera_dtype> dtype = dtypeOf(type.getElementType());
  if (!dtype)
    return dtype.takeError();
  if (type.getRank() > TESSERA_MAX_RANK)
    return llvm::createStringError("rank " + std::to_string(type.getRank()) +
                                   " exceeds the CPU backend's limit of " +
                                   std::to_string(TESSERA_MAX_RANK));
  return zeros(*dtype, type.getShape());
}

llvm::Expected<HostTensorBuffer>
HostTensorBuffer::fromAttribute(ElementsAttr attribute) {
  auto type = llvm::cast<RankedTensorType>(attribute.getType());
  llvm::Expected<HostTensorBuffer> buffer = zeros(type);
  if (!buffer)
    return buffer.takeError();
  auto dense = llvm::dyn_cast<DenseElementsAttr>(attribute);
  if (!dense)
    return llvm::createStringError("only dense constants can be executed");
  Type element = type.getElementType();
  uint8_t *out = buffer->bytes.data();
  // Splats are expanded by getValues; both loops write each element's
  // storage bits in the kernels' layout.
  if (llvm::isa<FloatType>(element)) {
    int64_t i = 0;
    for (const APFloat &value : dense.getValues<APFloat>()) {
      APInt bits = value.bitcastToAPInt();
      uint64_t word = bits.getZExtValue();
      std::memcpy(out + i * dtypeSize(buffer->dtype()), &word,
                  dtypeSize(buffer->dtype()));
      ++i;
    }
    return std::move(*buffer);
  }
  int64_t i = 0;
  for (const APInt &value : dense.getValues<APInt>()) {
    int64_t number = element.isInteger(1) ? value.getZExtValue()
                                          : value.getSExtValue();
    std::memcpy(out + i * dtypeSize(buffer->dtype()), &number,
                dtypeSize(buffer->dtype()));
    ++i;
  }
  return std::move(*buffer);
}

HostTensorBuffer HostTensorBuffer::fromFloats(llvm::ArrayRef<int64_t> shape,
                                              llvm::ArrayRef<float> values) {
  HostTensorBuffer buffer = zeros(TESSERA_F32, shape);
  std::memcpy(buffer.bytes.data(), values.data(),
              std::min<size_t>(buffer.bytes.size(), values.size() * 4));
  return buffer;
}

HostTensorBuffer HostTensorBuffer::fromInts(llvm::ArrayRef<int64_t> shape,
                                            llvm::ArrayRef<int64_t> values) {
  HostTensorBuffer buffer = zeros(TESSERA_I64, shape);
  std::memcpy(buffer.bytes.data(), values.data(),
              std::min<size_t>(buffer.bytes.size(), values.size() * 8));
  return buffer;
}

int64_t HostTensorBuffer::numElements() const {
  int64_t count = 1;
  for (int64_t dim : dims)
    count *= dim;
  return count;
}

tessera_tensor HostTensorBuffer::descriptor() {
  tessera_tensor tensor{};
  tensor.data = bytes.data();
  tensor.dtype = elementType;
  tensor.rank = static_cast<int32_t>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    tensor.shape[i] = dims[i];
  return tensor;
}

const tessera_tensor *HostTensorBuffer::constDescriptor() {
  view = descriptor();
  return &view;
}

double HostTensorBuffer::getDouble(int64_t index) const {
  const uint8_t *element = bytes.data() + index * dtypeSize(elementType);
  switch (elementType) {
  case TESSERA_F32: {
    float value;
    std::memcpy(&value, element, 4);
    return value;
  }
  case TESSERA_F64: {
    double value;
    std::memcpy(&value, element, 8);
    return value;
  }
  case TESSERA_BF16:
  case TESSERA_F16: {
    uint16_t bits;
    std::memcpy(&bits, element, 2);
    return elementType == TESSERA_BF16 ? bf16ToFloat(bits) : f16ToFloat(bits);
  }
  default:
    return static_cast<double>(getInt(index));
  }
}

int64_t HostTensorBuffer::getInt(int64_t index) const {
  const uint8_t *element = bytes.data() + index * dtypeSize(elementType);
  switch (elementType) {
  case TESSERA_I64: {
    int64_t value;
    std::memcpy(&value, element, 8);
    return value;
  }
  case TESSERA_I32: {
    int32_t value;
    std::memcpy(&value, element, 4);
    return value;
  }
  case TESSERA_I16: {
    int16_t value;
    std::memcpy(&value, element, 2);
    return value;
  }
  case TESSERA_I8:
    return static_cast<int8_t>(*element);
  case TESSERA_BOOL:
    return *element != 0;
  default:
    return static_cast<int64_t>(getDouble(index));
  }
}

std::vector<float> HostTensorBuffer::toFloats() const {
  std::vector<float> values(numElements());
  for (int64_t i = 0; i < numElements(); ++i)
    values[i] = static_cast<float>(getDouble(i));
  return values;
}
