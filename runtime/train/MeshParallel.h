//===- MeshParallel.h - The driver's side of a partitioned program -*- C++ -*-===//
//
// A program compiled for a device mesh (`tesserac --mesh 2x2 --target cpu`,
// program.h's mesh fields) is one rank's step: it holds its blocks of the
// parameters (tessera_tensor_split says which), calls the collectives of its
// layouts itself (mesh_step.h, on the context's axis communicators), takes
// its block of the whole micro-batch and returns the micro-batch's loss and
// complete gradients of its blocks. Started plainly, the executable runs the
// mesh's N ranks as N threads of one process over the in-process comm
// (thread_comm.h): the test bed of every partitioned program (on the GPU
// its comms staged through host memory, device_staged_comm.h). A CUDA
// program launched as N processes (--nproc, torchrun, mpirun, srun) runs one
// rank per process on NCCL's communicators of the mesh's axes instead; the
// driver's part is the same either way.
//
// What the driver adds, per rank:
// - weights: every rank reads the whole initial weights (or checkpoint) and
//   keeps its blocks; the moments and counters come along the same way;
// - data: every rank reads the same micro-batches (the step slices them), so
//   the run consumes the data exactly as one device with the program's
//   batch does, and the loss, the gradients and the update are that
//   device's up to the order of sums;
// - the gradient norm: each parameter's block counted once, by the ranks
//   at coordinate 0 of every axis the parameter is not split over (the
//   others hold replicas of the same complete block), then summed over the
//   world; AdamW updates each rank's blocks, identical on replicas since
//   their gradients are (the in-process comm gives every rank the same bits);
// - checkpoints, --dump-params and --dump-grads: the blocks gathered back to
//   whole tensors (all-gathers along each split dim), which rank 0 writes
//   under the whole tensors' names and shapes, so a checkpoint resumes on
//   any mesh or on one device.
// A dim split piece-major (a fused q|k|v projection, tessera_tensor_split's
// `pieces`) is cut and gathered piece by piece, so the files always hold
// the whole tensors in their true order, whatever the mesh.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_MESHPARALLEL_H
#define TESSERA_RUNTIME_TRAIN_MESHPARALLEL_H

#include "TrainingBackend.h"
#include "TrainingState.h"

#include "tessera/runtime/gradient_reducer.h"
#include "tessera/runtime/mesh.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace tessera::train {

/// A partitioned program's splits, and the program of its whole tensors.
class MeshLayout {
public:
  /// Checks the program's mesh fields (throws TrainError naming the tensor
  /// that does not fit its split).
  explicit MeshLayout(const tessera_program &program);
  MeshLayout(const MeshLayout &) = delete;
  MeshLayout &operator=(const MeshLayout &) = delete;

  /// Whether `program` is partitioned for a mesh of more than 0 axes.
  static bool isPartitioned(const tessera_program &program) {
    return program.mesh_axis_count > 0;
  }

  const comm::MeshShape &getShape() const { return shape; }
  /// The program with every parameter and buffer at its whole shape: what
  /// the weights file, the checkpoints and the dumps hold.
  const tessera_program &wholeProgram() const { return whole; }

  /// The blocks of the rank at `coordinates` of every tensor of `state`
  /// (whole tensors), with the same counters.
  TrainingState takeBlocks(const TrainingState &state,
                           const std::vector<int32_t> &coordinates) const;
  /// Per parameter: whether the rank at `coordinates` counts its block in
  /// the gradient norm (the first replica of the block).
  std::vector<bool>
  countedInNorm(const std::vector<int32_t> &coordinates) const;
  /// The whole f32 tensors of the per-parameter blocks `blocks` (host
  /// memory, whatever memory the comms work in; `stream` is the device
  /// comms' staging stream, nullptr on the host). Collective: every rank of
  /// `comms`'s world calls it in the same order.
  std::vector<std::vector<float>>
  gatherParameters(const std::vector<std::vector<float>> &blocks,
                   const comm::RankComms &comms, void *stream) const;

private:
  const tessera_program &program;
  comm::MeshShape shape;
  /// Per parameter, per buffer: per dim the mesh axis or -1.
  std::vector<std::vector<int32_t>> parameterSplits, bufferSplits;
  /// Per parameter, per buffer: per dim the number of pieces the whole dim
  /// is split piece by piece (tessera_tensor_split's `pieces`), 1 for
  /// contiguous blocks and whole dims.
  std::vector<std::vector<int32_t>> parameterPieces, bufferPieces;
  std::vector<tessera_tensor_info> wholeParameters, wholeBuffers;
  tessera_program whole;
};

/// The sum of squares of the whole (gathered) gradient: each rank's counted
/// blocks (of the backend's optimizerGradients), summed over the world by
/// `world` (an agreement on the world comm, made once). Collective.
double meshGradientSumOfSquares(TrainingBackend &backend,
                                const std::vector<bool> &counted,
                                comm::ScalarAgreement &world);
/// The same per parameter of the whole program, from the sums the last
/// meshGradientSumOfSquares added (each parameter's counted blocks summed
/// over the world), on every rank. Collective.
std::vector<double> meshParameterSumsOfSquares(TrainingBackend &backend,
                                               comm::ScalarAgreement &world);

/// A thread rank (of a partitioned or pipelined program started plainly, or
/// of `--thread-ranks N`'s data parallelism) as its device sees it. Made on
/// the rank's thread before its backend (the CUDA driver selects the rank's
/// GPU there), it holds the comms the rank runs on: the in-process ones as
/// they are on the host, wrapped for device memory on the GPU
/// (device_staged_comm.h).
class ThreadRankDevice {
public:
  virtual ~ThreadRankDevice() = default;
  virtual const comm::RankComms &comms() const = 0;
  /// The stream a data-parallel rank's gradient and weight collectives run
  /// on, beside its backend's compute stream, as a launched rank's NCCL
  /// ones do (NcclRankWorld); nullptr on the host.
  virtual void *commStream() const { return nullptr; }
};

/// Makes a thread rank's device from its in-process comms; an empty
/// factory keeps the comms as they are.
using ThreadRankFactory = std::function<std::unique_ptr<ThreadRankDevice>(
    const comm::RankComms &hostComms)>;

} // namespace tessera::train

#endif // TESSERA_RUNTIME_TRAIN_MESHPARALLEL_H
