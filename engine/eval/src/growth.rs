//! `memoria eval growth`: how recall holds up as a memory fills with near-duplicates, and what
//! the review queue's same-topic merges win back.
//!
//! A BEIR set's corpus is indexed as notes; each document judged relevant to the chosen
//! queries gets five deterministic near-duplicate variants (sentences reordered, a sentence
//! dropped, words swapped for synonyms, both, clauses cut), written after it. The queries are
//! scored clean, polluted, and after merging every same-topic group the review's rule finds
//! (the oldest note kept, the others deleted): with the kept note's own text, and with the
//! manual draft (every original under its summary) as the merged body. A hit is judged as the
//! document it copies, and a document counts once per ranking (a later copy fills a place
//! with nothing new); the strict figure judges a variant as not relevant. The same-topic
//! groups are scored against the known variant groups, pair by pair.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use memoria_shared::ContentHash;
use regex::Regex;

use super::metrics::{self, CorpusDoc};
use super::{Layout, ModelArgs, default_cache_dir, open_index, sample_corpus};
use crate::hygiene::merge::{MergeSource, manual_draft};
use crate::hygiene::topic::{self, TopicDoc};
use crate::recall::store::VectorStore;
use crate::recall::{Error, Mode, RecallDoc, RecallIndex, SearchOptions};

/// `memoria eval growth`.
#[derive(Debug, Clone, clap::Args)]
pub struct GrowthArgs {
    /// A BEIR folder: `corpus.jsonl`, `queries.jsonl` and `qrels/` (`test.tsv`, else
    /// `dev.tsv`, else `train.tsv`).
    #[arg(long)]
    pub data: PathBuf,
    /// The queries scored: the first N with judgements, in file order.
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// Index only the judged documents plus this many others (a fixed sample).
    #[arg(long)]
    pub distractors: Option<usize>,
    /// Where vectors are cached by (content hash, model id) between runs.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Fail unless the ONNX model loaded.
    #[arg(long)]
    pub require_model: bool,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Variants written per relevant document.
pub const VARIANTS: usize = 5;

/// Word swaps of the synonym variants (whole words, lowercase).
const SYNONYMS: [(&str, &str); 25] = [
    ("increase", "rise"),
    ("increased", "elevated"),
    ("decrease", "reduction"),
    ("decreased", "reduced"),
    ("patients", "subjects"),
    ("study", "investigation"),
    ("results", "findings"),
    ("significant", "notable"),
    ("significantly", "markedly"),
    ("associated", "linked"),
    ("risk", "hazard"),
    ("treatment", "therapy"),
    ("cells", "cell populations"),
    ("effect", "impact"),
    ("effects", "impacts"),
    ("levels", "concentrations"),
    ("however", "yet"),
    ("higher", "greater"),
    ("lower", "smaller"),
    ("using", "with"),
    ("analysis", "assessment"),
    ("showed", "demonstrated"),
    ("suggest", "indicate"),
    ("expression", "production"),
    ("compared", "contrasted"),
];

/// The sentences of a text: split after `.`, `!` or `?` followed by white space.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.trim().chars().peekable();
    while let Some(c) = chars.next() {
        current.push(c);
        if matches!(c, '.' | '!' | '?') && chars.peek().is_some_and(|n| n.is_whitespace()) {
            while chars.peek().is_some_and(|n| n.is_whitespace()) {
                chars.next();
            }
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

struct Rewriter {
    synonyms: Regex,
    map: HashMap<&'static str, &'static str>,
}

impl Rewriter {
    fn new() -> Rewriter {
        let words: Vec<&str> = SYNONYMS.iter().map(|(w, _)| *w).collect();
        Rewriter {
            synonyms: Regex::new(&format!(r"\b({})\b", words.join("|"))).expect("a valid pattern"),
            map: SYNONYMS.iter().copied().collect(),
        }
    }

    fn synonyms(&self, text: &str) -> String {
        self.synonyms
            .replace_all(text, |c: &regex::Captures<'_>| self.map[&c[1]].to_owned())
            .into_owned()
    }

    /// Every other sentence, from the first, loses its last clause (after the last `, `).
    fn drop_clauses(text: &str) -> String {
        sentences(text)
            .into_iter()
            .enumerate()
            .map(|(i, s)| match s.rsplit_once(", ") {
                Some((head, _)) if i % 2 == 0 => format!("{head}."),
                _ => s,
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The five variants (title, text) of a document.
    fn variants(&self, title: &str, text: &str) -> [(String, String); VARIANTS] {
        let ss = sentences(text);
        let mut rotated = ss.clone();
        if rotated.len() > 1 {
            rotated.rotate_left(1);
        }
        let dropped: Vec<String> = if ss.len() > 2 {
            let mid = ss.len() / 2;
            ss.iter()
                .enumerate()
                .filter(|(i, _)| *i != mid)
                .map(|(_, s)| s.clone())
                .collect()
        } else {
            ss.clone()
        };
        [
            (title.to_owned(), rotated.join(" ")),
            (title.to_owned(), dropped.join(" ")),
            (self.synonyms(title), self.synonyms(text)),
            (title.to_owned(), self.synonyms(&dropped.join(" "))),
            (self.synonyms(title), Self::drop_clauses(&rotated.join(" "))),
        ]
    }
}

/// A note of the growth vault: a corpus document or a variant of one.
#[derive(Debug, Clone)]
struct GrowthNote {
    id: String,
    /// The corpus document it is (or copies).
    source: String,
    title: String,
    text: String,
}

fn recall_doc(n: &GrowthNote) -> RecallDoc {
    RecallDoc {
        hash: ContentHash::of_parts(&n.id, &n.title, None, &[], &n.text),
        ..RecallDoc::new("eval", &n.id, &n.title, &n.text)
    }
}

/// The scores of one state of the vault.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct StateScores {
    state: String,
    notes: usize,
    #[serde(rename = "ndcg@10")]
    ndcg10: f64,
    /// Share of queries whose first hit is relevant.
    top1: f64,
    /// nDCG@10 with variants judged not relevant.
    #[serde(rename = "strictNdcg@10")]
    strict_ndcg10: f64,
}

/// The same-topic groups against the known variant groups.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct TopicScores {
    groups_found: usize,
    groups_known: usize,
    /// Found groups that are exactly a known group.
    exact: usize,
    /// Pairs inside found groups that are pairs of one known group, over all found pairs.
    pair_precision: f64,
    /// Pairs of known groups found inside one found group, over all known pairs.
    pair_recall: f64,
    review_ms: f64,
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct GrowthReport {
    queries: usize,
    documents: usize,
    variants: usize,
    embedder: String,
    model_id: String,
    states: Vec<StateScores>,
    same_topic: TopicScores,
}

/// Picks the judgements file of a BEIR folder.
fn qrels_path(data: &Path) -> anyhow::Result<PathBuf> {
    for name in ["test.tsv", "dev.tsv", "train.tsv"] {
        let p = data.join("qrels").join(name);
        if p.exists() {
            return Ok(p);
        }
    }
    bail!(
        "{} has no qrels/test.tsv, qrels/dev.tsv or qrels/train.tsv",
        data.display()
    )
}

/// Scores every query on the index as it stands; `judge` maps a hit to the document it is.
fn score(
    index: &RecallIndex,
    state: &str,
    notes: usize,
    queries: &[(String, String)],
    qrels: &metrics::Qrels,
    judge: &dyn Fn(&str) -> String,
) -> anyhow::Result<StateScores> {
    let opts = SearchOptions {
        limit: 100,
        mode: Mode::Hybrid,
        ranking: false,
        include_secrets: true,
        include_archived: true,
        ..SearchOptions::default()
    };
    let (mut ndcg, mut strict, mut top1) = (0.0, 0.0, 0.0);
    for (qid, text) in queries {
        let hits = match index.search(text, &opts) {
            Ok(h) => h,
            Err(Error::EmptyQuery) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let raw: Vec<String> = hits.iter().map(|h| h.id.clone()).collect();
        let mut seen = HashSet::new();
        let judged: Vec<String> = raw
            .iter()
            .map(|id| {
                let doc = judge(id);
                if seen.insert(doc.clone()) {
                    doc
                } else {
                    // A copy of a document already ranked brings nothing new.
                    String::new()
                }
            })
            .collect();
        let rel = &qrels[qid];
        ndcg += metrics::metrics(&judged, rel).ndcg10;
        strict += metrics::metrics(&raw, rel).ndcg10;
        if judged
            .first()
            .is_some_and(|d| rel.get(d).is_some_and(|g| *g > 0))
        {
            top1 += 1.0;
        }
    }
    let n = queries.len().max(1) as f64;
    Ok(StateScores {
        state: state.to_owned(),
        notes,
        ndcg10: ndcg / n,
        top1: top1 / n,
        strict_ndcg10: strict / n,
    })
}

/// Runs `memoria eval growth`.
pub fn run_growth(args: &GrowthArgs, json: bool) -> anyhow::Result<()> {
    let corpus = metrics::read_corpus(&args.data.join("corpus.jsonl"))?;
    let all_queries = metrics::read_queries(&args.data.join("queries.jsonl"))?;
    let qrels = metrics::read_qrels(&qrels_path(&args.data)?)?;
    let known: HashSet<&str> = corpus.iter().map(|d| d.id.as_str()).collect();
    let queries: Vec<(String, String)> = all_queries
        .into_iter()
        .filter(|(id, _)| {
            qrels
                .get(id)
                .is_some_and(|r| r.iter().any(|(d, g)| *g > 0 && known.contains(d.as_str())))
        })
        .take(args.queries)
        .collect();
    if queries.is_empty() {
        bail!("no query of {} has judgements", args.data.display());
    }
    let judged: HashSet<&String> = queries.iter().flat_map(|(q, _)| qrels[q].keys()).collect();
    let corpus: Vec<CorpusDoc> = match args.distractors {
        None => corpus.clone(),
        Some(n) => sample_corpus(&corpus, &judged, n),
    };
    let relevant: Vec<&CorpusDoc> = {
        let mut r: Vec<&CorpusDoc> = corpus
            .iter()
            .filter(|d| {
                queries
                    .iter()
                    .any(|(q, _)| qrels[q].get(&d.id).is_some_and(|g| *g > 0))
            })
            .collect();
        r.sort_by(|a, b| a.id.cmp(&b.id));
        r
    };

    // The vault: the corpus first (older), then the variants in document order.
    let mut notes: Vec<GrowthNote> = corpus
        .iter()
        .map(|d| GrowthNote {
            id: d.id.clone(),
            source: d.id.clone(),
            title: d.title.clone(),
            text: d.text.clone(),
        })
        .collect();
    let clean_count = notes.len();
    let rewriter = Rewriter::new();
    let mut groups_known: Vec<Vec<String>> = Vec::new();
    for d in &relevant {
        let mut group = vec![d.id.clone()];
        for (k, (title, text)) in rewriter.variants(&d.title, &d.text).into_iter().enumerate() {
            let id = format!("{}-v{}", d.id, k + 1);
            group.push(id.clone());
            notes.push(GrowthNote {
                id,
                source: d.id.clone(),
                title,
                text,
            });
        }
        groups_known.push(group);
    }
    let source_of: HashMap<String, String> = notes
        .iter()
        .map(|n| (n.id.clone(), n.source.clone()))
        .collect();

    let home = tempfile::tempdir().context("creating a temporary home")?;
    let cache_dir = args.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let cache_path = cache_dir.join("vectors.sqlite");
    let (index, status) = open_index(
        home.path(),
        &cache_dir,
        &args.model,
        args.require_model,
        Layout::product(),
    )?;
    let upsert = |docs: &[RecallDoc], what: &str| -> anyhow::Result<()> {
        let started = Instant::now();
        let mut last = Instant::now();
        let r = index.upsert_with_progress(docs, &mut |done, total| {
            if last.elapsed().as_secs() >= 30 || done == total {
                last = Instant::now();
                eprintln!(
                    "{what}: embedding {done}/{total} ({:.0} s)",
                    started.elapsed().as_secs_f64()
                );
            }
        })?;
        eprintln!(
            "{what}: {} notes in {:.1} s ({} embedded now)",
            docs.len(),
            started.elapsed().as_secs_f64(),
            r.embedded
        );
        Ok(())
    };
    let own = |id: &str| id.to_owned();
    let copied = |id: &str| source_of.get(id).cloned().unwrap_or_else(|| id.to_owned());

    let clean_docs: Vec<RecallDoc> = notes[..clean_count].iter().map(recall_doc).collect();
    upsert(&clean_docs, "clean")?;
    let mut states = vec![score(&index, "clean", clean_count, &queries, &qrels, &own)?];
    let variant_docs: Vec<RecallDoc> = notes[clean_count..].iter().map(recall_doc).collect();
    upsert(&variant_docs, "variants")?;
    states.push(score(
        &index,
        "polluted",
        notes.len(),
        &queries,
        &qrels,
        &copied,
    )?);

    // The review's same-topic rule over every note, with the first passage's vector.
    let model = status.model_id.clone();
    let cache = VectorStore::open(&cache_path)?;
    let started = Instant::now();
    let mut topic_docs = Vec::with_capacity(notes.len());
    for n in &notes {
        let hash = recall_doc(n).hash;
        let vector = cache
            .get(hash.as_str(), &model)?
            .and_then(|v| v.into_iter().next());
        topic_docs.push(TopicDoc {
            scope: "eval".into(),
            words: topic::note_words(&n.title, &[], &n.text),
            vector,
        });
    }
    let found = topic::groups(&topic_docs);
    let review_ms = started.elapsed().as_secs_f64() * 1000.0;
    let same_topic = topic_scores(&found, &notes, &groups_known, review_ms);

    // Merges: the oldest note of each group is kept (notes are in age order), the others go.
    let mut deleted: HashMap<String, String> = HashMap::new();
    let mut merged_docs = Vec::new();
    for g in &found {
        let kept = &notes[g.members[0]];
        for &m in &g.members[1..] {
            deleted.insert(notes[m].id.clone(), kept.id.clone());
        }
        let sources: Vec<MergeSource> = g
            .members
            .iter()
            .map(|&m| MergeSource {
                id: notes[m].id.clone(),
                summary: notes[m].title.clone(),
                tags: Vec::new(),
                hash: String::new(),
                created_at: Some(m as i64),
                updated_at: None,
                path: String::new(),
                body: notes[m].text.clone(),
                trust: None,
                secret: false,
            })
            .collect();
        let draft = manual_draft(&sources);
        merged_docs.push(recall_doc(&GrowthNote {
            id: kept.id.clone(),
            source: kept.source.clone(),
            title: draft.summary,
            text: draft.body,
        }));
    }
    let keep: HashSet<(String, String)> = notes
        .iter()
        .filter(|n| !deleted.contains_key(&n.id))
        .map(|n| ("eval".to_owned(), n.id.clone()))
        .collect();
    index.retain(&keep)?;
    let merged_judge = |id: &str| copied(deleted.get(id).map_or(id, String::as_str));
    states.push(score(
        &index,
        "merged, kept note's text",
        keep.len(),
        &queries,
        &qrels,
        &merged_judge,
    )?);
    upsert(&merged_docs, "merged drafts")?;
    states.push(score(
        &index,
        "merged, manual draft",
        keep.len(),
        &queries,
        &qrels,
        &merged_judge,
    )?);

    let report = GrowthReport {
        queries: queries.len(),
        documents: clean_count,
        variants: notes.len() - clean_count,
        embedder: status.embedder.to_owned(),
        model_id: status.model_id.clone(),
        states,
        same_topic,
    };
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "{} queries, {} documents + {} variants of {} relevant ones, embedder {} ({})",
        report.queries,
        report.documents,
        report.variants,
        groups_known.len(),
        report.embedder,
        report.model_id
    )?;
    writeln!(
        out,
        "{:<28} {:>6} {:>8} {:>6} {:>15}",
        "state", "notes", "nDCG@10", "top-1", "strict nDCG@10"
    )?;
    for s in &report.states {
        writeln!(
            out,
            "{:<28} {:>6} {:>8.4} {:>6.3} {:>15.4}",
            s.state, s.notes, s.ndcg10, s.top1, s.strict_ndcg10
        )?;
    }
    let t = &report.same_topic;
    writeln!(
        out,
        "same topic: {} groups found ({} exactly a known group) of {} known; pair precision {:.4}, recall {:.4}; grouping took {:.0} ms",
        t.groups_found, t.exact, t.groups_known, t.pair_precision, t.pair_recall, t.review_ms
    )?;
    Ok(())
}

fn topic_scores(
    found: &[topic::TopicGroup],
    notes: &[GrowthNote],
    known: &[Vec<String>],
    review_ms: f64,
) -> TopicScores {
    let group_of: HashMap<&str, usize> = known
        .iter()
        .enumerate()
        .flat_map(|(g, ids)| ids.iter().map(move |id| (id.as_str(), g)))
        .collect();
    let known_pairs: usize = known.iter().map(|g| g.len() * (g.len() - 1) / 2).sum();
    let (mut found_pairs, mut true_pairs, mut exact) = (0usize, 0usize, 0usize);
    let known_sets: HashSet<Vec<&str>> = known
        .iter()
        .map(|g| {
            let mut v: Vec<&str> = g.iter().map(String::as_str).collect();
            v.sort_unstable();
            v
        })
        .collect();
    for g in found {
        let ids: Vec<&str> = g.members.iter().map(|&m| notes[m].id.as_str()).collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        if known_sets.contains(&sorted) {
            exact += 1;
        }
        for i in 0..ids.len() {
            for j in i + 1..ids.len() {
                found_pairs += 1;
                if let (Some(a), Some(b)) = (group_of.get(ids[i]), group_of.get(ids[j]))
                    && a == b
                {
                    true_pairs += 1;
                }
            }
        }
    }
    TopicScores {
        groups_found: found.len(),
        groups_known: known.len(),
        exact,
        pair_precision: if found_pairs == 0 {
            1.0
        } else {
            true_pairs as f64 / found_pairs as f64
        },
        pair_recall: if known_pairs == 0 {
            1.0
        } else {
            true_pairs as f64 / known_pairs as f64
        },
        review_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_deterministic_rewordings_of_their_document() {
        let r = Rewriter::new();
        let text = "A first point, with a clause. The study was small, in truth. \
                    Results suggest a significant effect, however modest.";
        let v = r.variants("Treatment study", text);
        assert_eq!(v, r.variants("Treatment study", text));
        assert_eq!(
            v[0],
            (
                "Treatment study".to_owned(),
                "The study was small, in truth. Results suggest a significant effect, \
                 however modest. A first point, with a clause."
                    .to_owned()
            )
        );
        assert_eq!(
            v[1].1,
            "A first point, with a clause. Results suggest a significant effect, however modest."
        );
        assert_eq!(
            v[2],
            (
                "Treatment investigation".to_owned(),
                "A first point, with a clause. The investigation was small, in truth. \
                 Results indicate a notable impact, yet modest."
                    .to_owned()
            )
        );
        assert_eq!(
            v[3].1,
            "A first point, with a clause. Results indicate a notable impact, yet modest."
        );
        assert_eq!(
            v[4],
            (
                "Treatment investigation".to_owned(),
                "The study was small. Results suggest a significant effect, however modest. \
                 A first point."
                    .to_owned()
            )
        );
    }
}
