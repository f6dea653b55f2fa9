//===- LoweringSupport.cu - helpers of the lowered step on the GPU --------===//
//
// See cuda_lowering_support.h. The step's tensors are device memory, so the
// only host<->device traffic of a call is here: constants (static host
// tables copied on the step's stream; the CUDA runtime stages pageable
// memory, so nothing host-side is read after a copy returns), the loss scale
// (a kernel argument), the loss (read back), and the one synchronization per
// call (tessera_cuda_finish_step), which is also where a device-side error
// becomes the message the driver prints.
//
// Constants are staged once: the first fill of a static host table copies it
// into device memory of its own, and every fill (this one included) is then
// a device-to-device copy on the stream. The tables are the program's
// `static const` data, so a host address names the same bytes for the life
// of the process; and a step that copies only device memory can be captured
// into a CUDA graph (a copy from pageable host memory cannot).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include "tessera/runtime/cuda_lowering_support.h"

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

using namespace tessera::cuda;
using tessera::cpu::dtypeName;
using tessera::cpu::dtypeSize;
using tessera::cpu::elementCount;
using tessera::cpu::requireTensor;

namespace {

/// Non-null while this thread's step calls are deferred (recorded into a
/// graph, or a pipeline's stage calls): where the loss goes instead of the
/// caller's host float.
thread_local float *deferredLossStaging = nullptr;

/// Device copies of the program's constant tables, per (device, table).
std::mutex constantMutex;
std::map<std::tuple<int, const void *, int64_t>, void *> deviceConstants;

/// The device copy of the `size` bytes at `bytes` (made on first use).
const void *deviceConstant(const uint8_t *bytes, int64_t size) {
  int device = 0;
  cudaCheck(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(constantMutex);
  void *&copy = deviceConstants[{device, bytes, size}];
  if (!copy) {
    cudaCheck(cudaMalloc(&copy, static_cast<size_t>(size)));
    cudaCheck(cudaMemcpy(copy, bytes, static_cast<size_t>(size),
                         cudaMemcpyHostToDevice));
  }
  return copy;
}

int64_t byteCount(const tessera_tensor &tensor) {
  return elementCount(tensor) * static_cast<int64_t>(dtypeSize(tensor.dtype));
}

/// One element of 1, 2, 4 or 8 bytes, written everywhere.
template <typename Element>
__global__ void splatKernel(Element *y, Element value, int64_t count) {
  TESSERA_GRID_STRIDE_LOOP(i, count) { y[i] = value; }
}

template <typename Element>
void launchSplat(tessera_tensor &y, const uint8_t *element,
                 cudaStream_t stream) {
  Element value;
  std::memcpy(&value, element, sizeof(Element));
  int64_t count = elementCount(y);
  splatKernel<<<gridFor(count), kThreadsPerBlock, 0, stream>>>(
      static_cast<Element *>(y.data), value, count);
  cudaCheckLaunch();
}

} // namespace

extern "C" int tessera_cuda_arena_acquire(uint8_t **arena, int64_t bytes,
                                          cudaStream_t *stream) {
  return runCudaKernel("tessera_cuda_arena_acquire", [&] {
    if (*arena)
      return;
    if (!*stream)
      cudaCheck(cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking));
    // cudaMalloc aligns to at least 256 bytes, more than the plan's
    // TESSERA_ARENA_ALIGNMENT; an empty arena still gets one block so the
    // pointer is never NULL.
    size_t rounded = bytes > 0 ? static_cast<size_t>(bytes)
                               : static_cast<size_t>(TESSERA_ARENA_ALIGNMENT);
    void *memory = nullptr;
    cudaError_t error = cudaMalloc(&memory, rounded);
    if (error != cudaSuccess)
      fail("cannot allocate the step's device arena of " +
           std::to_string(bytes) + " bytes: " + cudaGetErrorString(error));
    // Zeroed before returning: the step may run on the driver's stream,
    // which is not ordered after this one.
    cudaCheck(cudaMemsetAsync(memory, 0, rounded, *stream));
    cudaCheck(cudaStreamSynchronize(*stream));
    *arena = static_cast<uint8_t *>(memory);
  });
}

extern "C" int tessera_cuda_fill_f32(tessera_tensor *y, float value,
                                     cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_fill_f32", [&] {
    tessera_tensor &out = requireTensor(y, "y");
    if (out.dtype != TESSERA_F32 || elementCount(out) != 1)
      fail("expected one F32 element");
    uint8_t element[sizeof(float)];
    std::memcpy(element, &value, sizeof(float));
    launchSplat<uint32_t>(out, element, stream);
  });
}

extern "C" int tessera_cuda_fill_bytes(tessera_tensor *y, const uint8_t *bytes,
                                       int64_t size, cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_fill_bytes", [&] {
    tessera_tensor &out = requireTensor(y, "y");
    int64_t expected = byteCount(out);
    if (size != expected)
      fail("constant of " + std::to_string(size) + " bytes for a tensor of " +
           std::to_string(expected));
    if (size)
      cudaCheck(cudaMemcpyAsync(out.data, deviceConstant(bytes, size),
                                static_cast<size_t>(size),
                                cudaMemcpyDeviceToDevice, stream));
  });
}

extern "C" int tessera_cuda_fill_splat(tessera_tensor *y,
                                       const uint8_t *element,
                                       int64_t element_size,
                                       cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_fill_splat", [&] {
    tessera_tensor &out = requireTensor(y, "y");
    if (element_size != static_cast<int64_t>(dtypeSize(out.dtype)))
      fail("splat element of " + std::to_string(element_size) +
           " bytes for dtype " + dtypeName(out.dtype));
    if (elementCount(out) == 0)
      return;
    switch (element_size) {
    case 1:
      return launchSplat<uint8_t>(out, element, stream);
    case 2:
      return launchSplat<uint16_t>(out, element, stream);
    case 4:
      return launchSplat<uint32_t>(out, element, stream);
    case 8:
      return launchSplat<uint64_t>(out, element, stream);
    default:
      fail("no splat for elements of " + std::to_string(element_size) +
           " bytes");
    }
  });
}

extern "C" int tessera_cuda_read_scalar_f32(const tessera_tensor *x,
                                            float *value,
                                            cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_read_scalar_f32", [&] {
    const tessera_tensor &scalar = requireTensor(x, "x");
    if (scalar.dtype != TESSERA_F32 || elementCount(scalar) != 1)
      fail("expected one F32 element");
    float *destination = deferredLossStaging ? deferredLossStaging : value;
    cudaCheck(cudaMemcpyAsync(destination, scalar.data, sizeof(float),
                              cudaMemcpyDeviceToHost, stream));
  });
}

extern "C" int tessera_cuda_finish_step(int status, cudaStream_t stream) {
  // The first failure's message: a failed call's, kept before the check can
  // overwrite tessera_cuda_last_error with its own.
  std::string message = status ? tessera_cuda_last_error() : "";
  // Deferred: the work may not even have run (recording); whoever runs it
  // checks.
  int deviceStatus =
      deferredLossStaging ? 0 : tessera_cuda_check_device_errors(stream);
  if (status == 0 && deviceStatus != 0) {
    status = deviceStatus;
    message = tessera_cuda_last_error();
  }
  if (status != 0)
    tessera::cpu::setLastError(message);
  return status;
}

extern "C" void tessera_cuda_begin_deferred_step(float *loss_staging) {
  deferredLossStaging = loss_staging;
}

extern "C" void tessera_cuda_end_deferred_step(void) {
  deferredLossStaging = nullptr;
}
