//! Read latency of a session while it writes: `list` and a BM25 search on one thread while
//! another imports 5,000 notes, then while a new session loads the embedding model for the
//! first time (when one is installed) and gives the notes their vectors.
//!
//! `cargo bench -p memoria-engine --bench session_reads` (release). The model comes from
//! `MEMORIA_TEST_MODEL_DIR`, else `~/.cache/memoria/models/e5-small-int8`; without one the
//! model phases are skipped. `MEMORIA_BENCH_NOTES` changes the import's size.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use memoria_engine::recall::{Mode, SearchOptions};
use memoria_engine::vault::Limits;
use memoria_engine::{Event, NewNote, OpenOptions, ScopeChoice, Session, SessionOptions};

fn options(home: &Path, model_dir: PathBuf) -> SessionOptions {
    let mut o = SessionOptions::new(OpenOptions {
        home: Some(home.to_path_buf()),
        model_dir: Some(model_dir),
        limits: Limits {
            notes_per_scope: 100_000,
            ..Limits::default()
        },
        ..Default::default()
    });
    o.sync = false;
    o
}

/// Latencies of one kind of read.
#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let out = f();
        self.0.push(t.elapsed());
        out
    }

    fn row(&mut self, phase: &str, read: &str) {
        if self.0.is_empty() {
            println!("| {phase} | {read} | 0 | – | – | – |");
            return;
        }
        self.0.sort();
        let at = |q: f64| self.0[((self.0.len() - 1) as f64 * q).round() as usize];
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1000.0);
        println!(
            "| {phase} | {read} | {} | {} | {} | {} |",
            self.0.len(),
            ms(at(0.5)),
            ms(at(0.95)),
            ms(*self.0.last().unwrap())
        );
    }
}

/// Reads on this thread until `busy` turns false: list, BM25 search, and (with `hybrid`) a
/// hybrid search.
fn read_while(session: &Session, busy: &AtomicBool, hybrid: bool) -> (Samples, Samples, Samples) {
    let reads = session.reads();
    let (mut list, mut bm25, mut both) =
        (Samples::default(), Samples::default(), Samples::default());
    let bm25_opts = SearchOptions {
        mode: Mode::Bm25,
        ..Default::default()
    };
    let mut i = 0usize;
    while busy.load(Ordering::SeqCst) {
        i += 1;
        list.time(|| reads.list(None, None, None).expect("list"));
        let q = format!("harbour ledger entry {}", (i * 7919) % 5_000);
        bm25.time(|| reads.search(&q, bm25_opts.clone()).expect("bm25"));
        if hybrid {
            both.time(|| reads.search(&q, SearchOptions::default()).expect("hybrid"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    (list, bm25, both)
}

fn model_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MEMORIA_TEST_MODEL_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/memoria/models/e5-small-int8"))
        })?;
    dir.join("model.onnx").exists().then_some(dir)
}

fn main() {
    let notes: usize = std::env::var("MEMORIA_BENCH_NOTES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5_000);
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path().canonicalize().expect("temp dir");
    let home = root.join("home");
    let src = root.join("source");
    std::fs::create_dir_all(&src).expect("source folder");
    for i in 0..notes {
        std::fs::write(
            src.join(format!("imported-{i:05}.md")),
            format!(
                "# Imported note {i}\nThe harbour ledger entry {i} mentions the tides, the \
                 moorings and the cargo of ship {}.\n",
                i % 97
            ),
        )
        .expect("source file");
    }
    println!("| phase | read | n | p50 ms | p95 ms | max ms |");
    println!("|---|---|---:|---:|---:|---:|");

    // An import into a session without a model (its indexer embeds with the hash embedder).
    let session = Session::start(options(&home, root.join("no-model"))).expect("session");
    session
        .write(|e| {
            e.add(NewNote {
                id: Some("anchor".into()),
                summary: "The anchor note".into(),
                body: "harbour ledger anchor".into(),
                scope: Some(ScopeChoice::User),
                ..Default::default()
            })
        })
        .expect("anchor note");
    let busy = AtomicBool::new(true);
    let started = Instant::now();
    let ((mut list, mut bm25, _), import_took) = std::thread::scope(|s| {
        let import = s.spawn(|| {
            let r = session.import(&src, Some(ScopeChoice::User));
            let took = started.elapsed();
            busy.store(false, Ordering::SeqCst);
            (r, took)
        });
        let samples = read_while(&session, &busy, false);
        let (r, took) = import.join().expect("import thread");
        r.expect("import");
        (samples, took)
    });
    let phase = format!("import of {notes} notes");
    list.row(&phase, "list (all notes)");
    bm25.row(&phase, "BM25 search");
    session.shutdown();

    // The first model load, then the vectors of every note, in a new session.
    let Some(model) = model_dir() else {
        println!("\nimport took {import_took:.1?}; no model installed: model phases skipped");
        return;
    };
    let loading = AtomicBool::new(true);
    let embedding = AtomicBool::new(true);
    let finished = AtomicBool::new(false);
    let (session, events) =
        Session::start_subscribed(options(&home, model)).expect("session with the model");
    let load_started = Instant::now();
    let reading = AtomicBool::new(true);
    let (loading, embedding, finished) = (&loading, &embedding, &finished);
    let (load, embed, load_took) = std::thread::scope(|s| {
        let watcher = s.spawn(move || {
            let mut load_took = None;
            while !finished.load(Ordering::SeqCst) {
                match events.recv_timeout(Duration::from_millis(100)) {
                    Ok(Event::ModelLoaded { .. } | Event::ModelFallback { .. }) => {
                        load_took = Some(load_started.elapsed());
                        loading.store(false, Ordering::SeqCst);
                    }
                    Ok(Event::IndexProgress { done, total, .. })
                        if done == total && load_took.is_some() =>
                    {
                        embedding.store(false, Ordering::SeqCst);
                    }
                    _ => {}
                }
            }
            loading.store(false, Ordering::SeqCst);
            load_took
        });
        let load = read_while(&session, loading, true);
        // Embedding every note runs for minutes with a real model: measure a bounded stretch.
        let reading = &reading;
        let timer = s.spawn(move || {
            let until = Instant::now() + Duration::from_secs(30);
            while Instant::now() < until && embedding.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(50));
            }
            reading.store(false, Ordering::SeqCst);
        });
        let during = read_while(&session, reading, true);
        timer.join().expect("timer");
        finished.store(true, Ordering::SeqCst);
        (load, during, watcher.join().expect("event thread"))
    });
    let (mut list, mut bm25, mut hybrid) = load;
    list.row("first model load", "list (all notes)");
    bm25.row("first model load", "BM25 search");
    hybrid.row("first model load", "hybrid search (lexical until loaded)");
    let (mut list, mut bm25, mut hybrid) = embed;
    list.row("embedding after the load (30 s)", "list (all notes)");
    bm25.row("embedding after the load (30 s)", "BM25 search");
    hybrid.row("embedding after the load (30 s)", "hybrid search");
    drop(session);
    println!("\nimport took {import_took:.1?}; model load took {load_took:.1?}");
}
