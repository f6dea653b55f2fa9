"""Writes gpt2-tiny-dropout.raw.dyn.onnx: gpt2-tiny.raw.dyn.onnx with
training-mode Dropout (ratio 0.1) where GPT-2 trains with it: on the embedding
sum, on each layer's attention weights (after the softmax) and on the outputs
of each layer's attention and MLP projections. The tests of partitioned random
ops (tess-partition-spmd's stream_axis) train it on one device and on a mesh:
the masks must be the same.

  python test/models/add_dropout.py   (needs the onnx package)
"""
import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))
model = onnx.load(os.path.join(here, "gpt2-tiny.raw.dyn.onnx"))
graph = model.graph
dropped = {"add_17", "softmax", "softmax_1", "addmm_1", "addmm_3", "addmm_5", "addmm_7"}
graph.initializer.extend([
    numpy_helper.from_array(np.array(0.1, dtype=np.float32), "dropout_ratio"),
    numpy_helper.from_array(np.array(True), "dropout_training"),
])
nodes = []
for node in graph.node:
    nodes.append(node)
    for index, output in enumerate(node.output):
        if output in dropped:
            node.output[index] = output + "_before_dropout"
            nodes.append(helper.make_node(
                "Dropout", [node.output[index], "dropout_ratio", "dropout_training"],
                [output], name=output + "_dropout"))
del graph.node[:]
graph.node.extend(nodes)
onnx.checker.check_model(model)
onnx.save(model, os.path.join(here, "gpt2-tiny-dropout.raw.dyn.onnx"))
