#!/usr/bin/env python3
"""Writes every initializer of an ONNX model (external data included) into one
safetensors file keyed by the initializer name: the --weights file of a
training executable compiled from that model with `tesserac --without-weights`.

  python3 onnx_to_safetensors.py MODEL.onnx OUT.safetensors [NAMES.txt]

NAMES.txt (one name a line: the program's parameters and buffers) keeps only
those initializers, and every one of them must be present.

Needs only `onnx` and `numpy` (both on the GPU machine); the safetensors format
(an 8-byte little-endian header length, a JSON header, raw little-endian data)
is written directly so no other package is needed.
"""
import json, struct, sys
import numpy as np
import onnx
from onnx import numpy_helper

DTYPES = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64",
          np.dtype("int32"): "I32", np.dtype("bool"): "BOOL", np.dtype("float64"): "F64",
          np.dtype("int8"): "I8", np.dtype("int16"): "I16"}

def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    model = onnx.load(sys.argv[1], load_external_data=True)
    wanted = None
    if len(sys.argv) == 4:
        wanted = [line.strip() for line in open(sys.argv[3]) if line.strip()]
        missing = sorted(set(wanted) - {i.name for i in model.graph.initializer})
        if missing:
            sys.exit(f"{sys.argv[1]}: no initializer for {', '.join(missing[:5])}")
    tensors = []
    for init in model.graph.initializer:
        if wanted is not None and init.name not in wanted:
            continue
        array = np.ascontiguousarray(numpy_helper.to_array(init))
        if array.dtype not in DTYPES:
            sys.exit(f"{sys.argv[1]}: initializer {init.name} has unsupported dtype {array.dtype}")
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        tensors.append((init.name, DTYPES[array.dtype], list(array.shape), data))
    write_safetensors(sys.argv[2], tensors)

def write_safetensors(path, tensors):
    """Writes (name, dtype name, shape, little-endian bytes) tuples as one
    safetensors file; also what bench/llama/random_weights.py writes with."""
    header, offset = {}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for _, _, _, data in tensors:
            out.write(data)
    print(f"{path}: {len(header)} tensors, {offset / 2**20:.1f} MiB")

if __name__ == "__main__":
    main()
