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
//!
//! A note's words are the recall index's terms (stems, CJK bigrams), so that notes of a line
//! or two that say the same in other words share them too; `memoria eval topics` measures the
//! rule on such notes beside notes that share their tags and subject but say something else.
//! `docs/BENCHMARKS.md` has the studies' figures.

use std::collections::{BTreeSet, HashMap};

/// Word overlap (Jaccard of the word sets) that makes two notes the same topic on its own.
pub const LEXICAL_ALONE: f64 = 0.50;
/// Word overlap that, with a vector cosine of at least [`COSINE_WITH_LEXICAL`], makes two
/// notes the same topic.
pub const LEXICAL_WITH_COSINE: f64 = 0.30;
/// See [`LEXICAL_WITH_COSINE`].
pub const COSINE_WITH_LEXICAL: f32 = 0.95;
/// The most notes one finding groups: a larger cluster is a broad subject, not one topic.
pub const MAX_GROUP: usize = 6;

/// Calls `f` with each term of a note's summary and body that carries its topic, repeats
/// included: the terms the recall index makes of them — words stemmed in the note's language
/// (one language for the whole note, as recall has it), stop words left out, and Chinese,
/// Japanese or Korean as character bigrams and single characters. A note too short for its
/// language to be clear (a line or two) is stemmed as English, the language most notes are
/// written in: one stem per word keeps two short notes that share a word sharing exactly that.
/// So "Deploys go out on Tuesdays" and "Tuesday is deploy day" share `deploy` and `tuesday`,
/// and a sentence of Chinese is more than one word.
fn each_term(summary: &str, body: &str, f: impl FnMut(String)) {
    use memoria_recall::analyzer::{Lang, analyze_detected};
    // A line break ends every word and every run of CJK characters: nothing spans the two.
    let text = format!("{summary}\n{body}");
    analyze_detected(&text, Some(Lang::En))
        .into_iter()
        .for_each(f);
}

/// A note's words: its summary's and body's terms (see [`each_term`]) and its tags (as `#tag`,
/// so a tag matches a tag).
pub fn note_words(summary: &str, tags: &[String], body: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    each_term(summary, body, |w| {
        out.insert(w);
    });
    for t in tags {
        out.insert(format!("#{}", t.to_lowercase()));
    }
    out
}

/// Word ids per scope: the words of [`note_words`] as numbers, so a note's words are a sorted
/// list of ids and two notes share an id exactly when they share the word. Words of different
/// scopes get different ids, so notes of two scopes never meet.
#[derive(Default)]
pub struct Vocabulary {
    tables: HashMap<String, HashMap<Box<str>, u32, BuildFnv>>,
    next: u32,
}

impl Vocabulary {
    fn table(&mut self, scope: &str) -> &mut HashMap<Box<str>, u32, BuildFnv> {
        if !self.tables.contains_key(scope) {
            self.tables.insert(scope.to_owned(), HashMap::default());
        }
        self.tables.get_mut(scope).expect("inserted above")
    }

    fn id(next: &mut u32, table: &mut HashMap<Box<str>, u32, BuildFnv>, w: &str) -> u32 {
        if let Some(&id) = table.get(w) {
            return id;
        }
        let id = *next;
        *next += 1;
        table.insert(w.into(), id);
        id
    }

    /// The ids of a note's words (as [`note_words`] has them), sorted, without repeats.
    pub fn note_tokens(
        &mut self,
        scope: &str,
        summary: &str,
        tags: &[String],
        body: &str,
    ) -> Vec<u32> {
        let mut next = self.next;
        let table = self.table(scope);
        let mut out = Vec::new();
        each_term(summary, body, |w| out.push(Self::id(&mut next, table, &w)));
        for t in tags {
            out.push(Self::id(
                &mut next,
                table,
                &format!("#{}", t.to_lowercase()),
            ));
        }
        self.next = next;
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The ids of a word set, sorted.
    pub fn tokens_of(&mut self, scope: &str, words: &BTreeSet<String>) -> Vec<u32> {
        let mut next = self.next;
        let table = self.table(scope);
        let mut out: Vec<u32> = words
            .iter()
            .map(|w| Self::id(&mut next, table, w))
            .collect();
        self.next = next;
        out.sort_unstable();
        out
    }
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

/// FNV-1a: words are short and not chosen by an adversary who could gain by colliding them,
/// so a simpler hash than the standard library's suits the word table.
#[derive(Default)]
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type BuildFnv = std::hash::BuildHasherDefault<Fnv>;

/// Each note's word ids as token ranks, rarest first (ties by id), so that two notes' sorted
/// rank lists share exactly the words they share.
fn ranked_tokens(mut tokens: Vec<Vec<u32>>) -> Vec<Vec<u32>> {
    let vocabulary = tokens.iter().flatten().max().map_or(0, |&m| m as usize + 1);
    let mut df: Vec<u32> = vec![0; vocabulary];
    for t in &tokens {
        for &x in t {
            df[x as usize] += 1;
        }
    }
    let mut order: Vec<u32> = (0..vocabulary as u32).collect();
    order.sort_unstable_by_key(|&t| (df[t as usize], t));
    let mut rank = vec![0u32; vocabulary];
    for (r, &t) in order.iter().enumerate() {
        rank[t as usize] = r as u32;
    }
    for t in &mut tokens {
        for x in t.iter_mut() {
            *x = rank[*x as usize];
        }
        t.sort_unstable();
    }
    tokens
}

/// The overlap (shared tokens) two sets of sizes `a` and `b` need for a Jaccard of `t`; a
/// small tolerance keeps a boundary pair whose exact ratio rounds below `t`.
fn needed(t: f64, a: usize, b: usize) -> usize {
    ((t / (1.0 + t) * (a + b) as f64) - 1e-9).ceil() as usize
}

/// `counted` plus how many tokens two sorted lists share; `None` as soon as the tokens left
/// cannot bring it to `need`.
fn overlap_from(a: &[u32], b: &[u32], counted: usize, need: usize) -> Option<usize> {
    let (mut i, mut j, mut shared) = (0, 0, counted);
    while i < a.len() && j < b.len() {
        if shared + (a.len() - i).min(b.len() - j) < need {
            return None;
        }
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
    (shared >= need).then_some(shared)
}

/// Every pair `(i, j)`, `i < j`, whose word overlap (Jaccard) reaches `alone`, or reaches `t`
/// (below `alone`) and `close(i, j)` holds, with that overlap: the set-similarity self-join with the prefix, length and position filters (PPJoin). With each note's tokens
/// ordered rarest first and the notes taken from the smallest, two notes that overlap by `t`
/// share a token within the first `n - ceil(t·n) + 1` tokens of the larger and the first
/// `n - ceil(2t/(1+t)·n) + 1` of the smaller; only the notes found that way are candidates, a
/// candidate is dropped as soon as the tokens left to either note cannot make up the overlap
/// needed, and a comparison counts only the tokens past those prefixes. Exact: it finds every
/// pair a comparison of all pairs finds.
fn overlapping_pairs(
    tokens: &[Vec<u32>],
    t: f64,
    alone: f64,
    close: impl Fn(usize, usize) -> bool,
) -> Vec<(usize, usize, f64)> {
    let mut by_size: Vec<usize> = (0..tokens.len())
        .filter(|&i| !tokens[i].is_empty())
        .collect();
    by_size.sort_by_key(|&i| (tokens[i].len(), i));
    let probe_prefix = |n: usize| (n - ((t * n as f64) - 1e-9).ceil() as usize + 1).min(n);
    let index_prefix =
        |n: usize| (n - ((2.0 * t / (1.0 + t) * n as f64) - 1e-9).ceil() as usize + 1).min(n);
    // The overlap two notes need, by the sum of their sizes, worked out once.
    let longest = tokens.iter().map(Vec::len).max().unwrap_or(0);
    let need_t: Vec<usize> = (0..=2 * longest).map(|s| needed(t, s, 0)).collect();
    let need_alone: Vec<usize> = (0..=2 * longest).map(|s| needed(alone, s, 0)).collect();
    // Token → (note, position, note's size) of the notes already indexed, smallest first;
    // `start` skips the notes every later (larger) note is too large to pair with.
    type Posting = (u32, u32, u32);
    let vocabulary = tokens.iter().flatten().max().map_or(0, |&m| m as usize + 1);
    let mut postings: Vec<(usize, Vec<Posting>)> = vec![(0, Vec::new()); vocabulary];
    // Shared prefix tokens counted per candidate; `PRUNED` once it cannot reach the overlap.
    const PRUNED: i32 = -1;
    let mut count: Vec<i32> = vec![0; tokens.len()];
    let mut touched: Vec<usize> = Vec::new();
    // Per note, side by side: its size, its indexed prefix's length and last token (read for
    // every candidate, so kept out of the notes' own token lists).
    let sizes: Vec<usize> = tokens.iter().map(Vec::len).collect();
    let indexed: Vec<usize> = sizes.iter().map(|&n| index_prefix(n)).collect();
    let last_indexed: Vec<u32> = tokens
        .iter()
        .zip(&indexed)
        .map(|(t, &k)| if k == 0 { 0 } else { t[k - 1] })
        .collect();
    let mut out = Vec::new();
    for &x in &by_size {
        let a = &tokens[x];
        let n = a.len();
        let min_size = (t * n as f64 - 1e-9).ceil() as usize;
        let probed = probe_prefix(n);
        for (i, tok) in a[..probed].iter().enumerate() {
            let (start, list) = &mut postings[*tok as usize];
            while *start < list.len() && (list[*start].2 as usize) < min_size {
                *start += 1;
            }
            for &(y, j, b_len) in &list[*start..] {
                let y = y as usize;
                let c = count[y];
                if c == PRUNED {
                    continue;
                }
                if c == 0 {
                    touched.push(y);
                }
                let b_len = b_len as usize;
                let bound = 1 + (n - i - 1).min(b_len - j as usize - 1);
                count[y] = if c as usize + bound >= need_t[n + b_len] {
                    c + 1
                } else {
                    PRUNED
                };
            }
        }
        // Counted: the shared tokens up to the commoner of the two prefixes' last tokens.
        // The rest lie past it in both notes, and only those are compared.
        for &y in &touched {
            let c = count[y];
            count[y] = 0;
            if c <= 0 {
                continue;
            }
            let c = c as usize;
            let (a_last, b_last) = (a[probed - 1], last_indexed[y]);
            let left = if a_last <= b_last {
                n - probed
            } else {
                sizes[y] - indexed[y]
            };
            let sum = n + sizes[y];
            if c + left < need_t[sum] {
                continue;
            }
            let b = &tokens[y];
            let upto = a_last.min(b_last);
            let (a_rest, b_rest) = (
                &a[a.partition_point(|&v| v <= upto)..],
                &b[b.partition_point(|&v| v <= upto)..],
            );
            let (i, j) = (x.min(y), x.max(y));
            // The pair's own test comes last, and only for an overlap that needs it.
            if let Some(shared) = overlap_from(a_rest, b_rest, c, need_t[sum])
                && (shared >= need_alone[sum] || close(i, j))
            {
                out.push((i, j, shared as f64 / (sum - shared) as f64));
            }
        }
        touched.clear();
        for (i, tok) in a[..indexed[x]].iter().enumerate() {
            postings[*tok as usize]
                .1
                .push((x as u32, i as u32, n as u32));
        }
    }
    out
}

/// Groups of 2 to [`MAX_GROUP`] notes of one scope linked by same-topic pairs (connected
/// components; a larger component is dropped), ordered by their first member.
pub fn groups(docs: &[TopicDoc]) -> Vec<TopicGroup> {
    let mut vocabulary = Vocabulary::default();
    let tokens: Vec<Vec<u32>> = docs
        .iter()
        .map(|d| vocabulary.tokens_of(&d.scope, &d.words))
        .collect();
    let vectors: Vec<Option<&[f32]>> = docs.iter().map(|d| d.vector.as_deref()).collect();
    groups_of(tokens, &vectors)
}

/// [`groups`] of notes given as their word ids (from one [`Vocabulary`]) and vectors.
///
/// Every pair the rule can accept has a word overlap of at least [`LEXICAL_WITH_COSINE`], and
/// of [`LEXICAL_ALONE`] unless their vectors are that close: candidates come from an exact
/// set-similarity join at the overlap each pair needs, and only the pairs found are judged by
/// the rule.
pub fn groups_of(tokens: Vec<Vec<u32>>, vectors: &[Option<&[f32]>]) -> Vec<TopicGroup> {
    let n = tokens.len();
    let tokens = ranked_tokens(tokens);
    let cos = |i: usize, j: usize| match (vectors[i], vectors[j]) {
        (Some(x), Some(y)) if x.len() == y.len() => Some(cosine(x, y)),
        _ => None,
    };
    let close = |i: usize, j: usize| cos(i, j).is_some_and(|c| c >= COSINE_WITH_LEXICAL);
    let mut pairs: Vec<(usize, usize, Similarity)> = Vec::new();
    for (i, j, lexical) in overlapping_pairs(&tokens, LEXICAL_WITH_COSINE, LEXICAL_ALONE, close) {
        let s = Similarity {
            lexical,
            cosine: cos(i, j),
        };
        if same_topic(s) {
            pairs.push((i, j, s));
        }
    }
    components(n, pairs)
}

/// The connected components of 2 to [`MAX_GROUP`] notes over same-topic pairs `(i, j, s)`,
/// `i < j`, each with its weakest pair (least word overlap; the first such pair in (i, j)
/// order), ordered by their first member.
fn components(n: usize, mut pairs: Vec<(usize, usize, Similarity)>) -> Vec<TopicGroup> {
    pairs.sort_by_key(|&(i, j, _)| (i, j));
    let mut uf: Vec<usize> = (0..n).collect();
    fn root(uf: &mut [usize], mut i: usize) -> usize {
        while uf[i] != i {
            uf[i] = uf[uf[i]];
            i = uf[i];
        }
        i
    }
    for &(i, j, _) in &pairs {
        let (x, y) = (root(&mut uf, i), root(&mut uf, j));
        if x != y {
            uf[x.max(y)] = x.min(y);
        }
    }
    let mut members: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut weakest: HashMap<usize, Similarity> = HashMap::new();
    for &(i, j, s) in &pairs {
        let r = root(&mut uf, i);
        let m = members.entry(r).or_default();
        for k in [i, j] {
            if !m.contains(&k) {
                m.push(k);
            }
        }
        let w = weakest.entry(r).or_insert(s);
        if s.lexical < w.lexical {
            *w = s;
        }
    }
    let mut out: Vec<TopicGroup> = members
        .into_iter()
        .filter(|(_, m)| m.len() <= MAX_GROUP)
        .map(|(r, mut m)| {
            m.sort_unstable();
            TopicGroup {
                members: m,
                weakest: weakest[&r],
            }
        })
        .collect();
    out.sort_by_key(|g| g.members[0]);
    out
}

/// [`groups`] by comparing every pair of notes of one scope: the reference the fast path is
/// tested against.
#[cfg(test)]
pub fn groups_by_every_pair(docs: &[TopicDoc]) -> Vec<TopicGroup> {
    let mut pairs = Vec::new();
    for i in 0..docs.len() {
        for j in i + 1..docs.len() {
            if docs[i].scope != docs[j].scope {
                continue;
            }
            let s = similarity(&docs[i], &docs[j]);
            if same_topic(s) {
                pairs.push((i, j, s));
            }
        }
    }
    components(docs.len(), pairs)
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

    /// A small deterministic generator (xorshift).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn unit(v: Vec<f32>) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    /// Notes over a small skewed vocabulary (so common words are in most notes), with
    /// rewordings of every strength (words dropped, added, swapped) and vectors near or far
    /// from their source's, in two scopes, some without a vector.
    fn vault(seed: u64, n: usize) -> Vec<TopicDoc> {
        let mut rng = Rng(seed);
        let mut docs: Vec<TopicDoc> = Vec::with_capacity(n);
        for i in 0..n {
            let scope = if rng.below(5) == 0 {
                "project:p"
            } else {
                "user"
            };
            let (words, vector) = if i > 0 && rng.below(3) == 0 {
                let src = &docs[rng.below(i as u64) as usize];
                let keep = 40 + rng.below(61);
                let mut w: BTreeSet<String> = src
                    .words
                    .iter()
                    .filter(|_| rng.below(100) < keep)
                    .cloned()
                    .collect();
                for _ in 0..rng.below(12) {
                    w.insert(format!("w{}", rng.below(400)));
                }
                let noise = [0.01f32, 0.1, 0.2, 0.3, 0.6][rng.below(5) as usize];
                let v = src.vector.as_ref().map(|v| {
                    unit(
                        v.iter()
                            .map(|x| x + noise * ((rng.below(2001) as f32 / 1000.0) - 1.0) / 4.0)
                            .collect(),
                    )
                });
                (w, v)
            } else {
                let len = 3 + rng.below(40);
                let w: BTreeSet<String> = (0..len)
                    .map(|_| {
                        let r = rng.below(1000) as f64 / 1000.0;
                        format!("w{}", (r * r * r * 400.0) as u64)
                    })
                    .collect();
                let v = (rng.below(6) != 0).then(|| {
                    unit(
                        (0..16)
                            .map(|_| rng.below(2001) as f32 / 1000.0 - 1.0)
                            .collect(),
                    )
                });
                (w, v)
            };
            docs.push(TopicDoc {
                scope: scope.into(),
                words,
                vector,
            });
        }
        docs
    }

    #[test]
    fn the_join_finds_the_groups_a_comparison_of_every_pair_finds() {
        let mut grouped = 0;
        let mut tipped_by_vector = 0;
        for seed in 1..=12u64 {
            let docs = vault(seed * 0x9e37_79b9, 400);
            let fast = groups(&docs);
            assert_eq!(fast, groups_by_every_pair(&docs), "seed {seed}");
            grouped += fast.len();
            tipped_by_vector += fast
                .iter()
                .filter(|g| g.weakest.lexical < LEXICAL_ALONE)
                .count();
        }
        // The vaults exercise both halves of the rule.
        assert!(
            grouped > 100 && tipped_by_vector > 10,
            "{grouped} {tipped_by_vector}"
        );
    }

    #[test]
    fn a_notes_tokens_are_its_words_as_ids() {
        let mut v = Vocabulary::default();
        let texts = [
            ("Pricing Cards", vec!["Design".to_owned()], PRICING),
            (
                "Déploiement",
                vec![],
                "Déploiement le MARDI, the the and déploiement.",
            ),
            (
                "Deploys",
                vec!["ops".to_owned(), "Design".to_owned()],
                DEPLOY,
            ),
        ];
        for scope in ["user", "project:p"] {
            for (summary, tags, body) in &texts {
                let direct = v.note_tokens(scope, summary, tags, body);
                let via_words = v.tokens_of(scope, &note_words(summary, tags, body));
                assert_eq!(direct, via_words, "{summary}");
            }
        }
        // The same word in two scopes is two tokens.
        let a = v.note_tokens("user", "", &[], "pricing");
        let b = v.note_tokens("project:p", "", &[], "pricing");
        assert_ne!(a, b);
    }

    #[test]
    fn a_cluster_larger_than_six_is_not_one_topic() {
        let docs: Vec<TopicDoc> = (0..7).map(|_| doc("user", PRICING, None)).collect();
        assert!(groups(&docs).is_empty());
        let docs: Vec<TopicDoc> = (0..6).map(|_| doc("user", PRICING, None)).collect();
        assert_eq!(groups(&docs)[0].members, [0, 1, 2, 3, 4, 5]);
    }
}
