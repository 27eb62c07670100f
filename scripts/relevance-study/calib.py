# The relevance study (docs/BENCHMARKS.md, "Relevance"): DATA=<BEIR data dir with xquad-r/ and
# scifact/> MODEL=<e5-small-int8 model dir>; run embed.py first (writes emb.npz here), then the
# others. Needs numpy, onnxruntime and tokenizers.
import os
import numpy as np, collections, hashlib
E = np.load("emb.npz")
D = os.environ["DATA"] + "/xquad-r"
def qrels(lang):
    r = collections.defaultdict(set)
    for l in list(open(f"{D}/qrels-{lang}.tsv"))[1:]:
        q, c, s = l.split("\t"); r[q].add(c)
    return r
bg = E["bg"]; K = 10
data = []  # (group, fold, gap, label)
def fold(qid): return int(hashlib.sha256(qid.encode()).hexdigest(), 16) % 5
def hits(qv, C, cids, rel):
    cos = C @ qv
    crowd = np.concatenate([cos, bg @ qv])
    kth = np.sort(crowd)[-K]
    order = np.argsort(-cos)[:10]
    return [(cos[i] - kth, cids[i] in rel, r) for r, i in enumerate(order)]
for ql, cl in [("en","en"),("es","es"),("zh","zh"),("es","en"),("zh","en"),("en","es")]:
    C = E[f"c_{cl}"]; cids = E[f"cids_{cl}"]; Q = E[f"q_{ql}"]; qids = E[f"qids_{ql}"]
    rel = qrels(cl)
    for qi, qid in enumerate(qids):
        if qid not in rel: continue
        for g, y, r in hits(Q[qi], C, cids, rel[qid]):
            data.append((f"{ql}>{cl}", fold(qid), g, y, r))
    for name in ["sf", "gib"]:
        for j, qv in enumerate(E[f"q_{name}"]):
            for g, y, r in hits(qv, C, cids, set()):
                data.append((f"{name}>{cl}", j % 5, g, False, r))
g = np.array([d[2] for d in data]); y = np.array([d[3] for d in data], float); f = np.array([d[1] for d in data])
grp = np.array([d[0] for d in data]); rk = np.array([d[4] for d in data])
def fit(x, y, iters=3000, lr=0.5):
    # logistic on standardized x
    m, s = x.mean(), x.std(); z = (x - m) / s
    a, b = 0.0, 0.0
    for _ in range(iters):
        p = 1/(1+np.exp(-(a*z+b)))
        a -= lr*np.mean((p-y)*z); b -= lr*np.mean(p-y)
    return a/s, b - a*m/s
for k in range(5):
    tr = f != k
    a, b = fit(g[tr], y[tr])
    print(f"fold {k}: slope {a:.1f} intercept {b:.2f}  p=0.5 at gap {-b/a:.4f}")
a, b = fit(g, y)
print(f"all: slope {a:.2f} intercept {b:.3f}; p=0.5 at gap {-b/a:.4f}")
p = 1/(1+np.exp(-(a*g+b)))
print("\nreliability (held-out style: all): predicted bin -> observed")
for lo in np.arange(0, 1, 0.1):
    m = (p >= lo) & (p < lo+0.1)
    if m.sum(): print(f"  {lo:.1f}-{lo+0.1:.1f}: n={m.sum():6d} observed {y[m].mean():.3f} mean predicted {p[m].mean():.3f}")
print("\ntop-1 relevance by group (median, share >= 0.5), and correct top-1 kept at p>=0.5")
for G in sorted(set(grp)):
    m = (grp == G) & (rk == 0)
    kept = (y[m] == 1) & (p[m] >= 0.5)
    print(f"  {G:8} median {np.median(p[m]):.2f}  >=0.5: {np.mean(p[m]>=0.5):.2f}  correct kept {kept.sum()}/{int(y[m].sum())}")
# held-out folds: fit on others, evaluate per group on the fold
print("\nheld-out: per fold, top-1 correct kept / no-answer top-1 let through at p>=0.5")
for k in range(5):
    tr = f != k; a_, b_ = fit(g[tr], y[tr]); pk = 1/(1+np.exp(-(a_*g+b_)))
    out = []
    for G in sorted(set(grp)):
        m = (grp == G) & (rk == 0) & (f == k)
        if G.startswith(("sf","gib")): out.append(f"{G}:{np.mean(pk[m]>=0.5):.2f}")
        else: out.append(f"{G}:{np.mean((pk[m]>=0.5)[y[m]==1]):.2f}")
    print(f"  fold {k}: " + " ".join(out))
print("\nfloor on p: correct top-1 kept per group | no-answer top-1 let through (sf, gib pooled)")
for fl in [0.05, 0.1, 0.15, 0.2, 0.3, 0.5]:
    out = []
    for G in ["en>en","es>es","zh>zh","es>en","en>es","zh>en"]:
        m = (grp == G) & (rk == 0) & (y == 1)
        out.append(f"{G}:{np.mean(p[m]>=fl):.2f}")
    neg = (rk == 0) & np.array([x.startswith(("sf","gib")) for x in grp])
    out.append(f"noanswer:{np.mean(p[neg]>=fl):.2f}")
    print(f"  p>={fl:.2f} (gap {(np.log(fl/(1-fl))-b)/a:.4f}): " + " ".join(out))
