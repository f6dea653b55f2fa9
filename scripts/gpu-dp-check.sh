#!/usr/bin/env bash
# Data parallelism of the --target cuda executables (issues 4 and 23): on one
# GPU, 4 data-parallel ranks as threads sharing it (--thread-ranks 4) with
# ZeRO 0 to 3; on 2 GPUs, launched ranks over NCCL against one GPU.
#
#   scripts/gpu-dp-check.sh prepare [BUILD_DIR] [OUT_DIR]
#       (defaults: build-gpu, BUILD_DIR/gpu-dp-check) on the CPU machine:
#       compiles gpt2-tiny (B = 2, T = 31) in fp32 and bf16, and llama-tiny
#       and gpt2-tiny (B = 2, T = 16) in fp32 and bf16 for the thread ranks,
#       with BUILD_DIR/bin/tesserac, writes a token shard, copies this script,
#       the test data and checkers; the executables are packed with xz (the
#       folder stays under the device tool's 64 MiB carry; the run unpacks
#       them);
#   then on the GPU machine, through the device tool:
#       run(command="bash <OUT_DIR>/gpu-dp-check.sh run one-gpu",
#           carry=["<OUT_DIR>"])                      (the one-GPU section)
#       run(command="bash <OUT_DIR>/gpu-dp-check.sh run", carry=["<OUT_DIR>"],
#           kind="nvidia-h200-x2")                    (both sections)
#   (`run` on one GPU runs the one-GPU section and says the other needs 2.)
#
# One GPU (ZeRO on thread ranks, issue 23's done-when; the same runs as
# test/Lowering/train-zero*-thread-ranks.test on the CPU): for llama-tiny and
# gpt2-tiny in bf16 and fp32, 3 steps at --lr 1e-2 on 4 thread ranks with
# --zero 0, 1, 2 and 3 (2 and 3 with --bucket-mb 0.005: many buckets, rings
# of them); each ZeRO stage's parameters must equal --zero 0's bit for bit
# (--zero 0 is run twice to tell a step that does not repeat its own bits
# from a ZeRO difference), and each rank's resident training state, printed
# per rank, must hold 1/4 of the whole for the sharded kinds within the
# padding (test/Lowering/Inputs/zero_resident.py). For llama-tiny bf16 also
# two micro-batches a step (ZeRO-3 equal to ZeRO-2 bit for bit, to ZeRO-0
# within 1e-6) and a ZeRO-3 checkpoint at step 2 resumed to step 3 (equal to
# the straight run bit for bit).
#
# Two GPUs: a 2-GPU run with B rows per GPU must follow the 1-GPU run that
# reads the same tokens a step, i.e. the same executable with --grad-accum 2
# (a rank's micro-batch k is the global micro-batch 2k + r:
# runtime/train/DataLoader.h).
# The run trains 10 steps each way and prints a loss table per precision:
#   1 GPU --grad-accum 2 | --nproc 2 (one micro-batch a rank: buckets reduced
#   during the backward pass) | --nproc 2 --zero 1 | --nproc 2 --zero 3 (the
#   weights all-gathered per bucket as the step reads them) | torchrun variables
# and for fp32 also 1 GPU --grad-accum 4 vs --nproc 2 --grad-accum 2 (the f32
# accumulators reduced after the last micro-batch), and a ZeRO-1 run stopped
# at a checkpoint at step 5 and resumed (its steps 6..10 must be the straight
# run's, bit for bit), and each ZeRO-1 rank's resident masters and moments
# (printed per rank) must be half the unsharded run's within the padding, and
# each ZeRO-3 rank's compute weights half of those the step reads.
# Tolerances, relative: fp32 1e-5; bf16 2^-8, its epsilon (NCCL sums bf16
# gradients in bf16, the 1-GPU run accumulates them in f32). Exit 0 when all
# agree. NCCL_NVLS_ENABLE=0.
# Measured on 2 H200s (2026-11-30): fp32 equal to the last printed digit,
# bf16 within 3.6e-5 relative over 10 steps.
set -uo pipefail

mode="${1:-}"
case "$mode" in
prepare)
  set -e
  repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  build="${2:-$repo/build-gpu}"
  out="${3:-$build/gpu-dp-check}"
  rm -rf "$out" && mkdir -p "$out"
  for precision in fp32 bf16; do
    "$build/bin/tesserac" "$repo/test/models/gpt2-tiny.raw.dyn.onnx" \
        --dim batch=2 --dim seq=31 --loss causal-lm --precision "$precision" \
        --target cuda -o "$out/gpt2-tiny-$precision-train"
  done
  # The thread ranks' programs, as the CPU tests compile them; every
  # precision starts from the fp32 one's weights file. (TARGET=cpu builds
  # them for the host: the one-GPU section's logic, tried on the CPU.)
  for model in llama-tiny gpt2-tiny; do
    for precision in fp32 bf16; do
      "$build/bin/tesserac" "$repo/test/models/$model.raw.dyn.onnx" \
          --dim batch=2 --dim seq=16 --loss causal-lm --precision "$precision" \
          --target "${TARGET:-cuda}" -o "$out/$model-$precision-threads-train"
    done
    rm "$out/$model-bf16-threads-train.weights.safetensors"
  done
  cp "$repo/test/data/pattern.bin" "$repo/test/Lowering/Inputs/zero_resident.py" \
     "$repo/test/Lowering/Inputs/compare_safetensors.py" "$out/"
  # The device-staged comms' GPU tests (among them the thread ranks'
  # reducer on comm streams), when BUILD_DIR has them.
  for dir in "$build/bin" "$build/comm"; do
    if [[ -x "$dir/tessera_runtime_comm_gpu_tests" ]]; then
      cp "$dir/tessera_runtime_comm_gpu_tests" "$out/"
      break
    fi
  done
  # An llm.c token shard of random ids below gpt2-tiny's 512: 200 chunks of
  # 2 x 31 (+1) tokens, so the seeded shuffle has something to permute.
  python3 - "$out/tokens.bin" <<'PY'
import random, struct, sys
count = 200 * 62 + 1
random.seed(4)
header = struct.pack("<256i", 20240520, 1, count, *([0] * 253))
tokens = struct.pack("<%dH" % count, *(random.randrange(512) for _ in range(count)))
open(sys.argv[1], "wb").write(header + tokens)
PY
  cp "${BASH_SOURCE[0]}" "$out/gpu-dp-check.sh"
  # Each executable links the CUDA runtime statically (about 10 MB, 2.5
  # packed).
  xz -T2 "$out"/*-train
  [[ -e "$out/tessera_runtime_comm_gpu_tests" ]] && xz -T2 "$out/tessera_runtime_comm_gpu_tests"
  du -sh "$out"
  exit 0
  ;;
run) ;;
*)
  echo "usage: $0 prepare [BUILD_DIR] [OUT_DIR] | run [one-gpu]" >&2
  exit 2
  ;;
esac
part="${2:-all}"
if [[ "$part" != all && "$part" != one-gpu ]]; then
  echo "usage: $0 run [one-gpu]" >&2
  exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-$here/out}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
nvidia-smi -L 2>/dev/null || echo "gpu-dp-check: warning: nvidia-smi sees no GPU" >&2

# The executables, unpacked (prepare packed them with xz; Python's lzma
# needs no xz on this machine).
bin="$(mktemp -d "${TMPDIR:-/tmp}/gpu-dp-check.XXXXXX")"
for packed in "$here"/*.xz; do
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      "$packed" "$bin/$(basename "$packed" .xz)" || exit 2
  chmod +x "$bin/$(basename "$packed" .xz)"
done

# The executables need cuBLASLt and NCCL; find them where the loader does not.
missing="$(ldd "$bin/gpt2-tiny-fp32-train" | grep 'not found' || true)"
if [[ -n "$missing" ]]; then
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("cu13", "cublas", "nccl", "cudnn")))' 2>/dev/null || true); do
    [[ -d "$dir" ]] && export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
  ldd "$bin/gpt2-tiny-fp32-train" | grep 'not found' && exit 2
fi

status=0

# --- One GPU: 4 data-parallel thread ranks, ZeRO 0 to 3 ---
# threads NAME MODEL PRECISION ARGS...: MODEL's executable on 4 thread ranks
# with the CPU tests' flags and ARGS, its parameters in $out/NAME.safetensors.
threads() {
  local name="$1" model="$2" precision="$3"
  shift 3
  rm -f "$out/$name.log" "$out/$name.safetensors"
  local started=$SECONDS
  if ! timeout 300 "$bin/$model-$precision-threads-train" --data "$here/pattern.bin" \
       --weights "$here/$model-fp32-threads-train.weights.safetensors" \
       --lr 1e-2 --thread-ranks 4 --comm-timeout 120 \
       --dump-params "$out/$name.safetensors" "$@" > "$out/$name.log" 2>&1; then
    echo "--- $name FAILED:"; tail -n 20 "$out/$name.log"; status=1
  fi
  echo "$name: $((SECONDS - started)) s"
}
# same_params A B: B's parameters are A's bit for bit; else how far apart.
same_params() {
  if cmp -s "$out/$1.safetensors" "$out/$2.safetensors"; then
    echo "$2: the parameters of $1 bit for bit"
  else
    echo "$2: the parameters DIFFER from $1's:"
    python3 "$here/compare_safetensors.py" "$out/$1.safetensors" "$out/$2.safetensors" 1e-6
    status=1
  fi
}
# resident WHOLE SHARDED [PADDING] [--tied-gradient-ring]: each rank of
# SHARDED holds 1/4 of WHOLE's sharded kinds (zero_resident.py).
resident() {
  local whole="$1" sharded="$2"
  shift 2
  grep -h "^rank [0-9]*: \(resident training state\|weight ring\)" "$out/$sharded.log" | sort
  if python3 "$here/zero_resident.py" "$out/$whole.log" "$out/$sharded.log" 4 "$@"; then
    echo "$sharded: each rank holds its quarter"
  else
    echo "$sharded: the ranks do NOT hold a quarter each"
    status=1
  fi
}

for model in llama-tiny gpt2-tiny; do
  # GPT-2's tied embedding: buckets of both weight kinds sit in both kinds'
  # shards (5 %), and ZeRO-2's ring holds every bucket.
  tied=()
  [[ "$model" == gpt2-tiny ]] && tied=(0.05 --tied-gradient-ring)
  for precision in bf16 fp32; do
    run="$model-$precision"
    echo "=== $run: 3 steps, --thread-ranks 4 on one GPU, --zero 0/1/2/3 ==="
    threads "$run-zero0" "$model" "$precision" --steps 3 --zero 0
    threads "$run-zero0-again" "$model" "$precision" --steps 3 --zero 0
    threads "$run-zero1" "$model" "$precision" --steps 3 --zero 1
    threads "$run-zero2" "$model" "$precision" --steps 3 --zero 2 --bucket-mb 0.005
    threads "$run-zero3" "$model" "$precision" --steps 3 --zero 3 --bucket-mb 0.005
    grep -h "^step     3/3" "$out/$run-zero0.log"
    same_params "$run-zero0" "$run-zero0-again"
    for zero in 1 2 3; do
      same_params "$run-zero0" "$run-zero$zero"
    done
    resident "$run-zero0" "$run-zero1"
    resident "$run-zero0" "$run-zero2" "${tied[@]}"
    resident "$run-zero0" "$run-zero3" "${tied[@]}"
  done
done
echo "=== llama-tiny bf16: 2 micro-batches a step; ZeRO-3 checkpoint and resume ==="
threads accum-zero0 llama-tiny bf16 --steps 3 --grad-accum 2 --zero 0
threads accum-zero2 llama-tiny bf16 --steps 3 --grad-accum 2 --zero 2 --bucket-mb 0.005
threads accum-zero3 llama-tiny bf16 --steps 3 --grad-accum 2 --zero 3 --bucket-mb 0.005
same_params accum-zero2 accum-zero3
# ZeRO-2/3 sum the ranks before the micro-batches, ZeRO-0 after.
python3 "$here/compare_safetensors.py" "$out/accum-zero0.safetensors" \
    "$out/accum-zero3.safetensors" 1e-6 || status=1
rm -rf "$out/zero3-ckpt"
threads zero3-first llama-tiny bf16 --steps 2 --zero 3 --bucket-mb 0.005 \
    --checkpoint-dir "$out/zero3-ckpt"
threads zero3-resumed llama-tiny bf16 --steps 3 --zero 3 --bucket-mb 0.005 \
    --checkpoint-dir "$out/zero3-ckpt" --resume
same_params llama-tiny-bf16-zero3 zero3-resumed
if [[ -x "$bin/tessera_runtime_comm_gpu_tests" ]]; then
  echo "=== the device-staged comms, the thread ranks' reducer on comm streams (GPU tests) ==="
  "$bin/tessera_runtime_comm_gpu_tests" --gtest_filter='DeviceStagedComms.*' > "$out/comm-gpu-tests.log" 2>&1 \
    || status=1
  tail -n 8 "$out/comm-gpu-tests.log"
fi
echo "one GPU, thread ranks: $([[ $status -eq 0 ]] && echo OK || echo FAILED)"

if [[ "$part" == one-gpu ]]; then
  rm -rf "$bin"
  exit $status
fi
if [[ "$gpus" -lt 2 ]]; then
  echo "two GPUs: skipped ($gpus GPU here; run with kind=nvidia-h200-x2)"
  rm -rf "$bin"
  exit $status
fi

# --- Two GPUs: launched ranks over NCCL ---
# train NAME EXECUTABLE ARGS...: one run, its metrics in $out/NAME.jsonl.
train() {
  local name="$1" exe="$2"
  shift 2
  rm -rf "$out/$name.jsonl" "$out/$name.log"
  local started=$SECONDS
  if ! timeout 60 "$exe" --data "$here/tokens.bin" \
       --weights "$here/gpt2-tiny-fp32-train.weights.safetensors" \
       --lr 3e-3 --grad-clip 1 --weight-decay 0.1 --seed 7 --comm-timeout 30 \
       --metrics "$out/$name.jsonl" "$@" > "$out/$name.log" 2>&1; then
    echo "--- $name FAILED:"; tail -n 20 "$out/$name.log"; status=1
  fi
  echo "$name: $((SECONDS - started)) s"
}

# torchrun: the variables a launcher sets, one process per GPU.
torchrun_pair() {
  local name="$1" exe="$2"
  shift 2
  rm -rf "$out/$name.jsonl"
  local port=$((29600 + RANDOM % 1000)) pids=() rank
  for rank in 0 1; do
    RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT=$port timeout 60 "$exe" --data "$here/tokens.bin" \
        --weights "$here/gpt2-tiny-fp32-train.weights.safetensors" \
        --lr 3e-3 --grad-clip 1 --weight-decay 0.1 --seed 7 \
        --metrics "$out/$name.jsonl" --comm-timeout 30 "$@" > "$out/$name.rank$rank.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || { echo "--- $name FAILED:"; tail -n 20 "$out/$name".rank*.log; status=1; }
  done
  # Rank 1 writes nothing but its resident training state (and rings) and errors.
  grep -qvE '^rank 1: (resident training state|gradient ring|weight ring)' "$out/$name.rank1.log" && { echo "--- $name: rank 1 wrote:"; cat "$out/$name.rank1.log"; status=1; }
}

for precision in fp32 bf16; do
  exe="$bin/gpt2-tiny-$precision-train"
  echo "=== gpt2-tiny $precision: 10 steps, 2 x 31 tokens per GPU ==="
  train "$precision-1gpu" "$exe" --steps 10 --grad-accum 2
  train "$precision-dp" "$exe" --steps 10 --nproc 2 --bucket-mb 1
  train "$precision-zero" "$exe" --steps 10 --nproc 2 --zero 1 --bucket-mb 1
  train "$precision-zero3" "$exe" --steps 10 --nproc 2 --zero 3 --bucket-mb 0.01
  torchrun_pair "$precision-torchrun" "$exe" --steps 10
done
exe="$bin/gpt2-tiny-fp32-train"
echo "=== gpt2-tiny fp32: 2 micro-batches per GPU; ZeRO-1 checkpoint and resume ==="
train fp32-1gpu-k4 "$exe" --steps 10 --grad-accum 4
train fp32-dp-k2 "$exe" --steps 10 --nproc 2 --grad-accum 2
rm -rf "$out/ckpt"
train fp32-zero-part1 "$exe" --steps 5 --nproc 2 --zero 1 --bucket-mb 1 --checkpoint-dir "$out/ckpt"
train fp32-zero-part2 "$exe" --steps 10 --nproc 2 --zero 1 --bucket-mb 1 --checkpoint-dir "$out/ckpt" --resume
ls "$out/ckpt"
echo "--- what rank 0 of --nproc 2 printed (fp32):"
cat "$out/fp32-dp.log"

python3 - "$out" <<'PY' || status=1
import json, os, sys
out = sys.argv[1]

def losses(name):
    path = os.path.join(out, name + ".jsonl")
    if not os.path.exists(path):
        return {}
    return {r["step"]: r["loss"] for r in map(json.loads, open(path))}

ok = True
def table(title, names, tolerance):
    global ok
    runs = [losses(n) for n in names]
    print("\n" + title + " (relative tolerance %g vs %s)" % (tolerance, names[0]))
    print("step " + "".join("%16s" % n for n in names))
    for step in range(1, 11):
        row, reference = "%4d " % step, runs[0].get(step)
        for run in runs:
            value = run.get(step)
            bad = value is None or reference is None or \
                abs(value - reference) > tolerance * abs(reference)
            ok &= not bad
            row += "%15s%s" % ("-" if value is None else "%.7f" % value, "!" if bad else " ")
        print(row)

for precision, tolerance in (("fp32", 1e-5), ("bf16", 2.0 ** -8)):
    table("gpt2-tiny " + precision, ["%s-%s" % (precision, k) for k in
          ("1gpu", "dp", "zero", "zero3", "torchrun")], tolerance)
table("gpt2-tiny fp32, 2 micro-batches per GPU", ["fp32-1gpu-k4", "fp32-dp-k2"], 1e-5)
straight, first, resumed = losses("fp32-zero"), losses("fp32-zero-part1"), losses("fp32-zero-part2")
joined = dict(first)
joined.update(resumed)
same = all(s in straight and joined.get(s) == straight[s] for s in range(1, 11))
print("\nZeRO-1 stopped at step 5 and resumed vs straight: %s" %
      ("bit-identical losses" if same else "DIFFER: %s vs %s" % (joined, straight)))
ok &= same

# "rank R: resident training state: N bytes (masters M, moments M2, ...)"
import re
def resident(name):
    text = open(os.path.join(out, name + ".log")).read()
    return {int(r): (int(m), int(v)) for r, m, v in re.findall(
        r"rank (\d+): resident training state: \d+ bytes \(masters (\d+), moments (\d+)", text)}
for precision in ("fp32", "bf16"):
    whole, sharded = resident(precision + "-dp"), resident(precision + "-zero")
    print("\n%s resident masters, moments per rank: --nproc 2 %s, --zero 1 %s" %
          (precision, whole, sharded))
    fits = len(whole) == 2 and len(sharded) == 2 and all(
        masters <= whole[0][0] / 2 + 2 ** 20 and moments == 2 * masters
        for masters, moments in sharded.values())
    print("ZeRO-1 holds half the masters and moments a rank: %s" % ("yes" if fits else "NO"))
    ok &= fits
    # ZeRO-3: the weights the step reads, half of the whole a rank (within
    # the buckets' padding), and gathered into a ring.
    text = open(os.path.join(out, precision + "-zero3.log")).read()
    weights = re.findall(r"copies/mirrors (\d+), .*weight ring (\d+)\)", text)
    read = re.findall(r"the whole weights read (\d+) bytes", text)
    fits3 = bool(weights) and bool(read) and all(
        int(copies) <= int(read[0]) / 2 * 1.06 and int(ring) > 0
        for copies, ring in weights)
    print("ZeRO-3 holds half the compute weights a rank (%s of %s): %s" %
          (weights, read, "yes" if fits3 else "NO"))
    ok &= fits3
print("OK" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
PY
rm -rf "$bin"
exit $status
