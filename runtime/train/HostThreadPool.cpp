//===- HostThreadPool.cpp - Persistent workers, one loop at a time --------===//

#include "HostThreadPool.h"

namespace tessera::train {

HostThreadPool::HostThreadPool(int32_t threads) {
  if (threads <= 0)
    threads = static_cast<int32_t>(std::thread::hardware_concurrency());
  for (int32_t t = 1; t < threads; ++t)
    workers.emplace_back([this] { work(); });
}

HostThreadPool::~HostThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread &worker : workers)
    worker.join();
}

void HostThreadPool::drain() {
  for (int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1))
    (*body)(i);
}

void HostThreadPool::work() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      wake.wait(lock, [&] { return stopping || generation != seen; });
      if (stopping)
        return;
      seen = generation;
    }
    drain();
    std::lock_guard<std::mutex> lock(mutex);
    if (--busy == 0)
      done.notify_one();
  }
}

void HostThreadPool::run(int64_t items,
                         const std::function<void(int64_t)> &loop) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    body = &loop;
    count = items;
    next.store(0);
    busy = static_cast<int32_t>(workers.size());
    ++generation;
  }
  wake.notify_all();
  drain();
  // Every worker leaves the loop before the next one may start (it reads
  // `body` and `count`).
  std::unique_lock<std::mutex> lock(mutex);
  done.wait(lock, [&] { return busy == 0; });
  body = nullptr;
}

} // namespace tessera::train
