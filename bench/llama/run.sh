#!/usr/bin/env bash
# The GPU-machine half of the Llama-family benchmark (see build.sh), one
# device call:
#   run(command="bash bench/llama/run.sh [--quick]", carry=["bench/llama/out"])
# For each compiled shape (bf16):
#  1. writes random weights (random_weights.py) and random int32 tokens (.npy);
#  2. runs Tessera (and, unless AUTOTUNE=0, again with --gemm-autotune on:
#     cuBLASLt's candidates timed per shape), then the PyTorch peer (torch_llama_baseline.py:
#     torch.compile; eager unless --quick) with the same shape and batch;
#  3. traces one Tessera step (--trace; TRACE="name ..." limits it to those
#     shapes) and summarizes where its GPU time goes
#     (bench/profile/summarize_trace.py), so the top of the profile is read
#     beside the ratio;
#  4. trains llama-8x1024 (exported with weights there) 50 steps in bf16
#     beside PyTorch from the same weights and batches (torch_curve.py,
#     compare_curves.py: 2 % tolerance);
#  5. prints the table (report.py) and packs logs and traces into $OUT.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/out"
OUT="${OUT:-$here/results}"; mkdir -p "$OUT"
work=/tmp/tessera-llama; mkdir -p "$work"
export PYTHONUNBUFFERED=1
quick=0; [[ "${1:-}" == "--quick" ]] && { quick=1; shift; }
steps=${STEPS:-15}
source "$here/../../gpu-env.sh"
for dir in /usr/local/cuda/extras/CUPTI/lib64; do
  [[ -d "$dir" ]] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
log() { echo "[$(date +%T)] $*"; }

# name batch seq | peer's L D H KV F V tied theta. The peer has no q/k/v
# biases: against qwen2.5-0.5b it does a little less work than Tessera.
specs=("llama3.2-1b 8 2048 16 2048 32 8 8192 128256 1 500000"
       "llama3-8b-l4 2 4096 4 4096 32 8 14336 128256 0 500000"
       "qwen2.5-0.5b 8 2048 24 896 14 2 4864 151936 1 1000000")
for spec in "${specs[@]}"; do
  read -r name batch seq L D H KV F V tied theta <<< "$spec"
  # ONLY="name ...": run only those shapes.
  [[ -n "${ONLY:-}" && " $ONLY " != *" $name "* ]] && continue
  [[ -x "$here/$name-train" ]] || { log "$name: no executable"; continue; }
  log "weights and tokens for $name"
  python3 "$here/random_weights.py" "$here/$name.tensors.txt" "$work/$name.safetensors" --theta "$theta"
  # Rows of seq + 1 tokens (the inputs and their next-token targets).
  python3 -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(1).integers(0, int(sys.argv[2]), size=(int(sys.argv[3]), int(sys.argv[4]) + 1), dtype=np.int32))" \
      "$work/$name.tokens.npy" "$V" $(( (steps + 4) * batch )) "$seq"
  common=(--data "$work/$name.tokens.npy" --weights "$work/$name.safetensors" --lr 3e-4 --schedule constant
          --warmup 0 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight-decay 0.1 --grad-clip 1.0 --no-shuffle)
  log "tessera $name"
  "$here/$name-train" "${common[@]}" --steps "$steps" --metrics "$OUT/tessera-$name.jsonl" \
      > "$OUT/tessera-$name.log" 2>&1 || log "tessera $name failed: $?"
  tail -n 3 "$OUT/tessera-$name.log"
  grep -m3 "tessera:" "$OUT/tessera-$name.log"
  # The variants build.sh compiled (other flags, the same model).
  for variant in remat-selective logits-block-2gib pack-gate-up; do
    [[ -x "$here/$name-$variant-train" ]] || continue
    log "tessera $name, $variant"
    "$here/$name-$variant-train" "${common[@]}" --steps "$steps" \
        --metrics "$OUT/tessera-$name-$variant.jsonl" > "$OUT/tessera-$name-$variant.log" 2>&1 \
      || log "tessera $name $variant failed: $?"
    tail -n 1 "$OUT/tessera-$name-$variant.log"
  done
  if [[ "${AUTOTUNE:-1}" != 0 ]]; then
    log "tessera $name, --gemm-autotune on"
    "$here/$name-train" "${common[@]}" --steps "$steps" --gemm-autotune on \
        --metrics "$OUT/tessera-$name-gemm-autotune.jsonl" > "$OUT/tessera-$name-gemm-autotune.log" 2>&1 \
      || log "tessera $name --gemm-autotune on failed: $?"
    tail -n 1 "$OUT/tessera-$name-gemm-autotune.log"
  fi
  # TRACE="name ...": trace only those shapes (default: every one).
  if [[ -z "${TRACE:-}" || " $TRACE " == *" $name "* ]]; then
    log "trace $name"
    # Steps 3-6: a slow step every fourth shows among them.
    "$here/$name-train" "${common[@]}" --steps 6 --trace "$work/$name.trace.json" --trace-steps 3:6 \
        > "$OUT/trace-$name.log" 2>&1 || log "traced run failed: $?"
    python3 "$here/summarize_trace.py" "$work/$name.trace.json" --top 30 > "$OUT/profile-$name.txt" 2>&1
    head -n 40 "$OUT/profile-$name.txt"
    # TRACE_KEEP=1: the trace itself comes back too (xz, a few hundred KB).
    [[ "${TRACE_KEEP:-0}" == 1 ]] && xz -T4 -c "$work/$name.trace.json" > "$OUT/trace-$name.json.xz"
  fi
  peer=(python3 "$here/peer/torch_llama_baseline.py" --L "$L" --D "$D" --H "$H" --KV "$KV" --F "$F" --V "$V"
        --tied "$tied" --theta "$theta" --B "$batch" --T "$seq" --steps "$steps")
  # PEER=0 leaves the PyTorch runs out (iterating on Tessera alone; a
  # reported ratio always comes from one call with both).
  [[ "${PEER:-1}" == 0 ]] && continue
  log "torch.compile $name"
  "${peer[@]}" --compile 1 > "$OUT/torch-$name-compile1.log" 2>&1
  grep RESULT "$OUT/torch-$name-compile1.log" || tail -n 5 "$OUT/torch-$name-compile1.log"
  # PROFILE_PEER=1: where the peer's step goes by kernel kind (profile_peer.py,
  # torch.profiler), to read beside profile-$name.txt, for the traced shapes.
  if [[ "${PROFILE_PEER:-0}" == 1 && ( -z "${TRACE:-}" || " $TRACE " == *" $name "* ) ]]; then
    log "profile torch.compile $name"
    python3 "$here/profile_peer.py" -- "${peer[@]:1}" --compile 1 --steps 12 \
        > "$OUT/profile-peer-$name.txt" 2>&1
    grep -A 45 "^PyTorch peer" "$OUT/profile-peer-$name.txt" || tail -n 5 "$OUT/profile-peer-$name.txt"
  fi
  if [[ $quick == 0 ]]; then
    log "eager $name"
    "${peer[@]}" --compile 0 > "$OUT/torch-$name-compile0.log" 2>&1
    grep RESULT "$OUT/torch-$name-compile0.log" || tail -n 5 "$OUT/torch-$name-compile0.log"
  fi
done
# The 50-step bf16 loss curve of llama-8x1024 against PyTorch from the same
# weights and batches (CURVE=0 leaves it out).
curve=llama-8x1024
if [[ "${CURVE:-1}" != 0 && -x "$here/$curve-train" ]]; then
  log "loss curve: export $curve with weights"
  python3 "$here/peer/export_hf.py" --model "$curve" --out "$work" > "$OUT/export-$curve.log" 2>&1 \
    && python3 "$here/onnx_to_safetensors.py" "$work/$curve.raw.dyn.onnx" "$work/$curve.safetensors" \
         "$here/$curve.tensors.txt" \
    && python3 "$here/make_tokens.py" "$work/$curve.tokens.bin" $(( 60 * 8 * 1024 + 1 )) 32000 1 \
    || log "export of $curve failed"
  "$here/$curve-train" --data "$work/$curve.tokens.bin" --weights "$work/$curve.safetensors" --steps 50 \
      --lr 6e-4 --schedule constant --warmup 0 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight-decay 0.1 \
      --grad-clip 1.0 --no-shuffle --metrics "$OUT/curve-tessera.jsonl" > "$OUT/curve-tessera.log" 2>&1 \
    || log "tessera $curve failed: $?"
  python3 "$here/torch_curve.py" --hf-model "$curve" --export-hf "$here/peer/export_hf.py" \
      --weights "$work/$curve.safetensors" --data "$work/$curve.tokens.bin" --steps 50 --B 8 --T 1024 \
      --out "$OUT/curve-torch.jsonl" > "$OUT/curve-torch.log" 2>&1 \
    && python3 "$here/compare_curves.py" "$OUT/curve-tessera.jsonl" "$OUT/curve-torch.jsonl" \
         --label "$curve-bf16" | tee "$OUT/curve.txt" | tail -n 3 \
    || tail -n 5 "$OUT/curve-torch.log"
fi
python3 "$here/report.py" "$OUT" "$here" | tee "$OUT/table.md"
# $OUT returns at most 8 files: pack the logs (the profiles only where
# traced: a pattern that matches nothing made tar, and the run, exit 2).
(cd "$OUT" && shopt -s nullglob && tar czf logs-llama.tgz *.log *.jsonl profile-*.txt \
   && rm -f *.log *.jsonl)
