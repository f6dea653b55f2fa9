//===- DataTypes.h - Element types and their conversions --------*- C++ -*-===//
//
// Storage types are many (f32, bf16, f16, f64, four integer widths, bool);
// arithmetic types are few: f32 for the float kernels (f64 accumulators where
// a sum is long), int64 for integer elementwise ops, double as the common
// ground of `cast`. This file converts between the two worlds, one element at
// a time, so that every kernel can read and write any storage type.
//
// bf16 and f16 are converted with round-to-nearest-even, the IEEE default and
// what PyTorch does; NaN stays NaN (quiet), overflow becomes infinity and f16
// keeps its subnormals. A double is narrowed to bf16/f16 through a float
// rounded *to odd*, which makes the two roundings equal to one: a plain
// double->float->bf16 chain could round a value twice the same way.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CPU_DATATYPES_H
#define TESSERA_RUNTIME_CPU_DATATYPES_H

#include <cstddef>
#include <cstdint>

namespace tessera::cpu {

float bf16ToFloat(uint16_t bits);
uint16_t floatToBf16(float value);
float f16ToFloat(uint16_t bits);
uint16_t floatToF16(float value);

/// The float closest to `value` whose last mantissa bit is 1, unless `value`
/// is exactly representable (then that float).
float roundToOddFloat(double value);

/// Bytes per element; 0 for a value that is not a tessera_dtype.
size_t dtypeSize(int32_t dtype);
/// "f32", "bf16", ...; "unknown" for anything else.
const char *dtypeName(int32_t dtype);
bool isFloatType(int32_t dtype);
/// Integers and bool (whose arithmetic is integer arithmetic on 0 and 1).
bool isIntegerType(int32_t dtype);

/// Element `index` of `data` (of type `dtype`) as a double / float / int64.
/// Float to integer truncates toward zero (NaN reads as 0, out-of-range values
/// saturate).
double loadNumber(const void *data, int32_t dtype, int64_t index);
float loadFloat(const void *data, int32_t dtype, int64_t index);
int64_t loadInteger(const void *data, int32_t dtype, int64_t index);

/// Stores `value` rounded (floats) or truncated (integers) to `dtype`; an
/// integer keeps the low bits of the truncated value; bool stores value != 0.
void storeNumber(void *data, int32_t dtype, int64_t index, double value);
void storeFloat(void *data, int32_t dtype, int64_t index, float value);
void storeInteger(void *data, int32_t dtype, int64_t index, int64_t value);

} // namespace tessera::cpu

#endif // TESSERA_RUNTIME_CPU_DATATYPES_H
