#!/usr/bin/env bash
# The GPU-machine half of the GPT-2 benchmark (see build.sh), one device call:
#   run(command="bash bench/gpt2/run.sh [--quick]", carry=["bench/gpt2/out"], kind="nvidia-h200-x2")
# For GPT-2 124M (16 x 1024 per GPU) and 350M (8 x 1024 per GPU), bf16:
#  1. exports the model with its weights (export_hf.py, the same script that
#     made ../shared/models) and converts them to the --weights safetensors;
#  2. writes random tokens as an llm.c shard;
#  3. runs Tessera and the PyTorch peer (torch_gpt2_baseline.py: torch.compile
#     and eager) on 1 GPU and, when there are two, on 2 GPUs (Tessera --nproc 2,
#     PyTorch torchrun + DDP), same micro-batch per GPU;
#  4. for 124M, the 50-step loss curve against PyTorch (torch_curve.py) from the
#     same weights and batches;
#  5. prints the table (report.py) and copies logs and results into $OUT.
# ATTENTION_AB=1 also runs Tessera on 1 GPU with cuDNN's attention off
# (TESSERA_CUDNN_ATTENTION=0: the flash kernels of runtime/cuda), in the
# same call, as the table's "1, own attention" row.
# HEALTH_AB=1 also runs it with --grad-norms-every 1 --on-spike report (the
# training-health reports of every step), then plainly again, for their cost.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/out"
OUT="${OUT:-$here/results}"; mkdir -p "$OUT"
work=/tmp/tessera-bench; mkdir -p "$work"
export PYTHONUNBUFFERED=1
quick=0; [[ "${1:-}" == "--quick" ]] && { quick=1; shift; }
# The models to run (default both); one device call may not hold both, so
# `run.sh gpt2-124m` and `run.sh gpt2-350m` can be two calls.
models=("$@"); [[ ${#models[@]} -eq 0 ]] && models=(gpt2-124m gpt2-350m)
steps=25; [[ $quick == 1 ]] && steps=15
source "$here/../../gpu-env.sh"
log() { echo "[$(date +%T)] $*"; }

tessera() { # name batch nproc steps tag extra...
  local name=$1 batch=$2 nproc=$3 n=$4 tag=$5; shift 5
  local launch=()
  [[ $nproc -gt 1 ]] && launch=(--nproc "$nproc")
  log "$tag"
  "$here/$name-train" "${launch[@]}" --data "$work/$name.tokens.bin" --weights "$work/$name.safetensors" \
      --steps "$n" --lr 6e-4 --schedule constant --warmup 0 --beta1 0.9 --beta2 0.95 --eps 1e-8 \
      --weight-decay 0.1 --grad-clip 1.0 --no-shuffle --metrics "$OUT/$tag.jsonl" "$@" \
      > "$OUT/$tag.log" 2>&1
  local rc=$?
  tail -n 4 "$OUT/$tag.log"
  [[ $rc -ne 0 ]] && log "$tag failed with exit $rc"
}
peer() { # name nproc compile L D H B
  local name=$1 nproc=$2 comp=$3 L=$4 D=$5 H=$6 B=$7
  local tag="torch-$name-${nproc}gpu-compile$comp"
  log "$tag"
  if [[ $nproc -gt 1 ]]; then
    torchrun --standalone --nproc_per_node "$nproc" "$here/peer/torch_gpt2_baseline.py" --compile "$comp" \
        --L "$L" --D "$D" --H "$H" --B "$B" --steps "$steps" > "$OUT/$tag.log" 2>&1
  else
    python3 "$here/peer/torch_gpt2_baseline.py" --compile "$comp" --L "$L" --D "$D" --H "$H" --B "$B" \
        --steps "$steps" > "$OUT/$tag.log" 2>&1
  fi
  grep RESULT "$OUT/$tag.log" || tail -n 5 "$OUT/$tag.log"
}

for spec in "gpt2-124m 16 12 768 12" "gpt2-350m 8 24 1024 16"; do
  read -r name batch L D H <<< "$spec"
  [[ " ${models[*]} " == *" $name "* ]] || continue
  [[ -x "$here/$name-train" ]] || { log "$name: no executable"; continue; }
  log "export $name with weights"
  python3 "$here/peer/export_hf.py" --model "$name" --out "$work" > "$OUT/export-$name.log" 2>&1 \
    && python3 "$here/onnx_to_safetensors.py" "$work/$name.raw.dyn.onnx" "$work/$name.safetensors" "$here/$name.tensors.txt" \
    || { log "export of $name failed"; tail "$OUT/export-$name.log"; continue; }
  python3 "$here/make_tokens.py" "$work/$name.tokens.bin" $(( (steps + 60) * 2 * batch * 1024 + 1 )) 50257 1
  tessera "$name" "$batch" 1 "$steps" "tessera-$name-1gpu"
  [[ "${ATTENTION_AB:-0}" == 1 ]] && TESSERA_CUDNN_ATTENTION=0 \
    tessera "$name" "$batch" 1 "$steps" "tessera-$name-1gpu-own-attention"
  # The cost of the training-health reports (issue 27): every step's
  # per-parameter and per-layer norms and spike detection, beside the plain
  # run above and after it again (the order's drift shows).
  if [[ "${HEALTH_AB:-0}" == 1 ]]; then
    tessera "$name" "$batch" 1 "$steps" "tessera-$name-1gpu-health" \
        --grad-norms-every 1 --on-spike report --spike-window 5
    tessera "$name" "$batch" 1 "$steps" "tessera-$name-1gpu-again"
  fi
  peer "$name" 1 1 "$L" "$D" "$H" "$batch"
  [[ $quick == 0 ]] && peer "$name" 1 0 "$L" "$D" "$H" "$batch"
  if [[ $gpus -ge 2 ]]; then
    tessera "$name" "$batch" 2 "$steps" "tessera-$name-2gpu"
    peer "$name" 2 1 "$L" "$D" "$H" "$batch"
    [[ $quick == 0 ]] && peer "$name" 2 0 "$L" "$D" "$H" "$batch"
  fi
  if [[ $name == gpt2-124m && $quick == 0 ]]; then
    tessera "$name" "$batch" 1 50 curve-tessera
    python3 "$here/torch_curve.py" --weights "$work/$name.safetensors" --data "$work/$name.tokens.bin" \
        --steps 50 --B "$batch" --T 1024 --out "$OUT/curve-torch.jsonl" > "$OUT/curve-torch.log" 2>&1 \
      && python3 "$here/compare_curves.py" "$OUT/curve-tessera.jsonl" "$OUT/curve-torch.jsonl" --label gpt2-124m-bf16 \
      | tee "$OUT/curve.txt" || tail "$OUT/curve-torch.log"
  fi
done
python3 "$here/report.py" "$OUT" "$here" | tee "$OUT/table.md"
# $OUT returns at most 8 files: pack the logs.
(cd "$OUT" && tar czf "logs-${models[*]// /-}.tgz" *.log *.jsonl 2>/dev/null && rm -f *.log *.jsonl)
