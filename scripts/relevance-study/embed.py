# The relevance study (docs/BENCHMARKS.md, "Relevance"): DATA=<BEIR data dir with xquad-r/ and
# scifact/> MODEL=<e5-small-int8 model dir>; run embed.py first (writes emb.npz here), then the
# others. Needs numpy, onnxruntime and tokenizers.
import os
import json, sys, numpy as np, onnxruntime as ort
from tokenizers import Tokenizer
M = os.environ["MODEL"]
tok = Tokenizer.from_file(f"{M}/tokenizer.json")
tok.enable_truncation(512)
so = ort.SessionOptions(); so.intra_op_num_threads = 1
sess = ort.InferenceSession(f"{M}/model.onnx", so, providers=["CPUExecutionProvider"])
names = [i.name for i in sess.get_inputs()]
def embed(texts, bs=16):
    out = []
    for i in range(0, len(texts), bs):
        encs = tok.encode_batch(texts[i:i+bs])
        L = max(len(e.ids) for e in encs)
        ids = np.zeros((len(encs), L), np.int64); am = np.zeros_like(ids)
        for j, e in enumerate(encs):
            ids[j, :len(e.ids)] = e.ids; am[j, :len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": am}
        if "token_type_ids" in names: feed["token_type_ids"] = np.zeros_like(ids)
        h = sess.run(None, feed)[0]
        v = (h * am[..., None]).sum(1) / am.sum(1, keepdims=True)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        out.append(v.astype(np.float32))
    return np.concatenate(out)
def load(p): return [json.loads(l) for l in open(p)]
D = os.environ["DATA"] + "/xquad-r"
res = {}
for lang in ["en", "es", "zh"]:
    c = load(f"{D}/corpus-{lang}.jsonl")
    res[f"cids_{lang}"] = np.array([d["_id"] for d in c])
    res[f"c_{lang}"] = embed(["passage: " + d["text"] for d in c])
    q = load(f"{D}/queries-{lang}.jsonl")
    res[f"qids_{lang}"] = np.array([d["_id"] for d in q])
    res[f"q_{lang}"] = embed(["query: " + d["text"] for d in q])
    print(lang, "done", flush=True)
sf = load(os.environ["DATA"] + "/scifact/queries.jsonl")
res["q_sf"] = embed(["query: " + d["text"] for d in sf[:300]])
import random
random.seed(7)
gib = [" ".join("".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(random.randint(3,6))) for _ in range(random.randint(2,4))) for _ in range(200)]
res["q_gib"] = embed(["query: " + g for g in gib])
bg = [l.strip() for l in open(os.path.join(os.path.dirname(__file__), "background.txt")) if l.strip()]
res["bg"] = embed(["passage: " + b for b in bg])
res["null"] = embed(["passage: "])
np.savez("emb.npz", **res)
print("saved")
