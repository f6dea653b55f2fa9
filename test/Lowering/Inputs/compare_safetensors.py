"""Compares the f32 tensors of two safetensors files within a tolerance.

Usage: compare_safetensors.py A.safetensors B.safetensors RELATIVE

Per tensor, max |a - b| over max |a| must be at most RELATIVE (a tensor's
scale, so that an element near zero does not count as a large relative
change). Prints the largest such ratio.
"""
import array
import json
import struct
import sys


def read(path):
    with open(path, "rb") as file:
        size = struct.unpack("<Q", file.read(8))[0]
        header = json.loads(file.read(size))
        data = file.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            sys.exit(f"{path}: {name} is {info['dtype']}, not F32")
        begin, end = info["data_offsets"]
        values = array.array("f")
        values.frombytes(data[begin:end])
        tensors[name] = values
    return tensors


def main():
    a, b, tolerance = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
    if sorted(a) != sorted(b):
        sys.exit("the files hold different tensors")
    worst, where = 0.0, None
    for name in sorted(a):
        scale = max(abs(x) for x in a[name]) or 1.0
        difference = max(abs(x - y) for x, y in zip(a[name], b[name]))
        if difference / scale > worst:
            worst, where = difference / scale, name
    print(f"largest relative difference {worst:.3g} ({where})")
    sys.exit(0 if worst <= tolerance else 1)


main()
