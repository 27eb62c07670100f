"""Int8 dynamic quantization of an ONNX encoder's weights (per output channel), after fusing
each layer's attention and GELU into ONNX Runtime's own operators and smoothing the inputs of
every linear layer.

    quantize-model.py SRC.onnx DEST.onnx     (writes DEST.onnx and model.data beside it)

multilingual-e5-small's linear layers go from f32 to int8: the model drops from 146 MB to 83 MB
and inference runs 2-4x faster on a CPU (docs/BENCHMARKS.md). The weights are stored in
model.data beside the graph, where ONNX Runtime maps them instead of copying them into each
session (externalize below).

The graph scripts/convert-e5.py writes computes attention from separate Q, K and V MatMuls,
reshapes and transposes, and GELU from Erf and four elementwise ops. When its weight names are found (l{i}_q_wt, ...), each layer is rebuilt with
com.microsoft Attention (Q, K and V in one [H, 3H] weight; quantized to QAttention) and Gelu:
the same arithmetic, ~10 % faster with two sessions on two cores.

Smoothing (SmoothQuant, Xiao et al. 2022): dynamic quantization gives a whole activation
tensor one int8 scale, so a few channels with large values leave the others only a few levels.
Each linear layer's input channel j is divided by s_j and the weight's row j multiplied by s_j
(the same product in exact arithmetic), with s_j = max|x_j|^a / max|w_j|^(1-a), a = 0.7, and
max|x_j| measured on the f32 model over scripts/calibration.txt (varied sentences in several
languages, none from the evaluation sets). The division is a Mul node before the Q/K/V and FFN
MatMuls, and is folded into the V weights for the attention output. The int8 vectors' cosine to
the f32 model's goes from ~0.996 to ~0.999, for ~2 % more time per passage.

Any other encoder is quantized as it is. Deterministic: the same input always gives the same bytes.
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


ALPHA = 0.7
CALIBRATION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calibration.txt")


def fuse(model, heads, scales=None):
    """The converter's graph with fused attention and GELU, or None if it is not that graph.

    scales maps (layer, kind) to the smoothing vector of that linear layer's input, kind one of
    qkv, ao (attention output), fi (FFN in), fo (FFN out). Returns (model, taps): taps names
    the tensor each linear layer reads, for calibration.
    """
    scales = scales or {}
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
    nodes, inits, keep, taps = list(emb), [], set(), {}
    count = [0]

    def node(op, inputs, domain="", **attrs):
        count[0] += 1
        out = f"fused_{op}_{count[0]}"
        nodes.append(h.make_node(op, inputs, [out], domain=domain, **attrs))
        return out

    def w(name):
        keep.add(name)
        return name

    def const(a, name):
        inits.append(nh.from_array(a.astype(np.float32), name))
        return name

    def smooth(l, kind, x, weight):
        """x divided by the smoothing vector (a Mul node) and weight's rows multiplied by it."""
        s = scales.get((l, kind))
        if s is not None:
            x, weight = node("Mul", [x, const(1 / s, f"l{l}_{kind}_smooth")]), weight * s[:, None]
        taps[(l, kind)] = x
        return x, weight

    mask = node("Cast", ["attention_mask"], to=TensorProto.INT32)
    for l in range(layers):
        qkv_w = np.concatenate([arr(f"l{l}_{p}_wt") for p in "qkv"], axis=1)
        qkv_b = np.concatenate([arr(f"l{l}_{p}_b") for p in "qkv"])
        ao_w = arr(f"l{l}_ao_wt")
        s = scales.get((l, "ao"))
        if s is not None:
            # The attention output's channel j is V's column j, weighted by attention
            # probabilities that sum to 1: dividing V's column and bias divides the channel.
            hid = ao_w.shape[0]
            qkv_w, qkv_b, ao_w = qkv_w.copy(), qkv_b.copy(), ao_w * s[:, None]
            qkv_w[:, 2 * hid :] /= s[None, :]
            qkv_b[2 * hid :] /= s
        xin, qkv_w = smooth(l, "qkv", x, qkv_w)
        ctx = node("Attention", [xin, const(qkv_w, f"l{l}_qkv_w"), const(qkv_b, f"l{l}_qkv_b"), mask],
                   domain="com.microsoft", num_heads=heads)
        taps[(l, "ao")] = ctx
        ao = node("Add", [node("MatMul", [ctx, const(ao_w, f"l{l}_ao_w")]), w(f"l{l}_ao_b")])
        x = node("LayerNormalization", [node("Add", [x, ao]), w(f"l{l}_aln_w"), w(f"l{l}_aln_b")], axis=-1, epsilon=eps)
        xin, fi_w = smooth(l, "fi", x, arr(f"l{l}_fi_wt"))
        mid = node("Add", [node("MatMul", [xin, const(fi_w, f"l{l}_fi_w")]), w(f"l{l}_fi_b")])
        act, fo_w = smooth(l, "fo", node("Gelu", [mid], domain="com.microsoft"), arr(f"l{l}_fo_wt"))
        fo = node("Add", [node("MatMul", [act, const(fo_w, f"l{l}_fo_w")]), w(f"l{l}_fo_b")])
        x = node("LayerNormalization", [node("Add", [x, fo]), w(f"l{l}_oln_w"), w(f"l{l}_oln_b")], axis=-1, epsilon=eps)
    nodes.append(h.make_node("Identity", [x], [g.output[0].name]))
    emb_inputs = {i for n in emb for i in n.input}
    kept = [i for i in g.initializer if i.name in keep or i.name in emb_inputs]
    graph = h.make_graph(nodes, g.name, list(g.input), list(g.output), kept + inits)
    opsets = [h.make_opsetid("", 18), h.make_opsetid("com.microsoft", 1)]
    fused = h.make_model(graph, opset_imports=opsets, producer_name="memoria-quantize-model")
    fused.ir_version = model.ir_version
    onnx.checker.check_model(fused)
    return fused, taps


def smoothing(model, heads, tokenizer_file):
    """Per linear layer, s = max|x|^a / max|w|^(1-a), with max|x| per input channel measured on
    the f32 fused graph over the calibration sentences (one thread: the same maxima every run)."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    plain, taps = fuse(model, heads)
    for t in taps.values():
        plain.graph.output.append(h.make_tensor_value_info(t, TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(plain.SerializeToString(), options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(tokenizer_file)
    texts = [line.strip() for line in open(CALIBRATION, encoding="utf-8") if line.strip() and not line.startswith("#")]
    amax = {}
    for text in texts:
        ids = np.array([tokenizer.encode(text).ids[:512]], np.int64)
        outs = session.run(list(taps.values()), {"input_ids": ids, "attention_mask": np.ones_like(ids)})
        for key, out in zip(taps, outs):
            amax[key] = np.maximum(amax.get(key, 0), np.abs(out).reshape(-1, out.shape[-1]).max(0))
    init = {i.name: nh.to_array(i) for i in model.graph.initializer}
    scales = {}
    for (l, kind), a in amax.items():
        if kind == "qkv":
            weight = np.concatenate([init[f"l{l}_{p}_wt"] for p in "qkv"], axis=1)
        else:
            weight = init[f"l{l}_{kind}_wt"]
        wmax = np.abs(weight).max(1)
        s = np.maximum(a, 1e-5) ** ALPHA / np.maximum(wmax, 1e-5) ** (1 - ALPHA)
        scales[(l, kind)] = np.clip(s, 1e-3, 1e3).astype(np.float32)
    return scales


def externalize(path):
    """Moves every initializer of 64 KiB or more into `model.data` beside the graph, each at a
    64 KiB-aligned offset: ONNX Runtime then maps those weights from the file instead of copying
    them into every session (the 250k-row word table is only touched where a text's tokens are),
    and a second session costs ~30 MB instead of ~90 MB."""
    model = onnx.load(path)
    align, offset = 1 << 16, 0
    with open(os.path.join(os.path.dirname(os.path.abspath(path)), "model.data"), "wb") as data:
        for t in model.graph.initializer:
            if not t.HasField("raw_data") or len(t.raw_data) < align:
                continue
            pad = -offset % align
            data.write(b"\0" * pad)
            offset += pad
            data.write(t.raw_data)
            del t.external_data[:]
            for key, value in (("location", "model.data"), ("offset", str(offset)), ("length", str(len(t.raw_data)))):
                entry = t.external_data.add()
                entry.key, entry.value = key, value
            offset += len(t.raw_data)
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
    onnx.save(model, path)


src, dest = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(src))
config, tokenizer_file = os.path.join(here, "config.json"), os.path.join(here, "tokenizer.json")
heads = json.load(open(config))["num_attention_heads"] if os.path.exists(config) else None
source = onnx.load(src)
fused = fuse(source, heads) if heads else None
if fused is None:
    print("quantize-model: not the converter's graph; quantizing it as it is", file=sys.stderr)
    quantize_dynamic(src, dest, op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8, per_channel=True)
else:
    if os.path.exists(tokenizer_file):
        fused, _ = fuse(source, heads, smoothing(source, heads, tokenizer_file))
    else:
        print("quantize-model: no tokenizer.json beside the model; quantizing without smoothing", file=sys.stderr)
        fused = fused[0]
    staged = dest + ".fused.onnx"
    onnx.save(fused, staged)
    try:
        quantize_dynamic(staged, dest, op_types_to_quantize=["MatMul", "Attention"], weight_type=QuantType.QInt8,
                         per_channel=True, extra_options={"DefaultTensorType": TensorProto.FLOAT})
    finally:
        os.remove(staged)
externalize(dest)
