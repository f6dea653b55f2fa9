"""Reads --explain's line of the mesh search's memory checks,
  searched   N times under bounds corrected by the compiled rank
             (bound -> rank MiB): B1 -> R1, B2 -> R2, ...
and the compiled rank of the plan kept, and says, against LIMIT_MIB, what the
corrections did:
  memory_checks.py EXPLAIN LIMIT_MIB
prints one line per search ("search I: missed" or "search I: fits"; with
"lowered" or "raised" against the bound before), then "raised after a fit"
when a bound was raised above one whose rank fitted, "kept: fits" when the
kept plan's rank is within the limit and is the rank of one of the searches,
and "kept: a raised bound's plan" when that search's bound was raised.
"""
import re
import sys

text = open(sys.argv[1]).read()
limit = float(sys.argv[2])
line = re.search(r"searched +\d+ times under bounds corrected by the "
                 r"compiled rank \(bound -> rank MiB\):(.*)", text).group(1)
checks = [tuple(float(x) for x in pair.split("->"))
          for pair in line.split(",")]
raised_after_fit = False
for i, (bound, rank) in enumerate(checks):
    words = ["search %d: %s" % (i + 1, "fits" if rank <= limit else "missed")]
    if i:
        words.append("raised" if bound > checks[i - 1][0] else "lowered")
        if any(r <= limit and b < bound for b, r in checks[:i]):
            raised_after_fit = True
    print(", ".join(words))
if raised_after_fit:
    print("raised after a fit")
kept = float(re.search(r"per rank as compiled .*?: ([0-9.]+) MiB",
                       text).group(1))
matches = [i for i, (_, r) in enumerate(checks) if abs(kept - r) < 1e-3]
if kept <= limit and matches:
    print("kept: fits")
    if any(i and checks[i][0] > checks[i - 1][0] for i in matches):
        print("kept: a raised bound's plan")
