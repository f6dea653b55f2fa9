//===- CudaMeshStep.cpp - mesh_step.h's GPU entry points ------------------===//
//
// A partitioned `--target cuda` step calls these: the host's collectives
// (MeshStepCalls.h) enqueued on the step's stream, with a failure's message
// made tessera_cuda_last_error(), which tessera_cuda_finish_step reports as
// the step's error; shard_slice is the GPU's slice kernel on that stream.
//
//===----------------------------------------------------------------------===//

#include "tessera/runtime/cuda_lowering_support.h"
#include "tessera/runtime/mesh_step.h"

#include "MeshStepCalls.h"

namespace {

void reportToDevice(const std::string &message) {
  tessera_cuda_set_last_error(message.c_str());
}

using Device = tessera::train::mesh_step::AxisCollectives<reportToDevice>;

} // namespace

extern "C" int tessera_cuda_mesh_all_reduce(const tessera_step_context *context,
                                            int32_t axis, tessera_tensor *x,
                                            int32_t op, void *stream) {
  return Device::allReduce(context, axis, x, op, stream);
}

extern "C" int tessera_cuda_mesh_all_gather(const tessera_step_context *context,
                                            int32_t axis,
                                            const tessera_tensor *x,
                                            tessera_tensor *y, int32_t dim,
                                            void *stream) {
  return Device::allGather(context, axis, x, y, dim, stream);
}

extern "C" int
tessera_cuda_mesh_reduce_scatter(const tessera_step_context *context,
                                 int32_t axis, const tessera_tensor *x,
                                 tessera_tensor *y, int32_t dim, void *stream) {
  return Device::reduceScatter(context, axis, x, y, dim, stream);
}

extern "C" int tessera_cuda_mesh_all_to_all(const tessera_step_context *context,
                                            int32_t axis,
                                            const tessera_tensor *x,
                                            tessera_tensor *y,
                                            int32_t split_dim,
                                            int32_t concat_dim, void *stream) {
  return Device::allToAll(context, axis, x, y, split_dim, concat_dim, stream);
}

extern "C" int
tessera_cuda_mesh_shard_slice(const tessera_step_context *context, int32_t axis,
                              const tessera_tensor *x, tessera_tensor *y,
                              int32_t dim, void *stream) {
  std::vector<int64_t> starts, strides;
  if (!tessera::train::mesh_step::shardSliceWindow(context, axis, x, y, dim,
                                                   reportToDevice, starts,
                                                   strides))
    return 1;
  return tessera_cuda_slice(x, y, starts.data(), strides.data(),
                            static_cast<cudaStream_t>(stream));
}

extern "C" int tessera_cuda_mesh_stream_seed(const tessera_step_context *context,
                                             int32_t axis, uint64_t *seed,
                                             uint64_t block_elements) {
  return Device::streamSeed(context, axis, seed, block_elements);
}

extern "C" int tessera_cuda_mesh_block_start(const tessera_step_context *context,
                                             int32_t axis, int64_t *start,
                                             int64_t block) {
  return Device::blockStart(context, axis, start, block);
}
