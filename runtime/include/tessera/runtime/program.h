/*===- program.h - what a compiled training program gives the runtime -----===*
 *
 * `tesserac --target cpu|cuda -o train` emits one translation unit that
 * defines a `tessera_program` (its tensors and its step functions, straight-
 * line calls into the kernels over a static arena) and a `main` that calls
 * tessera_train_main. Everything around the step (flags, data, schedule,
 * gradient accumulation and clipping, loss scaling, checkpoints, metrics)
 * is the runtime's, written once here rather than generated per model.
 *===----------------------------------------------------------------------===*/

#ifndef TESSERA_RUNTIME_PROGRAM_H
#define TESSERA_RUNTIME_PROGRAM_H

#include "tessera/runtime/cpu_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A rank's handle on a group of ranks (comm.h). Declared here rather than
 * included, so that the step's ABI does not depend on the collectives' header
 * (a repeated typedef of the same struct is valid C11 and C++). */
typedef struct tessera_comm tessera_comm;

typedef enum tessera_loss_kind {
  TESSERA_LOSS_CAUSAL_LM = 0, /* targets[b, t] = tokens[b, t + 1] */
  TESSERA_LOSS_MLM = 1        /* labels given, ignore_index skipped */
} tessera_loss_kind;

typedef enum tessera_precision {
  TESSERA_PRECISION_FP32 = 0,
  TESSERA_PRECISION_BF16 = 1, /* bf16 compute, fp32 master weights/moments */
  TESSERA_PRECISION_FP16 = 2  /* fp16 compute with dynamic loss scaling */
} tessera_precision;

/* Where the tensors given to forward_backward live. A host program reads
 * host memory; a CUDA program reads and writes device memory only (the
 * parameters, buffers, tokens, targets and gradients stay on the GPU for the
 * whole run: the driver keeps master weights, moments and accumulators there
 * and runs AdamW there). */
typedef enum tessera_device_kind {
  TESSERA_DEVICE_HOST = 0,
  TESSERA_DEVICE_CUDA = 1
} tessera_device_kind;

/* What one call of forward_backward runs on and talks to, owned by the
 * driver. A zero-initialized context means: the default stream, no peers,
 * nobody to tell. */
typedef struct tessera_step_context {
  /* cudaStream_t of a CUDA program's kernels (NULL: the program's own);
   * unused on the host. */
  void *stream;
  /* Called by the step as soon as gradient `parameter_index` is final (its
   * last kernel is enqueued on `stream`), so the driver can start reducing
   * it on another stream while the backward pass goes on (data parallelism,
   * `--bucket-mb`). May be NULL. */
  void (*gradient_ready)(void *user, int32_t parameter_index);
  void *gradient_ready_user;
  /* The mesh this rank is part of (issue 5): per mesh axis, the group of
   * ranks that differ from this one only along that axis, and this rank's
   * coordinate on it. mesh_axis_count is 0 for a single device. */
  int32_t mesh_axis_count;
  tessera_comm *const *axis_comms;
  const int32_t *mesh_coordinates;
  /* Called by the step before the call at read position `position` (see
   * tessera_program's parameter_read_intervals) when some parameter's reads
   * in the forward or the backward pass start there, so that a ZeRO-3
   * driver can gather those weights (on the GPU: make `stream` wait for
   * their gather) first. May be NULL. */
  void (*weights_needed)(void *user, int32_t position);
  void *weights_needed_user;
} tessera_step_context;

/* How a partitioned program (issue 5) cuts one of its tensors over the mesh:
 * per dim, the mesh axis (an index into tessera_program's mesh_shape) the
 * dim is split over, or -1 when every rank holds the dim whole. A rank holds
 * the block at its mesh coordinates: along a dim split over axis a (n =
 * mesh_shape[a], r = mesh_coordinates[a]), block r of the dim's n equal
 * blocks, or, when the dim is pieced, its 1/n of every piece.
 *
 * pieces[d] is 0 or 1 for contiguous blocks. P > 1 (on a split dim only)
 * says the whole dim is P equal pieces laid one after another, each split
 * on its own: rank r's block is block r of piece 0, then block r of piece
 * 1, and so on. A fused projection needs it: GPT-2's c_attn weight
 * [D, 3D] is q|k|v along its columns, and tensor parallelism gives each
 * rank the same heads of q, k and v (Megatron-LM's fused QKV), which
 * contiguous blocks would not. E.g. a dim of 12 = [q0..q3 | k0..k3 |
 * v0..v3], P = 3, n = 2: rank 0 holds [q0 q1 k0 k1 v0 v1], rank 1
 * [q2 q3 k2 k3 v2 v3]. It comes after mesh_axis so that tables written
 * without it ({{-1, 1, ...}}) still mean contiguous blocks (zeros). */
typedef struct tessera_tensor_split {
  int32_t mesh_axis[TESSERA_MAX_RANK];
  int32_t pieces[TESSERA_MAX_RANK];
} tessera_tensor_split;

/* A named tensor the program reads: a trainable parameter (fp32 master
 * copy, updated by AdamW) or a buffer (read-only). Names are the ONNX
 * initializer names, which are also the checkpoint keys. */
typedef struct tessera_tensor_info {
  const char *name;
  int32_t dtype;
  int32_t rank;
  int64_t shape[TESSERA_MAX_RANK];
} tessera_tensor_info;

/* A pipelined program (issue 6, `tesserac --stages S --microbatches M`):
 * the step cut along layer boundaries into chunks (tess-split-pipeline-
 * stages), chunk c running on pipeline device c mod stages, each chunk a
 * forward and a backward function that a schedule calls once per
 * micro-batch, and a prepare function called once a step before them. What
 * crosses between the calls is described per function:
 * - a prepare takes no inputs; its outputs are the RESIDENT values: what the
 *   chunk computes from parameters alone (the weights cast to the compute
 *   type, a padded LM head), valid until the optimizer updates them;
 * - a forward's inputs are the RESIDENT values (the prepare's outputs, in
 *   order), then the ACTIVATIONs chunk c - 1's forward sends (none for
 *   chunk 0); its outputs are the ACTIVATIONs it sends to chunk c + 1's
 *   forward, then the SAVED values its own backward reads for the same
 *   micro-batch;
 * - a backward's inputs are the RESIDENT values, the SAVED values (in the
 *   forward's order), then the ACTIVATION_GRADIENTs chunk c + 1's backward
 *   sends (none for the last chunk); its outputs are the
 *   ACTIVATION_GRADIENTs it sends to chunk c - 1.
 * The k-th ACTIVATION output of chunk c's forward is the k-th ACTIVATION
 * input of chunk c + 1's forward (same dtype and shape; tesserac checks),
 * and likewise for the gradients and the saved values; within `inputs` and
 * `outputs` the roles come in the order above. */
typedef enum tessera_stage_tensor_role {
  TESSERA_STAGE_ACTIVATION = 0,
  TESSERA_STAGE_ACTIVATION_GRADIENT = 1,
  TESSERA_STAGE_SAVED = 2,
  TESSERA_STAGE_RESIDENT = 3
} tessera_stage_tensor_role;

typedef struct tessera_stage_tensor {
  int32_t role; /* tessera_stage_tensor_role */
  int32_t dtype;
  int32_t rank;
  int64_t shape[TESSERA_MAX_RANK];
} tessera_stage_tensor;

/* One chunk's prepare, forward or backward. `call` has forward_backward's arguments
 * (parameters and buffers indexed as the program's tables, tokens and
 * targets the whole micro-batch [batch, sequence]) plus `inputs` and
 * `outputs` as described above, all in the memory `device` names. It reads
 * only parameters[read_parameters[i]], writes *loss only when returns_loss
 * (the unscaled loss of the micro-batch, to host memory), and writes only
 * gradients[gradient_parameters[i]]: this chunk's part of the gradient of
 * loss * loss_scale of each parameter it lists. A parameter's gradient is
 * the sum of the parts of the chunks that list it: usually one chunk's; a
 * tied embedding's is its embedding chunk's plus its head chunk's, which
 * the driver adds once per step on the device of the first (as Megatron-LM
 * all-reduces the embedding's gradient between the first and last stage),
 * instead of sending the head's part down the pipeline every micro-batch. A CUDA call
 * enqueues its kernels on context->stream and has finished them when it
 * returns, as forward_backward does. Returns 0, or nonzero with
 * tessera_cpu_last_error() set. */
typedef struct tessera_stage_function {
  int (*call)(const tessera_step_context *context,
              const tessera_tensor *parameters, const tessera_tensor *buffers,
              const tessera_tensor *tokens, const tessera_tensor *targets,
              const tessera_tensor *inputs, float loss_scale, uint64_t seed,
              float *loss, tessera_tensor *gradients,
              tessera_tensor *outputs);
  int32_t input_count;
  const tessera_stage_tensor *inputs;
  int32_t output_count;
  const tessera_stage_tensor *outputs;
  int32_t returns_loss;
  int32_t read_parameter_count;
  const int32_t *read_parameters;
  int32_t gradient_count;
  const int32_t *gradient_parameters;
  /* Model FLOPs of one call (as flops_per_micro_batch counts them). */
  double flops;
} tessera_stage_function;

/* One entry of a device's schedule: the forward or the backward of `chunk`
 * for micro-batch `micro_batch` (0 .. micro_batches - 1 within the step). */
typedef struct tessera_pipeline_task {
  int32_t forward; /* 1: forward, 0: backward */
  int32_t chunk;
  int32_t micro_batch;
} tessera_pipeline_task;

typedef struct tessera_pipeline {
  int32_t stages;         /* pipeline devices: one rank each */
  int32_t virtual_stages; /* chunks per device (interleaved 1F1B's V) */
  int32_t micro_batches;  /* per step; their gradients are accumulated */
  const char *schedule;   /* "gpipe", "1f1b", "interleaved:V" */
  /* Per chunk (stages * virtual_stages of each). */
  const tessera_stage_function *forwards;
  const tessera_stage_function *backwards;
  /* Per device: its tasks in the order it runs them (lib/Pipeline's
   * scheduleTaskOrder). Every device runs each of its chunks' forward and
   * backward once per micro-batch; a task's inputs come from the task of
   * the neighbouring chunk for the same micro-batch. */
  const int32_t *task_counts;
  const tessera_pipeline_task *const *tasks;
  /* Per chunk: its prepare, which the chunk's device calls at the start of
   * every step (after the previous step's optimizer). */
  const tessera_stage_function *prepares;
  /* A pipeline over a stage mesh (the program's mesh fields: each pipeline
   * device is that many ranks, the stage functions one mesh rank's, their
   * collectives on the context's axis communicators): per parameter, the
   * mesh axes (bit a for axis a) over which the gradients the chunks return
   * are pending partial sums, which the driver sums once a step over its f32
   * sums of the micro-batches (the data-parallel axes). NULL: every gradient
   * is complete in its parameter's layout. */
  const int32_t *gradient_partial_axes;
} tessera_pipeline;

typedef struct tessera_program {
  const char *model_name;    /* the ONNX file it was compiled from */
  const char *weights_file;  /* safetensors of the initial weights, written
                                next to the executable by tesserac (may be
                                NULL when compiled without weights) */
  int32_t loss_kind;         /* tessera_loss_kind */
  int32_t precision;         /* tessera_precision */
  int64_t batch;             /* micro-batch rows */
  int64_t sequence;          /* tokens per row fed to the model */
  int64_t vocabulary;        /* logits width: ids must be < vocabulary */
  int64_t ignore_index;      /* MLM labels to skip (-100) */
  int32_t parameter_count;
  const tessera_tensor_info *parameters;
  int32_t buffer_count;
  const tessera_tensor_info *buffers;

  /* One micro-batch: loss (unscaled, f32, always written to host memory)
   * and the gradient of loss * loss_scale for every parameter, in the
   * compute precision. parameters and buffers are in the order above
   * (parameters as parameter_step_dtypes says: fp32 masters or compute
   * copies); tokens are [batch, sequence] I64, targets [batch, sequence]
   * I64, all in the memory `device` names. `seed`
   * drives dropout. A CUDA program enqueues its kernels on context->stream
   * and has finished them when it returns (it reads the loss back). Returns
   * 0, or nonzero with tessera_cpu_last_error() set (e.g. a token id out of
   * range). */
  int (*forward_backward)(const tessera_step_context *context,
                          const tessera_tensor *parameters,
                          const tessera_tensor *buffers,
                          const tessera_tensor *tokens,
                          const tessera_tensor *targets, float loss_scale,
                          uint64_t seed, float *loss,
                          tessera_tensor *gradients);

  int32_t device; /* tessera_device_kind */

  /* The mesh the program was partitioned for (issue 5), or 0 axes for one
   * device. Ranks = product of mesh_shape. */
  int32_t mesh_axis_count;
  const int64_t *mesh_shape;
  const char *const *mesh_axis_names;
  /* ZeRO stage the driver applies over the data-parallel axis (0-3). */
  int32_t zero_stage;

  /* Model FLOPs of one forward_backward call, counted by tesserac from the
   * step as compiled: every linear and matmul (forward and backward) at 2
   * FLOPs per multiply-add, and fused attention as its QK^T and PV GEMMs
   * (the backward at twice the forward, not charged for recomputing the
   * scores; a causal mask is not credited with halving them). Elementwise
   * ops, norms and the loss are not counted. The driver's MFU is
   * flops_per_micro_batch * micro-batches per step / step time / peak. */
  double flops_per_micro_batch;

  /* A partitioned program (mesh_axis_count > 0): the split of each
   * parameter and each buffer, in the order of `parameters` and `buffers`
   * (NULL when there are none). The tensor_info shapes above are then one
   * rank's blocks; the whole tensor (the weights file's and the
   * checkpoints') has shape[d] * mesh_shape[mesh_axis[d]] along a split dim,
   * pieced or not (a pieced dim's block, shape[d], is its share of every
   * piece, in piece order: the split's `pieces`).
   * A parameter's gradient has its parameter's split and is complete (summed
   * over the ranks that share the block) when forward_backward returns.
   * Tokens and targets are the WHOLE micro-batch on every rank
   * ([batch, sequence]); the step takes its own block of them. The loss it
   * returns is the micro-batch's, the same on every rank. */
  const tessera_tensor_split *parameter_splits;
  const tessera_tensor_split *buffer_splits;

  /* A pipelined program's stages and schedule, or NULL (then forward_backward
   * is the step). A pipelined program's forward_backward is NULL; its batch
   * is one micro-batch's rows, a step runs pipeline->micro_batches of them;
   * flops_per_micro_batch is the sum over all chunks' calls. Partitioned
   * (mesh_axis_count > 0), the mesh is one pipeline device's and the
   * program's tables are one mesh rank's (PP x DP, PP x TP). */
  const tessera_pipeline *pipeline;

  /* Per parameter (the order of `parameters`), the dtype forward_backward
   * reads it in, or NULL when it reads every fp32 master. TESSERA_F32: the
   * master itself; the compute precision's TESSERA_BF16/TESSERA_F16: a
   * copy the driver keeps, the master rounded to nearest even, made when
   * the masters are loaded and rewritten by every optimizer update
   * (tess-read-compute-copies: the step then casts nothing). The tensor
   * passed has the parameter's shape (its block's, when partitioned) and
   * this dtype. */
  const int32_t *parameter_step_dtypes;

  /* The plan the program was compiled for, as the module's #tess.plan
   * attribute prints it (mesh, ZeRO stage, remat, pipeline stages, schedule,
   * micro-batches, chunks; `#tess.plan<>` is one device with nothing
   * recomputed), or NULL when it was compiled without one. The executable
   * prints it at start; `tesserac MODEL --explain --plan TEXT` predicts the
   * step of that plan. */
  const char *plan;

  /* Nonzero when that plan offloads the optimizer (#tess.plan's
   * `offload = "optimizer"`: tesserac found that nothing else fits the
   * device): the executable runs as with --offload optimizer unless the
   * flag says otherwise. */
  int32_t offload_optimizer;

  /* Per parameter, when forward_backward writes its gradient: the position
   * of the one kernel call that writes it among the step's calls that write
   * gradients (0, 1, ... in the order they run; a call that writes several
   * gradients gives them one position). Nothing else writes a gradient's
   * memory, and the step announces it (gradient_ready) right after that
   * call, in position order. A ZeRO-2 driver plans from it which buckets'
   * whole gradients may share a buffer (a bucket's are needed from its
   * first write until its reduce-scatter). NULL: not recorded (a pipelined
   * program, or one compiled before it was). */
  const int32_t *gradient_write_positions;

  /* Per parameter four read positions in forward_backward: the first and
   * the last call that reads it in the forward pass (the calls before the
   * loss's gradient), then the first and the last in the backward pass, -1
   * where it is not read. A read position numbers the step's calls that
   * read any parameter (through a view too), 0, 1, ... in the order they
   * run. Before the first call of every such interval the step calls the
   * context's weights_needed with its position, in position order. A
   * ZeRO-3 driver plans from it when to gather each weight and which
   * gathered weights may share memory. NULL: not recorded (a pipelined
   * program, or one compiled before it was). */
  const int32_t *parameter_read_intervals;

  /* A partitioned program that is not pipelined, planned with a ZeRO stage
   * per parameter (the mesh search's `zero = mixed`): per parameter, the
   * mesh axes (bit a for axis a) over which the gradient forward_backward
   * returns is a pending partial sum (or whole, gradient_whole), or 0 when
   * it is complete. Those are
   * the plan's ZeRO-1 and ZeRO-2 parameters, whose weights are whole on
   * these axes: the driver sums their gradients over the axes' group once a
   * step (a reduce-scatter) and shards their masters and moments over it,
   * all-gathering the updated weights (runtime/train/MeshZero.h). Every
   * pending parameter has the same axes. NULL: every gradient is complete
   * (the ZeRO-0 and ZeRO-3 parameters: the step all-reduces the first and
   * holds the second split). A pipelined program's are its pipeline's
   * gradient_partial_axes. */
  const int32_t *gradient_partial_axes;

  /* Per parameter, the plan's ZeRO stage of a gradient gradient_partial_axes
   * leaves pending: 1, the driver sums it whole once a step; 2, it keeps
   * only its shard, reduce-scattering the gradient per bucket as the step
   * writes it (runtime/train/MeshZero.h); 0 for a complete gradient. NULL:
   * every pending gradient is ZeRO-1's (a program compiled before the
   * table, or without pending gradients). */
  const int32_t *gradient_zero_stages;

  /* Per parameter, 1 where the gradient of a ZeRO-1/2 parameter (one
   * gradient_partial_axes gives axes) is no partial sum but whole and the
   * same on every rank of those axes (its layer's compute replicated
   * there): the driver takes each rank's shard of it locally, without a
   * collective (runtime/train/MeshZero.h); 0 otherwise. NULL: every such
   * gradient is a partial sum. */
  const int32_t *gradient_whole;
} tessera_program;

/* The training executable's main: parses the flags (see runtime/README.md),
 * loads data and weights, runs the steps. Returns the process exit code.
 * It runs programs whose device is TESSERA_DEVICE_HOST; a CUDA program's
 * main calls tessera_cuda_train_main (cuda_lowering_support.h) instead, the
 * same driver with its GPU backend. */
int tessera_train_main(int argc, char **argv, const tessera_program *program);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_PROGRAM_H */
