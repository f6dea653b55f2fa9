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
#include <memory>
#include <string>

namespace tessera::train {

inline std::string gibibytesText(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

/// Memory owned by one object and released with it by `Release` (a
/// functor calling cudaFree, cudaFreeHost or free): movable, not copyable,
/// null once moved from.
template <typename Release> class OwnedMemory {
public:
  void *get() const { return memory.get(); }

protected:
  void adopt(void *allocation) { memory.reset(allocation); }

private:
  std::unique_ptr<void, Release> memory;
};

struct ReleaseDeviceMemory {
  void operator()(void *memory) const { cudaFree(memory); }
};
struct ReleasePinnedMemory {
  void operator()(void *memory) const { cudaFreeHost(memory); }
};
struct ReleaseHostMemory {
  void operator()(void *memory) const { std::free(memory); }
};

/// A zeroed device allocation.
class DeviceBuffer : public OwnedMemory<ReleaseDeviceMemory> {
public:
  DeviceBuffer() = default;
  DeviceBuffer(int64_t bytes, const char *what) {
    size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 256;
    void *memory = nullptr;
    cudaError_t error = cudaMalloc(&memory, size);
    if (error != cudaSuccess)
      fail(std::string("cannot allocate ") + gibibytesText(bytes) +
           " of GPU memory for " + what + ": " + cudaGetErrorString(error));
    adopt(memory);
    checkCuda(cudaMemset(memory, 0, size), "clearing device memory");
  }
};

/// Host memory no copy engine reads (AdamW's moments beside an offloaded
/// optimizer: only the host's AdamW touches them): pageable, from calloc,
/// whose large blocks are fresh zero pages the kernel backs only when first
/// written. CudaOffloadedOptimizer pins its moments in place all the same
/// (cudaHostRegister): in pageable memory the host's AdamW ran 2.3x slower
/// on the GPU machine.
class HostBuffer : public OwnedMemory<ReleaseHostMemory> {
public:
  HostBuffer() = default;
  explicit HostBuffer(int64_t bytes) {
    size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 64;
    void *memory = std::calloc(size, 1);
    if (!memory)
      fail("allocating " + gibibytesText(bytes) + " of host memory");
    adopt(memory);
  }
};

/// Zeroed page-locked host memory, so copies from it are truly
/// asynchronous.
class PinnedBuffer : public OwnedMemory<ReleasePinnedMemory> {
public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(int64_t bytes) {
    size_t size = bytes > 0 ? static_cast<size_t>(bytes) : 64;
    void *memory = nullptr;
    checkCuda(cudaMallocHost(&memory, size),
              "allocating " + gibibytesText(bytes) + " of pinned host memory");
    adopt(memory);
    std::memset(memory, 0, size);
  }
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_CUDABUFFERS_H
