//===- DataTypes.cpp - bf16/f16 rounding and per-element access -----------===//
//
// The half-precision conversions work on bit patterns: bf16 is the top half
// of an f32, so rounding adds 0x7fff plus the lowest kept bit (ties to even)
// before dropping 16 bits; f16 rebiases the exponent (127 -> 15) and rounds
// the same way, with f16 subnormals computed as an integer multiple of 2^-24.
//
//===----------------------------------------------------------------------===//

#include "DataTypes.h"

#include "tessera/runtime/cpu_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tessera::cpu {

namespace {

uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float floatFromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

template <typename T> T loadAs(const void *data, int64_t index) {
  T value;
  std::memcpy(&value, static_cast<const char *>(data) + index * sizeof(T),
              sizeof(T));
  return value;
}

template <typename T> void storeAs(void *data, int64_t index, T value) {
  std::memcpy(static_cast<char *>(data) + index * sizeof(T), &value, sizeof(T));
}

/// C++ leaves float->integer conversion of NaN and out-of-range values
/// undefined; define them (NaN -> 0, saturate) instead.
int64_t truncateToInteger(double value) {
  if (std::isnan(value))
    return 0;
  if (value >= 9223372036854775807.0)
    return std::numeric_limits<int64_t>::max();
  if (value <= -9223372036854775808.0)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

} // namespace

float bf16ToFloat(uint16_t bits) {
  return floatFromBits(static_cast<uint32_t>(bits) << 16);
}

uint16_t floatToBf16(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it, make it quiet.
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  uint32_t lowestKeptBit = (bits >> 16) & 1u;
  bits += 0x7fffu + lowestKeptBit;
  return static_cast<uint16_t>(bits >> 16);
}

float f16ToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) { // Zero or subnormal: mantissa * 2^-24.
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) // Infinity or NaN.
    return floatFromBits(sign | 0x7f800000u | (mantissa << 13));
  return floatFromBits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t floatToF16(float value) {
  uint32_t bits = floatBits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) // NaN
    return sign | 0x7e00u;
  if (magnitude >= 0x47800000u) // >= 2^16: beyond f16's range even rounded.
    return sign | 0x7c00u;
  if (magnitude < 0x38800000u) { // Below 2^-14: an f16 subnormal or zero.
    // Scaling by 2^24 is exact; nearbyint rounds half to even.
    float units = std::nearbyint(std::fabs(value) * 16777216.0f);
    return sign | static_cast<uint16_t>(units); // 1024 is the smallest normal.
  }
  magnitude -= 112u << 23; // Exponent bias 127 -> 15.
  magnitude += 0xfffu + ((magnitude >> 13) & 1u);
  // A carry out of the mantissa bumps the exponent; 31 is infinity.
  return sign | static_cast<uint16_t>(magnitude >> 13);
}

float roundToOddFloat(double value) {
  float nearest = static_cast<float>(value);
  if (static_cast<double>(nearest) == value || std::isnan(value) ||
      std::isinf(nearest))
    return nearest;
  if (floatBits(nearest) & 1u)
    return nearest;
  // `value` lies strictly between `nearest` and its neighbour on the other
  // side; neighbours differ by one in their bit patterns, so that one is odd.
  return std::nextafter(nearest, value > nearest
                                     ? std::numeric_limits<float>::infinity()
                                     : -std::numeric_limits<float>::infinity());
}

size_t dtypeSize(int32_t dtype) {
  switch (dtype) {
  case TESSERA_F32:
  case TESSERA_I32:
    return 4;
  case TESSERA_BF16:
  case TESSERA_F16:
  case TESSERA_I16:
    return 2;
  case TESSERA_F64:
  case TESSERA_I64:
    return 8;
  case TESSERA_I8:
  case TESSERA_BOOL:
    return 1;
  default:
    return 0;
  }
}

const char *dtypeName(int32_t dtype) {
  switch (dtype) {
  case TESSERA_F32:
    return "f32";
  case TESSERA_BF16:
    return "bf16";
  case TESSERA_F16:
    return "f16";
  case TESSERA_F64:
    return "f64";
  case TESSERA_I64:
    return "i64";
  case TESSERA_I32:
    return "i32";
  case TESSERA_I8:
    return "i8";
  case TESSERA_I16:
    return "i16";
  case TESSERA_BOOL:
    return "bool";
  default:
    return "unknown";
  }
}

bool isFloatType(int32_t dtype) {
  return dtype == TESSERA_F32 || dtype == TESSERA_BF16 ||
         dtype == TESSERA_F16 || dtype == TESSERA_F64;
}

bool isIntegerType(int32_t dtype) {
  return dtype == TESSERA_I64 || dtype == TESSERA_I32 || dtype == TESSERA_I16 ||
         dtype == TESSERA_I8 || dtype == TESSERA_BOOL;
}

double loadNumber(const void *data, int32_t dtype, int64_t index) {
  switch (dtype) {
  case TESSERA_F32:
    return loadAs<float>(data, index);
  case TESSERA_BF16:
    return bf16ToFloat(loadAs<uint16_t>(data, index));
  case TESSERA_F16:
    return f16ToFloat(loadAs<uint16_t>(data, index));
  case TESSERA_F64:
    return loadAs<double>(data, index);
  default:
    return static_cast<double>(loadInteger(data, dtype, index));
  }
}

float loadFloat(const void *data, int32_t dtype, int64_t index) {
  switch (dtype) {
  case TESSERA_F32:
    return loadAs<float>(data, index);
  case TESSERA_BF16:
    return bf16ToFloat(loadAs<uint16_t>(data, index));
  case TESSERA_F16:
    return f16ToFloat(loadAs<uint16_t>(data, index));
  default:
    return static_cast<float>(loadNumber(data, dtype, index));
  }
}

int64_t loadInteger(const void *data, int32_t dtype, int64_t index) {
  switch (dtype) {
  case TESSERA_I64:
    return loadAs<int64_t>(data, index);
  case TESSERA_I32:
    return loadAs<int32_t>(data, index);
  case TESSERA_I16:
    return loadAs<int16_t>(data, index);
  case TESSERA_I8:
    return loadAs<int8_t>(data, index);
  case TESSERA_BOOL:
    return loadAs<uint8_t>(data, index) != 0;
  default:
    return truncateToInteger(loadNumber(data, dtype, index));
  }
}

void storeNumber(void *data, int32_t dtype, int64_t index, double value) {
  switch (dtype) {
  case TESSERA_F32:
    return storeAs<float>(data, index, static_cast<float>(value));
  case TESSERA_BF16:
    return storeAs<uint16_t>(data, index, floatToBf16(roundToOddFloat(value)));
  case TESSERA_F16:
    return storeAs<uint16_t>(data, index, floatToF16(roundToOddFloat(value)));
  case TESSERA_F64:
    return storeAs<double>(data, index, value);
  case TESSERA_BOOL:
    return storeAs<uint8_t>(data, index, value != 0.0 ? 1 : 0);
  default:
    return storeInteger(data, dtype, index, truncateToInteger(value));
  }
}

void storeFloat(void *data, int32_t dtype, int64_t index, float value) {
  switch (dtype) {
  case TESSERA_F32:
    return storeAs<float>(data, index, value);
  case TESSERA_BF16:
    return storeAs<uint16_t>(data, index, floatToBf16(value));
  case TESSERA_F16:
    return storeAs<uint16_t>(data, index, floatToF16(value));
  default:
    return storeNumber(data, dtype, index, value);
  }
}

void storeInteger(void *data, int32_t dtype, int64_t index, int64_t value) {
  // Narrowing keeps the low bits (two's complement), as a C cast does.
  switch (dtype) {
  case TESSERA_I64:
    return storeAs<int64_t>(data, index, value);
  case TESSERA_I32:
    return storeAs<int32_t>(data, index, static_cast<int32_t>(value));
  case TESSERA_I16:
    return storeAs<int16_t>(data, index, static_cast<int16_t>(value));
  case TESSERA_I8:
    return storeAs<int8_t>(data, index, static_cast<int8_t>(value));
  case TESSERA_BOOL:
    return storeAs<uint8_t>(data, index, value != 0 ? 1 : 0);
  default:
    return storeNumber(data, dtype, index, static_cast<double>(value));
  }
}

} // namespace tessera::cpu
