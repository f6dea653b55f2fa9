#!/usr/bin/env bash
# Fuzzes the training driver's readers (runtime/fuzz): builds the libFuzzer targets in build-fuzz
# (clang-22, ASan + UBSan; configured once, then Ninja rebuilds what changed) and runs each target in
# turn for SECONDS (default 20), starting from its seeds. Exits non-zero on the first finding: a
# crash, a sanitizer report, a leak, a timeout (-timeout) or memory past -rss_limit_mb; libFuzzer
# writes the input that caused it to build-fuzz/findings/<target>/. scripts/test.sh runs it with
# the default, so CI fuzzes each reader for a bounded time.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]   TARGET: safetensors checkpoint npy token-shard (default all)
#
# The corpus each run grows is kept in build-fuzz/corpus/<target>/ and is where the next run starts.
# A find to keep: minimize it (tessera-fuzz-<target> -minimize_crash=1 FILE), fix the reader, and
# add the input under runtime/fuzz/regressions/<target>/ so that FuzzSeedsTest runs it in every build.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build=build-fuzz
seconds="${1:-20}"
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(safetensors checkpoint npy token-shard)
if ! [[ $seconds =~ ^[0-9]+$ ]] || [[ $seconds -eq 0 ]]; then
  echo "fuzz.sh: SECONDS must be a positive integer, not '$seconds'" >&2
  exit 2
fi

for target in "${targets[@]}"; do
  case "$target" in
    safetensors | checkpoint | npy | token-shard) ;;
    *) echo "fuzz.sh: unknown target '$target' (safetensors, checkpoint, npy, token-shard)" >&2; exit 2 ;;
  esac
done

if [[ ! -f "$build/build.ninja" ]]; then
  CC=clang-22 CXX=clang++-22 cmake -G Ninja -S runtime -B "$build" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTESSERA_RUNTIME_FUZZERS=ON -DTESSERA_RUNTIME_TESTS=OFF -DTESSERA_RUNTIME_CUDA=OFF >/dev/null
fi
ninja -C "$build" -j"${FUZZ_JOBS:-$(nproc)}" "${targets[@]/#/tessera-fuzz-}"

# The targets' scratch files go to a directory of this run's own, removed however the run ends; in
# memory where possible (rewriting a file on disk for every input made fuzzing ten times slower).
scratch_root="${TMPDIR:-/tmp}"
[[ -d /dev/shm && -w /dev/shm ]] && scratch_root=/dev/shm
scratch="$(mktemp -d "$scratch_root/tessera-fuzz.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

for target in "${targets[@]}"; do
  case "$target" in
    safetensors | checkpoint) dictionary=runtime/fuzz/safetensors.dict max_len=65536 ;;
    npy) dictionary=runtime/fuzz/npy.dict max_len=4096 ;;
    token-shard) dictionary="" max_len=4096 ;;
  esac
  corpus="$build/corpus/$target"
  findings="$build/findings/$target"
  mkdir -p "$corpus" "$findings"
  log="$build/findings/$target.log"
  echo "fuzz.sh: tessera-fuzz-$target for ${seconds}s (log: $log)"
  # -timeout: one input taking over 10 s is a hang; -rss_limit_mb (also the malloc limit) bounds
  # what a hostile length may allocate; leaks are reported at exit (LeakSanitizer, on by default).
  if ! TESSERA_FUZZ_SCRATCH="$scratch" "$build/fuzz/tessera-fuzz-$target" "$corpus" "runtime/fuzz/seeds/$target" \
      ${dictionary:+-dict="$dictionary"} -max_len="$max_len" -max_total_time="$seconds" \
      -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$findings/" -print_final_stats=1 \
      >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz.sh: tessera-fuzz-$target found a bug; the input is in $findings/" >&2
    exit 1
  fi
  grep -E '^(Done |stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb))' "$log" |
    sed 's/^/  /'
  echo "  corpus: $(find "$corpus" -type f | wc -l) inputs"
done
echo "fuzz.sh: no findings"
