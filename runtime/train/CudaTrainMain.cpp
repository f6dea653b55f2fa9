//===- CudaTrainMain.cpp - The training executable's main on the GPU ------===//
//
// The same driver as tessera_train_main, with the CUDA backend and, for
// several ranks (--nproc, torchrun, mpirun, srun), NCCL. It is the
// only entry point of libtessera_runtime_train_cuda.a, which the main of a
// `--target cuda` program calls, so a CPU executable never links CUDA.
//
//===----------------------------------------------------------------------===//

#include "CudaBackend.h"
#include "NcclRankWorld.h"
#include "TrainMain.h"

#include "tessera/runtime/cuda_lowering_support.h"

extern "C" int tessera_cuda_train_main(int argc, char **argv,
                                       const tessera_program *program) {
  return tessera::train::runTrainMain(argc, argv, program,
                                      tessera::train::makeCudaBackend,
                                      tessera::train::makeNcclRankWorld);
}
