/*===- lowering_support.h - helpers the lowered training step calls -------===*
 *
 * `tess-lower-to-emitc` turns @forward_backward into straight-line C++ whose
 * only calls are the kernels of cpu_kernels.h and the few helpers below:
 * the arena (one block, acquired on the first step and reused by every
 * later one, so the step loop never allocates), tensor descriptors built
 * from the compiler's layout table, constants, dropout seeds, and the
 * announcement of each finished gradient to the driver.
 *
 * The layout table: one row of TESSERA_LAYOUT_ROW int64 values per tensor
 * descriptor the step builds, emitted as a static array:
 *   row[0]             byte offset from the base pointer (the arena's
 *                      offset of the tensor; 0 for views of other storage)
 *   row[1]             tessera_dtype
 *   row[2]             rank
 *   row[3 .. 3 + rank) the dims
 *===----------------------------------------------------------------------===*/

#ifndef TESSERA_RUNTIME_LOWERING_SUPPORT_H
#define TESSERA_RUNTIME_LOWERING_SUPPORT_H

#include "tessera/runtime/cpu_kernels.h"
#include "tessera/runtime/program.h"

/* The generated code uses NULL and size_t (EmitC's index type). */
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSERA_LAYOUT_ROW (3 + TESSERA_MAX_RANK)
/* Every arena offset is a multiple of this (the compiler plans it so). */
#define TESSERA_ARENA_ALIGNMENT 64

/* Allocates *arena (`bytes`, zeroed, TESSERA_ARENA_ALIGNMENT-aligned) when it
 * is still NULL; a later call with the same pointer does nothing. Returns 0,
 * or nonzero with tessera_cpu_last_error() set when memory runs out. The
 * arena is owned by the program for the life of the process. */
int tessera_arena_acquire(uint8_t **arena, int64_t bytes);

/* The descriptor of layout row `row`, its data at base + row[0]. `base` is
 * the arena, or the caller's storage for an output written in place. */
tessera_tensor tessera_layout_tensor(void *base, const int64_t *layout,
                                     int32_t row);

/* The same data as `base`, described by layout row `row` (a reshape that
 * aliases its input, or a [..., V] tensor viewed as rows). */
tessera_tensor tessera_view_tensor(const tessera_tensor *base,
                                   const int64_t *layout, int32_t row);

/* Copies `bytes` bytes of a constant into the tensor's storage. */
int tessera_fill_bytes(tessera_tensor *y, const uint8_t *bytes, int64_t size);

/* Writes the one element `element` (`element_size` bytes) into every
 * element of y: a splat constant such as a zero gradient. */
int tessera_fill_splat(tessera_tensor *y, const uint8_t *element,
                       int64_t element_size);

/* The seed of one random op in one micro-batch: the step's seed mixed with
 * the op's `seed` attribute (SplitMix64's finalizer), as the interpreter
 * does, so both draw the same dropout masks. */
uint64_t tessera_mix_seed(uint64_t step_seed, uint64_t op_seed);

/* The seed whose dropout stream is `seed`'s advanced by `count` elements:
 * element i of the one is element count + i of the other
 * (runtime/cpu/Random.h's DropoutMask, the CUDA kernels' bit for bit). A
 * rank's block of a split random op draws from it (stream_axis). */
uint64_t tessera_advance_seed(uint64_t seed, uint64_t count);

/* How many seeds tessera_mix_seed has made in this process (all threads). A
 * driver that records a step once and replays it (CUDA graphs) checks that
 * recording made none: each would be baked into the recording, and every
 * replay would draw the same dropout masks. */
uint64_t tessera_mix_seed_calls(void);

/* Reads a rank-0 F32 tensor (the loss) into *value. */
int tessera_read_scalar_f32(const tessera_tensor *x, float *value);

/* Tells the driver that gradient `parameter_index` is final (its last
 * kernel has run on the host, or is enqueued on the step's stream on the
 * GPU): calls context->gradient_ready when there is one. Always returns 0, so
 * the generated code can guard it like a kernel call (a failed step
 * announces nothing after its failure). */
static inline int tessera_gradient_ready(const tessera_step_context *context,
                                         int32_t parameter_index) {
  if (context && context->gradient_ready)
    context->gradient_ready(context->gradient_ready_user, parameter_index);
  return 0;
}

/* Tells the driver that the call at read position `position` starts some
 * parameter's reads (program.h's parameter_read_intervals): calls
 * context->weights_needed when there is one. Always returns 0, as
 * tessera_gradient_ready does. */
static inline int tessera_weights_needed(const tessera_step_context *context,
                                         int32_t position) {
  if (context && context->weights_needed)
    context->weights_needed(context->weights_needed_user, position);
  return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_LOWERING_SUPPORT_H */
