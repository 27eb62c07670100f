# The data behind consolidation's cosine cut (engine/src/hygiene/consolidate.rs): the pairs of
# scripts/same-topic-study.py (near-duplicate variants of SciFact documents, light and heavy,
# against related-but-distinct documents), embedded as the engine embeds a note's first passage,
# swept over cosine cuts. A cut is good when it admits variants and no related pair: a
# consolidation folds notes that say the same thing, never notes that are merely related.
# Needs what the same-topic study needs (the quantize venv of install-model.sh).
#   python scripts/consolidation-study.py [MODEL_DIR]
import os, runpy
g = runpy.run_path(os.path.join(os.path.dirname(__file__), "same-topic-study.py"))
rows = g["rows"]
LEX_WITH_COSINE = g["LEXICAL_WITH_COSINE"]
by = {k: [r for r in rows if r["kind"] == k] for k in ("pos", "hard", "neg")}
neg_cos = sorted((r["cos"] for r in by["neg"]), reverse=True)
print("highest related-but-distinct cosines:", " ".join(f"{c:.4f}" for c in neg_cos[:8]))
print("cut    light        heavy        related (false)")
for i in range(0, 21):
    t = 0.90 + i * 0.005
    n = lambda k: sum(r["cos"] >= t for r in by[k])
    print(f"{t:.3f}  {n('pos'):4}/{len(by['pos'])}  {n('hard'):4}/{len(by['hard'])}  {n('neg'):4}/{len(by['neg'])}")
cut = round(max(neg_cos) + 0.0005, 3)
cut = next(c / 1000 for c in range(900, 1000) if c / 1000 > max(neg_cos))
n = lambda k: sum(r["cos"] >= cut for r in by[k])
print(f"lowest cut above every related pair: {cut:.3f}: light {n('pos')}/{len(by['pos'])}, "
      f"heavy {n('hard')}/{len(by['hard'])}, related {n('neg')}/{len(by['neg'])}")
