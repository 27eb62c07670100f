//! memoria-eval — the retrieval evaluation and benchmark harness: `memoria eval beir`
//! (nDCG@10, Recall@100, MRR@10 over a BEIR set), `memoria eval growth` (recall as
//! near-duplicates pile up, and after the review's merges) and `memoria bench recall` (latency,
//! throughput, memory), their arguments and runners. It drives recall from outside; only the
//! CLI links it, so no other front end compiles it.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use memoria_shared::{ContentHash, SystemClock};
// The engine's parts the harness drives, under the names its code uses for them.
use memoria_engine::{counted, hygiene, recall};

pub mod calibration;
pub mod crossval;
pub mod growth;
pub mod locomo;
pub mod logbench;
pub mod metrics;
pub mod topics;

use self::metrics::Metrics;
use crate::recall::{
    Embedder, EmbedderChoice, Error, Fusion, HashEmbedder, Mode, RecallConfig, RecallDoc,
    RecallIndex, SearchOptions, embed,
};

/// Fusion method for hybrid mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FusionArg {
    Rrf,
    Weighted,
    /// Weighted, with the vector weight following the query's lexical coverage.
    Adaptive,
    /// Weighted, a note's words counting only when it is in the query's language.
    Gated,
}

/// Options shared by eval and bench for finding the model.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Model directory (else MEMORIA_MODEL_DIR, else $MEMORIA_HOME/models/default).
    #[arg(long)]
    pub model_dir: Option<PathBuf>,
    /// ONNX Runtime intra-op threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Model sessions embedding side by side during bulk indexing (default: one per core, at
    /// most 2).
    #[arg(long)]
    pub sessions: Option<usize>,
}

impl ModelArgs {
    fn bulk_sessions(&self) -> usize {
        self.sessions
            .unwrap_or_else(crate::recall::default_bulk_sessions)
            .max(1)
    }

    fn resolve(&self) -> Option<PathBuf> {
        let home = std::env::var_os("MEMORIA_HOME").map(PathBuf::from);
        embed::resolve_model_dir(self.model_dir.as_deref(), home.as_deref())
    }
}

/// `memoria eval beir`: index a BEIR corpus into a temporary home and score every query.
#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    #[arg(long)]
    pub corpus: PathBuf,
    #[arg(long)]
    pub queries: PathBuf,
    #[arg(long)]
    pub qrels: PathBuf,
    /// Write a TREC run file (`qid Q0 docid rank score memoria`, top 100).
    #[arg(long)]
    pub run_out: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Mode::Hybrid)]
    pub mode: Mode,
    #[arg(long, value_enum, default_value_t = FusionArg::Gated)]
    pub fusion: FusionArg,
    /// Weight of the vector side (RRF: its list's weight; weighted and gated: v·w + t·(1−w),
    /// the product's default for gated; adaptive: the weight when every query word occurs in
    /// the corpus).
    #[arg(long)]
    pub vector_weight: Option<f64>,
    /// Adaptive fusion (required with it): the vector weight when no query word occurs in the
    /// corpus.
    #[arg(long)]
    pub cross_weight: Option<f64>,
    /// RRF's k.
    #[arg(long, default_value_t = 60.0)]
    pub rrf_k: f64,
    /// Candidates per retriever before fusion.
    #[arg(long, default_value_t = 100)]
    pub candidates: usize,
    /// Only the first N queries that have judgements.
    #[arg(long)]
    pub max_queries: Option<usize>,
    /// Index only the documents judged for the chosen queries plus this many others (a fixed
    /// sample), for a bounded CI gate.
    #[arg(long)]
    pub distractors: Option<usize>,
    /// Where vectors are cached by (content hash, model id) between runs.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Fail (exit 1) when nDCG@10 is below this.
    #[arg(long)]
    pub min_ndcg: Option<f64>,
    /// Also report every mode and fusion variant from the same index.
    #[arg(long)]
    pub compare: bool,
    /// Fail unless the ONNX model loaded (a CI gate must not pass on the hash fallback).
    #[arg(long)]
    pub require_model: bool,
    /// Cross-validate over K folds of the queries: every variant's nDCG@10 per held-out fold
    /// (mean ± spread), and the fusion weight chosen on K−1 folds scored on the fold left out.
    #[arg(long, value_parser = clap::value_parser!(u16).range(2..=20))]
    pub folds: Option<u16>,
    /// Only the queries of one fold, `I/K` (fold I of K, from 0, the split `--folds K` uses):
    /// a quality gate on queries no constant was chosen on.
    #[arg(long, value_parser = parse_fold)]
    pub fold: Option<(usize, usize)>,
    /// With `--folds`: score only BM25, the vectors and the chosen fusion on each fold, without
    /// the weight sweep (a study of the passages, where the fusion is not in question).
    #[arg(long, requires = "folds")]
    pub no_tuning: bool,
    /// Lay notes out as passages by another recipe than the product's, for a study:
    /// `c<words>o<overlap>l<layout>`, layout 1 with the summary leading every chunk, 2 with it
    /// leading the first only (the product's is `c200o40l1`). Vectors are cached under a model
    /// id that names the recipe.
    #[arg(long, value_parser = parse_chunking)]
    pub chunking: Option<embed::Chunking>,
    #[command(flatten)]
    pub model: ModelArgs,
}

fn parse_chunking(s: &str) -> Result<embed::Chunking, String> {
    embed::Chunking::from_recipe(s.trim()).ok_or_else(|| {
        format!(
            "expected c<words>o<overlap>l<1|2> with overlap below words, like {}, not {s:?}",
            embed::CHUNK_RECIPE
        )
    })
}

fn parse_fold(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("expected I/K, fold I of K folds (0 ≤ I < K, 2 ≤ K ≤ 20), not {s:?}");
    let (i, k) = s.split_once('/').ok_or_else(bad)?;
    let (i, k): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        k.trim().parse().map_err(|_| bad())?,
    );
    if !(2..=20).contains(&k) || i >= k {
        return Err(bad());
    }
    Ok((i, k))
}

pub(crate) fn default_cache_dir() -> PathBuf {
    dirs::home_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join(".cache")
        .join("memoria")
        .join("vectors")
}

#[derive(serde::Serialize)]
struct EvalResult {
    label: String,
    mode: String,
    queries: usize,
    documents: usize,
    embedder: String,
    model_id: String,
    #[serde(rename = "ndcg@10")]
    ndcg10: f64,
    #[serde(rename = "recall@100")]
    recall100: f64,
    #[serde(rename = "mrr@10")]
    mrr10: f64,
    query_ms_p50: f64,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Runs `memoria eval beir`.
pub fn run_eval(args: &EvalArgs, json: bool) -> anyhow::Result<()> {
    let corpus = metrics::read_corpus(&args.corpus)?;
    let queries = metrics::read_queries(&args.queries)?;
    let qrels = metrics::read_qrels(&args.qrels)?;
    let mut queries: Vec<(String, String)> = queries
        .into_iter()
        .filter(|(id, _)| qrels.contains_key(id))
        .filter(|(id, _)| args.fold.is_none_or(|(i, k)| crossval::fold_of(id, k) == i))
        .collect();
    if let Some(n) = args.max_queries {
        queries.truncate(n);
    }
    if queries.is_empty() {
        bail!(
            "no query in {} has judgements in {}",
            args.queries.display(),
            args.qrels.display()
        );
    }
    let corpus: Vec<metrics::CorpusDoc> = match args.distractors {
        None => corpus,
        Some(n) => {
            let judged: HashSet<&String> =
                queries.iter().flat_map(|(q, _)| qrels[q].keys()).collect();
            sample_corpus(&corpus, &judged, n)
        }
    };

    let home = tempfile::tempdir().context("creating a temporary home")?;
    let cache_dir = args.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let chunking = args.chunking.unwrap_or(embed::Chunking::PRODUCT);
    let docs: Vec<RecallDoc> = corpus
        .iter()
        .map(|d| RecallDoc {
            hash: ContentHash::of_parts(&d.id, &d.title, None, &[], &d.text),
            ..RecallDoc::new("eval", &d.id, &d.title, &d.text)
        })
        .collect();
    let (index, status) = open_index(
        home.path(),
        &cache_dir,
        &args.model,
        args.require_model,
        Layout {
            chunking,
            docs: &docs,
        },
    )?;
    let started = Instant::now();
    let mut last = Instant::now();
    let needs_vectors = args.mode != Mode::Bm25 || args.compare;
    let report = if needs_vectors {
        index.upsert_with_progress(&docs, &mut |done, total| {
            if last.elapsed().as_secs() >= 10 || done == total {
                last = Instant::now();
                eprintln!(
                    "embedding {done}/{total} documents ({:.0} s)",
                    started.elapsed().as_secs_f64()
                );
            }
        })?
    } else {
        index.upsert_lexical_only(&docs)?
    };
    eprintln!(
        "indexed {} documents in {:.1} s ({} embedded now, the rest from the cache)",
        docs.len(),
        started.elapsed().as_secs_f64(),
        report.embedded
    );

    let vw = |default: f64| args.vector_weight.unwrap_or(default);
    let chosen = match args.fusion {
        FusionArg::Rrf => Fusion::Rrf {
            k: args.rrf_k,
            vector_weight: vw(1.0),
        },
        FusionArg::Weighted => Fusion::Weighted {
            vector_weight: vw(0.7),
        },
        FusionArg::Gated => Fusion::Gated {
            vector_weight: vw(crate::recall::rank::DEFAULT_VECTOR_WEIGHT),
        },
        FusionArg::Adaptive => {
            let Some(cross) = args.cross_weight else {
                bail!(
                    "adaptive fusion needs --cross-weight, the vector weight for a query none of whose words occur in the corpus"
                );
            };
            Fusion::Adaptive {
                lexical: vw(crate::recall::rank::DEFAULT_VECTOR_WEIGHT),
                cross,
            }
        }
    };
    let mut variants: Vec<(String, Mode, Fusion)> =
        vec![(label(args.mode, chosen), args.mode, chosen)];
    if args.compare {
        for (m, f) in [
            (Mode::Bm25, Fusion::default()),
            (Mode::Vector, Fusion::default()),
            (
                Mode::Hybrid,
                Fusion::Rrf {
                    k: 60.0,
                    vector_weight: 1.0,
                },
            ),
            (
                Mode::Hybrid,
                Fusion::Rrf {
                    k: 60.0,
                    vector_weight: 1.5,
                },
            ),
            (
                Mode::Hybrid,
                Fusion::Rrf {
                    k: 20.0,
                    vector_weight: 1.0,
                },
            ),
            (Mode::Hybrid, Fusion::Weighted { vector_weight: 0.5 }),
            (Mode::Hybrid, Fusion::Weighted { vector_weight: 0.7 }),
            (Mode::Hybrid, Fusion::Weighted { vector_weight: 0.8 }),
            (
                Mode::Hybrid,
                Fusion::Adaptive {
                    lexical: 0.5,
                    cross: 0.8,
                },
            ),
            (
                Mode::Hybrid,
                Fusion::Adaptive {
                    lexical: 0.5,
                    cross: 0.85,
                },
            ),
            (
                Mode::Hybrid,
                Fusion::Adaptive {
                    lexical: 0.5,
                    cross: 0.9,
                },
            ),
        ] {
            let l = label(m, f);
            if !variants.iter().any(|v| v.0 == l) {
                variants.push((l, m, f));
            }
        }
    }
    if args.folds.is_some() {
        for (m, f) in [
            (Mode::Bm25, Fusion::default()),
            (Mode::Vector, Fusion::default()),
        ]
        .into_iter()
        .chain(
            TUNING_WEIGHTS
                .iter()
                .filter(|_| !args.no_tuning)
                .flat_map(|w| {
                    [
                        (Mode::Hybrid, Fusion::Weighted { vector_weight: *w }),
                        (Mode::Hybrid, Fusion::Gated { vector_weight: *w }),
                    ]
                }),
        ) {
            let l = label(m, f);
            if !variants.iter().any(|v| v.0 == l) {
                variants.push((l, m, f));
            }
        }
    }
    let mut results = Vec::new();
    let mut ndcg_per_query: Vec<Vec<f64>> = Vec::new();
    // The first variant's hits, best first: (relevance, judged relevant) per query.
    let mut judged: Vec<calibration::JudgedQuery> = Vec::new();
    let fold_count = args.folds.map(usize::from);
    for (i, (name, mode, fusion)) in variants.iter().enumerate() {
        let opts = SearchOptions {
            visible_scopes: None,
            limit: 100,
            mode: *mode,
            fusion: *fusion,
            candidates: args.candidates,
            ranking: false,
            mmr_lambda: None,
            include_secrets: true,
            include_archived: true,
            explain: false,
        };
        let mut per_query: Vec<Metrics> = Vec::with_capacity(queries.len());
        let mut times = Vec::with_capacity(queries.len());
        let mut run = String::new();
        for (qid, text) in &queries {
            let t = Instant::now();
            let hits = match index.search(text, &opts) {
                Ok(h) => h,
                Err(Error::EmptyQuery) => Vec::new(),
                Err(e) => return Err(e.into()),
            };
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            let ranked: Vec<String> = hits.iter().map(|h| h.id.clone()).collect();
            per_query.push(metrics::metrics(&ranked, &qrels[qid]));
            if i == 0 {
                let fold = fold_count.map_or(0, |k| crossval::fold_of(qid, k));
                let rel = |id: &String| qrels[qid].get(id).is_some_and(|g| *g > 0);
                judged.push((
                    fold,
                    hits.iter()
                        .take(10)
                        .map(|h| (h.relevance, rel(&h.id)))
                        .collect(),
                ));
            }
            if i == 0 && args.run_out.is_some() {
                for (r, h) in hits.iter().enumerate() {
                    run.push_str(&format!(
                        "{qid} Q0 {} {} {:.6} memoria\n",
                        h.id,
                        r + 1,
                        h.score
                    ));
                }
            }
        }
        if i == 0
            && let Some(p) = &args.run_out
        {
            std::fs::write(p, &run).with_context(|| format!("writing {}", p.display()))?;
        }
        times.sort_by(f64::total_cmp);
        ndcg_per_query.push(per_query.iter().map(|m| m.ndcg10).collect());
        let m = metrics::mean(&per_query);
        results.push(EvalResult {
            label: name.clone(),
            mode: format!("{mode:?}").to_lowercase(),
            queries: queries.len(),
            documents: docs.len(),
            embedder: status.embedder.to_owned(),
            model_id: status.model_id.clone(),
            ndcg10: m.ndcg10,
            recall100: m.recall100,
            mrr10: m.mrr10,
            query_ms_p50: percentile(&times, 0.5),
        });
    }
    let calibration = if judged.iter().any(|(_, h)| h.iter().any(|x| x.0.is_some())) {
        let opts = SearchOptions {
            visible_scopes: None,
            limit: 10,
            mode: variants[0].1,
            fusion: variants[0].2,
            candidates: args.candidates,
            ranking: false,
            mmr_lambda: None,
            include_secrets: true,
            include_archived: true,
            explain: false,
        };
        let mut nonsense = Vec::new();
        for q in calibration::nonsense_queries(100) {
            let hits = index.search(&q, &opts)?;
            nonsense.push(hits.iter().map(|h| h.relevance).collect());
        }
        Some(calibration::calibrate(&judged, fold_count, &nonsense))
    } else {
        None
    };
    let crossval = args.folds.map(|k| {
        let k = usize::from(k);
        let folds: Vec<usize> = queries
            .iter()
            .map(|(q, _)| crossval::fold_of(q, k))
            .collect();
        let fixed = results
            .iter()
            .zip(&ndcg_per_query)
            .map(|(r, scores)| {
                let per_fold = crossval::per_fold(scores, &folds, k);
                let (mean, sd) = crossval::mean_sd(&per_fold);
                HeldOut {
                    label: r.label.clone(),
                    per_fold,
                    mean,
                    sd,
                }
            })
            .collect();
        let tuned = ["hybrid weighted", "hybrid gated"]
            .into_iter()
            .filter(|_| !args.no_tuning)
            .map(|family| {
                let candidates: Vec<(String, Vec<f64>)> = results
                    .iter()
                    .zip(&ndcg_per_query)
                    .filter(|(r, _)| r.label.starts_with(family))
                    .map(|(r, s)| (r.label.clone(), s.clone()))
                    .collect();
                let per_fold = crossval::tune(&candidates, &folds, k);
                let held: Vec<f64> = per_fold.iter().map(|t| t.held_out).collect();
                let (mean, sd) = crossval::mean_sd(&held);
                Tuned {
                    family: family.to_owned(),
                    per_fold,
                    mean,
                    sd,
                }
            })
            .collect();
        CrossVal {
            folds: k,
            fixed,
            tuned,
        }
    });
    let mut out = std::io::stdout().lock();
    if json {
        let mut v = if results.len() == 1 {
            serde_json::to_value(&results[0])?
        } else {
            serde_json::to_value(&results)?
        };
        if let Some(cv) = &crossval {
            v = serde_json::json!({ "variants": v, "crossValidation": cv });
        }
        if let Some(c) = &calibration
            && let Some(o) = v.as_object_mut()
        {
            o.insert("relevance".into(), serde_json::to_value(c)?);
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        writeln!(
            out,
            "{} queries, {} documents, embedder {} ({})",
            queries.len(),
            docs.len(),
            status.embedder,
            status.model_id
        )?;
        writeln!(
            out,
            "{:<28} {:>8} {:>10} {:>7} {:>8}",
            "variant", "nDCG@10", "Recall@100", "MRR@10", "p50 ms"
        )?;
        for r in &results {
            writeln!(
                out,
                "{:<28} {:>8.4} {:>10.4} {:>7.4} {:>8.1}",
                r.label, r.ndcg10, r.recall100, r.mrr10, r.query_ms_p50
            )?;
        }
        if let Some(cv) = &crossval {
            writeln!(out, "nDCG@10 on each of {} held-out folds:", cv.folds)?;
            for h in &cv.fixed {
                let folds: Vec<String> = h.per_fold.iter().map(|x| format!("{x:.4}")).collect();
                writeln!(
                    out,
                    "{:<28} {:.4} ± {:.4}  ({})",
                    h.label,
                    h.mean,
                    h.sd,
                    folds.join(" ")
                )?;
            }
            for t in &cv.tuned {
                let chosen: Vec<String> = t
                    .per_fold
                    .iter()
                    .map(|f| {
                        let w = f.chosen.rsplit(' ').next().unwrap_or_default();
                        format!("{w} {:.4}", f.held_out)
                    })
                    .collect();
                writeln!(
                    out,
                    "{:<28} {:.4} ± {:.4}  (chosen on the other folds: {})",
                    format!("{}, tuned", t.family),
                    t.mean,
                    t.sd,
                    chosen.join(", ")
                )?;
            }
        }
    }
    if !json && let Some(c) = &calibration {
        writeln!(
            out,
            "relevance of {} (top 10 hits): predicted → judged relevant",
            results[0].label
        )?;
        for b in &c.bands {
            writeln!(
                out,
                "  {:.1}–{:.1}: {:>6} hits, mean {:.3} → {:.3}",
                b.from, b.to, b.hits, b.predicted, b.observed
            )?;
        }
        let per_fold = c
            .right_first_kept_per_fold
            .as_ref()
            .map_or(String::new(), |f| {
                let v: Vec<String> = f.iter().map(|x| format!("{x:.3}")).collect();
                format!(" (per fold {})", v.join(" "))
            });
        writeln!(
            out,
            "  the block's floor {} keeps {:.3} of {} right first answers{per_fold}; {:.3} of {} nonsense queries get past it",
            crate::recall::relevance::BLOCK_FLOOR,
            c.right_first_kept,
            c.right_first,
            c.nonsense_through,
            c.nonsense_queries
        )?;
    }
    if let Some(floor) = args.min_ndcg
        && results[0].ndcg10 < floor
    {
        bail!(
            "quality gate failed: nDCG@10 {:.4} is below the floor {floor}",
            results[0].ndcg10
        );
    }
    Ok(())
}

/// The judged documents of `corpus` plus `n` others, a fixed sample: the documents whose id
/// hashes lowest, independent of file order.
fn sample_corpus(
    corpus: &[metrics::CorpusDoc],
    judged: &HashSet<&String>,
    n: usize,
) -> Vec<metrics::CorpusDoc> {
    let mut others: Vec<(String, &metrics::CorpusDoc)> = corpus
        .iter()
        .filter(|d| !judged.contains(&d.id))
        .map(|d| (memoria_shared::hash::sha256_hex(d.id.as_bytes()), d))
        .collect();
    others.sort_by(|a, b| a.0.cmp(&b.0));
    let keep: HashSet<&String> = others.iter().take(n).map(|(_, d)| &d.id).collect();
    corpus
        .iter()
        .filter(|d| judged.contains(&d.id) || keep.contains(&d.id))
        .cloned()
        .collect()
}

/// How an evaluation lays its documents out as passages: the product's layout, or a study's.
pub(crate) struct Layout<'a> {
    pub chunking: embed::Chunking,
    /// The documents to be indexed: a study's passages that are word for word the product's
    /// take the product's cached vectors ([`StudyEmbedder`]).
    pub docs: &'a [RecallDoc],
}

impl Layout<'_> {
    pub(crate) fn product() -> Layout<'static> {
        Layout {
            chunking: embed::Chunking::PRODUCT,
            docs: &[],
        }
    }
}

/// A recall index for an evaluation in `home`, its vectors cached in `cache_dir`; with
/// `require_model`, an error unless the semantic model loaded.
pub(crate) fn open_index(
    home: &Path,
    cache_dir: &Path,
    model: &ModelArgs,
    require_model: bool,
    layout: Layout<'_>,
) -> anyhow::Result<(RecallIndex, crate::recall::RecallStatus)> {
    std::fs::create_dir_all(cache_dir)
        .with_context(|| format!("creating the vector cache {}", cache_dir.display()))?;
    let config = RecallConfig {
        dir: crate::recall::default_dir(home),
        model_dir: model.resolve(),
        vector_cache: Some(cache_dir.join("vectors.sqlite")),
        threads: model.threads,
        bulk_sessions: model.bulk_sessions(),
        background_reembed: false,
        chunking: layout.chunking,
        resident_messages: crate::recall::RESIDENT_MESSAGES,
    };
    let index = if layout.chunking == embed::Chunking::PRODUCT {
        RecallIndex::open(&config, Arc::new(SystemClock))?
    } else {
        let (inner, choice) = embed::load(config.model_dir.as_deref(), config.threads);
        if choice.kind != "onnx" {
            bail!(
                "--chunking studies the semantic model's passages, and the model did not load ({})",
                choice
                    .fallback_reason
                    .as_deref()
                    .unwrap_or("unknown reason")
            );
        }
        let study = StudyEmbedder::new(inner, &config, layout)?;
        let choice = EmbedderChoice {
            model_id: study.id.clone(),
            ..choice
        };
        RecallIndex::open_with_embedder(&config, Box::new(study), choice, Arc::new(SystemClock))?
    };
    let status = index.status();
    if let Some(reason) = &status.fallback_reason {
        eprintln!("note: using the hash embedder ({reason})");
    }
    if require_model && status.embedder != "onnx" {
        bail!(
            "--require-model: the embedding model did not load ({}); install it with `memoria model install`",
            status
                .fallback_reason
                .as_deref()
                .unwrap_or("unknown reason")
        );
    }
    Ok((index, status))
}

/// The model under a study's passage layout: its id names the layout instead of the
/// product's, so the study's vectors are cached apart. A passage that is word for word one of
/// the product's passages of the same documents is given the product's cached vector for it:
/// the model embeds each passage alone, so that vector is the one it would compute again.
struct StudyEmbedder {
    inner: Box<dyn Embedder>,
    id: String,
    known: std::collections::HashMap<String, Vec<f32>>,
}

impl StudyEmbedder {
    fn new(
        inner: Box<dyn Embedder>,
        config: &RecallConfig,
        layout: Layout<'_>,
    ) -> anyhow::Result<Self> {
        let product_id = inner.model_id().to_owned();
        let Some(base) = product_id.strip_suffix(embed::CHUNK_RECIPE) else {
            bail!("the model id {product_id} does not name the product's passage layout");
        };
        let id = format!("{base}{}", layout.chunking.recipe());
        let mut known = std::collections::HashMap::new();
        if let Some(path) = &config.vector_cache {
            let cache = crate::recall::store::VectorStore::open(path)?;
            for d in layout.docs {
                let Some(vecs) = cache.get(d.hash.as_str(), &product_id)? else {
                    continue;
                };
                let passages = embed::chunks(&d.summary, &d.tags, &d.body);
                if passages.len() == vecs.len() {
                    known.extend(passages.into_iter().zip(vecs));
                }
            }
        }
        Ok(Self { inner, id, known })
    }
}

impl Embedder for StudyEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let new: Vec<String> = texts
            .iter()
            .filter(|t| !self.known.contains_key(*t))
            .cloned()
            .collect();
        let mut fresh = self.inner.embed_passages(&new)?.into_iter();
        texts
            .iter()
            .map(|t| match self.known.get(t) {
                Some(v) => Ok(v.clone()),
                None => fresh
                    .next()
                    .ok_or_else(|| Error::Model("the model returned too few vectors".into())),
            })
            .collect()
    }
    fn embed_query(&mut self, text: &str) -> Result<Vec<f32>, Error> {
        self.inner.embed_query(text)
    }
    fn set_sessions(&mut self, n: usize) -> Result<(), Error> {
        self.inner.set_sessions(n)
    }
    fn sessions(&self) -> usize {
        self.inner.sessions()
    }
}

/// Fusion weights `--folds` chooses among (on the folds a score is not reported for).
const TUNING_WEIGHTS: [f64; 7] = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];

/// A variant's nDCG@10 on each held-out fold.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct HeldOut {
    label: String,
    per_fold: Vec<f64>,
    mean: f64,
    sd: f64,
}

/// A fusion family whose weight is chosen on K−1 folds and scored on the one left out.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Tuned {
    family: String,
    per_fold: Vec<crossval::TunedFold>,
    mean: f64,
    sd: f64,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct CrossVal {
    folds: usize,
    fixed: Vec<HeldOut>,
    tuned: Vec<Tuned>,
}

fn label(mode: Mode, fusion: Fusion) -> String {
    match (mode, fusion) {
        (Mode::Bm25, _) => "bm25".into(),
        (Mode::Vector, _) => "vector".into(),
        (Mode::Hybrid, Fusion::Rrf { k, vector_weight }) => {
            format!("hybrid rrf k={k} wv={vector_weight}")
        }
        (Mode::Hybrid, Fusion::Weighted { vector_weight }) => {
            format!("hybrid weighted wv={vector_weight}")
        }
        (Mode::Hybrid, Fusion::Adaptive { lexical, cross }) => {
            format!("hybrid adaptive wv={lexical}..{cross}")
        }
        (Mode::Hybrid, Fusion::Gated { vector_weight }) => {
            format!("hybrid gated wv={vector_weight}")
        }
    }
}

/// `memoria bench recall`: latency, indexing throughput and memory on synthetic notes.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Notes in the index.
    #[arg(long, default_value_t = 10_000)]
    pub notes: usize,
    /// Queries timed per mode.
    #[arg(long, default_value_t = 200)]
    pub queries: usize,
    /// Notes embedded with the real model to measure indexing throughput.
    #[arg(long, default_value_t = 200)]
    pub throughput_notes: usize,
    /// Words in each throughput note (summary included): 70 of the bench's vocabulary make
    /// ~100 model tokens; the mean is measured and reported.
    #[arg(long, default_value_t = 70)]
    pub throughput_words: usize,
    /// Where the benchmark's home lives (a temporary directory by default).
    #[arg(long)]
    pub home: Option<PathBuf>,
    /// Build the index one note per write, as an agent remembering one note at a time does,
    /// instead of in batches of 5,000.
    #[arg(long)]
    pub one_at_a_time: bool,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Queries embed with the real model; the N synthetic notes' vectors come from the hash
/// embedder, which costs the same to search (same dimension) but nothing to build, so 100k
/// notes can be benchmarked in minutes. Indexing throughput is measured with the real model on
/// `--throughput-notes` further notes (`real_passages` set).
struct BenchEmbedder {
    inner: Box<dyn Embedder>,
    real_passages: Arc<AtomicBool>,
    id: String,
}

impl Embedder for BenchEmbedder {
    fn model_id(&self) -> &str {
        &self.id
    }
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        if self.real_passages.load(Ordering::SeqCst) {
            self.inner.embed_passages(texts)
        } else {
            HashEmbedder.embed_passages(texts)
        }
    }
    fn embed_query(&mut self, text: &str) -> Result<Vec<f32>, Error> {
        self.inner.embed_query(text)
    }
    fn set_sessions(&mut self, n: usize) -> Result<(), Error> {
        self.inner.set_sessions(n)
    }
    fn sessions(&self) -> usize {
        self.inner.sessions()
    }
}

const WORDS: &[&str] = &[
    "pricing",
    "layout",
    "card",
    "border",
    "fill",
    "deploy",
    "server",
    "database",
    "migration",
    "index",
    "query",
    "latency",
    "memory",
    "budget",
    "review",
    "design",
    "token",
    "release",
    "branch",
    "commit",
    "merge",
    "conflict",
    "sync",
    "backup",
    "restore",
    "vault",
    "note",
    "project",
    "feedback",
    "user",
    "prefers",
    "dark",
    "mode",
    "font",
    "spacing",
    "colour",
    "testing",
    "coverage",
    "benchmark",
    "profile",
    "cache",
    "network",
    "timeout",
    "retry",
    "error",
    "warning",
    "log",
    "trace",
    "metric",
    "dashboard",
    "alert",
    "schedule",
    "meeting",
    "standup",
    "deadline",
    "customer",
    "invoice",
    "payment",
    "refund",
    "subscription",
    "plan",
    "team",
    "hiring",
    "onboarding",
    "document",
    "spec",
    "protocol",
    "schema",
    "field",
    "value",
    "python",
    "rust",
    "typescript",
    "react",
    "svelte",
    "tauri",
    "sqlite",
    "tantivy",
    "vector",
    "embedding",
    "model",
    "prompt",
    "agent",
    "session",
    "window",
    "context",
    "recall",
    "search",
    "ranking",
    "fusion",
    "decay",
    "trust",
    "scope",
    "domain",
    "reference",
    "the",
    "and",
    "with",
    "for",
    "uses",
    "never",
    "always",
    "should",
    "because",
    "after",
    "before",
    "when",
    "which",
];

fn synthetic_note(i: usize) -> RecallDoc {
    synthetic_note_of(i, 98)
}

/// A note of `words` words, eight of them its summary.
fn synthetic_note_of(i: usize, words: usize) -> RecallDoc {
    // A small linear congruential generator: the same notes on every run.
    let mut x = (i as u64)
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut word = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        WORDS[((x >> 33) % WORDS.len() as u64) as usize]
    };
    let summary: Vec<&str> = (0..8).map(|_| word()).collect();
    let body: Vec<&str> = (0..words.saturating_sub(8).max(1))
        .map(|_| word())
        .collect();
    let mut d = RecallDoc::new(
        "user",
        &format!("note-{i}"),
        &summary.join(" "),
        &body.join(" "),
    );
    d.note_type = Some(
        if i.is_multiple_of(3) {
            "feedback"
        } else {
            "project"
        }
        .into(),
    );
    d.rehash()
}

fn rss_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

#[derive(serde::Serialize)]
struct BenchResult {
    notes: usize,
    embedder: String,
    bm25_ms_p50: f64,
    bm25_ms_p95: f64,
    hybrid_ms_p50: f64,
    hybrid_ms_p95: f64,
    build_seconds: f64,
    one_at_a_time: bool,
    segments: usize,
    index_files: usize,
    notes_per_second_embedded: f64,
    tokens_per_throughput_note: Option<f64>,
    bulk_sessions: usize,
    rss_mb_after_model_load: f64,
    peak_rss_mb_after_indexing: f64,
    rss_mb_after_search: f64,
    peak_rss_mb: f64,
}

/// Runs `memoria bench recall`.
pub fn run_bench(args: &BenchArgs, json: bool) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let home = args.home.clone().unwrap_or_else(|| tmp.path().to_owned());
    let model_dir = args.model.resolve();

    let (model, choice) = embed::load(model_dir.as_deref(), args.model.threads);
    let rss_model = rss_kb("VmRSS:");
    let real_kind = choice.kind;
    let real_passages = Arc::new(AtomicBool::new(false));
    let bench = BenchEmbedder {
        id: format!("bench-{}", choice.model_id),
        inner: model,
        real_passages: Arc::clone(&real_passages),
    };
    let config = RecallConfig {
        dir: crate::recall::default_dir(&home),
        model_dir: None,
        vector_cache: None,
        threads: args.model.threads,
        bulk_sessions: args.model.bulk_sessions(),
        background_reembed: false,
        chunking: embed::Chunking::PRODUCT,
        resident_messages: crate::recall::RESIDENT_MESSAGES,
    };
    let choice = EmbedderChoice {
        kind: real_kind,
        model_id: bench.id.clone(),
        fallback_reason: choice.fallback_reason,
    };
    let index =
        RecallIndex::open_with_embedder(&config, Box::new(bench), choice, Arc::new(SystemClock))?;
    let t = Instant::now();
    let batch_size = if args.one_at_a_time { 1 } else { 5_000 };
    for start in (0..args.notes).step_by(batch_size) {
        let end = (start + batch_size).min(args.notes);
        let batch: Vec<RecallDoc> = (start..end).map(synthetic_note).collect();
        index.upsert(&batch)?;
        if end % 500 == 0 || end == args.notes {
            eprintln!("built {end}/{} notes", args.notes);
        }
    }
    let build_seconds = t.elapsed().as_secs_f64();
    let (segments, index_files) = index.lexical_footprint()?;

    // Indexing throughput with the real model on notes it has not seen.
    real_passages.store(true, Ordering::SeqCst);
    let tp_docs: Vec<RecallDoc> = (0..args.throughput_notes)
        .map(|i| synthetic_note_of(1_000_000_000 + i, args.throughput_words))
        .collect();
    // What the model sees per note: "passage: " + the chunk, <s> and </s> included.
    let tokens_per_note = model_dir
        .as_deref()
        .and_then(|dir| crate::recall::tokenize::Tokenizer::load(dir, 512).ok())
        .map(|tok| {
            let n: usize = tp_docs
                .iter()
                .flat_map(|d| embed::chunks(&d.summary, &d.tags, &d.body))
                .map(|c| tok.encode(&format!("passage: {c}")).len())
                .sum();
            n as f64 / tp_docs.len().max(1) as f64
        });
    let t = Instant::now();
    index.upsert(&tp_docs)?;
    let notes_per_second = tp_docs.len() as f64 / t.elapsed().as_secs_f64();
    real_passages.store(false, Ordering::SeqCst);
    let peak_rss_indexing = rss_kb("VmHWM:");
    eprintln!(
        "indexing throughput: {notes_per_second:.1} notes/s ({real_kind}, {}, {} tokens per note)",
        crate::counted(args.model.bulk_sessions(), "session"),
        tokens_per_note.map_or("?".into(), |t| format!("{t:.0}"))
    );
    let query_text = |i: usize| {
        let d = synthetic_note(7_000_000 + i);
        d.summary
            .split_whitespace()
            .take(6)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let time_mode = |mode: Mode| -> anyhow::Result<(f64, f64)> {
        let opts = SearchOptions {
            visible_scopes: Some(vec!["user".into(), "project:p".into()]),
            limit: 10,
            mode,
            ..SearchOptions::default()
        };
        // Warm up caches and the model.
        for i in 0..5 {
            index.search(&query_text(100_000 + i), &opts)?;
        }
        let mut times = Vec::with_capacity(args.queries);
        for i in 0..args.queries {
            let t = Instant::now();
            index.search(&query_text(i), &opts)?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        Ok((percentile(&times, 0.5), percentile(&times, 0.95)))
    };
    let (b50, b95) = time_mode(Mode::Bm25)?;
    let (h50, h95) = time_mode(Mode::Hybrid)?;
    let r = BenchResult {
        notes: args.notes,
        embedder: real_kind.to_owned(),
        bm25_ms_p50: b50,
        bm25_ms_p95: b95,
        hybrid_ms_p50: h50,
        hybrid_ms_p95: h95,
        build_seconds,
        one_at_a_time: args.one_at_a_time,
        segments,
        index_files,
        notes_per_second_embedded: notes_per_second,
        tokens_per_throughput_note: tokens_per_note,
        bulk_sessions: args.model.bulk_sessions(),
        rss_mb_after_model_load: rss_model as f64 / 1024.0,
        peak_rss_mb_after_indexing: peak_rss_indexing as f64 / 1024.0,
        rss_mb_after_search: rss_kb("VmRSS:") as f64 / 1024.0,
        peak_rss_mb: rss_kb("VmHWM:") as f64 / 1024.0,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{} notes, embedder {}: BM25 p50 {:.2} ms p95 {:.2} ms; hybrid p50 {:.2} ms p95 {:.2} ms",
            r.notes, r.embedder, r.bm25_ms_p50, r.bm25_ms_p95, r.hybrid_ms_p50, r.hybrid_ms_p95
        );
        println!(
            "built {} in {:.1} s: {} lexical segments, {} index files",
            if r.one_at_a_time {
                "one note per write"
            } else {
                "in batches of 5,000"
            },
            r.build_seconds,
            r.segments,
            r.index_files
        );
        println!(
            "indexing {:.1} notes/s with the model ({}); RSS {:.0} MB after model load, peak {:.0} MB by the end of indexing, {:.0} MB after search, peak {:.0} MB",
            r.notes_per_second_embedded,
            crate::counted(r.bulk_sessions, "session"),
            r.rss_mb_after_model_load,
            r.peak_rss_mb_after_indexing,
            r.rss_mb_after_search,
            r.peak_rss_mb
        );
    }
    Ok(())
}

/// Used by tests: the model directory the environment points at, if it holds a model.
pub fn installed_model_dir() -> Option<PathBuf> {
    let dir = ModelArgs {
        model_dir: None,
        threads: 1,
        sessions: None,
    }
    .resolve()?;
    Path::new(&dir).join("model.onnx").exists().then_some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the passages it embeds.
    struct Counting(Arc<std::sync::atomic::AtomicUsize>);

    impl Embedder for Counting {
        fn model_id(&self) -> &str {
            HashEmbedder::MODEL_ID
        }
        fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            HashEmbedder.embed_passages(texts)
        }
        fn embed_query(&mut self, text: &str) -> Result<Vec<f32>, Error> {
            HashEmbedder.embed_query(text)
        }
    }

    fn long_doc() -> RecallDoc {
        let body: Vec<String> = (0..300).map(|i| format!("w{i}")).collect();
        RecallDoc::new("eval", "d1", "A title", &body.join(" "))
    }

    #[test]
    fn a_study_layout_is_cached_apart_and_reuses_only_identical_passages() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("vectors.sqlite");
        let doc = long_doc();
        let product = embed::chunks(&doc.summary, &doc.tags, &doc.body);
        assert_eq!(product.len(), 2);
        // The product's vectors, marked so a reused one can be told from a computed one.
        let marked: Vec<Vec<f32>> = (0..product.len())
            .map(|i| {
                let mut v = vec![0.0; embed::DIM];
                v[i] = 1.0;
                v
            })
            .collect();
        crate::recall::store::VectorStore::open(&cache)
            .unwrap()
            .put_many(
                HashEmbedder::MODEL_ID,
                &[(doc.hash.as_str().to_owned(), marked.clone())],
            )
            .unwrap();
        let mut config = RecallConfig::new(dir.path().join("index"));
        config.vector_cache = Some(cache);
        let first_only = embed::Chunking::from_recipe("c200o40l2").unwrap();
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let docs = [doc];
        let mut study = StudyEmbedder::new(
            Box::new(Counting(Arc::clone(&calls))),
            &config,
            Layout {
                chunking: first_only,
                docs: &docs,
            },
        )
        .unwrap();
        assert_eq!(study.model_id(), "hash-v1-384-c200o40l2");
        let passages = first_only.chunks(&docs[0].summary, &docs[0].tags, &docs[0].body);
        assert_eq!(passages[0], product[0]);
        assert_ne!(passages[1], product[1]);
        let vecs = study.embed_passages(&passages).unwrap();
        assert_eq!(
            vecs[0], marked[0],
            "the identical first passage takes the cached vector"
        );
        assert_eq!(vecs[1], HashEmbedder::embed(&passages[1]));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "only the changed passage is embedded"
        );
    }

    #[test]
    fn an_index_refuses_a_layout_its_embedder_does_not_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = RecallConfig::new(dir.path());
        config.chunking = embed::Chunking::from_recipe("c320o40l1").unwrap();
        let choice = EmbedderChoice {
            kind: "hash",
            model_id: HashEmbedder::MODEL_ID.into(),
            fallback_reason: None,
        };
        let opened = RecallIndex::open_with_embedder(
            &config,
            Box::new(HashEmbedder),
            choice,
            Arc::new(SystemClock),
        );
        assert!(matches!(opened, Err(Error::Model(m)) if m.contains("c320o40l1")));
    }

    #[test]
    fn a_fold_is_i_of_k() {
        assert_eq!(parse_fold("0/5"), Ok((0, 5)));
        assert_eq!(parse_fold(" 4 / 5 "), Ok((4, 5)));
        for bad in ["5/5", "1/1", "1/21", "a/5", "3", ""] {
            assert!(parse_fold(bad).is_err(), "{bad}");
        }
    }
}
