#!/usr/bin/env bash
# Profile one GPT-2 124M bf16 step (16 x 1024) with --trace on one H200:
#   SPEED=1 bash scripts/make-gpu-check.sh build-gpu bench/profile/out   (here)
#   run(command="bash bench/profile/run.sh", carry=["bench/profile/out"])  (there)
# Writes the trace and a kernel-time summary (summarize_trace.py) into $OUT.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pkg="$here/out"; OUT="${OUT:-$pkg/results}"; mkdir -p "$OUT"
source "$here/../gpu-env.sh" >/dev/null
for dir in /usr/local/cuda/extras/CUPTI/lib64; do
  [[ -d "$dir" ]] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
"$pkg/gpt2-124m-train" --data "$pkg/gpt2-124m.tokens.bin" --init random --steps 5 --lr 6e-4 \
    --no-shuffle --trace "$OUT/gpt2-124m.trace.json" --trace-steps 4:4 2>&1 | tail -n 8
python3 "$here/summarize_trace.py" "$OUT/gpt2-124m.trace.json" --top 45 | tee "$OUT/summary.txt"
gzip -f "$OUT/gpt2-124m.trace.json"
