#!/usr/bin/env bash
# One device session's artifacts in one carry, and the GPU half that runs them.
# Device time is short and the checkout of the CPU machine does not keep
# ignored folders between sessions, so the recipe lives here:
#   bash bench/device-session.sh pack [BUILD_DIR]    # here: builds and compresses
#     bench/llama/out (LLAMA_8B=1), BUILD_DIR/gpu-check and bench/gpt2/out into
#     bench/carry/*.tar.xz (xz keeps the three under the device tool's 64 MiB)
#   run(command="bash bench/device-session.sh run", carry=["bench/carry"])
# On the GPU machine `run` unpacks what is carried and, sampling nvidia-smi
# every 200 ms (clocks and power beside the ratios), runs:
#   CHECK=1   build/gpu-check/run.sh (every first-step fixture check);
#   LONLY     the Llama shapes of bench/llama/run.sh --quick ("none" skips;
#             default llama3.2-1b), against torch.compile in the same call;
#             CURVE=1 adds the 50-step loss curve, TRACE="name ..." profiles;
#   GPT2=1    bench/gpt2/run.sh --quick gpt2-124m against torch.compile;
#   EIGHT_B   on a GPU with more than 100 GiB: SPECS_8B for run-8b.sh
#             (default the resident 2 x 4096 run); "none" skips.
# Each part's output goes to $OUT/<part>.log.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode="${1:-}"; shift || true
carry="$root/bench/carry"
case "$mode" in
pack)
  build="${1:-$root/build}"
  mkdir -p "$carry" && rm -f "$carry"/*.tar.xz
  LLAMA_8B=1 bash "$root/bench/llama/build.sh" "$build" || exit 1
  bash "$root/bench/gpt2/build.sh" "$build" || exit 1
  rm -f "$root/bench/gpt2/out/gpt2-350m-train"   # the quick run times the 124M only
  bash "$root/scripts/make-gpu-check.sh" "$build" || exit 1
  cd "$root"
  tar cf - bench/llama/out | xz -T2 -9 > "$carry/llama.tar.xz"
  tar cf - bench/gpt2/out | xz -T2 -9 > "$carry/gpt2.tar.xz"
  tar cf - "$(realpath --relative-to="$root" "$build")/gpu-check" | xz -T2 -9 > "$carry/gpu-check.tar.xz"
  git rev-parse --short HEAD > "$carry/commit.txt"
  du -ch "$carry"/* ;;
run)
  OUT="${OUT:-/tmp/device-session}"; mkdir -p "$OUT"
  cd "$root"
  for t in "$carry"/*.tar.xz; do tar xJf "$t"; done
  echo "artifacts of $(cat "$carry/commit.txt" 2>/dev/null)"
  nvidia-smi --query-gpu=name,memory.total,power.limit --format=csv,noheader
  ( while sleep 0.2; do nvidia-smi --query-gpu=clocks.sm,power.draw,memory.used --format=csv,noheader,nounits; done ) \
      > "$OUT/smi.csv" 2>/dev/null &
  sampler=$!
  logs="$OUT"
  part() { local name="$1"; shift; echo "== $name [$(date +%T)]"; "$@" > "$logs/$name.log" 2>&1; echo "   rc=$?"; }
  if [[ "${CHECK:-1}" == 1 ]]; then
    check=$(ls -d build*/gpu-check | head -1)
    OUT="$OUT/gpu-check" part gpu-check bash "$check/run.sh"
    # The per-rank lines of the mesh plans' ZeRO gradients, and the verdict.
    grep -h "sliced, not reduced\|left whole\|resident\|all checks passed\|FAIL" "$OUT/gpu-check.log" | sort | uniq -c | head -40
  fi
  if [[ "${LONLY:-llama3.2-1b}" != none ]]; then
    ONLY="${LONLY:-llama3.2-1b}" AUTOTUNE=0 CURVE="${CURVE:-0}" TRACE="${TRACE:-none}" STEPS=15 OUT="$OUT/llama" \
      part llama bash bench/llama/run.sh --quick
    tail -n 25 "$OUT/llama.log"
  fi
  if [[ "${GPT2:-1}" == 1 ]]; then
    OUT="$OUT/gpt2" part gpt2 bash bench/gpt2/run.sh --quick gpt2-124m; tail -n 12 "$OUT/gpt2.log"
  fi
  total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
  if [[ "${EIGHT_B:-1}" != none && "$total" -gt 100000 ]]; then
    SPECS_8B="${SPECS_8B:-llama3-8b 2 10 150}" OUT="$OUT/8b" part 8b bash bench/llama/out/run-8b.sh
    cat "$OUT/8b.log"
  fi
  kill "$sampler"
  # Busy samples (over 400 W): the clocks the step ran at.
  awk -F', ' '$2 > 400 {print $1, $2}' "$OUT/smi.csv" | sort -n | awk '{c[NR]=$1; p[NR]=$2} END {if (NR) print "busy samples", NR, "median MHz", c[int((NR+1)/2)]}' ;;
*) echo "usage: bench/device-session.sh pack [BUILD_DIR] | run" >&2; exit 2 ;;
esac
