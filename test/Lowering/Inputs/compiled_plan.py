"""Compares the plan `tesserac --explain` prints ("Plan as compiled: ...")
with the one a compiled program carries: program.h's `plan` field in
--emit=cpp's C++ (a C string literal), or the `plan: ...` line a training
executable prints at start.

    python3 compiled_plan.py EXPLAIN_OUTPUT PROGRAM_OR_RUN_OUTPUT

prints `same plan: TEXT`, or `different plans: A | B` (or what is missing).
"""

import re
import sys


def explained(text):
    found = re.search(r"^Plan as compiled: (.*)$", text, re.M)
    return found.group(1) if found else None


def compiled(text):
    found = re.search(r'/\*plan=\*/"((?:[^"\\]|\\.)*)"', text)
    if found:
        return re.sub(r"\\(.)", r"\1", found.group(1))
    found = re.search(r"^plan: (.*)$", text, re.M)
    return found.group(1) if found else None


def main():
    with open(sys.argv[1]) as explain, open(sys.argv[2]) as program:
        expected, actual = explained(explain.read()), compiled(program.read())
    if expected is None or actual is None:
        print("missing plan: explain %r, program %r" % (expected, actual))
    elif expected == actual:
        print("same plan: " + expected)
    else:
        print("different plans: %s | %s" % (expected, actual))


if __name__ == "__main__":
    main()
