//! memoria-recall — hybrid recall: BM25 (tantivy) and local embeddings, fused and ranked,
//! plus the recall block an agent turn receives. It sits on the store (`memoria-store`) and
//! below the engine.
//!
//! The module owns `$MEMORIA_HOME/index/recall/`: the lexical index (`lexical/`), the indexed
//! documents (`docs.sqlite`) and, by default, the vector cache (`vectors.sqlite`, keyed by
//! (content hash, model id)). It takes plain [`RecallDoc`]s from whoever reads the vault and never
//! reads or writes notes itself. Scope visibility is decided by the caller
//! ([`SearchOptions::visible_scopes`]) and applied before ranking; quarantined notes and notes
//! tagged `contains-secrets` are never returned unless asked for.

pub mod analyzer;
mod beside;
pub mod block;
pub mod embed;
pub mod lexical;
pub mod rank;
pub mod relevance;
pub mod store;
pub mod tokenize;
pub mod vectors;
pub mod when;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use memoria_shared::{Clock, ContentHash, Trust};
// The store's modules, under the names the recall code uses for them.
use memoria_store::{counted, decay, error, fsx, guard, index, scan};

use crate::decay::DecayRule;

pub use block::{RecallBlock, RecallOptions};
pub use embed::{Embedder, EmbedderChoice, HashEmbedder};
pub use rank::Fusion;

use lexical::LexicalIndex;
use store::{DocMeta, DocStore, VectorStore, doc_key};
pub use store::{RankFacts, Standing};
use vectors::VectorIndex;

/// Notes with this tag are never recalled unless [`SearchOptions::include_secrets`] is set.
pub use crate::guard::SECRETS_TAG;

/// Queries are cut to this many characters before analysis and embedding.
pub const MAX_QUERY_CHARS: usize = 2_000;

/// Everything that can go wrong in recall.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file of the index could not be read or written.
    #[error("recall index I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The SQLite documents or vector cache failed.
    #[error("recall store: {0}")]
    Sqlite(rusqlite::Error),
    /// tantivy failed.
    #[error("search index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// The embedding model could not be loaded or run (recall falls back to the hash embedder).
    #[error("embedding model: {0}")]
    Model(String),
    /// An index file is damaged; it is rebuilt from the documents.
    #[error("damaged index: {0}")]
    Corrupt(String),
    /// Another process kept the index writer for too long: try again.
    #[error("{0}: try again in a moment")]
    Busy(String),
    /// The query has no searchable text.
    #[error("empty query: give some words to search for")]
    EmptyQuery,
    /// Evaluation input could not be read.
    #[error("{0}")]
    Input(String),
}

impl Error {
    /// SQLite found one of the index's files damaged.
    pub fn is_damage(&self) -> bool {
        matches!(self, Error::Sqlite(e) if store::is_damage(e))
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        // A damaged page met at any query: the next open checks the files and recreates the
        // damaged one, as it does a file found damaged when opened.
        if store::is_damage(&e) {
            store::distrust_opened();
        }
        Error::Sqlite(e)
    }
}

impl crate::error::LayerError for Error {
    fn code(&self) -> crate::error::ErrorCode {
        use crate::error::ErrorCode;
        match self {
            Error::Io(_) | Error::Sqlite(_) | Error::Tantivy(_) | Error::Corrupt(_) => {
                ErrorCode::Index
            }
            Error::Model(_) => ErrorCode::Model,
            Error::Busy(_) => ErrorCode::Busy,
            Error::EmptyQuery | Error::Input(_) => ErrorCode::InvalidInput,
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl From<Error> for crate::error::Error {
    fn from(e: Error) -> Self {
        crate::error::Error::Recall(Box::new(e))
    }
}

/// How much of the in-memory state a reload replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reload {
    All,
    Changed,
}

/// The type of a document that is a message of a conversation rather than a note.
pub const MESSAGE_TYPE: &str = "message";
/// The type of a fact derived from what was said in a conversation.
pub const FACT_TYPE: &str = "fact";
/// The type of a conversation's summary.
pub const SUMMARY_TYPE: &str = "summary";
/// The type of a block of working memory.
pub const WORKING_TYPE: &str = "working";

/// One note as recall sees it. The vault builds these from its notes.
#[derive(Debug, Clone, PartialEq)]
pub struct RecallDoc {
    /// `user`, `project:<id>` or `domain:<type>`.
    pub scope: String,
    pub id: String,
    pub summary: String,
    pub tags: Vec<String>,
    pub body: String,
    pub note_type: Option<String>,
    pub updated_at_ms: Option<i64>,
    pub trust: Option<Trust>,
    pub importance: Option<f64>,
    /// Pinned or evergreen: exempt from recency decay.
    pub evergreen: bool,
    /// Consolidated or superseded: ranked below what replaced it.
    pub standing: Standing,
    pub hash: ContentHash,
}

impl RecallDoc {
    /// A document with only text; the hash is computed from it.
    pub fn new(scope: &str, id: &str, summary: &str, body: &str) -> Self {
        Self {
            scope: scope.to_owned(),
            id: id.to_owned(),
            summary: summary.to_owned(),
            tags: Vec::new(),
            body: body.to_owned(),
            note_type: None,
            updated_at_ms: None,
            trust: None,
            importance: None,
            evergreen: false,
            standing: Standing::default(),
            hash: ContentHash::of_parts(id, summary, None, &[], body),
        }
    }

    /// Recomputes the hash after fields were changed by hand.
    pub fn rehash(mut self) -> Self {
        self.hash = ContentHash::of_parts(
            &self.id,
            &self.summary,
            self.note_type.as_deref(),
            &self.tags,
            &self.body,
        );
        self
    }

    pub fn key(&self) -> String {
        doc_key(&self.scope, &self.id)
    }

    /// The summary as searched: the summary of a message, or of what was derived from
    /// messages, is its heading (who said it and when), shown but not searched, since its
    /// words are in its body and a heading's would outweigh them. (No note's id holds a `:`;
    /// a derived item's always does.)
    pub fn searched_summary(&self) -> &str {
        let derived = self.id.contains(':')
            && matches!(
                self.note_type.as_deref(),
                Some(FACT_TYPE | SUMMARY_TYPE | WORKING_TYPE)
            );
        if self.note_type.as_deref() == Some(MESSAGE_TYPE) || derived {
            ""
        } else {
            &self.summary
        }
    }

    /// What ranking reads beyond the content hash.
    pub fn facts(&self) -> RankFacts {
        RankFacts {
            updated_at_ms: self.updated_at_ms,
            trust: self.trust,
            importance: self.importance,
            evergreen: self.evergreen,
            standing: self.standing,
        }
    }
}

/// Which retrievers take part in a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Mode {
    Bm25,
    Vector,
    #[default]
    Hybrid,
}

/// How a search runs.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// Scopes the caller may see; `None` means every scope (evaluation, admin tools).
    pub visible_scopes: Option<Vec<String>>,
    pub limit: usize,
    pub mode: Mode,
    pub fusion: Fusion,
    /// Candidates taken from each retriever before fusion.
    pub candidates: usize,
    /// Apply decay, trust, importance and access factors.
    pub ranking: bool,
    /// MMR's λ, when diversity re-ranking is wanted (0.7 is the usual choice).
    pub mmr_lambda: Option<f64>,
    pub include_secrets: bool,
    /// Include archived notes (importance decayed below the archive threshold), which are
    /// otherwise left out.
    pub include_archived: bool,
    pub explain: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self {
            visible_scopes: None,
            limit: 10,
            mode: Mode::Hybrid,
            fusion: Fusion::default(),
            candidates: 100,
            ranking: true,
            mmr_lambda: None,
            include_secrets: false,
            include_archived: false,
            explain: false,
        }
    }
}

/// The parts of a result's score, for `--explain`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Explain {
    pub bm25_rank: Option<usize>,
    pub bm25_score: Option<f32>,
    pub vector_rank: Option<usize>,
    pub cosine: Option<f32>,
    /// The note is in another language than the query, so its words did not count.
    pub other_language: bool,
    pub fused: f64,
    /// How likely the note is to answer the query, 0 to 1 ([`relevance`]); `None` without a
    /// cosine from the semantic model.
    pub relevance: Option<f64>,
    /// Share of the query's words found in the notes' vocabulary (hybrid adaptive fusion).
    pub coverage: Option<f64>,
    /// The vector side's weight in score fusion for this query.
    pub vector_weight: Option<f64>,
    pub decay: f64,
    pub trust: f64,
    pub importance: f64,
    pub access: f64,
    /// Below 1 for a note consolidated into another or superseded by another.
    pub standing: f64,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    pub scope: String,
    pub id: String,
    pub summary: String,
    pub note_type: Option<String>,
    pub score: f64,
    /// See [`Explain::relevance`].
    pub relevance: Option<f64>,
    pub cosine: Option<f32>,
    pub bm25_rank: Option<usize>,
    /// The note is in the archive tier (found because archived notes were asked for).
    pub archived: bool,
    pub explain: Option<Explain>,
}

/// Where the index lives and which model it uses.
#[derive(Debug, Clone)]
pub struct RecallConfig {
    /// The recall directory, normally `$MEMORIA_HOME/index/recall`.
    pub dir: PathBuf,
    /// The model directory ([`embed::resolve_model_dir`]); `None` uses the hash embedder.
    pub model_dir: Option<PathBuf>,
    /// The vector cache file; defaults to `dir/vectors.sqlite`.
    pub vector_cache: Option<PathBuf>,
    /// ONNX Runtime intra-op threads.
    pub threads: usize,
    /// Model sessions embedding side by side during bulk work (indexing many notes, a model
    /// change): each extra one costs a model's worth of memory while the work lasts and is
    /// dropped after it.
    pub bulk_sessions: usize,
    /// Embed documents that lack vectors for the current model (a model change) on a background
    /// thread instead of inside `open`.
    pub background_reembed: bool,
    /// How notes become passages: [`embed::Chunking::PRODUCT`] everywhere but the evaluation
    /// harness's studies of other layouts, whose embedder's id must then name that layout.
    pub chunking: embed::Chunking,
    /// Messages whose ranking facts and vectors are kept in memory: the newest by when they
    /// were said. Older messages stay on disk and take part in a search when their words
    /// match it (their facts and vectors are read then), so memory follows what is searched
    /// rather than how long the log grew.
    pub resident_messages: usize,
}

impl RecallConfig {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            model_dir: None,
            vector_cache: None,
            threads: 1,
            bulk_sessions: default_bulk_sessions(),
            background_reembed: true,
            chunking: embed::Chunking::PRODUCT,
            resident_messages: RESIDENT_MESSAGES,
        }
    }
}

/// [`RecallConfig::resident_messages`] by default: about a kilobyte of memory each.
pub const RESIDENT_MESSAGES: usize = 50_000;

/// One bulk session per core, at most two: a second session nearly doubles the throughput,
/// and more would cost memory on a laptop for little.
pub fn default_bulk_sessions() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
}

/// What the engine card shows about recall.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecallStatus {
    pub embedder: &'static str,
    pub model_id: String,
    pub fallback_reason: Option<String>,
    /// Every indexed document, older messages kept on disk included.
    pub documents: usize,
    /// Documents with vectors for the current model in memory, and the older messages kept
    /// on disk, whose vectors are read from the cache when their words match a search.
    pub documents_with_vectors: usize,
    pub pending_embeddings: usize,
    /// Documents whose vectors were read from the cache since the index opened: a reload after
    /// another process's write reads only the documents that changed.
    pub vectors_loaded: usize,
    /// An index file was damaged and rebuilt when opened.
    pub rebuilt: bool,
}

/// What an upsert did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpsertReport {
    pub indexed: usize,
    pub unchanged: usize,
    /// Documents whose vectors were computed now (the rest came from the cache).
    pub embedded: usize,
}

struct Shared {
    embedder: Mutex<Box<dyn Embedder>>,
    choice: RwLock<EmbedderChoice>,
    /// Opened without its model ([`RecallIndex::open_without_model`]) and the model not
    /// installed yet: searches are lexical and nothing is embedded until it is.
    awaiting_model: AtomicBool,
    /// Told (documents embedded, documents to embed) as the background re-embedding goes.
    on_reembed: Mutex<Option<ReembedProgress>>,
    cache: Mutex<VectorStore>,
    vectors: RwLock<VectorIndex>,
    meta: RwLock<HashMap<String, DocMeta>>,
    pending: AtomicUsize,
    /// See [`RecallStatus::vectors_loaded`].
    vectors_loaded: AtomicUsize,
    /// Searches waiting for the embedder: the background lets them go first.
    queries_waiting: AtomicUsize,
    /// The lock file a process holds while it embeds a batch for this home: processes take
    /// turns, and each takes what the others cached before embedding anything itself.
    embed_claim: PathBuf,
    stop: AtomicBool,
    /// Recent query vectors: an agent's repeated question, or an evaluation's variants, embed once.
    query_cache: Mutex<HashMap<String, Vec<f32>>>,
    /// The everyday sentences' vectors ([`relevance::EVERYDAY`]) and the model they are for.
    everyday: Mutex<Option<Everyday>>,
    bulk_sessions: usize,
    chunking: embed::Chunking,
    resident_messages: usize,
    /// Documents indexed but not in memory: messages older than the resident ones.
    on_disk: AtomicUsize,
}

/// Receives (documents embedded, documents to embed) from the background re-embedding.
pub type ReembedProgress = Box<dyn FnMut(usize, usize) + Send>;

/// Chunks to embed before extra bulk sessions are worth starting (starting a session costs
/// about as much as embedding a few dozen chunks).
const BULK_MIN_CHUNKS: usize = 32;

/// Bulk sessions open while this lives, when it opened them: an inner, smaller batch inside a
/// larger one neither opens nor closes them.
struct Bulk<'a> {
    shared: &'a Shared,
    opened: bool,
}

impl<'a> Bulk<'a> {
    fn start(shared: &'a Shared, chunks: usize) -> Self {
        let mut opened = false;
        if shared.bulk_sessions > 1 && chunks >= BULK_MIN_CHUNKS {
            let mut e = lock(&shared.embedder);
            // Without extra sessions the work still gets done, on one core.
            opened = e.sessions() == 1 && e.set_sessions(shared.bulk_sessions).is_ok();
        }
        Self { shared, opened }
    }
}

impl Drop for Bulk<'_> {
    fn drop(&mut self) {
        if self.opened {
            let _ = lock(&self.shared.embedder).set_sessions(1);
        }
    }
}

/// Query vectors kept before the cache is emptied.
const QUERY_CACHE: usize = 1024;

impl std::fmt::Debug for RecallIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecallIndex")
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

/// The recall index of one home.
pub struct RecallIndex {
    lexical: LexicalIndex,
    docs: Mutex<DocStore>,
    shared: Arc<Shared>,
    clock: Arc<dyn Clock>,
    data_version: Mutex<i64>,
    background: Mutex<Vec<JoinHandle<()>>>,
    /// Vectors missing after another process's write are embedded on a background thread
    /// (`RecallConfig::background_reembed`), else before the call returns.
    embed_in_background: bool,
    rebuilt: bool,
    /// How importance decays and when a note is archived.
    decay_rule: RwLock<DecayRule>,
}

/// A document that needs vectors: key, content hash, the chunks to embed.
type Need = (String, String, Vec<String>);

/// Documents by cosine, and the best cosines of every document looked at (the crowd).
type ScoredWithCrowd = (Vec<(String, f32)>, Vec<f32>);

/// A result during MMR: fused entry, its explanation, its first chunk's vector.
type MmrItem = (rank::Fused, Explain, Option<Vec<f32>>);

/// Embedding batch size (chunks); small, so a search waiting for the model waits little.
const EMBED_BATCH: usize = 8;

impl RecallIndex {
    /// Opens (creating if needed) the index in `config.dir`. A damaged lexical index or
    /// document store is rebuilt; documents lacking vectors for the current model are embedded,
    /// in the background when `config.background_reembed`.
    pub fn open(config: &RecallConfig, clock: Arc<dyn Clock>) -> Result<Self, Error> {
        let (embedder, choice) = embed::load(config.model_dir.as_deref(), config.threads);
        match Self::open_with_embedder(config, embedder, choice, Arc::clone(&clock)) {
            // A damaged page met while loading: the files are checked and the damaged one
            // recreated on this second open.
            Err(e) if e.is_damage() => {
                let (embedder, choice) = embed::load(config.model_dir.as_deref(), config.threads);
                Self::open_with_embedder(config, embedder, choice, clock)
            }
            r => r,
        }
    }

    /// Opens the index at once, without loading the embedding model: searches are lexical
    /// and new documents get no vectors until [`Self::install_embedder`] hands it the model
    /// (loaded elsewhere, e.g. on a thread of its own), so a long model load never holds up
    /// a read.
    pub fn open_without_model(config: &RecallConfig, clock: Arc<dyn Clock>) -> Result<Self, Error> {
        let choice = EmbedderChoice {
            kind: "hash",
            model_id: HashEmbedder.model_id().to_owned(),
            fallback_reason: Some("the embedding model is still loading".into()),
        };
        match Self::open_inner(
            config,
            Box::new(HashEmbedder),
            choice.clone(),
            Arc::clone(&clock),
            true,
        ) {
            // See `open`.
            Err(e) if e.is_damage() => {
                Self::open_inner(config, Box::new(HashEmbedder), choice, clock, true)
            }
            r => r,
        }
    }

    /// Puts the model into an index opened by [`Self::open_without_model`]: its cached
    /// vectors are loaded, and the documents without one are embedded in the background.
    pub fn install_embedder(
        &self,
        embedder: Box<dyn Embedder>,
        choice: EmbedderChoice,
    ) -> Result<(), Error> {
        *lock(&self.shared.embedder) = embedder;
        *write(&self.shared.choice) = choice;
        let missing = self.load_state(Reload::All)?;
        self.shared.awaiting_model.store(false, Ordering::SeqCst);
        // Documents added while the model loaded, after the state above was read.
        let late = self.load_state(Reload::Changed)?;
        let seen: HashSet<String> = missing.iter().map(|d| d.0.clone()).collect();
        let mut all = missing;
        all.extend(late.into_iter().filter(|d| !seen.contains(&d.0)));
        if !all.is_empty() {
            self.spawn_reembed(all);
        }
        Ok(())
    }

    /// Reports the background re-embedding's progress to `f` (from its thread).
    pub fn on_reembed_progress(&self, f: ReembedProgress) {
        *lock(&self.shared.on_reembed) = Some(f);
    }

    /// [`Self::open`] with an embedder chosen by the caller (benchmarks, tests).
    pub fn open_with_embedder(
        config: &RecallConfig,
        embedder: Box<dyn Embedder>,
        choice: EmbedderChoice,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, Error> {
        Self::open_inner(config, embedder, choice, clock, false)
    }

    fn open_inner(
        config: &RecallConfig,
        embedder: Box<dyn Embedder>,
        choice: EmbedderChoice,
        clock: Arc<dyn Clock>,
        awaiting_model: bool,
    ) -> Result<Self, Error> {
        let recipe = config.chunking.recipe();
        if recipe != embed::CHUNK_RECIPE && !choice.model_id.ends_with(&recipe) {
            return Err(Error::Model(format!(
                "passages laid out as {recipe} need an embedder whose id names that layout, not {}",
                choice.model_id
            )));
        }
        std::fs::create_dir_all(&config.dir)?;
        let (docs, docs_recreated) = DocStore::open(&config.dir.join("docs.sqlite"))?;
        let (lexical, lexical_rebuilt) = LexicalIndex::open(&config.dir.join("lexical"))?;
        let cache_path = config
            .vector_cache
            .clone()
            .unwrap_or_else(|| config.dir.join("vectors.sqlite"));
        let cache = VectorStore::open(&cache_path)?;
        let shared = Arc::new(Shared {
            embedder: Mutex::new(embedder),
            choice: RwLock::new(choice),
            awaiting_model: AtomicBool::new(awaiting_model),
            on_reembed: Mutex::new(None),
            cache: Mutex::new(cache),
            vectors: RwLock::new(VectorIndex::default()),
            meta: RwLock::new(HashMap::new()),
            pending: AtomicUsize::new(0),
            vectors_loaded: AtomicUsize::new(0),
            queries_waiting: AtomicUsize::new(0),
            embed_claim: config.dir.join("embed.lock"),
            stop: AtomicBool::new(false),
            query_cache: Mutex::new(HashMap::new()),
            everyday: Mutex::new(None),
            bulk_sessions: config.bulk_sessions,
            chunking: config.chunking,
            resident_messages: config.resident_messages,
            on_disk: AtomicUsize::new(0),
        });
        let data_version = docs.data_version()?;
        let me = Self {
            lexical,
            docs: Mutex::new(docs),
            shared,
            clock,
            data_version: Mutex::new(data_version),
            background: Mutex::new(Vec::new()),
            embed_in_background: config.background_reembed,
            rebuilt: docs_recreated || lexical_rebuilt,
            decay_rule: RwLock::new(DecayRule::default()),
        };
        let all_docs_needed = lexical_rebuilt || me.lexical.num_docs() == 0;
        if all_docs_needed && !docs_recreated {
            let all = lock(&me.docs).all_docs()?;
            me.lexical.apply(&all, &[])?;
        }
        let missing = me.load_state(Reload::All)?;
        if !missing.is_empty() && !awaiting_model {
            if config.background_reembed {
                me.spawn_reembed(missing);
            } else {
                embed_missing(&me.shared, &missing, &mut |_, _| {}, Turn::Bounded)?;
            }
        }
        Ok(me)
    }

    /// Loads ranking facts and cached vectors into memory; returns the documents whose vectors
    /// for the current model are not cached.
    /// Reads the ranking facts of every document and puts their cached vectors in memory;
    /// returns the documents that have none yet (key, hash, chunks). `Reload::Changed` keeps
    /// the vectors of documents whose content is unchanged (another process's write costs one
    /// read of the facts and of its own documents' vectors, not of every vector);
    /// `Reload::All` starts over, for a new embedder.
    fn load_state(&self, how: Reload) -> Result<Vec<Need>, Error> {
        let (metas, stored) = {
            let docs = lock(&self.docs);
            (
                docs.resident_meta(self.shared.resident_messages)?,
                docs.count()?,
            )
        };
        self.shared
            .on_disk
            .store(stored.saturating_sub(metas.len()), Ordering::SeqCst);
        let model = read(&self.shared.choice).model_id.clone();
        let mut missing = Vec::new();
        {
            let mut vectors = write(&self.shared.vectors);
            if how == Reload::All {
                *vectors = VectorIndex::default();
            } else {
                let live: HashSet<&str> = metas.iter().map(|m| m.key.as_str()).collect();
                let gone: Vec<String> = vectors
                    .keys()
                    .filter(|k| !live.contains(k))
                    .map(str::to_owned)
                    .collect();
                for k in &gone {
                    vectors.remove(k);
                }
            }
            let cache = lock(&self.shared.cache);
            for m in &metas {
                if vectors.hash_of(&m.key) == Some(m.hash.as_str()) {
                    continue;
                }
                match cache.get(&m.hash, &model)? {
                    Some(v) => {
                        vectors.insert(&m.key, &m.hash, &v);
                        self.shared.vectors_loaded.fetch_add(1, Ordering::SeqCst);
                    }
                    None => {
                        vectors.remove(&m.key);
                        missing.push(m.key.clone());
                    }
                }
            }
        }
        let docs = lock(&self.docs);
        let mut need = Vec::with_capacity(missing.len());
        for k in missing {
            if let Some(d) = docs.get(&k)? {
                need.push((
                    k,
                    d.hash.as_str().to_owned(),
                    self.shared
                        .chunking
                        .chunks(d.searched_summary(), &d.tags, &d.body),
                ));
            }
        }
        drop(docs);
        *write(&self.shared.meta) = metas.into_iter().map(|m| (m.key.clone(), m)).collect();
        Ok(need)
    }

    /// Embeds `missing` on a background thread, a few documents at a time: each batch is
    /// cached as soon as it is done (work a killed process did is kept), and a search waiting
    /// for the model goes before the next batch.
    fn spawn_reembed(&self, missing: Vec<Need>) {
        let shared = Arc::clone(&self.shared);
        shared.pending.fetch_add(missing.len(), Ordering::SeqCst);
        let handle = std::thread::spawn(move || {
            let chunks = missing.iter().map(|d| d.2.len()).sum();
            let _bulk = Bulk::start(&shared, chunks);
            let total = missing.len();
            let mut done = 0;
            for batch in missing.chunks(4) {
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                while shared.queries_waiting.load(Ordering::SeqCst) > 0 {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                // A failed batch is retried on the next open; recall keeps working lexically.
                let _ = embed_missing(&shared, batch, &mut |_, _| {}, Turn::Wait);
                shared.pending.fetch_sub(batch.len(), Ordering::SeqCst);
                done += batch.len();
                if let Some(f) = lock(&shared.on_reembed).as_mut() {
                    f(done, total);
                }
            }
            shared.pending.fetch_sub(total - done, Ordering::SeqCst);
        });
        let mut background = lock(&self.background);
        background.retain(|h| !h.is_finished());
        background.push(handle);
    }

    /// Blocks until background embedding has finished.
    pub fn wait_for_vectors(&self) {
        let handles: Vec<JoinHandle<()>> = std::mem::take(&mut *lock(&self.background));
        for h in handles {
            let _ = h.join();
        }
    }

    pub fn status(&self) -> RecallStatus {
        let choice = read(&self.shared.choice);
        RecallStatus {
            embedder: choice.kind,
            model_id: choice.model_id.clone(),
            fallback_reason: choice.fallback_reason.clone(),
            documents: read(&self.shared.meta).len() + self.on_disk(),
            documents_with_vectors: read(&self.shared.vectors).len_docs() + self.on_disk(),
            pending_embeddings: self.shared.pending.load(Ordering::SeqCst),
            vectors_loaded: self.shared.vectors_loaded.load(Ordering::SeqCst),
            rebuilt: self.rebuilt,
        }
    }

    /// Adds or updates documents: searchable lexically when this returns, and by vector too
    /// (vectors are computed here, or taken from the cache when the content was seen before).
    pub fn upsert(&self, docs: &[RecallDoc]) -> Result<UpsertReport, Error> {
        self.upsert_with_progress(docs, &mut |_, _| {})
    }

    /// [`Self::upsert`], reporting (documents embedded, documents to embed) as it goes.
    pub fn upsert_with_progress(
        &self,
        docs: &[RecallDoc],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<UpsertReport, Error> {
        let (mut report, need) = self.stage(docs)?;
        report.embedded = embed_missing(&self.shared, &need, progress, Turn::Bounded)?;
        Ok(report)
    }

    /// [`Self::upsert`] for a caller that must not wait for the model (an agent's prompt):
    /// the documents are searchable by their words when this returns and by the vectors the
    /// cache already holds; the others are embedded on a background thread (at once when the
    /// index embeds nothing in the background).
    pub fn upsert_later(&self, docs: &[RecallDoc]) -> Result<UpsertReport, Error> {
        if !self.embed_in_background {
            return self.upsert(docs);
        }
        let (report, need) = self.stage(docs)?;
        if !self.shared.awaiting_model.load(Ordering::SeqCst) {
            let later: Vec<Need> = take_cached(&self.shared, &need)?
                .into_iter()
                .cloned()
                .collect();
            if !later.is_empty() {
                self.spawn_reembed(later);
            }
        }
        Ok(report)
    }

    /// Puts documents into the lexical index, the document store and the ranking facts;
    /// returns what was done and the changed documents that need vectors (key, hash, chunks).
    fn stage(&self, docs: &[RecallDoc]) -> Result<(UpsertReport, Vec<Need>), Error> {
        self.refresh_if_changed()?;
        let mut report = UpsertReport::default();
        let keys: Vec<String> = docs.iter().map(RecallDoc::key).collect();
        // Documents kept on disk only (older messages) come back into memory with their facts
        // and cached vectors.
        let (stored, changed, unchanged) = {
            let meta = read(&self.shared.meta);
            let stored = self.on_disk_meta(&meta, keys.iter().map(String::as_str))?;
            let (mut changed, mut unchanged) = (Vec::new(), Vec::new());
            for (d, k) in docs.iter().zip(&keys) {
                let known = meta.get(k).or_else(|| stored.get(k));
                if known.is_some_and(|m| m.hash == d.hash.as_str()) {
                    unchanged.push(d);
                } else {
                    changed.push(d);
                }
            }
            (stored, changed, unchanged)
        };
        report.unchanged = unchanged.len();
        report.indexed = changed.len();
        let changed: Vec<RecallDoc> = changed.into_iter().cloned().collect();
        self.lexical.apply(&changed, &[])?;
        let now = self.clock.now_ms();
        lock(&self.docs).upsert(docs, now)?;
        {
            let mut meta = write(&self.shared.meta);
            for (d, k) in docs.iter().zip(&keys) {
                // A note first seen now counts as used now, as the store records it.
                let used = meta
                    .get(k)
                    .or_else(|| stored.get(k))
                    .map_or((0, Some(now)), |m| (m.access_count, m.last_access_ms));
                meta.insert(k.clone(), meta_of(d, used));
            }
        }
        self.shared.on_disk.store(
            self.on_disk().saturating_sub(stored.len()),
            Ordering::SeqCst,
        );
        let vectors = read(&self.shared.vectors);
        let need = changed
            .iter()
            .chain(
                unchanged
                    .iter()
                    .copied()
                    .filter(|d| stored.contains_key(&d.key())),
            )
            .filter(|d| vectors.hash_of(&d.key()) != Some(d.hash.as_str()))
            .map(|d| {
                (
                    d.key(),
                    d.hash.as_str().to_owned(),
                    self.shared
                        .chunking
                        .chunks(d.searched_summary(), &d.tags, &d.body),
                )
            })
            .collect();
        drop(vectors);
        self.evict_old_messages();
        Ok((report, need))
    }

    /// Adds documents to the lexical index and the document store only (no vectors): for
    /// BM25-only evaluation, where embedding would be wasted work.
    pub fn upsert_lexical_only(&self, docs: &[RecallDoc]) -> Result<UpsertReport, Error> {
        self.lexical.apply(docs, &[])?;
        let now = self.clock.now_ms();
        lock(&self.docs).upsert(docs, now)?;
        {
            let mut meta = write(&self.shared.meta);
            for d in docs {
                let used = meta
                    .get(&d.key())
                    .map_or((0, Some(now)), |m| (m.access_count, m.last_access_ms));
                meta.insert(d.key(), meta_of(d, used));
            }
        }
        self.evict_old_messages();
        Ok(UpsertReport {
            indexed: docs.len(),
            ..UpsertReport::default()
        })
    }

    /// Removes a document; unknown ids are fine.
    pub fn remove(&self, scope: &str, id: &str) -> Result<bool, Error> {
        Ok(self.remove_keys(&[doc_key(scope, id)])? > 0)
    }

    /// Removes documents by key in one commit of each store; returns how many existed.
    fn remove_keys(&self, keys: &[String]) -> Result<usize, Error> {
        if keys.is_empty() {
            return Ok(0);
        }
        self.lexical.apply(&[], keys)?;
        let existed = lock(&self.docs).remove_many(keys)?;
        {
            let mut meta = write(&self.shared.meta);
            let resident = keys.iter().filter(|k| meta.remove(*k).is_some()).count();
            // The others were kept on disk only.
            let on_disk = existed.saturating_sub(resident);
            self.shared
                .on_disk
                .store(self.on_disk().saturating_sub(on_disk), Ordering::SeqCst);
        }
        let mut vectors = write(&self.shared.vectors);
        for key in keys {
            vectors.remove(key);
        }
        Ok(existed)
    }

    /// Leaves no copy of removed documents in the index files: the vectors of `hashes` are
    /// deleted from the cache, the document store is vacuumed, and the lexical index merged
    /// without its deleted documents. For `forget --purge`, after the documents were removed.
    pub fn purge(&self, hashes: &[String]) -> Result<(), Error> {
        lock(&self.shared.cache).purge(hashes)?;
        lock(&self.docs).compact()?;
        self.lexical.compact()
    }

    /// Keeps only the given keys (`scope`, `id`): what the vault no longer has goes, in one
    /// commit however many they are.
    pub fn retain(&self, keep: &HashSet<(String, String)>) -> Result<usize, Error> {
        let gone: Vec<String> = if self.on_disk() == 0 {
            read(&self.shared.meta)
                .values()
                .filter(|m| !keep.contains(&(m.scope.clone(), m.id.clone())))
                .map(|m| m.key.clone())
                .collect()
        } else {
            lock(&self.docs)
                .all_keys()?
                .into_iter()
                .filter(|(_, scope, id)| !keep.contains(&(scope.clone(), id.clone())))
                .map(|(key, _, _)| key)
                .collect()
        };
        self.remove_keys(&gone)?;
        Ok(gone.len())
    }

    /// Notes another process changed become visible here.
    fn refresh_if_changed(&self) -> Result<(), Error> {
        let now = lock(&self.docs).data_version()?;
        let mut seen = lock(&self.data_version);
        if *seen != now {
            *seen = now;
            drop(seen);
            self.lexical.refresh()?;
            let missing = self.load_state(Reload::Changed)?;
            // Another process wrote these and embeds them itself; this one catches up in the
            // background rather than holding up the search that noticed.
            if missing.is_empty() || self.shared.awaiting_model.load(Ordering::SeqCst) {
            } else if self.embed_in_background {
                self.spawn_reembed(missing);
            } else {
                embed_missing(&self.shared, &missing, &mut |_, _| {}, Turn::Bounded)?;
            }
        }
        Ok(())
    }

    /// Searches the visible notes.
    pub fn search(&self, query: &str, opts: &SearchOptions) -> Result<Vec<Hit>, Error> {
        let query: String = query.chars().take(MAX_QUERY_CHARS).collect();
        if query.trim().is_empty() || !query.chars().any(char::is_alphanumeric) {
            return Err(Error::EmptyQuery);
        }
        self.refresh_if_changed()?;
        let now = self.clock.now_ms();
        let rule = *read(&self.decay_rule);
        let meta = read(&self.shared.meta);
        let visible: Option<HashSet<&str>> = opts
            .visible_scopes
            .as_ref()
            .map(|s| s.iter().map(String::as_str).collect());
        let mut lexical = if opts.mode == Mode::Vector {
            Vec::new()
        } else {
            // Over-fetch a little: hidden notes are dropped after the scope filter.
            self.lexical
                .search(&query, opts.visible_scopes.as_deref(), opts.candidates + 10)?
        };
        // Older messages kept on disk take part when their words match: their facts are read
        // now, and their vectors below.
        let on_disk = self.on_disk_meta(&meta, lexical.iter().map(|h| h.key.as_str()))?;
        let facts_of = |key: &str| meta.get(key).or_else(|| on_disk.get(key));
        let admit = |key: &str| -> bool {
            let Some(m) = facts_of(key) else { return false };
            visible
                .as_ref()
                .is_none_or(|v| v.contains(m.scope.as_str()))
                && (opts.include_secrets || !m.secret)
                && trust_weight_of(m).is_some()
                && (opts.include_archived || !rank::archived(m, &rule, now))
        };
        lexical.retain(|h| admit(&h.key));
        lexical.truncate(opts.candidates);
        // Notes in another language than the query's: gated fusion leaves their words out of a
        // hybrid search (a words-only search keeps them). A note too short to tell is taken to
        // be in the language most of the other candidates clearly are in, or else most notes.
        let foreign: HashSet<String> = match analyzer::detect(&query) {
            analyzer::Detected::Clear(q) if opts.mode == Mode::Hybrid => {
                let usual = match most_common(lexical.iter().filter_map(|h| h.lang)) {
                    Some(l) => Some(l),
                    None if lexical.iter().any(|h| h.lang.is_none()) => {
                        self.lexical.usual_language()?
                    }
                    None => None,
                };
                lexical
                    .iter()
                    .filter(|h| h.lang.or(usual).is_some_and(|l| l != q))
                    .map(|h| h.key.clone())
                    .collect()
            }
            _ => HashSet::new(),
        };
        let lexical: Vec<(String, f32)> = lexical.into_iter().map(|h| (h.key, h.score)).collect();
        let (vector, reference) =
            if opts.mode == Mode::Bm25 || self.shared.awaiting_model.load(Ordering::SeqCst) {
                (Vec::new(), None)
            } else {
                let cached = lock(&self.shared.query_cache).get(&query).cloned();
                let q = match cached {
                    Some(q) => q,
                    None => {
                        // A query goes before the background's next batch: it waits for one batch
                        // at most, and always searches the vectors there are.
                        self.shared.queries_waiting.fetch_add(1, Ordering::SeqCst);
                        let mut e = lock(&self.shared.embedder);
                        self.shared.queries_waiting.fetch_sub(1, Ordering::SeqCst);
                        let q = e.embed_query(&query)?;
                        drop(e);
                        let mut cache = lock(&self.shared.query_cache);
                        if cache.len() >= QUERY_CACHE {
                            cache.clear();
                        }
                        cache.insert(query.clone(), q.clone());
                        q
                    }
                };
                let (mut hits, mut crowd) =
                    read(&self.shared.vectors).search_with_crowd(&q, opts.candidates, admit);
                if !on_disk.is_empty() {
                    let (more, more_crowd) = self.search_on_disk(&q, &on_disk, opts, admit)?;
                    let seen: HashSet<String> = hits.iter().map(|h| h.0.clone()).collect();
                    hits.extend(more.into_iter().filter(|h| !seen.contains(&h.0)));
                    hits.sort_by(|a, b| b.1.total_cmp(&a.1));
                    hits.truncate(opts.candidates);
                    crowd.extend(more_crowd);
                }
                // A relevance is calibrated for the semantic model only.
                let reference = if read(&self.shared.choice).kind == "onnx" {
                    let everyday = self.everyday_vectors()?;
                    crowd.extend(everyday.iter().map(|v| dot(&q, v)));
                    relevance::reference(crowd)
                } else {
                    None
                };
                (hits, reference)
            };
        let coverage = match (opts.mode, opts.fusion) {
            (Mode::Hybrid, Fusion::Adaptive { .. }) => self.lexical.coverage(&query)?,
            _ => None,
        };
        let vector_weight = match opts.mode {
            Mode::Hybrid => opts.fusion.vector_weight(coverage),
            _ => None,
        };
        let fused = rank::fuse(&lexical, &vector, opts.fusion, coverage, &foreign);
        let mut scored: Vec<(rank::Fused, Explain)> = fused
            .into_iter()
            .filter_map(|f| {
                let m = facts_of(&f.key)?;
                let (decay, trust, importance, access, standing) = if opts.ranking {
                    (
                        rank::decay(m, now),
                        trust_weight_of(m)?,
                        rank::importance_factor(Some(rank::live_importance(m, &rule, now))),
                        rank::access_factor(m.access_count),
                        rank::standing_factor(m.standing),
                    )
                } else {
                    (1.0, 1.0, 1.0, 1.0, 1.0)
                };
                let e = Explain {
                    bm25_rank: f.bm25.map(|x| x.0),
                    bm25_score: f.bm25.map(|x| x.1),
                    vector_rank: f.vector.map(|x| x.0),
                    cosine: f.vector.map(|x| x.1),
                    other_language: f.other_language,
                    fused: f.score,
                    relevance: f
                        .vector
                        .zip(reference)
                        .map(|((_, c), r)| relevance::relevance(c, r)),
                    coverage,
                    vector_weight,
                    decay,
                    trust,
                    importance,
                    access,
                    standing,
                };
                Some((f, e))
            })
            .collect();
        for (f, e) in &mut scored {
            f.score = e.fused * e.decay * e.trust * e.importance * e.access * e.standing;
        }
        scored.sort_by(|a, b| b.0.score.total_cmp(&a.0.score));
        if let Some(lambda) = opts.mmr_lambda {
            // Diversity among the top of the list only: MMR is quadratic.
            let tail = scored.split_off(scored.len().min(opts.limit.max(1) * 3));
            let vectors = read(&self.shared.vectors);
            let with_vec: Vec<(MmrItem, f64)> = scored
                .into_iter()
                .map(|(f, e)| {
                    let v = vectors.first_vector(&f.key);
                    let s = f.score;
                    ((f, e, v), s)
                })
                .collect();
            let reordered = rank::mmr(with_vec, lambda, |a, b| match (&a.2, &b.2) {
                (Some(x), Some(y)) => f64::from(x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>()),
                _ => 0.0,
            });
            scored = reordered.into_iter().map(|((f, e, _), _)| (f, e)).collect();
            scored.extend(tail);
        }
        scored.truncate(opts.limit);
        let docs = lock(&self.docs);
        let mut hits = Vec::with_capacity(scored.len());
        for (f, e) in scored {
            let Some(m) = facts_of(&f.key) else { continue };
            let summary = if opts.limit <= 200 {
                docs.get(&f.key)?.map(|d| d.summary).unwrap_or_default()
            } else {
                String::new()
            };
            hits.push(Hit {
                scope: m.scope.clone(),
                id: m.id.clone(),
                summary,
                note_type: m.note_type.clone(),
                score: f.score,
                relevance: e.relevance,
                cosine: e.cosine,
                bm25_rank: e.bm25_rank,
                archived: rank::archived(m, &rule, now),
                explain: opts.explain.then_some(e),
            });
        }
        Ok(hits)
    }

    /// Documents whose vectors are held in memory.
    pub fn vectors_in_memory(&self) -> usize {
        read(&self.shared.vectors).len_docs()
    }

    /// Segments of the lexical index and files in its directory.
    pub fn lexical_footprint(&self) -> Result<(usize, usize), Error> {
        self.lexical.footprint()
    }

    /// The full document (for the recall block's full-text part).
    pub fn get(&self, scope: &str, id: &str) -> Result<Option<RecallDoc>, Error> {
        lock(&self.docs).get(&doc_key(scope, id))
    }

    /// Every visible document's ranking facts (for the recall block's index lines).
    pub fn visible_meta(&self, scopes: Option<&[String]>) -> Vec<DocMeta> {
        read(&self.shared.meta)
            .values()
            .filter(|m| listed(m, scopes))
            .cloned()
            .collect()
    }

    /// `(scope, id, content hash, ranking facts)` of every indexed document, hidden ones
    /// included: what the vault compares against to find what changed.
    pub fn indexed_states(&self) -> Result<Vec<DocState>, Error> {
        if self.on_disk() > 0 {
            return lock(&self.docs).all_states();
        }
        Ok(read(&self.shared.meta)
            .values()
            .map(|m| (m.scope.clone(), m.id.clone(), m.hash.clone(), m.facts()))
            .collect())
    }

    /// The states ([`Self::indexed_states`]) of every indexed document but the log's messages
    /// (ids starting `msg:`): notes, derived items, working memory. Read from memory, where
    /// every document but messages is held, and from disk for the few notes typed as messages;
    /// never the messages themselves, however many there are.
    pub fn states_but_messages(&self) -> Result<Vec<DocState>, Error> {
        self.refresh_if_changed()?;
        let odd = lock(&self.docs).odd_messages()?;
        let meta = read(&self.shared.meta);
        let mut out: Vec<DocState> = meta
            .values()
            .filter(|m| !memoria_store::log::is_message_key(&m.id))
            .map(state_of)
            .collect();
        out.extend(
            odd.iter()
                .filter(|m| !meta.contains_key(&m.key))
                .map(state_of),
        );
        Ok(out)
    }

    /// How many of the log's messages (ids starting `msg:`) are indexed, counted without
    /// reading them: those in memory, and those on disk.
    pub fn message_count(&self) -> Result<usize, Error> {
        self.refresh_if_changed()?;
        let odd = lock(&self.docs).odd_messages()?;
        let meta = read(&self.shared.meta);
        let resident = meta
            .values()
            .filter(|m| memoria_store::log::is_message_key(&m.id))
            .count();
        // Every document on disk is typed as a message; the odd ones are not the log's.
        let odd_on_disk = odd.iter().filter(|m| !meta.contains_key(&m.key)).count();
        Ok(resident + self.on_disk().saturating_sub(odd_on_disk))
    }

    /// The states of those of `keys` (`scope`, `id`) that are indexed, from memory or disk.
    pub fn states_of(&self, keys: &[(String, String)]) -> Result<Vec<DocState>, Error> {
        self.refresh_if_changed()?;
        let meta = read(&self.shared.meta);
        let keys: Vec<String> = keys.iter().map(|(s, i)| doc_key(s, i)).collect();
        let on_disk = self.on_disk_meta(&meta, keys.iter().map(String::as_str))?;
        Ok(keys
            .iter()
            .filter_map(|k| meta.get(k).or_else(|| on_disk.get(k)))
            .map(state_of)
            .collect())
    }

    /// `(scope, id)` of every indexed log message, by id: what a comparison of every message
    /// walks beside the log's, without their states.
    pub fn message_ids(&self) -> Result<Vec<(String, String)>, Error> {
        self.refresh_if_changed()?;
        let is_message = |m: &DocMeta| memoria_store::log::is_message_key(&m.id);
        let meta = read(&self.shared.meta);
        let mut out: Vec<(String, String)> = if self.on_disk() == 0 {
            meta.values()
                .filter(|m| is_message(m))
                .map(|m| (m.scope.clone(), m.id.clone()))
                .collect()
        } else {
            let mut stored = lock(&self.docs).message_ids()?;
            // A message id under another type is never left on disk: it is in memory.
            stored.extend(
                meta.values()
                    .filter(|m| is_message(m) && m.note_type.as_deref() != Some(MESSAGE_TYPE))
                    .map(|m| (m.scope.clone(), m.id.clone())),
            );
            stored
        };
        out.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
        Ok(out)
    }

    /// Removes these documents (`scope`, `id`) in one commit of each store; returns how many
    /// were indexed.
    pub fn remove_all(&self, keys: &[(String, String)]) -> Result<usize, Error> {
        let keys: Vec<String> = keys.iter().map(|(s, i)| doc_key(s, i)).collect();
        self.remove_keys(&keys)
    }

    /// How many documents are indexed but not in memory (older messages).
    fn on_disk(&self) -> usize {
        self.shared.on_disk.load(Ordering::SeqCst)
    }

    /// The ranking facts of those of `keys` kept on disk only (not in `meta`), read from the
    /// document store: nothing to read while every document is in memory.
    fn on_disk_meta<'k>(
        &self,
        meta: &HashMap<String, DocMeta>,
        keys: impl Iterator<Item = &'k str>,
    ) -> Result<HashMap<String, DocMeta>, Error> {
        if self.on_disk() == 0 {
            return Ok(HashMap::new());
        }
        let absent: Vec<&str> = keys.filter(|k| !meta.contains_key(*k)).collect();
        if absent.is_empty() {
            return Ok(HashMap::new());
        }
        Ok(lock(&self.docs)
            .metas_of(&absent)?
            .into_iter()
            .map(|m| (m.key.clone(), m))
            .collect())
    }

    /// The vector side over documents kept on disk (`on_disk`, those a search's words
    /// matched): their cached vectors are read and scored as the ones in memory are. Returns
    /// the admitted ones by cosine and their crowd ([`VectorIndex::search_with_crowd`]).
    fn search_on_disk(
        &self,
        query: &[f32],
        on_disk: &HashMap<String, DocMeta>,
        opts: &SearchOptions,
        admit: impl Fn(&str) -> bool,
    ) -> Result<ScoredWithCrowd, Error> {
        let model = read(&self.shared.choice).model_id.clone();
        let mut found = VectorIndex::default();
        {
            let cache = lock(&self.shared.cache);
            for m in on_disk.values().filter(|m| admit(&m.key)) {
                if let Some(v) = cache.get(&m.hash, &model)? {
                    found.insert(&m.key, &m.hash, &v);
                }
            }
        }
        Ok(found.search_with_crowd(query, opts.candidates, |_| true))
    }

    /// Keeps the ranking facts and vectors of the newest [`RecallConfig::resident_messages`]
    /// messages in memory, by when they were said, and leaves the older ones on disk. It runs
    /// once a quarter more than that are held, so a capture does not sort them every time.
    fn evict_old_messages(&self) {
        let limit = self.shared.resident_messages;
        let mut meta = write(&self.shared.meta);
        let is_message = |m: &DocMeta| m.note_type.as_deref() == Some(MESSAGE_TYPE);
        let held = meta.values().filter(|m| is_message(m)).count();
        if held <= limit + limit / 4 {
            return;
        }
        let mut messages: Vec<(Option<i64>, &str)> = meta
            .values()
            .filter(|m| is_message(m))
            .map(|m| (m.updated_at_ms, m.key.as_str()))
            .collect();
        let old = held - limit;
        messages.select_nth_unstable_by(old - 1, |a, b| a.0.cmp(&b.0).then(a.1.cmp(b.1)));
        let gone: Vec<String> = messages[..old].iter().map(|m| m.1.to_owned()).collect();
        let mut vectors = write(&self.shared.vectors);
        for key in &gone {
            meta.remove(key);
            vectors.remove(key);
        }
        self.shared.on_disk.fetch_add(gone.len(), Ordering::SeqCst);
    }

    /// Counts one recall or opening of each note: it reinforces the note's importance in
    /// ranking and brings an archived note back.
    pub fn record_access(&self, keys: &[(String, String)]) -> Result<(), Error> {
        let keys: Vec<String> = keys.iter().map(|(s, i)| doc_key(s, i)).collect();
        let now = self.clock.now_ms();
        lock(&self.docs).record_access(&keys, now)?;
        {
            let mut meta = write(&self.shared.meta);
            for k in &keys {
                if let Some(m) = meta.get_mut(k) {
                    m.access_count += 1;
                    m.last_access_ms = Some(now);
                }
            }
        }
        Ok(())
    }

    /// Sets how importance decays and when a note is archived (the machine's settings).
    pub fn set_decay_rule(&self, rule: DecayRule) {
        *write(&self.decay_rule) = rule;
    }

    /// The everyday sentences' vectors for the model in use: from memory, else from the
    /// vector cache, else embedded now (once per model and home).
    fn everyday_vectors(&self) -> Result<Arc<Vec<Vec<f32>>>, Error> {
        let model = read(&self.shared.choice).model_id.clone();
        if let Some((m, v)) = lock(&self.shared.everyday).as_ref()
            && *m == model
        {
            return Ok(Arc::clone(v));
        }
        let cached = lock(&self.shared.cache).get(EVERYDAY_KEY, &model)?;
        let vecs = match cached.filter(|v| v.len() == relevance::EVERYDAY.len()) {
            Some(v) => v,
            None => {
                let texts: Vec<String> = relevance::EVERYDAY.iter().map(|t| (*t).into()).collect();
                let v = lock(&self.shared.embedder).embed_passages(&texts)?;
                lock(&self.shared.cache).put_many(&model, &[(EVERYDAY_KEY.into(), v.clone())])?;
                v
            }
        };
        let vecs = Arc::new(vecs);
        *lock(&self.shared.everyday) = Some((model, Arc::clone(&vecs)));
        Ok(vecs)
    }

    /// Which cosine counts as "relevant" for the recall block when a hit has no calibrated
    /// relevance: e5's cosines sit in a narrow 0.7–0.9 band; the hash embedder's spread much
    /// wider.
    pub fn relevance_floor(&self) -> f32 {
        match read(&self.shared.choice).kind {
            "onnx" => 0.82,
            _ => 0.25,
        }
    }
}

impl Drop for RecallIndex {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.wait_for_vectors();
    }
}

/// The everyday sentences' vectors, and the model they are for.
type Everyday = (String, Arc<Vec<Vec<f32>>>);

/// The vector cache's row for the everyday sentences (no note's content hash looks like it).
const EVERYDAY_KEY: &str = "everyday-sentences-1";

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The value that occurs most often; `None` for none, or for a tie at the top.
fn most_common<T: Copy + Eq + std::hash::Hash>(items: impl Iterator<Item = T>) -> Option<T> {
    let mut counts: HashMap<T, usize> = HashMap::new();
    for t in items {
        *counts.entry(t).or_default() += 1;
    }
    let best = counts.values().copied().max()?;
    let mut top = counts.into_iter().filter(|(_, n)| *n == best);
    let first = top.next().map(|(t, _)| t);
    if top.next().is_some() { None } else { first }
}

/// Whether a document of `scopes` (`None`: every scope) may be shown: not holding secrets,
/// not quarantined.
fn listed(m: &DocMeta, scopes: Option<&[String]>) -> bool {
    scopes.is_none_or(|s| s.contains(&m.scope)) && !m.secret && trust_weight_of(m).is_some()
}

/// The documents among `metas` of `scopes` (`None`: every scope) in the archive tier now by
/// `rule`, hidden ones left out, each with its importance now, by scope and id.
pub fn archived_docs(
    metas: Vec<DocMeta>,
    scopes: Option<&[String]>,
    rule: &DecayRule,
    now_ms: i64,
) -> Vec<(DocMeta, f64)> {
    let mut out: Vec<(DocMeta, f64)> = metas
        .into_iter()
        .filter(|m| listed(m, scopes) && rank::archived(m, rule, now_ms))
        .map(|m| {
            let live = rank::live_importance(&m, rule, now_ms);
            (m, live)
        })
        .collect();
    out.sort_by(|a, b| (&a.0.scope, &a.0.id).cmp(&(&b.0.scope, &b.0.id)));
    out
}

fn trust_weight_of(m: &DocMeta) -> Option<f64> {
    rank::trust_weight(m.trust)
}

/// A document's state as the vault compares it: `(scope, id, content hash, ranking facts)`.
pub type DocState = (String, String, String, RankFacts);

fn state_of(m: &DocMeta) -> DocState {
    (m.scope.clone(), m.id.clone(), m.hash.clone(), m.facts())
}

/// `used`: the document's (access count, last access) so far.
fn meta_of(d: &RecallDoc, used: (i64, Option<i64>)) -> DocMeta {
    let (access_count, last_access_ms) = used;
    DocMeta {
        key: d.key(),
        scope: d.scope.clone(),
        id: d.id.clone(),
        hash: d.hash.as_str().to_owned(),
        note_type: d.note_type.clone(),
        updated_at_ms: d.updated_at_ms,
        trust: d.trust,
        importance: d.importance,
        evergreen: d.evergreen,
        standing: d.standing,
        secret: d.tags.iter().any(|t| t == SECRETS_TAG),
        access_count,
        last_access_ms,
    }
}

/// Computes (or takes from the cache) the vectors of `need` = (key, hash, chunks) and puts them
/// into the in-memory index. Returns how many documents were embedded now.
/// Puts the cached vectors of `need` into the in-memory index; returns the documents that
/// have none.
fn take_cached<'a>(shared: &Shared, need: &'a [Need]) -> Result<Vec<&'a Need>, Error> {
    let model = read(&shared.choice).model_id.clone();
    let in_memory = resident(shared, need.iter().map(|d| d.0.as_str()));
    let mut todo = Vec::new();
    let cache = lock(&shared.cache);
    let mut vectors = write(&shared.vectors);
    for (item, in_memory) in need.iter().zip(in_memory) {
        match cache.get(&item.1, &model)? {
            Some(v) if in_memory => vectors.insert(&item.0, &item.1, &v),
            Some(_) => {}
            None => todo.push(item),
        }
    }
    Ok(todo)
}

/// Whether each of `keys` is held in memory: a document removed meanwhile, or a message left
/// on disk as older ones are, gets no vectors in memory (its vectors are cached all the same).
/// Read before any other lock is taken: a search holds the facts while it waits for others.
fn resident<'k>(shared: &Shared, keys: impl Iterator<Item = &'k str>) -> Vec<bool> {
    let meta = read(&shared.meta);
    keys.map(|k| meta.contains_key(k)).collect()
}

fn embed_missing(
    shared: &Shared,
    need: &[Need],
    progress: &mut dyn FnMut(usize, usize),
    turn: Turn,
) -> Result<usize, Error> {
    if shared.awaiting_model.load(Ordering::SeqCst) {
        // Embedded once the model is installed: vectors of a stand-in would be wasted.
        return Ok(0);
    }
    let model = read(&shared.choice).model_id.clone();
    let todo = take_cached(shared, need)?;
    let total = todo.len();
    let mut done = 0;
    let mut embedded = 0;
    let bulk = Bulk::start(shared, todo.iter().map(|d| d.2.len()).sum());
    // Group whole documents into batches of about EMBED_BATCH chunks, four per session in bulk
    // work: the sessions wait for each other at the end of a batch, and bigger batches wait
    // less often, for a little more throughput; a search meanwhile waits longer for the model
    // (docs/BENCHMARKS.md).
    let per_batch = match lock(&shared.embedder).sessions() {
        1 => EMBED_BATCH,
        n => EMBED_BATCH * n * 4,
    };
    let mut start = 0;
    while start < todo.len() {
        let mut end = start;
        let mut n = 0;
        while end < todo.len() && (n == 0 || n + todo[end].2.len() <= per_batch) {
            n += todo[end].2.len();
            end += 1;
        }
        // Another process embedding for this home goes on with its batch first; what it
        // cached is then taken instead of embedded twice. (Without a lock file, as on a
        // read-only home, each process embeds for itself.)
        let _claim = match claim(shared, turn) {
            Claim::Held(l) => Some(l),
            Claim::Unavailable => None,
            Claim::Stopped => break,
        };
        let owned: Vec<Need> = todo[start..end].iter().map(|d| (*d).clone()).collect();
        let batch = take_cached(shared, &owned)?;
        done += end - start;
        start = end;
        if batch.is_empty() {
            progress(done, total);
            continue;
        }
        let texts: Vec<String> = batch.iter().flat_map(|d| d.2.iter().cloned()).collect();
        let in_memory = resident(shared, batch.iter().map(|d| d.0.as_str()));
        // A search waiting for the model goes first.
        while shared.queries_waiting.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // The model stays held until the batch is searchable: a search waiting for it sees
        // every vector embedded before it.
        let mut embedder = lock(&shared.embedder);
        let vecs = embedder.embed_passages(&texts)?;
        let mut it = vecs.into_iter();
        let mut rows: Vec<(String, Vec<Vec<f32>>)> = Vec::with_capacity(batch.len());
        for d in &batch {
            let v: Vec<Vec<f32>> = it.by_ref().take(d.2.len()).collect();
            rows.push((d.1.clone(), v));
        }
        lock(&shared.cache).put_many(&model, &rows)?;
        {
            let mut vectors = write(&shared.vectors);
            for ((d, (_, v)), _) in batch.iter().zip(&rows).zip(in_memory).filter(|x| x.1) {
                vectors.insert(&d.0, &d.1, v);
            }
        }
        drop(embedder);
        embedded += batch.len();
        progress(done, total);
    }
    drop(bulk);
    Ok(embedded)
}

enum Claim {
    Held(crate::fsx::FileLock),
    /// No lock file can be had (a read-only home), or waiting longer is not worth it: embed
    /// without taking turns.
    Unavailable,
    /// The index is closing: stop embedding.
    Stopped,
}

/// How long a caller waits for another process's embedding turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// The background: as long as it takes (it stops when the index closes).
    Wait,
    /// A caller someone waits for (a search, a write): [`TURN_PATIENCE`], then it embeds
    /// without taking turns rather than wait for all of another process's work.
    Bounded,
}

/// How long [`Turn::Bounded`] waits for another process's batch.
const TURN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Waits for this home's embedding turn; a closing index stops waiting (a process that is
/// exiting never waits for another process's work).
fn claim(shared: &Shared, turn: Turn) -> Claim {
    let start = std::time::Instant::now();
    loop {
        match crate::fsx::FileLock::try_acquire(&shared.embed_claim) {
            Ok(Some(l)) => return Claim::Held(l),
            Ok(None) if shared.stop.load(Ordering::SeqCst) => return Claim::Stopped,
            Ok(None) if turn == Turn::Bounded && start.elapsed() >= TURN_PATIENCE => {
                return Claim::Unavailable;
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(_) => return Claim::Unavailable,
        }
    }
}

/// Locks, recovering the data of a poisoned lock (a panicking thread cannot corrupt these
/// plain collections half-way in a way that matters more than losing recall).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}
fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}

/// The default recall directory of a home.
pub fn default_dir(home: &Path) -> PathBuf {
    home.join("index").join("recall")
}

#[cfg(test)]
mod tests;
