//===- CudaTrainMain.cpp - The training executable's main on the GPU ------===//
//
// The same driver as tessera_train_main, with the CUDA backend and, for
// several ranks (--nproc, torchrun, mpirun, srun), NCCL. It is the
// only entry point of libtessera_runtime_train_cuda.a, which the main of a
// `--target cuda` program calls, so a CPU executable never links CUDA.
//
// A partitioned program started plainly runs its mesh's ranks as threads
// (the test bed, device_staged_comm.h): rank r on GPU r mod the GPU count,
// its in-process comms staged through host memory.
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
  explicit StagedThreadRank(const comm::RankComms &host) : staged(host) {}
  const comm::RankComms &comms() const override { return staged.comms(); }

private:
  comm::DeviceStagedComms staged;
};
#endif

/// Selects the thread rank's GPU (before its backend allocates anything)
/// and stages its comms.
std::unique_ptr<ThreadRankDevice>
adoptCudaThreadRank(const comm::RankComms &host) {
  int devices = 0;
  cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices < 1)
    fail(std::string("no CUDA device for the mesh's thread ranks: ") +
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
       "mesh collectives come with; rebuild the runtime where nccl.h and "
       "libnccl are found");
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
