//===- nccl_comm.h - comm.h on NCCL, one process per GPU --------*- C++ -*-===//
//
// An NcclWorld is one rank's NCCL communicators: the world (initialized
// from a unique id that rank 0 makes and the Rendezvous carries) and one
// ncclCommSplit per mesh axis. Collectives are enqueued on the caller's
// stream and return at once.
//
// Never a silent hang: the communicators are non-blocking
// (ncclCommInitRankConfig with blocking = 0), so no host call waits on a
// peer without a deadline, and a watchdog thread polls ncclCommGetAsyncError
// and the completion of every enqueued collective. A collective that has not
// completed after the timeout (--comm-timeout), or an asynchronous NCCL
// error, aborts every communicator of the rank (ncclCommAbort) and calls
// onFatal with "rank R: NCCL <collective> on <comm> ...(peer died?)"; the
// default onFatal prints it and exits the process with code 1.
//
// Only built when NCCL is found (TESSERA_RUNTIME_HAS_NCCL).
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_NCCL_COMM_H
#define TESSERA_RUNTIME_NCCL_COMM_H

#include "tessera/runtime/launch.h"
#include "tessera/runtime/mesh.h"

#include <functional>
#include <memory>
#include <string>

namespace tessera::comm {

struct NcclOptions {
  /// Longest time a collective (or communicator setup) may take.
  double timeoutSeconds = 300;
  /// How often the watchdog looks at the pending collectives.
  double pollSeconds = 0.05;
  /// Called once, from the watchdog thread, after the communicators were
  /// aborted. Default: print the message to stderr, exit(1) the process.
  std::function<void(const std::string &)> onFatal;
};

class NcclWorldState;

class NcclWorld {
public:
  /// Selects GPU info.localRank (cudaSetDevice), creates the world and the
  /// per-axis communicators. meshRankCount(shape) must be info.worldSize.
  NcclWorld(const LaunchInfo &info, Rendezvous &rendezvous,
            const MeshShape &shape, const NcclOptions &options = {});
  ~NcclWorld();
  NcclWorld(const NcclWorld &) = delete;
  NcclWorld &operator=(const NcclWorld &) = delete;

  const RankComms &comms() const { return rankComms; }

private:
  std::unique_ptr<NcclWorldState> state;
  RankComms rankComms;
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_NCCL_COMM_H
