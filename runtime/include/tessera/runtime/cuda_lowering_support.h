/*===- cuda_lowering_support.h - helpers of the lowered step on the GPU ----===*
 *
 * `tesserac --target cuda` lowers @forward_backward to the same straight-line
 * calls as `--target cpu` (see lowering_support.h), with the tessera_cuda_*
 * kernels of cuda_kernels.h, a stream argument, and these helpers in place of
 * the host-only ones:
 * - the arena lives in device memory, allocated (and zeroed) on the first step
 *   together with the program's stream, and reused by every later step;
 * - program.h's ABI stays host-side in this first version: the driver
 *   (tessera_train_main) and AdamW run on the host, so every step uploads the
 *   parameters, buffers, tokens, targets and loss scale into the arena and
 *   downloads the loss and gradients at the end. That round trip is the known
 *   slow part of this backend, to be removed when the optimizer moves to the
 *   GPU;
 * - constants are copied (or splatted) into their device storage;
 * - tessera_cuda_finish_step ends every step: it checks the data errors the
 *   kernels recorded on the device and makes the first failure's message
 *   tessera_cpu_last_error(), which is what the driver prints.
 *
 * Layout rows, descriptors (tessera_layout_tensor, tessera_view_tensor) and
 * dropout seeds are the host helpers of lowering_support.h: descriptors live
 * in host memory whatever their `data` points to.
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

/* Allocates *arena in device memory (`bytes`, zeroed) and creates *stream when
 * *arena is still NULL; a later call with the same pointers does nothing. The
 * arena and the stream are owned by the program for the life of the process. */
int tessera_cuda_arena_acquire(uint8_t **arena, int64_t bytes,
                               cudaStream_t *stream);

/* Copies a host tensor into device storage of the same dtype and element
 * count (a parameter, buffer, the tokens, the targets, the loss scale). */
int tessera_cuda_upload(const tessera_tensor *host, tessera_tensor *device,
                        cudaStream_t stream);

/* Copies device storage into a host tensor of the same dtype and element count
 * (a gradient). Complete once tessera_cuda_finish_step has returned. */
int tessera_cuda_download(const tessera_tensor *device, tessera_tensor *host,
                          cudaStream_t stream);

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

/* Ends one call of the lowered step: calls tessera_cuda_check_device_errors
 * (stream) once, which waits for the step's kernels and copies. Returns
 * `status` when it is already nonzero (a call of the step failed), else the
 * check's result. On failure the message (of the first failure) is also made
 * tessera_cpu_last_error(), as program.h promises the driver. */
int tessera_cuda_finish_step(int status, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_CUDA_LOWERING_SUPPORT_H */
