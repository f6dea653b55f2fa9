//===- CudaStageGraphs.h - Pipeline stage calls replayed as CUDA graphs -*- C++ -*-===//
//
// A pipelined step calls each chunk's forward and backward once per
// micro-batch, a few hundred kernel launches each, with the host enqueueing
// them between the stage's sends and receives: launched one by one, a
// micro-batch's call can take the host longer than the GPU. As the whole
// step's graph does (CudaStepGraph), each call is recorded once and
// replayed. A recording bakes in its pointers (the message and stash slots,
// the micro-batch's tokens, where its loss goes) and its host values (the
// loss scale), so the recordings are kept per key of all of them: a
// schedule's calls repeat the same keys every step, a few per chunk.
//
// The first step runs eagerly: its calls allocate the arenas, the kernels'
// scratch and the cuBLASLt plans, which recording may not. Recording waits
// for the whole step, not just a function's first call, because the
// kernels' scratch is shared by slot across functions and grows by
// reallocating: a forward recorded before the first backward ran could
// keep a pointer the backward's larger request freed. After the first step
// a key's first call is recorded, and every later one replayed. When a call
// cannot be recorded (it draws dropout seeds, or does something capture
// refuses), every stage call runs eagerly from then on, with a message.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_CUDASTAGEGRAPHS_H
#define TESSERA_RUNTIME_TRAIN_CUDASTAGEGRAPHS_H

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace tessera::train {

class CudaStageGraphs {
public:
  /// `enabled` false (--cuda-graphs off): every call runs eagerly.
  CudaStageGraphs(cudaStream_t stream, bool enabled);
  ~CudaStageGraphs();
  CudaStageGraphs(const CudaStageGraphs &) = delete;
  CudaStageGraphs &operator=(const CudaStageGraphs &) = delete;

  /// Enqueues one stage call (`call` enqueues it on the stream, writing its
  /// loss, if any, to `lossStaging` as a deferred call, and returns its
  /// status); `key` holds the function and every pointer and host value the
  /// call passes to its kernels. Does not wait for the GPU. Throws TrainError
  /// with the program's message when an eager call fails.
  void run(const std::vector<uintptr_t> &key, float *lossStaging,
           const std::function<int(float *loss)> &call);
  /// A step's stage calls have all run: from now on calls are recorded.
  void finishStep() { warmedUp = true; }

private:
  cudaStream_t stream;
  bool enabled;
  bool warmedUp = false;
  std::map<std::vector<uintptr_t>, cudaGraphExec_t> recordings;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_CUDASTAGEGRAPHS_H
