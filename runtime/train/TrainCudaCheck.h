//===- TrainCudaCheck.h - CUDA runtime errors as TrainError -----*- C++ -*-===//
//
// The driver's GPU code reports a failed CUDA call as the TrainError of what
// it was doing ("uploading the tokens: CUDA error ..."), which the driver
// prints and exits with.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_TRAINCUDACHECK_H
#define TESSERA_RUNTIME_TRAIN_TRAINCUDACHECK_H

#include "TrainError.h"

#include <cuda_runtime_api.h>

#include <string>

namespace tessera::train {

inline void checkCuda(cudaError_t error, const std::string &what) {
  if (error != cudaSuccess)
    fail(what + ": CUDA error " + cudaGetErrorName(error) + " (" +
         cudaGetErrorString(error) + ")");
}

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_TRAINCUDACHECK_H
