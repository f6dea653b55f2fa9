//===- CudaTestUtil.h - Device tensors and comparisons for GPU tests ------===//
//
// Every GPU test runs a CUDA kernel and the CPU reference kernel on the same
// inputs (the same bf16/f16 values when the storage is 16-bit) and compares.
// DeviceTensor uploads a host Tensor (TestUtil.h) and downloads results;
// outputs start filled with 0xFF bytes (NaN in every float type) so that an
// element a kernel forgets to write cannot pass as a zero. Kernels that must
// be reproducible are also called repeatedly and compared byte for byte
// (expectSameBits). Tests skip (not fail) on machines without a CUDA
// device, so CI can build and run them.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TEST_CUDA_CUDATESTUTIL_H
#define TESSERA_RUNTIME_TEST_CUDA_CUDATESTUTIL_H

#include "TestUtil.h"
#include "tessera/runtime/cuda_kernels.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <sstream>

namespace tessera_test {

inline bool gpuAvailable() {
  static const bool available = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return available;
}

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    if (!::tessera_test::gpuAvailable())                                       \
      GTEST_SKIP() << "no CUDA device";                                        \
  } while (0)

#define EXPECT_CUDA_KERNEL_OK(call)                                            \
  do {                                                                         \
    int status_ = (call);                                                      \
    EXPECT_EQ(status_, 0) << tessera_cuda_last_error();                        \
  } while (0)

#define EXPECT_CPU_KERNEL_OK(call)                                             \
  do {                                                                         \
    int status_ = (call);                                                      \
    ASSERT_EQ(status_, 0) << tessera_cpu_last_error();                         \
  } while (0)

/// Waits for the default stream and expects no device error.
inline void expectDeviceClean() {
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(tessera_cuda_check_device_errors(nullptr), 0)
      << tessera_cuda_last_error();
}

/// A device copy of a tensor (or an uninitialized output of a shape).
class DeviceTensor {
public:
  /// `offsetBytes` (< 256) starts the data past the allocation's alignment,
  /// as a tensor carved out of a larger buffer can be.
  explicit DeviceTensor(const Tensor &host, size_t offsetBytes = 0)
      : DeviceTensor(host.dtype(), host.dims(), offsetBytes) {
    cudaMemcpy(descriptor.data, host.get()->data, bytes,
               cudaMemcpyHostToDevice);
  }
  DeviceTensor(int32_t dtype, const Shape &shape, size_t offsetBytes = 0)
      : shape(shape) {
    descriptor.dtype = dtype;
    descriptor.rank = static_cast<int32_t>(shape.size());
    for (size_t dim = 0; dim < shape.size(); ++dim)
      descriptor.shape[dim] = shape[dim];
    bytes = static_cast<size_t>(countOf(shape)) *
            tessera::cpu::dtypeSize(dtype);
    cudaMalloc(&allocation, bytes + 256);
    cudaMemset(allocation, 0xFF, bytes + 256);
    descriptor.data = static_cast<char *>(allocation) + offsetBytes;
  }
  DeviceTensor(const DeviceTensor &) = delete;
  DeviceTensor &operator=(const DeviceTensor &) = delete;
  ~DeviceTensor() { cudaFree(allocation); }

  tessera_tensor *get() { return &descriptor; }
  Tensor download() const {
    cudaDeviceSynchronize();
    Tensor host(descriptor.dtype, shape);
    cudaMemcpy(host.data(), descriptor.data, bytes, cudaMemcpyDeviceToHost);
    return host;
  }

private:
  Shape shape;
  size_t bytes = 0;
  void *allocation = nullptr;
  tessera_tensor descriptor{};
};

/// A random float tensor of `dtype` (values rounded to it).
inline Tensor randomTensor(int32_t dtype, const Shape &shape, uint32_t seed,
                           float low = -1.0f, float high = 1.0f) {
  return Tensor::floats(shape, randomFloats(countOf(shape), seed, low, high),
                        dtype);
}

/// Expects |actual - expected| <= atol + rtol |expected| element by element
/// (NaN matches NaN; infinities must match exactly); reports the first few
/// mismatches and the total.
inline void expectTensorsNear(const Tensor &actual, const Tensor &expected,
                              double rtol, double atol,
                              const std::string &what) {
  ASSERT_EQ(actual.count(), expected.count()) << what;
  int64_t mismatches = 0;
  std::ostringstream first;
  for (int64_t i = 0; i < expected.count(); ++i) {
    double a = actual.at(i), e = expected.at(i);
    bool ok;
    if (std::isnan(e) || std::isnan(a))
      ok = std::isnan(e) && std::isnan(a);
    else if (std::isinf(e) || std::isinf(a))
      ok = a == e;
    else
      ok = std::fabs(a - e) <= atol + rtol * std::fabs(e);
    if (!ok && mismatches++ < 5)
      first << "  [" << i << "] gpu " << a << " cpu " << e << "\n";
  }
  EXPECT_EQ(mismatches, 0) << what << ": " << mismatches << " of "
                           << expected.count() << " elements differ\n"
                           << first.str();
}

/// Expects bit-identical bytes (integers, bools, dropout masks).
inline void expectTensorsEqual(const Tensor &actual, const Tensor &expected,
                               const std::string &what) {
  expectTensorsNear(actual, expected, 0.0, 0.0, what);
}

/// Expects the same bytes: bit-identical floats (+0 and -0 differ, NaNs
/// must match bit for bit), for kernels that must be reproducible run to run.
inline void expectSameBits(const Tensor &actual, const Tensor &expected,
                           const std::string &what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.count(), expected.count()) << what;
  size_t width = tessera::cpu::dtypeSize(expected.dtype());
  const unsigned char *a =
      static_cast<const unsigned char *>(actual.get()->data);
  const unsigned char *e =
      static_cast<const unsigned char *>(expected.get()->data);
  int64_t mismatches = 0;
  std::ostringstream first;
  for (int64_t i = 0; i < expected.count(); ++i)
    if (std::memcmp(a + i * width, e + i * width, width) != 0 &&
        mismatches++ < 5)
      first << "  [" << i << "] " << actual.at(i) << " vs " << expected.at(i)
            << "\n";
  EXPECT_EQ(mismatches, 0) << what << ": " << mismatches << " of "
                           << expected.count() << " elements differ in bits\n"
                           << first.str();
}

/// Relative tolerance for a float storage type: f32 math reaches 1e-5;
/// 16-bit outputs differ by an ulp of rounding (bf16 8 bits, f16 11 bits).
inline double toleranceFor(int32_t dtype) {
  switch (dtype) {
  case TESSERA_BF16:
    return 1e-2;
  case TESSERA_F16:
    return 2e-3;
  default:
    return 1e-5;
  }
}

/// The largest |value| of a tensor.
inline double largestMagnitude(const Tensor &tensor) {
  double largest = 0.0;
  for (int64_t i = 0; i < tensor.count(); ++i)
    largest = std::max(largest, std::fabs(static_cast<double>(tensor.at(i))));
  return largest;
}

/// 16-bit tensor-core attention rounds the probabilities and dS to the
/// storage type before multiplying (as every FlashAttention does), so an
/// element's error scales with the tensor's largest terms rather than with
/// the element: the absolute tolerance is an ulp of the largest value.
inline double attentionAbsoluteTolerance(int32_t dtype,
                                         const Tensor &expected) {
  if (dtype == TESSERA_F32)
    return 1e-5;
  double ulp = dtype == TESSERA_BF16 ? 1.0 / 256 : 1.0 / 1024;
  return std::max(2e-3, ulp * largestMagnitude(expected));
}

} // namespace tessera_test

#endif // TESSERA_RUNTIME_TEST_CUDA_CUDATESTUTIL_H
