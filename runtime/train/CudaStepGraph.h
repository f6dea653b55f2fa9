//===- CudaStepGraph.h - The step recorded once, replayed as a CUDA graph -===//
//
// A lowered step is a fixed sequence of a few hundred kernel launches on one
// stream whose arguments (the arena, the driver's flat buffers, the token
// buffers) are the same every call. Launching them one by one costs host
// time per kernel, and short kernels leave the GPU waiting for the host; a
// CUDA graph launches them all at once.
//
// The first call runs eagerly: it allocates the arena, the kernels' scratch
// and the cuBLASLt plans, none of which may happen while recording. The
// second call is recorded (stream capture) and every later call replays the
// recording. A recording bakes in the host values the step passed to its
// kernels, so it is made again when the loss scale changes (fp16's dynamic
// scaling), and graphs are turned off, with a message, when recording drew
// dropout seeds (every replay would reuse the masks) or when the step did
// something that cannot be recorded; the run then goes on eagerly.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_CUDASTEPGRAPH_H
#define TESSERA_RUNTIME_TRAIN_CUDASTEPGRAPH_H

#include <cuda_runtime_api.h>

#include <functional>
#include <string>

namespace tessera::train {

/// Records `call` (which enqueues its kernels on `stream` and returns its
/// status) as a deferred call writing its loss to `lossStaging`, and
/// instantiates the recording. Returns nullptr with `problem` set when the
/// call fails, cannot be captured, or draws dropout seeds (every replay
/// would reuse the masks). Shared by the step's graph and the pipeline
/// stages' graphs (CudaStageGraphs).
cudaGraphExec_t recordDeferredCall(cudaStream_t stream, float *lossStaging,
                                   const std::function<int(float *loss)> &call,
                                   std::string &problem);

class CudaStepGraph {
public:
  /// `enabled` false: every call runs eagerly.
  CudaStepGraph(cudaStream_t stream, bool enabled);
  ~CudaStepGraph();
  CudaStepGraph(const CudaStepGraph &) = delete;
  CudaStepGraph &operator=(const CudaStepGraph &) = delete;

  /// One call of the step: `step(loss)` enqueues it on the stream (the
  /// program's forward_backward) and returns its status. Returns the loss;
  /// throws TrainError with the program's message when the step fails.
  double run(float lossScale,
             const std::function<int(float *loss)> &step);

  bool isReplaying() const { return exec != nullptr; }

private:
  /// Records the step; false (graphs now off, with a message) when it
  /// cannot be replayed.
  bool record(float lossScale, const std::function<int(float *loss)> &step);
  void turnOff(const std::string &reason);
  void dropRecording();

  cudaStream_t stream;
  bool enabled;
  bool warmedUp = false;
  float recordedLossScale = 0;
  cudaGraphExec_t exec = nullptr;
  /// Pinned: where the recorded step copies its loss.
  float *lossStaging = nullptr;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_CUDASTEPGRAPH_H
