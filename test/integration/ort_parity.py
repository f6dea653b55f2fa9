#!/usr/bin/env python3
"""onnxruntime is the oracle for what an ONNX graph means: for every model the importer accepts, the
forward logits of Tessera's CPU backend (tessera-run, fused graph) must equal onnxruntime's on the
same random int64 input within 1e-4 relative (max abs difference / max abs onnxruntime logit).

Models: test/models/*.onnx, test/models/generated/*.onnx, test/models/padding/*.onnx (which also
take an attention_mask, fed with padding: see padding_mask), all but graph-only exports (no weights
to run: llama-tiny.meta.dyn.onnx), and every ../shared/models export whose
weights are inline (the tiny GPT-2 and BERT exports; the large ones point at data files that are
not there, and meta exports have none). Symbolic `batch` and `seq` are bound to 3 and 24, which
differ from the fixtures' [2, 32], so shape handling is exercised too; static inputs keep their shape.

  ort_parity.py --tessera-run build/bin/tessera-run [--source .] [--shared ../shared] [--only SUBSTRING]

Prints a table and exits non-zero when any model differs or fails to run.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
import onnxruntime

TOLERANCE = 1e-4
DYNAMIC_DIMS = {"batch": 3, "seq": 24}
SEED = 1234


def has_inline_weights(path):
    """False for exports whose initializers live in an external-data file (or were never written)."""
    model = onnx.load(path, load_external_data=False)
    return all(init.data_location != onnx.TensorProto.EXTERNAL for init in model.graph.initializer)


def trains_with_dropout(path):
    """True for a graph with training-mode Dropout (test/models/add_dropout.py): its masks come
    from each runtime's own generator, so its outputs are not onnxruntime's."""
    model = onnx.load(path, load_external_data=False)
    modes = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer
             if init.data_location != onnx.TensorProto.EXTERNAL}
    return any(node.op_type == "Dropout" and len(node.input) > 2 and node.input[2] in modes
               and bool(modes[node.input[2]]) for node in model.graph.node)


def models(source, shared):
    paths = sorted(glob.glob(os.path.join(source, "test", "models", "*.onnx")))
    paths += sorted(glob.glob(os.path.join(source, "test", "models", "generated", "*.onnx")))
    paths += sorted(glob.glob(os.path.join(source, "test", "models", "padding", "*.onnx")))
    # A graph-only export (llama-tiny.meta.dyn.onnx) has no weights to run.
    paths = [path for path in paths if has_inline_weights(path) and not trains_with_dropout(path)]
    shared_models = sorted(glob.glob(os.path.join(shared, "models", "*.onnx")))
    if not shared_models:
        print(f"note: no models under {os.path.join(shared, 'models')}", file=sys.stderr)
    paths += [path for path in shared_models if has_inline_weights(path)]
    return paths


def input_shape(session_input):
    """The input's shape with symbolic dims bound; an unknown symbolic dim is an error."""
    shape = []
    for dim in session_input.shape:
        if isinstance(dim, int):
            shape.append(dim)
        elif dim in DYNAMIC_DIMS:
            shape.append(DYNAMIC_DIMS[dim])
        else:
            raise ValueError(f"input '{session_input.name}' has symbolic dim '{dim}' with no binding")
    return shape


def padding_mask(shape):
    """An attention_mask [batch, seq] with the paddings a batch of real sequences has: the first
    row padded on the left, the last on the right, a hole in the middle row (1 keeps a token)."""
    mask = np.ones(shape, dtype=np.int64)
    batch, seq = shape
    mask[0, : seq // 3] = 0
    mask[batch - 1, seq - seq // 4:] = 0
    if batch > 2:
        mask[batch // 2, seq // 2] = 0
    return mask


def compare(path, tessera_run, scratch):
    options = onnxruntime.SessionOptions()
    # The graph as written: no fusions or precision-changing rewrites in the oracle.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    model_input, *other_inputs = session.get_inputs()
    if any(other.name != "attention_mask" for other in other_inputs):
        raise ValueError("inputs other than the token ids and an attention_mask")
    vocabulary = session.get_outputs()[0].shape[-1]
    if not isinstance(vocabulary, int):
        raise ValueError("the logits' last dim (the vocabulary) is not static")
    shape = input_shape(model_input)
    feeds = {model_input.name: np.random.default_rng(SEED).integers(0, vocabulary, size=shape, dtype=np.int64)}
    for other in other_inputs:
        feeds[other.name] = padding_mask(input_shape(other))
    expected = session.run(None, feeds)[0]

    logits_file = os.path.join(scratch, "logits.npy")
    command = [tessera_run, path, "-o", logits_file]
    for name, value in feeds.items():
        np.save(os.path.join(scratch, f"{name}.npy"), value)
        command.append(f"--input={name}={os.path.join(scratch, name + '.npy')}")
    symbolic = {dim for graph_input in session.get_inputs() for dim in graph_input.shape if isinstance(dim, str)}
    command += [f"--dim={name}={value}" for name, value in DYNAMIC_DIMS.items() if name in symbolic]
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"tessera-run exited {run.returncode}: {run.stderr.strip()}")
    actual = np.load(logits_file)
    if actual.shape != expected.shape:
        raise RuntimeError(f"logits shape {list(actual.shape)}, onnxruntime's is {list(expected.shape)}")
    difference = float(np.max(np.abs(actual.astype(np.float64) - expected.astype(np.float64))))
    scale = float(np.max(np.abs(expected)))
    return shape, difference, scale, difference / scale


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessera-run", required=True, help="the tessera-run executable")
    ap.add_argument("--source", default=os.path.dirname(os.path.dirname(here)), help="the repository root")
    ap.add_argument("--shared", help="the shared/ folder (default: <source>/../shared)")
    ap.add_argument("--only", help="only models whose path contains this")
    a = ap.parse_args()
    shared = a.shared or os.path.join(a.source, "..", "shared")
    paths = [path for path in models(a.source, shared) if not a.only or a.only in path]
    if not paths:
        print("no models found", file=sys.stderr)
        return 1

    rows, failures = [], 0
    with tempfile.TemporaryDirectory() as scratch:
        for path in paths:
            name = os.path.relpath(os.path.realpath(path), os.path.realpath(a.source))
            try:
                shape, difference, scale, relative = compare(path, a.tessera_run, scratch)
                verdict = "ok" if relative <= TOLERANCE else "DIFFERS"
                rows.append((name, "x".join(map(str, shape)), f"{difference:.3e}", f"{scale:.3e}",
                             f"{relative:.3e}", verdict))
            except Exception as error:  # one model's failure must not hide the others' results
                verdict = "FAILED"
                rows.append((name, "-", "-", "-", "-", f"FAILED: {error}"))
            failures += verdict != "ok"

    header = ("model", "input", "max |diff|", "max |ort|", "relative", "verdict")
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header) - 1)]
    for row in [header] + rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])
    print(f"{len(rows) - failures} of {len(rows)} models within {TOLERANCE:g} relative of onnxruntime")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
