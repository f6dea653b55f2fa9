#!/usr/bin/env python3
"""Exports Llama 3 8B's shape (32 layers, d=4096, GQA 32/8, SwiGLU 14336,
vocabulary 128,256, untied; plain rotary) graph-only, with
../shared/tools/export_hf.py's settings (--meta): the compile-time case of
bench/llama/build.sh (issue 21: an 8B program in under 90 s). One H200
cannot hold its training state (16 bytes a parameter), so it is compiled,
not run.

With LAYERS, the same layer shape with fewer layers, as llama3-8b-lLAYERS:
the head-dim-128, d=4096 case that does fit (bench/llama/run.sh runs 4).

  python3 export_llama3_8b.py SHARED_TOOLS_DIR OUT_DIR [LAYERS]
"""
import sys

def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    layers = int(sys.argv[3]) if len(sys.argv) == 4 else 32
    name = "llama3-8b" if layers == 32 else f"llama3-8b-l{layers}"
    sys.path.insert(0, sys.argv[1])
    import export_hf
    from transformers import LlamaConfig, LlamaForCausalLM
    export_hf.MODELS[name] = (lambda: LlamaForCausalLM(LlamaConfig(
        hidden_size=4096, num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=14336, vocab_size=128256, tie_word_embeddings=False, rope_theta=500000.0,
        max_position_embeddings=8192, use_cache=False)), True, 128256, 8192)
    sys.argv = ["export_hf.py", "--model", name, "--meta", "--out", sys.argv[2]]
    export_hf.main()

if __name__ == "__main__":
    main()
