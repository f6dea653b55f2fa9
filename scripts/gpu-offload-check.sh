#!/usr/bin/env bash
# The GPU checks of `--offload optimizer` (issue 23 item 2), built here and
# run on the GPU machine, like scripts/make-gpu-check.sh:
#   scripts/gpu-offload-check.sh [BUILD_DIR] [OUT_DIR]
#       (defaults: build, BUILD_DIR/gpu-offload-check; BUILD_DIR configured
#       with the CUDA runtime and built: tesserac, tessera_runtime_train_cuda,
#       tessera_runtime_offload_gpu_tests; the folder stays under the device
#       tool's 64 MiB carry limit, about 50 MiB)
# then, through the device tool:
#   run(command="bash <OUT_DIR>/run.sh", carry=["<OUT_DIR>"])
# The run prints one "PASS name" or "FAIL name: why" line per check, a
# summary, and exits 1 if any failed. Its checks:
# 1. the GoogleTest: the offloaded optimizer's transfers and host AdamW
#    against the resident GPU optimizer bit for bit
#    (tessera_runtime_offload_gpu_tests; tessera_runtime_cuda_tests'
#    DriverKernelsCuda.* checks the GPU's AdamW against tessera_cpu_adamw
#    bit for bit too, in scripts/make-gpu-check.sh's run);
# 2. gpt2-tiny and llama-tiny in bf16, 50 steps on a token shard: the
#    offloaded run's losses within 1e-6 relative of the resident run's at
#    every step, and its final parameters bit for bit the resident's; the
#    same for gpt2-tiny with --grad-accum 2 (the f32 accumulators), with
#    --cuda-graphs off, in fp16 with a loss scale that overflows (skipped
#    steps), in fp32 (every weight read as its master: the mirror), and
#    stopped at step 25 and resumed (checkpoints from the host masters);
#    a refusal (--zero 1) naming the flag;
# 3. the GPT-2 124M shape (bf16, 16 x 1024, --init random, a random token
#    shard): 50 steps resident and offloaded, the same loss check, and the
#    step time of each (median ms of steps 6-50), the overhead of offload,
#    both peak memories, and what the offloaded run measured: the host
#    AdamW's ms a step and Gelem/s, the gradients' device -> host and the
#    weights' host -> device GB/s (the cost model's host and PCIe numbers).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$repo/build}"
out="${2:-$build/gpu-offload-check}"
tesserac="$build/bin/tesserac"
[[ -x "$tesserac" ]] || { echo "gpu-offload-check.sh: $tesserac not found: build first" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"

compile() { # NAME MODEL PRECISION [FLAGS...]
  local name=$1 model=$2 precision=$3
  shift 3
  echo "== tesserac $name ($precision)"
  "$tesserac" "$model" --loss causal-lm --precision "$precision" --target cuda \
      -o "$out/$name-train" "$@"
}
tiny="--dim batch=2 --dim seq=31"
# shellcheck disable=SC2086
compile gpt2-tiny-bf16 "$repo/test/models/gpt2-tiny.raw.dyn.onnx" bf16 $tiny
# shellcheck disable=SC2086
compile llama-tiny-bf16 "$repo/test/models/llama-tiny.raw.dyn.onnx" bf16 $tiny
# shellcheck disable=SC2086
compile gpt2-tiny-fp16 "$repo/test/models/gpt2-tiny.raw.dyn.onnx" fp16 $tiny --without-weights
# shellcheck disable=SC2086
compile gpt2-tiny-fp32 "$repo/test/models/gpt2-tiny.raw.dyn.onnx" fp32 $tiny --without-weights
gpt2="$repo/../shared/models/gpt2-124m.raw.dyn.onnx"
if [[ -f "$gpt2" ]]; then
  compile gpt2-124m-bf16 "$gpt2" bf16 --dim batch=16 --dim seq=1024 --without-weights
else
  echo "gpu-offload-check.sh: $gpt2 not found: the step time is measured on gpt2-tiny only" >&2
fi

# Token shards (llm.c .bin): the tiny models' vocabulary is 512; a rule
# followed 70% of the time, so the loss falls but stays well above 0.
python3 - "$out" <<'PY'
import random, struct, sys
out = sys.argv[1]
def shard(path, count, vocabulary, rule):
    random.seed(7)
    tokens, token = [], 1
    for _ in range(count):
        token = (token * 5 + 3) % vocabulary if rule and random.random() < 0.7 \
            else random.randrange(vocabulary)
        tokens.append(token)
    header = struct.pack("<256i", 20240520, 1, count, *([0] * 253))
    open(path, "wb").write(header + struct.pack("<%dH" % count, *tokens))
shard(out + "/tiny.tokens.bin", 60 * 2 * 32 * 2, 512, True)
shard(out + "/gpt2-124m.tokens.bin", 52 * (16 * 1024 + 1), 50257, False)
PY

found=
for dir in "$build/bin" "$build/train"; do
  if [[ -x "$dir/tessera_runtime_offload_gpu_tests" ]]; then
    cp "$dir/tessera_runtime_offload_gpu_tests" "$out/"; found=1; break
  fi
done
[[ -n "$found" ]] || echo "gpu-offload-check.sh: tessera_runtime_offload_gpu_tests not built; its check will FAIL" >&2
# Symbols are not needed there, and the carry limit is tight.
strip --strip-unneeded "$out"/*-train "$out"/tessera_runtime_offload_gpu_tests 2>/dev/null || true
cp "$repo/bench/gpu-env.sh" "$out/"

cat > "$out/compare.py" <<'PY'
#!/usr/bin/env python3
"""compare.py curves RESIDENT.jsonl OFFLOADED.jsonl MAX_RELATIVE_GAP
       Every step's loss within MAX_RELATIVE_GAP (relative) of the resident
       run's, the same steps skipped; prints the largest gap and where.
   compare.py curves-against RESIDENT.jsonl OFFLOADED.jsonl RESIDENT2.jsonl GAP
       The same, within GAP or twice RESIDENT2's own gap to RESIDENT.
   compare.py params A.safetensors B.safetensors
       Every tensor bit for bit equal; names the first that differs.
   compare.py speed RESIDENT.jsonl OFFLOADED.jsonl
       Median step_ms of steps 6.. of each, the overhead, the peak memories."""
import json, statistics, struct, sys

def steps(path):
    return [json.loads(line) for line in open(path) if line.strip()]

def largest_gap(a_path, b_path):
    a, b = steps(a_path), steps(b_path)
    return max((abs(y["loss"] - x["loss"]) / max(abs(x["loss"]), 1e-30)
                for x, y in zip(a, b)), default=0.0)

def curves_against(a_path, b_path, again_path, limit):
    """b against a within `limit`, or within twice a's own run-to-run gap
    (a against again): a step whose attention backward adds dq with float
    atomics (cuDNN's, FlashAttention.cu's past one key tile) is not bit
    reproducible, so two resident runs already differ."""
    noise = largest_gap(a_path, again_path)
    print("resident against resident (the step's own run-to-run gap): %.3g"
          % noise)
    curves(a_path, b_path, max(limit, 2 * noise))

def curves(a_path, b_path, limit):
    a, b = steps(a_path), steps(b_path)
    if len(a) != len(b) or not a:
        sys.exit("the runs have %d and %d steps" % (len(a), len(b)))
    worst, where = 0.0, 0
    for x, y in zip(a, b):
        if x["skipped"] != y["skipped"]:
            sys.exit("step %d: skipped %s resident, %s offloaded" %
                     (x["step"], x["skipped"], y["skipped"]))
        gap = abs(y["loss"] - x["loss"]) / max(abs(x["loss"]), 1e-30)
        if gap > worst:
            worst, where = gap, x["step"]
    identical = all(x["loss"] == y["loss"] and x["grad_norm"] == y["grad_norm"]
                    for x, y in zip(a, b))
    detail = "%d steps, loss %.6f -> %.6f, largest relative gap %.3g%s%s" % (
        len(a), a[0]["loss"], a[-1]["loss"], worst,
        " at step %d" % where if worst else "",
        ", losses and norms identical" if identical else "")
    if worst > limit:
        print("resident :", " ".join("%.9g" % s["loss"] for s in a))
        print("offloaded:", " ".join("%.9g" % s["loss"] for s in b))
        sys.exit(detail + " > " + repr(limit))
    print(detail)

def tensors(path):
    data = open(path, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    return {name: body[info["data_offsets"][0]:info["data_offsets"][1]]
            for name, info in header.items() if name != "__metadata__"}

def params(a_path, b_path):
    a, b = tensors(a_path), tensors(b_path)
    if sorted(a) != sorted(b):
        sys.exit("the files hold different tensors")
    for name in sorted(a):
        if a[name] != b[name]:
            x = struct.unpack("<%df" % (len(a[name]) // 4), a[name])
            y = struct.unpack("<%df" % (len(b[name]) // 4), b[name])
            diffs = [abs(p - q) for p, q in zip(x, y)]
            sys.exit("%s differs in %d of %d elements (largest %.3g)" %
                     (name, sum(d != 0 for d in diffs), len(diffs), max(diffs)))
    print("%d tensors bit for bit equal" % len(a))

def speed(a_path, b_path):
    a, b = steps(a_path)[5:], steps(b_path)[5:]
    if not a or not b:
        sys.exit("too few steps to time")
    ta = statistics.median(s["step_ms"] for s in a)
    tb = statistics.median(s["step_ms"] for s in b)
    pa, pb = steps(a_path)[-1]["peak_memory_gib"], steps(b_path)[-1]["peak_memory_gib"]
    print("step time: resident %.2f ms, offloaded %.2f ms: overhead %.2f ms (%+.1f%%); "
          "peak GPU memory: resident %.2f GiB, offloaded %.2f GiB"
          % (ta, tb, tb - ta, 100 * (tb - ta) / ta, pa, pb))

if __name__ == "__main__":
    command = sys.argv[1]
    if command == "curves":
        curves(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif command == "curves-against":
        curves_against(sys.argv[2], sys.argv[3], sys.argv[4],
                       float(sys.argv[5]))
    elif command == "params":
        params(sys.argv[2], sys.argv[3])
    elif command == "speed":
        speed(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
PY

cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# The run half of scripts/gpu-offload-check.sh (see there), on the GPU machine.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="${OUT:-$here/out}"
mkdir -p "$work"
nvidia-smi -L 2>/dev/null || echo "run.sh: warning: nvidia-smi sees no GPU"
source "$here/gpu-env.sh" >/dev/null
nproc_here=$(nproc)
echo "host: $nproc_here cores"
failed=()
pass() { echo "PASS $1${2:+: $2}"; }
fail() { echo "FAIL $1: $2"; failed+=("$1"); }

# check NAME COMMAND...: PASS when COMMAND succeeds, else FAIL with its
# output's last lines.
check() {
  local name=$1
  shift
  local log="$work/$name.check.log"
  if "$@" > "$log" 2>&1; then
    pass "$name" "$(tail -n 1 "$log")"
  else
    fail "$name" "$(tail -n 5 "$log" | tr '\n' ' ')"
  fi
}

echo "=== 1. GoogleTest ==="
if [[ -x "$here/tessera_runtime_offload_gpu_tests" ]]; then
  check offload-gtest "$here/tessera_runtime_offload_gpu_tests"
  grep -q '\[  SKIPPED \]' "$work/offload-gtest.check.log" && \
    fail offload-gtest-ran "the test skipped: it saw no GPU"
else
  fail offload-gtest "tessera_runtime_offload_gpu_tests was not built (configure with the CUDA runtime)"
fi

# train NAME EXECUTABLE [FLAGS...]: 50 steps unless FLAGS say otherwise
# (a constant rate after the warmup, so a run stopped early follows the
# same schedule);
# metrics in $work/NAME.jsonl, parameters in $work/NAME.safetensors, the
# console in $work/NAME.log. Returns the executable's status.
train() {
  local name=$1 exe=$2
  shift 2
  rm -f "$work/$name".*
  "$here/$exe" --data "$here/tiny.tokens.bin" --steps 50 --lr 3e-3 --warmup 5 \
      --schedule constant --grad-clip 1 --weight-decay 0.1 --no-decay 'bias|ln_|norm' \
      --metrics "$work/$name.jsonl" --dump-params "$work/$name.safetensors" \
      "$@" > "$work/$name.log" 2>&1
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "--- $name exited $rc; its last lines:"
    tail -n 8 "$work/$name.log"
  fi
  return $rc
}

# pair NAME EXECUTABLE [FLAGS...]: the resident and the offloaded run with
# FLAGS, then the loss-curve and parameter checks.
pair() {
  local name=$1 exe=$2
  shift 2
  if ! train "$name-resident" "$exe" "$@"; then
    fail "$name" "the resident run failed (see above, $work/$name-resident.log)"; return
  fi
  if ! train "$name-offloaded" "$exe" "$@" --offload optimizer; then
    fail "$name" "the offloaded run failed (see above, $work/$name-offloaded.log)"; return
  fi
  grep -m1 '^offload optimizer:' "$work/$name-offloaded.log" || \
    fail "$name-banner" "the offloaded run did not print what lives where"
  check "$name-loss-1e-6" python3 "$here/compare.py" curves \
      "$work/$name-resident.jsonl" "$work/$name-offloaded.jsonl" 1e-6
  check "$name-params-bitwise" python3 "$here/compare.py" params \
      "$work/$name-resident.safetensors" "$work/$name-offloaded.safetensors"
  python3 "$here/compare.py" speed "$work/$name-resident.jsonl" "$work/$name-offloaded.jsonl" || true
}

echo "=== 2. tiny models, resident vs --offload optimizer, 50 steps ==="
gpt2w=(--weights "$here/gpt2-tiny-bf16-train.weights.safetensors")
pair gpt2-tiny-bf16 gpt2-tiny-bf16-train "${gpt2w[@]}"
pair llama-tiny-bf16 llama-tiny-bf16-train --weights "$here/llama-tiny-bf16-train.weights.safetensors"
pair gpt2-tiny-bf16-accum2 gpt2-tiny-bf16-train "${gpt2w[@]}" --grad-accum 2
pair gpt2-tiny-bf16-eager gpt2-tiny-bf16-train "${gpt2w[@]}" --cuda-graphs off
# fp16 from a loss scale that overflows: the first steps are skipped alike.
pair gpt2-tiny-fp16 gpt2-tiny-fp16-train "${gpt2w[@]}" --loss-scale-init 1e9
if grep -q '"skipped":true' "$work/gpt2-tiny-fp16-offloaded.jsonl" 2>/dev/null; then
  pass gpt2-tiny-fp16-skips "the offloaded run skipped overflowed steps"
else
  fail gpt2-tiny-fp16-skips "no step of the fp16 run was skipped: the skip path went unchecked"
fi
# fp32: every weight read as its master, so the GPU's f32 mirror is all.
pair gpt2-tiny-fp32 gpt2-tiny-fp32-train "${gpt2w[@]}"

# Stopped at 25 and resumed: checkpoints hold the host's masters and moments.
rm -rf "$work/resume-ckpt"
if train gpt2-tiny-resume-a gpt2-tiny-bf16-train "${gpt2w[@]}" --offload optimizer \
      --steps 25 --checkpoint-dir "$work/resume-ckpt" \
   && train gpt2-tiny-resume-b gpt2-tiny-bf16-train "${gpt2w[@]}" --offload optimizer \
      --checkpoint-dir "$work/resume-ckpt" --resume; then
  check gpt2-tiny-resume-params-bitwise python3 "$here/compare.py" params \
      "$work/gpt2-tiny-bf16-offloaded.safetensors" "$work/gpt2-tiny-resume-b.safetensors"
else
  fail gpt2-tiny-resume "a run stopped at 25 or its resume failed (see above)"
fi

# Refused, naming the flag, with the usage exit code.
"$here/gpt2-tiny-bf16-train" --data "$here/tiny.tokens.bin" "${gpt2w[@]}" --offload optimizer \
    --zero 1 --steps 1 > "$work/refusal.log" 2>&1
rc=$?
if [[ $rc -eq 2 ]] && grep -q -- '--offload optimizer: --zero 1' "$work/refusal.log"; then
  pass offload-refuses-zero "$(tail -n 1 "$work/refusal.log")"
else
  fail offload-refuses-zero "exit $rc: $(tail -n 2 "$work/refusal.log" | tr '\n' ' ')"
fi

echo "=== 3. step time of offload ==="
if [[ -x "$here/gpt2-124m-bf16-train" ]]; then
  # --deterministic on: cuDNN's attention backward with a fixed reduction
  # order, so that the resident step repeats its bits and the offloaded
  # curve can be held to 1e-6 (the twice-run gap below shows it is 0).
  big=(--data "$here/gpt2-124m.tokens.bin" --init random --steps 50 --lr 6e-4 --warmup 5
       --grad-clip 1 --no-shuffle --deterministic on)
  # Twice resident: the step's own run-to-run gap (see curves-against).
  for mode in resident resident-again offloaded; do
    extra=()
    [[ $mode == offloaded ]] && extra=(--offload optimizer)
    rm -f "$work/gpt2-124m-$mode".*
    if ! "$here/gpt2-124m-bf16-train" "${big[@]}" "${extra[@]}" \
        --metrics "$work/gpt2-124m-$mode.jsonl" > "$work/gpt2-124m-$mode.log" 2>&1; then
      echo "--- gpt2-124m $mode failed; its last lines:"
      tail -n 8 "$work/gpt2-124m-$mode.log"
    fi
  done
  grep -m1 '^offload optimizer:' "$work/gpt2-124m-offloaded.log" || true
  # The host AdamW rate and the PCIe rates (for the cluster file).
  grep -m1 '^offload optimizer, ' "$work/gpt2-124m-offloaded.log" || true
  if [[ -s "$work/gpt2-124m-resident.jsonl" && -s "$work/gpt2-124m-offloaded.jsonl" ]]; then
    check gpt2-124m-loss python3 "$here/compare.py" curves-against \
        "$work/gpt2-124m-resident.jsonl" "$work/gpt2-124m-offloaded.jsonl" \
        "$work/gpt2-124m-resident-again.jsonl" 1e-6
    echo "GPT-2 124M (bf16, 16 x 1024, $nproc_here host cores):"
    python3 "$here/compare.py" speed "$work/gpt2-124m-resident.jsonl" "$work/gpt2-124m-offloaded.jsonl" \
      || fail gpt2-124m-speed "could not time the runs"
  else
    fail gpt2-124m "a run failed (see above, $work/gpt2-124m-*.log)"
  fi
else
  echo "(no GPT-2 124M executable: the step time above is gpt2-tiny's)"
fi

echo "=== summary ==="
if [[ ${#failed[@]} -eq 0 ]]; then
  echo "ALL PASS"
  exit 0
fi
echo "FAILED: ${failed[*]} (logs in $work)"
exit 1
RUN
chmod +x "$out/run.sh"
du -sh "$out"
echo "run there: run(command=\"bash $out/run.sh\", carry=[\"${out#$repo/}\"])"
