"""Checks a sharded run's resident training state against the unsharded one.

Usage: zero_resident.py WHOLE.log SHARDED.log RANKS

Each log holds one "rank R: resident training state: ..." line per rank.
The sharded kinds (masters, moments, and under ZeRO-2 the gradients) must
be the whole's 1/RANKS within the padding the shards' pieces take (each
rounded to 128 elements, at most 1 % here), and together cover it; a
ZeRO-2 run must declare its gradient ring, and the gradients it holds
(shard plus ring) must be fewer than the whole's.
"""
import re
import sys

KINDS = ("masters", "moments", "gradients", "gradient ring")


def resident(path):
    ranks = {}
    for line in open(path):
        match = re.match(r"rank (\d+): resident training state: \d+ bytes \((.*)\)", line)
        if match:
            ranks[int(match.group(1))] = {
                kind.strip(): int(value) for kind, value in re.findall(r"([a-z /]+) (\d+)", match.group(2))
                if kind.strip() in KINDS}
    return ranks


def main():
    whole_log, sharded_log, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    whole = resident(whole_log)[0]
    ranks = resident(sharded_log)
    if sorted(ranks) != list(range(count)):
        sys.exit(f"expected ranks 0..{count - 1}, got {sorted(ranks)}")
    sharded = ["masters", "moments"]
    zero2 = any(rank["gradient ring"] > 0 for rank in ranks.values())
    if zero2:
        sharded.append("gradients")
    for kind in sharded:
        shards = [ranks[r][kind] for r in range(count)]
        total = sum(shards)
        # The whole run's buffers are unpadded; the shards' sum is the whole
        # plus the padding of the shards' pieces.
        if not whole[kind] <= total <= whole[kind] * 1.01:
            sys.exit(f"{kind}: the shards {shards} sum to {total}, the whole is {whole[kind]}")
        if max(shards) > whole[kind] / count * 1.01:
            sys.exit(f"{kind}: a shard of {shards} is more than 1/{count} of {whole[kind]}")
    for r in range(count):
        held = ranks[r]["gradients"] + ranks[r]["gradient ring"]
        if zero2 and held >= whole["gradients"]:
            sys.exit(f"rank {r}: gradients {ranks[r]['gradients']} and ring "
                     f"{ranks[r]['gradient ring']} are not fewer than the whole {whole['gradients']}")
        print(f"rank {r}: " + ", ".join(f"{kind} {ranks[r][kind]}" for kind in KINDS)
              + f" (whole: " + ", ".join(f"{kind} {whole[kind]}" for kind in KINDS[:3]) + ")")


main()
