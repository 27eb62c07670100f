//! Text embedders: the local ONNX model (multilingual-e5-small through ONNX Runtime) and the
//! deterministic hash embedder that keeps recall working when no model or runtime is present.
//!
//! Loading never panics: ONNX Runtime is loaded with `ort::init_from`, which returns an error
//! for a missing or wrong library (a bare session builder would panic inside ort), and any failure
//! falls back to the hash embedder with the reason kept for the engine card.

use std::path::{Path, PathBuf};

use memoria_shared::hash::sha256_hex_of_files;

use super::Error;

/// Dimensions of both embedders (e5-small's width; the hash embedder matches it).
pub const DIM: usize = 384;

/// Words per passage chunk; long notes are split into overlapping chunks of this size.
pub const CHUNK_WORDS: usize = 200;
/// Words shared by consecutive chunks.
pub const CHUNK_OVERLAP: usize = 40;

/// Everything besides the model that decides a note's vectors: chunk size and overlap, the
/// layout of a chunk ([`chunks`]: summary and tags lead every chunk) and the e5 prefixes. It is
/// part of every embedder's id, and the vector cache is keyed by that id, so changing any of
/// them never reuses a stale vector. Bump the layout number (`l1`) whenever [`chunks`] or the
/// prefixes change; a test pins them.
pub const CHUNK_RECIPE: &str = "c200o40l1";

/// How a note becomes passages: the product's layout is [`Chunking::PRODUCT`]; the evaluation
/// harness measures others. Its [`Chunking::recipe`] names it in the embedder's id, so vectors
/// of one layout are never taken for another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunking {
    /// Words per chunk.
    pub words: usize,
    /// Words shared by consecutive chunks.
    pub overlap: usize,
    /// The summary and tags lead every chunk (else only the first).
    pub head_in_every_chunk: bool,
}

impl Chunking {
    /// The layout every note is embedded with.
    pub const PRODUCT: Chunking = Chunking {
        words: CHUNK_WORDS,
        overlap: CHUNK_OVERLAP,
        head_in_every_chunk: true,
    };

    /// The recipe name: `c<words>o<overlap>l<layout>`, layout 1 with the summary in every
    /// chunk, 2 with it in the first only. [`CHUNK_RECIPE`] for [`Chunking::PRODUCT`].
    pub fn recipe(&self) -> String {
        let layout = if self.head_in_every_chunk { 1 } else { 2 };
        format!("c{}o{}l{layout}", self.words, self.overlap)
    }

    /// Parses a recipe name ([`Chunking::recipe`]).
    pub fn from_recipe(s: &str) -> Option<Chunking> {
        let rest = s.strip_prefix('c')?;
        let (words, rest) = rest.split_once('o')?;
        let (overlap, layout) = rest.split_once('l')?;
        let (words, overlap): (usize, usize) = (words.parse().ok()?, overlap.parse().ok()?);
        let head_in_every_chunk = match layout {
            "1" => true,
            "2" => false,
            _ => return None,
        };
        (words > 0 && overlap < words).then_some(Chunking {
            words,
            overlap,
            head_in_every_chunk,
        })
    }

    /// Splits a note into the passages that get embedded: bodies longer than `words` words
    /// are cut into chunks overlapping by `overlap` words, each led by the summary and tags
    /// (or only the first, by `head_in_every_chunk`).
    pub fn chunks(&self, summary: &str, tags: &[String], body: &str) -> Vec<String> {
        let words: Vec<&str> = body.split_whitespace().collect();
        let mut head = summary.trim().to_owned();
        if !tags.is_empty() {
            head.push_str(" (");
            head.push_str(&tags.join(", "));
            head.push(')');
        }
        if words.len() <= self.words {
            let text = format!("{head}\n{}", words.join(" "));
            return vec![text.trim().to_owned()];
        }
        let step = self.words - self.overlap;
        let mut out = Vec::new();
        let mut start = 0;
        loop {
            let end = (start + self.words).min(words.len());
            let part = words[start..end].join(" ");
            if start == 0 || self.head_in_every_chunk {
                out.push(format!("{head}\n{part}").trim().to_owned());
            } else {
                out.push(part);
            }
            if end == words.len() {
                break;
            }
            start += step;
        }
        out
    }
}

/// What e5 expects before a passage and before a query.
const PASSAGE_PREFIX: &str = "passage: ";
const QUERY_PREFIX: &str = "query: ";

/// Something that turns text into unit-length vectors.
pub trait Embedder: Send {
    /// Identifies the model and its settings; vectors are cached under it.
    fn model_id(&self) -> &str;
    /// Embeds passages (note text) — the e5 "passage: " prefix is added here.
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error>;
    /// Embeds one query — the e5 "query: " prefix is added here.
    fn embed_query(&mut self, text: &str) -> Result<Vec<f32>, Error>;
    /// How many model instances embed passages side by side (one per core) — raised for bulk
    /// work, back to 1 after it so the extra memory goes. Embedders without a model ignore it.
    fn set_sessions(&mut self, _n: usize) -> Result<(), Error> {
        Ok(())
    }
    fn sessions(&self) -> usize {
        1
    }
}

/// Where the model and runtime come from, and why the hash embedder is used when it is.
#[derive(Debug, Clone)]
pub struct EmbedderChoice {
    /// `onnx` or `hash`.
    pub kind: &'static str,
    pub model_id: String,
    /// Why the model was not loaded, when it was not.
    pub fallback_reason: Option<String>,
}

/// Resolves the model directory: `--model-dir`, else `MEMORIA_MODEL_DIR`, else
/// `$MEMORIA_HOME/models/default`.
pub fn resolve_model_dir(explicit: Option<&Path>, home: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_owned());
    }
    if let Some(p) = std::env::var_os("MEMORIA_MODEL_DIR").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    home.map(|h| h.join("models").join("default"))
}

/// Resolves the ONNX Runtime library: `ORT_DYLIB_PATH`, else `libonnxruntime.so` in the model
/// directory.
pub fn resolve_runtime(model_dir: &Path) -> PathBuf {
    match std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => model_dir.join(runtime_file_name()),
    }
}

fn runtime_file_name() -> &'static str {
    if cfg!(target_os = "macos") {
        "libonnxruntime.dylib"
    } else if cfg!(target_os = "windows") {
        "onnxruntime.dll"
    } else {
        "libonnxruntime.so"
    }
}

/// Loads the ONNX model when it can, else the hash embedder. Never panics.
pub fn load(model_dir: Option<&Path>, threads: usize) -> (Box<dyn Embedder>, EmbedderChoice) {
    let Some(dir) = model_dir else {
        return hash_fallback("no model directory configured".into());
    };
    match OnnxEmbedder::load(dir, threads) {
        Ok(e) => {
            let choice = EmbedderChoice {
                kind: "onnx",
                model_id: e.model_id.clone(),
                fallback_reason: None,
            };
            (Box::new(e), choice)
        }
        Err(err) => hash_fallback(err.to_string()),
    }
}

fn hash_fallback(reason: String) -> (Box<dyn Embedder>, EmbedderChoice) {
    let e = HashEmbedder;
    let choice = EmbedderChoice {
        kind: "hash",
        model_id: e.model_id().to_owned(),
        fallback_reason: Some(reason),
    };
    (Box::new(e), choice)
}

/// Tokens per text, `<s>` and `</s>` included (e5's limit).
const MAX_TOKENS: usize = 512;

/// The process's ONNX Runtime environment (ONNX Runtime allows one), loaded from `runtime` the
/// first time. `ort::init_from` returns an error for a missing or wrong library where a bare
/// session builder would panic. Once a library is loaded it serves every later model (a model
/// change in a running process included), wherever the new model directory's copy lives.
fn environment(runtime: &Path) -> Result<ort::environment::Environment, Error> {
    static ENV: std::sync::Mutex<Option<ort::environment::Environment>> =
        std::sync::Mutex::new(None);
    let mut env = ENV
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(e) = env.as_ref() {
        return Ok(e.clone());
    }
    let cannot = |e: String| {
        Error::Model(format!(
            "cannot load ONNX Runtime from {}: {e}",
            runtime.display()
        ))
    };
    let built = ort::init_from(runtime)
        .map_err(|e| cannot(e.to_string()))?
        .with_name("memoria")
        .build()
        .map_err(|e| cannot(e.to_string()))?;
    *env = Some(built.clone());
    Ok(built)
}

/// multilingual-e5-small (or another XLM-R-family encoder exported with `input_ids` and
/// `attention_mask` inputs and a `[batch, sequence, hidden]` output) through ONNX Runtime, mean
/// pooled over the attention mask.
pub struct OnnxEmbedder {
    session: ort::session::Session,
    /// Extra single-threaded sessions for bulk embedding ([`Embedder::set_sessions`]).
    workers: Vec<ort::session::Session>,
    dir: PathBuf,
    tokenizer: super::tokenize::Tokenizer,
    model_id: String,
}

impl OnnxEmbedder {
    /// Loads `dir/model.onnx` and `dir/tokenizer.json` with the runtime from
    /// [`resolve_runtime`].
    pub fn load(dir: &Path, threads: usize) -> Result<Self, Error> {
        let model_path = dir.join("model.onnx");
        let digest = model_digest(dir)?;
        let tokenizer = super::tokenize::Tokenizer::load(dir, MAX_TOKENS)?;
        let runtime = resolve_runtime(dir);
        if !runtime.exists() {
            return Err(Error::Model(format!(
                "ONNX Runtime library not found at {} (set ORT_DYLIB_PATH)",
                runtime.display()
            )));
        }
        // ONNX Runtime must be loaded before any other ort call: ort would otherwise try its
        // default library path, and panic when it is not there.
        environment(&runtime)?;
        let model_id = format!("onnx-{}-{CHUNK_RECIPE}", &digest[..16]);
        let session = Self::session(&runtime, &model_path, threads)?;
        Ok(Self {
            session,
            workers: Vec::new(),
            dir: dir.to_owned(),
            tokenizer,
            model_id,
        })
    }

    fn session(
        runtime: &Path,
        model: &Path,
        threads: usize,
    ) -> Result<ort::session::Session, Error> {
        let env = environment(runtime)?;
        Self::build_session(&env, model, threads)
            .map_err(|e| Error::Model(format!("cannot start the embedding model: {e}")))
    }

    fn build_session(
        env: &ort::environment::Environment,
        model: &Path,
        threads: usize,
    ) -> Result<ort::session::Session, String> {
        let e = |e: ort::Error<ort::session::builder::SessionBuilder>| e.to_string();
        ort::session::Session::builder(env)
            .map_err(|e| e.to_string())?
            .with_intra_threads(threads.max(1))
            .map_err(e)?
            .with_inter_threads(1)
            .map_err(e)?
            // Idle worker threads sleep instead of spinning: this is a desktop app's engine.
            .with_intra_op_spinning(false)
            .map_err(e)?
            .commit_from_file(model)
            .map_err(|e| e.to_string())
    }

    /// Embeds `texts` (already prefixed) one at a time, on every session at once when bulk
    /// sessions are open (each takes the next text; longest first, so none is left with a long
    /// tail). Not batched on purpose: the int8 model quantizes activations with one scale per
    /// run, so batch-mates would nudge a text's vector, and on a CPU a batch of
    /// one, with no padding, is also the fastest (docs/BENCHMARKS.md). A text's vector is the
    /// same whichever session embeds it.
    fn embed_prefixed(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let ids: Vec<Vec<i64>> = texts.iter().map(|t| self.tokenizer.encode(t)).collect();
        if self.workers.is_empty() || ids.len() < 2 {
            return ids.into_iter().map(|i| run(&mut self.session, i)).collect();
        }
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut out: Vec<Option<Result<Vec<f32>, Error>>> = (0..ids.len()).map(|_| None).collect();
        let done = std::sync::Mutex::new(&mut out);
        std::thread::scope(|s| {
            for session in std::iter::once(&mut self.session).chain(self.workers.iter_mut()) {
                let (ids, order, next, done) = (&ids, &order, &next, &done);
                s.spawn(move || {
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&i) = order.get(k) else { break };
                        let v = run(session, ids[i].clone());
                        done.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(v);
                    }
                });
            }
        });
        out.into_iter()
            .map(|v| v.unwrap_or_else(|| Err(Error::Model("an embedding thread stopped".into()))))
            .collect()
    }
}

/// SHA-256 of `dir/model.onnx` followed by `dir/model.data` when there is one (the weights
/// `scripts/install-model.sh` stores beside the graph, so ONNX Runtime maps them rather than
/// copying them into each session): a change to either is a new model.
///
/// Hashing the model's files is slow next to the rest of a command, and every `memoria`
/// command that loads the model (an agent's hook, once per turn) would pay it: the digest is
/// kept in [`DIGEST_FILE`] ([`super::beside`]).
fn model_digest(dir: &Path) -> Result<String, Error> {
    let graph = dir.join("model.onnx");
    let data = dir.join("model.data");
    let mut files = vec![graph.as_path()];
    if data.exists() {
        files.push(data.as_path());
    }
    let cannot = |e: std::io::Error| {
        let what = if files.len() > 1 {
            " and model.data"
        } else {
            ""
        };
        Error::Model(format!(
            "cannot read {}{what}: {e}; install the model with scripts/install-model.sh",
            graph.display()
        ))
    };
    super::beside::remembered(
        &dir.join(DIGEST_FILE),
        &files,
        cannot,
        |kept, stamp| {
            let (s, digest) = std::str::from_utf8(kept)
                .ok()?
                .trim_end()
                .rsplit_once(' ')?;
            let hex = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
            (s == stamp && hex).then(|| digest.to_owned())
        },
        || sha256_hex_of_files(&files).map_err(cannot),
        |digest, stamp| format!("{stamp} {digest}\n").into_bytes(),
    )
}

/// Where [`model_digest`] keeps a model's digest, beside the model.
pub const DIGEST_FILE: &str = ".memoria-model-digest";

/// One text through one session: token ids in, mean-pooled unit vector out.
fn run(session: &mut ort::session::Session, ids: Vec<i64>) -> Result<Vec<f32>, Error> {
    let len = ids.len();
    let failed = |e: ort::Error| Error::Model(format!("embedding failed: {e}"));
    let ids_t = ort::value::Tensor::from_array(([1, len], ids)).map_err(failed)?;
    let mask_t = ort::value::Tensor::from_array(([1, len], vec![1i64; len])).map_err(failed)?;
    let outputs = session
        .run(ort::inputs!["input_ids" => ids_t, "attention_mask" => mask_t])
        .map_err(failed)?;
    let (shape, hidden) = outputs[0].try_extract_tensor::<f32>().map_err(failed)?;
    let dim = match **shape {
        [1, n, d] if n as usize == len && d > 0 => d as usize,
        _ => {
            return Err(Error::Model(format!(
                "the model returned shape {shape:?}, expected [1, {len}, hidden]"
            )));
        }
    };
    // Mean pooling over the tokens (no padding in a batch of one).
    let mut v = vec![0f32; dim];
    for row in hidden.chunks_exact(dim) {
        v.iter_mut().zip(row).for_each(|(a, b)| *a += b);
    }
    v.iter_mut().for_each(|x| *x /= len as f32);
    normalize(&mut v);
    Ok(v)
}

impl Embedder for OnnxEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let texts: Vec<String> = texts
            .iter()
            .map(|t| format!("{PASSAGE_PREFIX}{t}"))
            .collect();
        self.embed_prefixed(&texts)
    }
    fn embed_query(&mut self, text: &str) -> Result<Vec<f32>, Error> {
        let mut v = self.embed_prefixed(&[format!("{QUERY_PREFIX}{text}")])?;
        v.pop()
            .ok_or_else(|| Error::Model("the model returned no vector".into()))
    }
    fn set_sessions(&mut self, n: usize) -> Result<(), Error> {
        let want = n.max(1) - 1;
        if want <= self.workers.len() {
            self.workers.truncate(want);
            return Ok(());
        }
        let path = self.dir.join("model.onnx");
        let digest = model_digest(&self.dir)?;
        // A worker must run the very model the vectors are cached under.
        let loaded = self
            .model_id
            .strip_prefix("onnx-")
            .and_then(|r| r.get(..16));
        if loaded.is_none_or(|h| !digest.starts_with(h)) {
            return Err(Error::Model(format!(
                "{} changed since the model was loaded",
                path.display()
            )));
        }
        let runtime = resolve_runtime(&self.dir);
        while self.workers.len() < want {
            let s = OnnxEmbedder::session(&runtime, &path, 1)?;
            self.workers.push(s);
        }
        Ok(())
    }
    fn sessions(&self) -> usize {
        1 + self.workers.len()
    }
}

/// Feature hashing of words and character trigrams into [`DIM`] signed buckets: no model, no
/// data, the same vector on every machine. Catches paraphrase only through shared sub-words.
#[derive(Debug, Default)]
pub struct HashEmbedder;

impl HashEmbedder {
    pub const MODEL_ID: &'static str = "hash-v1-384-c200o40l1";

    pub fn embed(text: &str) -> Vec<f32> {
        let mut v = vec![0f32; DIM];
        let lower = text.to_lowercase();
        let mut add = |feature: &str, weight: f32| {
            let h = fnv1a(feature.as_bytes());
            let bucket = (h % DIM as u64) as usize;
            let sign = if (h >> 32) & 1 == 0 { 1.0 } else { -1.0 };
            v[bucket] += sign * weight;
        };
        for word in lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            add(word, 1.0);
            let chars: Vec<char> = format!("<{word}>").chars().collect();
            for tri in chars.windows(3) {
                add(&tri.iter().collect::<String>(), 0.5);
            }
        }
        normalize(&mut v);
        v
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

impl Embedder for HashEmbedder {
    fn model_id(&self) -> &str {
        Self::MODEL_ID
    }
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        Ok(texts.iter().map(|t| Self::embed(t)).collect())
    }
    fn embed_query(&mut self, text: &str) -> Result<Vec<f32>, Error> {
        Ok(Self::embed(text))
    }
}

/// Scales a vector to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// The passages of a note in the product's layout ([`Chunking::PRODUCT`]).
pub fn chunks(summary: &str, tags: &[String], body: &str) -> Vec<String> {
    Chunking::PRODUCT.chunks(summary, tags, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change to chunking, its layout or the prefixes must come with a new [`CHUNK_RECIPE`]
    /// (and so a new model id): this pins what the recipe `c200o40l1` produces.
    #[test]
    fn the_recipe_names_the_chunking_in_use() {
        assert_eq!(
            CHUNK_RECIPE,
            format!("c{CHUNK_WORDS}o{CHUNK_OVERLAP}l1"),
            "chunk size or overlap changed: update CHUNK_RECIPE"
        );
        assert!(HashEmbedder::MODEL_ID.ends_with(CHUNK_RECIPE));
        let body: Vec<String> = (0..450).map(|i| format!("w{i}")).collect();
        let parts = chunks(" A summary ", &["t1".into(), "t2".into()], &body.join(" "));
        let layout = memoria_shared::hash::sha256_hex(parts.join("\u{0}").as_bytes());
        assert_eq!(
            &layout[..16],
            "b5cd526c01587cf3",
            "chunks() produces another layout: bump the `l` number in CHUNK_RECIPE, then pin it here"
        );
        assert_eq!((PASSAGE_PREFIX, QUERY_PREFIX), ("passage: ", "query: "));
    }

    #[test]
    fn hash_embedder_is_deterministic_unit_length_and_similar_for_shared_words() {
        let a = HashEmbedder::embed("pricing cards use fills not borders");
        let b = HashEmbedder::embed("pricing cards use fills not borders");
        assert_eq!(a, b);
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5);
        let c = HashEmbedder::embed("the pricing card layout");
        let d = HashEmbedder::embed("quantum chromodynamics lattice");
        let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
        assert!(dot(&a, &c) > dot(&a, &d) + 0.1);
        assert!(HashEmbedder::embed("").iter().all(|x| *x == 0.0));
    }

    #[test]
    fn missing_model_dir_falls_back_to_hash_embedder() {
        let dir = tempfile::tempdir().unwrap();
        let (mut e, choice) = load(Some(&dir.path().join("nope")), 1);
        assert_eq!(choice.kind, "hash");
        assert!(choice.fallback_reason.unwrap().contains("model.onnx"));
        assert_eq!(e.model_id(), HashEmbedder::MODEL_ID);
        assert_eq!(e.embed_query("hello").unwrap().len(), DIM);
        let (_, choice) = load(None, 1);
        assert_eq!(choice.kind, "hash");
    }

    #[test]
    fn model_files_without_runtime_fall_back_instead_of_panicking() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "model.onnx",
            "tokenizer.json",
            "config.json",
            "special_tokens_map.json",
            "tokenizer_config.json",
        ] {
            std::fs::write(dir.path().join(f), b"not a model").unwrap();
        }
        // A runtime library that is not a library: ort must report, not panic.
        std::fs::write(dir.path().join(runtime_file_name()), b"garbage").unwrap();
        let (_, choice) = load(Some(dir.path()), 1);
        assert_eq!(choice.kind, "hash", "{choice:?}");
    }

    #[test]
    fn model_digest_covers_both_files_and_is_remembered_until_they_change() {
        use memoria_shared::hash::sha256_hex;
        let dir = tempfile::tempdir().unwrap();
        let graph = dir.path().join("model.onnx");
        std::fs::write(&graph, b"graph").unwrap();
        assert_eq!(model_digest(dir.path()).unwrap(), sha256_hex(b"graph"));
        std::fs::write(dir.path().join("model.data"), b"weights").unwrap();
        assert_eq!(
            model_digest(dir.path()).unwrap(),
            sha256_hex(b"graphweights")
        );
        let remembered = dir.path().join(DIGEST_FILE);
        assert!(
            std::fs::read_to_string(&remembered)
                .unwrap()
                .ends_with(&format!(" {}\n", sha256_hex(b"graphweights")))
        );

        // While sizes and times match, the remembered digest is used without reading the files.
        let stamp = std::fs::read_to_string(&remembered).unwrap();
        let (stamp, _) = stamp.trim_end().rsplit_once(' ').unwrap();
        std::fs::write(&remembered, format!("{stamp} {}\n", "ab".repeat(32))).unwrap();
        assert_eq!(model_digest(dir.path()).unwrap(), "ab".repeat(32));

        // Same size, new time: hashed again. A new size: hashed again.
        let data = dir.path().join("model.data");
        std::fs::write(&data, b"WEIGHTS").unwrap();
        crate::fsx::touch_later(&data);
        assert_eq!(
            model_digest(dir.path()).unwrap(),
            sha256_hex(b"graphWEIGHTS")
        );
        std::fs::write(&data, b"more weights").unwrap();
        assert_eq!(
            model_digest(dir.path()).unwrap(),
            sha256_hex(b"graphmore weights")
        );
        // A garbled record is ignored.
        std::fs::write(&remembered, b"nonsense").unwrap();
        assert_eq!(
            model_digest(dir.path()).unwrap(),
            sha256_hex(b"graphmore weights")
        );
    }

    #[test]
    fn a_layout_is_named_by_its_recipe_and_read_back_from_it() {
        assert_eq!(Chunking::PRODUCT.recipe(), CHUNK_RECIPE);
        assert_eq!(Chunking::from_recipe(CHUNK_RECIPE), Some(Chunking::PRODUCT));
        let first_only = Chunking::from_recipe("c320o40l2").unwrap();
        assert_eq!(
            first_only,
            Chunking {
                words: 320,
                overlap: 40,
                head_in_every_chunk: false
            }
        );
        assert_eq!(first_only.recipe(), "c320o40l2");
        for bad in [
            "",
            "c200",
            "c200o40",
            "c200o40l3",
            "c40o40l1",
            "c0o0l1",
            "x200o40l1",
        ] {
            assert_eq!(Chunking::from_recipe(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_summary_leads_only_the_first_chunk_in_layout_two() {
        let body: Vec<String> = (0..450).map(|i| format!("w{i}")).collect();
        let body = body.join(" ");
        let every = Chunking::PRODUCT.chunks("Title", &["t".into()], &body);
        let first = Chunking {
            head_in_every_chunk: false,
            ..Chunking::PRODUCT
        }
        .chunks("Title", &["t".into()], &body);
        assert_eq!(every.len(), first.len());
        assert_eq!(every[0], first[0]);
        assert!(every[1].starts_with("Title (t)\nw160 "));
        assert!(first[1].starts_with("w160 ") && !first[1].contains("Title"));
        // A body that fits one chunk is laid out the same either way.
        let one = Chunking {
            words: 500,
            ..Chunking::PRODUCT
        };
        assert_eq!(
            one.chunks("Title", &[], &body),
            vec![format!("Title\n{body}")]
        );
    }

    #[test]
    fn chunks_overlap_and_cover_long_bodies() {
        let body: Vec<String> = (0..450).map(|i| format!("w{i}")).collect();
        let c = chunks("Title", &["t".into()], &body.join(" "));
        assert_eq!(c.len(), 3);
        assert!(c[0].starts_with("Title (t)\nw0 "));
        assert!(c[1].contains("w160 ") && c[0].contains("w199"));
        assert!(c[2].ends_with("w449"));
        assert_eq!(
            chunks("S", &[], "short body"),
            vec!["S\nshort body".to_owned()]
        );
    }
}
