"""Fails unless every `tesserac --explain` output named reports a sharding
search time below the limit: check_search_time.py SECONDS FILE..."""
import re
import sys

limit = float(sys.argv[1])
for path in sys.argv[2:]:
    text = open(path).read()
    found = re.search(r"^  search .*?, ([0-9.]+) s;", text, re.MULTILINE)
    if not found:
        sys.exit(f"{path}: no search time in the output")
    seconds = float(found.group(1))
    if seconds >= limit:
        sys.exit(f"{path}: search took {seconds} s, limit {limit} s")
    print(f"{path}: {seconds} s")
