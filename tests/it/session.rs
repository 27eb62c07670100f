//! The long-running session: notes written by other processes and editors arrive as events, a
//! sync pass against the real `memoria-sync` reports its start and end, reads complete while a
//! 5,000-note import runs on another thread, and shutdown ends every thread it started.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use memoria_engine::recall::{Mode, SearchOptions};
use memoria_engine::session::IndexTask;
use memoria_engine::vault::Limits;
use memoria_engine::{Event, NewNote, OpenOptions, ScopeChoice, Session, SessionOptions};
use memoria_tests::sync_fixture::{Backend, Device};

/// How long any one event may take to arrive before the test gives up.
const PATIENCE: Duration = Duration::from_secs(30);

fn options(home: &Path) -> SessionOptions {
    let mut o = SessionOptions::new(OpenOptions {
        project_dir: None,
        limits: Limits {
            notes_per_scope: 10_000,
            ..Limits::default()
        },
        ..OpenOptions::without_model(home)
    });
    o.sync = false;
    o
}

/// The first event `want` accepts, within [`PATIENCE`]; the events before it are returned too.
fn expect(rx: &Receiver<Event>, what: &str, want: impl Fn(&Event) -> bool) -> (Event, Vec<Event>) {
    let deadline = Instant::now() + PATIENCE;
    let mut before = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(e) if want(&e) => return (e, before),
            Ok(e) => before.push(e),
            Err(_) => panic!("no {what} within {PATIENCE:?}; saw {before:?}"),
        }
    }
}

fn user_dir(home: &Path) -> PathBuf {
    home.join("memory/user")
}

fn home() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().canonicalize().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    (tmp, home)
}

#[test]
fn a_note_written_by_another_process_arrives_as_an_event() {
    let (_tmp, home) = home();
    let session = Session::start(options(&home)).unwrap();
    let events = session.subscribe();
    let other = Device::new(home.clone(), "");
    other.add("from-elsewhere", "Written by another process", "hello");
    expect(&events, "event for the other process's note", |e| {
        *e == Event::NoteAdded {
            scope: "user".into(),
            id: "from-elsewhere".into(),
        }
    });
    // The read handle sees it, and so does a search once the indexer has run.
    let reads = session.reads();
    assert_eq!(
        reads.show("from-elsewhere", None).unwrap().indexed.summary,
        "Written by another process"
    );
    session.shutdown();
}

#[test]
fn a_note_edited_in_place_and_one_removed_arrive_as_events() {
    let (_tmp, home) = home();
    let dir = user_dir(&home);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("keep.md"), "# Keep\nfirst text\n").unwrap();
    std::fs::write(dir.join("drop.md"), "# Drop\ngoing away\n").unwrap();
    let session = Session::start(options(&home)).unwrap();
    let events = session.subscribe();
    // An editor rewrites one in place and deletes the other.
    std::fs::write(dir.join("keep.md"), "# Keep\nsecond, longer text\n").unwrap();
    expect(&events, "the edit", |e| {
        *e == Event::NoteChanged {
            scope: "user".into(),
            id: "keep".into(),
        }
    });
    std::fs::remove_file(dir.join("drop.md")).unwrap();
    expect(&events, "the removal", |e| {
        *e == Event::NoteRemoved {
            scope: "user".into(),
            id: "drop".into(),
        }
    });
    // A write through the session itself arrives too.
    session
        .write(|e| {
            e.add(NewNote {
                id: Some("mine".into()),
                summary: "Written through the session".into(),
                body: "x".into(),
                scope: Some(ScopeChoice::User),
                ..Default::default()
            })
        })
        .unwrap();
    expect(&events, "the session's own write", |e| {
        *e == Event::NoteAdded {
            scope: "user".into(),
            id: "mine".into(),
        }
    });
    session.shutdown();
}

#[test]
fn the_model_load_reports_the_fallback_to_a_subscriber_that_came_late() {
    let (_tmp, home) = home();
    let mut session = Session::start(options(&home)).unwrap();
    session.wait_for_model();
    // Subscribed after the load ended: the model's state is told first.
    let events = session.subscribe();
    let (e, _) = expect(&events, "the model's state", |e| {
        matches!(e, Event::ModelFallback { .. } | Event::ModelLoaded { .. })
    });
    assert!(
        matches!(&e, Event::ModelFallback { reason } if !reason.is_empty()),
        "{e:?}"
    );
}

#[test]
fn a_sync_pass_reports_started_and_finished_with_its_report() {
    let w = crate::sync_e2e::world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let d = w.device("a", &token);
    // Written by an editor, so only the session's pass can upload it.
    std::fs::create_dir_all(user_dir(&d.home)).unwrap();
    std::fs::write(user_dir(&d.home).join("to-upload.md"), "# Goes up\nup\n").unwrap();
    let mut opts = options(&d.home);
    opts.sync = true;
    opts.sync_token = Some(token.clone());
    // Subscribed from the start: the schedule's first pass runs at once.
    let (session, events) = Session::start_subscribed(opts).unwrap();
    expect(&events, "a sync pass starting", |e| {
        *e == Event::SyncStarted {
            scope: "user".into(),
        }
    });
    let (finished, _) = expect(
        &events,
        "the pass's end",
        |e| matches!(e, Event::SyncFinished { scope, .. } if scope == "user"),
    );
    let Event::SyncFinished { report, error, .. } = finished else {
        unreachable!()
    };
    assert_eq!(error, None);
    let report = report.expect("a report");
    assert_eq!(
        (report.scope.as_str(), report.uploaded),
        ("user", 1),
        "{report:?}"
    );
    // It reached the real server: another device gets it.
    let b = w.device("b", &token);
    b.ok(&["sync", "now"]);
    assert!(b.note("to-upload").is_some());
    session.shutdown();
}

/// Markdown files for an import: `n` notes in a folder of their own.
fn import_source(root: &Path, n: usize) -> PathBuf {
    let src = root.join("import-source");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..n {
        std::fs::write(
            src.join(format!("imported-{i:05}.md")),
            format!("# Imported note {i}\nThe harbour ledger entry number {i} mentions tides.\n"),
        )
        .unwrap();
    }
    src
}

#[test]
fn list_show_and_bm25_search_complete_while_a_5000_note_import_runs() {
    let (tmp, home) = home();
    let src = import_source(tmp.path(), 5_000);
    let session = Session::start(options(&home)).unwrap();
    session
        .write(|e| {
            e.add(NewNote {
                id: Some("anchor".into()),
                summary: "The anchor note about lighthouses".into(),
                body: "lighthouse keepers log".into(),
                scope: Some(ScopeChoice::User),
                ..Default::default()
            })
        })
        .unwrap();
    let events = session.subscribe();
    let reads = session.reads();
    let done = AtomicBool::new(false);
    let bm25 = SearchOptions {
        mode: Mode::Bm25,
        ..Default::default()
    };
    let mut seen = Vec::new();
    let (report, rounds_during) = std::thread::scope(|s| {
        let import = s.spawn(|| {
            let r = session.import(&src, Some(ScopeChoice::User));
            done.store(true, Ordering::SeqCst);
            r
        });
        // Reads that finished while the import had written part of its notes.
        let mut during = 0;
        while !done.load(Ordering::SeqCst) {
            // A subscriber that keeps up (the watcher's note events alone would fill a queue).
            seen.extend(events.try_iter());
            let listed = reads.list(None, None, None).unwrap().len();
            let shown = reads.show("anchor", None).unwrap();
            let hits = reads.search("lighthouse", bm25.clone()).unwrap();
            if !done.load(Ordering::SeqCst) && listed > 1 && listed < 5_001 {
                assert_eq!(shown.indexed.id, "anchor");
                assert_eq!(hits.first().map(|h| h.id.as_str()), Some("anchor"));
                during += 1;
            }
        }
        (import.join().unwrap().unwrap(), during)
    });
    assert_eq!(report.added, 5_000, "{report:?}");
    assert!(
        rounds_during >= 1,
        "no read finished while the import was part way"
    );
    // The import reported its progress, to the end.
    seen.extend(events.try_iter());
    let progress: Vec<Event> = seen
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                Event::IndexProgress {
                    task: IndexTask::Import,
                    ..
                }
            )
        })
        .collect();
    assert!(progress.len() > 2, "{progress:?}");
    assert_eq!(
        progress.last(),
        Some(&Event::IndexProgress {
            task: IndexTask::Import,
            done: 5_000,
            total: 5_000
        })
    );
    // When `import` returned, search sees what it wrote.
    let hits = reads.search("harbour ledger 4999", bm25).unwrap();
    assert!(hits.iter().any(|h| h.id == "imported-04999"), "{hits:?}");
    session.shutdown();
}

/// Names of this process's threads (Linux).
/// With the real model, the notes an import brings are embedded in the background, and the
/// embedding's progress reaches subscribers to its end; every note then has its vectors.
#[test]
fn background_embedding_reports_its_progress_to_the_end() {
    let (tmp, home) = home();
    let src = import_source(tmp.path(), 24);
    let mut opts = options(&home);
    opts.open.model_dir = Some(memoria_tests::test_model_dir());
    let mut session = Session::start(opts).unwrap();
    session.wait_for_model();
    let events = session.subscribe();
    let report = session.import(&src, Some(ScopeChoice::User)).unwrap();
    assert_eq!(report.added, 24, "{report:?}");
    let (last, _) = expect(
        &events,
        "the embedding's last progress",
        |e| matches!(e, Event::IndexProgress { task: IndexTask::Embedding, done, total } if done == total && *total > 0),
    );
    let Event::IndexProgress { total, .. } = last else {
        unreachable!()
    };
    assert!(total >= 1, "{last:?}");
    let card = memoria_engine::api::card::card(session.reads().engine()).unwrap();
    assert!(card.semantic, "{card:?}");
    assert_eq!(card.notes, 24, "{card:?}");
    assert_eq!(card.notes_with_vectors, 24, "{card:?}");
    assert_eq!(card.pending_vectors, 0, "{card:?}");
    session.shutdown();
}

fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_owned())
        .collect()
}

#[test]
fn shutdown_ends_the_watcher_sync_indexer_and_model_threads() {
    let (_tmp, home) = home();
    let mut opts = options(&home);
    opts.sync = true;
    let mut session = Session::start(opts).unwrap();
    session.wait_for_model();
    let ours = ["memoria-watch", "memoria-sync", "memoria-index"];
    // A new thread names itself once it runs: until then it has its parent's name.
    let started = std::time::Instant::now();
    loop {
        let names = thread_names();
        let missing: Vec<&str> = ours
            .into_iter()
            .filter(|t| !names.iter().any(|n| n == t))
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "{missing:?} not running: {names:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        session.shutdown();
        let _ = tx.send(());
    });
    rx.recv_timeout(PATIENCE)
        .expect("shutdown did not return in time");
    let names = thread_names();
    for t in ours.iter().chain(&["memoria-model"]) {
        assert!(!names.iter().any(|n| n == t), "{t} still runs: {names:?}");
    }
    // The watcher let go of its scope: a new session can take it.
    let again = Session::start(options(&home)).unwrap();
    assert_eq!(again.watched().len(), 1);
}

#[test]
fn a_conversation_another_program_captured_is_found_by_the_session_within_seconds() {
    let (_tmp, home) = home();
    let session = Session::start(options(&home)).unwrap();
    // The hook or the CLI, in another process: it never opens the recall index.
    let transcript = home.join("chat.jsonl");
    std::fs::write(
        &transcript,
        "{\"conversation\":\"c1\",\"role\":\"user\",\"text\":\"the kayak rental opens at seven\"}\n",
    )
    .unwrap();
    let other = Device::new(home.clone(), "");
    other.ok(&["capture", transcript.to_str().unwrap()]);
    let reads = session.reads();
    let opts = SearchOptions {
        mode: Mode::Bm25,
        ..Default::default()
    };
    let deadline = Instant::now() + PATIENCE;
    loop {
        let hits = reads.search("kayak rental", opts.clone()).unwrap();
        if hits.iter().any(|h| h.id.starts_with("msg:")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the captured message never reached the session's search"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    session.shutdown();
}
