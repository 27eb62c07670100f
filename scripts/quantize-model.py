"""Int8 dynamic quantization of an ONNX encoder's weights (per output channel), after fusing
each layer's attention and GELU into ONNX Runtime's own operators.

    quantize-model.py SRC.onnx DEST.onnx

multilingual-e5-small's linear layers go from f32 to int8: the model file drops from 146 MB to
83 MB, ONNX Runtime's resident memory from ~190 MB to ~100 MB, and inference runs 2-4x faster on
a CPU, for a cosine of ~0.996 between the f32 and int8 vectors of the same passage (nDCG@10:
-0.018 on the SciFact CI slice, about 0 on XQuAD hybrid; docs/BENCHMARKS.md).

The graph the shared builder writes (../shared/tools/e5-model/convert.py) computes attention
from separate Q, K and V MatMuls, reshapes and transposes, and GELU from Erf and four
elementwise ops. When its weight names are found (l{i}_q_wt, ...), each layer is rebuilt with
com.microsoft Attention (Q, K and V in one [H, 3H] weight; quantized to QAttention) and Gelu:
the same arithmetic, ~10 % faster with two sessions on two cores (docs/BENCHMARKS.md). Any other
encoder is quantized as it is. Deterministic: the same input always gives the same bytes.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh
from onnxruntime.quantization import QuantType, quantize_dynamic


def fuse(model, heads):
    """The converter's graph with fused attention and GELU, or None if it is not that graph."""
    g = model.graph
    init = {i.name: i for i in g.initializer}
    layers = 0
    while f"l{layers}_q_wt" in init:
        layers += 1
    if layers == 0:
        return None
    # The embedding part is kept as it is: every node up to the embedding LayerNormalization.
    emb, x, eps = [], None, None
    for n in g.node:
        emb.append(n)
        if n.op_type == "LayerNormalization" and "eln_w" in n.input:
            x = n.output[0]
            eps = next(a.f for a in n.attribute if a.name == "epsilon")
            break
    if x is None:
        return None
    arr = lambda name: nh.to_array(init[name])
    nodes, inits, keep = list(emb), [], set()
    count = [0]

    def node(op, inputs, domain="", **attrs):
        count[0] += 1
        out = f"fused_{op}_{count[0]}"
        nodes.append(h.make_node(op, inputs, [out], domain=domain, **attrs))
        return out

    def w(name):
        keep.add(name)
        return name

    mask = node("Cast", ["attention_mask"], to=TensorProto.INT32)
    for l in range(layers):
        qkv_w = np.concatenate([arr(f"l{l}_{p}_wt") for p in "qkv"], axis=1)
        qkv_b = np.concatenate([arr(f"l{l}_{p}_b") for p in "qkv"])
        inits += [nh.from_array(qkv_w, f"l{l}_qkv_w"), nh.from_array(qkv_b, f"l{l}_qkv_b")]
        ctx = node("Attention", [x, f"l{l}_qkv_w", f"l{l}_qkv_b", mask], domain="com.microsoft", num_heads=heads)
        ao = node("Add", [node("MatMul", [ctx, w(f"l{l}_ao_wt")]), w(f"l{l}_ao_b")])
        x = node("LayerNormalization", [node("Add", [x, ao]), w(f"l{l}_aln_w"), w(f"l{l}_aln_b")], axis=-1, epsilon=eps)
        mid = node("Add", [node("MatMul", [x, w(f"l{l}_fi_wt")]), w(f"l{l}_fi_b")])
        act = node("Gelu", [mid], domain="com.microsoft")
        fo = node("Add", [node("MatMul", [act, w(f"l{l}_fo_wt")]), w(f"l{l}_fo_b")])
        x = node("LayerNormalization", [node("Add", [x, fo]), w(f"l{l}_oln_w"), w(f"l{l}_oln_b")], axis=-1, epsilon=eps)
    nodes.append(h.make_node("Identity", [x], [g.output[0].name]))
    emb_inputs = {i for n in emb for i in n.input}
    kept = [i for i in g.initializer if i.name in keep or i.name in emb_inputs]
    graph = h.make_graph(nodes, g.name, list(g.input), list(g.output), kept + inits)
    opsets = [h.make_opsetid("", 18), h.make_opsetid("com.microsoft", 1)]
    fused = h.make_model(graph, opset_imports=opsets, producer_name="memoria-quantize-model")
    fused.ir_version = model.ir_version
    onnx.checker.check_model(fused)
    return fused


src, dest = sys.argv[1], sys.argv[2]
config = os.path.join(os.path.dirname(os.path.abspath(src)), "config.json")
heads = json.load(open(config))["num_attention_heads"] if os.path.exists(config) else None
fused = fuse(onnx.load(src), heads) if heads else None
if fused is None:
    print("quantize-model: not the converter's graph; quantizing it as it is", file=sys.stderr)
    quantize_dynamic(src, dest, op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8, per_channel=True)
else:
    staged = dest + ".fused.onnx"
    onnx.save(fused, staged)
    try:
        quantize_dynamic(staged, dest, op_types_to_quantize=["MatMul", "Attention"], weight_type=QuantType.QInt8,
                         per_channel=True, extra_options={"DefaultTensorType": TensorProto.FLOAT})
    finally:
        os.remove(staged)
