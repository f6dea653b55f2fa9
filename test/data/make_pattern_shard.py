#!/usr/bin/env python3
"""Writes test/data/pattern.bin: an llm.c token shard for the demo and tests.

The tokens are one fixed random sequence (PERIOD ids below VOCABULARY, from a
seeded generator) repeated: random enough that the model starts at the loss
of a uniform guess (ln 512 = 6.24), learnable enough that a few dozen steps
of a tiny GPT-2 visibly lower it (each token determines the next).

llm.c's shard format: 256 int32 header values (magic 20240520, version 1,
token count, then zeros) followed by the tokens as uint16, little-endian.
Standard library only; running it again rewrites the same bytes.
"""
import os
import random
import struct

VOCABULARY = 512
PERIOD = 61
TOKENS = 16384
SEED = 20240520


def main():
    generator = random.Random(SEED)
    pattern = [generator.randrange(VOCABULARY) for _ in range(PERIOD)]
    tokens = [pattern[i % PERIOD] for i in range(TOKENS)]
    header = [20240520, 1, TOKENS] + [0] * 253
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "pattern.bin")
    with open(path, "wb") as out:
        out.write(struct.pack("<256i", *header))
        out.write(struct.pack("<%dH" % TOKENS, *tokens))
    print("wrote %s: %d tokens, period %d, vocabulary %d"
          % (path, TOKENS, PERIOD, VOCABULARY))


if __name__ == "__main__":
    main()
