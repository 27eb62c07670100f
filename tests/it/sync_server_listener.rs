//! The sync server on real sockets: in-process on port 0 (with graceful shutdown), and the
//! `memoria-sync` binary exactly as the acceptance tests drive it, including two server
//! processes sharing one store directory.

use std::sync::Arc;

use memoria_shared::FixedClock;
use memoria_shared::protocol::{CommitResponse, SnapshotResponse};
use memoria_sync_server::layout::UserId;
use memoria_sync_server::store::ObjectStore;
use memoria_sync_server::store::fs::FsStore;
use memoria_sync_server::{AppState, SeededRandom, Settings, auth};
use memoria_tests::sync_server::{
    ADMIN_KEY, InProcessServer, ServerProcess, create_token, post_json, put, run_sync, send_post,
    sync_binary,
};
use serde_json::json;

/// A server's state over a fresh filesystem store, and a token for alice.
async fn alice_on_a_fresh_store() -> (tempfile::TempDir, Arc<AppState>, String) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(FsStore::open(dir.path()).unwrap());
    let state = AppState::new(
        &Settings::default(),
        store.clone(),
        Arc::new(FixedClock::new(1)),
        Arc::new(SeededRandom::new(1)),
    );
    let token = auth::create_token(
        store.as_ref(),
        &SeededRandom::new(2),
        &UserId::new("alice").unwrap(),
        1,
    )
    .await
    .unwrap();
    (dir, state, token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_server_on_port_zero_and_graceful_shutdown() {
    let (_dir, state, token) = alice_on_a_fresh_store().await;
    let server = InProcessServer::start(state).await;
    let http = reqwest::Client::new();
    let r = http.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = send_post(
        &http,
        &server.url("/v1/memory/commit"),
        &token,
        &json!({"scope": "user", "changes": [put("a", None, "hello\n")]}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let c: CommitResponse = r.json().await.unwrap();
    let r = send_post(
        &http,
        &server.url("/v1/memory/snapshot"),
        &token,
        &json!({"scope": "user"}),
    )
    .await;
    let s: SnapshotResponse = r.json().await.unwrap();
    assert_eq!(s.notes[0].revision, c.applied[0].revision);
    let url = server.url("/healthz");
    server.stop().await;
    assert!(
        http.get(url).send().await.is_err(),
        "the listener must be closed after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serve_and_token_commands() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("fs:{}", dir.path().display());
    let token = create_token(&store, "alice", &[]);
    assert!(token.starts_with(auth::TOKEN_PREFIX), "{token}");
    // Only the hash is stored.
    let stored = FsStore::open(dir.path())
        .unwrap()
        .list("tokens/")
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert!(
        !std::fs::read_to_string(dir.path().join(&stored[0]))
            .unwrap()
            .contains(&token)
    );
    let server = ServerProcess::start(&store, &[("MEMORIA_SYNC_ADMIN_KEY", ADMIN_KEY)]);
    let http = reqwest::Client::new();
    let r = http
        .get(server.url("/v1/memory/identity"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("memoria-quotas"));
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["userId"], "alice");
    // The admin key comes from the environment.
    let r = send_post(
        &http,
        &server.url("/v1/admin/erase"),
        ADMIN_KEY,
        &json!({"userId": "nobody"}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let out = run_sync(&["token", "revoke", "--store", &store, &token], &[]);
    assert!(out.contains("revoked"));
    let r = http
        .get(server.url("/v1/memory/identity"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Revoking twice, or a bad user id, is an error exit.
    let again = std::process::Command::new(sync_binary())
        .args(["token", "revoke", "--store", &store, &token])
        .output()
        .unwrap();
    assert!(!again.status.success());
    let bad = std::process::Command::new(sync_binary())
        .args(["token", "create", "--store", &store, "--user", "../x"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    // The store can come from the environment.
    let env_token = create_token_env(&store);
    assert!(env_token.starts_with(auth::TOKEN_PREFIX));
    // SIGTERM shuts the server down gracefully: it exits by itself, successfully.
    let status = server
        .terminate(std::time::Duration::from_secs(10))
        .expect("serve did not exit within 10 s of SIGTERM");
    assert!(status.success(), "serve exited with {status}");
}

fn create_token_env(store: &str) -> String {
    let out = run_sync(
        &["token", "create", "--user", "carol"],
        &[("MEMORIA_SYNC_STORE", store)],
    );
    out.lines().last().unwrap().to_owned()
}

/// Two `memoria-sync serve` processes on one directory, 8 clients spread over both, each
/// incrementing a shared counter note with compare-and-swap: no increment may be lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_share_one_directory_without_lost_updates() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("fs:{}", dir.path().display());
    let token = create_token(&store, "alice", &[]);
    // Many requests from one account: lift the rate limit through the environment.
    let env = [
        ("MEMORIA_SYNC_RATE_LIMIT__BURST", "100000"),
        ("MEMORIA_SYNC_RATE_LIMIT__PER_MINUTE", "100000"),
    ];
    let a = ServerProcess::start(&store, &env);
    let b = ServerProcess::start(&store, &env);
    let urls = [a.url(""), b.url("")];
    let http = reqwest::Client::new();
    let increments = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..8 {
        let base = urls[client % 2].clone();
        let (http, token, increments) = (http.clone(), token.clone(), increments.clone());
        tasks.spawn(async move {
            for _ in 0..6 {
                loop {
                    let s: SnapshotResponse = post_json(
                        &http,
                        &format!("{base}/v1/memory/snapshot"),
                        &token,
                        &json!({"scope": "user"}),
                    )
                    .await;
                    let (n, base_rev) = match s.bodies.first() {
                        Some(b) => (counter_of(&b.body) + 1, Some(b.revision.clone())),
                        None => (1, None),
                    };
                    let r = http
                        .post(format!("{base}/v1/memory/commit"))
                        .bearer_auth(&token)
                        .json(&json!({"scope": "user", "changes": [
                            put("counter", base_rev.as_deref(), &format!("{n}\n"))]}))
                        .send()
                        .await
                        .unwrap();
                    match r.status().as_u16() {
                        200 => {
                            increments.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            break;
                        }
                        409 => continue, // someone else incremented: re-read and retry
                        s => panic!("unexpected status {s}: {}", r.text().await.unwrap()),
                    }
                }
            }
        });
    }
    while let Some(t) = tasks.join_next().await {
        t.unwrap();
    }
    let s: SnapshotResponse = post_json(
        &http,
        &a.url("/v1/memory/snapshot"),
        &token,
        &json!({"scope": "user"}),
    )
    .await;
    let done = increments.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(done, 48);
    assert_eq!(
        counter_of(&s.bodies[0].body),
        done,
        "an acknowledged increment was lost"
    );
}

/// The number in a counter note's body.
pub fn counter_of(file: &str) -> u64 {
    let note = memoria_shared::Note::parse(
        file,
        memoria_shared::note::FileContext {
            relative_path: "counter.md",
        },
    )
    .unwrap();
    note.body.trim().parse().unwrap()
}

/// What a listening server answers a snapshot request that declares a body of `len` bytes and
/// sends none of it.
async fn declared_length_answer(addr: std::net::SocketAddr, token: &str, len: usize) -> String {
    use std::io::{Read, Write};
    let head = format!(
        "POST /v1/memory/snapshot HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: {len}\r\n\r\n"
    );
    tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        s.write_all(head.as_bytes()).unwrap();
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).unwrap_or(0);
        String::from_utf8_lossy(&buf[..n]).into_owned()
    })
    .await
    .unwrap()
}

/// A request declaring a body over the limit is refused before any of it is read: the answer
/// comes while the body has not been sent at all. A `have` entry that is not a content hash is
/// refused as it is parsed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_requests_are_refused_before_their_body_is_read() {
    let (_dir, state, token) = alice_on_a_fresh_store().await;
    let server = InProcessServer::start(state).await;
    let addr = server.addr;
    let answer = declared_length_answer(addr, &token, 1_000_000_000).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:?}");
    let r = send_post(
        &reqwest::Client::new(),
        &server.url("/v1/memory/snapshot"),
        &token,
        &json!({"scope": "user", "have": ["a", "b"]}),
    )
    .await;
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], "bad_request");
    assert!(
        body["message"].as_str().unwrap().contains("content hash"),
        "{body}"
    );
    // A snapshot carries hashes, never bodies: its limit is far below a commit's, and `have`
    // is capped as it is parsed.
    let limit = memoria_shared::protocol::SNAPSHOT_REQUEST_BYTES;
    let answer = declared_length_answer(addr, &token, limit + 1).await;
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "a snapshot over its own limit, far under a commit's: {answer:?}"
    );
    let hash = "0".repeat(64);
    let many = format!(
        "{{\"scope\":\"user\",\"have\":[{}]}}",
        vec![format!("\"{hash}\""); memoria_shared::protocol::MAX_HAVE + 1].join(",")
    );
    assert!(
        many.len() < limit,
        "the cap is reached before the body limit"
    );
    let r = reqwest::Client::new()
        .post(server.url("/v1/memory/snapshot"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(many)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("more than 100000"),
        "{body}"
    );
    server.stop().await;
}
