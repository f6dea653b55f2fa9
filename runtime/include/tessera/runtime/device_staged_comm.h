//===- device_staged_comm.h - In-process comms over device memory -*- C++ -*-===//
//
// The CUDA driver's test bed for partitioned programs: a `--target cuda`
// program compiled for a mesh and started plainly runs its ranks as threads
// of one process, like the CPU driver's, each on a GPU of this machine
// (several ranks may share one). Their collectives are the in-process
// comm's (thread_comm.h), which works in host memory; a DeviceStagedComms
// wraps a thread rank's communicators so that they take device tensors:
// each collective waits for the caller's stream, copies its operand to the
// host, runs the in-process collective, and copies the result back before
// it returns. Slow (every collective synchronizes) and exact: the in-process
// sums are the ones the CPU test bed makes, so the same program's numbers
// can be checked on one GPU without NCCL. Launched ranks (--nproc, mpirun,
// ...) use NCCL instead (nccl_comm.h).
//
// Built with the NCCL backend (it uses the CUDA runtime).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_DEVICE_STAGED_COMM_H
#define TESSERA_RUNTIME_DEVICE_STAGED_COMM_H

#include "tessera/runtime/mesh.h"

#include <memory>
#include <vector>

namespace tessera::comm {

class DeviceStagedComms {
public:
  /// Wraps `host` (a thread rank's in-process comms, which must outlive
  /// this object).
  explicit DeviceStagedComms(const RankComms &host);
  ~DeviceStagedComms();
  DeviceStagedComms(const DeviceStagedComms &) = delete;
  DeviceStagedComms &operator=(const DeviceStagedComms &) = delete;

  /// The same world, axes and coordinates, over device memory.
  const RankComms &comms() const { return staged; }

private:
  std::vector<std::unique_ptr<tessera_comm>> owned;
  RankComms staged;
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_DEVICE_STAGED_COMM_H
