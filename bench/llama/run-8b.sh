#!/usr/bin/env bash
# The GPU-machine half of the Llama 3 8B runs on one H200 (issue 23): what
#   LLAMA_8B=1 bash bench/llama/build.sh
# compiled, each as the planner plans it for --cluster h200, trained from a
# random start (--init random; the rotary frequencies come from the graph)
# on one batch of random tokens repeated, so the loss must fall:
#   llama3-8b               2 x 4096: remat full, the state resident
#                           (122.8 GiB predicted);
#   llama3-8b-b16-offload   16 x 4096: remat full and the fp32 masters and
#                           AdamW moments in host memory (58.9 GiB on the
#                           GPU predicted): fits only offloaded.
# One device call (needs_h200: the resident run does not fit 80 GB):
#   tar cf - bench/llama/out | xz -T2 -9 > bench/carry/8b.tar.xz
#   run(command="tar xJf bench/carry/8b.tar.xz && bash bench/llama/out/run-8b.sh",
#       carry=["bench/carry/8b.tar.xz"], kind="nvidia-h200", needs_h200=true)
# Prints each run's plan line, every step (loss, norm, ms), the executable's
# peak and the sampled peaks of nvidia-smi and the host's used memory;
# `--explain` with the same flags gives the predictions to set beside them.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${OUT:-$here/results}"; mkdir -p "$OUT"
t0=$(date +%s)
[[ -f "$here/../../gpu-env.sh" ]] && source "$here/../../gpu-env.sh"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; free -g | head -2
common=(--init random --rope-theta 500000 --lr 3e-4 --beta1 0.9 --beta2 0.95 --weight-decay 0.1
        --grad-clip 1.0 --no-shuffle)
# name batch steps seconds; SPECS_8B="name batch steps seconds;..." picks
# others (one device call is at most 600 s).
specs=("llama3-8b 2 10 150" "llama3-8b-b16-offload 16 10 300")
[[ -n "${SPECS_8B:-}" ]] && IFS=';' read -r -a specs <<< "$SPECS_8B"
for spec in "${specs[@]}"; do
  read -r name batch steps limit <<< "$spec"
  [[ -x "$here/$name-train" ]] || { echo "$name: no executable (LLAMA_8B=1 build.sh)"; continue; }
  echo "== $name [$(( $(date +%s) - t0 )) s]"
  python3 -c "import numpy as np, sys; np.save(sys.argv[1], np.random.default_rng(1).integers(0, 128256, size=(int(sys.argv[2]), 4097), dtype=np.int32))" \
      "/tmp/$name.npy" "$batch"
  ( while sleep 2; do echo "$(date +%T) gpu $(nvidia-smi --query-gpu=memory.used --format=csv,noheader) host_used_GiB $(free -g | awk '/Mem:/{print $3}')"; done ) \
      > "/tmp/$name-mem.txt" 2>&1 &
  sampler=$!
  timeout "$limit" "$here/$name-train" --data "/tmp/$name.npy" --steps "$steps" "${common[@]}" \
      --metrics "$OUT/$name.jsonl" > "$OUT/$name.log" 2>&1
  echo "rc=$?"; kill "$sampler"
  grep -m3 "plan:\|offload optimizer:" "$OUT/$name.log"
  grep "^step" "$OUT/$name.log" | tail -n "$steps"
  tail -n 2 "$OUT/$name.log" | grep -v "^step"
  echo "sampled peaks: $(sort -k3 -n "/tmp/$name-mem.txt" | tail -1 | cut -d' ' -f2-4); host $(sort -k6 -n "/tmp/$name-mem.txt" | tail -1 | cut -d' ' -f5-6)"
done
echo "[$(( $(date +%s) - t0 )) s]"
