//===- CudaBuffers.h - Device and pinned host memory, owned -----*- C++ -*-===//
//
// The GPU backend's allocations (CudaBackend.cpp, CudaOffloadedOptimizer.cpp):
// zeroed, freed with their owner, a failed allocation a TrainError that
// says how much memory for what.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_CUDABUFFERS_H
#define TESSERA_RUNTIME_TRAIN_CUDABUFFERS_H

#include "TrainCudaCheck.h"
#include "TrainError.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace tessera::train {

inline std::string gibibytesText(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

/// A zeroed device allocation, freed with its owner.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(int64_t bytes, const char *what) {
    size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 256;
    cudaError_t error = cudaMalloc(&memory, size);
    if (error != cudaSuccess) {
      memory = nullptr;
      fail(std::string("cannot allocate ") + gibibytesText(bytes) +
           " of GPU memory for " + what + ": " + cudaGetErrorString(error));
    }
    checkCuda(cudaMemset(memory, 0, size), "clearing device memory");
  }
  DeviceBuffer(DeviceBuffer &&other) noexcept : memory(other.memory) {
    other.memory = nullptr;
  }
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept {
    std::swap(memory, other.memory);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer() {
    if (memory)
      cudaFree(memory);
  }
  void *get() const { return memory; }

private:
  void *memory = nullptr;
};

/// Page-locked host memory, so copies from it are truly asynchronous.
class PinnedBuffer {
public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(int64_t bytes) {
    size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 64;
    checkCuda(cudaMallocHost(&memory, size),
              "allocating " + gibibytesText(bytes) + " of pinned host memory");
    std::memset(memory, 0, size);
  }
  PinnedBuffer(PinnedBuffer &&other) noexcept : memory(other.memory) {
    other.memory = nullptr;
  }
  PinnedBuffer &operator=(PinnedBuffer &&other) noexcept {
    std::swap(memory, other.memory);
    return *this;
  }
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  ~PinnedBuffer() {
    if (memory)
      cudaFreeHost(memory);
  }
  void *get() const { return memory; }

private:
  void *memory = nullptr;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_CUDABUFFERS_H
