#!/usr/bin/env python3
"""Inputs and checks of the training-health tests (standard library only).

  gradient_health.py write-data OUT.npy ROWS_PER_STEP STEPS SEQUENCE SPIKE_STEP
      Token rows for --no-shuffle runs: every step's rows follow the bundled
      shard's rule (each token determines the next, pattern.bin's sequence),
      except step SPIKE_STEP's, whose rows repeat one token: a batch that
      the model, by then fitted to the pattern, gets badly wrong, so that
      its gradient norm jumps.
  gradient_health.py spikes METRICS.jsonl...
      The steps each run's metrics mark as spikes, and which it skipped;
      fails unless every run has the same ones.
  gradient_health.py grad-norms METRICS.jsonl GRADS.safetensors LAYERS
      The last step's param_grad_norms against the norms of --dump-grads'
      tensors, and layer_grad_norms against their sums per layer (LAYERS: a
      comma-separated list of the layer names expected, in order); fails
      beyond 1e-6 relative.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from training_step import read_safetensors, write_npy  # noqa: E402

PATTERN_SHARD = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "..", "..", "data", "pattern.bin")


def pattern():
    """pattern.bin's tokens (uint16 after a 1024-byte header)."""
    data = open(PATTERN_SHARD, "rb").read()[1024:]
    return [data[i] | (data[i + 1] << 8) for i in range(0, len(data), 2)]


def write_data(out_path, rows_per_step, steps, sequence, spike_step):
    tokens = pattern()
    rows = []
    for step in range(1, steps + 1):
        for r in range(rows_per_step):
            if step == spike_step:
                rows.append([tokens[r]] * (sequence + 1))
            else:
                start = (step * rows_per_step + r) * 7 % 61
                rows.append(tokens[start:start + sequence + 1])
    write_npy(out_path, [t for row in rows for t in row],
              [len(rows), sequence + 1])
    return 0


def records(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def spikes(paths):
    decisions = []
    for path in paths:
        steps = records(path)
        found = [s["step"] for s in steps if s.get("spike")]
        skipped = [s["step"] for s in steps if s.get("skipped")]
        decisions.append((found, skipped))
        print("%s: spikes at %s, skipped %s" % (os.path.basename(path), found,
                                                skipped))
    if any(d != decisions[0] for d in decisions):
        print("FAIL: the runs decided differently")
        return 1
    print("same decisions: spikes at steps %s" %
          " ".join(str(s) for s in decisions[0][0]))
    return 0


def close(a, b):
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-30)


def grad_norms(metrics_path, grads_path, layers):
    last = records(metrics_path)[-1]
    tensors = read_safetensors(grads_path)
    reported = last["param_grad_norms"]
    failures = 0
    if sorted(reported) != sorted(tensors):
        print("FAIL: parameters %s vs dumped %s" % (sorted(reported),
                                                    sorted(tensors)))
        return 1
    squares = {name: sum(v * v for v in values)
               for name, values in tensors.items()}
    for name, value in reported.items():
        if not close(value, math.sqrt(squares[name])):
            print("FAIL: %s: %.9g vs dumped %.9g" % (name, value,
                                                     math.sqrt(squares[name])))
            failures += 1
    expected = layers.split(",")
    if list(last["layer_grad_norms"]) != expected:
        print("FAIL: layers %s, expected %s" % (list(last["layer_grad_norms"]),
                                                expected))
        return 1
    for layer, value in last["layer_grad_norms"].items():
        members = [n for n in tensors
                   if n == layer or n.startswith(layer + ".")]
        total = math.sqrt(sum(squares[n] for n in members))
        if not members or not close(value, total):
            print("FAIL: layer %s: %.9g vs dumped %.9g" % (layer, value, total))
            failures += 1
    if not close(last["grad_norm"], math.sqrt(sum(squares.values()))):
        print("FAIL: grad_norm %.9g" % last["grad_norm"])
        failures += 1
    print("%d parameters, %d layers%s" % (len(reported), len(expected),
                                          ": FAIL" if failures else ": OK"))
    return 1 if failures else 0


def main(argv):
    if len(argv) == 7 and argv[1] == "write-data":
        return write_data(argv[2], *(int(a) for a in argv[3:]))
    if len(argv) >= 3 and argv[1] == "spikes":
        return spikes(argv[2:])
    if len(argv) == 5 and argv[1] == "grad-norms":
        return grad_norms(*argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
