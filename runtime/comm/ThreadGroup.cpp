//===- ThreadGroup.cpp - Meeting points of thread ranks -------------------===//

#include "ThreadGroup.h"

#include "CommBase.h"
#include "TensorBlocks.h"

#include <chrono>
#include <cstring>
#include <sstream>

namespace tessera::comm {

ThreadWorldState::ThreadWorldState(int32_t size, double timeoutSeconds)
    : timeout(timeoutSeconds),
      finished(new std::atomic<bool>[static_cast<size_t>(size)]) {
  for (int32_t r = 0; r < size; ++r)
    finished[static_cast<size_t>(r)] = false;
}

void ThreadWorldState::poison(const std::string &why) {
  std::lock_guard<std::mutex> guard(mutex);
  if (!poisoned.load()) {
    reason = why;
    poisoned = true;
  }
}

std::string ThreadWorldState::poisonReason() const {
  std::lock_guard<std::mutex> guard(mutex);
  return reason;
}

void ThreadWorldState::markFinished(int32_t worldRank) {
  finished[static_cast<size_t>(worldRank)] = true;
}

bool ThreadWorldState::hasFinished(int32_t worldRank) const {
  return finished[static_cast<size_t>(worldRank)].load();
}

ThreadGroup::ThreadGroup(ThreadWorldState &world,
                         std::vector<int32_t> worldRanks, std::string name)
    : world(world), members(std::move(worldRanks)), groupName(std::move(name)),
      arrived(members.size(), false), posts(members.size()) {}

void ThreadGroup::failAndPoison(int32_t rank, const std::string &message) {
  std::string full = "rank " +
                     std::to_string(members[static_cast<size_t>(rank)]) + ": " +
                     message;
  world.poison(full);
  throw CommError(message);
}

static std::string formatRanks(const std::vector<int32_t> &ranks) {
  std::ostringstream text;
  for (size_t i = 0; i < ranks.size(); ++i)
    text << (i ? ", " : "") << ranks[i];
  return text.str();
}

void ThreadGroup::waitFor(
    std::unique_lock<std::mutex> &lock, int32_t rank, const std::string &what,
    const std::function<bool()> &done,
    const std::function<std::vector<int32_t>()> &missing) {
  using Clock = std::chrono::steady_clock;
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(world.timeoutSeconds()));
  while (!done()) {
    if (world.isPoisoned())
      throw CommError(what + " on " + groupName +
                      " stopped: " + world.poisonReason());
    std::vector<int32_t> waitingFor = missing();
    for (int32_t member : waitingFor)
      if (world.hasFinished(members[static_cast<size_t>(member)]))
        failAndPoison(rank,
                      what + " on " + groupName + ": rank " +
                          std::to_string(members[static_cast<size_t>(member)]) +
                          " finished without joining it (the ranks "
                          "called different collectives)");
    if (Clock::now() >= deadline) {
      std::vector<int32_t> worldRanks;
      for (int32_t member : waitingFor)
        worldRanks.push_back(members[static_cast<size_t>(member)]);
      std::ostringstream message;
      message << what << " on " << groupName << " timed out after "
              << world.timeoutSeconds() << " s waiting for rank"
              << (worldRanks.size() == 1 ? " " : "s ")
              << formatRanks(worldRanks);
      failAndPoison(rank, message.str());
    }
    // Short slices: a poisoned world or a finished rank is noticed within
    // milliseconds without every poison() having to find every group.
    changed.wait_for(lock, std::chrono::milliseconds(5));
  }
}

void ThreadGroup::barrier(std::unique_lock<std::mutex> &lock, int32_t rank,
                          const char *collective) {
  int64_t myGeneration = generation;
  arrived[static_cast<size_t>(rank)] = true;
  if (++arrivedCount == size()) {
    arrivedCount = 0;
    arrived.assign(members.size(), false);
    ++generation;
    changed.notify_all();
    return;
  }
  waitFor(
      lock, rank, collective, [&] { return generation != myGeneration; },
      [&] {
        std::vector<int32_t> missing;
        for (int32_t r = 0; r < size(); ++r)
          if (!arrived[static_cast<size_t>(r)])
            missing.push_back(r);
        return missing;
      });
}

void ThreadGroup::postAndWait(int32_t rank, const CollectivePost &post) {
  std::unique_lock<std::mutex> lock(mutex);
  posts[static_cast<size_t>(rank)] = post;
  barrier(lock, rank, post.collective);
}

void ThreadGroup::finishCollective(int32_t rank, const char *collective) {
  std::unique_lock<std::mutex> lock(mutex);
  barrier(lock, rank, collective);
}

void ThreadGroup::send(int32_t rank, int32_t peer, const tessera_tensor &x) {
  Message message;
  message.dtype = x.dtype;
  message.shapeRank = x.rank;
  std::memcpy(message.shape, x.shape, sizeof(message.shape));
  const auto *data = static_cast<const unsigned char *>(x.data);
  message.bytes.assign(data, data + tensorBytes(x));
  std::lock_guard<std::mutex> guard(mutex);
  if (world.isPoisoned())
    throw CommError("send on " + groupName +
                    " stopped: " + world.poisonReason());
  mailboxes[{rank, peer}].push_back(std::move(message));
  changed.notify_all();
}

void ThreadGroup::recv(int32_t rank, int32_t peer, tessera_tensor &y) {
  std::unique_lock<std::mutex> lock(mutex);
  std::deque<Message> &box = mailboxes[{peer, rank}];
  waitFor(
      lock, rank, "recv from rank " + std::to_string(peer),
      [&] { return !box.empty(); }, [&] { return std::vector<int32_t>{peer}; });
  Message message = std::move(box.front());
  box.pop_front();
  lock.unlock();
  tessera_tensor sent{};
  sent.dtype = message.dtype;
  sent.rank = message.shapeRank;
  std::memcpy(sent.shape, message.shape, sizeof(sent.shape));
  bool same = sent.dtype == y.dtype && sent.rank == y.rank;
  for (int32_t d = 0; same && d < y.rank; ++d)
    same = sent.shape[d] == y.shape[d];
  if (!same)
    failAndPoison(rank, "recv on " + groupName + ": rank " +
                            std::to_string(members[static_cast<size_t>(peer)]) +
                            " sent " + describeTensor(sent) +
                            " but this rank receives " + describeTensor(y));
  std::memcpy(y.data, message.bytes.data(), message.bytes.size());
}

} // namespace tessera::comm
