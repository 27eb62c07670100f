//! Sync in real processes over time: the coordinators of `memoria watch` and `memoria mcp`
//! (a local write uploads seconds later; a dead server never stops them and shows in `sync
//! status`), `memoria sync off` cancelling a pass in flight in another process (held by a proxy
//! in front of the real `memoria-sync`), a `memoria sync now` killed with SIGKILL while it
//! writes downloaded notes, and `sync status` naming the next sync only while a background
//! syncer runs.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use memoria_shared::note::FileContext;
use memoria_shared::{Note, NoteId};
use memoria_tests::proxy::{Hold, Proxy};
use memoria_tests::sync_fixture::{Backend, Device};
use serde_json::{Value, json};

use crate::sync_e2e::{World, json as parse_json, world};

/// A long-running `memoria` process whose stdout lines arrive on a channel; killed on drop.
struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Running {
    fn start(d: &Device, args: &[&str]) -> Running {
        let mut child = d
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting memoria");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Running {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    /// The next JSON line that satisfies `want`, within `timeout`.
    fn expect(&self, timeout: Duration, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what} within {timeout:?}"));
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && want(&v)
            {
                return v;
            }
        }
    }

    /// Sends one JSON-RPC message (MCP over stdio: one JSON object a line).
    fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().expect("stdin");
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    /// Calls an MCP method and returns its `result` (panics on a JSON-RPC error).
    fn call(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let reply = self.expect(Duration::from_secs(60), method, |v| v["id"] == id);
        assert!(reply["error"].is_null(), "{method}: {reply}");
        reply["result"].clone()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(timeout: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Writes a note file straight into a home's user scope, as an editor would.
fn write_note(d: &Device, id: &str, body: &str) -> String {
    let note = Note::new(NoteId::new(id).unwrap(), format!("Note {id}"), body);
    let text = note.serialize();
    let dir = d.home.join("memory/user");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{id}.md")), &text).unwrap();
    text
}

/// Note files of a home's user scope: name → contents.
fn user_notes(home: &Path) -> std::collections::BTreeMap<String, String> {
    std::fs::read_dir(home.join("memory/user"))
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

fn is_report(v: &Value, uploaded: u64) -> bool {
    v["sync"] == "user" && v["report"]["uploaded"] == uploaded
}

fn status(d: &Device) -> Value {
    parse_json(&d.ok(&["--json", "sync", "status"]))
}

#[test]
fn sync_watch_uploads_a_local_write_seconds_later_and_a_burst_in_one_pass() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let (a, b) = (w.device("a", &token), w.device("b", &token));
    let watch = Running::start(&a, &["--json", "watch"]);
    watch.expect(Duration::from_secs(30), "the first pass", |v| {
        v["sync"] == "user"
    });

    let t = Instant::now();
    let text = write_note(&a, "from-an-editor", "typed in an editor\n");
    watch.expect(Duration::from_secs(30), "the upload", |v| is_report(v, 1));
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(2900) && took < Duration::from_secs(20),
        "uploaded {took:?} after the write (should be ~3 s)"
    );
    b.ok(&["sync", "now"]);
    assert_eq!(b.note("from-an-editor").as_deref(), Some(text.as_str()));

    // A burst of writes is one pass.
    for i in 0..5 {
        write_note(&a, &format!("burst-{i}"), "one of five\n");
    }
    let v = watch.expect(Duration::from_secs(30), "the burst's pass", |v| {
        v["sync"] == "user"
    });
    assert_eq!(v["report"]["uploaded"], 5, "{v}");
    assert!(status(&a)["scopes"][0]["lastError"].is_null());
}

/// A watcher started before `sync encrypt` ran in another process picks the account key up:
/// its next pass uploads the new note encrypted instead of failing as locked until a restart,
/// and another machine that unlocks reads it.
#[test]
fn sync_watch_started_before_encryption_syncs_encrypted_after_it() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let (a, b) = (w.device("a", &token), w.device("b", &token));
    let watch = Running::start(&a, &["--json", "watch"]);
    watch.expect(Duration::from_secs(30), "the first pass", |v| {
        v["sync"] == "user"
    });
    let passphrase = a.home.join("passphrase.txt");
    std::fs::write(&passphrase, "correct horse battery staple\n").unwrap();
    let passphrase = passphrase.display().to_string();
    a.ok(&["sync", "encrypt", "--passphrase-file", &passphrase]);

    let text = write_note(
        &a,
        "after-encrypt",
        "written once the account was encrypted\n",
    );
    let v = watch.expect(Duration::from_secs(30), "the upload", |v| {
        v["sync"] == "user" && (v["report"]["uploaded"] == 1 || !v["error"].is_null())
    });
    assert!(v["error"].is_null(), "the watcher's pass failed: {v}");
    assert!(status(&a)["scopes"][0]["lastError"].is_null());
    b.ok(&["sync", "unlock", "--passphrase-file", &passphrase]);
    b.ok(&["sync", "now"]);
    assert_eq!(b.note("after-encrypt").as_deref(), Some(text.as_str()));
}

/// A watcher holding the account key in memory while `sync rotate-key --lock-out` runs in
/// another process of the same machine: its next pass, refused under the old key, takes the new
/// key from this machine's key store and uploads under it; the note reaches another machine
/// unlocked with the passphrase.
#[test]
fn sync_watch_running_through_a_key_rotation_syncs_under_the_new_key() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let (a, b) = (w.device("a", &token), w.device("b", &token));
    let passphrase = a.home.join("passphrase.txt");
    std::fs::write(&passphrase, "correct horse battery staple\n").unwrap();
    let passphrase = passphrase.display().to_string();
    a.ok(&["sync", "now"]);
    a.ok(&["sync", "encrypt", "--passphrase-file", &passphrase]);
    let watch = Running::start(&a, &["--json", "watch"]);
    watch.expect(Duration::from_secs(30), "the first pass", |v| {
        v["sync"] == "user"
    });
    a.ok(&[
        "sync",
        "rotate-key",
        "--lock-out",
        "--passphrase-file",
        &passphrase,
    ]);

    let text = write_note(&a, "after-rotation", "written once the key was rotated\n");
    let v = watch.expect(Duration::from_secs(30), "the upload", |v| {
        v["sync"] == "user" && (v["report"]["uploaded"] == 1 || !v["error"].is_null())
    });
    assert!(v["error"].is_null(), "the watcher's pass failed: {v}");
    b.ok(&["sync", "unlock", "--passphrase-file", &passphrase]);
    b.ok(&["sync", "now"]);
    assert_eq!(b.note("after-rotation").as_deref(), Some(text.as_str()));
}

#[test]
fn sync_mcp_agent_writes_upload_and_a_dead_server_never_stops_the_session() {
    let mut w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let (a, b) = (w.device("a", &token), w.device("b", &token));
    let mut mcp = Running::start(&a, &["mcp"]);
    mcp.call(
        1,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "sync-test", "version": "0"}}),
    );
    mcp.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let remember = |mcp: &mut Running, id: u64, summary: &str| {
        let r = mcp.call(
            id,
            "tools/call",
            json!({"name": "remember", "arguments": {"summary": summary,
                   "body": "said in a session\n", "type": "user"}}),
        );
        assert_ne!(r["isError"], true, "{r}");
        r["structuredContent"]["id"].as_str().unwrap().to_owned()
    };
    let id = remember(&mut mcp, 2, "Prefers green tea");
    let note_id = id.rsplit('/').next().unwrap().to_owned();
    // The agent's write reaches the cloud within seconds, without anyone syncing by hand.
    wait_until(Duration::from_secs(30), "the agent's note on b", || {
        let out = b.run(&["sync", "now"]);
        let err = String::from_utf8_lossy(&out.stderr);
        // Asking this often can meet the server's rate limit (a and b share the account):
        // being told to slow down is a correct answer here, anything else is not.
        assert!(out.status.success() || err.contains("slow down"), "{err}");
        if b.note(&note_id).is_some() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(300));
        false
    });

    // The server dies: the session goes on, and the failure shows in the status.
    w.server.kill();
    remember(&mut mcp, 3, "Works from Lisbon");
    wait_until(Duration::from_secs(30), "the error in sync status", || {
        status(&a)["scopes"][0]["lastError"]
            .as_str()
            .is_some_and(|e| e.starts_with("user: cannot reach the sync server"))
    });
    let found = mcp.call(
        4,
        "tools/call",
        json!({"name": "memory_search", "arguments": {"query": "Lisbon"}}),
    );
    assert!(found.to_string().contains("Works from Lisbon"), "{found}");
    // Closing the session ends the server cleanly.
    mcp.stdin.take();
    let status = mcp.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

/// A server, a proxy in front of it, and home `a` signed in through the proxy with `n` notes.
fn behind_a_proxy(n: usize) -> (World, String, Proxy, Device) {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let proxy = Proxy::start(&w.server.url);
    let a = w.device_via("a", &token, &proxy.url);
    for i in 0..n {
        write_note(&a, &format!("a-{i:03}"), &format!("note {i} of a\n"));
    }
    (w, token, proxy, a)
}

#[test]
fn sync_off_cancels_a_request_in_flight_in_the_watcher_and_on_resumes_it() {
    let (w, token, proxy, a) = behind_a_proxy(40);
    proxy.hold(Hold::Request("/v1/memory/commit".into()));
    let watch = Running::start(&a, &["--json", "watch"]);
    wait_until(Duration::from_secs(30), "the upload held", || {
        proxy.held() == 1
    });

    let t = Instant::now();
    a.ok(&["sync", "off"]);
    watch.expect(Duration::from_secs(10), "the pass stopping", |v| {
        v["sync"] == "user"
            && v["error"]
                .as_str()
                .is_some_and(|e| e.contains("sync is off"))
    });
    wait_until(Duration::from_secs(5), "the request abandoned", || {
        proxy.abandoned() == 1
    });
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let before = proxy.forwarded();
    proxy.hold(Hold::Nothing);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        proxy.forwarded(),
        before,
        "nothing reached the server after off"
    );
    assert!(!before.iter().any(|l| l.contains("commit")), "{before:?}");
    let st = status(&a);
    assert_eq!(st["on"], false);
    assert!(st["scopes"][0]["lastError"].is_null(), "{st}");
    let b = w.device("b", &token);
    b.ok(&["sync", "now"]);
    assert!(user_notes(&b.home).is_empty());

    // On again: the watcher's coordinator resumes by itself and nothing was lost.
    a.ok(&["sync", "on"]);
    watch.expect(Duration::from_secs(30), "the upload after on", |v| {
        is_report(v, 40)
    });
    b.ok(&["sync", "now"]);
    assert_eq!(user_notes(&a.home), user_notes(&b.home));
    let again = a.ok(&["sync", "now"]);
    assert!(again.contains("uploaded 0"), "{again}");
    assert_eq!(parse_json(&a.ok(&["--json", "conflicts"])), json!([]));
}

#[test]
fn sync_off_while_a_commit_reply_is_in_flight_loses_nothing() {
    let (w, token, proxy, a) = behind_a_proxy(10);
    // The server applies the commit; its reply never reaches the client.
    proxy.hold(Hold::Reply("/v1/memory/commit".into()));
    let mut now = a.spawn(&["sync", "now"]);
    wait_until(Duration::from_secs(30), "the reply held", || {
        proxy.held() == 1
    });
    let t = Instant::now();
    a.ok(&["sync", "off"]);
    let out = now.wait_with_output_timeout(Duration::from_secs(10));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(!out.0.success());
    assert!(out.1.contains("cloud sync is off"), "{}", out.1);
    wait_until(Duration::from_secs(5), "the reply abandoned", || {
        proxy.abandoned() == 1
    });
    proxy.hold(Hold::Nothing);

    // The server has the notes; this machine's base store does not know it yet.
    let b = w.device("b", &token);
    b.ok(&["sync", "now"]);
    assert_eq!(user_notes(&b.home).len(), 10);
    a.ok(&["sync", "on"]);
    let again = a.ok(&["sync", "now"]);
    assert!(
        again.contains("uploaded 0"),
        "adopted, not uploaded twice: {again}"
    );
    assert_eq!(parse_json(&a.ok(&["--json", "conflicts"])), json!([]));
    assert_eq!(user_notes(&a.home), user_notes(&b.home));
}

trait WaitTimeout {
    /// Waits for the child (killing it after `timeout`); its status and stderr.
    fn wait_with_output_timeout(&mut self, timeout: Duration)
    -> (std::process::ExitStatus, String);
}

impl WaitTimeout for Child {
    fn wait_with_output_timeout(
        &mut self,
        timeout: Duration,
    ) -> (std::process::ExitStatus, String) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.kill();
                panic!("the process did not stop within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        if let Some(mut e) = self.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        (status, err)
    }
}

#[test]
fn sync_a_process_killed_while_writing_downloads_converges_with_no_torn_note() {
    const N: usize = 1500;
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    for i in 0..N {
        write_note(
            &a,
            &format!("n{i:04}"),
            &format!("fact {i}\nwith a second line\n"),
        );
    }
    a.ok(&["sync", "now"]);
    let b = w.device("b", &token);
    for i in 0..5 {
        write_note(
            &b,
            &format!("b-own-{i}"),
            "written on b before its first sync\n",
        );
    }
    let mut sync = b.spawn(&["sync", "now"]);
    // Kill it in the middle of writing the downloads.
    let mut at_kill = 0;
    wait_until(Duration::from_secs(120), "downloads being written", || {
        at_kill = user_notes(&b.home).len();
        at_kill >= 5 + 50
    });
    assert!(
        sync.try_wait().unwrap().is_none(),
        "the pass finished before the kill"
    );
    sync.kill().unwrap(); // SIGKILL
    sync.wait().unwrap();
    let after_kill = user_notes(&b.home);
    assert!(
        after_kill.len() < N + 5,
        "killed after every download was written"
    );

    // No torn note: every file is complete, and each download is the cloud's text exactly.
    let a_notes = user_notes(&a.home);
    for (name, text) in &after_kill {
        Note::parse(
            text,
            FileContext {
                relative_path: name,
            },
        )
        .unwrap_or_else(|e| panic!("{name} is torn: {e}"));
        if !name.starts_with("b-own-") {
            assert_eq!(Some(text), a_notes.get(name), "{name}");
        }
    }

    // Restart: sync again on both, and everything is everywhere.
    b.ok(&["sync", "now"]);
    a.ok(&["sync", "now"]);
    let (a_notes, b_notes) = (user_notes(&a.home), user_notes(&b.home));
    assert_eq!(a_notes.len(), N + 5);
    assert_eq!(a_notes, b_notes);
    assert_eq!(parse_json(&b.ok(&["--json", "conflicts"])), json!([]));
    let again = b.ok(&["sync", "now"]);
    assert!(again.contains("uploaded 0, downloaded +0 ~0 -0"), "{again}");
}

#[test]
fn sync_status_names_the_next_sync_only_while_a_background_syncer_runs() {
    let mut w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    write_note(&a, "n", "n\n");
    a.ok(&["sync", "now"]);
    w.server.kill();

    // A one-shot sync against a server that is down: nothing retries it, and status says so.
    let failed = a.fails(&["sync", "now"]);
    assert!(failed.contains("cannot reach the sync server"), "{failed}");
    assert!(!failed.contains("will retry"), "{failed}");
    let st = a.ok(&["sync", "status"]);
    assert!(
        st.contains("next sync: none planned")
            && st.contains("run `memoria sync now` (or keep `memoria watch` running)"),
        "{st}"
    );
    assert_eq!(status(&a)["scopes"][0]["background"], Value::Null);

    // With `memoria watch` running, its retry is named: a minute after its failed pass.
    let watch = Running::start(&a, &["--json", "watch"]);
    wait_until(
        Duration::from_secs(60),
        "the watcher's next pass in the status",
        || {
            let bg = status(&a)["scopes"][0]["background"].clone();
            bg["processes"] == 1
                && bg["nextAttemptMs"]
                    .as_i64()
                    .is_some_and(|t| t > now_ms() + 30_000)
        },
    );
    let st = a.ok(&["sync", "status"]);
    assert!(
        st.contains("next sync: in ") && st.contains("by a running background sync"),
        "{st}"
    );
    // Killed, it plans nothing any more: the status says so at once.
    drop(watch);
    let st = a.ok(&["sync", "status"]);
    assert!(st.contains("next sync: none planned"), "{st}");
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}
