"""Reruns one phase of a compile with tessera-opt, from the pipeline tesserac
printed for it under --print-phase-pipelines: the pipeline is taken as
printed (every option with its value) rather than retyped in the test.

usage: rerun_phase.py PIPELINES.txt PHASE INPUT.mlir OUTPUT.mlir

PHASE `decision` is the search tesserac ran to decide the plan
(`tesserac: search: ...`), which a --pipeline compile runs on the forward
at the global batch, its decision reaching the compile through the plan
phase.
"""
import subprocess
import sys

pipelines, phase, source, output = sys.argv[1:5]
prefix = ("tesserac: search: " if phase == "decision"
          else "tesserac: phase " + phase + ": ")
lines = [line[len(prefix):].rstrip("\n") for line in open(pipelines)
         if line.startswith(prefix)]
if len(lines) != 1:
    sys.exit("expected one '%s' line in %s, got %d" % (prefix, pipelines,
                                                      len(lines)))
sys.exit(subprocess.call(["tessera-opt", source, "--pass-pipeline=" + lines[0],
                          "-o", output]))
