//===- HostReduction.cpp - Reducing ranks' tensors in host memory ---------===//

#include "HostReduction.h"

#include "DataTypes.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace tessera::comm {
namespace {

template <typename T> T combine(T sum, T value, tessera_reduce_op op) {
  if (op == TESSERA_REDUCE_SUM)
    return sum + value;
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(sum) || std::isnan(value))
      return std::isnan(sum) ? sum : value;
  return value > sum ? value : sum;
}

/// Reads element i as T, combines over ranks, writes back: the generic
/// path through the CPU kernels' converters.
template <typename T, typename Load, typename Store>
void reduceWith(const std::vector<const void *> &inputs, void *output,
                int64_t elements, tessera_reduce_op op, Load load,
                Store store) {
  for (int64_t i = 0; i < elements; ++i) {
    T value = load(inputs[0], i);
    for (size_t r = 1; r < inputs.size(); ++r)
      value = combine(value, load(inputs[r], i), op);
    store(output, i, value);
  }
}

} // namespace

void reduceInRankOrder(const std::vector<const void *> &inputs, void *output,
                       int64_t elements, int32_t dtype, tessera_reduce_op op) {
  using namespace tessera::cpu;
  switch (dtype) {
  case TESSERA_F32:
    return reduceWith<float>(
        inputs, output, elements, op,
        [](const void *data, int64_t i) {
          return static_cast<const float *>(data)[i];
        },
        [](void *data, int64_t i, float value) {
          static_cast<float *>(data)[i] = value;
        });
  case TESSERA_BF16:
  case TESSERA_F16:
    return reduceWith<float>(
        inputs, output, elements, op,
        [dtype](const void *data, int64_t i) {
          return loadFloat(data, dtype, i);
        },
        [dtype](void *data, int64_t i, float value) {
          storeFloat(data, dtype, i, value);
        });
  case TESSERA_F64:
    return reduceWith<double>(
        inputs, output, elements, op,
        [](const void *data, int64_t i) {
          return static_cast<const double *>(data)[i];
        },
        [](void *data, int64_t i, double value) {
          static_cast<double *>(data)[i] = value;
        });
  default:
    return reduceWith<int64_t>(
        inputs, output, elements, op,
        [dtype](const void *data, int64_t i) {
          return loadInteger(data, dtype, i);
        },
        [dtype](void *data, int64_t i, int64_t value) {
          storeInteger(data, dtype, i, value);
        });
  }
}

} // namespace tessera::comm
