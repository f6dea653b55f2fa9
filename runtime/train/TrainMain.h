//===- TrainMain.h - The driver, with its backend chosen by the caller -*- C++ -*-===//
//
// tessera_train_main (program.h) is runTrainMain with the host backend;
// tessera_cuda_train_main (cuda_lowering_support.h, CudaTrainMain.cpp) is
// runTrainMain with the CUDA backend, in its own library so that only CUDA
// executables link CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_TRAINMAIN_H
#define TESSERA_RUNTIME_TRAIN_TRAINMAIN_H

#include "DataParallel.h"
#include "MeshParallel.h"
#include "TrainingBackend.h"

namespace tessera::train {

/// Takes the launch flags (launch.h: --nproc makes this process the
/// launcher of N ranks), parses the rest, checks the program, makes the
/// ranks' world with `makeWorld` when there are several (an empty factory:
/// this executable runs one rank only), runs the steps on the backend
/// `makeBackend` makes; returns the exit code (every error printed as
/// "[rank R: ]<program>: error: ..." on stderr). A partitioned program
/// started plainly runs its mesh's ranks as threads, each adopted by
/// `adoptThreadRank` (MeshParallel.h) when given; launched, one rank per
/// process on `makeWorld`'s mesh.
int runTrainMain(int argc, char **argv, const tessera_program *program,
                 const BackendFactory &makeBackend,
                 const RankWorldFactory &makeWorld = nullptr,
                 const ThreadRankFactory &adoptThreadRank = nullptr);

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_TRAINMAIN_H
