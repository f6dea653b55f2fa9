//===- CudaStageGraphs.cpp - Pipeline stage calls replayed as CUDA graphs -===//

#include "CudaStageGraphs.h"

#include "CudaStepGraph.h"
#include "TrainCudaCheck.h"
#include "TrainError.h"
#include "tessera/runtime/cpu_kernels.h"
#include "tessera/runtime/cuda_lowering_support.h"

#include <cstdio>
#include <string>

namespace tessera::train {

CudaStageGraphs::CudaStageGraphs(cudaStream_t stream, bool enabled)
    : stream(stream), enabled(enabled) {}

CudaStageGraphs::~CudaStageGraphs() {
  for (auto &[key, exec] : recordings)
    cudaGraphExecDestroy(exec);
}

void CudaStageGraphs::run(const std::vector<uintptr_t> &key,
                          float *lossStaging,
                          const std::function<int(float *loss)> &call) {
  if (enabled && warmedUp) {
    auto found = recordings.find(key);
    if (found == recordings.end()) {
      std::string problem;
      cudaGraphExec_t exec =
          recordDeferredCall(stream, lossStaging, call, problem);
      if (exec) {
        found = recordings.emplace(key, exec).first;
      } else {
        enabled = false;
        std::fprintf(stderr,
                     "tessera: CUDA graphs off, the pipeline's stage calls "
                     "run eagerly: %s\n",
                     problem.c_str());
      }
    }
    if (found != recordings.end()) {
      checkCuda(cudaGraphLaunch(found->second, stream),
                "launching a recorded stage call");
      return;
    }
  }
  tessera_cuda_begin_deferred_step(lossStaging);
  float unused = 0;
  int status = call(&unused);
  tessera_cuda_end_deferred_step();
  if (status != 0)
    fail(tessera_cpu_last_error());
}

} // namespace tessera::train
