//! The review queue and merging on crafted vaults: every finding kind, dismissals that come
//! back after an edit, merges with their links, backups and refusals.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memoria_shared::FixedClock;

use super::merge::{DraftKind, merge_apply, merge_plan};
use super::*;
use crate::project::Project;
use crate::vault::{NewNote, NoteEdit, OpenOptions, ScopeChoice};
use crate::{Engine, ErrorCode};

const T0: i64 = 1_789_000_000_000;
const DAY: i64 = 86_400_000;

struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    clock: Arc<FixedClock>,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        World {
            root: tmp.path().canonicalize().unwrap(),
            _tmp: tmp,
            clock: Arc::new(FixedClock::new(T0)),
        }
    }

    fn engine(&self, project: Option<&Path>) -> Engine {
        Engine::open(OpenOptions {
            home: Some(self.root.join("home")),
            project_dir: project.map(Path::to_path_buf),
            clock: self.clock.clone(),
            // No model in unit tests: recall uses its deterministic hash embedder.
            model_dir: Some(self.root.join("no-model")),
            ..Default::default()
        })
        .unwrap()
    }

    fn project(&self) -> PathBuf {
        Project::init(&self.root.join("proj"), None).unwrap().root
    }
}

fn add(e: &mut Engine, id: &str, summary: &str, body: &str) {
    e.add(NewNote {
        id: Some(id.into()),
        summary: summary.into(),
        body: body.into(),
        scope: Some(ScopeChoice::User),
        ..Default::default()
    })
    .unwrap();
}

fn review_all(e: &Engine) -> Review {
    super::review(e, &e.visible_scopes(), UNUSED_DAYS, false).unwrap()
}

fn of_kind(r: &Review, kind: FindingKind) -> Vec<&Finding> {
    r.findings.iter().filter(|f| f.kind() == kind).collect()
}

fn ids(f: &Finding) -> Vec<&str> {
    f.notes.iter().map(|n| n.id.as_str()).collect()
}

const PRICING: &str = "Pricing cards on the landing page use filled backgrounds, never borders; \
    the highlighted plan gets the accent colour and a badge saying popular.";
const PRICING_AGAIN: &str = "The landing page pricing cards use filled backgrounds and never \
    borders; the highlighted plan gets the accent colour with a popular badge.";
const DEPLOY: &str = "Deploys go out on Tuesdays after the staging smoke tests pass; rollbacks \
    use the previous container tag.";

#[test]
fn same_topic_groups_rewordings_and_keeps_its_id_across_runs() {
    let w = World::new();
    let mut e = w.engine(None);
    add(&mut e, "pricing", "Pricing cards", PRICING);
    add(&mut e, "deploys", "Deploy days", DEPLOY);
    add(&mut e, "pricing-2", "Pricing cards look", PRICING_AGAIN);
    let r = review_all(&e);
    let topic = of_kind(&r, FindingKind::SameTopic);
    assert_eq!(topic.len(), 1, "{:#?}", r.findings);
    assert_eq!(ids(topic[0]), ["pricing", "pricing-2"]);
    assert!(topic[0].id.starts_with("topic-"));
    assert_eq!(
        topic[0].id,
        finding_id(
            FindingKind::SameTopic,
            &[
                ("user".into(), "pricing-2".into()),
                ("user".into(), "pricing".into())
            ]
        )
    );
    let again = review_all(&w.engine(None));
    assert_eq!(of_kind(&again, FindingKind::SameTopic)[0].id, topic[0].id);
    assert!(!r.vectors, "no model has run, so no vectors");
}

#[test]
fn a_link_to_no_visible_note_is_broken_and_a_link_by_file_name_is_not() {
    let w = World::new();
    let mut e = w.engine(None);
    add(&mut e, "target", "The target", "text");
    add(
        &mut e,
        "linker",
        "Links",
        "See [[target]], [[Target|the same]], [[gone-note]] and `[[in-code]]`.",
    );
    let r = review_all(&e);
    let broken = of_kind(&r, FindingKind::BrokenLink);
    assert_eq!(broken.len(), 1);
    assert_eq!(ids(broken[0]), ["linker"]);
    assert_eq!(
        broken[0].detail,
        FindingDetail::BrokenLink {
            targets: vec!["gone-note".into()]
        }
    );
}

#[test]
fn a_project_note_naming_a_path_not_in_the_project_is_a_missing_file() {
    let w = World::new();
    let root = w.project();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/main.rs"), "fn main() {}").unwrap();
    let mut e = w.engine(Some(&root));
    e.add(NewNote {
        id: Some("layout".into()),
        summary: "Where things are".into(),
        body: "Entry point `src/main.rs`; design notes in [the doc](../docs/design.md).".into(),
        scope: Some(ScopeChoice::Project),
        ..Default::default()
    })
    .unwrap();
    // A user note is not about this project's files.
    add(&mut e, "elsewhere", "Other", "See `docs/design.md`.");
    let r = review_all(&e);
    let missing = of_kind(&r, FindingKind::MissingFile);
    assert_eq!(missing.len(), 1, "{:#?}", r.findings);
    assert_eq!(ids(missing[0]), ["layout"]);
    assert_eq!(
        missing[0].detail,
        FindingDetail::MissingFile {
            paths: vec!["../docs/design.md".into()]
        }
    );
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/design.md"), "# Design").unwrap();
    assert!(of_kind(&review_all(&e), FindingKind::MissingFile).is_empty());
}

#[test]
fn a_note_neither_opened_recalled_nor_edited_for_the_threshold_is_unused() {
    let w = World::new();
    let mut e = w.engine(None);
    add(
        &mut e,
        "old",
        "Old fact",
        "The staging database is called tern.",
    );
    add(
        &mut e,
        "read",
        "Read fact",
        "The build cache lives on the shared volume.",
    );
    add(
        &mut e,
        "recalled",
        "Recalled fact",
        "Quokka releases are cut on Fridays.",
    );
    // Recall sees the notes when they are written (as a session's indexer does).
    e.hybrid_search("fact", crate::recall::SearchOptions::default())
        .unwrap();
    w.clock.set(T0 + 89 * DAY);
    assert!(of_kind(&review_all(&e), FindingKind::Unused).is_empty());
    e.show("read", None).unwrap();
    let block = e
        .recall_block("when are quokka releases cut", None, None)
        .unwrap();
    assert!(block.text.contains("Fridays"), "{}", block.text);
    w.clock.set(T0 + 91 * DAY);
    let r = review_all(&e);
    let unused = of_kind(&r, FindingKind::Unused);
    assert_eq!(unused.len(), 1, "{:#?}", r.findings);
    assert_eq!(ids(unused[0]), ["old"]);
    assert!(matches!(
        unused[0].detail,
        FindingDetail::Unused {
            idle_days: 91,
            unused_days: 90,
            ..
        }
    ));
    // A shorter threshold from the settings.
    crate::config::set(e.home(), "review.unusedDays", Some("1")).unwrap();
    let r = crate::api::hygiene::review(&e, &Default::default()).unwrap();
    assert_eq!(of_kind(&r, FindingKind::Unused).len(), 3);
}

#[test]
fn a_body_over_eight_thousand_characters_is_too_long() {
    let w = World::new();
    let mut e = w.engine(None);
    add(
        &mut e,
        "at-limit",
        "At the limit",
        &"é".repeat(TOO_LONG_CHARS - 1),
    );
    add(
        &mut e,
        "over",
        "Over the limit",
        &"é".repeat(TOO_LONG_CHARS + 1),
    );
    let r = review_all(&e);
    let long = of_kind(&r, FindingKind::TooLong);
    assert_eq!(long.len(), 1);
    assert_eq!(ids(long[0]), ["over"]);
    // The body as written ends with a newline: the limit counts characters, not bytes.
    assert_eq!(
        long[0].detail,
        FindingDetail::TooLong {
            chars: TOO_LONG_CHARS + 2,
            limit: TOO_LONG_CHARS
        }
    );
}

#[test]
fn a_dismissal_holds_until_one_of_its_notes_is_edited() {
    let w = World::new();
    let mut e = w.engine(None);
    add(&mut e, "pricing", "Pricing cards", PRICING);
    add(&mut e, "pricing-2", "Pricing cards look", PRICING_AGAIN);
    add(
        &mut e,
        "other",
        "Unrelated",
        "Nothing alike [[missing-one]].",
    );
    let before = review_all(&e);
    let topic = of_kind(&before, FindingKind::SameTopic)[0].clone();
    let d = super::dismiss(&e, &e.visible_scopes(), &topic.id).unwrap();
    assert_eq!(d.notes.len(), 2);
    let r = review_all(&e);
    assert!(of_kind(&r, FindingKind::SameTopic).is_empty());
    assert_eq!(r.dismissed, 1);
    assert_eq!(of_kind(&r, FindingKind::BrokenLink).len(), 1, "others stay");
    let all = super::review(&e, &e.visible_scopes(), UNUSED_DAYS, true).unwrap();
    assert_eq!(of_kind(&all, FindingKind::SameTopic).len(), 1);
    // Another process sees the dismissal: it is kept in the home.
    assert!(of_kind(&review_all(&w.engine(None)), FindingKind::SameTopic).is_empty());
    e.edit(
        "pricing-2",
        None,
        NoteEdit {
            body: Some(format!("{PRICING_AGAIN} Checked in March.")),
            ..Default::default()
        },
    )
    .unwrap();
    let r = review_all(&e);
    let back = of_kind(&r, FindingKind::SameTopic);
    assert_eq!(back.len(), 1, "the edit brings it back");
    assert_eq!(back[0].id, topic.id);
    assert_eq!(r.dismissed, 0);
}

#[test]
fn dismissing_an_unknown_finding_is_not_found() {
    let w = World::new();
    let e = w.engine(None);
    let err = super::dismiss(&e, &e.visible_scopes(), "topic-000000000000").unwrap_err();
    assert_eq!(err.code(), ErrorCode::NotFound);
    assert!(err.to_string().contains("topic-000000000000"), "{err}");
}

fn body_of(e: &Engine, id: &str) -> String {
    e.show(id, None).unwrap().note.unwrap().body
}

#[test]
fn a_merge_keeps_the_oldest_id_relinks_the_scope_and_backs_up_every_change() {
    let w = World::new();
    let mut e = w.engine(None);
    // The oldest note is not the first by id: the kept id is chosen by age.
    w.clock.set(T0 + 5);
    add(&mut e, "a-note", "Second", "Second text, see [[b-note]].");
    w.clock.set(T0);
    add(&mut e, "b-note", "First", "First text.");
    w.clock.set(T0 + 9);
    add(&mut e, "c-note", "Third", "Third text.");
    add(
        &mut e,
        "reader",
        "Reads them",
        "Links [[a-note]], [[c-note|the third]] and [[C-Note#part]]; `[[a-note]]` is code.",
    );
    let ids: Vec<String> = ["c-note", "a-note", "b-note"].map(String::from).into();
    let plan = merge_plan(&e, &ids, None, DraftKind::Manual).unwrap();
    assert_eq!(plan.kept_id, "b-note");
    assert_eq!(plan.deleted_ids, ["a-note", "c-note"]);
    assert_eq!(plan.draft.summary, "First");
    assert_eq!(
        plan.draft.body,
        "## First\n\nFirst text.\n\n## Second\n\nSecond text, see [[b-note]].\n\n## Third\n\nThird text.\n"
    );
    assert_eq!(plan.relinked.len(), 1);
    assert_eq!(plan.relinked[0].id, "reader");
    let replanned = merge_plan(&e, &ids, None, DraftKind::Manual).unwrap();
    assert_eq!(replanned.plan_id, plan.plan_id, "same notes, same plan id");
    let body = "All three. Was [[a-note]] and [[c-note]].";
    let merged = merge_apply(&mut e, &plan, "All three", body).unwrap();
    assert_eq!(merged.kept.id, "b-note");
    assert_eq!(merged.deleted, ["a-note", "c-note"]);
    assert_eq!(merged.relinked, ["reader"]);
    assert_eq!(merged.backups.len(), 4, "a, b, c and reader");
    let rows = e.backups(10).unwrap();
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|b| b.reason == "merge"), "{rows:?}");
    let kept = e.show("b-note", None).unwrap();
    assert_eq!(kept.indexed.summary, "All three");
    assert_eq!(
        kept.note.unwrap().body,
        "All three. Was [[b-note]] and [[b-note]].\n"
    );
    for gone in ["a-note", "c-note"] {
        assert_eq!(e.show(gone, None).unwrap_err().code(), ErrorCode::NotFound);
    }
    assert_eq!(
        body_of(&e, "reader"),
        "Links [[b-note]], [[b-note|the third]] and [[b-note#part]]; `[[a-note]]` is code.\n"
    );
    // No link of the scope is left broken by the merge.
    assert!(of_kind(&review_all(&e), FindingKind::BrokenLink).is_empty());
}

#[test]
fn a_merge_whose_source_changed_since_the_plan_is_refused_and_writes_nothing() {
    let w = World::new();
    let mut e = w.engine(None);
    add(&mut e, "one", "One", "One text.");
    w.clock.set(T0 + 1);
    add(&mut e, "two", "Two", "Two text.");
    add(&mut e, "linker", "Linker", "See [[two]].");
    let ids: Vec<String> = ["one", "two"].map(String::from).into();
    let plan = merge_plan(&e, &ids, None, DraftKind::Manual).unwrap();
    // Another program edits a source after the plan.
    let path = e.show("two", None).unwrap().indexed.path;
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("Two text.", "Two text, changed.")).unwrap();
    let err = merge_apply(&mut e, &plan, "Both", &plan.draft.body).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ChangedSince);
    assert!(err.to_string().contains("`two`"), "{err}");
    assert_eq!(body_of(&e, "one"), "One text.\n");
    assert_eq!(body_of(&e, "two"), "Two text, changed.\n");
    assert_eq!(body_of(&e, "linker"), "See [[two]].\n");
    assert!(e.backups(10).unwrap().is_empty());
    // A source deleted since the plan is refused the same way.
    let plan = merge_plan(&e, &ids, None, DraftKind::Manual).unwrap();
    std::fs::remove_file(&path).unwrap();
    let err = merge_apply(&mut e, &plan, "Both", &plan.draft.body).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ChangedSince);
    assert_eq!(body_of(&e, "one"), "One text.\n");
}

#[test]
fn merges_across_scopes_or_of_one_note_are_refused() {
    let w = World::new();
    let root = w.project();
    let mut e = w.engine(Some(&root));
    add(&mut e, "mine", "Mine", "user text");
    e.add(NewNote {
        id: Some("theirs".into()),
        summary: "Theirs".into(),
        body: "project text".into(),
        scope: Some(ScopeChoice::Project),
        ..Default::default()
    })
    .unwrap();
    let err = merge_plan(
        &e,
        &["mine".into(), "theirs".into()],
        None,
        DraftKind::Manual,
    )
    .unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidInput);
    assert!(err.to_string().contains("one scope"), "{err}");
    let err = merge_plan(&e, &["mine".into()], None, DraftKind::Manual).unwrap_err();
    assert_eq!(err.code(), ErrorCode::InvalidInput);
}

#[test]
fn a_model_draft_without_a_model_configured_names_the_setting() {
    let w = World::new();
    let mut e = w.engine(None);
    add(&mut e, "one", "One", "One text.");
    add(&mut e, "two", "Two", "Two text.");
    let err = merge_plan(&e, &["one".into(), "two".into()], None, DraftKind::Model).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Config);
    assert!(err.to_string().contains("model.url"), "{err}");
}

/// A one-request OpenAI-compatible stub: answers `reply` as the chat completion's content and
/// hands back the request it got (request line and body).
fn chat_stub(reply: &str) -> (String, std::thread::JoinHandle<(String, String)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let content = serde_json::json!({
        "choices": [{"message": {"role": "assistant", "content": reply}}]
    })
    .to_string();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request_line = String::new();
        reader.read_line(&mut request_line).unwrap();
        let mut length = 0;
        loop {
            let mut h = String::new();
            reader.read_line(&mut h).unwrap();
            if h == "\r\n" || h.is_empty() {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let mut out = stream;
        write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{content}",
            content.len()
        )
        .unwrap();
        (request_line, String::from_utf8(body).unwrap())
    });
    (url, handle)
}

#[test]
fn a_model_draft_asks_the_configured_chat_endpoint() {
    let w = World::new();
    let mut e = w.engine(None);
    add(&mut e, "one", "One", "Alpha fact.");
    add(&mut e, "two", "Two", "Beta fact.");
    let (url, stub) =
        chat_stub("```json\n{\"summary\": \"Alpha and beta\", \"body\": \"Alpha. Beta.\"}\n```");
    crate::config::set(e.home(), "model.url", Some(&url)).unwrap();
    crate::config::set(e.home(), "model.name", Some("tiny")).unwrap();
    let plan = merge_plan(&e, &["one".into(), "two".into()], None, DraftKind::Model).unwrap();
    assert_eq!(plan.draft.kind, DraftKind::Model);
    assert_eq!(plan.draft.summary, "Alpha and beta");
    assert_eq!(plan.draft.body, "Alpha. Beta.");
    let (line, body) = stub.join().unwrap();
    assert!(line.starts_with("POST /v1/chat/completions "), "{line}");
    let sent: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(sent["model"], "tiny");
    let user = sent["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("Alpha fact.") && user.contains("Beta fact."),
        "{user}"
    );
}

#[test]
fn a_model_that_answers_nonsense_is_a_model_error() {
    let w = World::new();
    let mut e = w.engine(None);
    add(&mut e, "one", "One", "Alpha fact.");
    add(&mut e, "two", "Two", "Beta fact.");
    let (url, stub) = chat_stub("Sure! Here is your merged note.");
    crate::config::set(e.home(), "model.url", Some(&url)).unwrap();
    let err = merge_plan(&e, &["one".into(), "two".into()], None, DraftKind::Model).unwrap_err();
    stub.join().unwrap();
    assert_eq!(err.code(), ErrorCode::Model);
    assert!(err.to_string().contains(&url), "{err}");
}

/// Ids of the notes matching `q` by their words, archived ones only when asked for.
fn found(e: &Engine, q: &str, archived: bool) -> Vec<(String, bool)> {
    let opts = crate::recall::SearchOptions {
        mode: crate::recall::Mode::Bm25,
        include_archived: archived,
        ..Default::default()
    };
    e.hybrid_search(q, opts)
        .unwrap()
        .into_iter()
        .map(|h| (h.id, h.archived))
        .collect()
}

fn archived_ids(e: &Engine) -> Vec<String> {
    crate::api::hygiene::archived(e, None)
        .unwrap()
        .notes
        .into_iter()
        .map(|n| n.id)
        .collect()
}

#[test]
fn an_unused_note_is_archived_and_comes_back_when_opened_or_edited() {
    let w = World::new();
    let mut e = w.engine(None);
    add(
        &mut e,
        "tern",
        "Staging database",
        "The staging database is called tern.",
    );
    add(
        &mut e,
        "quokka",
        "Release day",
        "Quokka releases are cut on Fridays.",
    );
    let tern = || vec![("tern".to_owned(), false)];
    assert_eq!(found(&e, "staging database tern", false), tern());
    // The default importance (0.5) halves every 90 days: still above 0.1 at 200 days.
    w.clock.set(T0 + 200 * DAY);
    assert_eq!(found(&e, "staging database tern", false), tern());
    assert!(archived_ids(&e).is_empty());
    // Below it at 210: out of search, still found when archived notes are asked for.
    w.clock.set(T0 + 210 * DAY);
    assert!(found(&e, "staging database tern", false).is_empty());
    assert_eq!(
        found(&e, "staging database tern", true),
        [("tern".to_owned(), true)]
    );
    let archive = crate::api::hygiene::archived(&e, None).unwrap();
    assert_eq!(archive.archive_below, 0.1);
    let ids: Vec<&str> = archive.notes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["quokka", "tern"]);
    assert!(archive.notes[1].importance < 0.1 && archive.notes[1].uses == 0);
    // Still listed.
    assert_eq!(e.list(None, None, None).unwrap().len(), 2);
    // Opening it is a use: back in search, reinforced.
    e.show("tern", None).unwrap();
    assert_eq!(found(&e, "staging database tern", false), tern());
    assert_eq!(archived_ids(&e), ["quokka"]);
    // An edit brings the other back.
    e.edit(
        "quokka",
        None,
        NoteEdit {
            body: Some("Quokka releases are cut on Thursdays.".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(archived_ids(&e).is_empty());
    assert_eq!(
        found(&e, "quokka releases", false),
        [("quokka".to_owned(), false)]
    );
    // A shorter half-life from the settings archives sooner.
    crate::config::set(e.home(), "decay.halfLifeDays", Some("2")).unwrap();
    w.clock.set(T0 + 220 * DAY);
    assert_eq!(archived_ids(&e), ["quokka", "tern"]);
    assert!(found(&e, "quokka releases", false).is_empty());
}

#[test]
fn a_note_used_long_ago_ranks_below_an_equal_one_used_recently() {
    let w = World::new();
    let mut e = w.engine(None);
    let body = "Invoices are numbered per year and never reused.";
    add(&mut e, "old-use", "Invoice numbers", body);
    add(&mut e, "recent-use", "Invoice numbers", body);
    let opts = crate::recall::SearchOptions {
        mode: crate::recall::Mode::Bm25,
        explain: true,
        ..Default::default()
    };
    assert_eq!(e.hybrid_search("invoice", opts.clone()).unwrap().len(), 2);
    // One use each: the first now, the second 100 days later.
    e.show("old-use", None).unwrap();
    w.clock.set(T0 + 100 * DAY);
    e.show("recent-use", None).unwrap();
    let hits = e.hybrid_search("invoice numbers reused", opts).unwrap();
    let order: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(order, ["recent-use", "old-use"], "{hits:#?}");
    let importance = |i: usize| hits[i].explain.as_ref().unwrap().importance;
    // Reinforced once (0.6), and for the older one a little more than a half-life since.
    assert!(
        (importance(0) - (0.75 + 0.5 * 0.6)).abs() < 1e-9,
        "{hits:#?}"
    );
    assert!(importance(1) < 0.75 + 0.5 * 0.3, "{hits:#?}");
    // Decay re-ranks, never deletes: both are still there.
    assert_eq!(e.list(None, None, None).unwrap().len(), 2);
}
