//===- NcclWatchdog.cpp - Bounding every NCCL wait ------------------------===//

#include "NcclWatchdog.h"

#include "CudaCheck.h"

#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <sstream>

namespace tessera::comm {

NcclWatchdog::NcclWatchdog(int device, int32_t worldRank,
                           const NcclOptions &options)
    : device(device), worldRank(worldRank), options(options) {
  if (!(this->options.timeoutSeconds > 0))
    throw CommError("--comm-timeout must be positive");
  if (!this->options.onFatal)
    this->options.onFatal = [](const std::string &message) {
      std::fflush(stdout);
      std::fprintf(stderr, "%s\n", message.c_str());
      std::fflush(stderr);
      // No destructors: they would wait on the aborted communicators' GPU
      // work or on threads stuck in them.
      std::_Exit(1);
    };
  thread = std::thread([this] { run(); });
}

NcclWatchdog::~NcclWatchdog() {
  stopping = true;
  wake.notify_all();
  if (thread.joinable())
    thread.join();
  for (const Pending &entry : pending)
    cudaEventDestroy(entry.event);
  for (cudaEvent_t event : freeEvents)
    cudaEventDestroy(event);
}

NcclWatchdog::Clock::time_point NcclWatchdog::deadline() const {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(
             std::chrono::duration<double>(options.timeoutSeconds));
}

void NcclWatchdog::addComm(ncclComm_t comm, const std::string &name) {
  std::lock_guard<std::mutex> guard(mutex);
  comms.push_back({comm, name});
}

void NcclWatchdog::clearComms() {
  std::lock_guard<std::mutex> guard(mutex);
  comms.clear();
}

void NcclWatchdog::fatal(const std::string &message) {
  std::call_once(fatalOnce, [&] {
    fatalMessage = message;
    failed = true;
    std::vector<WatchedComm> toAbort;
    {
      std::lock_guard<std::mutex> guard(mutex);
      toAbort = comms;
    }
    // Split communicators first, the world last. An abort that itself
    // hangs (a driver stuck on a dead peer) must not hide the message: it
    // gets 5 seconds on its own thread, then the report goes out anyway.
    auto aborted = std::make_shared<std::promise<void>>();
    std::future<void> done = aborted->get_future();
    std::thread([toAbort, aborted] {
      for (auto it = toAbort.rbegin(); it != toAbort.rend(); ++it)
        ncclCommAbort(it->comm);
      aborted->set_value();
    }).detach();
    bool finished =
        done.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
    options.onFatal(message + (finished
                                   ? "; aborted this rank's NCCL communicators"
                                   : "; aborting the communicators hung"));
  });
  throw CommError(fatalMessage);
}

void NcclWatchdog::check(ncclResult_t result, ncclComm_t comm,
                         const std::string &what) {
  if (failed)
    throw CommError("the communicators were aborted: " + fatalMessage);
  if (result == ncclSuccess)
    return;
  if (result == ncclInProgress)
    return settle(comm, what);
  fatal(failureMessage(what + " failed", result, comm,
                       result == ncclRemoteError || result == ncclSystemError));
}

ncclResult_t NcclWatchdog::waitUntilReady(ncclComm_t comm) {
  Clock::time_point limit = deadline();
  for (int spins = 0;; ++spins) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t result = ncclCommGetAsyncError(comm, &state);
    if (result != ncclSuccess)
      return result;
    if (state != ncclInProgress || Clock::now() >= limit)
      return state;
    if (spins > 100)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::string NcclWatchdog::failureMessage(const std::string &what,
                                         ncclResult_t result, ncclComm_t comm,
                                         bool peerMayHaveDied) const {
  std::ostringstream message;
  message << "rank " << worldRank << ": NCCL " << what << ": "
          << ncclGetErrorString(result);
  const char *detail = ncclGetLastError(comm);
  if (detail && *detail)
    message << " (" << detail << ")";
  if (peerMayHaveDied)
    message << " (peer died?)";
  return message.str();
}

std::string NcclWatchdog::timeoutMessage(const std::string &what) const {
  std::ostringstream message;
  message << "rank " << worldRank << ": NCCL " << what
          << " did not complete within " << options.timeoutSeconds
          << " s of --comm-timeout (peer died?)";
  return message.str();
}

void NcclWatchdog::settle(ncclComm_t comm, const std::string &what) {
  ncclResult_t state = waitUntilReady(comm);
  if (state == ncclSuccess)
    return;
  if (state != ncclInProgress)
    return check(state, comm, what);
  fatal(timeoutMessage(what));
}

void NcclWatchdog::track(cudaStream_t stream, const std::string &what) {
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> guard(mutex);
    if (!freeEvents.empty()) {
      event = freeEvents.back();
      freeEvents.pop_back();
    }
  }
  if (!event)
    TESSERA_CUDA_CHECK(
        cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  TESSERA_CUDA_CHECK(cudaEventRecord(event, stream));
  std::lock_guard<std::mutex> guard(mutex);
  pending.push_back({event, deadline(), what});
}

std::string NcclWatchdog::inspect() {
  std::lock_guard<std::mutex> guard(mutex);
  for (const WatchedComm &watched : comms) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(watched.comm, &state) == ncclSuccess &&
        state != ncclSuccess && state != ncclInProgress) {
      return failureMessage("error on " + watched.name, state, watched.comm,
                            true);
    }
  }
  // Collectives complete in order per stream, but the entries come from
  // several streams: look at each one.
  Clock::time_point now = Clock::now();
  for (auto entry = pending.begin(); entry != pending.end();) {
    cudaError_t status = cudaEventQuery(entry->event);
    if (status == cudaSuccess) {
      freeEvents.push_back(entry->event);
      entry = pending.erase(entry);
      continue;
    }
    if (status != cudaErrorNotReady)
      return "rank " + std::to_string(worldRank) + ": CUDA error " +
             cudaGetErrorName(status) + " while waiting for NCCL " +
             entry->what;
    if (now >= entry->deadline)
      return timeoutMessage(entry->what);
    ++entry;
  }
  return "";
}

void NcclWatchdog::run() {
  cudaSetDevice(device);
  auto slice = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.pollSeconds));
  while (!stopping && !failed) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait_for(lock, slice, [this] { return stopping.load(); });
    }
    if (stopping)
      break;
    std::string problem = inspect();
    if (!problem.empty()) {
      try {
        fatal(problem);
      } catch (const CommError &) {
        // onFatal returned (a test hook): the watchdog's job is done.
      }
      break;
    }
  }
}

} // namespace tessera::comm
