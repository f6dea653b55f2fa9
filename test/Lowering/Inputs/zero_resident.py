"""Checks a sharded run's resident training state against the unsharded one.

Usage: zero_resident.py WHOLE.log SHARDED.log RANKS [PADDING] [--tied-gradient-ring]

Each log holds one "rank R: resident training state: ..." line per rank.
The sharded kinds (masters, moments, and under ZeRO-2 the gradients) must
be the whole's 1/RANKS within the padding the shards' pieces take (each
rounded to 128 elements: at most PADDING, default 1 %), and together cover it; a
ZeRO-2 run must declare its gradient ring, and the gradients it holds
(shard plus ring) must be fewer than the whole's. Under ZeRO-3 (a
"weight ring" declared) the compute weights ("copies/mirrors") are sharded
too: against the whole weights the step reads (each rank's "weight ring:"
line; the unsharded run reads f32 parameters from its masters, so its own
line is not that whole), their shards must be 1/RANKS within the padding
of the buckets' blocks (at most PADDING + 1 %), and shard plus ring fewer than
the whole. --tied-gradient-ring leaves out the gradient ring's check: a
tied embedding's gradient is written first and reduced last, so ZeRO-2's
ring holds every bucket at once (GPT-2).
"""
import re
import sys

KINDS = ("masters", "moments", "gradients", "gradient ring", "copies/mirrors", "weight ring")


def resident(path):
    ranks = {}
    for line in open(path):
        match = re.match(r"rank (\d+): resident training state: \d+ bytes \((.*)\)", line)
        if match:
            ranks[int(match.group(1))] = {
                kind.strip(): int(value) for kind, value in re.findall(r"([a-z /]+) (\d+)", match.group(2))
                if kind.strip() in KINDS}
    return ranks


def whole_weights(path):
    # Every rank declares the same whole; the ZeRO-3 ranks' first.
    for line in open(path):
        match = re.match(r"rank \d+: weight ring: \d+ bytes .*\(the whole weights read (\d+) bytes\)", line)
        if match:
            return int(match.group(1))
    return None


def main():
    tied = "--tied-gradient-ring" in sys.argv
    arguments = [a for a in sys.argv[1:] if a != "--tied-gradient-ring"]
    whole_log, sharded_log, count = arguments[0], arguments[1], int(arguments[2])
    allowed = 1 + (float(arguments[3]) if len(arguments) > 3 else 0.01)
    whole = resident(whole_log)[0]
    ranks = resident(sharded_log)
    if sorted(ranks) != list(range(count)):
        sys.exit(f"expected ranks 0..{count - 1}, got {sorted(ranks)}")
    sharded = ["masters", "moments"]
    zero2 = any(rank["gradient ring"] > 0 for rank in ranks.values())
    if zero2:
        sharded.append("gradients")
    padding = {kind: allowed for kind in sharded}
    zero3 = any(rank.get("weight ring", 0) > 0 for rank in ranks.values())
    if zero3:
        sharded.append("copies/mirrors")
        whole["copies/mirrors"] = whole_weights(sharded_log)
        padding["copies/mirrors"] = allowed + 0.01
    for kind in sharded:
        shards = [ranks[r][kind] for r in range(count)]
        total = sum(shards)
        # The whole run's buffers are unpadded; the shards' sum is the whole
        # plus the padding of the shards' pieces.
        if not whole[kind] <= total <= whole[kind] * padding[kind]:
            sys.exit(f"{kind}: the shards {shards} sum to {total}, the whole is {whole[kind]}")
        if max(shards) > whole[kind] / count * padding[kind]:
            sys.exit(f"{kind}: a shard of {shards} is more than 1/{count} of {whole[kind]}")
    for r in range(count):
        held = ranks[r]["gradients"] + ranks[r]["gradient ring"]
        if zero2 and not tied and held >= whole["gradients"]:
            sys.exit(f"rank {r}: gradients {ranks[r]['gradients']} and ring "
                     f"{ranks[r]['gradient ring']} are not fewer than the whole {whole['gradients']}")
        weights = ranks[r]["copies/mirrors"] + ranks[r]["weight ring"]
        if zero3 and weights >= whole["copies/mirrors"]:
            sys.exit(f"rank {r}: compute weights {ranks[r]['copies/mirrors']} and ring "
                     f"{ranks[r]['weight ring']} are not fewer than the whole {whole['copies/mirrors']}")
        print(f"rank {r}: " + ", ".join(f"{kind} {ranks[r][kind]}" for kind in KINDS)
              + f" (whole: " + ", ".join(f"{kind} {whole[kind]}" for kind in sharded) + ")")


main()
