//===- CudaTrainMain.cpp - The training executable's main on the GPU ------===//
//
// The same driver as tessera_train_main, with the CUDA backend and, for
// several ranks (--nproc, torchrun, mpirun, srun), NCCL. It is the
// only entry point of libtessera_runtime_train_cuda.a, which the main of a
// `--target cuda` program calls, so a CPU executable never links CUDA.
//
// A partitioned or pipelined program started plainly runs its ranks as
// threads (the test bed, device_staged_comm.h), and so does --thread-ranks N
// a plain program's data-parallel ranks: rank r on GPU r mod the GPU count
// (on a one-GPU machine every rank shares it, each with its own backend,
// streams and arena), its in-process comms staged through host memory. A
// data-parallel thread rank's gradient and weight collectives run on a comm
// stream of its own, ordered against its compute stream by events exactly
// as a launched rank's NCCL ones are (gradient_reducer.h,
// weight_gatherer.h). The kernels' shared state is the process's, and safe
// for threads: the cuBLASLt handle is one per device (cuBLAS's documented
// thread safety: a handle may be used by several host threads, and a
// cuBLASLt handle has no stream or setting to change under them; the plans
// are made and used under a lock, the workspace is per stream), cuDNN's
// handles and plans are per thread.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"
#include "NcclRankWorld.h"
#include "TrainError.h"
#include "TrainMain.h"

#include "tessera/runtime/cuda_lowering_support.h"

#ifdef TESSERA_RUNTIME_HAS_NCCL
#include "tessera/runtime/device_staged_comm.h"
#endif

#include <cuda_runtime_api.h>

namespace tessera::train {
namespace {

#ifdef TESSERA_RUNTIME_HAS_NCCL
class StagedThreadRank final : public ThreadRankDevice {
public:
  /// On the rank's thread, its GPU current: the comm stream lives there.
  explicit StagedThreadRank(const comm::RankComms &host) : staged(host) {
    cudaError_t error =
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (error != cudaSuccess)
      fail("rank " + std::to_string(host.rank) +
           ": creating the gradient reduction stream: " +
           cudaGetErrorString(error));
  }
  ~StagedThreadRank() override {
    if (stream)
      cudaStreamDestroy(stream);
  }
  const comm::RankComms &comms() const override { return staged.comms(); }
  void *commStream() const override { return stream; }

private:
  comm::DeviceStagedComms staged;
  cudaStream_t stream = nullptr;
};
#endif

/// Selects the thread rank's GPU (before its backend allocates anything)
/// and stages its comms.
std::unique_ptr<ThreadRankDevice>
adoptCudaThreadRank(const comm::RankComms &host) {
  int devices = 0;
  cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices < 1)
    fail(std::string("no CUDA device for the thread ranks: ") +
         (error != cudaSuccess ? cudaGetErrorString(error) : "none found"));
  error = cudaSetDevice(host.rank % devices);
  if (error != cudaSuccess)
    fail("selecting GPU " + std::to_string(host.rank % devices) +
         " for rank " + std::to_string(host.rank) + ": " +
         cudaGetErrorString(error));
#ifdef TESSERA_RUNTIME_HAS_NCCL
  return std::make_unique<StagedThreadRank>(host);
#else
  fail("this executable's runtime was built without NCCL, which the GPU's "
       "thread ranks' collectives come with; rebuild the runtime where "
       "nccl.h and libnccl are found");
#endif
}

} // namespace
} // namespace tessera::train

extern "C" int tessera_cuda_train_main(int argc, char **argv,
                                       const tessera_program *program) {
  return tessera::train::runTrainMain(argc, argv, program,
                                      tessera::train::makeCudaBackend,
                                      tessera::train::makeNcclRankWorld,
                                      tessera::train::adoptCudaThreadRank);
}
