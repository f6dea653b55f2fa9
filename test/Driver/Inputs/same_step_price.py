"""Compares the step time the mesh search prices a plan at (`tesserac --mesh
M --explain`: the "Plan time per step" table's step row) with the one the
pipeline search prices a plan at (`tesserac --explain --pipeline`: the
"Predicted step time by part" table's step row).

    python3 same_step_price.py MESH_EXPLAIN PIPELINE_EXPLAIN TOLERANCE

prints `within TOLERANCE: mesh A ms, pipeline B ms` when |A - B| <= TOLERANCE
* max(A, B), else `apart: ...` (or what is missing).
"""

import re
import sys


def step_after(text, header):
    start = text.find(header)
    if start < 0:
        return None
    found = re.search(r"^\s+step\s+([0-9.]+)", text[start:], re.M)
    return float(found.group(1)) if found else None


def main():
    with open(sys.argv[1]) as mesh_file, open(sys.argv[2]) as pipeline_file:
        mesh = step_after(mesh_file.read(), "Plan time per step")
        pipeline = step_after(pipeline_file.read(), "Predicted step time by part")
    tolerance = float(sys.argv[3])
    if mesh is None or pipeline is None:
        print(f"missing: mesh {mesh}, pipeline {pipeline}")
        return 1
    verdict = "within" if abs(mesh - pipeline) <= tolerance * max(mesh, pipeline) else "apart"
    print(f"{verdict} {tolerance}: mesh {mesh} ms, pipeline {pipeline} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
