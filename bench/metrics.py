"""What the benchmarks' reports read: a training run's --metrics file (one
JSON object a step) and `tesserac --explain`'s predictions; shared by
bench/plans and bench/pipeline."""
import json
import os
import re
import statistics


def predicted(path, time_section, memory_section):
    """(step ms, memory) of an --explain output: the "step" line after the
    heading `time_section` and the "total" line after `memory_section`, in
    the units the report prints them in."""
    text = open(path).read()
    times = text[text.index(time_section):]
    step = float(re.search(r"^\s+step\s+([0-9.]+)", times, re.M).group(1))
    memory = text[text.index(memory_section):]
    total = float(re.search(r"^\s+total\s+([0-9.]+)", memory, re.M).group(1))
    return step, total


def measured(path, first_timed_step=6):
    """(median step ms, median tokens/s, largest peak GiB) over the steps
    from `first_timed_step` on (the earlier ones warm up), or None when the
    run wrote no such step."""
    if not os.path.exists(path):
        return None
    rows = [json.loads(line) for line in open(path) if line.strip()]
    timed = [row for row in rows if row["step"] >= first_timed_step]
    if not timed:
        return None
    ms = statistics.median(row["step_ms"] for row in timed)
    tokens = statistics.median(row["tokens_per_s"] for row in timed)
    peak = max(row["peak_memory_gib"] for row in rows)
    return ms, tokens, peak
