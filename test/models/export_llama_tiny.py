#!/usr/bin/env python3
"""Export the tiny Llama used by the tests (test/models/llama-tiny.raw.dyn.onnx) and its PyTorch
reference numbers (test/fixtures/llama-tiny.reference.json).

The settings are those of ../shared/tools/export_hf.py, whose perturbation and reference code this
script reuses, so that llama-tiny sits beside the GPT-2 and BERT exports made there: random init
from a config (nothing is downloaded), every parameter perturbed with N(0, 0.02) noise, dynamo
exporter with optimize=False, symbolic `batch` and `seq`, opset 20, weights inline.

Needs torch and transformers (PyPI's CPU wheels are enough), run from the repository root:

  python3 test/models/export_llama_tiny.py [--shared ../shared] [--out test/models] [--fixtures test/fixtures]

With --meta it writes test/models/llama-tiny.meta.dyn.onnx instead: the same model exported graph-only
by export_hf.py --meta (built on the meta device, so no tensor has values: the case of a model too
large to export with its weights), with the nodes' debugging provenance dropped to keep it small.
"""
import argparse
import os
import sys

import torch
from torch.export import Dim
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB, MAX_POSITIONS, SEED = 512, 64, 0


def make_model():
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=MAX_POSITIONS,
        use_cache=False, attn_implementation="eager", attention_dropout=0.0))


def export_meta(export_hf, out):
    import onnx
    export_hf.MODELS["llama-tiny"] = (make_model, True, VOCAB, MAX_POSITIONS)
    sys.argv = ["export_hf.py", "--model", "llama-tiny", "--meta", "--out", out]
    export_hf.main()
    path = os.path.join(out, "llama-tiny.meta.dyn.onnx")
    model = onnx.load(path, load_external_data=False)
    for node in model.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    for value in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        del value.metadata_props[:]
    onnx.save(model, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, graph only)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default="../shared", help="the shared/ folder holding tools/export_hf.py")
    ap.add_argument("--out", default="test/models")
    ap.add_argument("--fixtures", default="test/fixtures")
    ap.add_argument("--meta", action="store_true", help="write the graph-only export instead")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.shared, "tools"))
    import export_hf  # the reference exporter: perturb() and reference() keep the fixtures comparable
    if a.meta:
        return export_meta(export_hf, a.out)

    torch.manual_seed(SEED)
    model = make_model()
    export_hf.perturb(model, SEED + 100)
    ids = torch.randint(0, VOCAB, (2, 32), generator=torch.Generator().manual_seed(SEED + 1))
    model.eval()
    program = torch.onnx.export(
        model, (ids,), dynamo=True, optimize=False, opset_version=20, input_names=["input_ids"],
        output_names=["logits"],
        dynamic_shapes={"input_ids": {0: Dim("batch", min=1, max=4096), 1: Dim("seq", min=2, max=MAX_POSITIONS)}})
    path = os.path.join(a.out, "llama-tiny.raw.dyn.onnx")
    program.save(path, external_data=False)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, "
          f"{sum(p.numel() for p in model.parameters())} parameters)")

    import json
    ref = export_hf.reference(model, ids, causal=True)
    ref["model"] = "llama-tiny"
    fixture = os.path.join(a.fixtures, "llama-tiny.reference.json")
    with open(fixture, "w") as f:
        json.dump(ref, f, indent=1)
    print(f"wrote {fixture} (loss {ref['loss']:.6f})")


if __name__ == "__main__":
    main()
