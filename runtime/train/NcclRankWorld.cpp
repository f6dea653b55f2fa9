//===- NcclRankWorld.cpp - Rendezvous, NCCL and a comm stream -------------===//

#include "NcclRankWorld.h"

#include "TrainError.h"

#ifdef TESSERA_RUNTIME_HAS_NCCL
#include "tessera/runtime/nccl_comm.h"

#include <cuda_runtime_api.h>
#endif

namespace tessera::train {

#ifdef TESSERA_RUNTIME_HAS_NCCL
namespace {

comm::NcclOptions ncclOptions(double timeoutSeconds) {
  comm::NcclOptions options;
  options.timeoutSeconds = timeoutSeconds;
  return options;
}

class NcclRankWorld final : public RankWorld {
public:
  NcclRankWorld(const comm::LaunchInfo &launch, const comm::MeshShape &mesh,
                double timeoutSeconds)
      : rendezvous(launch, timeoutSeconds),
        world(launch, rendezvous, mesh, ncclOptions(timeoutSeconds)) {
    // NcclWorld made GPU LOCAL_RANK current: the stream lives there.
    cudaError_t error =
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (error != cudaSuccess)
      fail(std::string("creating the gradient reduction stream: ") +
           cudaGetErrorString(error));
  }
  ~NcclRankWorld() override {
    if (stream)
      cudaStreamDestroy(stream);
  }

  tessera_comm *dataParallelComm() override { return world.comms().world; }
  void *commStream() override { return stream; }
  const comm::RankComms &rankComms() override { return world.comms(); }

private:
  comm::Rendezvous rendezvous;
  comm::NcclWorld world;
  cudaStream_t stream = nullptr;
};

} // namespace

std::unique_ptr<RankWorld> makeNcclRankWorld(const comm::LaunchInfo &launch,
                                             const comm::MeshShape &mesh,
                                             double timeoutSeconds) {
  return std::make_unique<NcclRankWorld>(launch, mesh, timeoutSeconds);
}
#else
std::unique_ptr<RankWorld> makeNcclRankWorld(const comm::LaunchInfo &launch,
                                             const comm::MeshShape &, double) {
  fail(std::to_string(launch.worldSize) + " ranks were launched (" +
       launch.source +
       "), but this executable's runtime was built without "
       "NCCL; rebuild the runtime where nccl.h and libnccl are found");
}
#endif

} // namespace tessera::train
