//===- Context.cu - Errors, scratch and per-device state ------------------===//
//
// The state the kernels keep between calls, all created on first use and
// then reused so that a training step never allocates: a per-thread error
// message (as the CPU kernels keep theirs), one DeviceErrorRecord per device
// for data errors found inside kernels, and scratch buffers keyed by
// (device, stream, slot). A buffer only grows (on a request larger than any
// before); growing waits for the stream so that a kernel still reading the
// old buffer cannot see it freed.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace tessera::cuda {

namespace {

thread_local std::string lastError;

struct ScratchBuffer {
  void *data = nullptr;
  size_t bytes = 0;
};

std::mutex stateMutex;
std::map<int, DeviceErrorRecord *> errorRecords;
std::map<std::tuple<int, cudaStream_t, int>, ScratchBuffer> scratchBuffers;

int currentDevice() {
  int device = 0;
  cudaCheck(cudaGetDevice(&device));
  return device;
}

} // namespace

void failCuda(cudaError_t error, const char *call, const char *file,
              int line) {
  throw KernelError(std::string("CUDA error ") + cudaGetErrorName(error) +
                    " (" + cudaGetErrorString(error) + ") in " + call +
                    " at " + file + ":" + std::to_string(line));
}

void failCublas(int status, const char *call, const char *file, int line) {
  throw KernelError("cuBLAS error " + std::to_string(status) + " in " + call +
                    " at " + file + ":" + std::to_string(line));
}

void setLastError(const std::string &message) { lastError = message; }

void requireKernelFloat(const tessera_tensor &tensor, const char *name) {
  if (tensor.dtype != TESSERA_F32 && tensor.dtype != TESSERA_BF16 &&
      tensor.dtype != TESSERA_F16)
    fail(std::string(name) + " must be f32, bf16 or f16 on the GPU, not " +
         cpu::dtypeName(tensor.dtype));
}

DeviceErrorRecord *deviceErrorRecord() {
  int device = currentDevice();
  std::lock_guard<std::mutex> lock(stateMutex);
  DeviceErrorRecord *&record = errorRecords[device];
  if (!record) {
    cudaCheck(cudaMalloc(&record, sizeof(DeviceErrorRecord)));
    cudaCheck(cudaMemset(record, 0, sizeof(DeviceErrorRecord)));
  }
  return record;
}

void *streamScratch(cudaStream_t stream, size_t bytes, int slot) {
  int device = currentDevice();
  std::lock_guard<std::mutex> lock(stateMutex);
  ScratchBuffer &buffer = scratchBuffers[{device, stream, slot}];
  if (buffer.bytes < bytes) {
    if (buffer.data) {
      cudaCheck(cudaStreamSynchronize(stream));
      cudaCheck(cudaFree(buffer.data));
      buffer = ScratchBuffer();
    }
    cudaCheck(cudaMalloc(&buffer.data, bytes));
    buffer.bytes = bytes;
  }
  return buffer.data;
}

} // namespace tessera::cuda

using namespace tessera::cuda;

extern "C" const char *tessera_cuda_last_error(void) {
  return lastError.c_str();
}

extern "C" void tessera_cuda_set_last_error(const char *message) {
  lastError = message ? message : "";
}

extern "C" int tessera_cuda_check_device_errors(cudaStream_t stream) {
  return runCudaKernel("tessera_cuda_check_device_errors", [&] {
    cudaCheck(cudaStreamSynchronize(stream));
    DeviceErrorRecord *record = deviceErrorRecord();
    DeviceErrorRecord host;
    cudaCheck(cudaMemcpy(&host, record, sizeof(host), cudaMemcpyDeviceToHost));
    if (host.kind == kNoDeviceError)
      return;
    cudaCheck(cudaMemset(record, 0, sizeof(DeviceErrorRecord)));
    host.kernel[sizeof(host.kernel) - 1] = 0;
    std::string where = std::string(host.kernel) + ": ";
    switch (host.kind) {
    case kIndexOutOfRange:
      fail(where + "index " + std::to_string(host.value) +
           " at flat position " + std::to_string(host.position) +
           " is outside [" + std::to_string(host.low) + ", " +
           std::to_string(host.high) + ")");
    case kIntegerDivisionByZero:
      fail(where + "integer division by zero at flat position " +
           std::to_string(host.position));
    case kIntegerPowerOfZero:
      fail(where + "integer pow: 0 to a negative power at flat position " +
           std::to_string(host.position));
    default:
      fail(where + "unknown device error " + std::to_string(host.kind));
    }
  });
}

extern "C" void tessera_cuda_release_resources(void) {
  releaseMatmulHandles();
  std::lock_guard<std::mutex> lock(stateMutex);
  for (auto &entry : scratchBuffers)
    cudaFree(entry.second.data);
  scratchBuffers.clear();
  for (auto &entry : errorRecords)
    cudaFree(entry.second);
  errorRecords.clear();
}
