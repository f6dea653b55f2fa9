//===- NcclComm.h - One rank's NCCL communicator as a tessera_comm -*- C++ -*-//

#ifndef TESSERA_RUNTIME_COMM_NCCLCOMM_H
#define TESSERA_RUNTIME_COMM_NCCLCOMM_H

#include "CommBase.h"
#include "NcclWatchdog.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace tessera::comm {

class NcclComm : public tessera_comm {
public:
  NcclComm(ncclComm_t handle, std::string name, NcclWatchdog &watchdog);
  ~NcclComm() override;

  ncclComm_t handle() const { return comm; }
  int32_t size() const override { return groupSize; }
  int32_t rank() const override { return groupRank; }
  const std::string &name() const override { return groupName; }
  StreamOps &streamOps() override;

  void allReduce(tessera_tensor &x, tessera_reduce_op op,
                 void *stream) override;
  void allGather(const tessera_tensor &x, tessera_tensor &y, int32_t axis,
                 void *stream) override;
  void reduceScatter(const tessera_tensor &x, tessera_tensor &y, int32_t axis,
                     void *stream) override;
  void allToAll(const tessera_tensor &x, tessera_tensor &y, int32_t splitAxis,
                int32_t concatAxis, void *stream) override;
  void send(const tessera_tensor &x, int32_t peer, void *stream) override;
  void recv(tessera_tensor &y, int32_t peer, void *stream) override;
  void groupStart() override;
  void groupEnd() override;

private:
  /// Device scratch for packing blocks that are not contiguous; grows only.
  struct Scratch {
    void *data = nullptr;
    size_t bytes = 0;
  };

  ncclComm_t comm;
  std::string groupName;
  NcclWatchdog &watchdog;
  int32_t groupSize = 0;
  int32_t groupRank = 0;
  Scratch scratch[2];
  /// Inside groupStart/groupEnd: the calls are only issued at the group's
  /// end, so the watchdog tracks the group then, on the stream of its
  /// calls, under the names of its calls.
  bool grouped = false;
  cudaStream_t groupStream = nullptr;
  std::string groupCalls;

  /// A send or receive: issued now, or at the end of the open group.
  void pointToPoint(ncclResult_t result, cudaStream_t stream,
                    const std::string &what);

  void *scratchBuffer(int slot, size_t bytes, cudaStream_t stream);
  /// Checks the call, then watches its completion.
  void enqueued(ncclResult_t result, cudaStream_t stream,
                const std::string &what);
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_COMM_NCCLCOMM_H
