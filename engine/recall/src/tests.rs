//! Tests of the whole index: scopes, fallbacks, re-embedding, damage, bad input, concurrency.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use memoria_shared::{FixedClock, Trust};

use super::*;

/// The hash embedder under another model id, counting the passages it embeds.
struct Counting {
    id: String,
    passages: Arc<AtomicUsize>,
    /// Every `set_sessions` call, in order.
    sessions: Arc<std::sync::Mutex<Vec<usize>>>,
    /// Set by the test to stall embedding (to observe search during a re-embed); a stall
    /// never outlasts ten seconds, so a failing test cannot hang.
    stall: Arc<AtomicBool>,
}

impl Embedder for Counting {
    fn model_id(&self) -> &str {
        &self.id
    }
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let start = std::time::Instant::now();
        while self.stall.load(Ordering::SeqCst) && start.elapsed().as_secs() < 10 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        self.passages.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts.iter().map(|t| HashEmbedder::embed(t)).collect())
    }
    fn embed_query(&mut self, text: &str) -> Result<Vec<f32>, Error> {
        Ok(HashEmbedder::embed(text))
    }
    fn set_sessions(&mut self, n: usize) -> Result<(), Error> {
        self.sessions.lock().unwrap().push(n);
        Ok(())
    }
    fn sessions(&self) -> usize {
        self.sessions.lock().unwrap().last().copied().unwrap_or(1)
    }
}

type Counted = (
    Box<dyn Embedder>,
    EmbedderChoice,
    Arc<AtomicUsize>,
    Arc<AtomicBool>,
);

fn counting(id: &str, stalled: bool) -> Counted {
    let n = Arc::new(AtomicUsize::new(0));
    let stall = Arc::new(AtomicBool::new(stalled));
    let e = Counting {
        id: id.into(),
        passages: Arc::clone(&n),
        sessions: Arc::default(),
        stall: Arc::clone(&stall),
    };
    let choice = EmbedderChoice {
        kind: "hash",
        model_id: id.into(),
        fallback_reason: None,
    };
    (Box::new(e), choice, n, stall)
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(FixedClock::new(1_800_000_000_000))
}

fn open(dir: &Path) -> RecallIndex {
    let mut c = RecallConfig::new(dir);
    c.background_reembed = false;
    RecallIndex::open(&c, clock()).unwrap()
}

fn doc(scope: &str, id: &str, summary: &str, body: &str) -> RecallDoc {
    RecallDoc::new(scope, id, summary, body)
}

fn ids(hits: &[Hit]) -> Vec<String> {
    hits.iter()
        .map(|h| format!("{}/{}", h.scope, h.id))
        .collect()
}

fn corpus() -> Vec<RecallDoc> {
    vec![
        doc(
            "user",
            "dark-mode",
            "Prefers dark mode",
            "The user prefers dark mode in every editor.",
        ),
        doc(
            "project:a",
            "pricing",
            "Pricing cards use fills",
            "Cards are separated by fill, not borders.",
        ),
        doc(
            "project:b",
            "pricing-b",
            "Pricing cards in project b",
            "Project b pricing cards use borders.",
        ),
        doc(
            "domain:web",
            "spacing",
            "Spacing scale",
            "Use an 8px spacing scale for web layouts.",
        ),
    ]
}

#[test]
fn hybrid_search_finds_notes_with_the_hash_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let ix = open(dir.path());
    assert_eq!(ix.status().embedder, "hash");
    ix.upsert(&corpus()).unwrap();
    for mode in [Mode::Bm25, Mode::Vector, Mode::Hybrid] {
        let hits = ix
            .search(
                "pricing cards fill",
                &SearchOptions {
                    mode,
                    ..SearchOptions::default()
                },
            )
            .unwrap();
        assert_eq!(ids(&hits)[0], "project:a/pricing", "{mode:?}");
    }
}

#[test]
fn other_projects_are_excluded_before_ranking() {
    let dir = tempfile::tempdir().unwrap();
    let ix = open(dir.path());
    ix.upsert(&corpus()).unwrap();
    let visible = vec!["user".to_string(), "project:a".into(), "domain:web".into()];
    for mode in [Mode::Bm25, Mode::Vector, Mode::Hybrid] {
        let hits = ix
            .search(
                "project b pricing borders",
                &SearchOptions {
                    visible_scopes: Some(visible.clone()),
                    mode,
                    limit: 50,
                    ..SearchOptions::default()
                },
            )
            .unwrap();
        assert!(
            !ids(&hits).iter().any(|h| h.starts_with("project:b")),
            "{mode:?}: {hits:?}"
        );
    }
}

#[test]
fn quarantined_and_secret_notes_are_never_recalled() {
    let dir = tempfile::tempdir().unwrap();
    let ix = open(dir.path());
    let mut q = doc(
        "user",
        "q",
        "Deploy token rotation",
        "rotate the deploy token weekly",
    );
    q.trust = Some(Trust::Quarantined);
    let mut s = doc(
        "user",
        "s",
        "Deploy token location",
        "the deploy token lives in the vault",
    );
    s.tags = vec![SECRETS_TAG.into()];
    let s = s.rehash();
    let mut p = doc(
        "user",
        "p",
        "Deploy token from a peer",
        "deploy token notes from a peer",
    );
    p.trust = Some(Trust::Peer);
    ix.upsert(&[q, s, p]).unwrap();
    let hits = ix
        .search("deploy token", &SearchOptions::default())
        .unwrap();
    assert_eq!(ids(&hits), vec!["user/p"]);
    let with = ix
        .search(
            "deploy token",
            &SearchOptions {
                include_secrets: true,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    assert!(ids(&with).contains(&"user/s".to_string()));
    assert!(!ids(&with).contains(&"user/q".to_string()));
}

#[test]
fn fusion_weight_follows_the_share_of_query_words_the_notes_contain() {
    let dir = tempfile::tempdir().unwrap();
    let ix = open(dir.path());
    ix.upsert(&corpus()).unwrap();
    let explain = |q: &str| {
        let hits = ix
            .search(
                q,
                &SearchOptions {
                    explain: true,
                    ..SearchOptions::default()
                },
            )
            .unwrap();
        hits.first().and_then(|h| h.explain.clone())
    };
    // The default weighs both sides by one fixed weight, whatever the coverage.
    let e = explain("pricing zorblax").unwrap();
    assert_eq!(
        (e.coverage, e.vector_weight),
        (None, Some(rank::DEFAULT_VECTOR_WEIGHT))
    );
    let (lexical, cross) = (0.5, 0.8);
    let explain = |q: &str| {
        let hits = ix
            .search(
                q,
                &SearchOptions {
                    explain: true,
                    fusion: Fusion::Adaptive { lexical, cross },
                    ..SearchOptions::default()
                },
            )
            .unwrap();
        hits.first().and_then(|h| h.explain.clone())
    };
    // Every word is in the notes: BM25 gets its full say.
    let e = explain("pricing borders").unwrap();
    assert_eq!(e.coverage, Some(1.0));
    assert_eq!(e.vector_weight, Some(lexical));
    // Half the words are unknown to the notes: halfway.
    let e = explain("pricing zorblax").unwrap();
    assert_eq!(e.coverage, Some(0.5));
    assert!((e.vector_weight.unwrap() - (lexical + cross) / 2.0).abs() < 1e-12);
    // A fixed weight ignores coverage.
    let hits = ix
        .search(
            "pricing zorblax",
            &SearchOptions {
                explain: true,
                fusion: Fusion::Weighted { vector_weight: 0.7 },
                ..SearchOptions::default()
            },
        )
        .unwrap();
    let e = hits[0].explain.clone().unwrap();
    assert_eq!((e.coverage, e.vector_weight), (None, Some(0.7)));
}

#[test]
fn bulk_embedding_opens_extra_sessions_and_closes_them_after() {
    let dir = tempfile::tempdir().unwrap();
    let calls: Arc<std::sync::Mutex<Vec<usize>>> = Arc::default();
    let passages = Arc::new(AtomicUsize::new(0));
    let e = Counting {
        id: "bulk-model".into(),
        passages: Arc::clone(&passages),
        sessions: Arc::clone(&calls),
        stall: Arc::default(),
    };
    let choice = EmbedderChoice {
        kind: "hash",
        model_id: "bulk-model".into(),
        fallback_reason: None,
    };
    let mut c = RecallConfig::new(dir.path());
    c.background_reembed = false;
    c.bulk_sessions = 2;
    let ix = RecallIndex::open_with_embedder(&c, Box::new(e), choice, clock()).unwrap();
    // A few notes: not worth a second session.
    ix.upsert(&corpus()).unwrap();
    assert_eq!(*calls.lock().unwrap(), Vec::<usize>::new());
    let many: Vec<RecallDoc> = (0..BULK_MIN_CHUNKS + 5)
        .map(|i| {
            doc(
                "user",
                &format!("n{i}"),
                &format!("note {i}"),
                "some body text",
            )
            .rehash()
        })
        .collect();
    let before = passages.load(Ordering::SeqCst);
    ix.upsert(&many).unwrap();
    assert_eq!(passages.load(Ordering::SeqCst) - before, many.len());
    assert_eq!(
        *calls.lock().unwrap(),
        vec![2, 1],
        "opened for the work, closed after"
    );
    // With one bulk session configured, nothing is ever opened.
    let dir = tempfile::tempdir().unwrap();
    let (e, choice, _, _) = counting("bulk-model", false);
    let mut c = RecallConfig::new(dir.path());
    c.background_reembed = false;
    c.bulk_sessions = 1;
    let ix = RecallIndex::open_with_embedder(&c, e, choice, clock()).unwrap();
    ix.upsert(&many).unwrap();
    assert_eq!(lock(&ix.shared.embedder).sessions(), 1);
}

#[test]
fn trust_weight_and_decay_show_in_explain() {
    let dir = tempfile::tempdir().unwrap();
    let ix = open(dir.path());
    let mut a = doc(
        "user",
        "a",
        "Standup moved to 14:15",
        "standup time changed",
    );
    a.trust = Some(Trust::Ingested);
    a.note_type = Some("project".into());
    a.updated_at_ms = Some(1_800_000_000_000 - 365 * 86_400_000);
    ix.upsert(&[a.rehash()]).unwrap();
    let hits = ix
        .search(
            "standup",
            &SearchOptions {
                explain: true,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    // Dated a year ago but first seen on this machine now (an imported note): its age decays
    // its rank, but its importance starts from now, so it is not archived.
    assert!(!hits[0].archived);
    let e = hits[0].explain.clone().unwrap();
    assert_eq!(e.trust, 0.6);
    assert!((e.decay - 0.5).abs() < 1e-6);
    assert!((e.importance - 1.0).abs() < 1e-9);
    assert!((hits[0].score - e.fused * 0.6 * 0.5).abs() < 1e-9);
}

#[test]
fn new_and_edited_notes_are_searchable_at_once_and_removal_works() {
    let dir = tempfile::tempdir().unwrap();
    let ix = open(dir.path());
    ix.upsert(&corpus()).unwrap();
    ix.upsert(&[doc("user", "kiwi", "Kiwi allergy", "allergic to kiwi")])
        .unwrap();
    let hits = ix.search("kiwi", &SearchOptions::default()).unwrap();
    assert_eq!(ids(&hits)[0], "user/kiwi");
    let v = ix
        .search(
            "kiwi",
            &SearchOptions {
                mode: Mode::Vector,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    assert_eq!(ids(&v)[0], "user/kiwi");
    ix.upsert(&[doc("user", "kiwi", "Mango allergy", "allergic to mango")])
        .unwrap();
    let bm = SearchOptions {
        mode: Mode::Bm25,
        ..SearchOptions::default()
    };
    assert!(ix.search("kiwi", &bm).unwrap().is_empty());
    assert_eq!(ids(&ix.search("mango", &bm).unwrap()), vec!["user/kiwi"]);
    assert!(ix.remove("user", "kiwi").unwrap());
    assert!(
        ix.search("mango", &SearchOptions::default())
            .unwrap()
            .iter()
            .all(|h| h.id != "kiwi")
    );
    assert!(!ix.remove("user", "kiwi").unwrap());
}

#[test]
fn unchanged_notes_are_never_re_embedded_and_a_model_change_re_embeds_in_background() {
    let dir = tempfile::tempdir().unwrap();
    let config = RecallConfig::new(dir.path());
    let (e, c, n1, _) = counting("model-one", false);
    let ix = RecallIndex::open_with_embedder(&config, e, c, clock()).unwrap();
    let report = ix.upsert(&corpus()).unwrap();
    assert_eq!(report.embedded, 4);
    let first = n1.load(Ordering::SeqCst);
    assert_eq!(
        ix.upsert(&corpus()).unwrap(),
        UpsertReport {
            indexed: 0,
            unchanged: 4,
            embedded: 0
        }
    );
    assert_eq!(n1.load(Ordering::SeqCst), first);
    drop(ix);

    // A new model: everything is re-embedded on a background thread while search works. A
    // search that finds the model busy waits for the batch in hand, then goes before the next
    // one, and searches the vectors there are: never keywords alone for good.
    let (e, c, n2, stall) = counting("model-two", true);
    let ix = RecallIndex::open_with_embedder(&config, e, c, clock()).unwrap();
    assert_eq!(ix.status().pending_embeddings, 4);
    // The background holds the model, stalled inside its first batch.
    let start = std::time::Instant::now();
    while ix.shared.embedder.try_lock().is_ok() && start.elapsed().as_secs() < 10 {
        std::thread::yield_now();
    }
    let hits = std::thread::scope(|s| {
        s.spawn(|| {
            let start = std::time::Instant::now();
            while ix.shared.queries_waiting.load(Ordering::SeqCst) == 0
                && start.elapsed().as_secs() < 10
            {
                std::thread::yield_now();
            }
            stall.store(false, Ordering::SeqCst);
        });
        ix.search("pricing cards fill", &SearchOptions::default())
            .unwrap()
    });
    assert_eq!(ids(&hits)[0], "project:a/pricing");
    assert!(
        hits[0].cosine.is_some(),
        "the search went without the vectors the background had made"
    );
    stall.store(false, Ordering::SeqCst);
    ix.wait_for_vectors();
    assert_eq!(ix.status().documents_with_vectors, 4);
    assert_eq!(ix.status().pending_embeddings, 0);
    assert_eq!(n2.load(Ordering::SeqCst), first);
    drop(ix);

    // Back to the first model: its vectors are still cached.
    let (e, c, n3, _) = counting("model-one", false);
    let ix = RecallIndex::open_with_embedder(&config, e, c, clock()).unwrap();
    ix.wait_for_vectors();
    assert_eq!(n3.load(Ordering::SeqCst), 0);
    assert_eq!(ix.status().documents_with_vectors, 4);
}

#[test]
fn corrupt_lexical_index_is_rebuilt_from_the_documents() {
    let dir = tempfile::tempdir().unwrap();
    {
        let ix = open(dir.path());
        ix.upsert(&corpus()).unwrap();
    }
    let lexical = dir.path().join("lexical");
    for entry in std::fs::read_dir(&lexical).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "idx" || e == "term") {
            std::fs::write(&p, b"garbage").unwrap();
        }
    }
    std::fs::write(lexical.join("meta.json"), b"{not json").unwrap();
    let ix = open(dir.path());
    assert!(ix.status().rebuilt);
    let hits = ix
        .search(
            "spacing scale",
            &SearchOptions {
                mode: Mode::Bm25,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    assert_eq!(ids(&hits)[0], "domain:web/spacing");
}

/// Overwrites the page holding `table`'s root in the SQLite file `path` with bytes no page
/// starts with: the file opens, and reading the table meets the damage.
fn damage_table(path: &Path, table: &str) {
    let (page_size, root): (i64, i64) = {
        let c = rusqlite::Connection::open(path).unwrap();
        let size = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
        let root = c
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap();
        (size, root)
    };
    assert!(root > 1, "the table's root is not the schema's page");
    assert!(!Path::new(&format!("{}-wal", path.display())).exists());
    let mut bytes = std::fs::read(path).unwrap();
    let start = ((root - 1) * page_size) as usize;
    bytes[start..start + page_size as usize].fill(0x5a);
    // Written in place: the same file, as a failing disk or a stray write would leave it.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all(&bytes).unwrap();
}

/// The record of `file`'s last clean integrity check in `dir`, as JSON.
fn check_record(dir: &Path, file: &str) -> Option<serde_json::Value> {
    let bytes = std::fs::read(dir.join(format!("{file}.checked"))).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn set_checked_at(dir: &Path, file: &str, at: u64) {
    let mut r = check_record(dir, file).unwrap();
    r["at"] = at.into();
    std::fs::write(dir.join(format!("{file}.checked")), r.to_string()).unwrap();
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn a_file_checked_clean_is_checked_again_only_after_a_day_or_once_replaced() {
    let dir = tempfile::tempdir().unwrap();
    open(dir.path()).upsert(&corpus()).unwrap();
    for file in ["docs.sqlite", "vectors.sqlite"] {
        assert!(check_record(dir.path(), file).is_some(), "{file}");
    }
    // Checked an hour ago: opening does not check again.
    let hour_ago = now_secs() - 3_600;
    set_checked_at(dir.path(), "docs.sqlite", hour_ago);
    drop(open(dir.path()));
    assert_eq!(
        check_record(dir.path(), "docs.sqlite").unwrap()["at"],
        hour_ago
    );
    // A day and more ago: checked on this open.
    set_checked_at(dir.path(), "docs.sqlite", now_secs() - 25 * 3_600);
    drop(open(dir.path()));
    let at = check_record(dir.path(), "docs.sqlite").unwrap()["at"]
        .as_u64()
        .unwrap();
    assert!(at + 60 > now_secs());
    // Another file in its place (a restore, a copy): checked, though checked within the day.
    set_checked_at(dir.path(), "docs.sqlite", hour_ago);
    let docs = dir.path().join("docs.sqlite");
    std::fs::copy(&docs, dir.path().join("copy")).unwrap();
    std::fs::rename(dir.path().join("copy"), &docs).unwrap();
    let ix = open(dir.path());
    assert_ne!(
        check_record(dir.path(), "docs.sqlite").unwrap()["at"],
        hour_ago
    );
    assert!(!ix.status().rebuilt);
    assert_eq!(ix.status().documents, corpus().len());
}

#[test]
fn a_damaged_page_a_query_meets_has_the_file_checked_and_recreated_on_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    open(dir.path()).upsert(&corpus()).unwrap();
    let path = dir.path().join("docs.sqlite");
    damage_table(&path, "docs");
    // Checked clean within the day: the open does not look, the first read meets the damage.
    let (docs, recreated) = store::DocStore::open(&path).unwrap();
    assert!(!recreated);
    let err = docs.all_meta().unwrap_err();
    assert!(err.is_damage(), "{err}");
    assert!(check_record(dir.path(), "docs.sqlite").is_none());
    drop(docs);
    // The next open checks, and recreates the file: recall holds nothing that cannot be
    // derived again.
    let (docs, recreated) = store::DocStore::open(&path).unwrap();
    assert!(recreated);
    assert_eq!(docs.count().unwrap(), 0);
    assert!(check_record(dir.path(), "docs.sqlite").is_some());
}

#[test]
fn a_page_damaged_between_two_opens_is_found_by_the_next_open_and_the_file_recreated() {
    let dir = tempfile::tempdir().unwrap();
    open(dir.path()).upsert(&corpus()).unwrap();
    damage_table(&dir.path().join("docs.sqlite"), "docs");
    // Loading the documents meets the damage; the index opens all the same, the file
    // recreated, and takes the documents again.
    let ix = open(dir.path());
    assert!(ix.status().rebuilt);
    assert_eq!(ix.status().documents, 0);
    ix.upsert(&corpus()).unwrap();
    let hits = ix
        .search(
            "spacing scale",
            &SearchOptions {
                mode: Mode::Bm25,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    assert_eq!(ids(&hits)[0], "domain:web/spacing");
    assert_eq!(
        store::check_files(dir.path()).unwrap(),
        [
            ("docs.sqlite".to_owned(), "ok".to_owned()),
            ("vectors.sqlite".to_owned(), "ok".to_owned())
        ]
    );
}

#[test]
fn a_full_check_finds_a_damaged_page_whatever_the_last_check_said() {
    let dir = tempfile::tempdir().unwrap();
    open(dir.path()).upsert(&corpus()).unwrap();
    damage_table(&dir.path().join("vectors.sqlite"), "vectors");
    let found = store::check_files(dir.path()).unwrap();
    assert_eq!(found[0], ("docs.sqlite".to_owned(), "ok".to_owned()));
    assert_eq!(found[1].0, "vectors.sqlite");
    assert_ne!(found[1].1, "ok");
    // The next open recreates the cache; the documents are kept.
    let ix = open(dir.path());
    assert_eq!(ix.status().documents, corpus().len());
    assert_eq!(store::check_files(dir.path()).unwrap()[1].1, "ok");
}

#[test]
fn bad_queries_give_an_error_or_nothing_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let ix = open(dir.path());
    ix.upsert(&corpus()).unwrap();
    let o = SearchOptions::default();
    assert!(matches!(ix.search("", &o), Err(Error::EmptyQuery)));
    assert!(matches!(ix.search("  \n\t ", &o), Err(Error::EmptyQuery)));
    assert!(matches!(ix.search("?!…", &o), Err(Error::EmptyQuery)));
    let huge = "pricing ".repeat(100_000 / 8);
    assert!(!ix.search(&huge, &o).unwrap().is_empty());
    let garbage: String = (0..100_000u32)
        .map(|i| char::from_u32((i * 7919) % 0x10FFFF).unwrap_or('\u{FFFD}'))
        .collect();
    let _ = ix.search(&garbage, &o).unwrap();
    let bin = String::from_utf8_lossy(&[0xff, 0x00, 0xfe, 0x41, 0x00]).into_owned();
    let _ = ix.search(&bin, &o);
}

#[test]
fn two_writers_on_one_home_take_turns() {
    let dir = tempfile::tempdir().unwrap();
    let a = Arc::new(open(dir.path()));
    let b = Arc::new(open(dir.path()));
    let threads: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .enumerate()
        .map(|(w, ix)| {
            std::thread::spawn(move || {
                for i in 0..15 {
                    ix.upsert(&[doc(
                        "user",
                        &format!("w{w}-{i}"),
                        "shared topic",
                        "concurrent writer",
                    )])
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Each sees the other's notes (reload on the other's commit).
    let o = SearchOptions {
        mode: Mode::Bm25,
        limit: 100,
        ..SearchOptions::default()
    };
    assert_eq!(a.search("concurrent writer", &o).unwrap().len(), 30);
    assert_eq!(b.search("concurrent writer", &o).unwrap().len(), 30);
}

#[test]
fn recall_block_lists_durable_notes_first_and_fits_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let ix = open(dir.path());
    let mut notes = corpus();
    notes[0].note_type = Some("user".into());
    let mut fb = doc(
        "user",
        "fb",
        "Feedback: keep answers short",
        "Short answers, no preamble.",
    );
    fb.note_type = Some("feedback".into());
    notes.push(fb);
    for i in 0..300 {
        notes.push(doc(
            "project:a",
            &format!("filler-{i}"),
            &format!("Filler note {i} about gardening"),
            "gardening",
        ));
    }
    let notes: Vec<RecallDoc> = notes.into_iter().map(RecallDoc::rehash).collect();
    ix.upsert(&notes).unwrap();
    let opts = RecallOptions {
        visible_scopes: Some(vec!["user".into(), "project:a".into(), "domain:web".into()]),
        budget_chars: None,
        window_tokens: Some(100_000),
        include_archived: false,
    };
    let b = ix
        .recall_block("how are pricing cards separated, fill or borders?", &opts)
        .unwrap();
    assert!(b.text.len() <= 2_400, "{}", b.text.len());
    let user = b.text.find("vt:user/dark-mode").unwrap();
    let feedback = b.text.find("vt:user/fb").unwrap();
    let filler = b.text.find("vt:project/filler").unwrap();
    assert!(user < feedback && feedback < filler, "{}", b.text);
    assert!(b.text.contains("### vt:project/pricing"), "{}", b.text);
    assert!(
        !b.text.contains("pricing-b") && !b.text.contains("project b"),
        "{}",
        b.text
    );
    assert!(b.not_shown > 0 && b.text.contains("more notes not shown"));
    // The recalled note was reinforced.
    let hits = ix
        .search(
            "pricing cards",
            &SearchOptions {
                explain: true,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    let e = hits
        .iter()
        .find(|h| h.id == "pricing")
        .unwrap()
        .explain
        .clone()
        .unwrap();
    assert!(e.access > 1.0);
    // An empty message still gives the index.
    let b = ix.recall_block("", &opts).unwrap();
    assert!(b.text.contains("vt:user/dark-mode"));
}

#[test]
fn another_processs_write_reloads_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(dir.path());
    let docs: Vec<RecallDoc> = (0..50)
        .map(|i| doc("user", &format!("n{i}"), &format!("note {i}"), "a body"))
        .collect();
    a.upsert(&docs).unwrap();
    let b = open(dir.path());
    let o = SearchOptions {
        limit: 100,
        ..SearchOptions::default()
    };
    b.search("note", &o).unwrap();
    let loaded = b.status().vectors_loaded;
    assert_eq!(loaded, 50);
    // Another process records recalls and adds one note: this one reads one vector, not 51.
    a.record_access(&[("user".into(), "n1".into())]).unwrap();
    a.upsert(&[doc("user", "n50", "note 50", "a new body")])
        .unwrap();
    let hits = b.search("note", &o).unwrap();
    assert!(hits.iter().any(|h| h.id == "n50"), "{hits:?}");
    assert_eq!(b.status().vectors_loaded, loaded + 1);
    assert_eq!(b.status().documents_with_vectors, 51);
    // A removal elsewhere drops that document's vectors here.
    a.remove("user", "n3").unwrap();
    b.search("note", &o).unwrap();
    assert_eq!(b.status().documents_with_vectors, 50);
    assert_eq!(b.status().vectors_loaded, loaded + 1);
}

#[test]
fn upsert_later_never_waits_for_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let config = RecallConfig::new(dir.path());
    let (e, c, n, stall) = counting("model-one", true);
    let ix = RecallIndex::open_with_embedder(&config, e, c, clock()).unwrap();
    // The model is stalled: the write returns anyway and the notes are found by their words.
    let report = ix.upsert_later(&corpus()).unwrap();
    assert_eq!((report.indexed, report.embedded), (4, 0));
    let bm25 = SearchOptions {
        mode: Mode::Bm25,
        ..SearchOptions::default()
    };
    let hits = ix.search("pricing cards fill", &bm25).unwrap();
    assert_eq!(ids(&hits)[0], "project:a/pricing");
    assert!(ix.status().pending_embeddings > 0);
    stall.store(false, Ordering::SeqCst);
    ix.wait_for_vectors();
    assert_eq!(ix.status().documents_with_vectors, 4);
    assert_eq!(ix.status().pending_embeddings, 0);
    let embedded = n.load(Ordering::SeqCst);
    assert!(embedded >= 4, "{embedded}");
    // Content seen before takes its cached vectors at once, with nothing to embed.
    let mut moved = corpus()[0].clone();
    moved.scope = "project:b".into();
    ix.upsert_later(&[moved]).unwrap();
    assert_eq!(ix.status().documents_with_vectors, 5);
    assert_eq!(n.load(Ordering::SeqCst), embedded);
}

/// The hash embedder under another model id, taking its time, counting the passages it embeds.
struct Slow {
    passages: Arc<AtomicUsize>,
}

impl Embedder for Slow {
    fn model_id(&self) -> &str {
        "slow-model"
    }
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        std::thread::sleep(std::time::Duration::from_millis(30));
        self.passages.fetch_add(texts.len(), Ordering::SeqCst);
        Ok(texts.iter().map(|t| HashEmbedder::embed(t)).collect())
    }
    fn embed_query(&mut self, text: &str) -> Result<Vec<f32>, Error> {
        Ok(HashEmbedder::embed(text))
    }
}

#[test]
fn two_processes_embedding_one_home_share_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let config = RecallConfig::new(dir.path());
    let open_slow = || {
        let n = Arc::new(AtomicUsize::new(0));
        let choice = EmbedderChoice {
            kind: "hash",
            model_id: "slow-model".into(),
            fallback_reason: None,
        };
        let e = Box::new(Slow {
            passages: Arc::clone(&n),
        });
        (
            RecallIndex::open_with_embedder(&config, e, choice, clock()).unwrap(),
            n,
        )
    };
    // Two indexes on one home stand for two processes: their lock files conflict as two
    // processes' do.
    let (a, na) = open_slow();
    let (b, nb) = open_slow();
    let docs: Vec<RecallDoc> = (0..80)
        .map(|i| doc("user", &format!("n{i}"), &format!("note {i}"), "words"))
        .collect();
    std::thread::scope(|s| {
        s.spawn(|| a.upsert(&docs).unwrap());
        s.spawn(|| b.upsert(&docs).unwrap());
    });
    // Every note was embedded once, by one process or the other.
    let (na, nb) = (na.load(Ordering::SeqCst), nb.load(Ordering::SeqCst));
    assert_eq!(na + nb, 80, "a embedded {na}, b {nb}");
    assert_eq!(a.status().documents_with_vectors, 80);
    assert_eq!(b.status().documents_with_vectors, 80);
}

#[test]
fn the_language_gate_leaves_a_words_only_search_alone() {
    let dir = tempfile::tempdir().unwrap();
    let ix = open(dir.path());
    ix.upsert(&[
        doc(
            "user",
            "eiffel",
            "The Eiffel Tower",
            "The Eiffel Tower in Paris was finished in 1889 and is the tallest structure in the city.",
        ),
        doc(
            "user",
            "louvre",
            "The Louvre",
            "The Louvre in Paris is the most visited museum in the world and holds the Mona Lisa.",
        ),
    ])
    .unwrap();
    let q = "¿En qué año se terminó la Torre Eiffel de París?";
    let bm25 = SearchOptions {
        mode: Mode::Bm25,
        ..SearchOptions::default()
    };
    let hits = ix.search(q, &bm25).unwrap();
    assert_eq!(ids(&hits)[0], "user/eiffel", "{hits:?}");
    assert!(hits[0].score > 0.0, "{hits:?}");
    // In a gated hybrid search the English notes' words do not count for a Spanish question.
    let hybrid = SearchOptions {
        explain: true,
        fusion: Fusion::Gated { vector_weight: 0.7 },
        ..SearchOptions::default()
    };
    let hits = ix.search(q, &hybrid).unwrap();
    assert!(
        hits.iter().filter(|h| h.bm25_rank.is_some()).all(|h| h
            .explain
            .as_ref()
            .unwrap()
            .other_language),
        "{hits:?}"
    );
}

#[test]
fn a_note_too_short_to_tell_takes_the_language_of_the_other_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let ix = open(dir.path());
    ix.upsert(&[
        doc(
            "user",
            "eiffel",
            "The Eiffel Tower",
            "The Eiffel Tower in Paris was finished in 1889 and is the tallest structure in the city.",
        ),
        doc(
            "user",
            "louvre",
            "The Louvre in Paris",
            "The Louvre is the most visited museum in the world and it holds the Mona Lisa.",
        ),
        // No word of these tells their language.
        doc("user", "short", "Eiffel Paris", "Torre 1889"),
        doc("user", "tesla", "Tesla", "died 1943"),
    ])
    .unwrap();
    let gated = SearchOptions {
        explain: true,
        fusion: Fusion::Gated { vector_weight: 0.7 },
        ..SearchOptions::default()
    };
    let foreign = |q: &str| -> Vec<String> {
        let mut out: Vec<String> = ix
            .search(q, &gated)
            .unwrap()
            .into_iter()
            .filter(|h| h.explain.as_ref().unwrap().other_language)
            .map(|h| h.id)
            .collect();
        out.sort();
        out
    };
    // A Spanish question over English notes: the short note is taken to be English too.
    assert_eq!(
        foreign("¿En qué año se terminó la Torre Eiffel de París?"),
        ["eiffel", "short"]
    );
    // The only note the words match cannot tell: most notes are English, so it is taken to be.
    assert_eq!(foreign("¿Cuándo murió Tesla?"), ["tesla"]);
    // An English question: nothing is foreign.
    assert!(foreign("When was the Eiffel Tower in Paris finished?").is_empty());
}

#[test]
fn most_common_is_none_for_a_tie_at_the_top() {
    assert_eq!(most_common([1, 2, 2, 3].into_iter()), Some(2));
    assert_eq!(most_common([1, 1, 2, 2, 3].into_iter()), None);
    assert_eq!(most_common(std::iter::empty::<u8>()), None);
}

/// A message said at `t` (ms), with a word of its own (`zebra{i}`) and a shared one.
fn message(i: usize, t: i64) -> RecallDoc {
    let mut d = doc(
        "user",
        &format!("msg:{i:020}"),
        &format!("Ana · day {i}"),
        &format!("Ana: we talked about zebra{i} and the harbour"),
    );
    d.note_type = Some(MESSAGE_TYPE.into());
    d.updated_at_ms = Some(t);
    d.rehash()
}

fn open_keeping(dir: &Path, resident_messages: usize) -> (RecallIndex, Arc<AtomicUsize>) {
    let mut c = RecallConfig::new(dir);
    c.background_reembed = false;
    c.resident_messages = resident_messages;
    let (e, choice, passages, _) = counting("counting-1", false);
    let ix = RecallIndex::open_with_embedder(&c, e, choice, clock()).unwrap();
    (ix, passages)
}

fn in_memory(ix: &RecallIndex) -> (usize, usize) {
    (
        read(&ix.shared.meta).len(),
        read(&ix.shared.vectors).len_docs(),
    )
}

#[test]
fn only_the_newest_messages_stay_in_memory_and_older_ones_are_found_by_their_words() {
    let dir = tempfile::tempdir().unwrap();
    let (ix, passages) = open_keeping(dir.path(), 4);
    let mut docs: Vec<RecallDoc> = (0..10)
        .map(|i| message(i, 1_700_000_000_000 + i as i64 * 60_000))
        .collect();
    docs.extend(corpus());
    ix.upsert(&docs).unwrap();
    // Every note and the four newest messages; the six older ones are on disk only.
    assert_eq!(in_memory(&ix), (4 + 4, 4 + 4));
    assert_eq!(ix.status().documents, 14);
    assert_eq!(ix.status().documents_with_vectors, 14);
    assert_eq!(ix.indexed_states().unwrap().len(), 14);
    let hybrid = SearchOptions::default();
    for i in [0, 5, 9] {
        let hits = ix.search(&format!("zebra{i}"), &hybrid).unwrap();
        assert_eq!(hits[0].id, format!("msg:{i:020}"), "{hits:?}");
        // Scored by its vector too, read from the cache for an older one.
        assert!(hits[0].cosine.is_some(), "{i}: {hits:?}");
    }
    // The vectors' side alone scans what is in memory: an older message is not there.
    let vector_only = SearchOptions {
        mode: Mode::Vector,
        ..SearchOptions::default()
    };
    let hits = ix.search("zebra0", &vector_only).unwrap();
    assert!(hits.iter().all(|h| h.id != format!("msg:{:020}", 0)));
    // Scope rules hold for what is read from disk.
    let elsewhere = SearchOptions {
        visible_scopes: Some(vec!["project:a".into()]),
        ..SearchOptions::default()
    };
    let hits = ix.search("zebra0", &elsewhere).unwrap();
    assert!(hits.iter().all(|h| h.scope == "project:a"), "{hits:?}");

    // Another process opening the home keeps the same four in memory.
    let (other, _) = open_keeping(dir.path(), 4);
    assert_eq!(in_memory(&other), (8, 8));
    let hits = other.search("zebra1 harbour", &hybrid).unwrap();
    assert_eq!(hits[0].id, format!("msg:{:020}", 1));

    // Re-indexing an older message unchanged embeds nothing; changed, it is indexed anew.
    let embedded = passages.load(Ordering::SeqCst);
    let report = ix.upsert(&[message(2, 1_700_000_120_000)]).unwrap();
    assert_eq!(
        (report.indexed, report.unchanged, report.embedded),
        (0, 1, 0)
    );
    assert_eq!(passages.load(Ordering::SeqCst), embedded);
    let mut edited = message(3, 1_700_000_180_000);
    edited.body = "Ana: we talked about okapi3 instead".into();
    let edited = edited.rehash();
    let report = ix.upsert(&[edited]).unwrap();
    assert_eq!((report.indexed, report.embedded), (1, 1));
    let words = SearchOptions {
        mode: Mode::Bm25,
        ..SearchOptions::default()
    };
    assert!(ix.search("zebra3", &words).unwrap().is_empty());
    assert_eq!(
        ix.search("okapi3", &hybrid).unwrap()[0].id,
        format!("msg:{:020}", 3)
    );
    assert_eq!(ix.status().documents, 14);

    // What the vault no longer holds goes, on disk or in memory.
    let keep: HashSet<(String, String)> = docs
        .iter()
        .filter(|d| d.id != format!("msg:{:020}", 0) && d.id != format!("msg:{:020}", 9))
        .map(|d| (d.scope.clone(), d.id.clone()))
        .collect();
    assert_eq!(ix.retain(&keep).unwrap(), 2);
    assert!(ix.search("zebra0", &words).unwrap().is_empty());
    assert!(ix.search("zebra9", &words).unwrap().is_empty());
    assert_eq!(ix.status().documents, 12);
    assert_eq!(ix.indexed_states().unwrap().len(), 12);
    ix.remove("user", &format!("msg:{:020}", 1)).unwrap();
    assert_eq!(ix.status().documents, 11);
}

#[test]
fn a_message_read_from_disk_scores_as_it_would_in_memory() {
    let (all_dir, few_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let docs: Vec<RecallDoc> = (0..40)
        .map(|i| message(i, 1_700_000_000_000 + i as i64 * 60_000))
        .collect();
    let (all, _) = open_keeping(all_dir.path(), 1_000);
    let (few, _) = open_keeping(few_dir.path(), 5);
    all.upsert(&docs).unwrap();
    few.upsert(&docs).unwrap();
    assert_eq!(in_memory(&all).1, 40);
    assert!(in_memory(&few).1 <= 5 + 5 / 4);
    let opts = SearchOptions {
        explain: true,
        ..SearchOptions::default()
    };
    let (a, f) = (
        all.search("zebra7 harbour", &opts).unwrap(),
        few.search("zebra7 harbour", &opts).unwrap(),
    );
    assert_eq!(a[0].id, f[0].id);
    assert_eq!(a[0].cosine, f[0].cosine, "the same vector, the same cosine");
    let (ea, ef) = (
        a[0].explain.as_ref().unwrap(),
        f[0].explain.as_ref().unwrap(),
    );
    assert_eq!(ea.bm25_rank, ef.bm25_rank);
}

#[test]
fn states_read_from_disk_are_the_states_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let (ix, _) = open_keeping(dir.path(), 2);
    let mut docs: Vec<RecallDoc> = (0..10)
        .map(|i| message(i, 1_700_000_000_000 + i as i64 * 60_000))
        .collect();
    docs[3].trust = Some(Trust::Peer);
    docs[4].importance = Some(1.2);
    docs[5].standing.superseded = true;
    ix.upsert(&docs).unwrap();
    assert!(ix.on_disk() > 0);
    let states: HashMap<(String, String), (String, RankFacts)> = ix
        .indexed_states()
        .unwrap()
        .into_iter()
        .map(|(s, i, h, f)| ((s, i), (h, f)))
        .collect();
    for d in &docs {
        let (h, f) = &states[&(d.scope.clone(), d.id.clone())];
        assert_eq!((h.as_str(), f), (d.hash.as_str(), &d.facts()), "{}", d.id);
    }
}
