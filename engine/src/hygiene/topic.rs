//! Same topic: groups of notes of one scope whose words (summary, tags, body) and, when both
//! have one, embedding vectors overlap heavily. Pure: the caller hands in the notes' word sets
//! and vectors.
//!
//! The rule was chosen on SciFact: deterministic near-duplicate variants of its documents
//! (sentences reordered or dropped, clauses cut, words swapped for synonyms, half a document
//! kept) against related-but-distinct documents of the same corpus (each document's lexically
//! closest neighbour, and documents relevant to one query), with multilingual-e5-small's
//! cosines. The cosine alone cannot tell the two apart: related abstracts reach the cosines of
//! rewordings. Word overlap separates the light rewordings on its own; a heavy rewording shares
//! fewer words, and there the vector decides, above every related pair's cosine.
//! `docs/BENCHMARKS.md` has the study's figures.

use std::collections::{BTreeSet, HashMap};

/// Word overlap (Jaccard of the word sets) that makes two notes the same topic on its own.
pub const LEXICAL_ALONE: f64 = 0.50;
/// Word overlap that, with a vector cosine of at least [`COSINE_WITH_LEXICAL`], makes two
/// notes the same topic.
pub const LEXICAL_WITH_COSINE: f64 = 0.30;
/// See [`LEXICAL_WITH_COSINE`].
pub const COSINE_WITH_LEXICAL: f32 = 0.95;
/// Notes a word may be in and still propose candidates (see [`groups`]).
const COMMON_WORD_NOTES: usize = 200;
/// The most notes one finding groups: a larger cluster is a broad subject, not one topic.
pub const MAX_GROUP: usize = 6;

const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "are", "but", "not", "you", "with", "this", "that", "from", "have", "has",
    "had", "was", "were", "been", "its", "into", "than", "then", "them", "they", "their", "there",
    "these", "those", "which", "while", "what", "when", "where", "who", "whom", "whose", "will",
    "would", "can", "could", "should", "may", "might", "must", "our", "ours", "out", "over",
    "under", "also", "such", "only", "very", "more", "most", "some", "any", "all", "each", "both",
    "few", "other", "same", "own", "about", "above", "after", "again", "against", "because",
    "before", "being", "below", "between", "during", "further", "here", "how", "once", "why",
    "yes",
];

/// The words of a text that carry its topic: lowercase runs of letters and digits of three
/// or more characters, stop words left out.
pub fn words(text: &str, out: &mut BTreeSet<String>) {
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
    {
        let w = w.to_lowercase();
        if !STOP_WORDS.contains(&w.as_str()) {
            out.insert(w);
        }
    }
}

/// A note's words: its summary's, its body's and its tags (as `#tag`, so a tag matches a tag).
pub fn note_words(summary: &str, tags: &[String], body: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    words(summary, &mut out);
    words(body, &mut out);
    for t in tags {
        out.insert(format!("#{}", t.to_lowercase()));
    }
    out
}

/// One note as the same-topic rule sees it.
#[derive(Debug, Clone)]
pub struct TopicDoc {
    /// Notes are only grouped with notes of the same scope.
    pub scope: String,
    pub words: BTreeSet<String>,
    /// A unit-length embedding of the note (its first passage), when one is cached.
    pub vector: Option<Vec<f32>>,
}

/// Why two notes count as the same topic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Similarity {
    pub lexical: f64,
    pub cosine: Option<f32>,
}

/// Whether a pair with these signals is the same topic.
pub fn same_topic(s: Similarity) -> bool {
    s.lexical >= LEXICAL_ALONE
        || (s.lexical >= LEXICAL_WITH_COSINE && s.cosine.is_some_and(|c| c >= COSINE_WITH_LEXICAL))
}

/// A group of notes (indexes into the input) with the weakest pair's signals inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicGroup {
    pub members: Vec<usize>,
    pub weakest: Similarity,
}

/// Jaccard of two sets given as sorted ranks.
fn jaccard_sorted(a: &[u32], b: &[u32]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut shared) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    shared as f64 / (a.len() + b.len() - shared) as f64
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn vector_cosine(a: &TopicDoc, b: &TopicDoc) -> Option<f32> {
    match (&a.vector, &b.vector) {
        (Some(x), Some(y)) if x.len() == y.len() => Some(cosine(x, y)),
        _ => None,
    }
}

/// The pair's signals.
pub fn similarity(a: &TopicDoc, b: &TopicDoc) -> Similarity {
    let shared = a.words.intersection(&b.words).count();
    let union = a.words.len() + b.words.len() - shared;
    Similarity {
        lexical: if union == 0 {
            0.0
        } else {
            shared as f64 / union as f64
        },
        cosine: vector_cosine(a, b),
    }
}

/// Groups of 2 to [`MAX_GROUP`] notes of one scope linked by same-topic pairs (connected
/// components; a larger component is dropped), ordered by their first member.
///
/// Every pair the rule can accept has a word overlap of at least [`LEXICAL_WITH_COSINE`], so
/// candidates come from a prefix filter (the set-similarity join's): with each note's words
/// ordered rarest first, two notes that overlap that much share a word within the first
/// `n - ceil(t·n) + 1` words of each. Only those pairs are compared, and words in
/// [`COMMON_WORD_NOTES`] notes or more propose none, so a pair is missed only when every word
/// it shares in those prefixes is that common.
pub fn groups(docs: &[TopicDoc]) -> Vec<TopicGroup> {
    // Words of different scopes are different tokens, so notes of two scopes never meet.
    let mut ids: HashMap<(&str, &str), u32> = HashMap::new();
    let mut df: Vec<u32> = Vec::new();
    let mut tokens: Vec<Vec<u32>> = Vec::with_capacity(docs.len());
    for d in docs {
        let mut t = Vec::with_capacity(d.words.len());
        for w in &d.words {
            let next = ids.len() as u32;
            let id = *ids.entry((&d.scope, w)).or_insert(next);
            if id as usize == df.len() {
                df.push(0);
            }
            df[id as usize] += 1;
            t.push(id);
        }
        tokens.push(t);
    }
    // Rank tokens rarest first; each note's tokens become sorted ranks.
    let mut order: Vec<u32> = (0..df.len() as u32).collect();
    order.sort_unstable_by_key(|&t| (df[t as usize], t));
    let mut rank = vec![0u32; df.len()];
    for (r, &t) in order.iter().enumerate() {
        rank[t as usize] = r as u32;
    }
    for t in &mut tokens {
        for x in t.iter_mut() {
            *x = rank[*x as usize];
        }
        t.sort_unstable();
    }
    let threshold = LEXICAL_WITH_COSINE;
    let prefix = |n: usize| n - (threshold * n as f64).ceil() as usize + 1;
    let mut index: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut seen = vec![usize::MAX; docs.len()];
    let mut uf: Vec<usize> = (0..docs.len()).collect();
    fn root(uf: &mut [usize], mut i: usize) -> usize {
        while uf[i] != i {
            uf[i] = uf[uf[i]];
            i = uf[i];
        }
        i
    }
    let mut pairs: Vec<(usize, usize, Similarity)> = Vec::new();
    for i in 0..docs.len() {
        let a = &tokens[i];
        if a.is_empty() {
            continue;
        }
        for &t in &a[..prefix(a.len()).min(a.len())] {
            let list = index.entry(t).or_default();
            // A word in very many notes says little about a topic and would make every pair
            // a candidate: pairs that share only such words are not compared.
            if list.len() >= COMMON_WORD_NOTES {
                continue;
            }
            for &j in list.iter() {
                if seen[j] == i {
                    continue;
                }
                seen[j] = i;
                let b = &tokens[j];
                let (small, large) = (a.len().min(b.len()), a.len().max(b.len()));
                if (small as f64) < threshold * large as f64 {
                    continue;
                }
                let s = Similarity {
                    lexical: jaccard_sorted(a, b),
                    cosine: vector_cosine(&docs[i], &docs[j]),
                };
                if same_topic(s) {
                    pairs.push((j, i, s));
                    let (x, y) = (root(&mut uf, i), root(&mut uf, j));
                    if x != y {
                        uf[x.max(y)] = x.min(y);
                    }
                }
            }
            list.push(i);
        }
    }
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    for &(i, j, _) in &pairs {
        for k in [i, j] {
            let r = root(&mut uf, k);
            let m = members.entry(r).or_default();
            if !m.contains(&k) {
                m.push(k);
            }
        }
    }
    let mut out: Vec<TopicGroup> = members
        .into_iter()
        .filter(|(_, m)| m.len() <= MAX_GROUP)
        .map(|(r, mut m)| {
            m.sort_unstable();
            let weakest = pairs
                .iter()
                .filter(|(i, _, _)| root(&mut uf, *i) == r)
                .map(|(_, _, s)| *s)
                .min_by(|a, b| a.lexical.total_cmp(&b.lexical))
                .expect("a group has a pair");
            TopicGroup {
                members: m,
                weakest,
            }
        })
        .collect();
    out.sort_by_key(|g| g.members[0]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(scope: &str, text: &str, vector: Option<Vec<f32>>) -> TopicDoc {
        TopicDoc {
            scope: scope.into(),
            words: note_words("", &[], text),
            vector,
        }
    }

    const PRICING: &str = "Pricing cards on the landing page use filled backgrounds, never borders; \
        the highlighted plan gets the accent colour and a badge saying popular.";
    const PRICING_AGAIN: &str = "The landing page pricing cards use filled backgrounds and never \
        borders; the highlighted plan gets the accent colour with a popular badge.";
    const DEPLOY: &str = "Deploys go out on Tuesdays after the staging smoke tests pass; rollbacks \
        use the previous container tag.";

    #[test]
    fn rewordings_group_and_unrelated_notes_do_not() {
        let docs = vec![
            doc("user", PRICING, None),
            doc("user", DEPLOY, None),
            doc("user", PRICING_AGAIN, None),
        ];
        let g = groups(&docs);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].members, [0, 2]);
        assert!(g[0].weakest.lexical >= LEXICAL_ALONE);
    }

    #[test]
    fn notes_of_different_scopes_never_group() {
        let docs = vec![doc("user", PRICING, None), doc("project:p", PRICING, None)];
        assert!(groups(&docs).is_empty());
    }

    #[test]
    fn a_close_vector_tips_a_middling_overlap_and_a_far_one_does_not() {
        let mid = Similarity {
            lexical: 0.35,
            cosine: None,
        };
        assert!(!same_topic(mid));
        assert!(same_topic(Similarity {
            cosine: Some(0.95),
            ..mid
        }));
        assert!(!same_topic(Similarity {
            cosine: Some(0.90),
            ..mid
        }));
        // A close vector alone (related notes, few shared words) is not enough.
        assert!(!same_topic(Similarity {
            lexical: 0.2,
            cosine: Some(0.99)
        }));
    }

    #[test]
    fn a_cluster_larger_than_six_is_not_one_topic() {
        let docs: Vec<TopicDoc> = (0..7).map(|_| doc("user", PRICING, None)).collect();
        assert!(groups(&docs).is_empty());
        let docs: Vec<TopicDoc> = (0..6).map(|_| doc("user", PRICING, None)).collect();
        assert_eq!(groups(&docs)[0].members, [0, 1, 2, 3, 4, 5]);
    }
}
