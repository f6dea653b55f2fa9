//===- ThreadGroup.h - Meeting points of thread ranks -----------*- C++ -*-===//
//
// ThreadWorldState is what all groups of one ThreadWorld share: the
// "poisoned" flag with its reason, which ranks have finished, the timeout.
// A ThreadGroup is one communicator's meeting point: each collective is two
// barriers around a table of posted arguments (post, barrier, everyone reads
// everyone's posts and computes its own result, barrier, write results), and
// one mailbox per (sender, receiver) pair holds sent messages until they are
// received (sends are buffered, so a send never waits).
//
// Every wait checks, every few milliseconds, the poisoned flag, whether a
// rank it waits for has finished, and the deadline; whichever fires first
// ends the wait with a CommError, poisoning the world so nobody else waits
// out the full timeout either.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_COMM_THREADGROUP_H
#define TESSERA_RUNTIME_COMM_THREADGROUP_H

#include "tessera/runtime/comm.h"
#include "tessera/runtime/comm_error.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct tessera_comm;

namespace tessera::comm {

class ThreadGroup;

class ThreadWorldState {
public:
  ThreadWorldState(int32_t size, double timeoutSeconds);

  void poison(const std::string &reason);
  bool isPoisoned() const { return poisoned.load(); }
  std::string poisonReason() const;
  void markFinished(int32_t worldRank);
  bool hasFinished(int32_t worldRank) const;
  double timeoutSeconds() const { return timeout; }

  /// Every group and comm of the world, owned here.
  std::vector<std::unique_ptr<ThreadGroup>> groups;
  std::vector<std::unique_ptr<tessera_comm>> comms;

private:
  double timeout;
  std::atomic<bool> poisoned{false};
  mutable std::mutex mutex;
  std::string reason;
  std::unique_ptr<std::atomic<bool>[]> finished;
};

/// One rank's arguments to the collective in progress.
struct CollectivePost {
  const char *collective = "";
  tessera_tensor x{};
  tessera_tensor y{};
  int32_t op = 0;
  int32_t axis = 0;
  int32_t secondAxis = 0;
};

class ThreadGroup {
public:
  ThreadGroup(ThreadWorldState &world, std::vector<int32_t> worldRanks,
              std::string name);

  int32_t size() const { return static_cast<int32_t>(members.size()); }
  const std::string &name() const { return groupName; }

  /// Posts this rank's arguments and waits for every rank's.
  void postAndWait(int32_t rank, const CollectivePost &post);
  /// The posts of the collective in progress (valid between the barriers).
  const std::vector<CollectivePost> &currentPosts() const { return posts; }
  /// The second barrier: everyone has read the posts.
  void finishCollective(int32_t rank, const char *collective);

  void send(int32_t rank, int32_t peer, const tessera_tensor &x);
  void recv(int32_t rank, int32_t peer, tessera_tensor &y);

private:
  struct Message {
    int32_t dtype;
    int32_t shapeRank;
    int64_t shape[TESSERA_MAX_RANK];
    std::vector<unsigned char> bytes;
  };

  ThreadWorldState &world;
  std::vector<int32_t> members;
  std::string groupName;
  std::mutex mutex;
  std::condition_variable changed;
  int64_t generation = 0;
  std::vector<bool> arrived;
  int32_t arrivedCount = 0;
  std::vector<CollectivePost> posts;
  std::map<std::pair<int32_t, int32_t>, std::deque<Message>> mailboxes;

  void barrier(std::unique_lock<std::mutex> &lock, int32_t rank,
               const char *collective);
  /// Waits until `done`; `missing` names the ranks still awaited.
  void waitFor(std::unique_lock<std::mutex> &lock, int32_t rank,
               const std::string &what, const std::function<bool()> &done,
               const std::function<std::vector<int32_t>()> &missing);
  [[noreturn]] void failAndPoison(int32_t rank, const std::string &message);
};

} // namespace tessera::comm

#endif // TESSERA_RUNTIME_COMM_THREADGROUP_H
