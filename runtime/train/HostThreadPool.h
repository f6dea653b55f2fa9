//===- HostThreadPool.h - The host's cores on one loop at a time *- C++ -*-===//
//
// The offloaded optimizer (CudaOffloadedOptimizer.h) runs AdamW over
// thousands of equal chunks several times a step, once per range it
// pipelines with the GPU's copies: threads made once and woken per loop
// cost microseconds where a thread per call would cost milliseconds. The
// project uses no OpenMP; this is std::thread, sized to the cores. Items
// are handed out through one atomic counter, so a slow core takes fewer.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_HOSTTHREADPOOL_H
#define TESSERA_RUNTIME_TRAIN_HOSTTHREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::train {

class HostThreadPool {
public:
  /// `threads` workers in all, the caller of run() included (0: one per
  /// hardware thread).
  explicit HostThreadPool(int32_t threads = 0);
  ~HostThreadPool();
  HostThreadPool(const HostThreadPool &) = delete;
  HostThreadPool &operator=(const HostThreadPool &) = delete;

  int32_t size() const { return static_cast<int32_t>(workers.size()) + 1; }

  /// Calls `body(i)` for every i in [0, count), on every thread of the
  /// pool, and returns when all calls have. `body` must not throw.
  void run(int64_t count, const std::function<void(int64_t)> &body);

private:
  void work();
  void drain();

  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake, done;
  /// The loop in progress: its body, size and next item, its generation
  /// (a worker runs each once) and the workers still in it.
  const std::function<void(int64_t)> *body = nullptr;
  int64_t count = 0;
  std::atomic<int64_t> next{0};
  uint64_t generation = 0;
  int32_t busy = 0;
  bool stopping = false;
};

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_HOSTTHREADPOOL_H
