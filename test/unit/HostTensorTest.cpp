//===- HostTensorTest.cpp - HostTensor and TensorProto decoding tests -----===//

#include "tessera/Import/ONNX/HostTensor.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace tessera::onnx_import;
using onnx::TensorProto;

namespace {

/// Little-endian bytes of `values`, as raw_data stores them.
template <typename T> std::string littleEndianBytes(std::vector<T> values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint64_t bits = 0;
    std::memcpy(&bits, &values[i], sizeof(T));
    for (size_t b = 0; b < sizeof(T); ++b)
      bytes[i * sizeof(T) + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  return bytes;
}

TensorProto makeProto(const std::string &name, int32_t elementType,
                      std::vector<int64_t> dims) {
  TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(elementType);
  for (int64_t dim : dims)
    proto.add_dims(dim);
  return proto;
}

HostTensor decodeOrFail(const TensorProto &proto,
                        llvm::StringRef directory = "") {
  llvm::Expected<HostTensor> tensor = decodeTensorProto(proto, directory);
  if (!tensor) {
    ADD_FAILURE() << llvm::toString(tensor.takeError());
    return HostTensor();
  }
  return std::move(*tensor);
}

std::string decodeError(const TensorProto &proto,
                        llvm::StringRef directory = "") {
  llvm::Expected<HostTensor> tensor = decodeTensorProto(proto, directory);
  if (tensor) {
    ADD_FAILURE() << "expected an error, got " << tensor->describe();
    return "";
  }
  return llvm::toString(tensor.takeError());
}

/// A fresh directory under the system temporary directory.
std::string makeTemporaryDirectory() {
  llvm::SmallString<128> path;
  std::error_code code =
      llvm::sys::fs::createUniqueDirectory("tessera-hosttensor", path);
  EXPECT_FALSE(code) << code.message();
  return std::string(path);
}

void writeFile(const std::string &path, const std::string &contents) {
  std::error_code code;
  llvm::raw_fd_ostream stream(path, code);
  ASSERT_FALSE(code) << code.message();
  stream << contents;
}

//===----------------------------------------------------------------------===//
// HostTensor basics
//===----------------------------------------------------------------------===//

TEST(HostTensorTest, FactoriesEstablishTheStorageInvariant) {
  HostTensor int8 =
      HostTensor::fromInts(TensorProto::INT8, {3}, {200, -129, 5});
  EXPECT_EQ(int8.toIntVector(), (std::vector<int64_t>{-56, 127, 5}));
  HostTensor boolean = HostTensor::fromInts(TensorProto::BOOL, {2}, {7, 0});
  EXPECT_EQ(boolean.toIntVector(), (std::vector<int64_t>{1, 0}));
  HostTensor fp32 = HostTensor::fromDoubles(TensorProto::FLOAT, {1}, {0.1});
  EXPECT_EQ(fp32.getDouble(0), static_cast<double>(0.1f));
  HostTensor fp16 = HostTensor::fromDoubles(TensorProto::FLOAT16, {1}, {0.1});
  EXPECT_EQ(fp16.getDouble(0), 0.0999755859375);
  HostTensor uint32 = HostTensor::fromInts(TensorProto::UINT32, {1}, {-1});
  EXPECT_EQ(uint32.getInt(0), 4294967295);
}

TEST(HostTensorTest, Accessors) {
  HostTensor tensor = HostTensor::fromDoubles(TensorProto::DOUBLE, {2, 3},
                                              {1.5, -2.5, 3, 4, 5, 6});
  EXPECT_EQ(tensor.numElements(), 6);
  EXPECT_EQ(tensor.getRank(), 2);
  EXPECT_TRUE(tensor.isFloat());
  EXPECT_FALSE(tensor.isInteger());
  EXPECT_EQ(tensor.getInt(1), -2); // Truncates toward zero.
  EXPECT_EQ(tensor.describe(), "DOUBLE[2x3]");

  HostTensor scalar = HostTensor::scalarInt(42);
  EXPECT_EQ(scalar.getRank(), 0);
  EXPECT_EQ(scalar.numElements(), 1);
  EXPECT_EQ(scalar.getElementType(), TensorProto::INT64);
  EXPECT_EQ(scalar.getScalarInt(), 42);
  EXPECT_EQ(scalar.getScalarDouble(), 42.0);

  HostTensor big = HostTensor::fromInts(TensorProto::UINT64, {1}, {-1});
  EXPECT_EQ(big.getDouble(0), 18446744073709551615.0);

  HostTensor empty = HostTensor::zeros(TensorProto::INT32, {0, 4});
  EXPECT_EQ(empty.numElements(), 0);
  EXPECT_TRUE(HostTensor().isIdenticalTo(
      HostTensor::fromDoubles(TensorProto::FLOAT, {0}, {})));
  EXPECT_TRUE(HostTensor::vectorOfInts({1, 2}).isIdenticalTo(
      HostTensor::fromInts(TensorProto::INT64, {2}, {1, 2})));
  EXPECT_FALSE(HostTensor::scalarDouble(0.0).isIdenticalTo(
      HostTensor::scalarDouble(-0.0)));
}

TEST(HostTensorTest, ElementTypeHelpers) {
  EXPECT_TRUE(isFloatElementType(TensorProto::BFLOAT16));
  EXPECT_FALSE(isFloatElementType(TensorProto::INT64));
  EXPECT_TRUE(isIntegerElementType(TensorProto::BOOL));
  EXPECT_FALSE(isSupportedElementType(TensorProto::STRING));
  EXPECT_EQ(elementTypeName(TensorProto::FLOAT16), "FLOAT16");
  EXPECT_EQ(elementByteSize(TensorProto::UINT16), 2);
  EXPECT_EQ(wrapToIntegerElementType(65536 + 3, TensorProto::UINT16), 3);
}

//===----------------------------------------------------------------------===//
// fp16 / bf16 conversions
//===----------------------------------------------------------------------===//

TEST(HostTensorTest, HalfRoundTripsEveryNonNaNPattern) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    float value = halfBitsToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(value)) {
      EXPECT_TRUE((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0);
      EXPECT_TRUE(std::isnan(halfBitsToFloat(floatToHalfBits(value))));
      continue;
    }
    ASSERT_EQ(floatToHalfBits(value), bits) << "bits 0x" << std::hex << bits;
  }
  EXPECT_EQ(halfBitsToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfBitsToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfBitsToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfBitsToFloat(0xfc00), -INFINITY);
}

TEST(HostTensorTest, FloatToHalfRoundsToNearestEven) {
  // Expected bits from numpy's float32 -> float16 conversion.
  struct Case {
    float value;
    uint16_t bits;
  };
  const Case cases[] = {
      {0x1.002p+0f, 0x3c00},     {0x1.006p+0f, 0x3c02},
      {0x1.ffdffep+15f, 0x7bff}, {0x1.ffep+15f, 0x7c00},
      {0x1p-25f, 0x0000},        {0x1.8p-24f, 0x0002},
      {0x1.ffcp-15f, 0x0400},    {-0.0f, 0x8000},
      {0x1.99999ap-4f, 0x2e66},  {0x1.5798eep-27f, 0x0000},
      {-1e5f, 0xfc00},           {0x1.ffb48p-15f, 0x03ff},
      {2049.0f, 0x6800},         {2051.0f, 0x6802},
  };
  for (const Case &c : cases)
    EXPECT_EQ(floatToHalfBits(c.value), c.bits) << c.value;
}

TEST(HostTensorTest, FloatToBfloat16MatchesOnnxruntime) {
  // Expected bits from onnxruntime Cast(FLOAT -> BFLOAT16).
  struct Case {
    float value;
    uint16_t bits;
  };
  const Case cases[] = {
      {0.1f, 0x3dcd},           {3.14159f, 0x4049},  {1.00390625f, 0x3f80},
      {1.01171875f, 0x3f82},    {-65504.0f, 0xc780}, {3.4e38f, 0x7f80},
      {0x1.16c2p-133f, 0x0001},
  };
  for (const Case &c : cases)
    EXPECT_EQ(floatToBfloat16Bits(c.value), c.bits) << c.value;
  EXPECT_EQ(bfloat16BitsToFloat(0x4049), 3.140625f);
  EXPECT_TRUE(std::isnan(bfloat16BitsToFloat(floatToBfloat16Bits(NAN))));
}

//===----------------------------------------------------------------------===//
// raw_data
//===----------------------------------------------------------------------===//

TEST(HostTensorTest, DecodesRawDataOfEveryType) {
  TensorProto fp32 = makeProto("fp32", TensorProto::FLOAT, {2});
  fp32.set_raw_data(littleEndianBytes<float>({1.5f, -0.1f}));
  EXPECT_TRUE(decodeOrFail(fp32).isIdenticalTo(
      HostTensor::fromDoubles(TensorProto::FLOAT, {2}, {1.5, -0.1})));

  TensorProto fp64 = makeProto("fp64", TensorProto::DOUBLE, {1});
  fp64.set_raw_data(littleEndianBytes<double>({0.1}));
  EXPECT_EQ(decodeOrFail(fp64).getDouble(0), 0.1);

  TensorProto int64 = makeProto("int64", TensorProto::INT64, {2, 1});
  int64.set_raw_data(littleEndianBytes<int64_t>({-3, INT64_MAX}));
  HostTensor decoded = decodeOrFail(int64);
  EXPECT_EQ(decoded.getShape(), (llvm::ArrayRef<int64_t>{2, 1}));
  EXPECT_EQ(decoded.toIntVector(), (std::vector<int64_t>{-3, INT64_MAX}));

  TensorProto int32 = makeProto("int32", TensorProto::INT32, {2});
  int32.set_raw_data(littleEndianBytes<int32_t>({-7, 1 << 30}));
  EXPECT_EQ(decodeOrFail(int32).toIntVector(),
            (std::vector<int64_t>{-7, 1 << 30}));

  TensorProto int16 = makeProto("int16", TensorProto::INT16, {2});
  int16.set_raw_data(littleEndianBytes<int16_t>({-2, 300}));
  EXPECT_EQ(decodeOrFail(int16).toIntVector(), (std::vector<int64_t>{-2, 300}));

  TensorProto uint16 = makeProto("uint16", TensorProto::UINT16, {1});
  uint16.set_raw_data(littleEndianBytes<uint16_t>({65535}));
  EXPECT_EQ(decodeOrFail(uint16).getInt(0), 65535);

  TensorProto int8 = makeProto("int8", TensorProto::INT8, {2});
  int8.set_raw_data(littleEndianBytes<int8_t>({-128, 127}));
  EXPECT_EQ(decodeOrFail(int8).toIntVector(),
            (std::vector<int64_t>{-128, 127}));

  TensorProto uint8 = makeProto("uint8", TensorProto::UINT8, {1});
  uint8.set_raw_data(littleEndianBytes<uint8_t>({255}));
  EXPECT_EQ(decodeOrFail(uint8).getInt(0), 255);

  TensorProto uint32 = makeProto("uint32", TensorProto::UINT32, {1});
  uint32.set_raw_data(littleEndianBytes<uint32_t>({4000000000u}));
  EXPECT_EQ(decodeOrFail(uint32).getInt(0), 4000000000);

  TensorProto uint64 = makeProto("uint64", TensorProto::UINT64, {1});
  uint64.set_raw_data(littleEndianBytes<uint64_t>({UINT64_MAX}));
  EXPECT_EQ(decodeOrFail(uint64).getDouble(0), 18446744073709551615.0);

  TensorProto boolean = makeProto("bool", TensorProto::BOOL, {3});
  boolean.set_raw_data(littleEndianBytes<uint8_t>({1, 0, 1}));
  EXPECT_EQ(decodeOrFail(boolean).toIntVector(),
            (std::vector<int64_t>{1, 0, 1}));

  TensorProto fp16 = makeProto("fp16", TensorProto::FLOAT16, {3});
  fp16.set_raw_data(littleEndianBytes<uint16_t>({0x3c00, 0xc000, 0x2e66}));
  EXPECT_EQ(decodeOrFail(fp16).getFloatData(),
            (llvm::ArrayRef<double>{1.0, -2.0, 0.0999755859375}));

  TensorProto bf16 = makeProto("bf16", TensorProto::BFLOAT16, {2});
  bf16.set_raw_data(littleEndianBytes<uint16_t>({0x4049, 0xbf80}));
  EXPECT_EQ(decodeOrFail(bf16).getFloatData(),
            (llvm::ArrayRef<double>{3.140625, -1.0}));

  TensorProto scalar = makeProto("scalar", TensorProto::INT64, {});
  scalar.set_raw_data(littleEndianBytes<int64_t>({9}));
  HostTensor scalarTensor = decodeOrFail(scalar);
  EXPECT_EQ(scalarTensor.getRank(), 0);
  EXPECT_EQ(scalarTensor.getScalarInt(), 9);

  TensorProto empty = makeProto("empty", TensorProto::FLOAT, {0, 3});
  empty.set_raw_data("");
  EXPECT_EQ(decodeOrFail(empty).numElements(), 0);
}

//===----------------------------------------------------------------------===//
// Typed fields
//===----------------------------------------------------------------------===//

TEST(HostTensorTest, DecodesTypedFields) {
  TensorProto fp32 = makeProto("fp32", TensorProto::FLOAT, {2});
  fp32.add_float_data(0.5f);
  fp32.add_float_data(-0.1f);
  EXPECT_EQ(decodeOrFail(fp32).getFloatData(),
            (llvm::ArrayRef<double>{0.5, static_cast<double>(-0.1f)}));

  TensorProto fp64 = makeProto("fp64", TensorProto::DOUBLE, {1});
  fp64.add_double_data(0.1);
  EXPECT_EQ(decodeOrFail(fp64).getDouble(0), 0.1);

  TensorProto int64 = makeProto("int64", TensorProto::INT64, {2});
  int64.add_int64_data(INT64_MIN);
  int64.add_int64_data(5);
  EXPECT_EQ(decodeOrFail(int64).toIntVector(),
            (std::vector<int64_t>{INT64_MIN, 5}));

  // int32_data carries bool, int8 and the 16-bit float patterns.
  TensorProto boolean = makeProto("bool", TensorProto::BOOL, {2});
  boolean.add_int32_data(1);
  boolean.add_int32_data(0);
  EXPECT_EQ(decodeOrFail(boolean).toIntVector(), (std::vector<int64_t>{1, 0}));

  TensorProto int8 = makeProto("int8", TensorProto::INT8, {1});
  int8.add_int32_data(-5);
  EXPECT_EQ(decodeOrFail(int8).getInt(0), -5);

  TensorProto uint8 = makeProto("uint8", TensorProto::UINT8, {1});
  uint8.add_int32_data(200);
  EXPECT_EQ(decodeOrFail(uint8).getInt(0), 200);

  TensorProto fp16 = makeProto("fp16", TensorProto::FLOAT16, {2});
  fp16.add_int32_data(0x3c00);
  fp16.add_int32_data(0x7bff);
  EXPECT_EQ(decodeOrFail(fp16).getFloatData(),
            (llvm::ArrayRef<double>{1.0, 65504.0}));

  TensorProto bf16 = makeProto("bf16", TensorProto::BFLOAT16, {1});
  bf16.add_int32_data(0x3dcd);
  EXPECT_EQ(decodeOrFail(bf16).getDouble(0), 0.10009765625);

  TensorProto uint64 = makeProto("uint64", TensorProto::UINT64, {1});
  uint64.add_uint64_data(UINT64_MAX);
  EXPECT_EQ(decodeOrFail(uint64).getInt(0), -1); // Bit pattern kept.

  TensorProto uint32 = makeProto("uint32", TensorProto::UINT32, {1});
  uint32.add_uint64_data(4000000000u);
  EXPECT_EQ(decodeOrFail(uint32).getInt(0), 4000000000);
}

TEST(HostTensorTest, RejectsMalformedTensors) {
  TensorProto shortRaw = makeProto("w", TensorProto::FLOAT, {3});
  shortRaw.set_raw_data(littleEndianBytes<float>({1, 2}));
  EXPECT_EQ(decodeError(shortRaw),
            "tensor 'w' has 8 bytes of raw_data but its shape needs 12");

  TensorProto wrongCount = makeProto("b", TensorProto::INT64, {2});
  wrongCount.add_int64_data(1);
  EXPECT_EQ(decodeError(wrongCount),
            "tensor 'b' has 1 values in int64_data but its shape needs 2");

  TensorProto strings = makeProto("s", TensorProto::STRING, {1});
  strings.add_string_data("x");
  EXPECT_NE(decodeError(strings).find("STRING"), std::string::npos);

  TensorProto negative = makeProto("n", TensorProto::FLOAT, {-1});
  EXPECT_NE(decodeError(negative).find("negative dimension"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// External data
//===----------------------------------------------------------------------===//

void setExternal(TensorProto &proto, const std::string &location,
                 std::optional<std::string> offset,
                 std::optional<std::string> length) {
  proto.set_data_location(TensorProto::EXTERNAL);
  auto add = [&](const std::string &key, const std::string &value) {
    onnx::StringStringEntryProto *entry = proto.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  };
  add("location", location);
  if (offset)
    add("offset", *offset);
  if (length)
    add("length", *length);
}

TEST(HostTensorTest, DecodesExternalData) {
  std::string directory = makeTemporaryDirectory();
  llvm::SmallString<128> file(directory);
  llvm::sys::path::append(file, "weights.bin");
  // 3 bytes of padding, then two floats, then one int64.
  writeFile(std::string(file), std::string("abc") +
                                   littleEndianBytes<float>({2.5f, -1.0f}) +
                                   littleEndianBytes<int64_t>({77}));

  TensorProto floats = makeProto("w", TensorProto::FLOAT, {2});
  setExternal(floats, "weights.bin", "3", "8");
  EXPECT_EQ(decodeOrFail(floats, directory).getFloatData(),
            (llvm::ArrayRef<double>{2.5, -1.0}));

  TensorProto integer = makeProto("i", TensorProto::INT64, {});
  setExternal(integer, "weights.bin", "11", std::nullopt);
  EXPECT_EQ(decodeOrFail(integer, directory).getScalarInt(), 77);

  TensorProto tooLong = makeProto("long", TensorProto::INT64, {2});
  setExternal(tooLong, "weights.bin", "11", std::nullopt);
  std::string message = decodeError(tooLong, directory);
  EXPECT_NE(message.find("'long'"), std::string::npos) << message;
  EXPECT_NE(message.find("weights.bin"), std::string::npos) << message;
  EXPECT_NE(message.find("too short"), std::string::npos) << message;

  TensorProto badLength = makeProto("len", TensorProto::FLOAT, {2});
  setExternal(badLength, "weights.bin", "3", "4");
  EXPECT_NE(decodeError(badLength, directory).find("declares 4 bytes"),
            std::string::npos);

  TensorProto missing = makeProto("gone", TensorProto::FLOAT, {2});
  setExternal(missing, "missing.bin", std::nullopt, std::nullopt);
  message = decodeError(missing, directory);
  EXPECT_NE(message.find("'gone'"), std::string::npos) << message;
  EXPECT_NE(message.find("missing.bin"), std::string::npos) << message;

  TensorProto noLocation = makeProto("x", TensorProto::FLOAT, {1});
  noLocation.set_data_location(TensorProto::EXTERNAL);
  EXPECT_NE(decodeError(noLocation, directory).find("no 'location'"),
            std::string::npos);

  llvm::sys::fs::remove(file);
  llvm::sys::fs::remove(directory);
}

} // namespace
