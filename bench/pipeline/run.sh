#!/usr/bin/env bash
# The GPU-machine half of the pipeline and remat benchmark
# (bench/pipeline/build.sh): trains GPT-2 350M for 20 steps from random
# weights in each layout and prints the measured step time and peak memory
# per GPU beside the planner's predictions (report.py). The 2-stage pipeline
# runs need 2 GPUs and are skipped (and say so) on one.
#   run(command="bash bench/pipeline/run.sh", carry=["bench/pipeline/out"], kind="nvidia-h200-x2")
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ -x "$here/one-none-train" ]] || here="$here/out"
OUT="${OUT:-$here/results}"
mkdir -p "$OUT"
source "$here/gpu-env.sh"
# 20 steps of 16 x 1024 synthetic tokens, and one more.
python3 "$here/make_tokens.py" "$OUT/tokens.bin" $((20 * 16 * 1024 + 1)) 50257
layout() { # name flags...
  local name=$1; shift
  echo "[$(date +%T)] $name"
  "$here/$name-train" --data "$OUT/tokens.bin" --init random --steps 20 \
      --lr 6e-4 --warmup 2 --grad-clip 1.0 --no-shuffle \
      --metrics "$OUT/$name.jsonl" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 2 "$OUT/$name.log"
  [[ $rc -ne 0 ]] && echo "$name failed with exit $rc"
}
for remat in none selective full; do
  layout "one-$remat"
done
if [[ "$gpus" -ge 2 ]]; then
  for remat in none selective full; do
    # The last step traced per rank (the median of steps 6-20 is reported):
    # where each stage's time goes, beside the predictions.
    layout "pp2-$remat" --nproc 2 --trace "$OUT/pp2-$remat.json" --trace-steps 20:20
    python3 "$here/task_times.py" "$OUT/pp2-$remat".rank*.json
  done
else
  echo "run.sh: the 2-stage pipeline runs need 2 GPUs; this machine has $gpus"
  # Functional only: both stages as thread ranks of one process on the one
  # GPU, their messages staged through host memory; the per-rank traces
  # say what a stage call and a send/receive cost.
  echo "[$(date +%T)] pp2-none as 2 thread ranks on 1 GPU (not a 2-GPU measurement)"
  "$here/pp2-none-train" --data "$OUT/tokens.bin" --init random --steps 6 --lr 6e-4 \
      --warmup 2 --no-shuffle --trace "$OUT/pp2-none-threads.json" --trace-steps 4:5 \
      > "$OUT/pp2-none-threads.log" 2>&1 || echo "pp2-none (thread ranks) failed with exit $?"
  tail -n 3 "$OUT/pp2-none-threads.log"
  python3 "$here/task_times.py" "$OUT"/pp2-none-threads.rank*.json
fi
python3 "$here/report.py" "$here" "$OUT"
