//===- NcclWatchdog.h - Bounding every NCCL wait ----------------*- C++ -*-===//
//
// A peer that dies mid-collective leaves the others' NCCL kernels spinning
// forever on the GPU, and a blocking communicator call would wait forever
// on the host. The watchdog bounds both:
// - host side, settle() polls a non-blocking communicator that answered
//   ncclInProgress until it is done, an error, or the deadline;
// - device side, track() records an event after each enqueued collective;
//   a thread polls the events and ncclCommGetAsyncError every pollSeconds.
// A collective still pending after the timeout, or any NCCL error, is
// fatal: every communicator of the rank is aborted (which also frees its
// spinning kernels) and onFatal gets "rank R: NCCL ... (peer died?)".
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_COMM_NCCLWATCHDOG_H
#define TESSERA_RUNTIME_COMM_NCCLWATCHDOG_H

#include "tessera/runtime/nccl_comm.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera::comm {

class NcclWatchdog {
public:
  NcclWatchdog(int device, int32_t worldRank, const NcclOptions &options);
  ~NcclWatchdog();

  void addComm(ncclComm_t comm, const std::string &name);
  /// Forgets every communicator (before they are destroyed).
  void clearComms();
  /// Checks an NCCL call's result: returns on success, settles
  /// ncclInProgress, is fatal on anything else.
  void check(ncclResult_t result, ncclComm_t comm, const std::string &what);
  /// Waits (bounded) until a non-blocking `comm` has finished its call.
  void settle(ncclComm_t comm, const std::string &what);
  /// The waiting of settle without the verdict: ncclSuccess, the error, or
  /// ncclInProgress after the timeout (teardown decides for itself).
  ncclResult_t waitUntilReady(ncclComm_t comm);
  /// Watches the work just enqueued on `stream` until it completes.
  void track(cudaStream_t stream, const std::string &what);
  /// Aborts every communicator, reports, and throws CommError if onFatal
  /// returns.
  [[noreturn]] void fatal(const std::string &message);
  bool hasFailed() const { return failed.load(); }
  double timeoutSeconds() const { return options.timeoutSeconds; }

private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    cudaEvent_t event;
    Clock::time_point deadline;
    std::string what;
  };
  struct WatchedComm {
    ncclComm_t comm;
    std::string name;
  };

  int device;
  int32_t worldRank;
  NcclOptions options;
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<WatchedComm> comms;
  std::deque<Pending> pending;
  std::vector<cudaEvent_t> freeEvents;
  std::atomic<bool> stopping{false};
  std::atomic<bool> failed{false};
  std::once_flag fatalOnce;
  std::string fatalMessage;
  std::thread thread;

  void run();
  /// One look at the communicators and the pending events; returns the
  /// fatal message, or "" when all is well.
  std::string inspect();
  Clock::time_point deadline() const;
  /// "rank R: NCCL <what> did not complete within T s of --comm-timeout
  /// (peer died?)".
  std::string timeoutMessage(const std::string &what) const;
  /// "rank R: NCCL <what>: <NCCL's error> (<its last message>)".
  std::string failureMessage(const std::string &what, ncclResult_t result,
                             ncclComm_t comm, bool peerMayHaveDied) const;
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_COMM_NCCLWATCHDOG_H
