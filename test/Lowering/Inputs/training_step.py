#!/usr/bin/env python3
"""Feeds a compiled training executable the fixture batch and checks its first
step against PyTorch's numbers (test/fixtures/<model>.reference.json).

  training_step.py write-batch FIXTURE OUT.npy [--mlm] [--repeat N]
      The fixture's input_ids as an int64 .npy in the layout the runtime's data
      loader reads (runtime/train/DataLoader.cpp): causal LM [N, T + 1], one
      sample a row (the driver takes inputs = row[:T], targets = row[1:]);
      MLM [N, 2, T], the ids then the labels (here the ids themselves: the
      fixture scores every position). --repeat N writes the rows N times
      over (a step of N x the fixture's rows whose every micro-batch holds
      them once, as a pipeline over data-parallel ranks needs: its mean loss
      and gradients are the fixture's).
  training_step.py check FIXTURE METRICS.jsonl PARAMS.safetensors [GRADS.safetensors]
      The first step's loss within 1e-5 relative, the first eight values of
      every parameter after one AdamW step within 1e-5 absolute and, with the
      executable's --dump-grads file, every gradient norm within 1e-4
      relative (1e-8 absolute for gradients that are zero in exact
      arithmetic, such as BERT's key bias).

Standard library only: the .npy header and safetensors are parsed by hand.
"""
import json
import struct
import sys


def write_npy(path, values, shape):
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (%s), }" % (
        ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    # Magic, version, header length, header: padded to a multiple of 64.
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as out:
        out.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        out.write(header.encode("latin1"))
        out.write(struct.pack("<%dq" % len(values), *values))


def write_batch(fixture_path, out_path, mlm, repeat=1):
    ids = json.load(open(fixture_path))["input_ids"] * repeat
    if mlm:
        values = [v for row in ids for v in row + row]
        write_npy(out_path, values, [len(ids), 2, len(ids[0])])
    else:
        values = [v for row in ids for v in row]
        write_npy(out_path, values, [len(ids), len(ids[0])])


def read_safetensors(path):
    data = open(path, "rb").read()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + size])
    body = data[8 + size:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise SystemExit("%s: expected F32, got %s" % (name, info["dtype"]))
        begin, end = info["data_offsets"]
        tensors[name] = struct.unpack("<%df" % ((end - begin) // 4),
                                      body[begin:end])
    return tensors


def check(fixture_path, metrics_path, params_path, grads_path=None):
    fixture = json.load(open(fixture_path))
    failures = []
    lines = [json.loads(line) for line in open(metrics_path) if line.strip()]
    if not lines:
        raise SystemExit("%s: no steps recorded" % metrics_path)
    loss, expected = lines[0]["loss"], fixture["loss"]
    if abs(loss - expected) > 1e-5 * abs(expected):
        failures.append("loss %.9g, PyTorch %.9g" % (loss, expected))
    print("loss %.9g, PyTorch %.9g (relative difference %.2g)"
          % (loss, expected, abs(loss - expected) / abs(expected)))

    params = read_safetensors(params_path)
    worst = 0.0
    for name, info in fixture["params"].items():
        stored = info.get("onnx_initializer", name)
        if stored not in params:
            failures.append("no parameter '%s' in %s" % (stored, params_path))
            continue
        for i, want in enumerate(info["after_step_first8"]):
            got = params[stored][i]
            worst = max(worst, abs(got - want))
            if abs(got - want) > 1e-5:
                failures.append("%s[%d] after one step: %.9g, PyTorch %.9g"
                                % (name, i, got, want))
    print("parameters after one AdamW step: largest difference %.2g over %d "
          "parameters" % (worst, len(fixture["params"])))

    if grads_path:
        grads = read_safetensors(grads_path)
        worst = 0.0
        # Gradients that are zero in exact arithmetic (BERT's key biases:
        # softmax ignores a per-row shift of the scores) hold only rounding
        # noise on both sides; they are compared absolutely and reported
        # apart, since their relative difference means nothing.
        zeros, worst_zero = 0, 0.0
        for name, info in fixture["params"].items():
            stored = info.get("onnx_initializer", name)
            norm = sum(v * v for v in grads.get(stored, ())) ** 0.5
            want = info["grad_norm"]
            error = abs(norm - want)
            if want < 1e-8:
                zeros += 1
                worst_zero = max(worst_zero, error)
            else:
                worst = max(worst, error / want)
            if error > max(1e-4 * want, 1e-8):
                failures.append("gradient norm of %s: %.9g, PyTorch %.9g"
                                % (name, norm, want))
        print("gradient norms: largest relative difference %.2g over %d "
              "parameters" % (worst, len(fixture["params"]) - zeros)
              + (" (%d zero in exact arithmetic: largest absolute "
                 "difference %.2g)" % (zeros, worst_zero) if zeros else ""))
    if failures:
        print("\n".join("FAIL: " + f for f in failures))
        return 1
    print("OK")
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "write-batch":
        options = argv[4:]
        repeat = (int(options[options.index("--repeat") + 1])
                  if "--repeat" in options else 1)
        write_batch(argv[2], argv[3], "--mlm" in options, repeat)
        return 0
    if len(argv) in (5, 6) and argv[1] == "check":
        return check(*argv[2:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
