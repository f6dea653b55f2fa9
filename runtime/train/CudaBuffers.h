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
#include <cstdlib>
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
/// Host memory no copy engine reads (AdamW's moments beside an offloaded
/// optimizer: only the host's AdamW touches them): pageable, from calloc,
/// whose large blocks are fresh zero pages the kernel backs only when first
/// written. A fresh start's zero moments cost neither memory nor pinning
/// time until the first step writes them (Llama 3 8B's are 60 GiB).
class HostBuffer {
public:
  HostBuffer() = default;
  explicit HostBuffer(int64_t bytes) {
    size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 64;
    memory = std::calloc(size, 1);
    if (!memory)
      fail("allocating " + gibibytesText(bytes) + " of host memory");
  }
  HostBuffer(HostBuffer &&other) noexcept : memory(other.memory) {
    other.memory = nullptr;
  }
  HostBuffer &operator=(HostBuffer &&other) noexcept {
    std::swap(memory, other.memory);
    return *this;
  }
  HostBuffer(const HostBuffer &) = delete;
  HostBuffer &operator=(const HostBuffer &) = delete;
  ~HostBuffer() { std::free(memory); }
  void *get() const { return memory; }

private:
  void *memory = nullptr;
};

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
