"""Checks what the ranks of a mesh plan's ZeRO-2 hold against ZeRO-0's.

Usage: mesh_zero_resident.py WHOLE.log ZERO2.log RANKS PARAMETERS [SUMMARY.txt] [--one-gradient]

The logs are one run of the same mesh program each, with --zero 0 (the
ZeRO-1/2 parameters' state and gradients whole) and under ZeRO-2. Each rank
prints "rank R: resident training state: ..." and "rank R: ZeRO-S over AXES
(group rank G of N) of the K ZeRO-1/2 parameters' E elements: masters of M
elements for the rank's B block elements". Per rank:

- the masters (and moments) hold the pending parameters' 1/N: the whole
  run's less E (N - 1) / N elements, within the padding of the pieces (128
  elements each, at most one a parameter: PARAMETERS of them);
- the gradients are the shard the masters are, element for element (an
  fp32 program's: the same bytes), so the ZeRO-2 parameters' gradients are
  1/N of theirs too and the rest whole, and a gradient ring is declared;
  but for the plan's ZeRO-1 parameters, whose gradients stay whole (the
  line's "; the gradients of the K1 ZeRO-1 parameters' E1 elements whole"):
  the masters' elements and E1 (N - 1) / N more, within the padding of
  their buckets (N x 128 elements each, at most one a parameter); so the
  whole run's gradients less the ZeRO-2 parameters' (N - 1) / N;
- the gradients and the ring together are fewer than the whole run's
  gradients (--one-gradient leaves this out: a plan whose ZeRO-2 gradients
  are one parameter's, which one call writes whole, has a ring of that
  whole gradient);
- with SUMMARY.txt (tesserac --summary of the plan): the predicted
  gradients and ring are the rank's within that padding.
"""
import re
import sys

KINDS = ("masters", "moments", "gradients", "gradient ring")


def ranks_of(path):
    ranks = {}
    for line in open(path):
        match = re.match(r"rank (\d+): resident training state: \d+ bytes \((.*)\)", line)
        if match:
            ranks.setdefault(int(match.group(1)), {}).update({
                kind.strip(): int(value) for kind, value in re.findall(r"([a-z /]+) (\d+)", match.group(2))
                if kind.strip() in KINDS})
        match = re.match(r"rank (\d+): ZeRO-(\d) over \S+ \(group rank \d+ of (\d+)\) of the (\d+) "
                         r"ZeRO-1/2 parameters' (\d+) elements", line)
        if match:
            whole = re.search(r"the gradients of the (\d+) ZeRO-1 parameters' (\d+) elements whole", line)
            ranks.setdefault(int(match.group(1)), {}).update({
                "stage": int(match.group(2)), "group": int(match.group(3)),
                "pending": int(match.group(5)),
                "whole count": int(whole.group(1)) if whole else 0,
                "whole": int(whole.group(2)) if whole else 0})
    return ranks


def predicted(path):
    names = {"gradients (compute precision)": "gradients", "ZeRO-2 gradient ring (estimated)": "ring"}
    values = {}
    for line in open(path):
        match = re.match(r"\s+(.*\S)\s+(\d+) bytes", line)
        if match and match.group(1) in names:
            values[names[match.group(1)]] = int(match.group(2))
    if sorted(values) != ["gradients", "ring"]:
        sys.exit(f"{path}: no predicted gradients and ring")
    return values


def main():
    one_gradient = "--one-gradient" in sys.argv
    arguments = [a for a in sys.argv[1:] if a != "--one-gradient"]
    whole_log, sharded_log, count, parameters = arguments[0], arguments[1], int(arguments[2]), int(arguments[3])
    whole, sharded = ranks_of(whole_log), ranks_of(sharded_log)
    if sorted(sharded) != list(range(count)) or sorted(whole) != list(range(count)):
        sys.exit(f"expected ranks 0..{count - 1}, got {sorted(whole)} and {sorted(sharded)}")
    padding = 128 * parameters
    summary = predicted(arguments[4]) if len(arguments) > 4 else None
    for r in range(count):
        w, s = whole[r], sharded[r]
        if w.get("stage") != 0 or s.get("stage") != 2:
            sys.exit(f"rank {r}: ZeRO-{w.get('stage')} and ZeRO-{s.get('stage')}, expected 0 and 2")
        group, pending = s["group"], s["pending"]
        saved = pending - pending // group
        masters = s["masters"] // 4
        expected = w["masters"] // 4 - saved
        if abs(masters - expected) > padding:
            sys.exit(f"rank {r}: masters of {masters} elements, the whole run's less "
                     f"{pending} (N - 1) / N is {expected}")
        element = w["gradients"] // (w["masters"] // 4)
        whole_more = s["whole"] - s["whole"] // group
        held_padding = 128 * group * s["whole count"]
        if abs(s["gradients"] - (masters + whole_more) * element) > held_padding * element:
            sys.exit(f"rank {r}: gradients {s['gradients']} bytes are not the masters' "
                     f"{masters} elements and the ZeRO-1 parameters' other {whole_more} "
                     f"of {element} bytes")
        # The same against the whole run's: the ZeRO-2 gradients at 1/N.
        zero_two = pending - s["whole"]
        expected = w["gradients"] // element - (zero_two - zero_two // group)
        if abs(s["gradients"] // element - expected) > padding + held_padding:
            sys.exit(f"rank {r}: gradients of {s['gradients'] // element} elements, the whole "
                     f"run's less the ZeRO-2 parameters' {zero_two} (N - 1) / N is {expected}")
        if s["gradient ring"] <= 0:
            sys.exit(f"rank {r}: no gradient ring declared")
        held = s["gradients"] + s["gradient ring"]
        if held >= w["gradients"] and not one_gradient:
            sys.exit(f"rank {r}: gradients {s['gradients']} and ring {s['gradient ring']} "
                     f"are not fewer than the whole {w['gradients']}")
        if summary is not None:
            if abs(s["gradients"] - summary["gradients"]) > (padding + held_padding) * element:
                sys.exit(f"rank {r}: gradients {s['gradients']} bytes, predicted {summary['gradients']}")
            if abs(s["gradient ring"] - summary["ring"]) > padding * element:
                sys.exit(f"rank {r}: gradient ring {s['gradient ring']} bytes, predicted {summary['ring']}")
        print(f"rank {r}: ZeRO-2 over {group}: gradients {s['gradients']} bytes "
              f"(whole {w['gradients']}; ZeRO-1 whole {s['whole']} elements), "
              f"ring {s['gradient ring']}, masters {masters} elements")
    print("OK")


if __name__ == "__main__":
    main()
