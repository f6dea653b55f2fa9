//===- MeshStep.cpp - the collectives a partitioned step calls ------------===//
//
// mesh_step.h's host entry points: the context's communicator of an axis,
// then comm.h. Lives in the driver's library because it is the driver that
// fills the context; the messages go to tessera_cpu_last_error() because
// that is what the driver reports when a host program's forward_backward
// fails. The pieces the GPU's entry points share are here too
// (MeshStepCalls.h).
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/lowering_support.h"
#include "tessera/runtime/mesh_step.h"

#include "MeshStepCalls.h"

#include "../cpu/Errors.h"

namespace tessera::train::mesh_step {

tessera_comm *axisComm(const tessera_step_context *context, int32_t axis,
                       const char *what, ErrorSink report) {
  if (!context || axis < 0 || axis >= context->mesh_axis_count ||
      !context->axis_comms || !context->axis_comms[axis]) {
    report(std::string(what) +
           ": the step needs the communicator of mesh axis " +
           std::to_string(axis) + ", and the driver gave " +
           std::to_string(context ? context->mesh_axis_count : 0) +
           " (a partitioned program runs on its mesh)");
    return nullptr;
  }
  return context->axis_comms[axis];
}

bool shardSliceWindow(const tessera_step_context *context, int32_t axis,
                      const tessera_tensor *x, const tessera_tensor *y,
                      int32_t dim, ErrorSink report,
                      std::vector<int64_t> &starts,
                      std::vector<int64_t> &strides) {
  if (!axisComm(context, axis, "shard_slice", report))
    return false;
  if (!context->mesh_coordinates || !x || !y || dim < 0 || dim >= y->rank) {
    report("shard_slice over mesh axis " + std::to_string(axis) +
           ": no coordinates, tensors or dim " + std::to_string(dim));
    return false;
  }
  starts.assign(static_cast<size_t>(y->rank), 0);
  strides.assign(static_cast<size_t>(y->rank), 1);
  starts[static_cast<size_t>(dim)] =
      context->mesh_coordinates[axis] * y->shape[dim];
  return true;
}

std::optional<int64_t> axisCoordinate(const tessera_step_context *context,
                                      int32_t axis, const char *what,
                                      ErrorSink report) {
  if (!context || axis < 0 || axis >= context->mesh_axis_count ||
      !context->mesh_coordinates) {
    report(std::string(what) + " over mesh axis " + std::to_string(axis) +
           ": the step needs the rank's coordinate on it, and the driver "
           "gave " +
           std::to_string(context ? context->mesh_axis_count : 0) +
           " axes (a partitioned program runs on its mesh)");
    return std::nullopt;
  }
  return context->mesh_coordinates[axis];
}

} // namespace tessera::train::mesh_step

namespace {

void reportToHost(const std::string &message) {
  tessera::cpu::setLastError(message);
}

using Host = tessera::train::mesh_step::AxisCollectives<reportToHost>;

} // namespace

extern "C" int tessera_mesh_all_reduce(const tessera_step_context *context,
                                       int32_t axis, tessera_tensor *x,
                                       int32_t op, void *stream) {
  return Host::allReduce(context, axis, x, op, stream);
}

extern "C" int tessera_mesh_all_gather(const tessera_step_context *context,
                                       int32_t axis, const tessera_tensor *x,
                                       tessera_tensor *y, int32_t dim,
                                       void *stream) {
  return Host::allGather(context, axis, x, y, dim, stream);
}

extern "C" int tessera_mesh_reduce_scatter(const tessera_step_context *context,
                                           int32_t axis,
                                           const tessera_tensor *x,
                                           tessera_tensor *y, int32_t dim,
                                           void *stream) {
  return Host::reduceScatter(context, axis, x, y, dim, stream);
}

extern "C" int tessera_mesh_all_to_all(const tessera_step_context *context,
                                       int32_t axis, const tessera_tensor *x,
                                       tessera_tensor *y, int32_t split_dim,
                                       int32_t concat_dim, void *stream) {
  return Host::allToAll(context, axis, x, y, split_dim, concat_dim, stream);
}

extern "C" int tessera_mesh_shard_slice(const tessera_step_context *context,
                                        int32_t axis, const tessera_tensor *x,
                                        tessera_tensor *y, int32_t dim) {
  std::vector<int64_t> starts, strides;
  if (!tessera::train::mesh_step::shardSliceWindow(context, axis, x, y, dim,
                                                   reportToHost, starts,
                                                   strides))
    return 1;
  // tessera_cpu_slice checks that the block lies inside x.
  return tessera_cpu_slice(x, y, starts.data(), strides.data());
}

extern "C" int tessera_mesh_stream_seed(const tessera_step_context *context,
                                        int32_t axis, uint64_t *seed,
                                        uint64_t block_elements) {
  return Host::streamSeed(context, axis, seed, block_elements);
}

extern "C" int tessera_mesh_block_start(const tessera_step_context *context,
                                        int32_t axis, int64_t *start,
                                        int64_t block) {
  return Host::blockStart(context, axis, start, block);
}
