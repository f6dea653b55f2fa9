#!/usr/bin/env python3
"""Exports the benchmark's Llama-family shapes that ../shared/tools/export_hf.py
does not define, graph-only, with its settings (--meta):

  llama3-8b       Llama 3 8B (32 layers, d=4096, GQA 32/8, SwiGLU 14336,
                  vocabulary 128,256, untied): the compile-time case of
                  bench/llama/build.sh (issue 21: an 8B program in under
                  90 s). One H200 cannot hold its training state (16 bytes a
                  parameter), so it is compiled, not run.
  llama3-8b-lN    the same layer shape with N layers: the head-dim-128,
                  d=4096 case that does fit (run.sh runs N = 4).
  qwen2.5-0.5b    Qwen2.5 0.5B (24 layers, d=896, GQA 14/2, SwiGLU 4864,
                  vocabulary 151,936, tied, q/k/v biases, rotary base 1e6):
                  the widths that are not powers of two, the biases Llama
                  lacks and the largest vocabulary of the family.

  python3 export_shape.py SHARED_TOOLS_DIR OUT_DIR NAME
"""
import re
import sys


def model_of(name):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    layers = re.fullmatch(r"llama3-8b(?:-l(\d+))?", name)
    if layers:
        count = int(layers.group(1) or 32)
        return (lambda: LlamaForCausalLM(LlamaConfig(
            hidden_size=4096, num_hidden_layers=count, num_attention_heads=32, num_key_value_heads=8,
            intermediate_size=14336, vocab_size=128256, tie_word_embeddings=False, rope_theta=500000.0,
            max_position_embeddings=8192, use_cache=False)), True, 128256, 8192)
    if name == "qwen2.5-0.5b":
        return (lambda: Qwen2ForCausalLM(Qwen2Config(
            hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
            intermediate_size=4864, vocab_size=151936, tie_word_embeddings=True, rope_theta=1000000.0,
            max_position_embeddings=4096, use_cache=False, use_sliding_window=False)), True, 151936, 4096)
    sys.exit(f"export_shape.py: unknown shape '{name}' (llama3-8b, llama3-8b-lN, qwen2.5-0.5b)")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    tools, out, name = sys.argv[1:]
    sys.path.insert(0, tools)
    import export_hf
    export_hf.MODELS[name] = model_of(name)
    sys.argv = ["export_hf.py", "--model", name, "--meta", "--out", out]
    export_hf.main()


if __name__ == "__main__":
    main()
