#!/usr/bin/env python3
"""Exports llama-padding.raw.dyn.onnx: a one-layer Llama (d=32, GQA 2/1, SwiGLU 64, vocabulary 64)
with transformers' default attention, exported by torch.onnx.export(dynamo=True) with both
input_ids and attention_mask as inputs, batch and seq symbolic. Its mask is the padding read
from the run-time attention_mask and-ed with the causal comparison of positions: the case of
test/Import/ONNX/long-context-masks.test in which the padding stays a [batch, 1, 1, seq] mask
operand and the band becomes `causal`. Kept out of test/models/*.onnx, whose models take
input_ids alone (ort_parity.py, the fixtures).

  python3 export_llama_padding.py [OUT_DIR]     # needs torch, transformers, onnxscript, onnx
"""
import os
import sys

import torch
from torch.export import Dim
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=1, intermediate_size=64, vocab_size=64,
                                         max_position_embeddings=64, use_cache=False))
    model.eval()
    ids = torch.randint(0, 64, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    dims = {"batch": Dim("batch", min=1, max=4096), "seq": Dim("seq", min=2, max=64)}
    shapes = {"input_ids": {0: dims["batch"], 1: dims["seq"]},
              "attention_mask": {0: dims["batch"], 1: dims["seq"]}}
    program = torch.onnx.export(model, (), kwargs={"input_ids": ids, "attention_mask": mask}, dynamo=True,
                                optimize=False, input_names=["input_ids", "attention_mask"],
                                output_names=["logits"], dynamic_shapes=shapes)
    path = os.path.join(out, "llama-padding.raw.dyn.onnx")
    program.save(path)
    # The exporter's per-node provenance (stack traces, module names) is nine
    # tenths of the file and means nothing to the graph: dropped to keep the
    # test model small.
    import onnx
    graph = onnx.load(path)
    for node in graph.graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
    onnx.save(graph, path)


if __name__ == "__main__":
    main()
