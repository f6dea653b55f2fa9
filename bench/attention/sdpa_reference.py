"""Times PyTorch's scaled_dot_product_attention on the shape that
tessera_attention_bench times, with the same flop counts.

    python3 sdpa_reference.py [batch heads seq head_dim causal dtype [backend]]

backend is one of PyTorch's SDPBackend names (flash_attention, cudnn_attention,
efficient_attention, math); left out, PyTorch picks.
"""
import contextlib
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    args = sys.argv[1:]
    batch, heads, seq, dim = (int(a) for a in (args + ["16", "12", "1024", "64"][len(args):])[:4])
    causal = bool(int(args[4])) if len(args) > 4 else True
    dtype = torch.float16 if len(args) > 5 and args[5] == "f16" else torch.bfloat16
    backend = args[6] if len(args) > 6 else None
    chosen = (sdpa_kernel(getattr(SDPBackend, backend.upper())) if backend
              else contextlib.nullcontext())
    q, k, v, dy = (torch.randn(batch, heads, seq, dim, device="cuda", dtype=dtype,
                               requires_grad=i < 3) for i in range(4))

    def timed(body, calls=20):
        for _ in range(3):
            body()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            body()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) / calls

    def forward():
        with torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def both():
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        y.backward(dy)

    with chosen:
        forward_ms, both_ms = timed(forward), timed(both)
    flops = 4.0 * batch * heads * seq * seq * dim / (2 if causal else 1)
    backward_ms = both_ms - forward_ms
    print(f"torch {torch.__version__} sdpa B={batch} H={heads} T={seq} D={dim} causal={int(causal)} {dtype}"
          f" backend={backend or 'default'}")
    print(f"  forward           {forward_ms:8.3f} ms  {flops / (forward_ms * 1e9):6.1f} TFLOP/s")
    print(f"  backward          {backward_ms:8.3f} ms  {2.5 * flops / (backward_ms * 1e9):6.1f} TFLOP/s")
    print(f"  forward+backward  {both_ms:8.3f} ms  {3.5 * flops / (both_ms * 1e9):6.1f} TFLOP/s")


if __name__ == "__main__":
    main()
