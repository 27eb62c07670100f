#!/usr/bin/env python3
"""Reorderings of the agent's LoCoMo results, measured before any is built into the product.

A rule in `said::rank_messages` can only reorder the hits the agent's search read, so each rule
here is applied to the 50 results a run of `memoria eval locomo --limit 50 --run RUN` wrote
(its scores included), and scored as the eval scores: evidence recall@5 on the whole file, per
conversation, and left one conversation out (each rule's knob chosen on two conversations,
the third scored). The rules that read vectors embed the same message documents with e5-small
outside the product (numpy, onnxruntime and tokenizers, as the venv of install-model.sh has
them; MODEL_DIR holds the unquantized `model.onnx` and `tokenizer.json`), close to but not the
product's int8 vectors. Without MODEL_DIR only the rules that read words run.

    python3 scripts/locomo-rules-study.py DATA.json RUN [MODEL_DIR]
"""

import collections
import json
import re
import sys


def dia(x):
    d, _, t = x.strip().rpartition(":")
    return f"{d}:{t.lstrip('0')}" if d else x.strip()


data = json.load(open(sys.argv[1]))
run = collections.defaultdict(list)
for line in open(sys.argv[2]):
    q, _, d, _, s, _ = line.split()
    run[q].append((d, float(s)))

gold, cat, question, text, speaker, docs = {}, {}, {}, {}, {}, []
for smp in data:
    sid, conv = smp["sample_id"], smp["conversation"]
    sessions = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
    for k in sessions:
        prev = None
        for t in conv[f"session_{k}"]:
            said = t["text"].strip()
            if t.get("blip_caption"):
                said += f"\n[shared: {t['blip_caption']}]"
            key = (sid, dia(t["dia_id"]))
            text[key], speaker[key] = said, t["speaker"]
            # The message's document as recall indexes it (`said::message_doc`).
            lead = f"{prev[0]}: {' '.join(prev[1].split()[-25:])}\n" if prev else ""
            docs.append((key, f"passage: {lead}{t['speaker']}: {said}"))
            prev = (t["speaker"], said)
    for i, q in enumerate(smp["qa"]):
        if q.get("category") in (1, 2, 3, 4):
            qid = f"{sid}-q{i}"
            gold[qid] = [dia(e) for e in q.get("evidence", [])]
            cat[qid], question[qid] = q["category"], q["question"]
speakers = collections.defaultdict(set)
for (sid, _), s in speaker.items():
    speakers[sid].add(s)
convs = sorted({q.rsplit("-q", 1)[0] for q in gold})


def conv_of(q):
    return q.rsplit("-q", 1)[0]


def recall(lists, k=5, keep=lambda q: True):
    vals = [
        sum(e in [d for d, _ in lists[q][:k]] for e in g) / len(g) if g else 0.0
        for q, g in gold.items()
        if keep(q)
    ]
    return sum(vals) / len(vals)


def apply(rule):
    return {q: rule(q, run[q]) for q in gold}


def rescored(lst, f):
    return sorted(((d, f(d, s)) for d, s in lst), key=lambda x: -x[1])


def leave_one_out(name, rules):
    rules = [("off", lambda q, lst: lst)] + rules
    lists = {label: apply(r) for label, r in rules}
    best_all = max(rules, key=lambda r: recall(lists[r[0]]))[0]
    folds = []
    for held in convs:
        train = max(rules, key=lambda r: recall(lists[r[0]], keep=lambda q: conv_of(q) != held))[0]
        folds.append((held, train, recall(lists[train], keep=lambda q: conv_of(q) == held)))
    print(
        f"{name}: best on the file {recall(lists[best_all]):.4f} ({best_all}); left one out "
        + " ".join(f"{h} {r:.4f} ({t})" for h, t, r in folds)
        + f"; mean {sum(r for *_, r in folds) / len(folds):.4f}"
    )


def oracle(depth):
    def rule(q, lst):
        first = [x for x in lst[:depth] if x[0] in gold[q]]
        return first + [x for x in lst if x not in first]

    return rule


for depth in (10, 20, 50):
    print(f"evidence of the first {depth} put first: R@5 {recall(apply(oracle(depth))):.4f}")

PLACE_Q = re.compile(r"^\s*where\b|\b(cit(y|ies)|countr(y|ies)|states?|places?|town|areas?)\b", re.I)
PERSON_Q = re.compile(r"^\s*who\b|\bnames?\b", re.I)
NUMBER_Q = re.compile(r"^\s*how (many|much|long|old)\b", re.I)
PLACE = re.compile(r"\b(?:in|at|to|from|near)\s+(?:the\s+)?([A-Z][a-zA-Z]+)")
NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+)")
NUMBER = re.compile(r"\b(\d+|one|two|three|four|five|six|seven|eight|nine|ten|once|twice)\b", re.I)
NOT_A_NAME = {"I", "Thanks", "Wow", "Hey", "Hi", "Yeah", "Yes", "No", "Oh", "That", "It", "This", "My", "The", "What"}


def answer_type(w):
    def names(key, pattern):
        return any(n not in speakers[key[0]] and n not in NOT_A_NAME for n in pattern.findall(text[key]))

    def rule(q, lst):
        sid, t = conv_of(q), question[q]
        if PLACE_Q.search(t):
            has = lambda key: names(key, PLACE)
        elif PERSON_Q.search(t):
            has = lambda key: names(key, NAME)
        elif NUMBER_Q.search(t):
            has = lambda key: bool(NUMBER.search(text[key]))
        else:
            return lst
        return rescored(lst, lambda d, s: s * (1 + w) if has((sid, d)) else s)

    return rule


STOP = set(
    "a an the of to in on at for with and or but is are was were be been being has have had do does "
    "did what which who whom where when why how would could should might may will can that this these "
    "those it its her his their them they she he i you your my me we our us as by from about into than "
    "then there here if so not no yes any some all both kind type types made make like likely".split()
)


def question_words(w):
    def rule(q, lst):
        sid = conv_of(q)
        names = {s.lower()[:5] for s in speakers[sid]}
        words = {x[:5] for x in re.findall(r"[a-z0-9]+", question[q].lower()) if x not in STOP and len(x) > 2} - names
        if not words:
            return lst
        share = lambda d: len(words & {x[:5] for x in re.findall(r"[a-z0-9]+", text[(sid, d)].lower())}) / len(words)
        return rescored(lst, lambda d, s: s * (1 + w * share(d)))

    return rule


def sessions_first(cap):
    listing = re.compile(r"^(what|which) (\w+ )?\w+s\b")

    def rule(q, lst):
        t = question[q].lower()
        if not (re.match(r"^(what|which|where|who)\b", t) and (re.search(r"\b(has|have)\b", t) or listing.match(t))):
            return lst
        first, rest, seen = [], [], collections.Counter()
        for x in lst:
            session = x[0].split(":")[0]
            (first if seen[session] < cap else rest).append(x)
            seen[session] += 1
        return first + rest

    return rule


leave_one_out("answer-type cues", [(f"w {w}", answer_type(w)) for w in (0.1, 0.2, 0.3, 0.5, 1.0)])
leave_one_out("the question's words", [(f"w {w}", question_words(w)) for w in (0.1, 0.2, 0.3, 0.5, 1.0)])
leave_one_out("sessions first for lists", [(f"cap {c}", sessions_first(c)) for c in (1, 2)])

if len(sys.argv) > 3:
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(f"{sys.argv[3]}/tokenizer.json")
    tok.enable_truncation(256)
    model = onnxruntime.InferenceSession(f"{sys.argv[3]}/model.onnx")

    def embed(texts):
        out = []
        for i in range(0, len(texts), 32):
            enc = tok.encode_batch(texts[i : i + 32])
            n = max(len(e.ids) for e in enc)
            ids = np.array([e.ids + [0] * (n - len(e.ids)) for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask + [0] * (n - len(e.ids)) for e in enc], dtype=np.int64)
            h = model.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            v = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            out.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        return np.concatenate(out)

    keys = [k for k, _ in docs]
    row = {k: i for i, k in enumerate(keys)}
    vectors = embed([d for _, d in docs])
    qids = list(gold)
    qvec = dict(zip(qids, embed([f"query: {question[q]}" for q in qids])))

    def feedback(w, k):
        def rule(q, lst):
            sid = conv_of(q)
            centroid = vectors[[row[(sid, d)] for d, _ in lst[:k]]].mean(0)
            best = lst[0][1]
            return rescored(lst, lambda d, s: s + w * best * float(vectors[row[(sid, d)]] @ centroid))

        return rule

    def second_pass(w, beta):
        def rule(q, lst):
            sid = conv_of(q)
            rows = [i for i, key in enumerate(keys) if key[0] == sid]
            v = qvec[q] + beta * vectors[[row[(sid, d)] for d, _ in lst[:3]]].mean(0)
            sims = vectors[rows] @ (v / np.linalg.norm(v))
            lo, hi, best, had = sims.min(), sims.max(), lst[0][1], dict(lst)
            fused = {keys[r][1]: had.get(keys[r][1], 0.0) + w * best * (s - lo) / (hi - lo) for r, s in zip(rows, sims)}
            return sorted(fused.items(), key=lambda x: -x[1])[:50]

        return rule

    def general_talk(w):
        def rule(q, lst):
            sid = conv_of(q)
            m = vectors[[row[(sid, d)] for d, _ in lst]]
            likeness = ((m @ m.T).sum(1) - 1) / (len(m) - 1)
            mean = likeness.mean()
            factor = {d: 1 - w * (likeness[i] - mean) for i, (d, _) in enumerate(lst)}
            return rescored(lst, lambda d, s: s * factor[d])

        return rule

    leave_one_out(
        "pseudo-relevance feedback in the pool",
        [(f"w {w} k {k}", feedback(w, k)) for w in (0.1, 0.3, 0.5, 1.0) for k in (3, 5, 10)],
    )
    leave_one_out(
        "Rocchio second pass", [(f"w {w} b {b}", second_pass(w, b)) for w in (0.1, 0.2, 0.4) for b in (0.5, 1.0)]
    )
    leave_one_out("general talk counting less", [(f"w {w}", general_talk(w)) for w in (1, 2, 4, 8, 16)])
