#!/usr/bin/env python3
"""Builds the small ONNX models that the importer's lit tests read, and writes them beside this file.

Each model isolates one pattern the importer must recognize (or one way an input can be wrong) and
is named after it; README.md beside this file lists them. The graphs are written the way PyTorch's
dynamo exporter writes them (IR 10, opset 20, scalars as Constant nodes, parameters as named
initializers, the same op chains and constants as in the real exports in test/models), so that a
pattern matched here is matched in a real model too.

Run from anywhere, with onnx 1.23 (scripts/install-deps.sh --python puts it in .venv):

  .venv/bin/python test/Import/ONNX/Inputs/make_test_models.py [--no-verify]

The output is deterministic: rerunning it rewrites byte-identical files. Unless --no-verify is
given, every well-formed model is also checked with onnx.checker and, when onnxruntime is
installed, run and compared with a NumPy statement of what it computes.
"""
import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 10
OPSET = 20
FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
# The additive-mask value both GPT-2 and Llama exports use: the lowest finite float32.
MASK_MIN = -3.4028234663852886e38
INT64_MAX = 9223372036854775807
HERE = os.path.dirname(os.path.abspath(__file__))


class GraphBuilder:
    """A small helper that names values the way the exporter does (val_N for constants)."""

    def __init__(self, name):
        self.name = name
        self.nodes, self.inputs, self.outputs, self.initializers = [], [], [], []
        self.counter = 0

    def fresh(self, prefix="val"):
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def input(self, name, shape, elem_type=FLOAT):
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def output(self, name, shape, elem_type=FLOAT):
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def initializer(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def constant(self, value, dtype=np.float32):
        """A Constant node holding a tensor (a 0-d tensor for a Python scalar), as the exporter emits."""
        out = self.fresh()
        tensor = numpy_helper.from_array(np.array(value, dtype=dtype), out)
        self.nodes.append(helper.make_node("Constant", [], [out], name=f"node_{out}", value=tensor))
        return out

    def constant_ints(self, values):
        """A 1-D int64 Constant written with value_ints, the exporter's form for shapes and axes."""
        out = self.fresh()
        self.nodes.append(helper.make_node("Constant", [], [out], name=f"node_{out}", value_ints=list(values)))
        return out

    def op(self, op_type, inputs, out=None, domain="", name=None, **attrs):
        out = out or self.fresh()
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=name or f"node_{out}",
                                           domain=domain, **attrs))
        return out

    def model(self, opsets=None):
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.initializers)
        opsets = opsets or [("", OPSET)]
        model = helper.make_model(graph, ir_version=IR_VERSION,
                                  opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                                  producer_name="tessera make_test_models.py")
        return model


def with_parameters(model, shapes):
    """`model` with the dynamo exporter's graph-signature metadata naming each of `shapes` (name -> shape)
    a PARAMETER on its value_info; any other initializer is then outside the signature."""
    for name, shape in shapes.items():
        info = helper.make_tensor_value_info(name, FLOAT, shape)
        entry = info.metadata_props.add()
        entry.key = "pkg.torch.export.graph_signature.InputSpec.kind"
        entry.value = "PARAMETER"
        model.graph.value_info.append(info)
    return model


def rng(seed):
    return np.random.default_rng(seed)


def weights(seed, shape, scale=0.1):
    return (rng(seed).standard_normal(shape) * scale).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------------

def gelu_tanh():
    """GPT-2's NewGELU as the exporter writes it: 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))."""
    g = GraphBuilder("gelu_tanh")
    x = g.input("x", [2, 8, 16])
    half = g.op("Mul", [x, g.constant(0.5)], out="mul")
    cube = g.op("Pow", [x, g.constant(3.0)], out="pow_1")
    scaled_cube = g.op("Mul", [cube, g.constant(0.044715)], out="mul_1")
    inner = g.op("Add", [x, scaled_cube], out="add")
    one = g.constant(1.0)
    scaled = g.op("Mul", [inner, g.constant(math.sqrt(2.0 / math.pi))], out="mul_2")
    tanh = g.op("Tanh", [scaled], out="tanh")
    shifted = g.op("Add", [tanh, one], out="add_1")
    g.op("Mul", [half, shifted], out="y")
    g.output("y", [2, 8, 16])
    return g.model()


def gelu_erf(divide):
    """The exact GELU written out: x*0.5*(1+erf(x/sqrt(2))), dividing by sqrt(2) or multiplying by 1/sqrt(2)."""
    g = GraphBuilder("gelu_erf" if divide else "gelu_erf_mul")
    x = g.input("x", [2, 8, 16])
    if divide:
        scaled = g.op("Div", [x, g.constant(1.4142135)], out="div")
    else:
        scaled = g.op("Mul", [x, g.constant(0.70710678)], out="mul_1")
    erf = g.op("Erf", [scaled], out="erf")
    shifted = g.op("Add", [erf, g.constant(1.0)], out="add")
    half = g.op("Mul", [x, g.constant(0.5)], out="mul")
    g.op("Mul", [half, shifted], out="y")
    g.output("y", [2, 8, 16])
    return g.model()


def gelu_native():
    """ONNX's own Gelu (opset 20), exact and tanh-approximated, as BERT's export uses."""
    g = GraphBuilder("gelu_native")
    x = g.input("x", [2, 8, 16])
    g.op("Gelu", [x], out="y_exact", approximate="none")
    g.op("Gelu", [x], out="y_tanh", approximate="tanh")
    g.output("y_exact", [2, 8, 16])
    g.output("y_tanh", [2, 8, 16])
    return g.model()


def swiglu():
    """Llama's MLP gate: silu(x W1^T) * (x W3^T), silu written as x*Sigmoid(x), weights in torch layout."""
    g = GraphBuilder("swiglu")
    x = g.input("x", [2, 8, 16])
    gate_w = g.initializer("mlp.gate_proj.weight", weights(11, [32, 16]))
    up_w = g.initializer("mlp.up_proj.weight", weights(12, [32, 16]))
    gate = g.op("MatMul", [x, g.op("Transpose", [gate_w], perm=[1, 0])], out="linear")
    sigmoid = g.op("Sigmoid", [gate])
    silu = g.op("Mul", [gate, sigmoid], out="silu")
    up = g.op("MatMul", [x, g.op("Transpose", [up_w], perm=[1, 0])], out="linear_1")
    g.op("Mul", [silu, up], out="y")
    g.output("y", [2, 8, 32])
    return g.model()


# ---------------------------------------------------------------------------------------------
# Normalizations
# ---------------------------------------------------------------------------------------------

def layer_norm_decomposed():
    """LayerNorm written out: (x - mean) / sqrt(var + eps) * gamma + beta, over the last axis."""
    g = GraphBuilder("layer_norm_decomposed")
    x = g.input("x", [2, 8, 16])
    gamma = g.initializer("ln.weight", 1.0 + weights(21, [16]))
    beta = g.initializer("ln.bias", weights(22, [16]))
    last_axis = g.constant_ints([-1])
    mean = g.op("ReduceMean", [x, last_axis], out="mean", keepdims=1)
    centered = g.op("Sub", [x, mean], out="sub")
    squared = g.op("Pow", [centered, g.constant(2.0)], out="pow_1")
    variance = g.op("ReduceMean", [squared, last_axis], out="mean_1", keepdims=1)
    shifted = g.op("Add", [variance, g.constant(1e-5)], out="add")
    std = g.op("Sqrt", [shifted], out="sqrt")
    normalized = g.op("Div", [centered, std], out="div")
    scaled = g.op("Mul", [normalized, gamma], out="mul")
    g.op("Add", [scaled, beta], out="y")
    g.output("y", [2, 8, 16])
    return g.model()


def layer_norm_native():
    """ONNX's LayerNormalization with scale and bias, exactly as the GPT-2 and BERT exports write it."""
    g = GraphBuilder("layer_norm_native")
    x = g.input("x", [2, 8, 16])
    gamma = g.initializer("ln.weight", 1.0 + weights(21, [16]))
    beta = g.initializer("ln.bias", weights(22, [16]))
    g.op("LayerNormalization", [x, gamma, beta], out="y", axis=-1, epsilon=1e-5, stash_type=1)
    g.output("y", [2, 8, 16])
    return g.model()


def rms_norm(reciprocal):
    """Llama's RMSNorm: weight * x * 1/sqrt(mean(x^2) + eps), via Reciprocal or via Div(1, Sqrt)."""
    g = GraphBuilder("rms_norm_decomposed" if reciprocal else "rms_norm_rsqrt")
    x = g.input("x", [2, 8, 16])
    weight = g.initializer("norm.weight", 1.0 + weights(31, [16]))
    as_float = g.op("Cast", [x], out="_to_copy", to=FLOAT)
    squared = g.op("Pow", [as_float, g.constant(2.0)], out="pow_1")
    mean = g.op("ReduceMean", [squared, g.constant_ints([-1])], out="mean", keepdims=1)
    shifted = g.op("Add", [mean, g.constant(1e-6)], out="add")
    root = g.op("Sqrt", [shifted])
    if reciprocal:
        inverse = g.op("Reciprocal", [root], out="rsqrt")
    else:
        inverse = g.op("Div", [g.constant(1.0), root], out="rsqrt")
    normalized = g.op("Mul", [as_float, inverse], out="mul")
    # The exporter writes `self.weight * hidden_states`: the weight is the first operand.
    g.op("Mul", [weight, normalized], out="y")
    g.output("y", [2, 8, 16])
    return g.model()


# ---------------------------------------------------------------------------------------------
# Attention
# ---------------------------------------------------------------------------------------------

def causal_additive_mask(g, seq):
    """The [1, 1, seq, seq] additive causal mask, built like the GPT-2 export builds it: positions from
    Range, key <= query as a bool matrix, And with an all-true scalar, and Where(allowed, 0, MASK_MIN)
    with the 0 coming from a lifted scalar initializer. Here the sequence length is a constant."""
    zero_i, seq_i, one_i = g.constant(0, np.int64), g.constant(seq, np.int64), g.constant(1, np.int64)
    query_positions = g.op("Range", [zero_i, seq_i, one_i], out="arange")
    key_positions = g.op("Range", [zero_i, seq_i, one_i], out="arange_1")
    query_column = g.op("Unsqueeze", [query_positions, g.constant_ints([1])], out="unsqueeze")
    key_row = g.op("Unsqueeze", [key_positions, g.constant_ints([0])], out="unsqueeze_1")
    key_not_after_query = g.op("LessOrEqual", [key_row, query_column], out="le")
    all_true = g.op("Cast", [g.op("Expand", [g.constant(1.0), g.constant([], np.int64)])], out="new_ones",
                    to=TensorProto.BOOL)
    allowed = g.op("And", [all_true, key_not_after_query], out="bitwise_and")
    allowed_4d = g.op("Unsqueeze", [allowed, g.constant_ints([0, 1])], out="unsqueeze_2")
    zero = g.op("Identity", [g.initializer("lifted_tensor_0", np.array(0.0, np.float32))], out="clone")
    return g.op("Where", [allowed_4d, zero, g.constant(MASK_MIN)], out="where")


def scaled_scores(g, q, k, head_dim):
    """q @ k^T scaled by 1/sqrt(head_dim) after the MatMul, as the eager attention exports do."""
    key_transposed = g.op("Transpose", [k], out="transpose", perm=[0, 1, 3, 2])
    scores = g.op("MatMul", [q, key_transposed], out="matmul")
    return g.op("Mul", [scores, g.constant(1.0 / math.sqrt(head_dim))], out="mul")


def attention_from_scores(g, scores, mask, v):
    masked = g.op("Add", [scores, mask], out="add")
    probabilities = g.op("Softmax", [masked], out="softmax", axis=-1)
    return g.op("MatMul", [probabilities, v], out="y")


def attention_causal():
    g = GraphBuilder("attention_causal")
    q, k, v = (g.input(n, [2, 4, 16, 8]) for n in ("q", "k", "v"))
    scores = scaled_scores(g, q, k, 8)
    attention_from_scores(g, scores, causal_additive_mask(g, 16), v)
    g.output("y", [2, 4, 16, 8])
    return g.model()


def attention_causal_tril():
    """The causal mask as a precomputed bool lower-triangular buffer (the form of older GPT-2 code,
    which registered `attn.bias`), selected with Where like the export does."""
    g = GraphBuilder("attention_causal_tril")
    q, k, v = (g.input(n, [2, 4, 16, 8]) for n in ("q", "k", "v"))
    scores = scaled_scores(g, q, k, 8)
    tril = g.initializer("attn.bias", np.tril(np.ones((1, 1, 16, 16), dtype=bool)))
    zero = g.constant(0.0)
    mask = g.op("Where", [tril, zero, g.constant(MASK_MIN)], out="where")
    attention_from_scores(g, scores, mask, v)
    g.output("y", [2, 4, 16, 8])
    return g.model()


def attention_mask_input():
    """The additive mask is a graph input: any mask may arrive, so this must not be taken as causal."""
    g = GraphBuilder("attention_mask_input")
    q, k, v = (g.input(n, [2, 4, 16, 8]) for n in ("q", "k", "v"))
    mask = g.input("attention_mask", [2, 1, 16, 16])
    scores = scaled_scores(g, q, k, 8)
    attention_from_scores(g, scores, mask, v)
    g.output("y", [2, 4, 16, 8])
    return g.model()


def attention_sdpa():
    """torch's decomposed scaled_dot_product_attention, as exports with transformers' default "sdpa"
    attention write it: sqrt(scale) (a Sqrt of a CastLike against a run-time tensor, so not folded at
    import) multiplies q and kᵀ each, the bool causal mask becomes Where(mask, 0, -inf), and the
    probabilities are guarded by Where(IsNaN(p), 0, p) (rows with every key hidden)."""
    g = GraphBuilder("attention_sdpa")
    q, k, v = (g.input(n, [2, 4, 16, 8]) for n in ("q", "k", "v"))
    scale = g.op("CastLike", [g.constant(1.0 / math.sqrt(8)), q], out="val_scale")
    root = g.op("Sqrt", [scale], out="val_root")
    key_transposed = g.op("Transpose", [k], out="transpose", perm=[0, 1, 3, 2])
    scaled_query = g.op("Mul", [q, root], out="val_query")
    scaled_key = g.op("Mul", [key_transposed, root], out="val_key")
    tril = g.initializer("causal_mask", np.tril(np.ones((16, 16), dtype=bool)))
    mask = g.op("Where", [tril, g.constant(0.0), g.constant(-np.inf)], out="val_mask")
    scores = g.op("Add", [g.op("MatMul", [scaled_query, scaled_key], out="val_scores"), mask], out="val_masked")
    probabilities = g.op("Softmax", [scores], out="val_softmax", axis=-1)
    is_nan = g.op("IsNaN", [probabilities], out="val_isnan")
    guarded = g.op("Where", [is_nan, g.constant(0.0), probabilities], out="val_guarded")
    g.op("MatMul", [guarded, v], out="y")
    g.output("y", [2, 4, 16, 8])
    return g.model()


def repeat_key_value_heads(g, x, batch, kv_heads, repeats, seq, head_dim, tag):
    """transformers' repeat_kv as exported: Unsqueeze a heads-group axis, Expand it, clone, Reshape."""
    grouped = g.op("Unsqueeze", [x, g.constant_ints([2])], out=f"unsqueeze_{tag}")
    expanded = g.op("Expand", [grouped, g.constant_ints([batch, kv_heads, repeats, seq, head_dim])],
                    out=f"expand_{tag}")
    cloned = g.op("Identity", [expanded], out=f"clone_{tag}")
    return g.op("Reshape", [cloned, g.constant_ints([batch, kv_heads * repeats, seq, head_dim])],
                out=f"_unsafe_view_{tag}", allowzero=1)


def attention_gqa():
    """Llama grouped-query attention: 4 query heads share 2 key/value heads, causal."""
    g = GraphBuilder("attention_gqa")
    q = g.input("q", [2, 4, 16, 8])
    k = g.input("k", [2, 2, 16, 8])
    v = g.input("v", [2, 2, 16, 8])
    k_repeated = repeat_key_value_heads(g, k, 2, 2, 2, 16, 8, "k")
    v_repeated = repeat_key_value_heads(g, v, 2, 2, 2, 16, 8, "v")
    scores = scaled_scores(g, q, k_repeated, 8)
    attention_from_scores(g, scores, causal_additive_mask(g, 16), v_repeated)
    g.output("y", [2, 4, 16, 8])
    return g.model()


def rotary():
    """Llama's rotary embedding on [batch, heads, seq, head_dim] = [2, 4, 16, 8]: the inv_freq buffer
    times positions from Range, cos and sin of the doubled frequencies, and rotate_half built from
    Slice, Neg and Concat."""
    g = GraphBuilder("rotary")
    x = g.input("x", [2, 4, 16, 8])
    head_dim, seq = 8, 16
    inv_freq = 1.0 / (10000.0 ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    inv_freq = g.initializer("rotary_emb.inv_freq", inv_freq.astype(np.float32))
    positions = g.op("Range", [g.constant(0, np.int64), g.constant(seq, np.int64), g.constant(1, np.int64)],
                     out="arange")
    position_ids = g.op("Unsqueeze", [positions, g.constant_ints([0])], out="unsqueeze")
    position_column = g.op("Unsqueeze", [position_ids, g.constant_ints([2])], out="unsqueeze_1")
    position_float = g.op("Cast", [position_column], out="_to_copy", to=FLOAT)
    frequencies = g.op("Mul", [position_float, inv_freq], out="mul")
    angles = g.op("Concat", [frequencies, frequencies], out="cat", axis=-1)
    attention_scaling = g.constant(1.0)
    cos = g.op("Mul", [g.op("Cos", [angles], out="cos"), attention_scaling], out="mul_1")
    sin = g.op("Mul", [g.op("Sin", [angles], out="sin"), attention_scaling], out="mul_2")
    cos_4d = g.op("Unsqueeze", [cos, g.constant_ints([1])], out="unsqueeze_2")
    sin_4d = g.op("Unsqueeze", [sin, g.constant_ints([1])], out="unsqueeze_3")
    half = head_dim // 2
    last, step = g.constant_ints([3]), g.constant_ints([1])
    first_half = g.op("Slice", [x, g.constant_ints([0]), g.constant_ints([half]), last, step], out="slice_1")
    second_half = g.op("Slice", [x, g.constant_ints([half]), g.constant_ints([INT64_MAX]), last, step],
                       out="slice_2")
    rotated = g.op("Concat", [g.op("Neg", [second_half], out="neg"), first_half], out="cat_1", axis=-1)
    g.op("Add", [g.op("Mul", [x, cos_4d], out="mul_3"), g.op("Mul", [rotated, sin_4d], out="mul_4")], out="y")
    g.output("y", [2, 4, 16, 8])
    return g.model()


# ---------------------------------------------------------------------------------------------
# Linear layers
# ---------------------------------------------------------------------------------------------

def linear_gemm():
    """Gemm with bias, once with W as [in, out] (GPT-2's Conv1D, transB=0) and once as [out, in] (transB=1)."""
    g = GraphBuilder("linear_gemm")
    x = g.input("x", [8, 16])
    w_in_out = g.initializer("conv1d.weight", weights(41, [16, 32]))
    b_in_out = g.initializer("conv1d.bias", weights(42, [32]))
    w_out_in = g.initializer("linear.weight", weights(43, [32, 16]))
    b_out_in = g.initializer("linear.bias", weights(44, [32]))
    g.op("Gemm", [x, w_in_out, b_in_out], out="y_conv1d", alpha=1.0, beta=1.0, transA=0, transB=0)
    g.op("Gemm", [x, w_out_in, b_out_in], out="y_linear", alpha=1.0, beta=1.0, transA=0, transB=1)
    g.output("y_conv1d", [8, 32])
    g.output("y_linear", [8, 32])
    return g.model()


def linear_matmul_add():
    """nn.Linear on a rank-3 input as exported: MatMul by the transposed [out, in] weight, then Add bias."""
    g = GraphBuilder("linear_matmul_add")
    x = g.input("x", [2, 8, 16])
    weight = g.initializer("linear.weight", weights(51, [32, 16]))
    bias = g.initializer("linear.bias", weights(52, [32]))
    product = g.op("MatMul", [x, g.op("Transpose", [weight], perm=[1, 0])], out="matmul")
    g.op("Add", [product, bias], out="y")
    g.output("y", [2, 8, 32])
    return g.model()


def optimized_signature():
    """What torch.onnx.export(..., optimize=True) leaves of two bias-free nn.Linear layers: the graph
    signature (the value_info metadata pkg.torch.export.graph_signature.InputSpec.kind) names fc1.weight
    a PARAMETER, but the optimizer folded fc2's Transpose(weight) into a new initializer, val_7, which the
    signature does not name."""
    g = GraphBuilder("optimized_signature")
    x = g.input("x", [2, 16])
    weight = g.initializer("fc1.weight", weights(61, [16, 16]))
    folded = g.initializer("val_7", weights(62, [16, 8]))
    hidden = g.op("MatMul", [x, g.op("Transpose", [weight], perm=[1, 0])], out="hidden")
    g.op("MatMul", [hidden, folded], out="y")
    g.output("y", [2, 8])
    return with_parameters(g.model(), {"fc1.weight": [16, 16]})


def folded_names():
    """optimized_signature with the record onnxscript's optimizer keeps of what it folded (the value_info
    metadata pkg.onnxscript.optimizer.folded_from): `val_7` [16, 8] was folded from fc2.weight alone, which
    the export no longer holds; `val_8` [16, 8] from two parameters (a fused weight), so no one name; `val_9`
    [16, 8] claims fc2.weight too (other values), and a name is given once."""
    g = GraphBuilder("folded_names")
    x = g.input("x", [2, 16])
    weight = g.initializer("fc1.weight", weights(61, [16, 16]))
    g.initializer("val_7", weights(62, [16, 8]))
    g.initializer("val_8", weights(63, [16, 8]))
    g.initializer("val_9", weights(64, [16, 8]))
    hidden = g.op("MatMul", [x, g.op("Transpose", [weight], perm=[1, 0])], out="hidden")
    pair = g.op("Add", [g.op("MatMul", [hidden, "val_7"]), g.op("MatMul", [hidden, "val_8"])])
    g.op("Add", [pair, g.op("MatMul", [hidden, "val_9"])], out="y")
    g.output("y", [2, 8])
    model = with_parameters(g.model(), {"fc1.weight": [16, 16]})
    for name, origins in (("val_7", ["fc2.weight"]), ("val_8", ["fc3.weight", "fc4.weight"]),
                          ("val_9", ["fc2.weight"])):
        info = helper.make_tensor_value_info(name, FLOAT, [16, 8])
        entry = info.metadata_props.add()
        entry.key = "pkg.onnxscript.optimizer.folded_from"
        entry.value = repr(origins)
        model.graph.value_info.append(info)
    return model


def folded_constant():
    """An optimize=True export's GPT-2 position embeddings: the optimizer gathered transformer.wpe.weight at
    the positions 0..3 into a constant, `embedding_1` [4, 8], and dropped the parameter; its folded_from
    record names the parameter among the values it computed with (`arange`, `val_4`). `proj.weight` is
    a PARAMETER."""
    g = GraphBuilder("folded_constant")
    x = g.input("x", [4, 8])
    g.initializer("embedding_1", weights(101, [4, 8]))
    g.initializer("proj.weight", weights(102, [8, 8]))
    g.op("MatMul", [g.op("Add", [x, "embedding_1"]), "proj.weight"], out="y")
    g.output("y", [4, 8])
    model = with_parameters(g.model(), {"proj.weight": [8, 8]})
    info = helper.make_tensor_value_info("embedding_1", FLOAT, [4, 8])
    entry = info.metadata_props.add()
    entry.key = "pkg.onnxscript.optimizer.folded_from"
    entry.value = repr(["arange", "transformer.wpe.weight", "val_4"])
    model.graph.value_info.append(info)
    return model


def tied_head_copy():
    """A legacy export (dynamo=False, no graph signature) of a tied head: the embedding `embed.weight`
    [8, 4] for the lookup, and its transpose stored again as `onnx::MatMul_7` [4, 8] for the head."""
    g = GraphBuilder("tied_head_copy")
    ids = g.input("ids", [2, 3], INT64)
    table = weights(71, [8, 4])
    g.initializer("embed.weight", table)
    g.initializer("onnx::MatMul_7", np.ascontiguousarray(table.T))
    hidden = g.op("Gather", ["embed.weight", ids], axis=0)
    g.op("MatMul", [hidden, "onnx::MatMul_7"], out="logits")
    g.output("logits", [2, 3, 8])
    return g.model()


def zero_initialized_weights():
    """Two zero-initialized weights (a LoRA pair's B matrices) of a legacy export, [4, 4] each: equal,
    yet two parameters (equal values cannot tell a copy from a weight initialized alike)."""
    g = GraphBuilder("zero_initialized_weights")
    x = g.input("x", [2, 4])
    g.initializer("lora_a.B", np.zeros([4, 4], dtype=np.float32))
    g.initializer("lora_b.B", np.zeros([4, 4], dtype=np.float32))
    g.op("Add", [g.op("MatMul", [x, "lora_a.B"]), g.op("MatMul", [x, "lora_b.B"])], out="y")
    g.output("y", [2, 4])
    return g.model()


def folded_lookup_table():
    """An export with a graph signature (`proj.weight` a PARAMETER) whose Gather reads `val_3` [8, 4], a
    table outside the signature: a learned embedding the optimizer rewrote, or a cos/sin cache computed
    from a buffer; nothing in the graph tells which."""
    g = GraphBuilder("folded_lookup_table")
    ids = g.input("ids", [2, 3], INT64)
    g.initializer("val_3", weights(81, [8, 4]))
    g.initializer("proj.weight", weights(82, [4, 4]))
    hidden = g.op("Gather", ["val_3", ids], axis=0)
    g.op("MatMul", [hidden, "proj.weight"], out="y")
    g.output("y", [2, 3, 4])
    return with_parameters(g.model(), {"proj.weight": [4, 4]})


def derived_parameters():
    """What torch.onnx.export(..., optimize=True) can leave beside parameters it keeps (the graph
    signature names q/k/v_proj.weight [4, 8] and attn.bias [12] PARAMETERs): `val_10` [8, 12], the
    transpose of their concatenation (a fused QKV weight); `val_11` [1, 12], attn.bias reshaped;
    `val_12` [4], its first four elements (a slice); `val_13` [4, 8], k_proj.weight cast to float16;
    and `val_14`, val_10 with one element changed, which is no function of the parameters."""
    g = GraphBuilder("derived_parameters")
    x = g.input("x", [2, 8])
    q, k, v = (weights(91 + i, [4, 8]) for i in range(3))
    bias = weights(94, [12])
    for name, value in (("attn.q_proj.weight", q), ("attn.k_proj.weight", k), ("attn.v_proj.weight", v),
                        ("attn.bias", bias)):
        g.initializer(name, value)
    fused = np.ascontiguousarray(np.concatenate([q, k, v]).T)
    g.initializer("val_10", fused)
    g.initializer("val_11", bias.reshape(1, 12))
    g.initializer("val_12", bias[:4].copy())
    g.initializer("val_13", k.astype(np.float16))
    changed = fused.copy()
    changed[7, 11] += 1
    g.initializer("val_14", changed)
    g.op("Add", [g.op("MatMul", [x, "val_10"]), "val_11"], out="qkv")
    g.op("Add", [g.op("MatMul", [x, g.op("Transpose", ["attn.q_proj.weight"], perm=[1, 0])]), "val_12"],
         out="query")
    key_weight = g.op("Cast", ["val_13"], to=FLOAT)
    g.op("MatMul", [x, g.op("Transpose", [key_weight], perm=[1, 0])], out="key")
    g.op("MatMul", [x, "val_14"], out="other")
    for name, width in (("qkv", 12), ("query", 4), ("key", 4), ("other", 12)):
        g.output(name, [2, width])
    return with_parameters(g.model(), {"attn.q_proj.weight": [4, 8], "attn.k_proj.weight": [4, 8],
                                       "attn.v_proj.weight": [4, 8], "attn.bias": [12]})


def derived_parameters_legacy():
    """A legacy export (no graph signature: every float initializer may be trained) whose first
    initializer, `onnx::MatMul_9` [8, 8], is the transposed concatenation of attn.q_proj.weight and
    attn.k_proj.weight [4, 8] stored after it; q_proj.weight is read on its own too. Each could be
    written as a function of the other (the pieces as slices of the fused weight)."""
    g = GraphBuilder("derived_parameters_legacy")
    x = g.input("x", [2, 8])
    q, k = weights(111, [4, 8]), weights(112, [4, 8])
    g.initializer("onnx::MatMul_9", np.ascontiguousarray(np.concatenate([q, k]).T))
    g.initializer("attn.q_proj.weight", q)
    g.initializer("attn.k_proj.weight", k)
    g.op("MatMul", [x, "onnx::MatMul_9"], out="qk")
    g.op("MatMul", [x, g.op("Transpose", ["attn.q_proj.weight"], perm=[1, 0])], out="query")
    g.output("qk", [2, 8])
    g.output("query", [2, 4])
    return g.model()


def buffer_copy():
    """A dynamo export whose graph signature names `student.weight` [4, 4] a PARAMETER and
    `teacher.weight` a BUFFER holding the same values (a frozen teacher copied from the student at
    export time): equal, yet the buffer is a tensor of its own and is not trained."""
    g = GraphBuilder("buffer_copy")
    x = g.input("x", [2, 4])
    student = weights(121, [4, 4])
    g.initializer("student.weight", student)
    g.initializer("teacher.weight", student.copy())
    g.op("Add", [g.op("MatMul", [x, "student.weight"]), g.op("MatMul", [x, "teacher.weight"])], out="y")
    g.output("y", [2, 4])
    model = with_parameters(g.model(), {"student.weight": [4, 4]})
    info = helper.make_tensor_value_info("teacher.weight", FLOAT, [4, 4])
    entry = info.metadata_props.add()
    entry.key = "pkg.torch.export.graph_signature.InputSpec.kind"
    entry.value = "BUFFER"
    model.graph.value_info.append(info)
    return model


def matmul_batched():
    """Batched MatMul of two rank-4 inputs, and of a rank-4 input by a rank-2 weight (broadcast)."""
    g = GraphBuilder("matmul_batched")
    a = g.input("a", [2, 4, 16, 8])
    b = g.input("b", [2, 4, 8, 16])
    w = g.initializer("proj.weight", weights(61, [8, 12]))
    g.op("MatMul", [a, b], out="y_batched")
    g.op("MatMul", [a, w], out="y_broadcast")
    g.output("y_batched", [2, 4, 16, 16])
    g.output("y_broadcast", [2, 4, 16, 12])
    return g.model()


# ---------------------------------------------------------------------------------------------
# Indexing and prefix sums on run-time tensors (no tess op of their own: rewritten at import)
# ---------------------------------------------------------------------------------------------

def move_axis_first_and_gather_nd(g, x, axis, rank, index):
    """torch's aten::index(x, [None, ..., tensor([index])]) as the exporter writes it: the indexed axis
    transposed to the front, GatherND by the [1, 1] index tensor, transposed back."""
    to_front = [axis] + [d for d in range(rank) if d != axis]
    back = [to_front.index(d) for d in range(rank)]
    front = g.op("Transpose", [x], perm=to_front)
    indices = g.op("Concat", [g.constant([[index]], dtype=np.int64)], axis=-1)
    return g.op("Transpose", [g.op("GatherND", [front, indices], batch_dims=0)], perm=back)


def gather_nd_split():
    """Falcon's new-decoder-architecture split of its fused projection, qkv viewed as [batch, seq, groups,
    heads_per_group + 2, head_dim]: key = qkv[..., [-2], :], value = qkv[..., [-1], :] (GatherND), output
    side by side along the heads axis."""
    g = GraphBuilder("gather_nd_split")
    qkv = g.input("qkv", [1, 2, 1, 3, 2])
    key = move_axis_first_and_gather_nd(g, qkv, 3, 5, -2)
    value = move_axis_first_and_gather_nd(g, qkv, 3, 5, -1)
    g.op("Concat", [key, value], out="key_value", axis=3)
    g.output("key_value", [1, 2, 1, 2, 2])
    return g.model()


def gather_nd_batched():
    """GatherND with batch_dims=1 and rows out of order: each batch row picks its own rows."""
    g = GraphBuilder("gather_nd_batched")
    x = g.input("x", [2, 3, 2])
    indices = g.constant([[[2], [0]], [[1], [1]]], dtype=np.int64)
    g.op("GatherND", [x, indices], out="y", batch_dims=1)
    g.output("y", [2, 2, 2])
    return g.model()


def scatter_nd_rows():
    """ScatterND writing run-time rows (x[0:2] * 10) over rows 3 and 1 of a run-time tensor, as an in-place
    slice assignment exports; and OPT's mask written by ScatterND into a constant, which folds."""
    g = GraphBuilder("scatter_nd_rows")
    x = g.input("x", [4, 2])
    rows = g.op("Slice", [x, g.constant_ints([0]), g.constant_ints([2]), g.constant_ints([0])])
    updates = g.op("Mul", [rows, g.constant(10.0)])
    g.op("ScatterND", [x, g.constant([[3], [1]], dtype=np.int64), updates], out="y")
    blank = g.op("ConstantOfShape", [g.constant_ints([3, 4])],
                 value=numpy_helper.from_array(np.array([0.0], dtype=np.float32)))
    masked = g.constant(np.full([1, 4], MASK_MIN, dtype=np.float32))
    g.op("ScatterND", [blank, g.constant([[1]], dtype=np.int64), masked], out="mask")
    g.output("y", [4, 2])
    g.output("mask", [3, 4])
    return g.model()


def cumsum_positions():
    """RoBERTa's position ids as exported: a running count of the non-padding tokens (pad id 1),
    cumsum(ids != 1, dim=1) * (ids != 1) + 1, and its token types looked up at those positions from an
    expanded buffer by GatherElements (output 0, each position p reading 10 * p)."""
    g = GraphBuilder("cumsum_positions")
    ids = g.input("ids", [2, 4], INT64)
    keep = g.op("Cast", [g.op("Not", [g.op("Equal", [ids, g.constant(1, dtype=np.int64)])])],
                to=TensorProto.INT32)
    count = g.op("CumSum", [keep, g.constant(1, dtype=np.int64)])
    positions = g.op("Cast", [g.op("Add", [g.op("Mul", [count, keep]), g.constant(1, dtype=np.int32)])],
                     to=INT64, out="positions")
    table = g.initializer("token_types", (np.arange(6, dtype=np.int64) * 10)[None, :])
    expanded = g.op("Expand", [table, g.constant_ints([2, 6])])
    g.op("GatherElements", [expanded, positions], out="types", axis=1)
    g.output("types", [2, 4], INT64)
    g.output("positions", [2, 4], INT64)
    return g.model()


def cumsum_float(reverse):
    """CumSum of a float run-time tensor along its last axis, inclusive and exclusive (stacked), forward
    or reversed."""
    g = GraphBuilder("cumsum_float_reverse" if reverse else "cumsum_float")
    x = g.input("x", [1, 5])
    axis = g.constant(-1, dtype=np.int64)
    sums = [g.op("CumSum", [x, axis], exclusive=exclusive, reverse=int(reverse)) for exclusive in (0, 1)]
    g.op("Concat", sums, out="y", axis=0)
    g.output("y", [2, 5])
    return g.model()


def range_of_input():
    """Range up to a graph input: Range exists only at compile time, and its limit is not known then."""
    g = GraphBuilder("range_of_input")
    limit = g.input("limit", [], INT64)
    g.op("Range", [g.constant(0, dtype=np.int64), limit, g.constant(1, dtype=np.int64)], out="y",
         name="my_range")
    g.output("y", ["n"], INT64)
    return g.model()


def declared_output_two_inputs():
    """A legacy export's second input with static dims: `mask` [2, 7] beside `x` [batch, seq], the output
    declared [batch, seq] but computed from the mask alone, so with --dim seq=32 it contradicts."""
    g = GraphBuilder("declared_output_two_inputs")
    x = g.input("x", ["batch", "seq"])
    mask = g.input("mask", [2, 7])
    g.op("Mul", [mask, g.op("ReduceSum", [x], keepdims=0)], out="y")
    g.output("y", ["batch", "seq"])
    return g.model()


def gather_nd_runtime_indices():
    """GatherND whose indices are a graph input: not known at compile time, so not rewritten."""
    g = GraphBuilder("gather_nd_runtime_indices")
    x = g.input("x", [4, 2])
    indices = g.input("indices", [3, 1], INT64)
    g.op("GatherND", [x, indices], out="y", name="my_gather_nd")
    g.output("y", [3, 2])
    return g.model()


# ---------------------------------------------------------------------------------------------
# Inputs the importer must reject with a clear diagnostic
# ---------------------------------------------------------------------------------------------

def unsupported_op():
    g = GraphBuilder("unsupported_op")
    x = g.input("x", [2, 4, 4])
    g.op("Det", [x], out="y", name="my_det")
    g.output("y", [2])
    return g.model()


def mistyped_attribute():
    # Softmax's axis given as a string: read as an integer it would be 0.
    g = GraphBuilder("mistyped_attribute")
    x = g.input("x", [2, 3])
    node = g.op("Softmax", [x], out="y", name="bad_softmax")
    g.output("y", [2, 3])
    model = g.model()
    for n in model.graph.node:
        if n.name == "bad_softmax":
            n.attribute.append(helper.make_attribute("axis", "foo"))
    return model


def bad_opset():
    g = GraphBuilder("bad_opset")
    x = g.input("x", [2, 8])
    g.op("Relu", [x], out="y")
    g.output("y", [2, 8])
    return g.model(opsets=[("", 6)])


def bad_domain():
    g = GraphBuilder("bad_domain")
    x = g.input("x", [2, 8])
    g.op("Frobnicate", [x], out="y", domain="com.example", name="my_frobnicate")
    g.output("y", [2, 8])
    return g.model(opsets=[("", OPSET), ("com.example", 1)])


def unbound_dim():
    g = GraphBuilder("unbound_dim")
    x = g.input("x", ["tokens", 16])
    g.op("Relu", [x], out="y")
    g.output("y", ["tokens", 16])
    return g.model()


def dims_contradict():
    g = GraphBuilder("dims_contradict")
    x = g.input("x", [2, 8, 16])
    g.op("Relu", [x], out="y")
    g.output("y", [2, 8, 99])
    return g.model()


def missing_external():
    g = GraphBuilder("missing_external")
    x = g.input("x", [2, 16])
    # The weight's bytes live in an external file that does not exist.
    tensor = TensorProto(name="linear.weight", data_type=FLOAT, dims=[16, 16],
                         data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "missing.bin"), ("offset", "0"), ("length", str(16 * 16 * 4))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    g.initializers.append(tensor)
    g.op("MatMul", [x, "linear.weight"], out="y")
    g.output("y", [2, 16])
    return g.model()


# Inputs found by fuzzing the importer (tools/tessera-fuzz-onnx) or written to probe the same code;
# each once crashed tesserac or was accepted into invalid IR. Named fuzz-<what>.onnx.

def fuzz_external_offset():
    """External data whose offset is not a number: std::stoll threw and tesserac aborted."""
    g = GraphBuilder("fuzz_external_offset")
    x = g.input("x", [2, 16])
    tensor = TensorProto(name="linear.weight", data_type=FLOAT, dims=[16, 16],
                         data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "weights.bin"), ("offset", "abc"), ("length", "1024")):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    g.initializers.append(tensor)
    g.op("MatMul", [x, "linear.weight"], out="y")
    g.output("y", [2, 16])
    return g.model()


def fuzz_empty_required_input():
    """Where whose condition (a required input) is the empty name, the values constants: the
    constant evaluator dereferenced the absent input and tesserac crashed (SIGSEGV)."""
    g = GraphBuilder("fuzz_empty_required_input")
    g.input("x", [2])
    g.op("Where", ["", g.constant([1.0]), g.constant([2.0])], out="y", name="my_where")
    g.output("y", [1])
    return g.model()


def fuzz_negative_dim():
    """A graph input declared [2, -3]: imported as tensor<2x-3xf32>, which is not a valid type."""
    g = GraphBuilder("fuzz_negative_dim")
    x = g.input("x", [2, -3])
    g.op("Relu", [x], out="y")
    g.output("y", [2, -3])
    return g.model()


def fuzz_huge_shape():
    """Expand to [2^40, 2^40]: accepted, with an element count that overflows int64."""
    g = GraphBuilder("fuzz_huge_shape")
    x = g.input("x", [1, 1])
    g.op("Expand", [x, g.constant_ints([1 << 40, 1 << 40])], out="y", name="my_expand")
    g.output("y", [1 << 40, 1 << 40])
    return g.model()


def fuzz_duplicate_output():
    """Two nodes define `y`: the second silently replaced the first."""
    g = GraphBuilder("fuzz_duplicate_output")
    x = g.input("x", [2, 16])
    g.op("Relu", [x], out="y", name="first")
    g.op("Neg", [x], out="y", name="second")
    g.output("y", [2, 16])
    return g.model()


def fuzz_gather_out_of_range():
    """An embedding lookup with a constant index past the table's 4 rows: accepted, and would
    read out of bounds at run time (what `--dim seq` beyond GPT-2's positions does)."""
    g = GraphBuilder("fuzz_gather_out_of_range")
    ids = g.input("x", [2, 3], elem_type=INT64)
    table = g.initializer("wte.weight", weights(31, [4, 8]))
    g.op("Gather", [table, ids], out="tokens")
    g.op("Gather", [table, g.constant_ints([0, 4])], out="y", name="my_gather")
    g.output("tokens", [2, 3, 8])
    g.output("y", [2, 8])
    return g.model()


def fuzz_initializer_no_name():
    """An initializer without a name: imported as `tess.parameter ""`, a module that does not
    verify, which tesserac then printed in generic form with exit code 0."""
    g = GraphBuilder("fuzz_initializer_no_name")
    x = g.input("x", [2, 16])
    g.initializer("", weights(37, [16]))
    g.op("Relu", [x], out="y")
    g.output("y", [2, 16])
    return g.model()


def fuzz_fold_memory():
    """Range(0, 2^27) + 1, reduced to one number: every step is folded on the host, so a model of
    a few hundred bytes made tesserac allocate gigabytes (the fuzzer's out-of-memory, found as a
    GPT-2 whose arange end was mutated)."""
    g = GraphBuilder("fuzz_fold_memory")
    x = g.input("x", [2, 16])
    one = g.constant(1, dtype=np.int64)
    positions = g.op("Range", [g.constant(0, dtype=np.int64), g.constant(1 << 27, dtype=np.int64), one],
                     out="positions", name="my_range")
    shifted = g.op("Add", [positions, one], out="shifted", name="my_add")
    top = g.op("ReduceMax", [shifted], out="top", keepdims=1)
    g.op("Add", [x, g.op("Cast", [top], to=FLOAT)], out="y")
    g.output("y", [2, 16])
    return g.model()


WELL_FORMED = {
    "gelu_tanh": gelu_tanh,
    "gelu_erf": lambda: gelu_erf(divide=True),
    "gelu_erf_mul": lambda: gelu_erf(divide=False),
    "gelu_native": gelu_native,
    "swiglu": swiglu,
    "layer_norm_decomposed": layer_norm_decomposed,
    "layer_norm_native": layer_norm_native,
    "rms_norm_decomposed": lambda: rms_norm(reciprocal=True),
    "rms_norm_rsqrt": lambda: rms_norm(reciprocal=False),
    "attention_causal": attention_causal,
    "attention_causal_tril": attention_causal_tril,
    "attention_mask_input": attention_mask_input,
    "attention_gqa": attention_gqa,
    "attention_sdpa": attention_sdpa,
    "rotary": rotary,
    "linear_gemm": linear_gemm,
    "linear_matmul_add": linear_matmul_add,
    "optimized_signature": optimized_signature,
    "folded_names": folded_names,
    "folded_constant": folded_constant,
    "matmul_batched": matmul_batched,
    "tied_head_copy": tied_head_copy,
    "zero_initialized_weights": zero_initialized_weights,
    "folded_lookup_table": folded_lookup_table,
    "derived_parameters": derived_parameters,
    "derived_parameters_legacy": derived_parameters_legacy,
    "buffer_copy": buffer_copy,
    "gather_nd_split": gather_nd_split,
    "gather_nd_batched": gather_nd_batched,
    "scatter_nd_rows": scatter_nd_rows,
    "cumsum_positions": cumsum_positions,
    "cumsum_float": lambda: cumsum_float(reverse=False),
    "cumsum_float_reverse": lambda: cumsum_float(reverse=True),
}

# The inputs tessera-run reads in the lit tests (saved beside the model as NAME.INPUT.npy), small
# numbers so that the printed results read at a glance; onnxruntime is checked on the same ones.
FIXED_FEEDS = {
    "tied_head_copy": lambda: {"ids": np.array([[0, 3, 7], [5, 5, 1]], dtype=np.int64)},
    "folded_lookup_table": lambda: {"ids": np.array([[0, 3, 7], [5, 5, 1]], dtype=np.int64)},
    "derived_parameters": lambda: {"x": np.arange(16, dtype=np.float32).reshape(2, 8) / 8},
    "gather_nd_split": lambda: {"qkv": np.arange(12, dtype=np.float32).reshape(1, 2, 1, 3, 2)},
    "gather_nd_batched": lambda: {"x": np.arange(12, dtype=np.float32).reshape(2, 3, 2)},
    "scatter_nd_rows": lambda: {"x": np.arange(8, dtype=np.float32).reshape(4, 2)},
    "cumsum_positions": lambda: {"ids": np.array([[5, 1, 7, 8], [1, 1, 9, 4]], dtype=np.int64)},
    "cumsum_float": lambda: {"x": np.array([[1, 2, 4, 8, 16]], dtype=np.float32)},
    "cumsum_float_reverse": lambda: {"x": np.array([[1, 2, 4, 8, 16]], dtype=np.float32)},
}

# Well-formed protobuf, wrong content: onnx.checker is not run on these.
MALFORMED = {
    "unsupported_op": unsupported_op,
    "mistyped_attribute": mistyped_attribute,
    "bad_opset": bad_opset,
    "bad_domain": bad_domain,
    "unbound_dim": unbound_dim,
    "dims_contradict": dims_contradict,
    "missing_external": missing_external,
    "fuzz-external-offset": fuzz_external_offset,
    "fuzz-empty-required-input": fuzz_empty_required_input,
    "fuzz-negative-dim": fuzz_negative_dim,
    "fuzz-huge-shape": fuzz_huge_shape,
    "fuzz-duplicate-output": fuzz_duplicate_output,
    "fuzz-gather-out-of-range": fuzz_gather_out_of_range,
    "fuzz-initializer-no-name": fuzz_initializer_no_name,
    "fuzz-fold-memory": fuzz_fold_memory,
    "gather_nd_runtime_indices": gather_nd_runtime_indices,
    "range_of_input": range_of_input,
    "declared_output_two_inputs": declared_output_two_inputs,
}


# ---------------------------------------------------------------------------------------------
# Verification: what each well-formed model computes, in NumPy
# ---------------------------------------------------------------------------------------------

def initializer(model, name):
    return next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == name)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def attention(q, k, v, mask):
    return softmax(q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1]) + mask) @ v


def causal_mask(seq):
    return np.where(np.tril(np.ones((seq, seq), dtype=bool)), 0.0, MASK_MIN).astype(np.float32)


def rotate(x, inv_freq):
    angles = np.arange(x.shape[2], dtype=np.float32)[:, None] * inv_freq[None, :]
    angles = np.concatenate([angles, angles], axis=-1)
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * np.cos(angles) + rotated * np.sin(angles)


def layer_norm(x, gamma, beta):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * gamma + beta


def expected_outputs(name, model, feeds):
    """The NumPy statement of each model, written independently of the graph that builds it."""
    erf = np.vectorize(math.erf)
    x = feeds.get("x")
    if name == "gelu_tanh":
        return [0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))]
    if name in ("gelu_erf", "gelu_erf_mul"):
        return [0.5 * x * (1 + erf(x / math.sqrt(2)))]
    if name == "gelu_native":
        return [0.5 * x * (1 + erf(x / math.sqrt(2))),
                0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))]
    if name == "swiglu":
        gate = x @ initializer(model, "mlp.gate_proj.weight").T
        return [gate / (1 + np.exp(-gate)) * (x @ initializer(model, "mlp.up_proj.weight").T)]
    if name in ("layer_norm_decomposed", "layer_norm_native"):
        return [layer_norm(x, initializer(model, "ln.weight"), initializer(model, "ln.bias"))]
    if name in ("rms_norm_decomposed", "rms_norm_rsqrt"):
        return [initializer(model, "norm.weight") * x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6)]
    if name in ("attention_causal", "attention_causal_tril", "attention_sdpa"):
        return [attention(feeds["q"], feeds["k"], feeds["v"], causal_mask(16))]
    if name == "attention_mask_input":
        return [attention(feeds["q"], feeds["k"], feeds["v"], feeds["attention_mask"])]
    if name == "attention_gqa":
        k, v = (np.repeat(feeds[n], 2, axis=1) for n in ("k", "v"))
        return [attention(feeds["q"], k, v, causal_mask(16))]
    if name == "rotary":
        return [rotate(x, initializer(model, "rotary_emb.inv_freq"))]
    if name == "linear_gemm":
        return [x @ initializer(model, "conv1d.weight") + initializer(model, "conv1d.bias"),
                x @ initializer(model, "linear.weight").T + initializer(model, "linear.bias")]
    if name == "linear_matmul_add":
        return [x @ initializer(model, "linear.weight").T + initializer(model, "linear.bias")]
    if name == "optimized_signature":
        return [x @ initializer(model, "fc1.weight").T @ initializer(model, "val_7")]
    if name == "folded_names":
        hidden = x @ initializer(model, "fc1.weight").T
        return [sum(hidden @ initializer(model, name) for name in ("val_7", "val_8", "val_9"))]
    if name == "folded_constant":
        return [(x + initializer(model, "embedding_1")) @ initializer(model, "proj.weight")]
    if name == "matmul_batched":
        return [feeds["a"] @ feeds["b"], feeds["a"] @ initializer(model, "proj.weight")]
    if name == "tied_head_copy":
        table = initializer(model, "embed.weight")
        return [table[feeds["ids"]] @ table.T]
    if name == "folded_lookup_table":
        return [initializer(model, "val_3")[feeds["ids"]] @ initializer(model, "proj.weight")]
    if name == "derived_parameters":
        q, k, v, bias = (initializer(model, f"attn.{n}") for n in ("q_proj.weight", "k_proj.weight",
                                                                 "v_proj.weight", "bias"))
        k16 = k.astype(np.float16).astype(np.float32)
        changed = np.concatenate([q, k, v]).T.copy()
        changed[7, 11] += 1
        return [x @ np.concatenate([q, k, v]).T + bias, x @ q.T + bias[:4], x @ k16.T, x @ changed]
    if name == "derived_parameters_legacy":
        q, k = initializer(model, "attn.q_proj.weight"), initializer(model, "attn.k_proj.weight")
        return [x @ np.concatenate([q, k]).T, x @ q.T]
    if name == "buffer_copy":
        return [2 * x @ initializer(model, "student.weight")]
    if name == "zero_initialized_weights":
        return [np.zeros([2, 4], dtype=np.float32)]
    if name == "gather_nd_split":
        qkv = feeds["qkv"]
        return [np.concatenate([qkv[:, :, :, [-2]], qkv[:, :, :, [-1]]], axis=3)]
    if name == "gather_nd_batched":
        x = feeds["x"]
        return [np.stack([x[0, [2, 0]], x[1, [1, 1]]])]
    if name == "scatter_nd_rows":
        y = feeds["x"].copy()
        y[[3, 1]] = feeds["x"][0:2] * 10
        mask = np.zeros([3, 4], dtype=np.float32)
        mask[1] = MASK_MIN
        return [y, mask]
    if name == "cumsum_positions":
        keep = (feeds["ids"] != 1).astype(np.int64)
        positions = np.cumsum(keep, axis=1) * keep + 1
        return [positions * 10, positions]
    if name in ("cumsum_float", "cumsum_float_reverse"):
        x = feeds["x"]
        inclusive = (np.cumsum(x, axis=-1) if name == "cumsum_float"
                     else np.cumsum(x[:, ::-1], axis=-1)[:, ::-1])
        return [np.concatenate([inclusive, inclusive - x])]
    raise KeyError(name)


def random_feeds(name, model):
    if name in FIXED_FEEDS:
        return FIXED_FEEDS[name]()
    feeds = {}
    for index, value in enumerate(model.graph.input):
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng(1000 + index).standard_normal(shape).astype(np.float32)
    if "attention_mask" in feeds:
        # A padding mask (the last 5 keys of batch row 1 hidden) plus noise: anything but causal.
        mask = rng(7).standard_normal([2, 1, 16, 16]).astype(np.float32)
        mask[1, :, :, 11:] = MASK_MIN
        feeds["attention_mask"] = mask
    return feeds


def verify(name, model, session_factory):
    onnx.checker.check_model(model, full_check=True)
    if session_factory is None:
        return "checked"
    feeds = random_feeds(name, model)
    actual = session_factory(model).run(None, feeds)
    expected = expected_outputs(name, model, feeds)
    worst = 0.0
    for got, want in zip(actual, expected, strict=True):
        if got.shape != want.shape:
            raise AssertionError(f"{name}: shape {got.shape}, expected {want.shape}")
        worst = max(worst, float(np.abs(got - want).max()))
    if worst > 1e-4:
        raise AssertionError(f"{name}: onnxruntime differs from NumPy by {worst}")
    return f"checked, onnxruntime matches NumPy (max abs diff {worst:.1e})"


def save(model, name):
    path = os.path.join(HERE, name + ".onnx")
    onnx.save(model, path)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-verify", action="store_true", help="write the models without checking them")
    args = parser.parse_args()

    session_factory = None
    if not args.no_verify:
        try:
            import onnxruntime

            def session_factory(model):
                return onnxruntime.InferenceSession(model.SerializeToString(),
                                                    providers=["CPUExecutionProvider"])
        except ImportError:
            print("onnxruntime is not installed: models are checked but not run")

    for name, build in WELL_FORMED.items():
        model = build()
        status = "written" if args.no_verify else verify(name, model, session_factory)
        save(model, name)
        print(f"{name}.onnx: {status}")
        for input_name, array in FIXED_FEEDS.get(name, dict)().items():
            np.save(os.path.join(HERE, f"{name}.{input_name}.npy"), array)
    for name, build in MALFORMED.items():
        save(build(), name)
        print(f"{name}.onnx: written")

    with open(os.path.join(HERE, "gelu_tanh.onnx"), "rb") as complete:
        head = complete.read(100)
    with open(os.path.join(HERE, "truncated.onnx"), "wb") as truncated:
        truncated.write(head)
    print("truncated.onnx: written (the first 100 bytes of gelu_tanh.onnx)")
    with open(os.path.join(HERE, "not_onnx.onnx"), "w") as text:
        text.write("This is a text file, not an ONNX model: the importer must say so and exit non-zero.\n")
    print("not_onnx.onnx: written")


if __name__ == "__main__":
    main()
