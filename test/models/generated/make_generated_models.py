#!/usr/bin/env python3
"""Export the family of small Transformers the integration tests run (test/models/generated/*.onnx)
and PyTorch's reference numbers for each (test/models/generated/<name>.reference.json).

Each model varies one thing that matters to the importer, the fusion patterns or the training
builder (depth, width and head count, vocabulary and position-table sizes, grouped-query and
multi-query attention, rotary base, tied embeddings, MLP width, q/k/v biases, sliding-window masks,
parallel residual with partial rotary, transformers' default SDPA attention, Gemma-2's attention logit
softcapping) against the bundled tiny models, or is another architecture the importer must take (Falcon, RoBERTa, OPT, BLOOM). The settings are exactly those of the shared models: random init from a config
(nothing is downloaded), every parameter perturbed with N(0, 0.02) noise by
../shared/tools/export_hf.py's perturb(), the dynamo exporter with optimize=False, opset 20,
symbolic `batch` and `seq`, weights inline; only the per-node debugging provenance (stack traces,
FX node text, module class chains) is dropped to keep the files small. The fixture is
export_hf.py's reference() on the fixed [2, 32] batch (causal-LM loss, or MLM loss against the
input ids for BERT), plus, like the shared fixtures, `onnx_initializer`: the initializer that holds
each parameter (a tied weight appears once in ONNX, under one of its names), and `loss_kind`: the
training builder's loss (`causal-lm` or `mlm`) that computes the fixture's loss.

Needs torch, transformers and onnxscript (PyPI's CPU wheels are enough), run from the repository root:

  python3 test/models/generated/make_generated_models.py [--shared ../shared] [--only NAME ...]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from torch.export import Dim

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 0
# nn.Embedding(padding_idx=p) never trains row p, which no ONNX graph can say (the export is a Gather),
# so the fixture's batch must not hold a model's pad token (export() checks). OPT's and RoBERTa's default,
# 1, is in it: OPT pads with the last token instead, RoBERTa with 0 (RoBERTa numbers its positions from
# the pad id up, so its pad must be small).
OPT_PAD = 511
ROBERTA_PAD = 0


def configs():
    """name -> (what it varies, builder of the model, causal LM?, vocabulary, max positions[, exporter]),
    the exporter as export_graph() names it ("dynamo" unless given)."""
    import export_hf
    import export_llama_tiny
    from transformers import (BertConfig, BertForMaskedLM, BloomConfig, BloomForCausalLM, FalconConfig,
                              FalconForCausalLM, Gemma2Config, Gemma2ForCausalLM, GPT2Config, GPT2LMHeadModel,
                              GPTNeoXConfig, GPTNeoXForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig,
                              MistralForCausalLM, OPTConfig, OPTForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                              RobertaConfig, RobertaForMaskedLM)

    # The bundled tiny models' configurations are the baselines each variant departs from.
    gpt2 = export_hf.MODELS["gpt2-tiny"][0]().config.to_dict()
    bert = export_hf.MODELS["bert-tiny"][0]().config.to_dict()
    llama = export_llama_tiny.make_model().config.to_dict()
    # The decoder shape shared by the Llama-like families (Qwen2, Mistral, GPT-NeoX).
    decoder = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, max_position_embeddings=64, use_cache=False, attention_dropout=0.0)
    falcon = dict(decoder, hidden_dropout=0.0, bias=False, parallel_attn=True)

    def variant(config_class, model_class, base, attention="eager", **changes):
        # to_dict() leaves out the attention implementation: name it, or transformers picks "sdpa",
        # whose export differs from the bundled models' eager one.
        return lambda: model_class(config_class(**{**base, **changes}, attn_implementation=attention))

    def gpt2_variant(**changes):
        return variant(GPT2Config, GPT2LMHeadModel, gpt2, **changes)

    def llama_variant(**changes):
        return variant(LlamaConfig, LlamaForCausalLM, llama, **changes)

    return {
        "gpt2-layers1": ("GPT-2, 1 layer", gpt2_variant(n_layer=1), True, 512, 64),
        "gpt2-layers3": ("GPT-2, 3 layers", gpt2_variant(n_layer=3), True, 512, 64),
        "gpt2-layers4": ("GPT-2, 4 layers (interleaved:2 over 2 pipeline stages: a layer a chunk)",
                         gpt2_variant(n_layer=4), True, 512, 64),
        "gpt2-width48-heads6": ("GPT-2, d=48 with 6 heads (head size 8)",
                                gpt2_variant(n_embd=48, n_head=6), True, 512, 64),
        "gpt2-width32-heads2": ("GPT-2, d=32 with 2 heads (head size 16)",
                                gpt2_variant(n_embd=32, n_head=2), True, 512, 64),
        "gpt2-vocab300": ("GPT-2, vocabulary 300 (not a power of two)", gpt2_variant(vocab_size=300),
                          True, 300, 64),
        "gpt2-positions40": ("GPT-2, 40 positions (position table barely longer than seq 32)",
                             gpt2_variant(n_positions=40), True, 512, 40),
        "llama-mqa": ("Llama, multi-query attention (1 key/value head for 4 query heads)",
                      llama_variant(num_key_value_heads=1), True, 512, 64),
        "llama-mha": ("Llama, key/value heads = heads (no GQA)", llama_variant(num_key_value_heads=4),
                      True, 512, 64),
        "llama-rope500k": ("Llama, rope_theta 500000",
                           llama_variant(rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
                           True, 512, 64),
        "llama-tied": ("Llama, tied input and output embeddings", llama_variant(tie_word_embeddings=True),
                       True, 512, 64),
        "llama-intermediate96": ("Llama, SwiGLU intermediate 96 (1.5 x d)", llama_variant(intermediate_size=96),
                                 True, 512, 64),
        "llama-sdpa": ("Llama with transformers' default attention, SDPA: torch's decomposition (sqrt(scale) on "
                       "q and k, NaN guard on the probabilities, k transposed through 3-D reshapes)",
                       llama_variant(attention="sdpa"), True, 512, 64),
        "bert-layers3-heads8": ("BERT (masked LM), 3 layers, 8 heads (head size 8)",
                                variant(BertConfig, BertForMaskedLM, bert, num_hidden_layers=3,
                                        num_attention_heads=8), False, 512, 64),
        "qwen2-tiny": ("Qwen2: Llama-like with q/k/v biases, GQA 4/2",
                       variant(Qwen2Config, Qwen2ForCausalLM, decoder, num_key_value_heads=2), True, 512, 64),
        "mistral-tiny": ("Mistral: Llama-like with a sliding-window causal mask (window 16 < seq 32), GQA 4/2",
                         variant(MistralConfig, MistralForCausalLM, decoder, num_key_value_heads=2,
                                 sliding_window=16), True, 512, 64),
        # The tiny model's scaled scores stay below 0.06 at Gemma-2's cap (50) and scale (256^-0.5), where the
        # tanh is the identity to 1e-6: scale 1 and a cap of 0.5 put them in its bend (without the cap, q/k
        # gradients are 15 % larger).
        "gemma2-tiny": ("Gemma-2: attention logits softcapped (0.5 * tanh(s / 0.5)) between the scale (1) and the "
                        "mask, sliding-window (16) and global layers alternating, GQA 4/2, final logits softcapped, "
                        "(1 + w) RMSNorm, tanh GELU, tied",
                        variant(Gemma2Config, Gemma2ForCausalLM, decoder, num_key_value_heads=2, head_dim=16,
                                sliding_window=16, query_pre_attn_scalar=1, attn_logit_softcapping=0.5),
                        True, 512, 64),
        "gpt-neox-tiny": ("GPT-NeoX: parallel residual, partial rotary (25% of each head), biases, untied",
                          variant(GPTNeoXConfig, GPTNeoXForCausalLM, decoder, hidden_dropout=0.0,
                                  classifier_dropout=0.0), True, 512, 64),
        "falcon-mqa": ("Falcon (7B-style): multi-query attention (the fused projection split [heads, 1, 1]), "
                       "parallel attention and MLP off one layer norm, rotary, no biases, tied",
                       variant(FalconConfig, FalconForCausalLM, falcon, multi_query=True), True, 512, 64),
        "falcon-gqa": ("Falcon (40B-style new decoder architecture): GQA 4/2, the fused projection viewed as "
                       "[kv heads, group + 2, head dim] and indexed (key = qkv[..., -2, :]), two layer norms per "
                       "layer",
                       variant(FalconConfig, FalconForCausalLM, falcon, new_decoder_architecture=True,
                               num_kv_heads=2), True, 512, 64),
        "roberta-tiny": ("RoBERTa (masked LM): position ids from a CumSum over the input ids' non-padding mask, "
                         "token types gathered at them (GatherElements)",
                         variant(RobertaConfig, RobertaForMaskedLM, bert, max_position_embeddings=66,
                                 pad_token_id=ROBERTA_PAD), False, 512, 32),
        "opt-tiny": ("OPT: learned positions offset by 2 (a CumSum of the attention mask), ReLU MLP, pre-norm, "
                     "biases, tied",
                     variant(OPTConfig, OPTForCausalLM, decoder, ffn_dim=128, dropout=0.0, enable_bias=True,
                             pad_token_id=OPT_PAD),
                     True, 512, 64),
        "bloom-tiny": ("BLOOM: ALiBi position biases, embedding layer norm, fused query/key/value, tied",
                       variant(BloomConfig, BloomForCausalLM, decoder, n_layer=2, n_head=4), True, 512, 64),
        # The same models through the exporter's other paths: each linear weight is left only as a
        # transposed copy under a name of its own, and the tied head as a second, transposed copy.
        "llama-optimized": ("Llama exported with optimize=True (torch's default): every linear weight folded "
                            "into a transposed initializer outside the graph signature",
                            llama_variant(), True, 512, 64, "dynamo-optimized"),
        "bert-legacy-tied": ("BERT (masked LM) exported by the legacy exporter (dynamo=False): linear weights "
                             "as transposed copies, the tied head as a transposed copy of the word embeddings",
                             variant(BertConfig, BertForMaskedLM, bert), False, 512, 64, "legacy"),
    }


# Per-node provenance the exporter records for debugging: Python stack traces (with the exporting
# machine's paths), FX node text and module class chains. Over half of each file and read by nothing
# downstream; the graph, initializers and value_info metadata (which the importer reads) are untouched.
DEBUG_NODE_METADATA = ("pkg.torch.onnx.stack_trace", "pkg.torch.onnx.fx_node", "pkg.torch.onnx.class_hierarchy")


def drop_node_provenance(program):
    for node in program.model.graph.all_nodes():
        for key in DEBUG_NODE_METADATA:
            node.metadata_props.pop(key, None)


def initializer_names(path, model):
    """PyTorch parameter name -> (the ONNX initializer that holds it, whether it holds its transpose). A
    tied weight is exported once, under one of its names, and optimize=True and legacy exports keep a
    linear layer's weight only as a transposed copy under a name of their own, so a parameter missing
    by name is found by its (perturbed, hence unique) value, as it is or transposed."""
    import onnx
    from onnx import numpy_helper
    initializers = {tensor.name: numpy_helper.to_array(tensor) for tensor in onnx.load(path).graph.initializer}
    names = {}
    for name, parameter in model.named_parameters():
        if name in initializers:
            names[name] = (name, False)
            continue
        data = parameter.detach().numpy()
        matches = [(other, False) for other, array in initializers.items()
                   if array.shape == data.shape and np.array_equal(array, data)]
        if not matches and data.ndim == 2:
            matches = [(other, True) for other, array in initializers.items()
                       if array.shape == data.T.shape and np.array_equal(array, data.T)]
        if len(matches) != 1:
            raise SystemExit(f"parameter {name}: {len(matches)} initializers hold its value")
        names[name] = matches[0]
    return names


def export_graph(model, ids, exporter, max_positions, path):
    """Writes the ONNX export of `model` to `path` the way `exporter` says: "dynamo" (the family's
    setting), "dynamo-optimized" (the same with the exporter's graph optimizer, torch's default) or
    "legacy" (the TorchScript exporter, dynamo=False)."""
    if exporter == "legacy":
        torch.onnx.export(model, (ids,), path, dynamo=False, opset_version=20, input_names=["input_ids"],
                          output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}})
        return
    program = torch.onnx.export(
        model, (ids,), dynamo=True, optimize=exporter == "dynamo-optimized", opset_version=20,
        input_names=["input_ids"], output_names=["logits"],
        dynamic_shapes={"input_ids": {0: Dim("batch", min=1, max=4096), 1: Dim("seq", min=2, max=max_positions)}})
    drop_node_provenance(program)
    program.save(path, external_data=False)


def export(name, make, causal, vocab, max_positions, out, exporter="dynamo"):
    import export_hf
    torch.manual_seed(SEED)
    model = make()
    export_hf.perturb(model, SEED + 100)
    ids = torch.randint(0, vocab, (2, 32), generator=torch.Generator().manual_seed(SEED + 1))
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding) and module.padding_idx is not None:
            if (ids == module.padding_idx).any():
                raise SystemExit(f"{name}: the batch holds pad token {module.padding_idx}, whose embedding row "
                                 "PyTorch does not train and the exported graph does; pick another pad token")
    model.eval()
    path = os.path.join(out, name + ".raw.dyn.onnx")
    export_graph(model, ids, exporter, max_positions, path)
    holders = initializer_names(path, model)

    reference = export_hf.reference(model, ids, causal)
    reference["model"] = name
    # What tess-build-training's `loss` must be to compute this loss; the integration tests read it.
    reference["loss_kind"] = "causal-lm" if causal else "mlm"
    reference["loss_definition"] = (
        "mean cross-entropy of logits[:, t] against input_ids[:, t+1] (causal LM)" if causal else
        "mean cross-entropy of logits[:, t] against input_ids[:, t] (all positions)")
    reference["note"] = (
        f"Produced by PyTorch {torch.__version__.split('+')[0]} / transformers {__import__('transformers').__version__} "
        f"(fp32, CPU) by make_generated_models.py from the same model that was exported to {name}.raw.dyn.onnx. "
        "'onnx_initializer' names the ONNX initializer that holds each parameter; where it holds the "
        "transpose ('onnx_transposed'), after_step_first8 are the first elements of the transposed "
        "parameter, as that initializer lays them out.")
    # reference() stepped the model: its parameters are now the values after the step.
    after = dict(model.named_parameters())
    for parameter, info in reference["params"].items():
        holder, transposed = holders[parameter]
        info["onnx_initializer"] = holder
        if transposed:
            info["onnx_transposed"] = True
            info["after_step_first8"] = after[parameter].detach().T.flatten()[:8].tolist()
    with open(os.path.join(out, name + ".reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
    print(f"{name}: {os.path.getsize(path)} bytes, {reference['num_parameters']} parameters, "
          f"loss {reference['loss']:.6f}")
    return reference["num_parameters"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", default="../shared", help="the shared/ folder holding tools/export_hf.py")
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--only", nargs="*", help="export only these models")
    ap.add_argument("--list", action="store_true", help="print each model and what it varies, then stop")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.shared, "tools"))
    sys.path.insert(0, os.path.dirname(HERE))  # export_llama_tiny.py
    models = configs()
    if a.list:
        for name, (what, *_ ) in models.items():
            print(f"{name}: {what}")
        return
    unknown = set(a.only or ()) - set(models)
    if unknown:
        ap.error(f"unknown models: {', '.join(sorted(unknown))}")
    os.makedirs(a.out, exist_ok=True)
    for name, (_, make, causal, vocab, max_positions, *exporter) in models.items():
        if a.only and name not in a.only:
            continue
        export(name, make, causal, vocab, max_positions, a.out, *exporter)


if __name__ == "__main__":
    main()
