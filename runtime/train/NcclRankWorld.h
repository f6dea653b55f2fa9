//===- NcclRankWorld.h - The GPU ranks' world for the driver ----*- C++ -*-===//
//
// The RankWorld (DataParallel.h) of a CUDA executable: the TCP rendezvous on
// MASTER_ADDR:MASTER_PORT, the NCCL communicators of the run's mesh (one
// data-parallel axis over every rank, or a partitioned program's mesh, one
// split communicator per axis), which selects GPU LOCAL_RANK, and the
// stream the gradient collectives run on. Built without NCCL, making one is
// an error that says so.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_NCCLRANKWORLD_H
#define TESSERA_RUNTIME_TRAIN_NCCLRANKWORLD_H

#include "DataParallel.h"

namespace tessera::train {

/// A RankWorldFactory: throws TrainError or comm::CommError when the ranks
/// cannot meet or NCCL cannot start.
std::unique_ptr<RankWorld> makeNcclRankWorld(const comm::LaunchInfo &launch,
                                             const comm::MeshShape &mesh,
                                             double timeoutSeconds);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_NCCLRANKWORLD_H
