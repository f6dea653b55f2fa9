/*===- mesh_step.h - the collectives a partitioned step calls ---------------===*
 *
 * A program partitioned for a device mesh (`tesserac --mesh ... --target`,
 * tess-partition-spmd) talks to the other ranks where its layouts change:
 * each tess collective of the step lowers to one call below, on the
 * communicator of the op's mesh axis, which the driver hands the step in
 * tessera_step_context (axis_comms[axis], mesh_coordinates[axis]; program.h).
 * `axis` is the index of the axis in the program's mesh_shape.
 *
 * They are comm.h's collectives with the context's lookup in front, and one
 * more error path: a collective's failure (a peer died, a mismatch) is
 * reported through tessera_cpu_last_error(), the one message the driver
 * reads when a step fails, as "<collective> over mesh axis A: <why>". A
 * context that has no communicator for `axis` (a driver that runs the
 * program as one device) is the same kind of error, not a crash.
 *
 * `stream` is what comm.h takes: the step's cudaStream_t for a device comm,
 * NULL on the host.
 *
 * A `--target cuda` step calls the tessera_cuda_mesh_* twins instead
 * (defined in libtessera_runtime_train_cuda.a): the same collectives on its
 * stream, a failure reported through tessera_cuda_last_error() (which
 * tessera_cuda_finish_step hands the driver), and shard_slice as the GPU's
 * slice kernel on that stream.
 *===----------------------------------------------------------------------===*/

#ifndef TESSERA_RUNTIME_MESH_STEP_H
#define TESSERA_RUNTIME_MESH_STEP_H

#include "tessera/runtime/comm.h"
#include "tessera/runtime/program.h"

#ifdef __cplusplus
extern "C" {
#endif

/* tess.all_reduce: x (the op's result, already holding the rank's operand)
 * becomes the sum (`op` TESSERA_REDUCE_SUM) or maximum (TESSERA_REDUCE_MAX)
 * over the ranks of the axis's group, in place. */
int tessera_mesh_all_reduce(const tessera_step_context *context, int32_t axis,
                            tessera_tensor *x, int32_t op, void *stream);
/* tess.all_gather: the ranks' x concatenated along `dim` into y. */
int tessera_mesh_all_gather(const tessera_step_context *context, int32_t axis,
                            const tessera_tensor *x, tessera_tensor *y,
                            int32_t dim, void *stream);
/* tess.reduce_scatter: the sum of the ranks' x, block `coordinate` of it
 * along `dim` into y. */
int tessera_mesh_reduce_scatter(const tessera_step_context *context,
                                int32_t axis, const tessera_tensor *x,
                                tessera_tensor *y, int32_t dim, void *stream);
/* tess.all_to_all: x cut along split_dim, block j to coordinate j, what
 * arrives concatenated along concat_dim into y. */
int tessera_mesh_all_to_all(const tessera_step_context *context, int32_t axis,
                            const tessera_tensor *x, tessera_tensor *y,
                            int32_t split_dim, int32_t concat_dim,
                            void *stream);
/* tess.shard_slice on the host: y = block mesh_coordinates[axis] of x along
 * `dim` (y's size along dim is the block's). No communication. */
int tessera_mesh_shard_slice(const tessera_step_context *context, int32_t axis,
                             const tessera_tensor *x, tessera_tensor *y,
                             int32_t dim);

/* A rank's block of a random op whose dim 0 is split over `axis`
 * (stream_axis): *seed becomes the seed of the same stream advanced to the
 * block's first element, mesh_coordinates[axis] * block_elements
 * (tessera_advance_seed). No communication. */
int tessera_mesh_stream_seed(const tessera_step_context *context, int32_t axis,
                             uint64_t *seed, uint64_t block_elements);

/* A rank's block along `axis` of a dim split into blocks of `block`
 * (rows_axis: a vocabulary-parallel table's first row): *start =
 * mesh_coordinates[axis] * block (arguments in stream_seed's order). No
 * communication. */
int tessera_mesh_block_start(const tessera_step_context *context, int32_t axis,
                             int64_t *start, int64_t block);

/* The GPU step's twins of the above (tensors in device memory, `stream` a
 * cudaStream_t). */
int tessera_cuda_mesh_all_reduce(const tessera_step_context *context,
                                 int32_t axis, tessera_tensor *x, int32_t op,
                                 void *stream);
int tessera_cuda_mesh_all_gather(const tessera_step_context *context,
                                 int32_t axis, const tessera_tensor *x,
                                 tessera_tensor *y, int32_t dim, void *stream);
int tessera_cuda_mesh_reduce_scatter(const tessera_step_context *context,
                                     int32_t axis, const tessera_tensor *x,
                                     tessera_tensor *y, int32_t dim,
                                     void *stream);
int tessera_cuda_mesh_all_to_all(const tessera_step_context *context,
                                 int32_t axis, const tessera_tensor *x,
                                 tessera_tensor *y, int32_t split_dim,
                                 int32_t concat_dim, void *stream);
int tessera_cuda_mesh_shard_slice(const tessera_step_context *context,
                                  int32_t axis, const tessera_tensor *x,
                                  tessera_tensor *y, int32_t dim, void *stream);
int tessera_cuda_mesh_stream_seed(const tessera_step_context *context,
                                  int32_t axis, uint64_t *seed,
                                  uint64_t block_elements);
int tessera_cuda_mesh_block_start(const tessera_step_context *context,
                                  int32_t axis, int64_t *start, int64_t block);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_MESH_STEP_H */
