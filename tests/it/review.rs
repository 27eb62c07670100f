//! The review queue and merging through the real `memoria` binary: `review --json`,
//! `review dismiss`, `merge` (plan, draft, `--apply`), `config set model.url` with a model
//! draft from a chat endpoint started here.

use std::path::Path;

use memoria_tests::sync_fixture::{Backend, Device, SyncServer};
use serde_json::Value;

const PRICING: &str = "Pricing cards on the landing page use filled backgrounds, never borders; \
    the highlighted plan gets the accent colour and a badge saying popular.";
const PRICING_AGAIN: &str = "The landing page pricing cards use filled backgrounds and never \
    borders; the highlighted plan gets the accent colour with a popular badge.";

fn device(tmp: &Path) -> Device {
    let d = Device::new(tmp.join("home"), "");
    std::fs::create_dir_all(&d.home).unwrap();
    d
}

fn json(d: &Device, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = d.ok(&full);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("memoria {args:?}: {e}: {out}"))
}

/// The error body of a failing `memoria --json ARGS`.
fn error(d: &Device, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = d.run(&full);
    assert_eq!(out.status.code(), Some(1), "memoria {args:?} should fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: Value = serde_json::from_str(stderr.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stderr}"));
    v["error"].clone()
}

/// Every entry directly in `dir` by name, with its bytes (none for a folder), in name order.
fn files_in(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|f| {
            let bytes = std::fs::read(f.path()).unwrap_or_default();
            (f.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    v.sort();
    v
}

fn findings<'a>(review: &'a Value, kind: &str) -> Vec<&'a Value> {
    review["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

fn note_ids(f: &Value) -> Vec<&str> {
    f["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect()
}

#[test]
fn review_lists_findings_and_a_dismissal_holds_until_an_edit() {
    let tmp = tempfile::tempdir().unwrap();
    let d = device(tmp.path());
    d.add("pricing", "Pricing cards", PRICING);
    d.add("pricing-2", "Pricing cards look", PRICING_AGAIN);
    d.add("linker", "Links", "See [[pricing]] and [[nowhere]].");
    let r = json(&d, &["review"]);
    assert_eq!(r["notes"], 3, "{r}");
    let topic = findings(&r, "same_topic");
    assert_eq!(topic.len(), 1, "{r}");
    assert_eq!(note_ids(topic[0]), ["pricing", "pricing-2"]);
    let broken = findings(&r, "broken_link");
    assert_eq!(broken[0]["targets"], serde_json::json!(["nowhere"]), "{r}");
    let id = topic[0]["id"].as_str().unwrap().to_owned();

    let text = d.ok(&["review"]);
    assert!(
        text.contains(&id) && text.contains("memoria merge pricing pricing-2"),
        "{text}"
    );
    let dismissed = json(&d, &["review", "dismiss", &id]);
    assert_eq!(dismissed["findingId"], id.as_str());
    let r = json(&d, &["review"]);
    assert!(findings(&r, "same_topic").is_empty(), "{r}");
    assert_eq!(r["dismissed"], 1);
    assert_eq!(
        findings(&json(&d, &["review", "--all"]), "same_topic").len(),
        1
    );

    d.ok(&["edit", "pricing", "--summary", "Pricing cards, checked"]);
    let r = json(&d, &["review"]);
    let back = findings(&r, "same_topic");
    assert_eq!(back.len(), 1, "the edit brings the finding back: {r}");
    assert_eq!(back[0]["id"], id.as_str());

    let e = error(&d, &["review", "dismiss", "topic-000000000000"]);
    assert_eq!(e["code"], "not_found", "{e}");
}

fn add_tagged(d: &Device, text: &str, tags: &str) -> String {
    let v: Value = serde_json::from_str(&d.ok(&[
        "--json",
        "add",
        "--summary",
        text,
        "--body",
        text,
        "--tags",
        tags,
    ]))
    .unwrap();
    v["id"].as_str().unwrap().to_owned()
}

#[test]
fn short_notes_that_say_the_same_are_one_finding_by_words_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let d = device(tmp.path());
    let same = [
        add_tagged(&d, "Deploys go out on Tuesdays", "ops,deploy"),
        add_tagged(&d, "Deployments happen on Tuesday", "ops,deploy"),
        add_tagged(&d, "Tuesday is deploy day", "ops,deploy"),
    ];
    // Same tags, same subject, something else said.
    add_tagged(&d, "Rollbacks need a second approver", "ops,deploy");
    add_tagged(
        &d,
        "Deploys are frozen during the last week of December",
        "ops,deploy",
    );
    let spanish = [
        add_tagged(&d, "Los despliegues salen los martes", "ops,despliegue"),
        add_tagged(&d, "El martes es el día de despliegue", "ops,despliegue"),
    ];
    add_tagged(
        &d,
        "Los despliegues se congelan la última semana de diciembre",
        "ops,despliegue",
    );
    let r = json(&d, &["review"]);
    assert_eq!(r["vectors"], false, "no model here: {r}");
    let mut groups: Vec<Vec<String>> = findings(&r, "same_topic")
        .iter()
        .map(|f| note_ids(f).into_iter().map(str::to_owned).collect())
        .collect();
    groups.sort();
    let mut want = vec![same.to_vec(), spanish.to_vec()];
    for g in &mut want {
        g.sort();
    }
    want.sort();
    assert_eq!(groups, want, "{r}");
    assert!(d.ok(&["review"]).contains("same topic by words"));
}

#[test]
fn the_review_embeds_the_notes_before_judging_so_no_earlier_command_matters() {
    let tmp = tempfile::tempdir().unwrap();
    let d = device(tmp.path());
    let model = memoria_tests::test_model_dir();
    let model = model.to_str().unwrap();
    // Too few shared words to be the same topic by words alone; their meaning is the same.
    let pair = [
        add_tagged(&d, "发票在 30 天内付款", "财务"),
        add_tagged(&d, "发票的付款期限是 30 天", "财务"),
    ];
    add_tagged(&d, "报销单每月 5 号前提交", "财务");
    let by_words = json(&d, &["review"]);
    assert!(findings(&by_words, "same_topic").is_empty(), "{by_words}");
    // No search ran, so nothing embedded these notes before: the review does.
    let out = d.ok(&["--model-dir", model, "--json", "review"]);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["vectors"], true, "{r}");
    let topic = findings(&r, "same_topic");
    assert_eq!(topic.len(), 1, "{r}");
    let mut ids = note_ids(topic[0]);
    ids.sort();
    let mut want: Vec<&str> = pair.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(ids, want, "{r}");
}

#[test]
fn review_of_a_project_reports_paths_missing_from_it() {
    let tmp = tempfile::tempdir().unwrap();
    let d = device(tmp.path());
    let proj = tmp.path().join("proj");
    std::fs::create_dir_all(proj.join("src")).unwrap();
    std::fs::write(proj.join("src/main.rs"), "fn main() {}").unwrap();
    let p = proj.to_str().unwrap();
    d.ok(&["init", p]);
    d.add_to_project(
        p,
        "layout",
        "Layout",
        "Start in `src/main.rs`, then `src/gone.rs`.",
    );
    let r = json(&d, &["--project", p, "review", "--scope", "project"]);
    let missing = findings(&r, "missing_file");
    assert_eq!(missing.len(), 1, "{r}");
    assert_eq!(missing[0]["paths"], serde_json::json!(["src/gone.rs"]));
    assert!(
        missing[0]["scope"]
            .as_str()
            .unwrap()
            .starts_with("project:")
    );
}

#[test]
fn merge_prints_a_plan_and_applies_it_with_links_and_backups() {
    let tmp = tempfile::tempdir().unwrap();
    let d = device(tmp.path());
    d.add("first", "First", "First text.");
    d.add("second", "Second", "Second text.");
    d.add("reader", "Reader", "Reads [[second]].");
    let plan = json(&d, &["merge", "second", "first"]);
    assert_eq!(plan["keptId"], "first", "{plan}");
    assert_eq!(plan["deletedIds"], serde_json::json!(["second"]));
    assert_eq!(plan["draft"]["kind"], "manual");
    assert_eq!(
        plan["draft"]["body"],
        "## First\n\nFirst text.\n\n## Second\n\nSecond text.\n"
    );
    assert_eq!(plan["relinked"][0]["id"], "reader");
    let plan_id = plan["planId"].as_str().unwrap();
    let text = d.ok(&["merge", "second", "first"]);
    assert!(
        text.contains(&format!("--apply --plan {plan_id}")),
        "{text}"
    );

    let body = tmp.path().join("merged.md");
    std::fs::write(&body, "Both texts, merged. See [[second]].\n").unwrap();
    let merged = json(
        &d,
        &[
            "merge",
            "second",
            "first",
            "--apply",
            "--plan",
            plan_id,
            "--body-file",
            body.to_str().unwrap(),
            "--summary",
            "First and second",
        ],
    );
    assert_eq!(merged["kept"]["id"], "first", "{merged}");
    assert_eq!(merged["deleted"], serde_json::json!(["second"]));
    assert_eq!(merged["relinked"], serde_json::json!(["reader"]));
    let kept = json(&d, &["show", "first"]);
    assert_eq!(kept["summary"], "First and second");
    assert_eq!(kept["body"], "Both texts, merged. See [[first]].\n");
    assert_eq!(json(&d, &["show", "reader"])["body"], "Reads [[first]].\n");
    assert_eq!(error(&d, &["show", "second"])["code"], "not_found");
    let backups = json(&d, &["backups"]);
    let reasons: Vec<(&str, &str)> = backups
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["noteId"].as_str().unwrap(), b["reason"].as_str().unwrap()))
        .collect();
    for id in ["first", "second", "reader"] {
        assert!(reasons.contains(&(id, "merge")), "{reasons:?}");
    }
}

#[test]
fn merge_apply_is_refused_when_a_note_changed_since_the_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let d = device(tmp.path());
    d.add("one", "One", "One text.");
    d.add("two", "Two", "Two text.");
    let plan = json(&d, &["merge", "one", "two"]);
    let plan_id = plan["planId"].as_str().unwrap();
    d.ok(&["edit", "two", "--body", "Two text, edited."]);
    let e = error(&d, &["merge", "one", "two", "--apply", "--plan", plan_id]);
    assert_eq!(e["code"], "changed_since", "{e}");
    assert_eq!(e["detail"]["plan"], plan_id);
    let human = String::from_utf8_lossy(
        &d.run(&["merge", "one", "two", "--apply", "--plan", plan_id])
            .stderr,
    )
    .into_owned();
    assert!(
        human.contains("hint: run the same `memoria merge`"),
        "{human}"
    );
    assert_eq!(json(&d, &["show", "one"])["body"], "One text.\n");
    assert_eq!(json(&d, &["show", "two"])["body"], "Two text, edited.\n");
    assert!(json(&d, &["backups"]).as_array().unwrap().is_empty());
}

#[test]
fn a_model_draft_needs_model_url_and_then_asks_that_endpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let d = device(tmp.path());
    d.add("one", "One", "Alpha fact.");
    d.add("two", "Two", "Beta fact.");
    let e = error(&d, &["merge", "one", "two", "--draft", "model"]);
    assert_eq!(e["code"], "config", "{e}");
    assert!(e["message"].as_str().unwrap().contains("model.url"), "{e}");

    let chat = memoria_fake_chat::ChatEndpoint::always(
        "{\"summary\": \"Alpha and beta\", \"body\": \"Alpha. Beta.\"}",
    );
    let url = chat.url().to_owned();
    let set = json(&d, &["config", "set", "model.url", &url]);
    assert_eq!(set["value"], url.as_str());
    assert_eq!(set["source"], "file");
    let plan = json(&d, &["merge", "one", "two", "--draft", "model"]);
    assert_eq!(plan["draft"]["kind"], "model", "{plan}");
    assert_eq!(plan["draft"]["summary"], "Alpha and beta");
    assert_eq!(plan["draft"]["body"], "Alpha. Beta.");
    let requests = chat.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let (line, body) = (&requests[0].line, &requests[0].body);
    assert!(line.starts_with("POST /v1/chat/completions "), "{line}");
    assert!(
        body.contains("Alpha fact.") && body.contains("Beta fact."),
        "{body}"
    );
    // The setting is this machine's: it lives in the home's config.json.
    let config = std::fs::read_to_string(d.home.join("config.json")).unwrap();
    assert!(config.contains(&url), "{config}");
    let listed = json(&d, &["config"]);
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["key"] == "model.url")
    );
}

const PRICING_THIRD: &str = "Landing page pricing cards: filled backgrounds, never borders; the \
    highlighted plan gets the accent colour and a popular badge.";

#[test]
fn consolidate_previews_with_dry_run_then_folds_the_cluster() {
    let tmp = tempfile::tempdir().unwrap();
    let d = device(tmp.path());
    d.add("pricing", "Pricing cards", PRICING);
    d.add("pricing-2", "Pricing cards look", PRICING_AGAIN);
    d.add("pricing-3", "Pricing card style", PRICING_THIRD);
    d.add("deploys", "Deploy days", "Deploys go out on Tuesdays.");
    let user = d.home.join("memory").join("user");
    let files = || files_in(&user);
    let before = files();
    let dry = json(&d, &["consolidate", "--dry-run"]);
    assert_eq!(dry["dryRun"], true, "{dry}");
    let clusters = dry["plan"]["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1, "{dry}");
    assert_eq!(clusters[0]["basis"], "similar");
    let ids: Vec<&str> = clusters[0]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["pricing", "pricing-2", "pricing-3"]);
    assert_eq!(dry["plan"]["vectors"], false, "no model here: words only");
    assert_eq!(files(), before, "a dry run writes nothing");
    let text = d.ok(&["consolidate", "--dry-run"]);
    assert!(text.contains("nothing written"), "{text}");

    let into = clusters[0]["intoId"].as_str().unwrap().to_owned();
    let done = json(&d, &["consolidate"]);
    assert_eq!(done["applied"][0]["into"]["id"], into.as_str(), "{done}");
    let body = json(&d, &["show", &into])["body"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        body.contains("[[pricing]]") && body.contains("[[pricing-3]]"),
        "{body}"
    );
    for id in ["pricing", "pricing-2", "pricing-3"] {
        let file = std::fs::read_to_string(user.join(format!("{id}.md"))).unwrap();
        assert!(file.contains("\"status\":\"consolidated\""), "{file}");
    }
    assert_eq!(files().len(), before.len() + 1, "nothing deleted");
    let again = d.ok(&["consolidate"]);
    assert!(again.starts_with("0 clusters"), "{again}");
    let bad = error(&d, &["consolidate", "--min-size", "1"]);
    assert_eq!(bad["code"], "invalid_input", "{bad}");
}

/// Two homes signed in to a real `memoria-sync` on a filesystem store.
fn synced_pair(root: &Path) -> (SyncServer, Device, Device) {
    let server = SyncServer::start(Backend::Fs, root, &[]);
    let token = server.token("alice");
    let dev = |name: &str| {
        let d = device(&root.join(name));
        d.ok(&["sync", "login", "--server", &server.url, "--token", &token]);
        d
    };
    let (a, b) = (dev("a"), dev("b"));
    (server, a, b)
}

#[test]
fn with_sync_on_a_merge_goes_to_the_cloud_first_and_a_change_elsewhere_refuses_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let (_server, a, b) = synced_pair(&root);
    a.add("first", "First", "First text.");
    a.add("second", "Second", "Second text.");
    a.add("reader", "Reader", "Reads [[second]].");
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    // b changes a note of the merge; a has not synced since.
    b.ok(&["edit", "second", "--body", "Second text, from b."]);
    b.ok(&["sync", "now"]);
    let before: Vec<Option<String>> = ["first", "second", "reader"]
        .iter()
        .map(|id| a.note(id))
        .collect();
    let err = error(&a, &["merge", "second", "first", "--apply"]);
    assert_eq!(err["code"], "conflict", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("another device changed"),
        "{err}"
    );
    let after: Vec<Option<String>> = ["first", "second", "reader"]
        .iter()
        .map(|id| a.note(id))
        .collect();
    assert_eq!(after, before, "nothing written here");
    // Synced, the merge goes up first and reaches the other home with b's edit in it.
    a.ok(&["sync", "now"]);
    let merged = json(&a, &["merge", "second", "first", "--apply"]);
    assert_eq!(merged["kept"]["id"], "first", "{merged}");
    assert!(merged["backups"].as_array().unwrap().len() >= 3, "{merged}");
    assert!(a.note("second").is_none());
    b.ok(&["sync", "now"]);
    assert!(b.note("second").is_none());
    assert_eq!(b.note("first"), a.note("first"));
    assert!(b.note("first").unwrap().contains("Second text, from b."));
    assert_eq!(json(&b, &["show", "reader"])["body"], "Reads [[first]].\n");
}

#[test]
fn with_sync_on_a_consolidation_goes_to_the_cloud_first_and_waits_for_a_change_elsewhere() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let (_server, a, b) = synced_pair(&root);
    a.add("pricing", "Pricing cards", PRICING);
    a.add("pricing-2", "Pricing cards look", PRICING_AGAIN);
    a.add("pricing-3", "Pricing card style", PRICING_THIRD);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    b.ok(&[
        "edit",
        "pricing-2",
        "--summary",
        "Pricing cards, edited on b",
    ]);
    b.ok(&["sync", "now"]);
    let before = a.note("pricing-2");
    let done = json(&a, &["consolidate"]);
    assert!(done["applied"].as_array().unwrap().is_empty(), "{done}");
    let reason = done["skipped"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("another device changed"), "{done}");
    assert_eq!(a.note("pricing-2"), before);
    assert!(!a.note("pricing").unwrap().contains("consolidated"));
    a.ok(&["sync", "now"]);
    let done = json(&a, &["consolidate"]);
    let into = done["applied"][0]["into"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    b.ok(&["sync", "now"]);
    assert_eq!(b.note(&into), a.note(&into));
    assert!(
        b.note("pricing-2")
            .unwrap()
            .contains("\"status\":\"consolidated\"")
    );
}

/// A session over `home` at `clock`'s time, without sync, that runs the daily consolidation.
fn session(
    home: &Path,
    clock: &std::sync::Arc<memoria_shared::FixedClock>,
) -> memoria_engine::Session {
    session_consolidating(home, clock, true)
}

/// A session over `home` at `clock`'s time, without sync, its daily consolidation on or off.
pub(crate) fn session_consolidating(
    home: &Path,
    clock: &std::sync::Arc<memoria_shared::FixedClock>,
    consolidate: bool,
) -> memoria_engine::Session {
    let mut o = memoria_engine::SessionOptions::new(memoria_engine::OpenOptions {
        clock: clock.clone(),
        ..memoria_engine::OpenOptions::without_model(home)
    });
    o.sync = false;
    o.consolidate = consolidate;
    memoria_engine::Session::start(o).unwrap()
}

/// Three rewordings of one note in the user scope, written at `clock`'s time: a cluster the
/// consolidation folds.
fn add_rewordings(home: &Path, clock: &std::sync::Arc<memoria_shared::FixedClock>, ids: [&str; 3]) {
    let mut e = memoria_engine::Engine::open(memoria_engine::OpenOptions {
        clock: clock.clone(),
        ..memoria_engine::OpenOptions::without_model(home)
    })
    .unwrap();
    for (id, body) in ids.into_iter().zip([PRICING, PRICING_AGAIN, PRICING_THIRD]) {
        e.add(memoria_engine::NewNote {
            id: Some(id.into()),
            summary: "Pricing cards".into(),
            body: body.into(),
            scope: Some(memoria_engine::ScopeChoice::User),
            ..Default::default()
        })
        .unwrap();
    }
}

#[test]
fn a_session_runs_the_daily_consolidation_in_the_background_once_a_day() {
    use memoria_engine::Event;
    const T0: i64 = 1_789_000_000_000;
    const DAY: i64 = 86_400_000;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().canonicalize().unwrap().join("home");
    let clock = std::sync::Arc::new(memoria_shared::FixedClock::new(T0));
    add_rewordings(&home, &clock, ["pricing", "pricing-2", "pricing-3"]);
    let user = home.join("memory").join("user");
    let files = || files_in(&user);
    clock.set(T0 + 3_600_000);
    let (s, events) = {
        let s = session(&home, &clock);
        let rx = s.subscribe();
        (s, rx)
    };
    // The consolidated note arrives as the watcher's event; the session served reads meanwhile.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let into = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match events.recv_timeout(left) {
            Ok(Event::NoteAdded { id, .. })
                if !["pricing", "pricing-2", "pricing-3"].contains(&id.as_str()) =>
            {
                break id;
            }
            Ok(Event::Error { message, .. }) => panic!("{message}"),
            Ok(_) => {}
            Err(e) => panic!("no consolidated note: {e}"),
        }
    };
    drop(s);
    let note = std::fs::read_to_string(user.join(format!("{into}.md"))).unwrap();
    assert!(note.contains("[[pricing-2]]"), "{note}");
    let original = std::fs::read_to_string(user.join("pricing.md")).unwrap();
    assert!(
        original.contains("\"status\":\"consolidated\""),
        "{original}"
    );

    // The same day, three new rewordings wait: the pass ran today. Dropping the session
    // waits for its threads, so the pass has had its turn.
    add_rewordings(&home, &clock, ["again-1", "again-2", "again-3"]);
    let before = files();
    clock.set(T0 + DAY - 1);
    drop(session(&home, &clock));
    assert_eq!(files(), before, "a second pass the same day does nothing");
    // The next day it runs again.
    clock.set(T0 + 3_600_000 + DAY);
    drop(session(&home, &clock));
    let again = std::fs::read_to_string(user.join("again-1.md")).unwrap();
    assert!(again.contains("\"status\":\"consolidated\""), "{again}");
}

#[test]
fn the_daily_consolidation_turns_on_and_off_while_a_session_runs() {
    const T0: i64 = 1_789_000_000_000;
    const DAY: i64 = 86_400_000;
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().canonicalize().unwrap().join("home");
    let clock = std::sync::Arc::new(memoria_shared::FixedClock::new(T0));
    add_rewordings(&home, &clock, ["pricing", "pricing-2", "pricing-3"]);
    let consolidated = |id: &str| {
        std::fs::read_to_string(home.join("memory").join("user").join(format!("{id}.md")))
            .unwrap()
            .contains("\"status\":\"consolidated\"")
    };
    clock.set(T0 + 3_600_000);
    let start = || session_consolidating(&home, &clock, false);
    // Off: a pass is due and none runs (dropping a session waits for its threads).
    let s = start();
    assert!(!s.consolidates());
    s.check_consolidation();
    drop(s);
    assert!(
        !consolidated("pricing"),
        "a pass ran while the consolidation was off"
    );

    // Turned on, the due pass runs; turned off at once, the call returns after that pass.
    let s = start();
    s.set_consolidation(true).unwrap();
    assert!(s.consolidates());
    s.set_consolidation(false).unwrap();
    assert!(!s.consolidates());
    assert!(
        consolidated("pricing"),
        "turning the consolidation on ran the due pass"
    );

    // The next day, on again in the same session: the next pass runs.
    add_rewordings(&home, &clock, ["again-1", "again-2", "again-3"]);
    clock.set(T0 + 3_600_000 + DAY);
    assert!(!consolidated("again-1"));
    s.set_consolidation(true).unwrap();
    s.set_consolidation(false).unwrap();
    assert!(consolidated("again-1"), "the second pass, once on again");
}
