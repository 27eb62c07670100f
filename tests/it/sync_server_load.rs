//! Bounded load test and throughput measurements for the sync server on loopback.
//!
//! 16 clients commit to one scope for `MEMORIA_SYNC_LOAD_SECS` (default 20) seconds: each edits
//! its own note (its base is always current, so it must never see 409) and every fourth commit
//! also increments one shared counter note (re-snapshot and retry on 409). At the end every
//! acknowledged write must be visible: zero lost updates. Numbers are printed for
//! docs/sync-server.md ("Benchmarks"); run with `--nocapture` to see them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memoria_shared::SystemClock;
use memoria_shared::protocol::{CommitResponse, SnapshotResponse};
use memoria_sync_server::config::RateLimit;
use memoria_sync_server::layout::UserId;
use memoria_sync_server::store::ObjectStore;
use memoria_sync_server::store::fs::FsStore;
use memoria_sync_server::{AppState, OsRandom, Settings, auth};
use memoria_tests::sync_server::{InProcessServer, post_json, put, send_post};
use serde_json::json;

use crate::sync_server_listener::counter_of;

const CLIENTS: usize = 16;

async fn start() -> (tempfile::TempDir, InProcessServer, String) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(FsStore::open(dir.path()).unwrap());
    let settings = Settings {
        rate_limit: RateLimit {
            burst: 1_000_000,
            per_minute: 60_000_000,
        },
        ..Settings::default()
    };
    let state = AppState::new(
        &settings,
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(OsRandom),
    );
    let token = auth::create_token(store.as_ref(), &OsRandom, &UserId::new("load").unwrap(), 0)
        .await
        .unwrap();
    (dir, InProcessServer::start(state).await, token)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_clients_commit_to_one_scope_without_lost_updates() {
    let secs: u64 = std::env::var("MEMORIA_SYNC_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let (_dir, server, token) = start().await;
    let base = server.url("");
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let shared_acked = Arc::new(AtomicU64::new(0));
    let conflicts = Arc::new(AtomicU64::new(0));
    let busy = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..CLIENTS {
        let (http, token, base) = (http.clone(), token.clone(), base.clone());
        let (shared_acked, conflicts, busy) =
            (shared_acked.clone(), conflicts.clone(), busy.clone());
        tasks.spawn(async move {
            let id = format!("client-{client}");
            let mut rev: Option<String> = None;
            let mut acked = 0u64;
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let started = Instant::now();
                let r = http
                    .post(format!("{base}/v1/memory/commit"))
                    .bearer_auth(&token)
                    .json(&json!({"scope": "user", "changes": [
                        put(&id, rev.as_deref(), &format!("{}\n", acked + 1))]}))
                    .send()
                    .await
                    .unwrap();
                match r.status().as_u16() {
                    200 => {
                        let c: CommitResponse = r.json().await.unwrap();
                        rev = Some(c.applied[0].revision.clone());
                        acked += 1;
                        latencies.push(started.elapsed());
                    }
                    503 => {
                        busy.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    s => panic!(
                        "{id}: own-note commit answered {s}: {}",
                        r.text().await.unwrap()
                    ),
                }
                if !acked.is_multiple_of(4) {
                    continue;
                }
                loop {
                    let s: SnapshotResponse = post_json(
                        &http,
                        &format!("{base}/v1/memory/snapshot"),
                        &token,
                        &json!({"scope": "user", "have": []}),
                    )
                    .await;
                    let cur = s.bodies.iter().find(|b| b.id.as_str() == "shared");
                    let (n, base_rev) = cur.map_or((1, None), |b| {
                        (counter_of(&b.body) + 1, Some(b.revision.clone()))
                    });
                    let r = http
                        .post(format!("{base}/v1/memory/commit"))
                        .bearer_auth(&token)
                        .json(&json!({"scope": "user", "changes": [
                            put("shared", base_rev.as_deref(), &format!("{n}\n"))]}))
                        .send()
                        .await
                        .unwrap();
                    match r.status().as_u16() {
                        200 => {
                            shared_acked.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                        409 => {
                            conflicts.fetch_add(1, Ordering::Relaxed);
                        }
                        503 => {
                            busy.fetch_add(1, Ordering::Relaxed);
                        }
                        s => panic!("shared commit answered {s}"),
                    }
                }
            }
            (id, acked, latencies)
        });
    }
    let mut own = Vec::new();
    let mut latencies = Vec::new();
    while let Some(t) = tasks.join_next().await {
        let (id, acked, l) = t.unwrap();
        own.push((id, acked));
        latencies.extend(l);
    }
    let s: SnapshotResponse = post_json(
        &http,
        &server.url("/v1/memory/snapshot"),
        &token,
        &json!({"scope": "user"}),
    )
    .await;
    for (id, acked) in &own {
        let body = s.bodies.iter().find(|b| b.id.as_str() == id).expect(id);
        assert_eq!(
            counter_of(&body.body),
            *acked,
            "{id}: an acknowledged commit was lost"
        );
        assert!(*acked > 0, "{id} never committed");
    }
    let shared = shared_acked.load(Ordering::SeqCst);
    let body = s.bodies.iter().find(|b| b.id.as_str() == "shared").unwrap();
    assert_eq!(
        counter_of(&body.body),
        shared,
        "a shared increment was lost"
    );
    let own_total: u64 = own.iter().map(|(_, a)| a).sum();
    latencies.sort();
    println!(
        "load: {CLIENTS} clients, {secs} s: {own_total} own-note commits + {shared} shared \
         increments = {:.0} commits/s; own-note latency p50 {:.1} ms, p99 {:.1} ms; \
         {} conflicts (409, retried), {} busy (503, retried); lost updates: 0",
        (own_total + shared) as f64 / secs as f64,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        conflicts.load(Ordering::Relaxed),
        busy.load(Ordering::Relaxed),
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_throughput() {
    let (_dir, server, token) = start().await;
    let http = reqwest::Client::new();
    // 1,000 notes of ~1 KiB, committed 500 at a time.
    let started = Instant::now();
    for batch in 0..2 {
        let changes: Vec<_> = (0..500)
            .map(|i| put(&format!("n{batch}-{i}"), None, &"x".repeat(1000)))
            .collect();
        let r = send_post(
            &http,
            &server.url("/v1/memory/commit"),
            &token,
            &json!({"scope": "user", "changes": changes}),
        )
        .await;
        assert_eq!(r.status(), 200);
    }
    let commit_ms = started.elapsed().as_secs_f64() * 1000.0 / 2.0;
    let started = Instant::now();
    let s: SnapshotResponse = post_json(
        &http,
        &server.url("/v1/memory/snapshot"),
        &token,
        &json!({"scope": "user"}),
    )
    .await;
    let full_ms = started.elapsed().as_secs_f64() * 1000.0;
    assert_eq!(s.bodies.len(), 1000);
    let have: Vec<_> = s.bodies.iter().map(|b| b.hash.clone()).collect();
    let started = Instant::now();
    let s2: SnapshotResponse = post_json(
        &http,
        &server.url("/v1/memory/snapshot"),
        &token,
        &json!({"scope": "user", "have": have}),
    )
    .await;
    let manifest_ms = started.elapsed().as_secs_f64() * 1000.0;
    assert!(s2.bodies.is_empty() && s2.notes.len() == 1000);
    let version = s.manifest_version.clone();
    let polls = 500;
    let started = Instant::now();
    for _ in 0..polls {
        let s: SnapshotResponse = post_json(
            &http,
            &server.url("/v1/memory/snapshot"),
            &token,
            &json!({"scope": "user", "knownManifest": version}),
        )
        .await;
        assert!(s.unchanged);
    }
    let poll_rate = polls as f64 / started.elapsed().as_secs_f64();
    println!(
        "snapshot: commit of 500 notes (1 KiB) {commit_ms:.0} ms; full snapshot of 1,000 notes \
         with bodies {full_ms:.0} ms; manifest only (all in have) {manifest_ms:.0} ms; \
         unchanged polls {poll_rate:.0}/s (sequential)"
    );
    server.stop().await;
}
