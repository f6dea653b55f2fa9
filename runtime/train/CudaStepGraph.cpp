//===- CudaStepGraph.cpp - The step recorded once, replayed as a CUDA graph ===//

#include "CudaStepGraph.h"

#include "TrainCudaCheck.h"
#include "TrainError.h"
#include "tessera/runtime/cpu_kernels.h"
#include "tessera/runtime/cuda_lowering_support.h"

#include <cstdio>

namespace tessera::train {
CudaStepGraph::CudaStepGraph(cudaStream_t stream, bool enabled)
    : stream(stream), enabled(enabled) {
  if (enabled)
    checkCuda(cudaMallocHost(reinterpret_cast<void **>(&lossStaging),
                             sizeof(float)),
              "allocating the recorded step's loss");
}

CudaStepGraph::~CudaStepGraph() {
  dropRecording();
  if (lossStaging)
    cudaFreeHost(lossStaging);
}

void CudaStepGraph::dropRecording() {
  if (exec)
    cudaGraphExecDestroy(exec);
  exec = nullptr;
}

void CudaStepGraph::turnOff(const std::string &reason) {
  enabled = false;
  dropRecording();
  std::fprintf(stderr, "tessera: CUDA graphs off, the step runs eagerly: %s\n",
               reason.c_str());
}

cudaGraphExec_t recordDeferredCall(cudaStream_t stream, float *lossStaging,
                                   const std::function<int(float *loss)> &call,
                                   std::string &problem) {
  uint64_t seedsBefore = tessera_mix_seed_calls();
  // Relaxed: a call that does something unrecordable fails its own call
  // instead of the process.
  checkCuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed),
            "recording the step");
  tessera_cuda_begin_deferred_step(lossStaging);
  float unused = 0;
  int status = call(&unused);
  tessera_cuda_end_deferred_step();
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec = nullptr;
  problem.clear();
  if (status != 0)
    problem = std::string("recording the step failed: ") +
              tessera_cpu_last_error();
  else if (ended != cudaSuccess)
    problem = std::string("the step cannot be recorded (") +
              cudaGetErrorString(ended) + ")";
  else if (tessera_mix_seed_calls() != seedsBefore)
    problem = "the step draws dropout seeds, which a recording would freeze";
  if (problem.empty()) {
    cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    if (made != cudaSuccess) {
      exec = nullptr;
      problem = std::string("instantiating the recording failed (") +
                cudaGetErrorString(made) + ")";
    }
  }
  if (graph)
    cudaGraphDestroy(graph);
  if (!problem.empty())
    (void)cudaGetLastError(); // the capture's error is handled: run eagerly
  return exec;
}

bool CudaStepGraph::record(float lossScale,
                           const std::function<int(float *loss)> &step) {
  dropRecording();
  std::string problem;
  exec = recordDeferredCall(stream, lossStaging, step, problem);
  if (!exec) {
    turnOff(problem);
    return false;
  }
  recordedLossScale = lossScale;
  return true;
}

double CudaStepGraph::run(float lossScale,
                          const std::function<int(float *loss)> &step) {
  if (enabled && warmedUp && (!exec || lossScale != recordedLossScale))
    record(lossScale, step);
  if (!exec) {
    float loss = 0;
    if (step(&loss) != 0)
      fail(tessera_cpu_last_error());
    warmedUp = true;
    return loss;
  }
  checkCuda(cudaGraphLaunch(exec, stream), "launching the recorded step");
  if (tessera_cuda_check_device_errors(stream) != 0)
    fail(tessera_cuda_last_error());
  return *lossStaging;
}

} // namespace tessera::train
