#!/usr/bin/env bash
# First-step check of the --target cuda executables of gpt2-tiny (causal-lm)
# and bert-tiny (mlm), fp32, against PyTorch's fixtures, on the GPU machine:
#   run(command="bash build/gpu-check/run.sh", carry=["build/gpu-check"])
# after scripts/make-gpu-check.sh made that directory (copied there as run.sh).
# Each executable trains one step on the fixture batch with the fixture's
# AdamW settings (as test/Lowering/train-{gpt2,bert}-tiny.test do on the CPU),
# writing metrics, parameters and gradients into $OUT, then training_step.py
# compares the loss, the parameters after the step and every gradient norm.
# The weights path baked into each executable is the compiling machine's, so
# --weights names the copy here.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-$here/out}"
mkdir -p "$out"

nvidia-smi -L 2>/dev/null || echo "run.sh: warning: nvidia-smi sees no GPU" >&2

# cuBLASLt is the one shared CUDA library the executables need; find it if
# the loader does not (as scripts/test-gpu.sh does).
if ldd "$here/gpt2-tiny-train" | grep -q 'libcublasLt.*not found'; then
  extra=""
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("cu13", "cublas")))' 2>/dev/null || true); do
    if [[ -e "$dir/libcublasLt.so.13" ]]; then extra="$dir"; break; fi
  done
  if [[ -z "$extra" ]]; then
    echo "run.sh: libcublasLt.so.13 not found on this machine" >&2
    exit 2
  fi
  export LD_LIBRARY_PATH="$extra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "run.sh: using cuBLASLt from $extra"
fi

status=0
for model in gpt2-tiny bert-tiny; do
  echo "=== $model (--target cuda, fp32) ==="
  rm -f "$out/$model".*
  "$here/$model-train" --data "$here/$model.batch.npy" \
      --weights "$here/$model-train.weights.safetensors" \
      --steps 1 --grad-accum 1 --lr 1e-3 --beta1 0.9 --beta2 0.95 --eps 1e-8 \
      --weight-decay 0.1 --grad-clip 0 --schedule constant --warmup 0 \
      --no-shuffle --metrics "$out/$model.metrics.jsonl" \
      --dump-params "$out/$model.params.safetensors" \
      --dump-grads "$out/$model.grads.safetensors" \
      > "$out/$model.train.log" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "$model: the executable failed (exit $rc):"
    cat "$out/$model.train.log"
    status=1
    continue
  fi
  tail -n 5 "$out/$model.train.log"
  if ! python3 "$here/training_step.py" check "$here/$model.reference.json" \
      "$out/$model.metrics.jsonl" "$out/$model.params.safetensors" \
      "$out/$model.grads.safetensors" 2>&1 | tee "$out/$model.check.txt"; then
    status=1
  fi
  # The check's verdict is its last line (OK or the mismatches).
  grep -q '^OK' "$out/$model.check.txt" || status=1
done
if [[ $status -eq 0 ]]; then echo "run.sh: both models match the fixtures"; else echo "run.sh: FAILED"; fi
exit $status
