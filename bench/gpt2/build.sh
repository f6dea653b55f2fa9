#!/usr/bin/env bash
# The CPU-machine half of the GPT-2 benchmark (issue 4 item 6): compiles the
# training executables of GPT-2 124M (micro-batch 16 x 1024) and 350M (8 x 1024)
# in bf16 for the GPU from the graphs in ../shared/models, and gathers what the
# GPU machine needs into bench/gpt2/out (ignored by git; about 10 MiB):
#   bash bench/gpt2/build.sh [BUILD_DIR]          # default build/
#   run(command="bash bench/gpt2/run.sh", carry=["bench/gpt2/out"], kind="nvidia-h200-x2")
# The graphs here have no weight data (the .onnx.data files are not shipped),
# so the executables are built --without-weights; run.sh exports the same
# models with their weights on the GPU machine (../shared/tools/export_hf.py)
# and starts from those. The PyTorch peer and the exporter travel in out/peer.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
shared="${TESSERA_SHARED:-$root/../shared}"
out="$root/bench/gpt2/out"
tesserac="$build/bin/tesserac"
[[ -x "$tesserac" ]] || { echo "build.sh: $tesserac not found: build first (scripts/test.sh)" >&2; exit 1; }
for f in "$shared/models/gpt2-124m.raw.dyn.onnx" "$shared/models/gpt2-350m.raw.dyn.onnx" \
         "$shared/bench/torch_gpt2_baseline.py" "$shared/tools/export_hf.py"; do
  [[ -f "$f" ]] || { echo "build.sh: $f not found (set TESSERA_SHARED)" >&2; exit 1; }
done
rm -rf "$out" && mkdir -p "$out/peer"
compile() { # name batch
  local name=$1 batch=$2
  echo "== tesserac $name (--dim batch=$batch --dim seq=1024, bf16, --target cuda)"
  /usr/bin/time -f "   %e s, %M KiB" "$tesserac" "$shared/models/$name.raw.dyn.onnx" \
      --dim batch="$batch" --dim seq=1024 --loss causal-lm --precision bf16 \
      --target cuda --without-weights -o "$out/$name-train"
  "$tesserac" "$shared/models/$name.raw.dyn.onnx" --dim batch="$batch" --dim seq=1024 \
      --loss causal-lm --precision bf16 --summary > "$out/$name.summary.txt"
  # The names of the program's parameters and buffers (its tensor tables):
  # the exporter's initializers also hold constants the compiler folded
  # (e.g. transformer.lifted_tensor_0), which the --weights file must not.
  "$tesserac" "$shared/models/$name.raw.dyn.onnx" --dim batch="$batch" --dim seq=1024 \
      --loss causal-lm --precision bf16 --emit=cpp \
    | sed -n '/^static const tessera_tensor_info tessera_\(parameters\|buffers\)/,/^};/p' \
    | grep -o '{"[^"]*"' | cut -c3- | tr -d '"' > "$out/$name.tensors.txt"
}
compile gpt2-124m 16
compile gpt2-350m 8
cp "$shared/bench/torch_gpt2_baseline.py" "$shared/tools/export_hf.py" "$out/peer/"
cp "$root/bench/gpt2/"*.py "$out/"
ls -la "$out"
