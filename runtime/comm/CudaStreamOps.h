//===- CudaStreamOps.h - StreamOps on CUDA streams --------------*- C++ -*-===//

#ifndef TESSERA_RUNTIME_COMM_CUDASTREAMOPS_H
#define TESSERA_RUNTIME_COMM_CUDASTREAMOPS_H

#include "CommBase.h"

namespace tessera::comm {

/// Events without timing (the cheap kind), cudaMalloc'd memory, async
/// copies on the given stream.
StreamOps &cudaStreamOps();

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_COMM_CUDASTREAMOPS_H
