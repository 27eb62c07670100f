//! Integrity on the wire and in the store. The real client (the `memoria` CLI) syncs through a
//! stand-in that speaks the real protocol (it passes every request to the real `memoria-sync`
//! binary) and damages the snapshot replies: a body that does not match its hash, a body left
//! out, a reply cut short, a revision that moves between pages, an HTML page sent with 200, a
//! snapshot that never stops saying `more`. Each pass fails with an error naming the scope
//! (and the note), writes nothing it could not verify, `sync status` shows the error, and a
//! later pass against the healthy server converges. And the server: a commit whose body does
//! not hash to its declared hash is refused naming the note, and a stored revision edited by
//! hand in the fs store is reported (in the reply and in the server's log) and not served as
//! good.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header;
use axum::response::Response;
use memoria_tests::sync_fixture::{Backend, Device};
use memoria_tests::sync_server::{create_token, note_file, post_json, sync_binary};
use serde_json::{Value, json};

use crate::sync_e2e::{World, json, world};

/// The note the stand-in damages.
const TARGET: &str = "bad";

/// What the stand-in does to the server's replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Passes everything through.
    Healthy,
    /// Changes the target's body in snapshot replies, keeping its announced hash.
    WrongHash,
    /// Leaves the target's body out of snapshot replies (which still say `more: false`).
    MissingBody,
    /// Cuts snapshot replies off halfway.
    Truncated,
    /// Says `more: true` on a first snapshot page; on the next page the target has another
    /// revision and hash, and its body is not sent.
    RevisionMoves,
    /// Says `more: true` on every snapshot page, so pages after the first bring nothing new.
    EndlessPages,
    /// Answers every request with 200 and an HTML page (a captive portal, a misrouted proxy).
    Html,
    /// Says it speaks a protocol newer than this build's (a server updated before its clients).
    NewerProtocol,
    /// Refuses every commit as too large (413), as a server whose limits were lowered does.
    CommitTooLarge,
    /// Refuses every commit as stale (409), as a server whose notes keep changing does.
    CommitStale,
}

#[derive(Clone)]
struct StandState {
    upstream: String,
    fault: Arc<Mutex<Fault>>,
    pages: Arc<AtomicUsize>,
    http: reqwest::Client,
}

/// The stand-in on 127.0.0.1, served by a runtime of its own; stopped on drop.
struct Stand {
    url: String,
    fault: Arc<Mutex<Fault>>,
    pages: Arc<AtomicUsize>,
    _rt: tokio::runtime::Runtime,
}

impl Stand {
    fn start(upstream: &str) -> Stand {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let state = StandState {
            upstream: upstream.trim_end_matches('/').to_owned(),
            fault: Arc::new(Mutex::new(Fault::Healthy)),
            pages: Arc::default(),
            http: reqwest::Client::new(),
        };
        let (fault, pages) = (state.fault.clone(), state.pages.clone());
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(answer).with_state(state);
        rt.spawn(async move { axum::serve(listener, app).await });
        Stand {
            url,
            fault,
            pages,
            _rt: rt,
        }
    }

    fn set(&self, f: Fault) {
        self.pages.store(0, Ordering::SeqCst);
        *self.fault.lock().unwrap() = f;
    }
}

fn reply(status: u16, content_type: &str, body: Vec<u8>) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap()
}

async fn answer(State(s): State<StandState>, req: Request) -> Response {
    let fault = *s.fault.lock().unwrap();
    if fault == Fault::Html {
        let page = b"<!DOCTYPE html>\n<html><body>Sign in to use this network</body></html>\n";
        return reply(200, "text/html", page.to_vec());
    }
    let path = req.uri().path().to_owned();
    if path.ends_with("/commit") {
        let refusal = match fault {
            Fault::CommitTooLarge => Some((
                413,
                json!({"code": "too_large", "message": "the commit is over this server's limit"}),
            )),
            Fault::CommitStale => Some((
                409,
                json!({"code": "stale", "message": "notes changed meanwhile",
                    "stale": [{"id": TARGET, "currentRevision": null}]}),
            )),
            _ => None,
        };
        if let Some((status, body)) = refusal {
            return reply(
                status,
                "application/json",
                serde_json::to_vec(&body).unwrap(),
            );
        }
    }
    let mut up = s
        .http
        .request(req.method().clone(), format!("{}{path}", s.upstream));
    for name in [header::AUTHORIZATION, header::CONTENT_TYPE] {
        if let Some(v) = req.headers().get(&name) {
            up = up.header(name, v.clone());
        }
    }
    let body = axum::body::to_bytes(req.into_body(), usize::MAX)
        .await
        .unwrap();
    let resp = up.body(body.to_vec()).send().await.unwrap();
    let status = resp.status().as_u16();
    let mut bytes = resp.bytes().await.unwrap().to_vec();
    if status == 200 && path.ends_with("/snapshot") && fault != Fault::Healthy {
        bytes = damage(fault, &s.pages, bytes);
    }
    if status == 200 && path.ends_with("/identity") && fault == Fault::NewerProtocol {
        let mut v: Value = serde_json::from_slice(&bytes).unwrap();
        v["protocolVersion"] = json!(memoria_shared::protocol::PROTOCOL_VERSION + 1);
        bytes = serde_json::to_vec(&v).unwrap();
    }
    reply(status, "application/json", bytes)
}

/// The snapshot reply `bytes` as `fault` damages it.
fn damage(fault: Fault, pages: &AtomicUsize, mut bytes: Vec<u8>) -> Vec<u8> {
    if fault == Fault::Truncated {
        bytes.truncate(bytes.len() / 2);
        return bytes;
    }
    let mut v: Value = serde_json::from_slice(&bytes).unwrap();
    let is_target = |x: &Value| x["id"] == TARGET;
    let bodies = v["bodies"].as_array_mut().unwrap();
    match fault {
        Fault::WrongHash => {
            for b in bodies.iter_mut().filter(|b| is_target(b)) {
                let text = format!("{}changed on the wire\n", b["body"].as_str().unwrap());
                b["body"] = Value::String(text);
            }
        }
        Fault::MissingBody => bodies.retain(|b| !is_target(b)),
        Fault::RevisionMoves if pages.fetch_add(1, Ordering::SeqCst) == 0 => {
            v["more"] = Value::Bool(true);
        }
        Fault::RevisionMoves => {
            bodies.retain(|b| !is_target(b));
            let (_, other) = note_file(TARGET, "Another version", "never sent\n");
            for e in v["notes"].as_array_mut().unwrap() {
                if is_target(e) {
                    e["revision"] = json!("0123456789abcdef0123456789abcdef");
                    e["hash"] = json!(other.as_str());
                }
            }
        }
        Fault::EndlessPages => v["more"] = Value::Bool(true),
        Fault::Healthy
        | Fault::Truncated
        | Fault::Html
        | Fault::NewerProtocol
        | Fault::CommitTooLarge
        | Fault::CommitStale => {}
    }
    serde_json::to_vec(&v).unwrap()
}

/// The user scope's entry of `memoria sync status --json`.
fn user_status(d: &Device) -> Value {
    let s = json(&d.ok(&["--json", "sync", "status"]));
    s["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|sc| sc["scope"] == "user")
        .cloned()
        .unwrap()
}

/// A world with machine `a` syncing directly (notes `good` and `bad` uploaded) and machine
/// `b` signed in through the stand-in.
fn two_machines() -> (World, Stand, Device, Device) {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    for (id, body) in [("good", "fine\n"), (TARGET, "original text\n")] {
        a.add(id, id, body);
    }
    a.ok(&["sync", "now"]);
    let stand = Stand::start(&w.server.url);
    let b = w.device_via("b", &token, &stand.url);
    (w, stand, a, b)
}

/// Under `fault`, b's passes fail with `expect` (and the scope) in the error, twice — the
/// second pass asks again rather than taking the first as done — and `sync status` shows it;
/// b never holds a version of the target it could not verify: `before` stays. Then the healthy
/// server brings b the target as a has it, and the error clears.
fn fails_then_converges(
    stand: &Stand,
    a: &Device,
    b: &Device,
    fault: Fault,
    expect: &[&str],
    before: Option<&str>,
) {
    stand.set(fault);
    for pass in 0..2 {
        let err = b.fails(&["sync", "now"]);
        for e in expect.iter().chain(&["user"]) {
            assert!(
                err.contains(e),
                "{fault:?}, pass {pass}: `{e}` not in {err}"
            );
        }
        assert_eq!(b.note(TARGET).as_deref(), before, "{fault:?}, pass {pass}");
        let st = user_status(b);
        let shown = st["lastError"].as_str().unwrap_or_default();
        for e in expect {
            assert!(shown.contains(e), "{fault:?}: status shows {st}");
        }
    }
    stand.set(Fault::Healthy);
    b.ok(&["sync", "now"]);
    assert_eq!(b.note(TARGET), a.note(TARGET), "{fault:?}");
    assert_eq!(b.note("good"), a.note("good"), "{fault:?}");
    assert_eq!(user_status(b)["lastError"], Value::Null, "{fault:?}");
}

#[test]
fn a_body_that_does_not_match_its_hash_is_an_error_and_not_written() {
    let (_w, stand, a, b) = two_machines();
    stand.set(Fault::WrongHash);
    b.fails(&["sync", "now"]);
    // The other note of the same reply verifies and arrives.
    assert_eq!(b.note("good"), a.note("good"));
    fails_then_converges(&stand, &a, &b, Fault::WrongHash, &[TARGET, "hash"], None);

    // A new version damaged on the way leaves the version b has.
    let had = b.note(TARGET).unwrap();
    a.ok(&["edit", TARGET, "--body", "second text\n"]);
    a.ok(&["sync", "now"]);
    fails_then_converges(
        &stand,
        &a,
        &b,
        Fault::WrongHash,
        &[TARGET, "hash"],
        Some(&had),
    );
}

#[test]
fn a_listed_note_without_its_body_is_an_error() {
    let (_w, stand, a, b) = two_machines();
    fails_then_converges(
        &stand,
        &a,
        &b,
        Fault::MissingBody,
        &[TARGET, "no body"],
        None,
    );
}

#[test]
fn a_revision_that_moves_between_pages_is_an_error() {
    let (_w, stand, a, b) = two_machines();
    fails_then_converges(
        &stand,
        &a,
        &b,
        Fault::RevisionMoves,
        &[TARGET, "no body"],
        None,
    );
}

#[test]
fn pages_that_never_end_are_an_error_not_a_loop() {
    let (_w, stand, a, b) = two_machines();
    fails_then_converges(
        &stand,
        &a,
        &b,
        Fault::EndlessPages,
        &["more notes follow", "brought none"],
        None,
    );
}

#[test]
fn a_reply_cut_short_is_an_error_and_writes_nothing() {
    let (_w, stand, a, b) = two_machines();
    stand.set(Fault::Truncated);
    b.fails(&["sync", "now"]);
    assert_eq!(b.note("good"), None);
    fails_then_converges(&stand, &a, &b, Fault::Truncated, &["cut short"], None);
}

#[test]
fn an_html_page_with_status_200_is_an_error_and_writes_nothing() {
    let (_w, stand, a, b) = two_machines();
    stand.set(Fault::Html);
    b.fails(&["sync", "now"]);
    assert_eq!(b.note("good"), None);
    fails_then_converges(&stand, &a, &b, Fault::Html, &["HTML"], None);
}

/// `memoria-sync serve` on the fs store in `dir`, its log in `dir/server.log`; killed on drop.
struct LoggedServer {
    child: Child,
    url: String,
    store: String,
    log: PathBuf,
}

impl LoggedServer {
    fn start(dir: &Path) -> LoggedServer {
        use std::io::{BufRead, BufReader};
        let store = format!("fs:{}", dir.join("store").display());
        let log = dir.join("server.log");
        let mut child = Command::new(sync_binary())
            .args(["serve", "--store", &store, "--listen", "127.0.0.1:0"])
            .env("MEMORIA_SYNC_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_owned();
        LoggedServer {
            child,
            url,
            store,
            log,
        }
    }
}

impl Drop for LoggedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The one stored revision file of note `id` in the user scope of `user`.
fn stored_revision(dir: &Path, user: &str, id: &str) -> PathBuf {
    let objects = dir
        .join("store/users")
        .join(user)
        .join("memory/objects")
        .join(id);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&objects)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.remove(0)
}

#[test]
fn a_stored_revision_edited_in_the_store_is_reported_and_not_served() {
    // Bit rot, or a hand edit in the store's folder.
    damaged_revision_is_reported_and_repaired(|file| {
        let text = std::fs::read_to_string(file).unwrap();
        std::fs::write(file, text.replace("original", "0riginal")).unwrap();
    });
}

#[test]
fn a_stored_revision_missing_from_the_store_is_reported_and_the_scope_still_served() {
    // A file lost from the store's folder (a failed disk, a restore that missed it).
    damaged_revision_is_reported_and_repaired(|file| std::fs::remove_file(file).unwrap());
}

/// One note's stored revision `damage`d: a snapshot leaves its body out and names it as damaged
/// while the other notes are served; a machine without it is told which note; a new version
/// from the machine that holds it repairs it everywhere.
fn damaged_revision_is_reported_and_repaired(damage: impl Fn(&Path)) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let server = LoggedServer::start(&dir);
    let token = create_token(&server.store, "alice", &[]);
    let device = |name: &str| {
        let home = dir.join(name);
        std::fs::create_dir_all(&home).unwrap();
        let d = Device::new(home, &token);
        d.login(&server.url);
        d
    };
    let a = device("a");
    for (id, body) in [("good", "fine\n"), (TARGET, "original text\n")] {
        a.add(id, id, body);
    }
    a.ok(&["sync", "now"]);
    damage(&stored_revision(&dir, "alice", TARGET));

    // Asked directly, the server leaves the body out and names the note as damaged.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let snap: Value = rt.block_on(async {
        post_json(
            &reqwest::Client::new(),
            &format!("{}/v1/memory/snapshot", server.url),
            &token,
            &json!({"scope": "user"}),
        )
        .await
    });
    let bodies: Vec<&Value> = snap["bodies"].as_array().unwrap().iter().collect();
    assert!(bodies.iter().all(|b| b["id"] != TARGET), "{snap}");
    assert!(bodies.iter().any(|b| b["id"] == "good"), "{snap}");
    assert_eq!(snap["damaged"][0]["id"], TARGET, "{snap}");
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(
        log.contains("damaged") && log.contains(&format!("objects/{TARGET}/")),
        "{log}"
    );

    // A machine that does not hold it gets an error naming it, and the good note.
    let b = device("b");
    let err = b.fails(&["sync", "now"]);
    assert!(err.contains(TARGET) && err.contains("damaged"), "{err}");
    assert_eq!(b.note(TARGET), None);
    assert_eq!(b.note("good"), a.note("good"));
    let st = user_status(&b);
    assert!(
        st["lastError"]
            .as_str()
            .unwrap_or_default()
            .contains(TARGET),
        "{st}"
    );

    // A new version from the machine that holds it replaces the damaged one everywhere.
    a.ok(&["edit", TARGET, "--body", "repaired text\n"]);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert_eq!(b.note(TARGET), a.note(TARGET));
    assert_eq!(user_status(&b)["lastError"], Value::Null);
}

#[test]
fn a_commit_whose_body_does_not_match_its_hash_is_refused_naming_the_note() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().canonicalize().unwrap();
    let server = LoggedServer::start(&dir);
    let token = create_token(&server.store, "alice", &[]);
    let (file, hash) = note_file(TARGET, "Bad", "one\n");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (status, body): (u16, Value) = rt.block_on(async {
        let r = reqwest::Client::new()
            .post(format!("{}/v1/memory/commit", server.url))
            .bearer_auth(&token)
            .json(&json!({"scope": "user", "changes": [{
                "id": TARGET, "op": "put", "baseRevision": null,
                "body": file.replace("one", "two"), "hash": hash.as_str(),
            }]}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    });
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["code"], "hash_mismatch", "{body}");
    assert!(body["message"].as_str().unwrap().contains(TARGET), "{body}");
    // Nothing was stored.
    assert!(!dir.join("store/users/alice/memory/manifest.json").exists());
    assert!(
        !dir.join("store/users/alice/memory/objects")
            .join(TARGET)
            .exists()
    );
}

/// The `{code, detail}` of a failed `memoria --json sync now` on `d`.
fn sync_now_error(d: &Device) -> Value {
    let err = d.fails(&["--json", "sync", "now"]);
    let last = err.lines().last().unwrap_or_default();
    serde_json::from_str::<Value>(last).unwrap_or_else(|e| panic!("{e}: {err}"))["error"].clone()
}

/// The error codes only a server can cause, each from a server answering so: a newer protocol
/// is `protocol_too_new`, a commit refused as too large is `too_large`, commits refused as stale
/// pass after pass are `changed_since`. Nothing is lost: healthy again, the edit arrives.
#[test]
fn a_server_newer_lowered_or_always_changing_gives_its_error_code() {
    let (_w, stand, a, b) = two_machines();
    stand.set(Fault::NewerProtocol);
    let e = sync_now_error(&b);
    assert_eq!(e["code"], "protocol_too_new", "{e}");
    assert_eq!(
        e["detail"]["serverProtocol"],
        memoria_shared::protocol::PROTOCOL_VERSION + 1,
        "{e}"
    );
    assert_eq!(b.note(TARGET), None, "nothing is taken from a newer server");

    stand.set(Fault::Healthy);
    b.ok(&["sync", "now"]);
    b.ok(&["edit", TARGET, "--body", "edited on b\n"]);
    stand.set(Fault::CommitTooLarge);
    let e = sync_now_error(&b);
    assert_eq!(e["code"], "too_large", "{e}");
    assert_eq!(e["detail"]["status"], 413, "{e}");
    stand.set(Fault::CommitStale);
    let e = sync_now_error(&b);
    assert_eq!(e["code"], "changed_since", "{e}");

    stand.set(Fault::Healthy);
    b.ok(&["sync", "now"]);
    a.ok(&["sync", "now"]);
    assert!(a.note(TARGET).unwrap().contains("edited on b"));
}
