#!/usr/bin/env python3
"""Checks what ZeRO-1 inside a pipeline's stage mesh holds (standard library).

  stage_zero.py LOG RANKS DP
      LOG is a run's output: every one of its RANKS ranks prints
      "rank R (stage S): ZeRO-1 over dp rank D of N: masters of X of the
      stage's Y owned elements (P parameters)". Each rank's masters (and so
      its moments) must be 1/DP of its stage's owned elements within
      padding: each of its P pieces starts at a multiple of 128 elements,
      and a bucket's blocks split at most one piece per bucket more.
"""
import re
import sys


def main(log_path, ranks, dp):
    pattern = re.compile(r"rank (\d+) \(stage (\d+)\): ZeRO-1 over dp rank "
                         r"(\d+) of (\d+): masters of (\d+) of the stage's "
                         r"(\d+) owned elements \((\d+) parameters\)")
    seen = {}
    for line in open(log_path):
        match = pattern.search(line)
        if match:
            rank, stage, dp_rank, dp_size, held, owned, count = map(
                int, match.groups())
            seen[rank] = (stage, dp_rank, dp_size, held, owned, count)
    if sorted(seen) != list(range(ranks)):
        sys.exit("FAIL: ranks %s printed their shard, expected 0..%d" %
                 (sorted(seen), ranks - 1))
    for rank, (stage, dp_rank, dp_size, held, owned, count) in sorted(seen.items()):
        padding = 128 * (count + 1)
        print("rank %d stage %d dp %d/%d: %d of %d (1/%d: %.0f)" %
              (rank, stage, dp_rank, dp_size, held, owned, dp, owned / dp))
        if dp_size != dp:
            sys.exit("FAIL: rank %d shards over %d ranks, expected %d" %
                     (rank, dp_size, dp))
        if abs(held - owned / dp) > padding:
            sys.exit("FAIL: rank %d holds %d elements, not 1/%d of %d "
                     "within %d" % (rank, held, dp, owned, padding))
    print("OK")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
