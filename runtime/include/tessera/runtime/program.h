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

typedef enum tessera_loss_kind {
  TESSERA_LOSS_CAUSAL_LM = 0, /* targets[b, t] = tokens[b, t + 1] */
  TESSERA_LOSS_MLM = 1        /* labels given, ignore_index skipped */
} tessera_loss_kind;

typedef enum tessera_precision {
  TESSERA_PRECISION_FP32 = 0,
  TESSERA_PRECISION_BF16 = 1, /* bf16 compute, fp32 master weights/moments */
  TESSERA_PRECISION_FP16 = 2  /* fp16 compute with dynamic loss scaling */
} tessera_precision;

/* A named tensor the program reads: a trainable parameter (fp32 master
 * copy, updated by AdamW) or a buffer (read-only). Names are the ONNX
 * initializer names, which are also the checkpoint keys. */
typedef struct tessera_tensor_info {
  const char *name;
  int32_t dtype;
  int32_t rank;
  int64_t shape[TESSERA_MAX_RANK];
} tessera_tensor_info;

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

  /* One micro-batch: loss (unscaled, f32) and the gradient of loss *
   * loss_scale for every parameter, in the compute precision. parameters and
   * buffers are in the order above (parameters in fp32 master precision);
   * tokens are [batch, sequence] I64, targets [batch, sequence] I64. `seed`
   * drives dropout. Returns 0, or nonzero with tessera_cpu_last_error() set
   * (e.g. a token id out of range). */
  int (*forward_backward)(const tessera_tensor *parameters,
                          const tessera_tensor *buffers,
                          const tessera_tensor *tokens,
                          const tessera_tensor *targets, float loss_scale,
                          uint64_t seed, float *loss,
                          tessera_tensor *gradients);
} tessera_program;

/* The training executable's main: parses the flags (see runtime/README.md),
 * loads data and weights, runs the steps. Returns the process exit code. */
int tessera_train_main(int argc, char **argv, const tessera_program *program);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_RUNTIME_PROGRAM_H */
