#!/usr/bin/env bash
# The CPU-machine half of the Llama-family benchmark (issue 21 item 7):
# compiles the training executables of Llama-family shapes in bf16 for the
# GPU from graph-only exports and gathers what the GPU machine needs into
# bench/llama/out (ignored by git):
#   bash bench/llama/build.sh [BUILD_DIR]          # default build/
#   run(command="bash bench/llama/run.sh", carry=["bench/llama/out"])
# The graphs come from ../shared/tools/export_hf.py --meta (no weights); a
# graph not yet in $TESSERA_LLAMA_MODELS (default bench/llama/models, ignored
# by git) is exported first with $TESSERA_EXPORT_PYTHON, a Python that has
# torch, transformers and onnxscript (test/models/README.md says how to make
# one). The executables are built --without-weights; run.sh writes random
# weights for them on the GPU machine. Each compile's seconds are printed:
# the compile-time target is part of the benchmark.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
shared="${TESSERA_SHARED:-$root/../shared}"
models="${TESSERA_LLAMA_MODELS:-$root/bench/llama/models}"
python="${TESSERA_EXPORT_PYTHON:-python3}"
out="$root/bench/llama/out"
tesserac="$build/bin/tesserac"
[[ -x "$tesserac" ]] || { echo "build.sh: $tesserac not found: build first (scripts/test.sh)" >&2; exit 1; }
for f in "$shared/bench/torch_llama_baseline.py" "$shared/tools/export_hf.py"; do
  [[ -f "$f" ]] || { echo "build.sh: $f not found (set TESSERA_SHARED)" >&2; exit 1; }
done
mkdir -p "$models"
rm -rf "$out" && mkdir -p "$out/peer"
# name batch seq: the shapes the benchmark runs (run.sh has their peers).
# llama3-8b-l4: Llama 3 8B's layer (d=4096, head dim 128, GQA 32/8, SwiGLU
# 14336, untied) four times, the shape the 8B model runs at that fits.
# qwen2.5-0.5b: Qwen2.5 0.5B (d=896, GQA 14/2, q/k/v biases, vocabulary
# 151,936, tied): widths that are not powers of two (bench/llama/export_shape.py).
specs=("llama3.2-1b 8 2048" "llama3-8b-l4 2 4096" "qwen2.5-0.5b 8 2048")
for spec in "${specs[@]}"; do
  read -r name batch seq <<< "$spec"
  model="$models/$name.meta.dyn.onnx"
  if [[ ! -f "$model" ]]; then
    echo "== export $name (graph only) with $python"
    if [[ "$name" != llama3.2-1b ]]; then
      "$python" "$root/bench/llama/export_shape.py" "$shared/tools" "$models" "$name"
    else
      "$python" "$shared/tools/export_hf.py" --model "$name" --meta --out "$models"
    fi
  fi
  flags=(--dim batch="$batch" --dim seq="$seq" --loss causal-lm --precision bf16)
  echo "== tesserac $name (${flags[*]}, --target cuda)"
  start=$(date +%s%N)
  "$tesserac" "$model" "${flags[@]}" --target cuda --without-weights -o "$out/$name-train"
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '   compile: %d.%03d s\n' $((elapsed / 1000)) $((elapsed % 1000)) | tee "$out/$name.compile-seconds.txt"
  # The same program with selective recomputation (each layer's cheap
  # outputs recomputed in the backward), for the memory/speed trade, and
  # with the loss head in blocks of up to 2 GiB of logits instead of 1 (half
  # as many, taller head GEMMs, for about 1 GiB more at the peak), and with
  # gate/up packing (below); for the 1B shape only (the carry to the GPU machine is 64 MiB).
  if [[ "$name" == llama3.2-1b ]]; then
    "$tesserac" "$model" "${flags[@]}" --remat selective --target cuda --without-weights \
        -o "$out/$name-remat-selective-train"
    "$tesserac" "$model" "${flags[@]}" --logits-block 2GiB --target cuda --without-weights \
        -o "$out/$name-logits-block-2gib-train"
    "$tesserac" "$model" "${flags[@]}" --logits-block 2GiB --summary \
        > "$out/$name-logits-block-2gib.summary.txt"
    # SwiGLU's gate and up projections as one GEMM of the concatenated
    # weights (tess-pack-gate-up-projections), timed against the default.
    "$tesserac" "$model" "${flags[@]}" --pack-gate-up on --target cuda --without-weights \
        -o "$out/$name-pack-gate-up-train"
    "$tesserac" "$model" "${flags[@]}" --pack-gate-up on --summary \
        > "$out/$name-pack-gate-up.summary.txt"
  fi
  "$tesserac" "$model" "${flags[@]}" --summary > "$out/$name.summary.txt"
  # The program's parameters and buffers with their shapes ("name d0 d1 ..."),
  # from which run.sh writes the --weights file.
  "$tesserac" "$model" "${flags[@]}" --emit=cpp \
    | sed -n '/^static const tessera_tensor_info tessera_\(parameters\|buffers\)/,/^};/p' \
    | sed -n 's/^ *{"\([^"]*\)", [A-Z0-9_]*, [0-9]*, {\([0-9, ]*\)}}.*/\1 \2/p' | tr -d ',' \
    > "$out/$name.tensors.txt"
done
# The loss-curve model (8 layers, d=1024, GQA 16/4, vocabulary 32,000):
# run.sh exports it with weights there and trains 50 steps beside PyTorch.
curve=llama-8x1024
model="$models/$curve.meta.dyn.onnx"
[[ -f "$model" ]] || "$python" "$shared/tools/export_hf.py" --model "$curve" --meta --out "$models"
curve_flags=(--dim batch=8 --dim seq=1024 --loss causal-lm --precision bf16)
echo "== tesserac $curve (${curve_flags[*]}, --target cuda)"
"$tesserac" "$model" "${curve_flags[@]}" --target cuda --without-weights -o "$out/$curve-train"
"$tesserac" "$model" "${curve_flags[@]}" --emit=cpp \
  | sed -n '/^static const tessera_tensor_info tessera_\(parameters\|buffers\)/,/^};/p' \
  | grep -o '{"[^"]*"' | cut -c3- | tr -d '"' > "$out/$curve.tensors.txt"
cp "$root/bench/gpt2/onnx_to_safetensors.py" "$root/bench/gpt2/make_tokens.py" \
   "$root/bench/gpt2/torch_curve.py" "$root/bench/gpt2/compare_curves.py" "$out/"

# Llama 3 8B at 2 x 4096, compiled as the planner plans it for one H200
# (--cluster h200: its training state fits only with full recomputation):
# the compile time of a deep program. With LLAMA_8B=1 the executable is
# kept for run-8b.sh, beside the 16 x 4096 one whose plan also offloads the
# optimizer state (it fits an H200 only so); otherwise it is removed (the
# folder stays under the device tool's 64 MiB carry).
model="$models/llama3-8b.meta.dyn.onnx"
[[ -f "$model" ]] || "$python" "$root/bench/llama/export_shape.py" "$shared/tools" "$models" llama3-8b
flags_8b=(--dim seq=4096 --loss causal-lm --precision bf16 --cluster h200 --target cuda --without-weights)
echo "== tesserac llama3-8b (batch 2 x 4096, bf16, --cluster h200, --target cuda)"
start=$(date +%s%N)
"$tesserac" "$model" --dim batch=2 "${flags_8b[@]}" -o "$out/llama3-8b-train"
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
printf '   compile: %d.%03d s\n' $((elapsed / 1000)) $((elapsed % 1000)) | tee "$out/llama3-8b.compile-seconds.txt"
if [[ "${LLAMA_8B:-0}" == 1 ]]; then
  echo "== tesserac llama3-8b (batch 16 x 4096: remat full + the optimizer offloaded)"
  "$tesserac" "$model" --dim batch=16 "${flags_8b[@]}" -o "$out/llama3-8b-b16-offload-train"
  cp "$root/bench/llama/run-8b.sh" "$out/"
else
  rm -f "$out/llama3-8b-train"
fi
cp "$shared/bench/torch_llama_baseline.py" "$shared/tools/export_hf.py" "$out/peer/"
cp "$root/bench/llama/"*.py "$root/bench/profile/summarize_trace.py" "$out/"
ls -la "$out"
