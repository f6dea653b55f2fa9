"""Reruns one phase of a compile with tessera-opt, from the pipeline tesserac
printed for it under --print-phase-pipelines: the pipeline is taken as
printed (every option with its value) rather than retyped in the test.

usage: rerun_phase.py PIPELINES.txt PHASE INPUT.mlir OUTPUT.mlir

PHASE `FIRST..LAST` reruns every phase printed from FIRST to LAST, in the
order printed, each on the previous one's module: the compile continued
from INPUT (the module --compile-to printed before FIRST).

PHASE `decision` is the search tesserac ran to decide the plan
(`tesserac: search: ...`), which a --pipeline compile runs on the forward
at the global batch, its decision reaching the compile through the plan
phase.
"""
import subprocess
import sys

pipelines, phase, source, output = sys.argv[1:5]


def printed(prefix):
    return [line[len(prefix):].rstrip("\n") for line in open(pipelines)
            if line.startswith(prefix)]


if ".." in phase:
    first, last = phase.split("..")
    phases = [line[len("tesserac: phase "):].split(":", 1)[0]
              for line in open(pipelines)
              if line.startswith("tesserac: phase ")]
    if first not in phases or last not in phases:
        sys.exit("%s: no phase %s or %s printed" % (pipelines, first, last))
    steps = phases[phases.index(first):phases.index(last) + 1]
    lines = [printed("tesserac: phase " + step + ": ")[0] for step in steps]
else:
    prefix = ("tesserac: search: " if phase == "decision"
              else "tesserac: phase " + phase + ": ")
    lines = printed(prefix)
    if len(lines) != 1:
        sys.exit("expected one '%s' line in %s, got %d" % (prefix, pipelines,
                                                          len(lines)))
current = source
for index, line in enumerate(lines):
    target = output if index == len(lines) - 1 else "%s.%d.mlir" % (output,
                                                                   index)
    status = subprocess.call(["tessera-opt", current, "--pass-pipeline=" +
                              line, "-o", target])
    if status:
        sys.exit(status)
    current = target
