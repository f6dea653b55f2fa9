/*===- tensor_chunks.h - parameters cut into equal work items --------------===*
 *
 * The driver keeps every per-parameter tensor of a run (master weights,
 * AdamW moments, gradients, accumulators) as one slice of a flat buffer per
 * kind, all with the same element offsets (a ZeRO-1 rank's master weights
 * and moments hold only its shard, placed by `state_offset`). Kernels that visit every
 * parameter (the multi-tensor AdamW, the gradient's sum of squares) take a
 * table of chunks: each at most a fixed number of elements of one
 * parameter, so one launch over the table gives every block the same work
 * whatever the parameters' sizes. Plain C and no CUDA types, so the host
 * driver builds the table and the device kernels read it.
 *===----------------------------------------------------------------------===*/

#ifndef TESSERA_RUNTIME_TENSOR_CHUNKS_H
#define TESSERA_RUNTIME_TENSOR_CHUNKS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessera_tensor_chunk {
  int64_t offset;       /* first element, into the flat buffers */
  int64_t count;        /* elements in the chunk */
  int32_t tensor;       /* the parameter it is part of */
  int32_t weight_decay; /* nonzero: AdamW's decoupled weight decay applies */
  int64_t copy_offset;  /* first element of the chunk's compute copy in the
                           copies' flat buffer (program.h's
                           parameter_step_dtypes), which the multi-tensor
                           AdamW rewrites from the updated master; -1: the
                           step reads the master, no copy */
  int64_t state_offset; /* first element of the chunk's master weights and
                           AdamW moments in their flat buffers: `offset`
                           when every rank holds the whole state, else the
                           place in the rank's compact shard (ZeRO-1) */
} tessera_tensor_chunk;

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_TENSOR_CHUNKS_H */
