//===- NcclWorld.cpp - A rank's NCCL communicators over a mesh ------------===//
//
// Setup: pick GPU LOCAL_RANK; rank 0 makes the unique id and the
// Rendezvous broadcasts it; every rank creates the world communicator
// non-blocking and settles it under the timeout; then one ncclCommSplit per
// mesh axis, color = the rank's group along that axis (the coordinates with
// the axis left out), key = its coordinate on the axis, so that a split
// communicator's rank is the mesh coordinate, as in the thread backend.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/nccl_comm.h"

#include "CudaCheck.h"
#include "NcclComm.h"
#include "NcclWatchdog.h"

#include <chrono>
#include <cstring>
#include <thread>

namespace tessera::comm {

class NcclWorldState {
public:
  std::unique_ptr<NcclWatchdog> watchdog;
  /// The world first, then the axes.
  std::vector<std::unique_ptr<NcclComm>> comms;

  ~NcclWorldState() {
    if (!watchdog)
      return;
    bool aborted = watchdog->hasFailed();
    watchdog->clearComms();
    for (auto it = comms.rbegin(); it != comms.rend(); ++it) {
      ncclComm_t handle = (*it)->handle();
      it->reset();
      if (aborted)
        continue; // ncclCommAbort freed them already
      // Finalize flushes outstanding work, bounded by the timeout; a
      // communicator that cannot finish cleanly is aborted instead. Either
      // way teardown never ends the process.
      ncclResult_t state = watchdog->waitUntilReady(handle);
      if (state == ncclSuccess) {
        state = ncclCommFinalize(handle);
        if (state == ncclInProgress || state == ncclSuccess)
          state = watchdog->waitUntilReady(handle);
      }
      if (state == ncclSuccess)
        ncclCommDestroy(handle);
      else
        ncclCommAbort(handle);
    }
    watchdog.reset();
  }
};

namespace {

ncclConfig_t nonBlockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

} // namespace

NcclWorld::NcclWorld(const LaunchInfo &info, Rendezvous &rendezvous,
                     const MeshShape &shape, const NcclOptions &options)
    : state(std::make_unique<NcclWorldState>()) {
  MeshShape mesh = shape.empty() ? MeshShape{info.worldSize} : shape;
  if (meshRankCount(mesh) != info.worldSize)
    throw CommError("the mesh " + formatMesh(mesh) + " has " +
                    std::to_string(meshRankCount(mesh)) +
                    " ranks but the run has " + std::to_string(info.worldSize) +
                    " (WORLD_SIZE, from " + info.source + ")");
  int devices = 0;
  TESSERA_CUDA_CHECK(cudaGetDeviceCount(&devices));
  if (info.localRank >= devices)
    throw CommError("rank " + std::to_string(info.rank) + " is local rank " +
                    std::to_string(info.localRank) + " but this node has " +
                    std::to_string(devices) +
                    " GPU(s); start at most one rank per GPU");
  TESSERA_CUDA_CHECK(cudaSetDevice(info.localRank));
  state->watchdog =
      std::make_unique<NcclWatchdog>(info.localRank, info.rank, options);
  NcclWatchdog &watchdog = *state->watchdog;

  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (info.rank == 0)
    watchdog.check(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
  std::string bytes = rendezvous.broadcast(
      std::string(reinterpret_cast<const char *>(&id), sizeof(id)));
  if (bytes.size() != sizeof(id))
    throw CommError("rendezvous: rank 0 sent a malformed NCCL id");
  std::memcpy(&id, bytes.data(), sizeof(id));

  ncclConfig_t config = nonBlockingConfig();
  ncclComm_t world = nullptr;
  ncclResult_t created =
      ncclCommInitRankConfig(&world, info.worldSize, id, info.rank, &config);
  if (world)
    watchdog.addComm(world, "world");
  watchdog.check(created, world, "communicator setup (ncclCommInitRankConfig)");
  if (!world)
    throw CommError("ncclCommInitRankConfig returned no communicator");
  state->comms.push_back(std::make_unique<NcclComm>(world, "world", watchdog));
  rankComms.rank = info.rank;
  rankComms.world = state->comms.back().get();
  rankComms.coordinates = meshCoordinates(mesh, info.rank);

  for (size_t axis = 0; axis < shape.size(); ++axis) {
    // The split runs as an operation of the non-blocking parent (a child
    // config cannot make it blocking): the child handle is written when the
    // parent reads ncclSuccess again, so poll the parent, then the child.
    ncclConfig_t splitConfig = nonBlockingConfig();
    ncclComm_t split = nullptr;
    std::string name =
        "mesh axis " + std::to_string(axis) + " group " +
        std::to_string(meshAxisGroupIndex(mesh, info.rank, axis));
    std::string what = "ncclCommSplit for " + name;
    watchdog.check(
        ncclCommSplit(world, meshAxisGroupIndex(mesh, info.rank, axis),
                      rankComms.coordinates[axis], &split, &splitConfig),
        world, what);
    // NCCL's own thread writes the handle; read it as volatile until it
    // appears (bounded like every other wait).
    volatile ncclComm_t *handle = &split;
    auto limit =
        std::chrono::steady_clock::now() +
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(options.timeoutSeconds));
    while (true) {
      watchdog.settle(world, what);
      if (*handle || std::chrono::steady_clock::now() >= limit)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!split)
      throw CommError(what + " returned no communicator");
    watchdog.settle(split, what);
    watchdog.addComm(split, name);
    state->comms.push_back(std::make_unique<NcclComm>(split, name, watchdog));
    rankComms.axes.push_back(state->comms.back().get());
  }
}

NcclWorld::~NcclWorld() = default;

} // namespace tessera::comm
