//===- HostSupport.h - The kernel library's host-side helpers ---*- C++ -*-===//
//
// The part of Common.cuh that host code needs and that compiles without
// nvcc: CUDA and cuBLAS error checks that throw KernelError, the
// runCudaKernel wrapper behind every exported entry, and the per-stream
// scratch buffers. Files built by the host compiler (CudnnAttention.cpp,
// whose cuDNN frontend headers are plain C++) include this; kernel files get
// it through Common.cuh.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_CUDA_HOSTSUPPORT_H
#define TESSERA_RUNTIME_CUDA_HOSTSUPPORT_H

#include "Errors.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <exception>
#include <string>

namespace tessera::cuda {

using cpu::KernelError;

/// Throws KernelError naming the CUDA error, the call site and the call.
[[noreturn]] void failCuda(cudaError_t error, const char *call,
                           const char *file, int line);
[[noreturn]] void failCublas(int status, const char *call, const char *file,
                             int line);

#define cudaCheck(call)                                                        \
  do {                                                                         \
    cudaError_t cudaCheckError_ = (call);                                      \
    if (cudaCheckError_ != cudaSuccess)                                        \
      ::tessera::cuda::failCuda(cudaCheckError_, #call, __FILE__, __LINE__);   \
  } while (0)

#define cublasCheck(call)                                                      \
  do {                                                                         \
    cublasStatus_t cublasCheckStatus_ = (call);                                \
    if (cublasCheckStatus_ != CUBLAS_STATUS_SUCCESS)                           \
      ::tessera::cuda::failCublas(static_cast<int>(cublasCheckStatus_), #call, \
                                  __FILE__, __LINE__);                         \
  } while (0)

/// Checks that the last kernel launch was accepted (bad configuration,
/// missing device code); execution errors surface at the next sync.
#define cudaCheckLaunch() cudaCheck(cudaGetLastError())

void setLastError(const std::string &message);

/// Runs `body`; returns 0 when it completes, else 1 with the error recorded as
/// "<kernelName>: <message>".
template <typename Body> int runCudaKernel(const char *kernelName, Body &&body) {
  try {
    body();
    return 0;
  } catch (const std::exception &error) {
    setLastError(std::string(kernelName) + ": " + error.what());
  }
  return 1;
}

//===--- Scratch ------------------------------------------------------------===//

/// A device buffer of at least `bytes` private to (current device, stream),
/// kept for the next call: kernels on one stream run in order, so reuse is
/// safe; two streams never share one. Contents are unspecified.
void *streamScratch(cudaStream_t stream, size_t bytes, int slot = 0);

} // namespace tessera::cuda

#endif // TESSERA_RUNTIME_CUDA_HOSTSUPPORT_H
