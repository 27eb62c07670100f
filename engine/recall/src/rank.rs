//! Fusion of lexical and vector candidates, and the ranking factors applied after it.
//! Pure arithmetic: no I/O, time passed in.

use std::collections::{HashMap, HashSet};

use memoria_shared::Trust;

use super::store::DocMeta;
use crate::decay::DecayRule;

/// How BM25 and vector candidates are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion: Σ w / (k + rank), ranks from 1.
    Rrf { k: f64, vector_weight: f64 },
    /// Scores normalised per list (BM25 divided by the best BM25 score; cosine min-max over the
    /// candidates), then `vector_weight · v + (1 − vector_weight) · t`.
    Weighted { vector_weight: f64 },
    /// Weighted fusion whose vector weight follows the query's lexical coverage (the share of
    /// its words found in the notes' vocabulary): `lexical` when every word occurs, rising
    /// linearly to `cross` when none does — a query in another language than the notes has
    /// only names and numbers for BM25 to match, so the vectors must carry it. Gated by
    /// language as [`Fusion::Gated`] is.
    Adaptive { lexical: f64, cross: f64 },
    /// Weighted fusion in which a note's words count only when it is in the query's language:
    /// for a note in another language (both detected clearly) the BM25 side is 0, so a Spanish
    /// question over English notes ranks by meaning alone, as the vectors rank it, and names,
    /// numbers and cognates matched by BM25 cannot pull a wrong note up.
    Gated { vector_weight: f64 },
}

/// One rule with one weight: BM25 and the vectors weighed equally, a note's words counting only
/// when it is in the query's language. The weight was chosen on held-out folds of every
/// evaluation set together (docs/BENCHMARKS.md); with the language gate ranking a question in
/// another language than its notes as the vectors rank it, a weight that follows the query's
/// lexical coverage ([`Fusion::Adaptive`]) did no better on any set.
impl Default for Fusion {
    fn default() -> Self {
        Fusion::Gated {
            vector_weight: DEFAULT_VECTOR_WEIGHT,
        }
    }
}

/// The vector side's weight in the default fusion.
pub const DEFAULT_VECTOR_WEIGHT: f64 = 0.5;

impl Fusion {
    /// The vector side's weight in score fusion for a query of this lexical coverage
    /// (`None`: the query had no searchable words); `None` for RRF.
    pub fn vector_weight(self, coverage: Option<f64>) -> Option<f64> {
        match self {
            Fusion::Rrf { .. } => None,
            Fusion::Weighted { vector_weight } | Fusion::Gated { vector_weight } => {
                Some(vector_weight)
            }
            Fusion::Adaptive { lexical, cross } => {
                let c = coverage.unwrap_or(0.0).clamp(0.0, 1.0);
                Some(cross + (lexical - cross) * c)
            }
        }
    }
}

/// One candidate after fusion, with where its score came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub key: String,
    /// 1-based rank and raw BM25 score, when the lexical list had it.
    pub bm25: Option<(usize, f32)>,
    /// 1-based rank and cosine, when the vector list had it.
    pub vector: Option<(usize, f32)>,
    /// The note is in another language than the query: gated fusion left its words out.
    pub other_language: bool,
    pub score: f64,
}

/// Fuses two ranked lists (best first); `coverage` is the query's lexical coverage
/// (`LexicalIndex::coverage`), read by adaptive fusion only; `foreign` holds the notes in
/// another language than the query, read by gated fusion only.
pub fn fuse(
    lexical: &[(String, f32)],
    vector: &[(String, f32)],
    how: Fusion,
    coverage: Option<f64>,
    foreign: &HashSet<String>,
) -> Vec<Fused> {
    let blank = |k: &str| Fused {
        key: k.to_owned(),
        bm25: None,
        vector: None,
        other_language: false,
        score: 0.0,
    };
    let mut staged: HashMap<String, Fused> = HashMap::new();
    for (i, (k, s)) in lexical.iter().enumerate() {
        staged.entry(k.clone()).or_insert_with(|| blank(k)).bm25 = Some((i + 1, *s));
    }
    for (i, (k, s)) in vector.iter().enumerate() {
        staged.entry(k.clone()).or_insert_with(|| blank(k)).vector = Some((i + 1, *s));
    }
    let mut all: Vec<Fused> = Vec::with_capacity(staged.len());
    let gated = matches!(how, Fusion::Gated { .. } | Fusion::Adaptive { .. });
    // Scaled by the best score of all matches, left-out ones included: the words of the notes
    // that count keep their standing, rather than the best of them rising to 1.
    let best_bm25 = lexical.iter().map(|x| x.1).fold(0f32, f32::max);
    let (vmin, vmax) = vector
        .iter()
        .map(|x| x.1)
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), s| {
            (a.min(s), b.max(s))
        });
    let weight = how.vector_weight(coverage);
    for (_, mut f) in staged {
        f.score = match how {
            Fusion::Rrf { k, vector_weight } => {
                f.bm25.map_or(0.0, |(r, _)| 1.0 / (k + r as f64))
                    + f.vector
                        .map_or(0.0, |(r, _)| vector_weight / (k + r as f64))
            }
            Fusion::Weighted { .. } | Fusion::Adaptive { .. } | Fusion::Gated { .. } => {
                let vector_weight = weight.unwrap_or(0.5);
                f.other_language = gated && foreign.contains(&f.key);
                let t = f.bm25.filter(|_| !f.other_language).map_or(0.0, |(_, s)| {
                    if best_bm25 > 0.0 {
                        f64::from(s / best_bm25)
                    } else {
                        0.0
                    }
                });
                let v = f.vector.map_or(0.0, |(_, s)| {
                    if vmax > vmin {
                        f64::from((s - vmin) / (vmax - vmin))
                    } else {
                        1.0
                    }
                });
                vector_weight * v + (1.0 - vector_weight) * t
            }
        };
        all.push(f);
    }
    all.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key.cmp(&b.key)));
    all
}

/// Half-lives of recency decay by kind of note, in days; `None` is never decayed.
pub fn half_life_days(meta: &DocMeta) -> Option<f64> {
    if meta.evergreen {
        return None;
    }
    type_half_life_days(meta.note_type.as_deref())
}

/// Half-lives of recency decay by type, in days; `None` is never decayed.
pub fn type_half_life_days(note_type: Option<&str>) -> Option<f64> {
    match note_type {
        // Who the user is and how they want things done stay true until changed.
        Some("user" | "feedback" | "reference" | "domain") => None,
        Some("fact") => Some(30.0),
        // What was said stays what was said: a message months old that answers the question
        // is not worth less than a recent one that merely touches it. Recency among messages
        // comes from the time a question names and from the facts taken from them, where a
        // newer value closes the older.
        Some("message") => None,
        _ => Some(365.0),
    }
}

/// Decay never takes more than this share of a score away: it re-ranks, never buries.
pub const DECAY_FLOOR: f64 = 0.35;

/// Multiplier for age: `e^(−ln2 · age / half-life)`, floored at [`DECAY_FLOOR`].
pub fn decay(meta: &DocMeta, now_ms: i64) -> f64 {
    age_decay(half_life_days(meta), meta.updated_at_ms, now_ms)
}

/// [`decay`] for a half-life and a time.
pub fn age_decay(half_life_days: Option<f64>, updated_at_ms: Option<i64>, now_ms: i64) -> f64 {
    let (Some(hl), Some(updated)) = (half_life_days, updated_at_ms) else {
        return 1.0;
    };
    let age_days = ((now_ms - updated).max(0) as f64) / 86_400_000.0;
    (-std::f64::consts::LN_2 * age_days / hl)
        .exp()
        .max(DECAY_FLOOR)
}

/// A note's importance now, by `rule`: its own, reinforced by each recall or opening on this
/// machine and decayed since the last of them or its last edit. Kinds that never decay by age
/// ([`half_life_days`] `None`: pinned, evergreen, who the user is) keep it undecayed.
pub fn live_importance(meta: &DocMeta, rule: &DecayRule, now_ms: i64) -> f64 {
    let last_used = match (meta.updated_at_ms, meta.last_access_ms) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    rule.live(
        meta.importance,
        meta.access_count,
        last_used,
        half_life_days(meta).is_some(),
        now_ms,
    )
}

/// Whether a note is in the archive tier: out of recall and search unless asked for.
pub fn archived(meta: &DocMeta, rule: &DecayRule, now_ms: i64) -> bool {
    rule.archives(live_importance(meta, rule, now_ms))
}

/// Trust weight; `None` means never recalled.
pub fn trust_weight(trust: Option<Trust>) -> Option<f64> {
    match trust {
        None | Some(Trust::Owner | Trust::Derived) => Some(1.0),
        Some(Trust::Ingested) => Some(0.6),
        Some(Trust::Peer) => Some(0.3),
        Some(Trust::Quarantined) => None,
    }
}

/// 0.75 … 1.25 for importance 0 … 1; notes without one count as 0.5 (factor 1).
pub fn importance_factor(importance: Option<f64>) -> f64 {
    let i = importance.unwrap_or(0.5).clamp(0.0, 1.0);
    0.75 + 0.5 * i
}

/// Each recall of a note nudges it up, with diminishing returns, at most ×1.2.
pub fn access_factor(access_count: i64) -> f64 {
    (1.0 + 0.05 * (1.0 + access_count.max(0) as f64).ln()).min(1.2)
}

/// A note consolidated into another keeps this share of its score, and so does one superseded
/// by another (both: the product): enough to put the note that replaced it first when both
/// match a query alike, while the original stays findable.
pub const REPLACED_FACTOR: f64 = 0.5;

/// The standing factor: 1 for a current note, [`REPLACED_FACTOR`] for each way it was replaced.
pub fn standing_factor(s: super::Standing) -> f64 {
    let mut f = 1.0;
    if s.consolidated {
        f *= REPLACED_FACTOR;
    }
    if s.superseded {
        f *= REPLACED_FACTOR;
    }
    f
}

/// Maximal marginal relevance: reorders `scored` (best first) so each pick maximises
/// `λ · relevance − (1 − λ) · max similarity to what was already picked`. Relevance is the score
/// divided by the best score.
pub fn mmr<T>(scored: Vec<(T, f64)>, lambda: f64, sim: impl Fn(&T, &T) -> f64) -> Vec<(T, f64)> {
    let best = scored.iter().map(|x| x.1).fold(0f64, f64::max);
    let mut rest: Vec<(T, f64)> = scored;
    let mut picked: Vec<(T, f64)> = Vec::with_capacity(rest.len());
    while !rest.is_empty() {
        let mut best_i = 0;
        let mut best_v = f64::NEG_INFINITY;
        for (i, (item, s)) in rest.iter().enumerate() {
            let rel = if best > 0.0 { s / best } else { 0.0 };
            let redundancy = picked
                .iter()
                .map(|(p, _)| sim(item, p))
                .fold(0f64, f64::max);
            let v = lambda * rel - (1.0 - lambda) * redundancy;
            if v > best_v {
                best_v = v;
                best_i = i;
            }
        }
        picked.push(rest.remove(best_i));
    }
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(items: &[(&str, f32)]) -> Vec<(String, f32)> {
        items.iter().map(|(k, s)| (k.to_string(), *s)).collect()
    }

    fn meta(note_type: Option<&str>, updated: Option<i64>) -> DocMeta {
        DocMeta {
            key: "k".into(),
            scope: "user".into(),
            id: "k".into(),
            hash: "h".into(),
            note_type: note_type.map(String::from),
            updated_at_ms: updated,
            trust: None,
            importance: None,
            evergreen: false,
            standing: Default::default(),
            secret: false,
            access_count: 0,
            last_access_ms: None,
        }
    }

    #[test]
    fn rrf_adds_reciprocal_ranks() {
        let f = fuse(
            &l(&[("a", 9.0), ("b", 5.0)]),
            &l(&[("b", 0.9), ("c", 0.8)]),
            Fusion::Rrf {
                k: 60.0,
                vector_weight: 1.0,
            },
            None,
            &HashSet::new(),
        );
        assert_eq!(f[0].key, "b");
        assert!((f[0].score - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-12);
        assert_eq!(f[0].bm25, Some((2, 5.0)));
        assert_eq!(f[0].vector, Some((1, 0.9)));
        assert_eq!(f[1].key, "a");
        assert!((f[1].score - 1.0 / 61.0).abs() < 1e-12);
        assert_eq!(f[2].key, "c");
        assert!((f[2].score - 1.0 / 62.0).abs() < 1e-12);
    }

    #[test]
    fn weighted_fusion_normalises_each_list() {
        let f = fuse(
            &l(&[("a", 10.0), ("b", 5.0)]),
            &l(&[("b", 0.9), ("c", 0.7)]),
            Fusion::Weighted { vector_weight: 0.7 },
            Some(1.0),
            &HashSet::new(),
        );
        let score = |k: &str| f.iter().find(|x| x.key == k).unwrap().score;
        assert!((score("a") - 0.3).abs() < 1e-9);
        assert!((score("b") - (0.7 + 0.3 * 0.5)).abs() < 1e-6);
        assert!((score("c") - 0.0).abs() < 1e-9);
        assert_eq!(f[0].key, "b");
    }

    #[test]
    fn adaptive_fusion_leans_on_vectors_as_lexical_coverage_falls() {
        let how = Fusion::Adaptive {
            lexical: 0.5,
            cross: 0.9,
        };
        assert_eq!(how.vector_weight(Some(1.0)), Some(0.5));
        assert!((how.vector_weight(Some(0.5)).unwrap() - 0.7).abs() < 1e-12);
        assert_eq!(how.vector_weight(Some(0.0)), Some(0.9));
        assert_eq!(how.vector_weight(None), Some(0.9));
        assert_eq!(how.vector_weight(Some(7.0)), Some(0.5), "clamped");
        assert_eq!(
            Fusion::Weighted { vector_weight: 0.7 }.vector_weight(Some(0.0)),
            Some(0.7)
        );
        // "a" leads BM25, "b" leads the vectors: full coverage weighs them 0.5/0.5 and the
        // key order breaks the tie; no coverage gives the vectors 0.9 and "b" wins clearly.
        let lex = l(&[("a", 10.0), ("b", 5.0)]);
        let vec = l(&[("b", 0.9), ("c", 0.7), ("a", 0.5)]);
        let at = |c: f64| fuse(&lex, &vec, how, Some(c), &HashSet::new());
        let score = |f: &[Fused], k: &str| f.iter().find(|x| x.key == k).unwrap().score;
        let full = at(1.0);
        assert!((score(&full, "a") - 0.5).abs() < 1e-9);
        assert!((score(&full, "b") - (0.5 + 0.5 * 0.5)).abs() < 1e-6);
        let none = at(0.0);
        assert!((score(&none, "a") - 0.1).abs() < 1e-6);
        assert!((score(&none, "b") - (0.9 + 0.1 * 0.5)).abs() < 1e-6);
        assert_eq!(none[0].key, "b");
    }

    #[test]
    fn decay_halves_per_half_life_with_a_floor_and_spares_evergreen_kinds() {
        let day = 86_400_000;
        let now = 1_000 * day;
        let m = meta(Some("project"), Some(now - 365 * day));
        assert!((decay(&m, now) - 0.5).abs() < 1e-9);
        let m = meta(Some("fact"), Some(now - 30 * day));
        assert!((decay(&m, now) - 0.5).abs() < 1e-9);
        let m = meta(Some("fact"), Some(now - 300 * day));
        assert_eq!(decay(&m, now), DECAY_FLOOR);
        assert_eq!(decay(&meta(Some("feedback"), Some(0)), now), 1.0);
        assert_eq!(decay(&meta(None, None), now), 1.0);
        let mut m = meta(Some("fact"), Some(0));
        m.evergreen = true;
        assert_eq!(decay(&m, now), 1.0);
    }

    #[test]
    fn trust_importance_and_access_weights() {
        assert_eq!(trust_weight(Some(Trust::Owner)), Some(1.0));
        assert_eq!(trust_weight(Some(Trust::Derived)), Some(1.0));
        assert_eq!(trust_weight(Some(Trust::Ingested)), Some(0.6));
        assert_eq!(trust_weight(Some(Trust::Peer)), Some(0.3));
        assert_eq!(trust_weight(Some(Trust::Quarantined)), None);
        assert_eq!(importance_factor(None), 1.0);
        assert_eq!(importance_factor(Some(1.0)), 1.25);
        assert_eq!(importance_factor(Some(7.0)), 1.25);
        assert_eq!(access_factor(0), 1.0);
        assert!(access_factor(3) > 1.0 && access_factor(1_000_000) == 1.2);
    }

    #[test]
    fn mmr_demotes_near_duplicates() {
        // a and a2 are duplicates; b is different and slightly less relevant.
        let scored = vec![("a", 1.0), ("a2", 0.99), ("b", 0.9)];
        let sim = |x: &&str, y: &&str| {
            if x.starts_with('a') && y.starts_with('a') {
                1.0
            } else {
                0.0
            }
        };
        let out: Vec<&str> = mmr(scored.clone(), 0.7, sim)
            .into_iter()
            .map(|x| x.0)
            .collect();
        assert_eq!(out, vec!["a", "b", "a2"]);
        let out: Vec<&str> = mmr(scored, 1.0, sim).into_iter().map(|x| x.0).collect();
        assert_eq!(out, vec!["a", "a2", "b"]);
    }

    #[test]
    fn gated_fusion_leaves_out_the_words_of_notes_in_another_language() {
        // "a" matched the query's words (a name, a number) but is in another language; "b"
        // is in the query's language. Their meaning is close.
        let lex = l(&[("a", 10.0), ("b", 4.0)]);
        let vec = l(&[("a", 0.80), ("b", 0.82), ("c", 0.70)]);
        let foreign: HashSet<String> = ["a".to_string()].into();
        let weighted = fuse(
            &lex,
            &vec,
            Fusion::Weighted { vector_weight: 0.7 },
            None,
            &foreign,
        );
        assert_eq!(
            weighted[0].key, "a",
            "plain weighted fusion trusts the foreign match"
        );
        let gated = fuse(
            &lex,
            &vec,
            Fusion::Gated { vector_weight: 0.7 },
            None,
            &foreign,
        );
        assert_eq!(gated[0].key, "b");
        let a = gated.iter().find(|f| f.key == "a").unwrap();
        assert!(a.other_language && a.bm25.is_some());
        // b's words count as they stand beside the best match (a's 10.0), not raised to 1.
        let b = &gated[0];
        assert!((b.score - (0.7 * 1.0 + 0.3 * 0.4)).abs() < 1e-6, "{b:?}");
        // With no foreign note it is plain weighted fusion.
        let none = fuse(
            &lex,
            &vec,
            Fusion::Gated { vector_weight: 0.7 },
            None,
            &HashSet::new(),
        );
        assert_eq!(
            none.iter().map(|f| (&f.key, f.score)).collect::<Vec<_>>(),
            weighted
                .iter()
                .map(|f| (&f.key, f.score))
                .collect::<Vec<_>>()
        );
    }
}
