//===- thread_comm.h - N ranks as threads of one process --------*- C++ -*-===//
//
// The in-process backend of comm.h, the CPU backend's multi-rank mode and the
// test bed of every partitioned program: a ThreadWorld owns the groups of a
// mesh (the world and one group per mesh axis and coordinate); each rank, a
// thread, uses its RankComms. Collectives work on host memory, reduce in rank
// order (every rank gets bit-identical results, run after run) and
// accumulate bf16/f16 in f32.
//
// Failure never hangs: a rank whose function throws or returns while others
// wait in a collective poisons the world, and every waiting rank fails with
// "rank R: ... rank Q failed: <why>"; a collective that waits longer than
// the timeout fails the same way, naming the ranks that never arrived.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_THREAD_COMM_H
#define TESSERA_RUNTIME_THREAD_COMM_H

#include "tessera/runtime/mesh.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tessera::comm {

class ThreadWorldState;

class ThreadWorld {
public:
  /// A world of meshRankCount(shape) thread ranks. `timeoutSeconds` bounds
  /// every wait inside a collective (a rank that never arrives).
  explicit ThreadWorld(const MeshShape &shape, double timeoutSeconds = 300);
  ~ThreadWorld();
  ThreadWorld(const ThreadWorld &) = delete;
  ThreadWorld &operator=(const ThreadWorld &) = delete;

  int32_t size() const;
  const MeshShape &shape() const;
  /// Rank r's comms (valid as long as the world lives).
  const RankComms &rank(int32_t rank) const;

  /// Marks the world failed: every rank waiting in or entering a collective
  /// fails with `reason`. The first reason wins.
  void poison(const std::string &reason);
  /// Tells the others that `rank` will call no more collectives, so that one
  /// waiting for it fails at once instead of at the timeout.
  void markFinished(int32_t rank);
  /// The first failure ("" if none).
  std::string failure() const;

private:
  MeshShape meshShape;
  std::unique_ptr<ThreadWorldState> state;
  std::vector<RankComms> ranks;
};

/// Runs body(rank, comms) on one thread per rank and waits for all. A rank
/// whose body throws (or returns nonzero) poisons the world; after every
/// thread has ended, throws CommError with the first failure
/// ("rank R: <message>"), or returns normally if every rank succeeded.
void runThreadRanks(ThreadWorld &world,
                    const std::function<int(const RankComms &)> &body);

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_THREAD_COMM_H
