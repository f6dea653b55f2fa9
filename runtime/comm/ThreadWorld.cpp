//===- ThreadWorld.cpp - N ranks as threads of one process ----------------===//

#include "tessera/runtime/thread_comm.h"

#include "ThreadComm.h"
#include "ThreadGroup.h"

#include <cstring>
#include <thread>

namespace tessera::comm {
namespace {

class HostStreamOps : public StreamOps {
public:
  void *createEvent() override { return nullptr; }
  void destroyEvent(void *) override {}
  void recordEvent(void *, void *) override {}
  void waitEvent(void *, void *) override {}
  void *allocate(size_t bytes) override { return ::operator new(bytes); }
  void release(void *memory) override { ::operator delete(memory); }
  void copyToComm(void *destination, const void *source, size_t bytes,
                  void *) override {
    std::memcpy(destination, source, bytes);
  }
  void copyToHost(void *destination, const void *source, size_t bytes,
                  void *) override {
    std::memcpy(destination, source, bytes);
  }
};

/// Makes the group of `worldRanks` and one comm per member; returns the
/// comm of each member, indexed like worldRanks.
std::vector<tessera_comm *> makeGroup(ThreadWorldState &state,
                                      std::vector<int32_t> worldRanks,
                                      const std::string &name) {
  size_t count = worldRanks.size();
  state.groups.push_back(
      std::make_unique<ThreadGroup>(state, std::move(worldRanks), name));
  std::vector<tessera_comm *> comms;
  for (size_t r = 0; r < count; ++r) {
    state.comms.push_back(std::make_unique<ThreadComm>(
        *state.groups.back(), static_cast<int32_t>(r)));
    comms.push_back(state.comms.back().get());
  }
  return comms;
}

} // namespace

StreamOps &hostStreamOps() {
  static HostStreamOps operations;
  return operations;
}

ThreadWorld::ThreadWorld(const MeshShape &meshShape, double timeoutSeconds)
    : meshShape(meshShape) {
  int64_t count = meshRankCount(meshShape);
  if (!(timeoutSeconds > 0))
    throw CommError("the collective timeout must be positive");
  state = std::make_unique<ThreadWorldState>(static_cast<int32_t>(count),
                                             timeoutSeconds);
  ranks.resize(static_cast<size_t>(count));
  std::vector<int32_t> everyone;
  for (int32_t r = 0; r < count; ++r) {
    everyone.push_back(r);
    ranks[static_cast<size_t>(r)].rank = r;
    ranks[static_cast<size_t>(r)].coordinates = meshCoordinates(meshShape, r);
    ranks[static_cast<size_t>(r)].axes.resize(meshShape.size());
  }
  std::vector<tessera_comm *> world = makeGroup(*state, everyone, "world");
  for (int32_t r = 0; r < count; ++r)
    ranks[static_cast<size_t>(r)].world = world[static_cast<size_t>(r)];
  for (size_t axis = 0; axis < meshShape.size(); ++axis)
    for (int32_t r = 0; r < count; ++r) {
      std::vector<int32_t> members = meshAxisGroup(meshShape, r, axis);
      if (members[0] != r)
        continue; // made when its first member came by
      std::string name = "mesh axis " + std::to_string(axis) + " group " +
                         std::to_string(meshAxisGroupIndex(meshShape, r, axis));
      std::vector<tessera_comm *> comms = makeGroup(*state, members, name);
      for (size_t m = 0; m < members.size(); ++m)
        ranks[static_cast<size_t>(members[m])].axes[axis] = comms[m];
    }
}

ThreadWorld::~ThreadWorld() = default;

int32_t ThreadWorld::size() const { return static_cast<int32_t>(ranks.size()); }

const MeshShape &ThreadWorld::shape() const { return meshShape; }

const RankComms &ThreadWorld::rank(int32_t rank) const {
  if (rank < 0 || rank >= size())
    throw CommError("rank " + std::to_string(rank) + " is not in a world of " +
                    std::to_string(size()));
  return ranks[static_cast<size_t>(rank)];
}

void ThreadWorld::poison(const std::string &reason) { state->poison(reason); }

void ThreadWorld::markFinished(int32_t rank) { state->markFinished(rank); }

std::string ThreadWorld::failure() const { return state->poisonReason(); }

void runThreadRanks(ThreadWorld &world,
                    const std::function<int(const RankComms &)> &body) {
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < world.size(); ++r)
    threads.emplace_back([&world, &body, r] {
      std::string failure;
      try {
        int status = body(world.rank(r));
        if (status != 0)
          failure = "failed with status " + std::to_string(status);
      } catch (const std::exception &error) {
        failure = error.what();
      } catch (...) {
        failure = "failed with an unknown exception";
      }
      if (!failure.empty())
        world.poison("rank " + std::to_string(r) + " failed: " + failure);
      world.markFinished(r);
    });
  for (std::thread &thread : threads)
    thread.join();
  std::string reason = world.failure();
  if (!reason.empty())
    throw CommError(reason);
}

} // namespace tessera::comm
