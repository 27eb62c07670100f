//! Recall kept in step with a long conversation log: a capture into a home of thousands of
//! messages reads only the messages it added (counted by `Engine::last_recall_sync`, never
//! timed), a process killed while it brings recall in step loses and doubles nothing, and a
//! forgotten conversation leaves recall while what is captured next is found, without the
//! next search comparing every message.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use memoria_engine::api::conversations::{self, CaptureRequest};
use memoria_engine::recall::{Mode, SearchOptions};
use memoria_engine::search::InStepReport;
use memoria_engine::{Engine, OpenOptions};
use memoria_tests::workspace_bin;

/// Messages in the long log: conversations of 50, each message with a word of its own.
const MESSAGES: usize = 3_000;

fn home() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().canonicalize().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    (tmp, home)
}

fn engine(home: &Path) -> Engine {
    Engine::open(OpenOptions::without_model(home)).unwrap()
}

/// The word only message `n` says.
fn word(n: usize) -> String {
    format!("zq{n}x")
}

fn line(conversation: &str, n: usize, text: &str) -> String {
    serde_json::json!({"conversation": conversation, "id": format!("m{n}"),
        "role": if n.is_multiple_of(2) { "user" } else { "assistant" },
        "time": format!("2026-11-{:02}T10:00:00Z", 1 + n % 28), "text": text})
    .to_string()
}

/// The long log's transcript.
fn long_log() -> String {
    (0..MESSAGES)
        .map(|n| {
            line(
                &format!("c{}", n / 50),
                n,
                &format!("we talked about {} today", word(n)),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn capture(e: &Engine, text: &str) {
    conversations::capture_text(e, text, &CaptureRequest::default()).unwrap();
}

/// The message keys recall finds by `word`, by its words alone.
fn found(e: &Engine, word: &str) -> Vec<String> {
    let opts = SearchOptions {
        mode: Mode::Bm25,
        ..SearchOptions::default()
    };
    e.recall()
        .unwrap()
        .search(word, &opts)
        .unwrap()
        .into_iter()
        .map(|h| h.id)
        .filter(|id| memoria_engine::said::is_message_key(id))
        .collect()
}

/// Recall finds message `n` of conversation `conversation` by its word, once, and no message
/// twice. (The next message of its conversation is found too: it is read with the end of the
/// one before it.)
fn found_once(e: &Engine, conversation: &str, n: usize) {
    let key = memoria_engine::log::message_key("user", conversation, &format!("m{n}"));
    let hits = found(e, &word(n));
    assert_eq!(
        hits.iter().filter(|h| **h == key).count(),
        1,
        "message {n}: {hits:?}"
    );
    let mut unique = hits.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), hits.len(), "{hits:?}");
}

/// Recall holds exactly the log's recallable messages.
fn in_step_with_the_log(e: &Engine) {
    let recall = e.recall().unwrap().message_count().unwrap();
    let log = e.log().unwrap().state().unwrap().count as usize;
    assert_eq!(recall, log, "messages in recall and in the log");
}

#[test]
fn a_one_message_capture_into_a_long_log_reads_only_that_message() {
    let (_tmp, home) = home();
    let e = engine(&home);
    e.recall().unwrap();
    capture(&e, &long_log());
    let first = e.last_recall_sync().unwrap();
    assert_eq!(first.log_messages, MESSAGES, "{first:?}");

    capture(
        &e,
        &line("c0", MESSAGES, "the ferry to the island leaves at noon"),
    );
    assert_eq!(
        e.last_recall_sync().unwrap(),
        InStepReport {
            log_messages: 1,
            message_states: 0,
            journal_messages: 0,
            all_messages: false
        }
    );
    assert_eq!(found(&e, "ferry").len(), 1);
    in_step_with_the_log(&e);

    // The hook's one-shot process, the next command: the same, from the watermark the last
    // process left beside the recall index.
    drop(e);
    let e = engine(&home);
    e.recall().unwrap();
    capture(
        &e,
        &line("c1", MESSAGES + 1, "the lighthouse keeper called back"),
    );
    let report = e.last_recall_sync().unwrap();
    assert_eq!(
        (report.log_messages, report.all_messages),
        (1, false),
        "{report:?}"
    );
    assert!(report.message_states <= 1, "{report:?}");
    assert_eq!(found(&e, "lighthouse").len(), 1);
    in_step_with_the_log(&e);
}

/// Runs `memoria` on `home` and kills it after `after`; true when it ended by itself first.
fn killed_after(home: &Path, args: &[&str], after: Duration) -> bool {
    let mut child = Command::new(workspace_bin("memoria"))
        .env("MEMORIA_HOME", home)
        .env("MEMORIA_MODEL_DIR", home.join("no-model"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let done = child.try_wait().unwrap().is_some();
    if !done {
        child.kill().unwrap();
    }
    child.wait().unwrap();
    done
}

#[test]
fn a_process_killed_while_it_brings_recall_in_step_loses_and_doubles_nothing() {
    let (_tmp, home) = home();
    let file = home.join("long.jsonl");
    let mut text = long_log();
    std::fs::write(&file, &text).unwrap();
    // Captured without recall (the command does not open it): the next search brings the
    // whole log in, and is killed at several points on the way.
    let capture = Command::new(workspace_bin("memoria"))
        .env("MEMORIA_HOME", &home)
        .args(["capture", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(capture.status.success(), "{capture:?}");
    let mut killed = 0;
    // Kills from early in a search to late in its comparison of the whole log: the first
    // lands while any search is still starting.
    for (round, ms) in [50u64, 150, 400, 800, 1_500, 3_000].into_iter().enumerate() {
        if !killed_after(&home, &["search", "talked"], Duration::from_millis(ms)) {
            killed += 1;
        }
        // More said between kills: each search has new messages to bring in.
        let n = MESSAGES + round;
        text.push('\n');
        text.push_str(&line("late", n, &format!("and later {}", word(n))));
        std::fs::write(&file, &text).unwrap();
        let out = Command::new(workspace_bin("memoria"))
            .env("MEMORIA_HOME", &home)
            .args(["capture", file.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    assert!(killed >= 1, "every search ended before it was killed");
    let e = engine(&home);
    in_step_with_the_log(&e);
    for n in [0, 1, MESSAGES / 2, MESSAGES - 1] {
        found_once(&e, &format!("c{}", n / 50), n);
    }
    for n in [MESSAGES, MESSAGES + 5] {
        found_once(&e, "late", n);
    }
}

#[test]
fn a_forgotten_conversation_leaves_recall_and_what_comes_next_is_found() {
    let (_tmp, home) = home();
    let e = engine(&home);
    e.recall().unwrap();
    capture(&e, &long_log());
    found_once(&e, "c1", 60);
    conversations::forget(&e, "c1", None).unwrap();
    assert!(found(&e, &word(60)).is_empty());
    // The search after the forget applied it by the log's journal of removed messages.
    let report = e.last_recall_sync().unwrap();
    assert_eq!(
        (
            report.all_messages,
            report.journal_messages,
            report.log_messages
        ),
        (false, 50, 0),
        "{report:?}"
    );
    in_step_with_the_log(&e);

    // The next process, from the watermark: a forget there, then a search.
    drop(e);
    let e = engine(&home);
    conversations::forget(&e, "c3", None).unwrap();
    assert!(found(&e, &word(150)).is_empty());
    let report = e.last_recall_sync().unwrap();
    assert_eq!(
        (report.all_messages, report.journal_messages),
        (false, 50),
        "{report:?}"
    );
    assert!(report.message_states <= 50, "{report:?}");
    for n in [175, 199] {
        assert!(found(&e, &word(n)).is_empty(), "message {n}");
    }
    found_once(&e, "c4", 200);
    in_step_with_the_log(&e);

    capture(&e, &line("c2", MESSAGES, "the orchard needs water"));
    let report = e.last_recall_sync().unwrap();
    assert_eq!(
        (report.log_messages, report.all_messages),
        (1, false),
        "{report:?}"
    );
    assert_eq!(found(&e, "orchard").len(), 1);
    assert!(found(&e, &word(60)).is_empty());
    found_once(&e, "c2", 100);
    in_step_with_the_log(&e);
}
