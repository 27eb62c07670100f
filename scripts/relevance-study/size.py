# The relevance study (docs/BENCHMARKS.md, "Relevance"): DATA=<BEIR data dir with xquad-r/ and
# scifact/> MODEL=<e5-small-int8 model dir>; run embed.py first (writes emb.npz here), then the
# others. Needs numpy, onnxruntime and tokenizers. Compares padding a small vault's crowd with
# every everyday sentence ("mixed", the engine's rule) or only the least similar ones.
import os
import numpy as np, collections
E = np.load("emb.npz"); D=os.environ["DATA"] + "/xquad-r"
def qrels(lang):
    r = collections.defaultdict(set)
    for l in list(open(f"{D}/qrels-{lang}.tsv"))[1:]:
        q, c, s = l.split("\t"); r[q].add(c)
    return r
bg = E["bg"]; a, b = 80.16, -4.966; K = 10
rng = np.random.default_rng(3)
def p_of(g): return 1/(1+np.exp(-(a*g+b)))
def ref(cos, bgc, how):
    if how == "mixed": return np.sort(np.concatenate([cos, bgc]))[-K]
    if len(cos) >= K: return np.sort(cos)[-K]
    pad = np.sort(bgc)[:K-len(cos)]
    return np.sort(np.concatenate([cos, pad]))[-K]
for how in ["mixed", "bottom-pad"]:
  print("==", how)
  for size in [1, 3, 8, 20, 100]:
    out = []
    for ql, cl in [("en","en"),("zh","zh"),("es","en"),("zh","en")]:
        C = E[f"c_{cl}"]; cids = list(E[f"cids_{cl}"]); Q = E[f"q_{ql}"]; qids = E[f"qids_{ql}"]; rel = qrels(cl)
        idx = {c:i for i,c in enumerate(cids)}
        ps, pu, pn = [], [], []
        for qi, qid in enumerate(qids[:200]):
            if qid not in rel: continue
            r = [idx[c] for c in rel[qid]][:1]
            others = [i for i in range(len(cids)) if i not in r]
            sub = r + list(rng.choice(others, size=size-1, replace=False)) if size > 1 else r
            cos = C[sub] @ Q[qi]; bgc = bg @ Q[qi]
            ps.append(p_of(cos[0] - ref(cos, bgc, how)))
            # same vault without the answer: best unrelated note
            sub2 = list(rng.choice(others, size=size, replace=False))
            cos2 = C[sub2] @ Q[qi]
            pu.append(p_of(cos2.max() - ref(cos2, bgc, how)))
        for qv in E["q_gib"][:100]:
            sub = list(rng.choice(len(cids), size=size, replace=False))
            cos = C[sub] @ qv; pn.append(p_of(cos.max() - ref(cos, bg @ qv, how)))
        f = lambda v: f"{np.mean(np.array(v)>=0.1):.2f}"
        out.append(f"{ql}>{cl} ans:{f(ps)} noans:{f(pu)} gib:{f(pn)}")
    print(f" vault {size:3}: " + "  ".join(out))
