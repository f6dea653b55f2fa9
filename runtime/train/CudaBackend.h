//===- CudaBackend.h - A run's tensors in GPU memory -------------*- C++ -*-===//
//
// The TrainingBackend of TESSERA_DEVICE_CUDA programs (libtessera_runtime_
// train_cuda.a): flat device buffers, the step on the backend's stream, and
// the driver's arithmetic in the kernels of cuda_optimizer.h.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_CUDABACKEND_H
#define TESSERA_RUNTIME_TRAIN_CUDABACKEND_H

#include "TrainingBackend.h"

namespace tessera::train {

/// Throws TrainError when `program` is not a CUDA program, there is no GPU,
/// or its memory cannot hold the run's state.
std::unique_ptr<TrainingBackend>
makeCudaBackend(const tessera_program &program, const TrainOptions &options,
                const ParameterLayout *layout = nullptr);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_CUDABACKEND_H
