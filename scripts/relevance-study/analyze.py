# The relevance study (docs/BENCHMARKS.md, "Relevance"): DATA=<BEIR data dir with xquad-r/ and
# scifact/> MODEL=<e5-small-int8 model dir>; run embed.py first (writes emb.npz here), then the
# others. Needs numpy, onnxruntime and tokenizers.
import os
import numpy as np, json, collections
E = np.load("emb.npz")
D = os.environ["DATA"] + "/xquad-r"
def qrels(lang):
    r = collections.defaultdict(set)
    for l in list(open(f"{D}/qrels-{lang}.tsv"))[1:]:
        q, c, s = l.split("\t"); r[q].add(c)
    return r
bg = E["bg"]; null = E["null"][0]
rows = []  # (pair, answerable, correct_top1, feats)
def feats(qv, C):
    cos = C @ qv
    order = np.argsort(-cos)
    top = cos[order[0]]
    mu, sd = cos.mean(), cos.std()
    b = (bg @ qv).max()
    bmean = (bg @ qv).mean()
    n = float(null @ qv)
    return order, dict(cos=top, z=(top-mu)/sd, gap_bg=top-b, gap_bgmean=top-bmean, gap_null=top-n,
                       gap10=top-cos[order[9]], mu=mu)
for ql, cl in [("en","en"),("es","es"),("zh","zh"),("es","en"),("zh","en"),("en","es")]:
    C = E[f"c_{cl}"]; cids = E[f"cids_{cl}"]; Q = E[f"q_{ql}"]; qids = E[f"qids_{ql}"]
    rel = qrels(cl)
    for qi, qid in enumerate(qids):
        if qid not in rel: continue
        order, f = feats(Q[qi], C)
        rows.append((f"{ql}>{cl}", True, cids[order[0]] in rel[qid], f))
        keep = np.array([c not in rel[qid] for c in cids])
        _, f2 = feats(Q[qi], C[keep])
        rows.append((f"gone:{ql}>{cl}", False, False, f2))
    for name in ["sf", "gib"]:
        for qv in E[f"q_{name}"]:
            order, f = feats(qv, C)
            rows.append((f"{name}>{cl}", False, False, f))
def auc(pos, neg):
    pos = np.array(pos); neg = np.array(neg)
    return ((pos[:,None] > neg[None,:]).mean() + 0.5*(pos[:,None]==neg[None,:]).mean())
keys = ["cos","z","gap_bg","gap_bgmean","gap_null","gap10"]
print("pair        n  top1acc  " + "  ".join(f"{k:>10}" for k in keys))
for pair in sorted(set(r[0] for r in rows)):
    rs = [r for r in rows if r[0]==pair]
    acc = np.mean([r[2] for r in rs]) if rs[0][1] else float('nan')
    print(f"{pair:10} {len(rs):4} {acc:7.3f}  " + "  ".join(f"{np.median([r[3][k] for r in rs]):10.3f}" for k in keys))
# AUC: correct top-1 answerable vs unanswerable (sf+gib), per corpus language
print("\nAUC correct-top1 vs no-answer queries, per pair (neg = sf+gib on same corpus)")
for pair in [p for p in sorted(set(r[0] for r in rows)) if not p.startswith(("sf","gib","gone"))]:
    cl = pair.split(">")[1]
    pos = [r for r in rows if r[0]==pair and r[2]]
    neg = [r for r in rows if r[0] in (f"sf>{cl}", f"gib>{cl}")]
    gone = [r for r in rows if r[0]==f"gone:{pair}"]
    wrong = [r for r in rows if r[0]==pair and not r[2]]
    print(pair, "  ".join(f"{k}:{auc([r[3][k] for r in pos],[r[3][k] for r in neg]):.3f}/{auc([r[3][k] for r in pos],[r[3][k] for r in wrong]):.3f}/{auc([r[3][k] for r in pos],[r[3][k] for r in gone]):.3f}" for k in keys))
# threshold transfer: for each key, the threshold at which 90% of correct answerable top-1 pass, per pair
print("\n10th percentile of correct top-1 (a floor keeping 90%), and share of no-answer queries above it")
for k in keys:
    line = []
    for pair in [p for p in sorted(set(r[0] for r in rows)) if not p.startswith(("sf","gib","gone"))]:
        cl = pair.split(">")[1]
        pos = [r[3][k] for r in rows if r[0]==pair and r[2]]
        t = np.percentile(pos, 10)
        neg = [r[3][k] for r in rows if r[0] in (f"sf>{cl}", f"gib>{cl}")]
        gone = [r[3][k] for r in rows if r[0]==f"gone:{pair}"]
        line.append(f"{pair}:{t:.3f}({np.mean(np.array(neg)>=t):.2f},{np.mean(np.array(gone)>=t):.2f})")
    print(f"{k:10} " + " ".join(line))
