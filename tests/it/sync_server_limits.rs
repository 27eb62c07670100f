//! The sync server's bounds on what one client can hold, over raw sockets: the header timeout
//! (a half-sent header, an idle kept-alive connection), the connection cap, the request
//! timeout (a body that trickles in, a handler that takes too long), a response left unread,
//! and shutdown within its grace with a stalled client held. Most run the `memoria-sync`
//! binary with small limits in its config file; the ones that need a slow store or a paused
//! reader run the server in process.
//!
//! Every wait here is bounded: a connection expected to close is read with a timeout a few
//! seconds past the limit under test, and a server process is killed when its guard drops.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memoria_shared::FixedClock;
use memoria_shared::protocol::Change;
use memoria_sync_server::config::Limits;
use memoria_sync_server::layout::UserId;
use memoria_sync_server::store::fs::FsStore;
use memoria_sync_server::store::{ETag, Fetched, ObjectStore, StoreError};
use memoria_sync_server::{AppState, SeededRandom, Settings, auth};
use memoria_tests::sync_server::{
    ADMIN_KEY, InProcessServer, create_token, put, send_post, sync_binary,
};
use serde_json::json;

/// Slack on top of a limit before a test calls the server wrong: the machine may be busy.
const MARGIN: Duration = Duration::from_secs(3);

/// `memoria-sync serve` with `[limits]` from a config file and its log in a file; killed on
/// drop.
struct LimitedServer {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl LimitedServer {
    fn start(limits: &str) -> Self {
        Self::start_in(tempfile::tempdir().unwrap(), limits)
    }

    /// Stops this server and starts another on the same store with `limits`.
    fn restart(mut self, limits: &str) -> Self {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dir = std::mem::replace(&mut self.dir, tempfile::tempdir().unwrap());
        drop(self);
        Self::start_in(dir, limits)
    }

    /// A server whose config file and store live in `dir`; `limits` is appended after the
    /// `[limits]` header (a later `[quotas]` header in it starts that section).
    fn start_in(dir: tempfile::TempDir, limits: &str) -> Self {
        let config = dir.path().join("sync.toml");
        std::fs::write(
            &config,
            format!(
                "store = \"fs:{}\"\nadmin_key = \"{ADMIN_KEY}\"\n[limits]\n{limits}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("serve.log")).unwrap();
        let mut child = Command::new(sync_binary())
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .env("MEMORIA_SYNC_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start memoria-sync serve");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line from serve: {line:?}"))
            .parse()
            .unwrap();
        LimitedServer { child, addr, dir }
    }

    fn store(&self) -> String {
        format!("fs:{}", self.dir.path().join("data").display())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("serve.log")
    }

    /// Sends SIGTERM and waits up to `within` for the process to exit by itself.
    fn terminate(&mut self, within: Duration) -> Option<(ExitStatus, Duration)> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "could not send SIGTERM");
        let start = Instant::now();
        while start.elapsed() < within {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some((status, start.elapsed()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for LimitedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s
}

/// The first half of a request header: the server waits for the rest.
const HALF_A_HEADER: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: memoria\r\nx-wait: ";

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: memoria\r\n\r\n";

/// One HTTP/1.1 response with a `content-length`.
#[derive(Debug)]
struct Reply {
    status: u16,
    /// The header block, lowercased.
    head: String,
    body: Vec<u8>,
}

fn read_reply(s: &mut TcpStream) -> Reply {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = s.read(&mut byte).expect("a response header");
        assert!(
            n == 1,
            "closed mid-header after {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap().to_lowercase();
    let status = head[9..12].parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    Reply { status, head, body }
}

/// Waits until the server ends the connection (EOF or reset), at most `within`; returns what
/// arrived before the end.
fn wait_closed(s: &mut TcpStream, within: Duration) -> Vec<u8> {
    s.set_read_timeout(Some(within)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("the connection is still open after {within:?}")
            }
            Err(_) => return got, // reset
        }
    }
}

/// A client that sends half a header is disconnected once the header timeout passes, with no
/// answer; so is a kept-alive connection left idle after its last response. The timer counts
/// each wait for a header, not the connection's age: requests spaced under the timeout keep
/// one connection serving for longer than it.
#[test]
fn half_a_header_and_an_idle_kept_alive_connection_are_closed_after_the_header_timeout() {
    let server = LimitedServer::start("header_timeout_secs = 2");
    let timeout = Duration::from_secs(2);
    let addr = server.addr;
    let half = std::thread::spawn(move || {
        let started = Instant::now();
        let mut s = connect(addr);
        s.write_all(HALF_A_HEADER).unwrap();
        let got = wait_closed(&mut s, timeout + MARGIN);
        (started.elapsed(), got)
    });

    let mut s = connect(addr);
    let opened = Instant::now();
    let mut last_reply = opened;
    for i in 0..4 {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(800));
        }
        s.write_all(HEALTHZ).unwrap();
        let r = read_reply(&mut s);
        assert_eq!(r.status, 200, "{r:?}");
        assert!(!r.head.contains("connection: close"), "{r:?}");
        last_reply = Instant::now();
    }
    assert!(
        opened.elapsed() > timeout,
        "the requests spanned less than the header timeout: nothing shown"
    );
    let got = wait_closed(&mut s, timeout + MARGIN);
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    assert!(
        last_reply.elapsed() >= timeout - Duration::from_millis(300),
        "closed {:?} after its last reply, before the header timeout",
        last_reply.elapsed()
    );

    let (elapsed, got) = half.join().unwrap();
    assert!(
        got.is_empty(),
        "a half-sent header is dropped, not answered: {:?}",
        String::from_utf8_lossy(&got)
    );
    assert!(
        elapsed >= timeout - Duration::from_millis(300),
        "closed after {elapsed:?}, before the header timeout"
    );
}

/// With `max_connections = 3` and three clients stalled mid-header, a fourth connection is
/// answered 503 `contention` and closed at once (long before the stalled ones time out), and
/// logged. The three held connections are not disturbed: one of them finishes its header and
/// is answered. Once the others time out, new connections are served again.
#[test]
fn a_connection_over_the_cap_is_answered_503_and_closed_without_disturbing_the_others() {
    let server = LimitedServer::start("max_connections = 3\nheader_timeout_secs = 3");
    let held_since = Instant::now();
    let mut held: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = connect(server.addr);
            s.write_all(HALF_A_HEADER).unwrap();
            s
        })
        .collect();

    let mut extra = connect(server.addr);
    let r = read_reply(&mut extra);
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.head.contains("connection: close") && r.head.contains("retry-after: 1"));
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["code"], "contention", "{body}");
    assert!(
        wait_closed(&mut extra, MARGIN).is_empty(),
        "the refused connection is closed after its 503"
    );
    assert!(
        held_since.elapsed() < Duration::from_secs(3),
        "the refusal came only after the held connections timed out"
    );

    // A held connection is served as if nothing happened.
    held[0].write_all(b"1\r\n\r\n").unwrap();
    assert_eq!(read_reply(&mut held[0]).status, 200);

    for s in &mut held[1..] {
        assert!(wait_closed(s, Duration::from_secs(3) + MARGIN).is_empty());
    }
    let mut fresh = connect(server.addr);
    fresh.write_all(HEALTHZ).unwrap();
    assert_eq!(read_reply(&mut fresh).status, 200);

    let log = server.log();
    assert!(
        log.contains("refused connections") && log.contains("max_connections=3"),
        "the refusal is logged: {log}"
    );
}

/// A request whose body trickles in for longer than `request_timeout_secs` is answered 408
/// `request_timeout` and its connection closed. The header timeout (shorter here) does not
/// apply once the header is complete.
#[test]
fn a_body_that_trickles_in_past_the_request_timeout_is_answered_408_and_closed() {
    let server = LimitedServer::start("header_timeout_secs = 1\nrequest_timeout_secs = 2");
    let token = create_token(&server.store(), "alice", &[]);
    let mut s = connect(server.addr);
    let head = format!(
        "POST /v1/memory/commit HTTP/1.1\r\nhost: memoria\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: 100000\r\n\r\n{{"
    );
    s.write_all(head.as_bytes()).unwrap();
    let sent_head = Instant::now();
    let mut writer = s.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        // A byte every 100 ms until the server stops listening (or 10 s at most).
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(100));
            if writer.write_all(b" ").is_err() {
                break;
            }
        }
    });
    let r = read_reply(&mut s);
    let answered = sent_head.elapsed();
    assert_eq!(r.status, 408, "{r:?}");
    assert!(r.head.contains("connection: close"), "{r:?}");
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["code"], "request_timeout", "{body}");
    assert!(
        answered >= Duration::from_millis(1700) && answered < Duration::from_secs(2) + MARGIN,
        "answered {answered:?} after the header, not at the request timeout"
    );
    wait_closed(&mut s, MARGIN);
    trickle.join().unwrap();
    let log = server.log();
    assert!(log.contains("request timed out"), "{log}");
}

/// SIGTERM while a client holds a half-sent header: the server stops accepting at once and
/// exits by itself, successfully, once the shutdown grace is over, dropping the stalled
/// connection (whose header timeout is far longer).
#[test]
fn sigterm_with_a_stalled_client_held_exits_within_the_grace() {
    let mut server = LimitedServer::start(
        "header_timeout_secs = 60\nrequest_timeout_secs = 60\nshutdown_grace_secs = 2",
    );
    let mut stalled = connect(server.addr);
    stalled.write_all(HALF_A_HEADER).unwrap();
    // The server has taken the connection once it answers on another one.
    let mut probe = connect(server.addr);
    probe.write_all(HEALTHZ).unwrap();
    assert_eq!(read_reply(&mut probe).status, 200);
    drop(probe);

    let grace = Duration::from_secs(2);
    let (status, took) = server
        .terminate(grace + MARGIN)
        .expect("serve did not exit within its shutdown grace of SIGTERM");
    assert!(status.success(), "serve exited with {status}");
    assert!(
        took >= grace - Duration::from_millis(300),
        "exited {took:?} after SIGTERM: the stalled connection was not given the grace"
    );
    assert!(wait_closed(&mut stalled, MARGIN).is_empty());
    let log = server.log();
    assert!(log.contains("dropped=1"), "{log}");
    assert!(
        TcpStream::connect(server.addr).is_err(),
        "still accepting after exit"
    );
}

/// A store whose reads take `delay`, and whose manifest writes take `manifest_delay`: a
/// handler that is slow through no fault of the client.
#[derive(Debug)]
struct SlowStore {
    inner: FsStore,
    delay: Duration,
    manifest_delay: Duration,
}

impl SlowStore {
    async fn before_put(&self, key: &str) {
        if key.ends_with("/manifest.json") {
            tokio::time::sleep(self.manifest_delay).await;
        }
    }
}

#[async_trait::async_trait]
impl ObjectStore for SlowStore {
    async fn get(&self, key: &str, if_none_match: Option<&ETag>) -> Result<Fetched, StoreError> {
        tokio::time::sleep(self.delay).await;
        self.inner.get(key, if_none_match).await
    }
    async fn put_if_match(
        &self,
        key: &str,
        bytes: Vec<u8>,
        etag: &ETag,
    ) -> Result<ETag, StoreError> {
        self.before_put(key).await;
        self.inner.put_if_match(key, bytes, etag).await
    }
    async fn put_if_absent(&self, key: &str, bytes: Vec<u8>) -> Result<ETag, StoreError> {
        self.before_put(key).await;
        self.inner.put_if_absent(key, bytes).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner.list(prefix).await
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key).await
    }
}

/// A server in process over a store whose reads take `delay`, with `limits`; and alice's token.
async fn in_process(
    delay: Duration,
    limits: Limits,
) -> (tempfile::TempDir, InProcessServer, String) {
    in_process_slowed(delay, Duration::ZERO, limits).await
}

/// [`in_process`] whose manifest writes also take `manifest_delay`.
async fn in_process_slowed(
    delay: Duration,
    manifest_delay: Duration,
    limits: Limits,
) -> (tempfile::TempDir, InProcessServer, String) {
    let dir = tempfile::tempdir().unwrap();
    let fs = FsStore::open(dir.path()).unwrap();
    let token = auth::create_token(
        &fs,
        &SeededRandom::new(2),
        &UserId::new("alice").unwrap(),
        1,
    )
    .await
    .unwrap();
    let store = Arc::new(SlowStore {
        inner: fs,
        delay,
        manifest_delay,
    });
    let settings = Settings {
        limits,
        admin_key: Some(memoria_sync_server::Secret::new(ADMIN_KEY)),
        ..Settings::default()
    };
    let state = AppState::new(
        &settings,
        store,
        Arc::new(FixedClock::new(1)),
        Arc::new(SeededRandom::new(1)),
    );
    (dir, InProcessServer::start(state).await, token)
}

/// A handler that takes longer than the request timeout (a slow store) is answered 408.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handling_slower_than_the_request_timeout_is_answered_408() {
    let limits = Limits {
        request_timeout_secs: 1,
        ..Limits::default()
    };
    let (_dir, server, token) = in_process(Duration::from_secs(5), limits).await;
    let started = Instant::now();
    let r = reqwest::Client::new()
        .get(server.url("/v1/memory/identity"))
        .bearer_auth(&token)
        .timeout(Duration::from_secs(1) + MARGIN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 408);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited for the store"
    );
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], "request_timeout");
    server.stop().await;
}

/// On shutdown the server stops accepting at once; a request in flight (slowed by its store)
/// is still answered; a client stalled mid-header is dropped when the grace is over, and the
/// server then ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_requests_in_flight_and_drops_stalled_connections_after_the_grace() {
    let limits = Limits {
        header_timeout_secs: 60,
        shutdown_grace_secs: 3,
        ..Limits::default()
    };
    // A request reads the store twice (token, then the erased marker): 1.2 s in all.
    let (_dir, server, token) = in_process(Duration::from_millis(600), limits).await;
    let addr = server.addr;
    let stalled = tokio::task::spawn_blocking(move || {
        let mut s = connect(addr);
        s.write_all(HALF_A_HEADER).unwrap();
        wait_closed(&mut s, Duration::from_secs(3) + MARGIN)
    });
    let http = reqwest::Client::new();
    let in_flight = {
        let req = http
            .get(server.url("/v1/memory/identity"))
            .bearer_auth(&token)
            .timeout(Duration::from_secs(10));
        tokio::spawn(async move { req.send().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let stopping = tokio::spawn(server.stop());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting connections after shutdown began"
    );
    let r = in_flight
        .await
        .unwrap()
        .expect("the request in flight is answered");
    assert_eq!(r.status(), 200);
    tokio::time::timeout(Duration::from_secs(3) + MARGIN, stopping)
        .await
        .expect("the server outlived its shutdown grace")
        .unwrap();
    let stopped = started.elapsed();
    assert!(
        stopped >= Duration::from_millis(2700),
        "stopped {stopped:?} after shutdown began, before the grace was over"
    );
    assert!(stalled.await.unwrap().is_empty());
}

/// A client that asks for a large snapshot and then reads none of it holds its connection
/// only until a write has waited `request_timeout_secs` without progress: the connection is
/// dropped with the response unfinished. The client's receive buffer is made small so the
/// response cannot all sit in the kernel's buffers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_left_unread_is_dropped_after_the_request_timeout() {
    let limits = Limits {
        request_timeout_secs: 3,
        ..Limits::default()
    };
    let (_dir, server, token) = in_process(Duration::ZERO, limits).await;
    let http = reqwest::Client::new();
    let line = format!("{}\n", "x".repeat(99));
    let body = line.repeat(1250); // 125 KB, under the 128 KiB note limit
    let changes: Vec<_> = (0..64)
        .map(|i| put(&format!("n{i}"), None, &body))
        .collect();
    let r = send_post(
        &http,
        &server.url("/v1/memory/commit"),
        &token,
        &json!({"scope": "user", "changes": changes}),
    )
    .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(server.addr).await.unwrap();
    let mut s = stream.into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    let body = r#"{"scope":"user"}"#;
    let request = format!(
        "POST /v1/memory/snapshot HTTP/1.1\r\nhost: memoria\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let got = tokio::task::spawn_blocking(move || {
        s.write_all(request.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_secs(3) + MARGIN);
        wait_closed(&mut s, MARGIN)
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "{}",
        &text[..text.len().min(200)]
    );
    let head_end = text.find("\r\n\r\n").unwrap() + 4;
    let declared: usize = text[..head_end]
        .to_lowercase()
        .lines()
        .find_map(|l| {
            l.strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap();
    assert!(
        declared > 8_000_000,
        "the snapshot holds every body: {declared}"
    );
    assert!(
        got.len() - head_end < declared,
        "the whole response arrived: the connection was not dropped"
    );
    // The server still serves others.
    let r = http.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    server.stop().await;
}

/// The serving loop hands each request its peer's address: wrong admin keys are limited per
/// source, so a caller that used up its tries does not lock out another address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_admin_keys_are_limited_per_source_address_on_a_real_listener() {
    let (_dir, server, _token) = in_process(Duration::ZERO, Limits::default()).await;
    let from = |ip: [u8; 4]| {
        reqwest::Client::builder()
            .local_address(std::net::IpAddr::from(ip))
            .build()
            .unwrap()
    };
    let erase = |http: &reqwest::Client| {
        http.post(server.url("/v1/admin/erase"))
            .bearer_auth("not-the-admin-key")
            .json(&json!({"userId": "alice"}))
            .send()
    };
    let first = from([127, 0, 0, 1]);
    let mut statuses = Vec::new();
    for _ in 0..=memoria_sync_server::ADMIN_RATE_LIMIT.burst {
        statuses.push(erase(&first).await.unwrap().status().as_u16());
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    let burst = memoria_sync_server::ADMIN_RATE_LIMIT.burst as usize;
    assert!(statuses[..burst].iter().all(|s| *s == 403), "{statuses:?}");
    let r = erase(&from([127, 0, 0, 2])).await.unwrap();
    assert_eq!(r.status(), 403, "another address has its own tries");
    server.stop().await;
}

/// Files under `dir` (recursively) whose path contains `part`.
fn files_under(dir: &std::path::Path, part: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().contains(part) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A commit whose client is gone before its manifest is written (here: answered 408 while its
/// store is slow) still finishes: the manifest names its revision, and no revision file is
/// left that the manifest does not name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_client_is_gone_still_finishes_its_store_work() {
    let limits = Limits {
        request_timeout_secs: 1,
        ..Limits::default()
    };
    let (dir, server, token) =
        in_process_slowed(Duration::ZERO, Duration::from_secs(2), limits).await;
    let r = reqwest::Client::new()
        .post(server.url("/v1/memory/commit"))
        .bearer_auth(&token)
        .json(&json!({"scope": "user", "changes": [put("kept", None, "body\n")]}))
        .timeout(Duration::from_secs(1) + MARGIN)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        408,
        "the reply came before the slow manifest write"
    );
    let revisions = files_under(dir.path(), "/objects/kept/");
    assert_eq!(revisions.len(), 1, "the revision is written first");
    let manifest = dir.path().join("users/alice/memory/manifest.json");
    let deadline = Instant::now() + Duration::from_secs(2) + MARGIN;
    while !manifest.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = std::fs::read_to_string(&manifest).expect("the commit wrote its manifest");
    let rev = revisions[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(
        text.contains(&rev),
        "the manifest names the revision: {text}"
    );
    assert_eq!(files_under(dir.path(), "/objects/"), revisions);
    server.stop().await;
}

/// With `requests_per_account = 2`, an account holding two requests (bodies still arriving)
/// has a third wait for a slot and, none freed within 2 s, answered 429 `rate_limited` with
/// `Retry-After: 1`; another account is served meanwhile; and a request waiting when a held
/// one is answered takes its slot and is served.
#[test]
fn requests_in_flight_are_capped_per_account() {
    let server = LimitedServer::start("requests_per_account = 2");
    let alice = create_token(&server.store(), "alice", &[]);
    let bob = create_token(&server.store(), "bob", &[]);
    let identity = |token: &str| {
        let mut s = connect(server.addr);
        s.write_all(
            format!(
                "GET /v1/memory/identity HTTP/1.1\r\nhost: memoria\r\n\
                 authorization: Bearer {token}\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
        read_reply(&mut s)
    };
    let body = r#"{"scope":"user","changes":[]}"#;
    let mut held: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = connect(server.addr);
            let head = format!(
                "POST /v1/memory/commit HTTP/1.1\r\nhost: memoria\r\n\
                 authorization: Bearer {alice}\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\n\r\n{}",
                body.len(),
                &body[..5]
            );
            s.write_all(head.as_bytes()).unwrap();
            s
        })
        .collect();
    // The held requests are past authentication once the server has read their first bytes;
    // poll until the third is refused (or give up).
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let refused = identity(&alice);
    assert_eq!(refused.status, 429, "{refused:?}");
    assert!(
        asked.elapsed() >= Duration::from_millis(1800),
        "refused after {:?}, without waiting for a slot",
        asked.elapsed()
    );
    assert!(refused.head.contains("retry-after: 1"), "{refused:?}");
    let e: serde_json::Value = serde_json::from_slice(&refused.body).unwrap();
    assert_eq!(e["code"], "rate_limited", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("2 requests in progress"),
        "{e}"
    );
    assert_eq!(identity(&bob).status, 200, "another account is served");
    std::thread::scope(|s| {
        let waiting = s.spawn(|| identity(&alice));
        std::thread::sleep(Duration::from_millis(500));
        held[0].write_all(&body.as_bytes()[5..]).unwrap();
        assert_eq!(read_reply(&mut held[0]).status, 400, "an empty commit");
        let r = waiting.join().unwrap();
        assert_eq!(
            r.status, 200,
            "the waiting request took the freed slot: {r:?}"
        );
    });
}

/// A client of a [`LimitedServer`] for the storage tests: commits and snapshots over HTTP.
struct Api {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    fn new(server: &LimitedServer, user: &str) -> Api {
        Api {
            http: reqwest::Client::new(),
            base: format!("http://{}", server.addr),
            token: create_token(&server.store(), user, &[]),
        }
    }

    async fn post(&self, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .timeout(Duration::from_secs(20))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or_default())
    }

    async fn commit(&self, scope: &str, changes: Vec<Change>) -> (u16, serde_json::Value) {
        self.post(
            "/v1/memory/commit",
            json!({"scope": scope, "changes": changes}),
        )
        .await
    }

    /// A commit that must apply; the revision of each change.
    async fn commit_ok(&self, scope: &str, changes: Vec<Change>) -> Vec<String> {
        let (status, body) = self.commit(scope, changes).await;
        assert_eq!(status, 200, "{body}");
        body["applied"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["revision"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn snapshot(&self, body: serde_json::Value) -> (u16, serde_json::Value) {
        self.post("/v1/memory/snapshot", body).await
    }
}

/// Polls `check` every 50 ms until it holds or `within` passes; whether it held.
async fn eventually(within: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Thirty edits of one note leave at most one file per edit inside the grace period (twice the
/// request timeout: 2 s here); once it is over, the next edit leaves two — the note's current
/// revision and the one it just replaced — and the note is still served whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_on_disk_after_many_edits_of_one_note_are_bounded() {
    let server = LimitedServer::start("request_timeout_secs = 1");
    let api = Api::new(&server, "alice");
    let note_dir = server.dir.path().join("data/users/alice/memory/objects/n");
    let mut rev = api
        .commit_ok("user", vec![put("n", None, "edit 0\n")])
        .await[0]
        .clone();
    for i in 1..=30 {
        rev = api
            .commit_ok("user", vec![put("n", Some(&rev), &format!("edit {i}\n"))])
            .await[0]
            .clone();
    }
    let count = || std::fs::read_dir(&note_dir).map_or(0, |d| d.count());
    assert!(count() <= 31, "{} files after 31 commits", count());
    tokio::time::sleep(Duration::from_millis(2300)).await;
    api.commit_ok("user", vec![put("n", Some(&rev), "edit 31\n")])
        .await;
    assert!(
        eventually(MARGIN, || count() <= 2).await,
        "{} files under {} once the grace was over",
        count(),
        note_dir.display()
    );
    let (status, s) = api.snapshot(json!({"scope": "user"})).await;
    assert_eq!(status, 200, "{s}");
    assert!(
        s["bodies"][0]["body"]
            .as_str()
            .unwrap()
            .ends_with("edit 31\n")
    );
    assert!(s.get("damaged").is_none(), "{s}");
}

/// With `tombstones_per_scope = 5`, deleting 20 notes keeps the 5 newest tombstones; a client
/// that asks for the changes since a generation before the drop gets the whole list. The
/// quotas announce the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_beyond_the_cap_are_dropped_and_announced() {
    let server = LimitedServer::start("[quotas]\ntombstones_per_scope = 5");
    let api = Api::new(&server, "alice");
    let revs = api
        .commit_ok(
            "user",
            (0..20)
                .map(|i| put(&format!("n{i:02}"), None, "x\n"))
                .collect(),
        )
        .await;
    let deletes = (0..20)
        .map(|i| memoria_tests::sync_server::delete(&format!("n{i:02}"), Some(&revs[i])))
        .collect();
    api.commit_ok("user", deletes).await;
    let (_, s) = api.snapshot(json!({"scope": "user", "since": 1})).await;
    let ids: Vec<&str> = s["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["n15", "n16", "n17", "n18", "n19"], "{s}");
    assert!(s.get("delta").is_none(), "the whole list after a drop: {s}");
    let manifest = std::fs::read_to_string(
        server
            .dir
            .path()
            .join("data/users/alice/memory/manifest.json"),
    )
    .unwrap();
    assert_eq!(manifest.matches("\"deleted\":true").count(), 5);
    assert_eq!(s["storageQuotas"]["tombstonesPerScope"], 5, "{s}");
    let r = api
        .http
        .get(format!("{}/v1/memory/identity", api.base))
        .bearer_auth(&api.token)
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["memoria-quotas"]
            .to_str()
            .unwrap()
            .contains("tombstones=5"),
        "{:?}",
        r.headers()
    );
}

/// With `scopes_per_account = 2`, a third scope is refused with 403 `quota_exceeded` and
/// nothing of it is stored; the two scopes the account has still take commits, and another
/// account is not affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scopes_beyond_the_account_cap_are_refused() {
    let server = LimitedServer::start("[quotas]\nscopes_per_account = 2");
    let alice = Api::new(&server, "alice");
    alice.commit_ok("user", vec![put("a", None, "1\n")]).await;
    alice
        .commit_ok("project:one", vec![put("a", None, "1\n")])
        .await;
    let (status, e) = alice
        .commit("project:two", vec![put("a", None, "1\n")])
        .await;
    assert_eq!(status, 403, "{e}");
    assert_eq!(e["code"], "quota_exceeded");
    assert!(e["message"].as_str().unwrap().contains("2 scopes"), "{e}");
    assert!(
        !server
            .dir
            .path()
            .join("data/users/alice/projects/two")
            .exists(),
        "the refused scope left files behind"
    );
    alice
        .commit_ok("project:one", vec![put("b", None, "2\n")])
        .await;
    let bob = Api::new(&server, "bob");
    bob.commit_ok("project:two", vec![put("a", None, "1\n")])
        .await;
}

/// With `bytes_per_account` just over two notes, a commit that would take the account past it
/// (in another scope) is refused; one that fits passes. On the same store with the cap lowered
/// below what the account holds, growth is refused but an edit of the same size and a delete
/// pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_beyond_the_account_cap_are_refused_and_a_lowered_cap_only_blocks_growth() {
    let body = "x".repeat(400) + "\n";
    let size = put("a", None, &body).body.unwrap().len() as u64;
    let server = LimitedServer::start(&format!(
        "[quotas]\nbytes_per_account = {}",
        2 * size + size / 2
    ));
    let api = Api::new(&server, "alice");
    let revs = api
        .commit_ok("user", vec![put("a", None, &body), put("b", None, &body)])
        .await;
    let (status, e) = api.commit("project:p", vec![put("c", None, &body)]).await;
    assert_eq!(status, 403, "{e}");
    assert_eq!(e["code"], "quota_exceeded");
    assert!(e["message"].as_str().unwrap().contains("bytes"), "{e}");
    api.commit_ok("project:p", vec![put("c", None, "small\n")])
        .await;
    let lowered = server.restart(&format!("[quotas]\nbytes_per_account = {size}"));
    let api = Api {
        base: format!("http://{}", lowered.addr),
        ..api
    };
    let (status, e) = api.commit("user", vec![put("d", None, "1\n")]).await;
    assert_eq!(status, 403, "growth above a lowered cap: {e}");
    let same_size = "y".repeat(400) + "\n";
    let edited = api
        .commit_ok("user", vec![put("a", Some(&revs[0]), &same_size)])
        .await;
    assert_eq!(edited.len(), 1);
    api.commit_ok(
        "user",
        vec![memoria_tests::sync_server::delete("b", Some(&revs[1]))],
    )
    .await;
}

/// What a process killed between its revisions and its manifest leaves behind — revision files
/// no manifest names, with the ids the server makes — is removed by the scope's next sweep
/// (every 32nd commit) once older than the grace period. A file whose age is unknown (an id
/// from an older server) and one still in its grace period stay, as do the live revisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_of_a_killed_commit_are_gone_after_the_next_sweep() {
    let server = LimitedServer::start("request_timeout_secs = 1");
    let api = Api::new(&server, "alice");
    let mut rev = api.commit_ok("user", vec![put("n", None, "0\n")]).await[0].clone();
    let objects = server.dir.path().join("data/users/alice/memory/objects");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let plant = |note: &str, name: &str| {
        let dir = objects.join(note);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.md"));
        std::fs::write(&path, "---\n{}\n---\nleft by a killed commit\n").unwrap();
        path
    };
    let hex = "0123456789abcdef0123456789abcdef";
    let old_ghost = plant("ghost", &format!("{:013}-{hex}", now - 60_000));
    let old_of_live = plant("n", &format!("{:013}-{hex}", now - 60_000));
    let legacy = plant("legacy", hex);
    let young = plant("young", &format!("{:013}-{hex}", now + 600_000));
    for i in 1..memoria_sync_server::api::SWEEP_EVERY {
        rev = api
            .commit_ok("user", vec![put("n", Some(&rev), &format!("{i}\n"))])
            .await[0]
            .clone();
    }
    assert!(
        eventually(MARGIN, || !old_ghost.exists() && !old_of_live.exists()).await,
        "the old orphans are still there"
    );
    assert!(legacy.exists(), "a file of unknown age is never swept");
    assert!(young.exists(), "a file in its grace period is kept");
    assert!(objects.join("n").join(format!("{rev}.md")).exists());
    let (status, s) = api.snapshot(json!({"scope": "user"})).await;
    assert_eq!(status, 200, "{s}");
    assert!(s.get("damaged").is_none(), "{s}");
    assert!(server.log().contains("unreferenced revisions swept"));
}

/// A `manifest.json` damaged on disk: snapshots still answer, from the copy kept beside it,
/// and the next commit replaces the damaged file, repairing the scope. Without a good copy the
/// answer is a 500 that says what happened, and the log names the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_manifest_is_served_from_its_copy_and_repaired_by_the_next_commit() {
    let server = LimitedServer::start("");
    let api = Api::new(&server, "alice");
    let scope_dir = server.dir.path().join("data/users/alice/memory");
    let revs = api
        .commit_ok("user", vec![put("a", None, "1\n"), put("b", None, "1\n")])
        .await;
    api.commit_ok("user", vec![put("a", Some(&revs[0]), "2\n")])
        .await;
    let copy = scope_dir.join("manifest.prev.json");
    assert!(
        eventually(MARGIN, || std::fs::read_to_string(&copy)
            .is_ok_and(|c| c.contains("\"generation\":2")))
        .await,
        "no copy of generation 2"
    );
    let manifest = scope_dir.join("manifest.json");
    std::fs::write(&manifest, "{\"format\":1,\"generation\":2,\"no").unwrap();

    let (status, s) = api.snapshot(json!({"scope": "user"})).await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["notes"].as_array().unwrap().len(), 2, "{s}");
    assert_eq!(s["bodies"].as_array().unwrap().len(), 2, "{s}");
    assert!(server.log().contains("manifest is damaged"));

    api.commit_ok("user", vec![put("c", None, "new\n")]).await;
    let repaired: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap())
            .expect("the commit replaced the damaged manifest");
    assert_eq!(repaired["generation"], 3);
    assert_eq!(repaired["notes"].as_array().unwrap().len(), 3);

    // Both damaged: a clear refusal, nothing served as if the scope were empty.
    let _ = eventually(MARGIN, || {
        std::fs::read_to_string(&copy).is_ok_and(|c| c.contains("\"generation\":3"))
    })
    .await;
    std::fs::write(&manifest, "damaged").unwrap();
    std::fs::write(&copy, "damaged too").unwrap();
    let (status, e) = api.snapshot(json!({"scope": "user"})).await;
    assert_eq!(status, 500, "{e}");
    assert!(e["message"].as_str().unwrap().contains("damaged"), "{e}");
    let (status, _) = api.commit("user", vec![put("d", None, "1\n")]).await;
    assert_eq!(status, 500);
    assert!(server.log().contains("has no good copy"));
}

/// The server's peak resident memory (`VmHWM`), in MiB.
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/PID/status");
    kib / 1024
}

/// One account sending eight maximal commits at once (20 notes of 500 KiB each, about 10 MiB a
/// request) to a server allowing it two requests in flight: the server's peak memory stays
/// under its baseline plus `requests_per_account` × 3 × the largest request — the per-account
/// bound `docs/sync-server.md` states — however many of the account's requests queue, and
/// after several rounds of them, since memory a request freed is reused rather than kept.
#[test]
fn one_account_sending_many_large_commits_stays_under_its_memory_bound() {
    const NOTES: usize = 20;
    const NOTE_BYTES: usize = 500 * 1024;
    let server = LimitedServer::start(
        "requests_per_account = 2\n[quotas]\nchanges_per_commit = 20\nbody_bytes = 524288",
    );
    let token = create_token(&server.store(), "alice", &[]);
    let base = format!("http://{}", server.addr);
    let pid = server.child.id();
    let baseline = peak_rss_mib(pid);
    // Text that escapes to JSON as itself, so each body is its full size on the wire and in
    // memory; a first line makes each note's different.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let text: String = (0..NOTE_BYTES - 64)
        .map(|i| {
            if i % 80 == 79 {
                return '\n';
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (b'a' + (x % 26) as u8) as char
        })
        .collect();
    let request = |round: usize, n: usize| -> Vec<u8> {
        let changes: Vec<Change> = (0..NOTES)
            .map(|i| {
                let id = format!("r{round}-c{n}-n{i}");
                put(&id, None, &format!("{id}\n{text}"))
            })
            .collect();
        serde_json::to_vec(&json!({"scope": "user", "changes": changes})).unwrap()
    };
    let largest = request(0, 0).len() as u64 / (1024 * 1024) + 1;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut answers = Vec::new();
    for round in 0..3 {
        let bodies: Vec<Vec<u8>> = (0..8).map(|n| request(round, n)).collect();
        answers.extend(rt.block_on(async {
            let http = reqwest::Client::new();
            let sends: Vec<_> = bodies
                .into_iter()
                .map(|b| {
                    let send = http
                        .post(format!("{base}/v1/memory/commit"))
                        .bearer_auth(&token)
                        .header("content-type", "application/json")
                        .body(b)
                        .timeout(Duration::from_secs(60))
                        .send();
                    tokio::spawn(async move { send.await.map(|r| r.status().as_u16()) })
                })
                .collect();
            let mut statuses = Vec::new();
            for s in sends {
                statuses.push(s.await.unwrap().unwrap_or(0));
            }
            statuses
        }));
    }
    let peak = peak_rss_mib(pid);
    let bound = baseline + 2 * 3 * largest;
    assert!(
        answers.iter().all(|s| *s == 200 || *s == 429),
        "every commit applied or was told to retry: {answers:?}"
    );
    assert!(
        answers.iter().filter(|s| **s == 200).count() >= 6,
        "the account's requests were served, two at a time: {answers:?}"
    );
    eprintln!(
        "peak {peak} MiB (baseline {baseline} MiB, requests of {largest} MiB, bound {bound} MiB)"
    );
    assert!(
        peak <= bound,
        "peak resident memory {peak} MiB is over the bound of {bound} MiB (baseline {baseline} \
         MiB + 2 requests in flight × 3 × {largest} MiB)"
    );
}

/// The sync client's connection left idle past the server's idle timeout (its header timeout,
/// 6 s here) while the client does other work is not reused: the next request opens a fresh
/// connection and is answered, instead of being written to the socket the server closed.
#[test]
fn a_client_idle_past_the_servers_idle_timeout_makes_its_next_request_on_a_fresh_connection() {
    use memoria_engine::sync::client::{HttpTransport, SyncClient, Token};
    let server = LimitedServer::start("header_timeout_secs = 6");
    let token = create_token(&server.store(), "alice", &[]);
    let transport = HttpTransport::new(&format!("http://{}", server.addr)).unwrap();
    let client = SyncClient::new(Arc::new(transport), Token::new(token));
    client.identity().expect("the first request");
    std::thread::sleep(Duration::from_secs(7));
    client
        .identity()
        .expect("the request after the server closed the idle connection");
}
