#!/usr/bin/env python3
"""Writes an llm.c token shard (256 x int32 header: magic 20240520, version 1,
token count; then uint16 tokens) of uniformly random ids below VOCAB, seeded:
the synthetic data both Tessera and the PyTorch peers train on in bench/.

  python3 make_tokens.py OUT.bin TOKENS VOCAB [SEED]
"""
import sys
import numpy as np

def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    path, count, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    seed = int(sys.argv[4]) if len(sys.argv) == 5 else 0
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = 20240520, 1, count
    tokens = np.random.default_rng(seed).integers(0, vocab, size=count, dtype=np.int64).astype("<u2")
    with open(path, "wb") as out:
        out.write(header.tobytes())
        out.write(tokens.tobytes())

if __name__ == "__main__":
    main()
