//===- HostBackend.h - A run's tensors in host memory ------------*- C++ -*-===//
//
// The TrainingBackend of TESSERA_DEVICE_HOST programs: flat host buffers and
// the CPU kernels (tessera_cpu_cast, _sum_squares, _adamw per parameter).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_HOSTBACKEND_H
#define TESSERA_RUNTIME_TRAIN_HOSTBACKEND_H

#include "TrainingBackend.h"

namespace tessera::train {

/// Throws TrainError when `program` is not a host program.
std::unique_ptr<TrainingBackend>
makeHostBackend(const tessera_program &program, const TrainOptions &options,
                const ParameterLayout *layout = nullptr);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_HOSTBACKEND_H
