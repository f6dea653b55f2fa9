#!/usr/bin/env bash
# The GPU-machine half of the plan benchmark (bench/plans/build.sh): trains
# GPT-2 350M with each plan on 2 GPUs (20 steps from random weights, the
# same 16 x 1024 tokens a step) and prints the measured step time and peak
# memory per GPU beside the cost model's predictions (report.py).
#   run(command="bash bench/plans/run.sh", carry=["bench/plans/out"], kind="nvidia-h200-x2")
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ -x "$here/dp-train" ]] || here="$here/out"
OUT="${OUT:-$here/results}"
mkdir -p "$OUT"
source "$here/gpu-env.sh"
if [[ "$gpus" -lt 2 ]]; then
  echo "run.sh: the plans run on 2 GPUs; this machine has $gpus" >&2
  exit 2
fi
# 20 steps of 16 x 1024 synthetic tokens, and one more.
python3 "$here/make_tokens.py" "$OUT/tokens.bin" $((20 * 16 * 1024 + 1)) 50257
plan() { # name executable flags...
  local name=$1 exe=$2; shift 2
  echo "[$(date +%T)] $name"
  "$here/$exe" --nproc 2 --data "$OUT/tokens.bin" --init random --steps 20 \
      --lr 6e-4 --warmup 2 --grad-clip 1.0 --no-shuffle \
      --metrics "$OUT/$name.jsonl" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 2 "$OUT/$name.log"
  [[ $rc -ne 0 ]] && echo "$name failed with exit $rc"
}
plan dp dp-train --zero 0
plan zero1 dp-train --zero 1
plan tp tp-train
python3 "$here/report.py" "$here" "$OUT"
