/*===- cuda_lowering_support.h - helpers of the lowered step on the GPU ----===*
 *
 * `tesserac --target cuda` lowers @forward_backward to the same straight-line
 * calls as `--target cpu` (see lowering_support.h), with the tessera_cuda_*
 * kernels of cuda_kernels.h, a stream argument, and these helpers in place of
 * the host-only ones:
 * - the arena lives in device memory, allocated (and zeroed) on the first step
 *   together with the program's own stream, and reused by every later step;
 * - every call runs on the driver's stream (tessera_step_context.stream), or
 *   the program's own when the driver passes none;
 * - the tensors of program.h's ABI are device memory (TESSERA_DEVICE_CUDA):
 *   parameters, buffers, tokens and targets are read where the driver keeps
 *   them and gradients written straight into the driver's device tensors,
 *   so nothing is copied between host and device but the loss scale (a
 *   kernel argument) and the loss (read back at the end);
 * - constants are copied (or splatted) into their device storage;
 * - tessera_cuda_finish_step ends every step: it waits for the stream, checks
 *   the data errors the kernels recorded on the device and makes the first
 *   failure's message tessera_cpu_last_error(), which is what the driver
 *   prints. That is the one synchronization of a call.
 *
 * Layout rows, descriptors (tessera_layout_tensor, tessera_view_tensor),
 * dropout seeds and tessera_gradient_ready are the host helpers of
 * lowering_support.h: descriptors live in host memory whatever their `data`
 * points to.
 *
 * Every function returns 0, or nonzero with tessera_cuda_last_error() set.
 *===----------------------------------------------------------------------===*/

#ifndef TESSERA_RUNTIME_CUDA_LOWERING_SUPPORT_H
#define TESSERA_RUNTIME_CUDA_LOWERING_SUPPORT_H

#include "tessera/runtime/cuda_kernels.h"
#include "tessera/runtime/lowering_support.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Allocates *arena in device memory (`bytes`, zeroed before it returns) and
 * creates *stream when *arena is still NULL; a later call with the same
 * pointers does nothing. The arena and the stream are owned by the program
 * for the life of the process. */
int tessera_cuda_arena_acquire(uint8_t **arena, int64_t bytes,
                               cudaStream_t *stream);

/* The stream a call of the step runs on: the driver's, else the program's
 * own (made by tessera_cuda_arena_acquire). */
static inline cudaStream_t
tessera_cuda_step_stream(const tessera_step_context *context,
                         cudaStream_t own) {
  return context && context->stream ? (cudaStream_t)context->stream : own;
}

/* Writes `value` into the one element of an F32 device tensor (the loss
 * scale), as a kernel argument: no host memory is read asynchronously. */
int tessera_cuda_fill_f32(tessera_tensor *y, float value, cudaStream_t stream);

/* tessera_fill_bytes and tessera_fill_splat into device storage; `bytes` and
 * `element` are host memory. */
int tessera_cuda_fill_bytes(tessera_tensor *y, const uint8_t *bytes,
                            int64_t size, cudaStream_t stream);
int tessera_cuda_fill_splat(tessera_tensor *y, const uint8_t *element,
                            int64_t element_size, cudaStream_t stream);

/* Reads a rank-0 F32 device tensor (the loss) into the host's *value; the
 * value is there once tessera_cuda_finish_step has returned. */
int tessera_cuda_read_scalar_f32(const tessera_tensor *x, float *value,
                                 cudaStream_t stream);

/* The training executable's main for a CUDA program (device
 * TESSERA_DEVICE_CUDA): tessera_train_main with the driver's GPU backend
 * (master weights, moments, accumulators and AdamW on the device). Defined in
 * libtessera_runtime_train_cuda.a. */
int tessera_cuda_train_main(int argc, char **argv,
                            const tessera_program *program);

/* Ends one call of the lowered step: calls tessera_cuda_check_device_errors
 * (stream) once, which waits for the step's kernels and copies. Returns
 * `status` when it is already nonzero (a call of the step failed), else the
 * check's result. On failure the message (of the first failure) is also made
 * tessera_cpu_last_error(), as program.h promises the driver. */
int tessera_cuda_finish_step(int status, cudaStream_t stream);

/* Makes `message` the calling thread's tessera_cuda_last_error(): for the
 * calls of a GPU step that are not kernels (mesh_step.h's
 * tessera_cuda_mesh_*, whose failures come from the comm), so that
 * tessera_cuda_finish_step reports them like any failed kernel. */
void tessera_cuda_set_last_error(const char *message);

/* A deferred step call: between begin and end, the calling thread's step
 * calls only enqueue work. tessera_cuda_read_scalar_f32 copies the loss
 * into `loss_staging` (pinned host memory that outlives the work) instead of
 * the caller's *value, and tessera_cuda_finish_step neither waits for the
 * stream nor checks for device errors: whoever runs the work does, with
 * tessera_cuda_check_device_errors. The driver defers the call it records
 * into a CUDA graph (--cuda-graphs: nothing runs while recording) and a
 * pipeline's stage calls (one wait a step instead of one a call). */
void tessera_cuda_begin_deferred_step(float *loss_staging);
void tessera_cuda_end_deferred_step(void);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_CUDA_LOWERING_SUPPORT_H */
