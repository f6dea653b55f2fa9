"""Reads the memory numbers tesserac prints and compares them.

  step_memory_numbers.py compare EXPLAIN SUMMARY CPP
      prints "peak <explain> <summary>" (MiB, 3 decimals) and
      "arena <explain> <summary> <cpp>" (MiB): --explain's total and arena
      line, --summary's total and step arena, and the arena the lowering
      allocates (tessera_arena_bytes in the emitted C++).
  step_memory_numbers.py limit SUMMARY DELTA
      prints the --summary peak plus DELTA bytes, for --memory-limit.
  step_memory_numbers.py rank EXPLAIN LIMIT_MIB
      prints "rank fits" when --explain --mesh's compiled rank peak is at
      most LIMIT_MIB, else "rank needs <peak>".
  step_memory_numbers.py below-rank EXPLAIN DELTA_MIB
      prints the compiled rank peak less DELTA_MIB, for --memory-limit.
"""
import re
import sys

MIB = 1024.0 * 1024.0


def summary_bytes(path):
    """Per line of --summary's device memory block, its bytes; and the sum."""
    text = open(path).read()
    block = text[text.index("Device memory of the compiled training step"):]
    lines = dict(re.findall(r"^  (\S.*?)\s+(\d+) bytes", block, re.M))
    return {name: int(value) for name, value in lines.items()}


def explain_mib(path, label):
    text = open(path).read()
    return float(re.search(r"^  " + re.escape(label) + r"\s+([0-9.]+)", text,
                           re.M).group(1))


def main():
    if sys.argv[1] == "compare":
        explain, summary, cpp = sys.argv[2:5]
        lines = summary_bytes(summary)
        arena = int(re.search(r"tessera_arena_bytes = (\d+)",
                              open(cpp).read()).group(1))
        print("peak %.3f %.3f" % (explain_mib(explain, "total"),
                                  sum(lines.values()) / MIB))
        print("arena %.3f %.3f %.3f" % (
            explain_mib(explain, "step arena (activations, temporaries)"),
            lines["step arena (activations, temporaries)"] / MIB, arena / MIB))
    elif sys.argv[1] in ("rank", "below-rank"):
        peak = float(re.search(r"per rank as compiled .*?: ([0-9.]+) MiB",
                               open(sys.argv[2]).read()).group(1))
        if sys.argv[1] == "rank":
            print("rank fits" if peak <= float(sys.argv[3]) else
                  "rank needs %.3f" % peak)
        else:
            print("%.3fMiB" % (peak - float(sys.argv[3])))
    elif sys.argv[1] == "limit":
        print("%dB" % (sum(summary_bytes(sys.argv[2]).values()) + int(sys.argv[3])))


main()
