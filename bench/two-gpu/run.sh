#!/usr/bin/env bash
# The GPU-machine half of bench/two-gpu/build.sh: unpacks the carry into the
# working tree's bench/*/out and runs the named parts (default: all; a device
# call is at most 10 minutes, so gpt2 is best a call of its own):
#   bash bench/two-gpu/run.sh [gpt2] [plans] [pipeline] [checks]
# Results and logs go under $OUT/<part>.
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
carry="$root/bench/carry/two-gpu.tar.xz"
[[ -f "$carry" ]] || { echo "run.sh: $carry not found (bench/two-gpu/build.sh)" >&2; exit 1; }
tar -C "$root" -xJf "$carry"
base="${OUT:-/tmp/two-gpu}"
parts=("$@"); [[ ${#parts[@]} -eq 0 ]] && parts=(gpt2 plans pipeline checks)
status=0
for part in "${parts[@]}"; do
  echo "===== $part [$(date +%T)]"
  mkdir -p "$base/$part"
  case "$part" in
    gpt2)     OUT="$base/$part" bash "$root/bench/gpt2/run.sh" 2>&1 | grep -E "RESULT|^\| |CURVE|rror" ;;
    plans)    OUT="$base/$part" bash "$root/bench/plans/run.sh" 2>&1 | tail -n 12 ;;
    pipeline) OUT="$base/$part" bash "$root/bench/pipeline/run.sh" 2>&1 | tail -n 14 ;;
    checks)   OUT="$base/$part" bash "$root/bench/profile/out/run.sh" > "$base/$part/log.txt" 2>&1
              grep -E '^(===|OK|FAIL)|PASSED|FAILED|relative|run.sh' "$base/$part/log.txt"
              grep -q "all checks passed" "$base/$part/log.txt" || status=1
              continue ;;
    *)        echo "run.sh: unknown part '$part' (gpt2, plans, pipeline, checks)"; status=2 ;;
  esac
  [[ ${PIPESTATUS[0]} -ne 0 ]] && status=1
done
exit $status
