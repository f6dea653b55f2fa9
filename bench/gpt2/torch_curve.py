#!/usr/bin/env python3
"""The PyTorch side of the loss-curve check (issue 4: GPT-2 124M in bf16, started
from the ONNX weights, follows PyTorch's loss curve over 50 steps within 2 %).

The same `transformers` model the ONNX file was exported from (GPT2LMHeadModel,
dropout off: the export is in eval mode), loaded with the same initial weights
(the safetensors file the Tessera run starts from), fed the same batches in the
same order (the llm.c shard read as Tessera's loader reads it with
--no-shuffle: chunk c is tokens [c*B*T, c*B*T + B*T + 1), inputs chunk[:-1],
targets chunk[1:]), trained with bf16 autocast and torch.optim.AdamW with the
same hyperparameters and global-norm clipping. Writes one JSON line per step.

  python3 torch_curve.py --weights W.safetensors --data D.bin --steps 50 \
      --B 16 --T 1024 --n-layer 12 --n-embd 768 --n-head 12 --out curve.jsonl
  python3 torch_curve.py --hf-model llama-8x1024 --export-hf export_hf.py ...   (bench/llama)
"""
import argparse, json, time
import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel

p = argparse.ArgumentParser()
p.add_argument("--weights", required=True); p.add_argument("--data", required=True)
p.add_argument("--steps", type=int, default=50); p.add_argument("--B", type=int, default=16)
p.add_argument("--T", type=int, default=1024); p.add_argument("--n-layer", type=int, default=12)
p.add_argument("--n-embd", type=int, default=768); p.add_argument("--n-head", type=int, default=12)
p.add_argument("--lr", type=float, default=6e-4); p.add_argument("--beta1", type=float, default=0.9)
p.add_argument("--beta2", type=float, default=0.95); p.add_argument("--eps", type=float, default=1e-8)
p.add_argument("--weight-decay", type=float, default=0.1); p.add_argument("--grad-clip", type=float, default=1.0)
p.add_argument("--out", required=True)
p.add_argument("--hf-model", help="instead of the GPT-2 of --n-layer/--n-embd/--n-head: the model of this "
               "name in export_hf.py's table (e.g. llama-8x1024), the one the ONNX file was exported from")
p.add_argument("--export-hf", help="with --hf-model: the path of ../shared/tools/export_hf.py")
a = p.parse_args()

def load_safetensors(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little"); header = json.loads(f.read(n)); base = 8 + n
        raw = f.read()
    types = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32, "BOOL": np.bool_}
    out = {}
    for name, info in header.items():
        if name == "__metadata__": continue
        lo, hi = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(raw[lo:hi], dtype=types[info["dtype"]]).reshape(info["shape"]).copy())
    return out

dev = "cuda"
if a.hf_model:
    import importlib.util
    spec = importlib.util.spec_from_file_location("export_hf", a.export_hf)
    export_hf = importlib.util.module_from_spec(spec); spec.loader.exec_module(export_hf)
    model = export_hf.MODELS[a.hf_model][0]()
else:
    cfg = GPT2Config(n_layer=a.n_layer, n_embd=a.n_embd, n_head=a.n_head, use_cache=False, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa")
    model = GPT2LMHeadModel(cfg)
weights = load_safetensors(a.weights)
# torch.export keeps one name of a tied pair: GPT-2's exports call the shared
# embedding lm_head.weight.
if "transformer.wte.weight" not in weights and "lm_head.weight" in weights:
    weights["transformer.wte.weight"] = weights["lm_head.weight"]
state = {k: v for k, v in weights.items() if k in model.state_dict()}
missing, unexpected = model.load_state_dict(state, strict=False)
tied = getattr(model.config, "tie_word_embeddings", False)
missing = [m for m in missing if not (tied and m == "lm_head.weight")]  # tied to the embedding
if missing:
    raise SystemExit(f"torch_curve: weights missing from {a.weights}: {missing[:5]}")
model.tie_weights()
model.to(dev).train()
torch.backends.cuda.matmul.allow_tf32 = False
opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps,
                        weight_decay=a.weight_decay, fused=True)

with open(a.data, "rb") as f:
    header = np.frombuffer(f.read(1024), dtype="<i4")
    tokens = np.frombuffer(f.read(), dtype="<u2")[: header[2]].astype(np.int64)
chunk = a.B * a.T
with open(a.out, "w") as out:
    for step in range(a.steps):
        c = tokens[step * chunk: step * chunk + chunk + 1]
        if len(c) < chunk + 1:
            raise SystemExit(f"torch_curve: {a.data} holds too few tokens for {a.steps} steps")
        x = torch.from_numpy(c[:-1]).view(a.B, a.T).to(dev); y = torch.from_numpy(c[1:]).view(a.B, a.T).to(dev)
        t = time.time()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x).logits
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip if a.grad_clip > 0 else float("inf"))
        opt.step(); opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        out.write(json.dumps({"step": step + 1, "loss": loss.item(), "grad_norm": norm.item(),
                              "step_ms": (time.time() - t) * 1000}) + "\n")
print(f"torch_curve: wrote {a.steps} steps to {a.out}")
