# The data behind the review queue's same-topic rule (engine/src/hygiene/topic.rs):
# deterministic near-duplicate variants of SciFact documents against related-but-distinct
# documents (each sampled document's lexically closest neighbour; documents relevant to one
# query), with the word overlap of topic.rs and multilingual-e5-small's cosine of the first
# passage. Needs numpy, onnxruntime and tokenizers (the quantize venv of install-model.sh) and
# the e5-small model folder; prints each pair group's spread and the rule's counts.
#   python scripts/same-topic-study.py [MODEL_DIR]
import json, random, re, sys, itertools
import numpy as np
random.seed(7)
import os
DATA = os.environ.get("MEMORIA_SCIFACT", os.path.join(os.path.dirname(__file__), "../../shared/data/scifact"))
docs = [json.loads(l) for l in open(f"{DATA}/corpus.jsonl")]
byid = {d["_id"]: d for d in docs}
STOP = set("the and for are but not you with this that from have has had was were been its into than then them they their there these those which while what when where who whom whose will would can could should may might must our ours out over under also such only very more most some any all each both few other same own about above after again against because before being below between during further here how once why yes".split())
def words(t):
    out = set()
    for w in re.split(r"[^0-9a-z]+", t.lower()):
        if len(w) >= 3 and w not in STOP: out.add(w)
    return out
def wset(title, text): return words(title) | words(text)
def jac(a, b): return len(a & b) / max(1, len(a | b))
SYN = {"increase":"rise","increased":"elevated","decrease":"reduction","decreased":"reduced","patients":"subjects","study":"investigation","results":"findings","significant":"notable","significantly":"markedly","associated":"linked","risk":"hazard","treatment":"therapy","cells":"cell populations","effect":"impact","effects":"impacts","levels":"concentrations","however":"yet","higher":"greater","lower":"smaller","using":"with","analysis":"assessment","showed":"demonstrated","suggest":"indicate","expression":"production"}
def sents(t): return [s for s in re.split(r"(?<=[.!?])\s+", t.strip()) if s]
def syn(t):
    return re.sub(r"\b(" + "|".join(SYN) + r")\b", lambda m: SYN[m.group(1)], t)
def drop_clause(t):
    out = []
    for i, s in enumerate(sents(t)):
        parts = s.split(", ")
        if len(parts) > 1 and i % 2 == 0: parts = parts[:-1]; s = ", ".join(parts) + "."
        out.append(s)
    return " ".join(out)
def variants(d):
    t, s = d["title"], d["text"]
    ss = sents(s)
    rot = ss[1:] + ss[:1] if len(ss) > 1 else ss
    drop1 = [x for i, x in enumerate(ss) if i != len(ss) // 2] if len(ss) > 2 else ss
    return [
        (t, " ".join(rot)),
        (t, " ".join(drop1)),
        (syn(t), syn(s)),
        (t, syn(" ".join(drop1))),
        (syn(t), drop_clause(" ".join(rot))),
    ]
def hard_variants(d):
    t, s = d["title"], d["text"]
    ss = sents(s)
    half = ss[: max(1, (len(ss) + 1) // 2)]
    alt = ss[::2]
    return [(syn(t), syn(" ".join(half))), (t, drop_clause(" ".join(alt)))]
qrels = {}
for l in list(open(f"{DATA}/qrels/train.tsv"))[1:]:
    q, c, _ = l.strip().split("\t"); qrels.setdefault(q, []).append(c)
co = [v for v in qrels.values() if len(v) >= 2]
sample_ids = sorted({c for v in qrels.values() for c in v if c in byid})
random.shuffle(sample_ids); sample_ids = sample_ids[:120]
allsets = {d["_id"]: wset(d["title"], d["text"]) for d in docs}
pos, neg, hard = [], [], []   # (textA, textB)
texts = {}
for cid in sample_ids:
    d = byid[cid]; texts[cid] = (d["title"], d["text"])
    vs = variants(d)
    for i, v in enumerate(vs): texts[f"{cid}#v{i}"] = v
    group = [cid] + [f"{cid}#v{i}" for i in range(len(vs))]
    for a, b in itertools.combinations(group, 2): pos.append((a, b))
    for i, v in enumerate(hard_variants(d)):
        texts[f"{cid}#h{i}"] = v; hard.append((cid, f"{cid}#h{i}"))
    # hardest lexical neighbour in the corpus
    a = allsets[cid]
    best = max((x for x in docs if x["_id"] != cid), key=lambda x: jac(a, allsets[x["_id"]]))
    texts[best["_id"]] = (best["title"], best["text"]); neg.append((cid, best["_id"]))
for v in co:
    v = [c for c in v if c in byid]
    for a, b in itertools.combinations(v, 2):
        texts[a] = (byid[a]["title"], byid[a]["text"]); texts[b] = (byid[b]["title"], byid[b]["text"]); neg.append((a, b))
sets = {k: wset(*v) for k, v in texts.items()}
print("pos", len(pos), "neg", len(neg), "texts", len(texts), file=sys.stderr)
# e5 embeddings of the first chunk ("passage: summary\nfirst 200 words")
import onnxruntime as ort
from tokenizers import Tokenizer
mp = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/memoria/models/e5-small")
tok = Tokenizer.from_file(mp + "/tokenizer.json"); tok.enable_truncation(512)
so = ort.SessionOptions(); so.intra_op_num_threads = 1
sess = ort.InferenceSession(mp + "/model.onnx", so)
names = [i.name for i in sess.get_inputs()]
vec = {}
for k, (t, s) in texts.items():
    text = "passage: " + (t.strip() + "\n" + " ".join(s.split()[:200])).strip()
    e = tok.encode(text)
    ids = np.array([e.ids], dtype=np.int64); m = np.array([e.attention_mask], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": m}
    if "token_type_ids" in names: feed["token_type_ids"] = np.zeros_like(ids)
    out = sess.run(None, feed)[0][0]
    v = (out * m[0][:, None]).sum(0) / m.sum(); v = v / np.linalg.norm(v); vec[k] = v
rows = []
for kind, pairs in (("pos", pos), ("neg", neg), ("hard", hard)):
    for a, b in pairs:
        rows.append({"kind": kind, "lex": jac(sets[a], sets[b]), "cos": float(vec[a] @ vec[b])})
LEXICAL_ALONE, LEXICAL_WITH_COSINE, COSINE_WITH_LEXICAL = 0.50, 0.30, 0.95
def rule(r, vectors=True):
    return r["lex"] >= LEXICAL_ALONE or (vectors and r["lex"] >= LEXICAL_WITH_COSINE and r["cos"] >= COSINE_WITH_LEXICAL)
for kind in ("pos", "hard", "neg"):
    rs = [r for r in rows if r["kind"] == kind]
    lex = sorted(r["lex"] for r in rs); cos = sorted(r["cos"] for r in rs)
    print(f"{kind}: {len(rs)} pairs, word overlap {lex[0]:.3f}..{lex[-1]:.3f}, cosine {cos[0]:.3f}..{cos[-1]:.3f}, "
          f"same topic {sum(rule(r) for r in rs)} (words only: {sum(rule(r, False) for r in rs)})")
