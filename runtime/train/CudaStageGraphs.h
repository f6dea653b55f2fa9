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
// A function's first call runs eagerly (it allocates its arena, scratch and
// cuBLASLt plans, which recording may not); a key's first call after that
// is recorded, and every later one replayed. When a call cannot be
// recorded (it draws dropout seeds, or does something capture refuses),
// every stage call runs eagerly from then on, with a message.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_CUDASTAGEGRAPHS_H
#define TESSERA_RUNTIME_TRAIN_CUDASTAGEGRAPHS_H

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

namespace tessera::train {

class CudaStageGraphs {
public:
  /// `enabled` false (--cuda-graphs off): every call runs eagerly.
  CudaStageGraphs(cudaStream_t stream, bool enabled);
  ~CudaStageGraphs();
  CudaStageGraphs(const CudaStageGraphs &) = delete;
  CudaStageGraphs &operator=(const CudaStageGraphs &) = delete;

  /// Enqueues one call of `function` (`call` enqueues it on the stream,
  /// writing its loss, if any, to `lossStaging` as a deferred call, and
  /// returns its status); `key` holds every pointer and host value the call
  /// passes to its kernels. Does not wait for the GPU. Throws TrainError
  /// with the program's message when an eager call fails.
  void run(const void *function, const std::vector<uintptr_t> &key,
           float *lossStaging, const std::function<int(float *loss)> &call);

private:
  cudaStream_t stream;
  bool enabled;
  std::set<const void *> warmedUp;
  std::map<std::vector<uintptr_t>, cudaGraphExec_t> recordings;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_CUDASTAGEGRAPHS_H
