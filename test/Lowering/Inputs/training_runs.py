#!/usr/bin/env python3
"""Compares runs of compiled training executables (standard library only).

  training_runs.py curves FP32.jsonl OTHER.jsonl MAX_RELATIVE_GAP
      Both runs' per-step losses (the --metrics files) over the same steps:
      prints the largest and the final relative gap of OTHER to FP32 and the
      loss fall of each; fails when the largest gap exceeds MAX_RELATIVE_GAP
      or OTHER does not learn.
  training_runs.py overflow FP16.jsonl
      An fp16 run started with a loss scale that overflows: its first step is
      skipped with a lower scale afterwards, and it then trains.
  training_runs.py kill-after N METRICS.jsonl -- COMMAND...
      Starts COMMAND, waits until METRICS.jsonl holds N steps, kills it with
      SIGKILL (no chance to clean up), and reports how far it got.
  training_runs.py same-params A.safetensors B.safetensors
      Every tensor bit-for-bit equal (a resumed run against an uninterrupted one).
  training_runs.py same-steps A.jsonl B.jsonl MAX_RELATIVE_GAP
      Every step of B is one of A's, with its loss and gradient norm within
      MAX_RELATIVE_GAP of A's (a partitioned program against one device,
      whose sums run in another order; B may be a resumed run's tail).
"""
import json
import os
import signal
import subprocess
import sys
import time


def losses(path):
    steps = [json.loads(line) for line in open(path) if line.strip()]
    return steps


def curves(fp32_path, other_path, max_gap):
    reference, other = losses(fp32_path), losses(other_path)
    if len(reference) != len(other):
        sys.exit("runs have %d and %d steps" % (len(reference), len(other)))
    gaps = [abs(b["loss"] - a["loss"]) / a["loss"] for a, b in zip(reference, other)]
    print("steps %d" % len(reference))
    print("fp32 loss %.4f -> %.4f" % (reference[0]["loss"], reference[-1]["loss"]))
    print("other loss %.4f -> %.4f" % (other[0]["loss"], other[-1]["loss"]))
    print("largest relative gap %.4f at step %d, final gap %.4f" %
          (max(gaps), gaps.index(max(gaps)) + 1, gaps[-1]))
    if other[-1]["loss"] > 0.5 * other[0]["loss"]:
        sys.exit("FAIL: the run does not learn")
    if max(gaps) > max_gap:
        sys.exit("FAIL: gap %.4f exceeds %.4f" % (max(gaps), max_gap))
    print("OK")


def overflow(path):
    steps = losses(path)
    first = steps[0]
    print("step 1 skipped %s, loss scale %g -> %g" %
          (first.get("skipped"), first["loss_scale"], steps[1]["loss_scale"]))
    if not first.get("skipped"):
        sys.exit("FAIL: the overflowing step was applied")
    if not steps[1]["loss_scale"] < first["loss_scale"]:
        sys.exit("FAIL: the loss scale did not go down")
    applied = [s for s in steps if not s.get("skipped")]
    if not applied or applied[-1]["loss"] >= steps[0]["loss"]:
        sys.exit("FAIL: no step was applied after the overflow, or no learning")
    print("skipped %d of %d steps, final loss %.4f" %
          (len(steps) - len(applied), len(steps), steps[-1]["loss"]))
    print("OK")


def tensor_bytes(path):
    data = open(path, "rb").read()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    return {name: body[info["data_offsets"][0]:info["data_offsets"][1]]
            for name, info in header.items() if name != "__metadata__"}


def same_params(a_path, b_path):
    a, b = tensor_bytes(a_path), tensor_bytes(b_path)
    if a.keys() != b.keys():
        sys.exit("FAIL: different tensors")
    different = [name for name in a if a[name] != b[name]]
    if different:
        sys.exit("FAIL: %d tensors differ, e.g. %s" % (len(different), different[0]))
    print("%d tensors bit-for-bit equal" % len(a))
    print("OK")


def same_steps(a_path, b_path, max_gap):
    a, b = losses(a_path), losses(b_path)
    by_step = {s["step"]: s for s in a}
    missing = [s["step"] for s in b if s["step"] not in by_step]
    if not b or missing:
        sys.exit("FAIL: %s has no steps, or steps %s that %s lacks" %
                 (b_path, missing, a_path))
    worst = {"loss": 0.0, "grad_norm": 0.0}
    for y in b:
        x = by_step[y["step"]]
        for key in worst:
            gap = abs(x[key] - y[key]) / max(abs(x[key]), 1e-30)
            worst[key] = max(worst[key], gap)
    print("%d steps: largest relative gap of the loss %.2g, of the gradient "
          "norm %.2g" % (len(b), worst["loss"], worst["grad_norm"]))
    if max(worst.values()) > max_gap:
        sys.exit("FAIL: gap exceeds %g" % max_gap)
    print("OK")


def kill_after(count, metrics_path, command):
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None:
        if os.path.exists(metrics_path):
            with open(metrics_path) as metrics:
                if sum(1 for line in metrics if line.strip()) >= count:
                    break
        time.sleep(0.005)
    if process.poll() is not None:
        sys.exit("FAIL: the run ended before it could be killed")
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    with open(metrics_path) as metrics:
        steps = sum(1 for line in metrics if line.strip())
    print("killed after %d steps" % steps)


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "curves":
        curves(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif command == "overflow":
        overflow(sys.argv[2])
    elif command == "kill-after":
        kill_after(int(sys.argv[2]), sys.argv[3], sys.argv[sys.argv.index("--") + 1:])
    elif command == "same-params":
        same_params(sys.argv[2], sys.argv[3])
    elif command == "same-steps":
        same_steps(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        sys.exit("unknown command " + command)
