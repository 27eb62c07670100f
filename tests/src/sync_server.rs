//! Fixtures for the sync-server tests: note files with their hashes, an in-process server on a
//! real port, and the `memoria-sync` binary run as a child process. Every fixture cleans up on
//! drop.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use memoria_shared::protocol::{Change, ChangeOp};
use memoria_shared::{ContentHash, Note, NoteId};
use memoria_sync_server::AppState;

/// `POST url` with `token` as its bearer token and the JSON `body`; the answer.
pub async fn send_post(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    body: &serde_json::Value,
) -> reqwest::Response {
    http.post(url)
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// [`send_post`], its answer's JSON read as `T`.
pub async fn post_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    body: &serde_json::Value,
) -> T {
    send_post(http, url, token, body)
        .await
        .json()
        .await
        .unwrap()
}

/// An admin key long enough for `memoria-sync` to accept.
pub const ADMIN_KEY: &str = "admin-key-for-tests-0123456789abcdef";

/// A note file for `id` and its content hash, as a client would commit it.
pub fn note_file(id: &str, summary: &str, body: &str) -> (String, ContentHash) {
    let note = Note::new(NoteId::new(id).expect("valid test id"), summary, body);
    (note.serialize(), ContentHash::of_synced_note(&note))
}

/// A `put` change for a fresh note file.
pub fn put(id: &str, base: Option<&str>, body: &str) -> Change {
    let (file, hash) = note_file(id, &format!("summary of {id}"), body);
    Change {
        id: NoteId::new(id).expect("valid test id"),
        op: ChangeOp::Put,
        base_revision: base.map(str::to_owned),
        body: Some(file),
        hash: Some(hash),
    }
}

/// A `delete` change.
pub fn delete(id: &str, base: Option<&str>) -> Change {
    Change {
        id: NoteId::new(id).expect("valid test id"),
        op: ChangeOp::Delete,
        base_revision: base.map(str::to_owned),
        body: None,
        hash: None,
    }
}

/// The API served in this process on 127.0.0.1 and a free port; shut down (gracefully) on drop.
pub struct InProcessServer {
    pub addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl InProcessServer {
    pub async fn start(state: Arc<AppState>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind port 0");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(memoria_sync_server::serve_state(state, listener, async {
            let _ = rx.await;
        }));
        InProcessServer {
            addr,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Stops accepting, lets requests in flight finish, and waits for the server to end.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await
                .expect("server task")
                .expect("server ended cleanly");
        }
    }
}

impl Drop for InProcessServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// The `memoria-sync` binary (`MEMORIA_SYNC_BIN` overrides). The workspace build that runs the
/// tests builds it, because `sync-server` has integration tests of its own.
pub fn sync_binary() -> PathBuf {
    match std::env::var_os("MEMORIA_SYNC_BIN") {
        Some(p) => PathBuf::from(p),
        None => crate::workspace_bin("memoria-sync"),
    }
}

/// Runs `memoria-sync ARGS` to completion; returns stdout, panicking with stderr on failure.
pub fn run_sync(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new(sync_binary())
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run memoria-sync");
    assert!(
        out.status.success(),
        "memoria-sync {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// `memoria-sync token create`; returns the token (the last line of stdout).
pub fn create_token(store: &str, user: &str, env: &[(&str, &str)]) -> String {
    let out = run_sync(&["token", "create", "--store", store, "--user", user], env);
    out.lines().last().expect("a token line").trim().to_owned()
}

/// `memoria-sync serve` as a child process on a free port; killed on drop.
pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
}

/// Starts `memoria-sync serve` on `store` at a free loopback port, with `env` and its log at
/// `warn`, its standard error going to `stderr`; the child and its URL
/// (`http://127.0.0.1:PORT`) once it listens.
pub fn spawn_serve<'a>(
    store: &str,
    env: impl IntoIterator<Item = (&'a str, &'a str)>,
    stderr: Stdio,
) -> (Child, String) {
    let mut child = Command::new(sync_binary())
        .args(["serve", "--store", store, "--listen", "127.0.0.1:0"])
        .envs(env)
        .env("MEMORIA_SYNC_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start memoria-sync serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the bound address");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line from memoria-sync serve: {line:?}"))
        .to_owned();
    (child, url)
}

impl ServerProcess {
    pub fn start(store: &str, env: &[(&str, &str)]) -> Self {
        let (child, url) = spawn_serve(store, env.iter().copied(), Stdio::inherit());
        let addr = url
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("not an http://ADDRESS: {url}"));
        ServerProcess { child, addr }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Kills the server and waits for it.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM (Unix) and waits up to `timeout` for the server to exit on its own;
    /// returns its exit status, or `None` if it had to be killed.
    pub fn terminate(mut self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "could not send SIGTERM");
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        None
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
