#!/usr/bin/env python3
"""Writes the fuzz targets' seeds (seeds/<target>/): small valid files of
each format, each accepted by its target (FuzzSeedsTest checks that they
stay so). Standard library only; run it again after changing a format or
the checkpoint target's program (FuzzCheckpoint.cpp), and commit the output.

    runtime/fuzz/make-seeds.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(kind, name, data):
    directory = os.path.join(HERE, "seeds", kind)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as out:
        out.write(data)


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)], laid out in order."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def bf16(*values):
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def npy(descr, shape, values, major=1):
    shape_text = "(" + "".join("%d, " % s if len(shape) == 1 or i + 1 < len(shape)
                               else "%d" % s for i, s in enumerate(shape)) + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (
        descr, shape_text)
    prefix = 10 if major == 1 else 12
    header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    length = (struct.pack("<H", len(header)) if major == 1
              else struct.pack("<I", len(header)))
    code = {"<i4": "i", "<i8": "q"}[descr]
    return (b"\x93NUMPY" + bytes([major, 0]) + length + header.encode() +
            struct.pack("<%d%s" % (len(values), code), *values))


def shard(tokens, announced=None):
    header = [0] * 256
    header[0], header[1] = 20240520, 1
    header[2] = len(tokens) if announced is None else announced
    return (struct.pack("<256i", *header) +
            struct.pack("<%dH" % len(tokens), *tokens))


# --- safetensors: every dtype the reader knows, metadata, empty tensors.
write("safetensors", "dtypes.safetensors", safetensors(
    [("w", "F32", [2, 3], f32(1, -2, 0.5, 3, 4, -0.25)),
     ("h", "BF16", [3], bf16(1, 2, -3)),
     ("f", "F16", [2], struct.pack("<2H", 0x3C00, 0xC000)),
     ("d", "F64", [], struct.pack("<d", 2.5)),
     ("i", "I64", [2], struct.pack("<2q", -1, 7)),
     ("j", "I32", [1, 2], struct.pack("<2i", 3, -4)),
     ("k", "I16", [1], struct.pack("<h", 9)),
     ("b", "I8", [2], struct.pack("<2b", -8, 8)),
     ("m", "BOOL", [3], bytes([1, 0, 1])),
     ("e", "F32", [0, 4], b"")],
    {"format": "pt", "model": "seed", "step": "3"}))
write("safetensors", "empty.safetensors", safetensors([]))

# --- checkpoints of FuzzCheckpoint.cpp's program.
weight, bias, ids = [2, 3], [3], [4]
full_metadata = {
    "format": "tessera-checkpoint-1", "model": "fuzz-checkpoint",
    "step": "12", "optimizer_step": "11", "seed": "1234",
    "data_position": "48", "loss_scale": "0x1p+15", "clean_steps": "5",
    "overflow_streak": "1", "learning_rate_factor": "0x1p-1",
    "gradient_spikes": "2", "recent_grad_norms": "0x1.8p+0,0x1p-1,0x1.4p+1",
    "run": "00c0ffee00c0ffee"}
write("checkpoint", "f32.safetensors", safetensors(
    [("layer.weight", "F32", weight, f32(0.1, -0.2, 0.3, -0.4, 0.5, -0.6)),
     ("layer.bias", "F32", bias, f32(0.01, 0.02, 0.03)),
     ("position_ids", "I64", ids, struct.pack("<4q", 0, 1, 2, 3)),
     ("optimizer.m.layer.weight", "F32", weight, f32(1e-3, 0, 0, 0, 0, -1e-3)),
     ("optimizer.v.layer.weight", "F32", weight, f32(1e-6, 0, 0, 0, 0, 1e-6)),
     ("optimizer.m.layer.bias", "F32", bias, f32(0, 0, 1e-4)),
     ("optimizer.v.layer.bias", "F32", bias, f32(0, 0, 1e-8))],
    full_metadata))
# An earlier driver's checkpoint: only the keys it wrote, bf16 weights and
# an i32 buffer (both converted on load).
early_metadata = {key: full_metadata[key] for key in (
    "format", "model", "step", "optimizer_step", "seed", "data_position",
    "loss_scale", "clean_steps")}
write("checkpoint", "bf16-early.safetensors", safetensors(
    [("layer.weight", "BF16", weight, bf16(0.5, -1, 2, 0, 0.25, 4)),
     ("layer.bias", "BF16", bias, bf16(1, 0, -1)),
     ("position_ids", "I32", ids, struct.pack("<4i", 3, 2, 1, 0)),
     ("optimizer.m.layer.weight", "BF16", weight, bf16(0, 0, 0, 0, 0, 0)),
     ("optimizer.v.layer.weight", "BF16", weight, bf16(0, 0, 0, 0, 0, 0)),
     ("optimizer.m.layer.bias", "F32", bias, f32(0, 0, 0)),
     ("optimizer.v.layer.bias", "F32", bias, f32(0, 0, 0))],
    early_metadata))

# --- .npy: the causal and MLM row shapes, int32 and int64, formats 1 and 2.
write("npy", "causal-i32.npy", npy("<i4", [3, 4], list(range(12))))
write("npy", "causal-i64-v2.npy",
      npy("<i8", [2, 4], [50256, 1, 2, 3, 4, 5, 6, 7], major=2))
write("npy", "mlm-i64.npy", npy("<i8", [2, 2, 3],
                                [5, 6, 7, -100, 6, -100, 1, 2, 3, 9, -100, 3]))

# --- token shards: enough tokens for two micro-batches of 2 x 3 (+1).
write("token-shard", "two-chunks.bin", shard([(7 * i) % 50257 for i in range(14)]))
write("token-shard", "tail.bin", shard([1, 2, 3, 4, 5, 6, 7, 8, 9]))
