//===- MeshStepCalls.h - What both targets' mesh_step.h calls share -*- C++ -*-===//
//
// The host's tessera_mesh_* (MeshStep.cpp) and the GPU's tessera_cuda_mesh_*
// (CudaMeshStep.cpp) differ only in where a failure's message goes (the
// error the driver reads after a failed call: tessera_cpu_last_error() for
// a host program, tessera_cuda_last_error() for a GPU one, which
// tessera_cuda_finish_step reports) and in the slice kernel of shard_slice.
// Finding the axis's communicator, wording the failure and placing a
// rank's block are written here once.
//
//===----------------------------------------------------------------------===//

#ifndef TESSERA_RUNTIME_TRAIN_MESHSTEPCALLS_H
#define TESSERA_RUNTIME_TRAIN_MESHSTEPCALLS_H

#include "tessera/runtime/comm.h"
#include "tessera/runtime/lowering_support.h"
#include "tessera/runtime/program.h"

#include <optional>
#include <string>
#include <vector>

namespace tessera::train::mesh_step {

/// Where a call's failure message goes.
using ErrorSink = void (*)(const std::string &message);

/// The communicator of `axis`, or nullptr with the failure reported.
tessera_comm *axisComm(const tessera_step_context *context, int32_t axis,
                       const char *what, ErrorSink report);

/// The rank's coordinate on `axis`, or std::nullopt with the failure
/// reported as `what`'s when the context has none.
std::optional<int64_t> axisCoordinate(const tessera_step_context *context,
                                      int32_t axis, const char *what,
                                      ErrorSink report);

/// `collective(comm)` on the communicator of `axis`: 1 without one, else
/// comm.h's status, its message reported as "<what> over mesh axis A: ...".
template <typename Collective>
int onAxis(const tessera_step_context *context, int32_t axis, const char *what,
           ErrorSink report, Collective collective) {
  tessera_comm *comm = axisComm(context, axis, what, report);
  if (!comm)
    return 1;
  int status = collective(comm);
  if (status != 0)
    report(std::string(what) + " over mesh axis " + std::to_string(axis) +
           ": " + tessera_comm_last_error());
  return status;
}

/// comm.h's collectives on the axis's communicator, failures to `report`.
template <ErrorSink report> struct AxisCollectives {
  static int allReduce(const tessera_step_context *context, int32_t axis,
                       tessera_tensor *x, int32_t op, void *stream) {
    return onAxis(context, axis, "all_reduce", report, [&](tessera_comm *c) {
      return tessera_comm_all_reduce(c, x, op, stream);
    });
  }
  static int allGather(const tessera_step_context *context, int32_t axis,
                       const tessera_tensor *x, tessera_tensor *y, int32_t dim,
                       void *stream) {
    return onAxis(context, axis, "all_gather", report, [&](tessera_comm *c) {
      return tessera_comm_all_gather(c, x, y, dim, stream);
    });
  }
  static int reduceScatter(const tessera_step_context *context, int32_t axis,
                           const tessera_tensor *x, tessera_tensor *y,
                           int32_t dim, void *stream) {
    return onAxis(context, axis, "reduce_scatter", report,
                  [&](tessera_comm *c) {
                    return tessera_comm_reduce_scatter(c, x, y, dim, stream);
                  });
  }
  static int allToAll(const tessera_step_context *context, int32_t axis,
                      const tessera_tensor *x, tessera_tensor *y,
                      int32_t splitDim, int32_t concatDim, void *stream) {
    return onAxis(context, axis, "all_to_all", report, [&](tessera_comm *c) {
      return tessera_comm_all_to_all(c, x, y, splitDim, concatDim, stream);
    });
  }
  /// stream_seed and block_start (no communication): 0, or 1 reported.
  static int streamSeed(const tessera_step_context *context, int32_t axis,
                        uint64_t *seed, uint64_t blockElements) {
    std::optional<int64_t> coordinate =
        axisCoordinate(context, axis, "stream_seed", report);
    if (!coordinate || !seed)
      return 1;
    *seed = tessera_advance_seed(
        *seed, static_cast<uint64_t>(*coordinate) * blockElements);
    return 0;
  }
  static int blockStart(const tessera_step_context *context, int32_t axis,
                        int64_t *start, int64_t block) {
    std::optional<int64_t> coordinate =
        axisCoordinate(context, axis, "block_start", report);
    if (!coordinate || !start)
      return 1;
    *start = *coordinate * block;
    return 0;
  }
};

/// tess.shard_slice's window: y is block mesh_coordinates[axis] of x along
/// `dim`. Fills the slice kernels' starts and strides; false (reported)
/// when the context or the operands cannot say.
bool shardSliceWindow(const tessera_step_context *context, int32_t axis,
                      const tessera_tensor *x, const tessera_tensor *y,
                      int32_t dim, ErrorSink report,
                      std::vector<int64_t> &starts,
                      std::vector<int64_t> &strides);

} // namespace tessera::train::mesh_step

#endif // TESSERA_RUNTIME_TRAIN_MESHSTEPCALLS_H
