//===- CudaCheck.h - CUDA runtime errors as CommError -----------*- C++ -*-===//

#ifndef TESSERA_RUNTIME_COMM_CUDACHECK_H
#define TESSERA_RUNTIME_COMM_CUDACHECK_H

#include "tessera/runtime/comm_error.h"

#include <cuda_runtime_api.h>

#include <string>

namespace tessera::comm {

[[noreturn]] inline void failCuda(cudaError_t error, const char *call,
                                  const char *file, int line) {
  throw CommError(std::string("CUDA error ") + cudaGetErrorName(error) + " (" +
                  cudaGetErrorString(error) + ") in " + call + " at " + file +
                  ":" + std::to_string(line));
}

} // namespace tessera::comm

#define TESSERA_CUDA_CHECK(call)                                               \
  do {                                                                         \
    cudaError_t tesseraCudaError_ = (call);                                    \
    if (tesseraCudaError_ != cudaSuccess)                                      \
      ::tessera::comm::failCuda(tesseraCudaError_, #call, __FILE__, __LINE__); \
  } while (0)

#endif // TESSERA_RUNTIME_COMM_CUDACHECK_H
