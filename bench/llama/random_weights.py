#!/usr/bin/env python3
"""Writes the --weights file of a Llama-family training executable compiled
--without-weights: every parameter drawn as PyTorch's peer initializes it
(N(0, 0.02) for matrices and embeddings, ones for norm scales), and the
rotary frequencies `inv_freq` as the model defines them,
1 / theta^(2i / head_dim). bf16 storage (the executable keeps f32 masters).

  python3 random_weights.py TENSORS.txt OUT.safetensors [--theta 500000]

TENSORS.txt is build.sh's list, one "name dim0 dim1 ..." a line.
"""
import argparse, os, sys
import torch

# onnx_to_safetensors.py (bench/gpt2) is copied beside this script by build.sh.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_to_safetensors import write_safetensors

def main():
    p = argparse.ArgumentParser()
    p.add_argument("tensors")
    p.add_argument("out")
    p.add_argument("--theta", type=float, default=500000.0)
    a = p.parse_args()
    gen = torch.Generator(device="cuda").manual_seed(0)
    tensors = []
    for line in open(a.tensors):
        name, *dims = line.split()
        shape = [int(d) for d in dims]
        if name.endswith("inv_freq"):
            half = shape[0]
            tensor = 1.0 / a.theta ** (torch.arange(0, 2 * half, 2, dtype=torch.float64) / (2 * half))
            tensor, dtype = tensor.float(), "F32"
        elif len(shape) >= 2:
            tensor = (torch.randn(shape, generator=gen, device="cuda") * 0.02).bfloat16().cpu()
            dtype = "BF16"
        else:
            tensor, dtype = torch.ones(shape, dtype=torch.bfloat16), "BF16"
        tensors.append((name, dtype, shape, tensor.contiguous().view(torch.uint8).numpy().tobytes()))
    write_safetensors(a.out, tensors)

if __name__ == "__main__":
    main()
