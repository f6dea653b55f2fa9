#!/usr/bin/env bash
# The GPU checks of the --target cuda executables, on the GPU machine:
#   run(command="bash build-gpu/gpu-check/run.sh", carry=["build-gpu/gpu-check"])
# after scripts/make-gpu-check.sh made that directory (copied there as run.sh).
# 1. gpt2-tiny (causal-lm), bert-tiny (mlm), llama-tiny, mistral-tiny (a
#    sliding window) and gemma2-tiny (softcap), fp32, llama-tiny with its
#    gate/up projections packed (--pack-gate-up on), and gpt2-tiny
#    partitioned for the meshes 2 (tp) and 2x2 (dp-tp), and pipelined over
#    the stage meshes 2 (dp) and 2x2 (dp-tp): each executable trains
#    one step on the fixture batch with the fixture's AdamW settings (as
#    test/Lowering/train-{gpt2,bert}-tiny.test do on the CPU), writing
#    metrics, parameters and gradients into $OUT; training_step.py compares
#    the loss, the parameters after the step and every gradient norm.
# 2. gpt2-tiny bf16, two micro-batches a step: 4 steps straight, and 2 steps
#    to a checkpoint then --resume to 4; the losses must fall and the resumed
#    parameters equal the straight run's bit for bit, as must those of the
#    straight run with --cuda-graphs off, of the straight run repeated, and
#    (against the eager run) of the resume with --cuda-graphs off; each run's
#    per-step losses and norms are printed to locate a mismatch.
# 3. The driver's GPU kernels against the CPU (tessera_runtime_cuda_tests),
#    the sharded and offloaded state (tessera_runtime_offload_gpu_tests) and
#    the device-staged comms (tessera_runtime_comm_gpu_tests).
# 4. If present, GPT-2 124M bf16 (16 x 1024): a few steps for the speed.
# The weights path baked into each executable is the compiling machine's, so
# --weights names the copy here.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-$here/out}"
mkdir -p "$out"

nvidia-smi -L 2>/dev/null || echo "run.sh: warning: nvidia-smi sees no GPU" >&2

# cuBLASLt, and cuDNN for the attention, where the loader does not look
# (bench/gpu-env.sh, copied beside this script).
source "$here/gpu-env.sh" >/dev/null
if ldd "$here/gpt2-tiny-train" | grep -q 'libcublasLt.*not found'; then
  echo "run.sh: libcublasLt.so.13 not found on this machine" >&2
  exit 2
fi

status=0
# first_step NAME FIXTURE WEIGHTS [FLAGS...]: NAME-train (with FLAGS) trains
# one step on FIXTURE's batch (or on $BATCH); training_step.py compares it
# with the fixture.
first_step() {
  local name="$1" fixture="$2" weights="$3"
  shift 3
  rm -f "$out/$name".*
  "$here/$name-train" "$@" --data "${BATCH:-$here/$fixture.batch.npy}" --weights "$here/$weights" \
      --steps 1 --grad-accum 1 --lr 1e-3 --beta1 0.9 --beta2 0.95 --eps 1e-8 \
      --weight-decay 0.1 --grad-clip 0 --schedule constant --warmup 0 \
      --no-shuffle --metrics "$out/$name.metrics.jsonl" \
      --dump-params "$out/$name.params.safetensors" \
      --dump-grads "$out/$name.grads.safetensors" \
      > "$out/$name.train.log" 2>&1
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "$name: the executable failed (exit $rc):"
    cat "$out/$name.train.log"
    status=1
    return
  fi
  tail -n 5 "$out/$name.train.log"
  if ! python3 "$here/training_step.py" check "$here/$fixture.reference.json" \
      "$out/$name.metrics.jsonl" "$out/$name.params.safetensors" \
      "$out/$name.grads.safetensors" 2>&1 | tee "$out/$name.check.txt"; then
    status=1
  fi
  # The check's verdict is its last line (OK or the mismatches).
  grep -q '^OK' "$out/$name.check.txt" || status=1
}

for model in gpt2-tiny bert-tiny llama-tiny mistral-tiny gemma2-tiny gpt2-vocab300; do
  echo "=== $model (--target cuda, fp32) ==="
  first_step "$model" "$model" "$model-train.weights.safetensors"
done

# SwiGLU's gate and up linears as one GEMM and tess.packed_swiglu(_grad):
# the same model, so the same fixture and weights.
if [[ -x "$here/llama-tiny-pack-gate-up-train" ]]; then
  echo "=== llama-tiny --pack-gate-up on (--target cuda, fp32) ==="
  first_step llama-tiny-pack-gate-up llama-tiny llama-tiny-train.weights.safetensors
fi
# llama-tiny with its token table vocabulary-parallel over 2 and 2x2 thread
# ranks (rows_axis: tessera_cuda_embedding_rows and _grad_rows on each
# rank's block of the table): the same fixture.
for mesh in vocab2 vocab2x2; do
  if [[ -x "$here/llama-tiny-$mesh-train" ]]; then
    echo "=== llama-tiny, vocabulary-parallel $mesh (--target cuda, fp32, thread ranks) ==="
    first_step "llama-tiny-$mesh" llama-tiny llama-tiny-train.weights.safetensors
  fi
done

# Partitioned for a mesh, or cut into pipeline stages, and started plainly:
# the ranks are threads on the GPUs here (several per GPU when there are
# fewer), their collectives and sends staged through the host
# (device_staged_comm.h).
for mesh in tp dptp pp2; do
  [[ -x "$here/gpt2-tiny-$mesh-train" ]] || continue
  echo "=== gpt2-tiny $mesh (--target cuda, fp32, thread ranks) ==="
  first_step "gpt2-tiny-$mesh" gpt2-tiny gpt2-tiny-train.weights.safetensors
done
# gpt2-vocab300's padded head split over the classes: tensor parallel 2,
# and 2 stages over stage meshes of tp 2 on the fixture's rows twice.
if [[ -x "$here/gpt2-vocab300-tp-train" ]]; then
  echo "=== gpt2-vocab300 tp, padded head split (--target cuda, fp32, thread ranks) ==="
  first_step gpt2-vocab300-tp gpt2-vocab300 gpt2-vocab300-train.weights.safetensors
  echo "=== gpt2-vocab300 pptp, padded head split (--target cuda, fp32, thread ranks) ==="
  BATCH="$here/gpt2-vocab300-x2.batch.npy" first_step gpt2-vocab300-pptp gpt2-vocab300 \
      gpt2-vocab300-train.weights.safetensors
fi
# Pipelines over stage meshes (PP2 x DP2, PP2 x DP2 x TP2) on the fixture's
# rows twice: 4 and 8 thread ranks.
for mesh in ppdp ppdptp; do
  [[ -x "$here/gpt2-tiny-$mesh-train" ]] || continue
  echo "=== gpt2-tiny $mesh (--target cuda, fp32, thread ranks) ==="
  BATCH="$here/gpt2-tiny-x2.batch.npy" first_step "gpt2-tiny-$mesh" gpt2-tiny \
      gpt2-tiny-train.weights.safetensors
done
# llama-tiny's PP2 x DP2 x TP2, its token table vocabulary-parallel in the
# stage mesh, 8 thread ranks.
if [[ -x "$here/llama-tiny-ppdptp-train" ]]; then
  echo "=== llama-tiny ppdptp, vocabulary-parallel table (--target cuda, fp32, thread ranks) ==="
  BATCH="$here/llama-tiny-x2.batch.npy" first_step llama-tiny-ppdptp llama-tiny \
      llama-tiny-train.weights.safetensors
fi
# The pipeline search's plan (PP2 x DP2 x TP2, 8 thread ranks) on the
# fixture's rows twice.
if [[ -x "$here/llama-tiny-searched-pipeline-train" ]]; then
  echo "=== llama-tiny searched pipeline plan (--target cuda, fp32, thread ranks) ==="
  BATCH="$here/llama-tiny-x2.batch.npy" first_step llama-tiny-searched-pipeline \
      llama-tiny llama-tiny-train.weights.safetensors
fi
# ZeRO-1 inside a stage mesh (runtime/train/StageZero.h): gpt2-tiny's
# PP2 x DP2 x TP2 with --zero 1, and the search's unpinned plan (DP4 x TP2,
# ZeRO-1 by default); each rank holds 1/dp of its stage's owned state.
if [[ -x "$here/gpt2-tiny-ppdptp-train" ]]; then
  echo "=== gpt2-tiny ppdptp --zero 1 (--target cuda, fp32, thread ranks) ==="
  BATCH="$here/gpt2-tiny-x2.batch.npy" first_step gpt2-tiny-ppdptp gpt2-tiny \
      gpt2-tiny-train.weights.safetensors --zero 1
  python3 "$here/stage_zero.py" "$out/gpt2-tiny-ppdptp.train.log" 8 2 \
      > "$out/gpt2-tiny-ppdptp.shards.txt" || status=1
  tail -n 1 "$out/gpt2-tiny-ppdptp.shards.txt"
fi
if [[ -x "$here/llama-tiny-searched-zero1-train" ]]; then
  echo "=== llama-tiny searched ZeRO-1 plan (--target cuda, fp32, thread ranks) ==="
  BATCH="$here/llama-tiny-x2.batch.npy" first_step llama-tiny-searched-zero1 \
      llama-tiny llama-tiny-train.weights.safetensors
  python3 "$here/stage_zero.py" "$out/llama-tiny-searched-zero1.train.log" 8 4 \
      > "$out/llama-tiny-searched-zero1.shards.txt" || status=1
  tail -n 1 "$out/llama-tiny-searched-zero1.shards.txt"
fi
# The mesh search's ZeRO per parameter (MeshZero.h: the driver shards the
# ZeRO-1/2 parameters' state over their group, each rank's line says how
# much) and a pipeline whose stages recompute differently, on the fixture's
# rows; the mixed-ZeRO plan again with --zero 0 (the state whole), whose
# parameters must be the same bits.
# A plan with ZeRO-2 parameters holds only its shard of their gradients, so
# the fixture's gradients come from the same plan under --zero 1 (the
# optimizer state still sharded); the plan's own stages then run with the
# parameters dumped only, and must give --zero 0's bits (one micro-batch).
for plan in mixedzero mixedzerodptp mixedremat; do
  [[ -x "$here/gpt2-tiny-$plan-train" ]] || continue
  echo "=== gpt2-tiny $plan (--target cuda, fp32, thread ranks) ==="
  zero=()
  [[ $plan == mixedzero* ]] && zero=(--zero 1)
  first_step "gpt2-tiny-$plan" gpt2-tiny gpt2-tiny-train.weights.safetensors "${zero[@]}"
  grep -h 'ZeRO-[12] over' "$out/gpt2-tiny-$plan.train.log" || true
done
if [[ -x "$here/gpt2-tiny-mixedzero-train" ]]; then
  cp "$out/gpt2-tiny-mixedzero.params.safetensors" "$out/zero1-gpt2-tiny-mixedzero.params.safetensors"
  "$here/gpt2-tiny-mixedzero-train" --data "$here/gpt2-tiny.batch.npy" \
      --weights "$here/gpt2-tiny-train.weights.safetensors" --steps 1 --lr 1e-3 \
      --no-shuffle --dump-params "$out/planned-gpt2-tiny-mixedzero.params.safetensors" \
      > "$out/planned-gpt2-tiny-mixedzero.train.log" 2>&1 || { cat "$out/planned-gpt2-tiny-mixedzero.train.log"; status=1; }
  grep -h 'ZeRO-[12] over' "$out/planned-gpt2-tiny-mixedzero.train.log" || true
  first_step gpt2-tiny-mixedzero gpt2-tiny gpt2-tiny-train.weights.safetensors --zero 0
  cmp "$out/gpt2-tiny-mixedzero.params.safetensors" \
      "$out/zero1-gpt2-tiny-mixedzero.params.safetensors" || status=1
  "$here/gpt2-tiny-mixedzero-train" --data "$here/gpt2-tiny.batch.npy" \
      --weights "$here/gpt2-tiny-train.weights.safetensors" --steps 1 --lr 1e-3 \
      --no-shuffle --zero 0 --dump-params "$out/planned-zero0-gpt2-tiny-mixedzero.params.safetensors" \
      > /dev/null 2>&1 || status=1
  cmp "$out/planned-zero0-gpt2-tiny-mixedzero.params.safetensors" \
      "$out/planned-gpt2-tiny-mixedzero.params.safetensors" || status=1
fi
# From the second step on, the pipeline's stage calls are recorded and
# replayed as CUDA graphs (runtime/train/CudaStageGraphs.h): 4 steps so
# replayed follow the same losses and norms as 4 launched kernel by kernel
# (to fp32 rounding: flash attention's dQ adds in any order), and no
# recording failed (that turns them off, with a message).
pp2="$here/gpt2-tiny-pp2-train"
if [[ -x "$pp2" ]]; then
  echo "=== gpt2-tiny --stages 2, 4 steps: stage calls as CUDA graphs, and eagerly ==="
  pp2_flags=(--data "$here/gpt2-tiny.batch.npy" --weights "$here/gpt2-tiny-train.weights.safetensors"
             --steps 4 --lr 1e-3 --no-shuffle)
  if "$pp2" "${pp2_flags[@]}" --metrics "$out/pp2-graphs.jsonl" > "$out/pp2-graphs.log" 2>&1 \
     && "$pp2" "${pp2_flags[@]}" --cuda-graphs off --metrics "$out/pp2-eager.jsonl" \
          > "$out/pp2-eager.log" 2>&1; then
    python3 "$here/training_runs.py" same-steps "$out/pp2-eager.jsonl" \
        "$out/pp2-graphs.jsonl" 1e-5 || status=1
    if grep -q "CUDA graphs off" "$out/pp2-graphs.log"; then
      echo "gpt2-tiny-pp2: the stage calls were not replayed as graphs:"
      grep "CUDA graphs off" "$out/pp2-graphs.log"
      status=1
    fi
  else
    echo "gpt2-tiny-pp2 4 steps: the executable failed:"
    tail -n 5 "$out/pp2-graphs.log" "$out/pp2-eager.log"
    status=1
  fi
fi
# Launched one rank per GPU: the same program's collectives on NCCL.
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [[ -x "$here/gpt2-tiny-tp-train" && "$gpus" -ge 2 ]]; then
  echo "=== gpt2-tiny --mesh 2 --strategy tp (--target cuda, fp32, --nproc 2, NCCL) ==="
  NCCL_NVLS_ENABLE=0 first_step gpt2-tiny-tp gpt2-tiny \
      gpt2-tiny-train.weights.safetensors --nproc 2
fi
if [[ -x "$here/gpt2-tiny-pp2-train" && "$gpus" -ge 2 ]]; then
  echo "=== gpt2-tiny --stages 2 (--target cuda, fp32, --nproc 2, NCCL) ==="
  NCCL_NVLS_ENABLE=0 first_step gpt2-tiny-pp2 gpt2-tiny \
      gpt2-tiny-train.weights.safetensors --nproc 2
fi

echo "=== gpt2-tiny bf16, 2 micro-batches a step, checkpoint and resume ==="
bf16="$here/gpt2-tiny-bf16-train"
common=(--data "$here/gpt2-tiny.batch.npy" --weights "$here/gpt2-tiny-train.weights.safetensors"
        --grad-accum 2 --lr 1e-2 --grad-clip 1 --no-shuffle)
rm -rf "$out/bf16-straight" "$out/bf16-resumed"
if "$bf16" "${common[@]}" --steps 4 --checkpoint-dir "$out/bf16-straight" \
       --metrics "$out/bf16-straight.jsonl" --dump-params "$out/bf16-straight.safetensors" \
     && "$bf16" "${common[@]}" --steps 2 --checkpoint-dir "$out/bf16-resumed" \
       --metrics "$out/bf16-resumed.jsonl" \
     && "$bf16" "${common[@]}" --steps 4 --checkpoint-dir "$out/bf16-resumed" --resume \
       --metrics "$out/bf16-resumed.jsonl" --dump-params "$out/bf16-resumed.safetensors"; then
  python3 - "$out/bf16-straight.jsonl" <<'PY' || status=1
import json, sys
losses = [json.loads(line)["loss"] for line in open(sys.argv[1]) if line.strip()]
print("bf16 losses:", " ".join("%.4f" % loss for loss in losses))
sys.exit(0 if losses[-1] < 0.8 * losses[0] else "the bf16 run does not learn")
PY
  # The GPU backend's norm is reproducible (no atomics), so a resumed run
  # repeats the straight one bit for bit.
  python3 "$here/training_runs.py" same-params "$out/bf16-straight.safetensors" \
      "$out/bf16-resumed.safetensors" || status=1
  # The straight run replays its step as a CUDA graph from the second
  # micro-batch on; launching every kernel instead gives the same bits.
  if "$bf16" "${common[@]}" --steps 4 --cuda-graphs off \
       --metrics "$out/bf16-eager.jsonl" --dump-params "$out/bf16-eager.safetensors"; then
    python3 "$here/training_runs.py" same-params "$out/bf16-straight.safetensors" \
        "$out/bf16-eager.safetensors" || status=1
  else
    echo "gpt2-tiny bf16 --cuda-graphs off: the executable failed"
    status=1
  fi
  # Where a mismatch comes from: the straight run again (is the step itself
  # reproducible?) and the resume without graphs (is it the recording?),
  # with every run's per-step losses and norms.
  rm -rf "$out/bf16-resumed-eager"
  if "$bf16" "${common[@]}" --steps 4 --metrics "$out/bf16-again.jsonl" \
       --dump-params "$out/bf16-again.safetensors" > /dev/null \
     && "$bf16" "${common[@]}" --steps 2 --checkpoint-dir "$out/bf16-resumed-eager" \
       --cuda-graphs off --metrics "$out/bf16-resumed-eager.jsonl" > /dev/null \
     && "$bf16" "${common[@]}" --steps 4 --checkpoint-dir "$out/bf16-resumed-eager" --resume \
       --cuda-graphs off --metrics "$out/bf16-resumed-eager.jsonl" \
       --dump-params "$out/bf16-resumed-eager.safetensors" > /dev/null; then
    python3 "$here/training_runs.py" same-params "$out/bf16-straight.safetensors" \
        "$out/bf16-again.safetensors" || status=1
    python3 "$here/training_runs.py" same-params "$out/bf16-eager.safetensors" \
        "$out/bf16-resumed-eager.safetensors" || status=1
  else
    echo "gpt2-tiny bf16: the repeated runs failed"
    status=1
  fi
  for run in straight resumed eager again resumed-eager; do
    python3 -c 'import json, sys; print(sys.argv[2] + ":", " ".join("%.9g/%.9g" % (r["loss"], r["grad_norm"]) for r in map(json.loads, open(sys.argv[1])) if r))' \
        "$out/bf16-$run.jsonl" "$run"
  done
else
  echo "gpt2-tiny bf16: the executable failed"
  status=1
fi

# Data-parallel ZeRO of a mixed-precision program on thread ranks: the
# packed f32 mirrors (the token table) summed over the ranks give --zero 0's
# parameters bit for bit; each rank's resident line shows them.
if [[ -x "$here/llama-tiny-bf16-train" ]]; then
  echo "=== llama-tiny bf16, 2 thread ranks, --zero 0, 1, 2 ==="
  for zero in 0 1 2; do
    if ! "$here/llama-tiny-bf16-train" --data "$here/pattern.bin" \
         --weights "$here/llama-tiny-train.weights.safetensors" --steps 3 \
         --lr 1e-2 --thread-ranks 2 --zero $zero \
         --dump-params "$out/llama-bf16-zero$zero.safetensors" \
         > "$out/llama-bf16-zero$zero.log" 2>&1; then
      echo "llama-tiny bf16 --zero $zero: the executable failed"
      tail -n 5 "$out/llama-bf16-zero$zero.log"
      status=1
      continue
    fi
    grep "rank 0: resident" "$out/llama-bf16-zero$zero.log"
  done
  for zero in 1 2; do
    cmp "$out/llama-bf16-zero0.safetensors" "$out/llama-bf16-zero$zero.safetensors" \
      && echo "llama-tiny bf16 --zero $zero: --zero 0's parameters bit for bit" \
      || { echo "llama-tiny bf16 --zero $zero: FAIL, not --zero 0's parameters"; status=1; }
  done
fi

# Dropout on a mesh: the GPU's flash-attention fallback and dropout kernels
# draw each rank's block of the stream (tessera_cuda_mesh_stream_seed);
# 5 steps on the token shard, every loss and norm within 1e-5 of one device's.
if [[ -x "$here/gpt2-tiny-dropout-one-train" ]]; then
  echo "=== gpt2-tiny with dropout: one device, dp 2 and dp x tp 2x2 (thread ranks) ==="
  for name in one dp dptp; do
    "$here/gpt2-tiny-dropout-$name-train" --data "$here/pattern.bin" --steps 5 \
        --metrics "$out/dropout-$name.jsonl" > "$out/dropout-$name.log" 2>&1 \
      || { echo "gpt2-tiny-dropout-$name failed:"; tail -n 5 "$out/dropout-$name.log"; status=1; }
  done
  for name in dp dptp; do
    python3 "$here/training_runs.py" same-steps "$out/dropout-one.jsonl" \
        "$out/dropout-$name.jsonl" 1e-5 || status=1
  done
fi

if [[ -x "$here/tessera_runtime_cuda_tests" ]]; then
  echo "=== the driver's GPU kernels ==="
  "$here/tessera_runtime_cuda_tests" --gtest_filter='DriverKernelsCuda.*:OptimizerCuda.*' \
      > "$out/cuda-tests.log" 2>&1 || status=1
  tail -n 25 "$out/cuda-tests.log"
fi

if [[ -x "$here/tessera_runtime_offload_gpu_tests" ]]; then
  echo "=== the sharded and offloaded training state on the GPU ==="
  "$here/tessera_runtime_offload_gpu_tests" > "$out/offload-tests.log" 2>&1 || status=1
  tail -n 6 "$out/offload-tests.log"
fi

if [[ -x "$here/tessera_runtime_comm_gpu_tests" ]]; then
  echo "=== the device-staged comms (thread ranks on one GPU) ==="
  "$here/tessera_runtime_comm_gpu_tests" --gtest_filter='DeviceStagedComms.*' \
      > "$out/comm-tests.log" 2>&1 || status=1
  tail -n 6 "$out/comm-tests.log"
fi

if [[ -x "$here/gpt2-124m-train" ]]; then
  echo "=== GPT-2 124M, bf16, 16 x 1024, random initial weights ==="
  "$here/gpt2-124m-train" --data "$here/gpt2-124m.tokens.bin" --init random --steps 8 \
      --lr 6e-4 --warmup 2 --no-shuffle --metrics "$out/gpt2-124m.jsonl" 2>&1 | tail -n 9 || status=1
fi

if [[ $status -eq 0 ]]; then echo "run.sh: all checks passed"; else echo "run.sh: FAILED"; fi
exit $status
