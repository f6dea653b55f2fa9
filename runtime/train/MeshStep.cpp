//===- MeshStep.cpp - the collectives a partitioned step calls ------------===//
//
// mesh_step.h: the context's communicator of an axis, then comm.h. Lives in
// the driver's library because it is the driver that fills the context; the
// messages go to tessera_cpu_last_error() because that is what the driver
// reports when forward_backward fails.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/mesh_step.h"

#include "../cpu/Errors.h"

#include <string>
#include <vector>

namespace {

/// The communicator of `axis`, or nullptr with the error recorded.
tessera_comm *axisComm(const tessera_step_context *context, int32_t axis,
                       const char *what) {
  if (!context || axis < 0 || axis >= context->mesh_axis_count ||
      !context->axis_comms || !context->axis_comms[axis]) {
    tessera::cpu::setLastError(
        std::string(what) + ": the step needs the communicator of mesh axis " +
        std::to_string(axis) + ", and the driver gave " +
        std::to_string(context ? context->mesh_axis_count : 0) +
        " (a partitioned program runs on its mesh)");
    return nullptr;
  }
  return context->axis_comms[axis];
}

/// `collective(comm)` on the communicator of `axis`: 1 without one, else
/// comm.h's status, its message moved to tessera_cpu_last_error().
template <typename Collective>
int onAxis(const tessera_step_context *context, int32_t axis, const char *what,
           Collective collective) {
  tessera_comm *comm = axisComm(context, axis, what);
  if (!comm)
    return 1;
  int status = collective(comm);
  if (status != 0)
    tessera::cpu::setLastError(std::string(what) + " over mesh axis " +
                               std::to_string(axis) + ": " +
                               tessera_comm_last_error());
  return status;
}

} // namespace

extern "C" int tessera_mesh_all_reduce(const tessera_step_context *context,
                                       int32_t axis, tessera_tensor *x,
                                       int32_t op, void *stream) {
  return onAxis(context, axis, "all_reduce", [&](tessera_comm *comm) {
    return tessera_comm_all_reduce(comm, x, op, stream);
  });
}

extern "C" int tessera_mesh_all_gather(const tessera_step_context *context,
                                       int32_t axis, const tessera_tensor *x,
                                       tessera_tensor *y, int32_t dim,
                                       void *stream) {
  return onAxis(context, axis, "all_gather", [&](tessera_comm *comm) {
    return tessera_comm_all_gather(comm, x, y, dim, stream);
  });
}

extern "C" int tessera_mesh_reduce_scatter(const tessera_step_context *context,
                                           int32_t axis,
                                           const tessera_tensor *x,
                                           tessera_tensor *y, int32_t dim,
                                           void *stream) {
  return onAxis(context, axis, "reduce_scatter", [&](tessera_comm *comm) {
    return tessera_comm_reduce_scatter(comm, x, y, dim, stream);
  });
}

extern "C" int tessera_mesh_all_to_all(const tessera_step_context *context,
                                       int32_t axis, const tessera_tensor *x,
                                       tessera_tensor *y, int32_t split_dim,
                                       int32_t concat_dim, void *stream) {
  return onAxis(context, axis, "all_to_all", [&](tessera_comm *comm) {
    return tessera_comm_all_to_all(comm, x, y, split_dim, concat_dim, stream);
  });
}

extern "C" int tessera_mesh_shard_slice(const tessera_step_context *context,
                                        int32_t axis, const tessera_tensor *x,
                                        tessera_tensor *y, int32_t dim) {
  if (!axisComm(context, axis, "shard_slice"))
    return 1;
  if (!context->mesh_coordinates || !x || !y || dim < 0 || dim >= y->rank) {
    tessera::cpu::setLastError("shard_slice over mesh axis " +
                               std::to_string(axis) +
                               ": no coordinates, tensors or dim " +
                               std::to_string(dim));
    return 1;
  }
  std::vector<int64_t> starts(static_cast<size_t>(y->rank), 0),
      strides(static_cast<size_t>(y->rank), 1);
  starts[static_cast<size_t>(dim)] =
      context->mesh_coordinates[axis] * y->shape[dim];
  // tessera_cpu_slice checks that the block lies inside x.
  return tessera_cpu_slice(x, y, starts.data(), strides.data());
}
