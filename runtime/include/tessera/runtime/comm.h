/*===- comm.h - collectives between the ranks of a device mesh ------------===*
 *
 * A training run on N devices is N ranks (processes, or threads of one
 * process for the CPU backend's multi-rank test bed) arranged in a mesh
 * (issue 5's `--mesh 2x4`, axes named e.g. dp and tp). A tessera_comm is one
 * rank's handle on one group of ranks: the whole world, or the ranks that
 * differ from it only along one mesh axis (what NCCL calls a split
 * communicator). The compiled step receives one per mesh axis
 * (tessera_step_context in program.h) and calls the collectives below where
 * the partitioned program needs them; the driver uses the world/data-parallel
 * one for gradient reduction, norm and overflow agreement.
 *
 * Two implementations share this ABI:
 * - in-process (threads of one process, host memory): the CPU backend's
 *   multi-rank mode, the test bed of every partitioned program;
 * - NCCL (one process per GPU, device memory, `stream` is a cudaStream_t).
 *
 * Semantics (identical for both):
 * - Every rank of the group calls the same collectives in the same order
 *   with tensors of the same dtype and shape (a mismatch is an error where it
 *   can be detected, never a silent wrong answer).
 * - all_reduce is in place; all_gather concatenates the ranks' tensors along
 *   `axis` in rank order (x may be rank r's own block of y: the in-place
 *   form ZeRO's all-gather uses); reduce_scatter reduces and leaves rank r
 *   the r-th equal block along `axis` (the dim must divide by the group
 *   size; y may be rank r's block of x);
 *   all_to_all splits `x` along split_axis into group-size blocks, sends
 *   block j to rank j, and concatenates what it receives along concat_axis.
 * - send/recv are point to point (pipeline stages), matched in order.
 * - group_start/group_end bracket sends and receives that must be in flight
 *   together: on NCCL a send may wait until its peer posts the matching
 *   receive, so two stages that each send before they receive would wait on
 *   each other; grouped (ncclGroupStart/End), the calls are issued as one
 *   and progress together. The pipeline driver posts the sends of a task's
 *   outputs with the receives of the next task's inputs in one group, as
 *   Megatron does. The in-process comms buffer every send, so there a group
 *   changes nothing. Only send and recv may be called inside a group.
 * - Reductions of bf16/f16 accumulate in f32 for the in-process backend,
 *   strictly in rank order, so every rank gets the same bits; NCCL reduces
 *   in the storage type (as NCCL does). NCCL has no 16-bit integers.
 * - On a device comm the call is enqueued on `stream` and returns before it
 *   completes; on a host comm it completes before returning and `stream` is
 *   ignored.
 *
 * Every function returns 0, or nonzero with tessera_comm_last_error() set: a
 * peer that failed or died, a timeout of the watchdog, a shape mismatch.
 * On NCCL, a peer that dies or a collective that outlives --comm-timeout is
 * fatal: the watchdog aborts the communicators and ends the process with
 * "rank R: NCCL ... (peer died?)" (nccl_comm.h). The C++ side (creating
 * groups, launching, the gradient reducer) is in thread_comm.h,
 * nccl_comm.h, launch.h and gradient_reducer.h.
 *===----------------------------------------------------------------------===*/

#ifndef TESSERA_RUNTIME_COMM_H
#define TESSERA_RUNTIME_COMM_H

#include "tessera/runtime/cpu_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tessera_comm tessera_comm;

/* Reductions use cpu_kernels.h's tessera_reduce_op; collectives support
 * TESSERA_REDUCE_SUM and TESSERA_REDUCE_MAX (max agrees on an overflow flag). */

/* Message of the last failing collective on this thread ("" if none). */
const char *tessera_comm_last_error(void);

int32_t tessera_comm_size(const tessera_comm *comm);
int32_t tessera_comm_rank(const tessera_comm *comm);

int tessera_comm_all_reduce(tessera_comm *comm, tessera_tensor *x,
                            int32_t op /* tessera_reduce_op */, void *stream);
int tessera_comm_all_gather(tessera_comm *comm, const tessera_tensor *x,
                            tessera_tensor *y, int32_t axis, void *stream);
int tessera_comm_reduce_scatter(tessera_comm *comm, const tessera_tensor *x,
                                tessera_tensor *y, int32_t axis,
                                void *stream);
int tessera_comm_all_to_all(tessera_comm *comm, const tessera_tensor *x,
                            tessera_tensor *y, int32_t split_axis,
                            int32_t concat_axis, void *stream);
int tessera_comm_send(tessera_comm *comm, const tessera_tensor *x,
                      int32_t peer, void *stream);
int tessera_comm_recv(tessera_comm *comm, tessera_tensor *y, int32_t peer,
                      void *stream);
/* The sends and receives between these two calls on `comm` are issued
 * together (see the semantics above); every group_start has its group_end
 * on the same thread. */
int tessera_comm_group_start(tessera_comm *comm);
int tessera_comm_group_end(tessera_comm *comm);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_COMM_H */
