//! The sync server through `tower::ServiceExt::oneshot`: every endpoint, every refusal, tenant
//! isolation, and proof that refusals leave the store unchanged.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use memoria_shared::protocol::{
    Change, CommitRequest, CommitResponse, QUOTAS_HEADER, Quotas, Scope, SnapshotRequest,
    SnapshotResponse, StorageQuotas,
};
use memoria_shared::{Clock, FixedClock};
use memoria_sync_server::config::RateLimit;
use memoria_sync_server::layout::UserId;
use memoria_sync_server::store::fs::FsStore;
use memoria_sync_server::store::{ETag, Fetched, ObjectStore, StoreError};
use memoria_sync_server::{AppState, SeededRandom, Settings, auth, router};
use memoria_tests::sync_server::{delete, note_file, put};
use serde_json::{Value, json};
use tower::ServiceExt;

const ADMIN: &str = "admin-key-for-tests-0123456789abcdef";
const DAY: i64 = 86_400_000;

struct Harness {
    dir: tempfile::TempDir,
    store: Arc<dyn ObjectStore>,
    clock: Arc<FixedClock>,
    state: Arc<AppState>,
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    json: Value,
}

impl Harness {
    fn new() -> Self {
        Self::with(|_| {})
    }

    fn with(tune: impl FnOnce(&mut Settings)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(FsStore::open(dir.path()).unwrap());
        Self::on_store(dir, store, tune)
    }

    fn on_store(
        dir: tempfile::TempDir,
        store: Arc<dyn ObjectStore>,
        tune: impl FnOnce(&mut Settings),
    ) -> Self {
        Self::on_store_seeded(dir, store, tune, 42)
    }

    /// A server on `store` whose revision ids come from `seed` (two servers on one store need
    /// different ones, as real ones have).
    fn on_store_seeded(
        dir: tempfile::TempDir,
        store: Arc<dyn ObjectStore>,
        tune: impl FnOnce(&mut Settings),
        seed: u64,
    ) -> Self {
        let mut settings = Settings {
            admin_key: Some(memoria_sync_server::Secret::new(ADMIN)),
            rate_limit: RateLimit {
                burst: 10_000,
                per_minute: 60_000,
            },
            ..Settings::default()
        };
        tune(&mut settings);
        let clock = Arc::new(FixedClock::new(1_800_000_000_000));
        let state = AppState::new(
            &settings,
            store.clone(),
            clock.clone(),
            Arc::new(SeededRandom::new(seed)),
        );
        Harness {
            dir,
            store,
            clock,
            state,
        }
    }

    async fn token(&self, user: &str) -> String {
        let now = self.clock.now_ms();
        auth::create_token(
            self.store.as_ref(),
            &SeededRandom::new(now as u64 ^ user.len() as u64 ^ u64::from(user.as_bytes()[0])),
            &UserId::new(user).unwrap(),
            now,
        )
        .await
        .unwrap()
    }

    async fn raw(&self, method: Method, path: &str, auth: Option<&str>, body: Body) -> Reply {
        let mut req = Request::builder().method(method).uri(path);
        if let Some(t) = auth {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req
            .header("content-type", "application/json")
            .body(body)
            .unwrap();
        let resp = router(self.state.clone()).oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        // What a commit leaves for after its reply is done before the test looks at the store.
        self.state.background.settled().await;
        Reply {
            status,
            headers,
            json,
        }
    }

    async fn post(&self, path: &str, auth: Option<&str>, body: Value) -> Reply {
        self.raw(Method::POST, path, auth, Body::from(body.to_string()))
            .await
    }

    /// `POST /v1/memory/e2ee/{endpoint}` with `token`.
    async fn e2ee(&self, token: &str, endpoint: &str, body: Value) -> Reply {
        self.post(&format!("/v1/memory/e2ee/{endpoint}"), Some(token), body)
            .await
    }

    async fn commit(&self, token: &str, scope: &str, changes: Vec<Change>) -> Reply {
        let req = CommitRequest {
            scope: Scope::parse(scope).unwrap(),
            changes,
            commit_id: None,
        };
        self.post(
            "/v1/memory/commit",
            Some(token),
            serde_json::to_value(req).unwrap(),
        )
        .await
    }

    async fn commit_ok(&self, token: &str, scope: &str, changes: Vec<Change>) -> CommitResponse {
        let r = self.commit(token, scope, changes).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        serde_json::from_value(r.json).unwrap()
    }

    async fn snapshot(&self, token: &str, req: SnapshotRequest) -> SnapshotResponse {
        let r = self
            .post(
                "/v1/memory/snapshot",
                Some(token),
                serde_json::to_value(req).unwrap(),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.json);
        serde_json::from_value(r.json).unwrap()
    }

    async fn snap(&self, token: &str, scope: &str) -> SnapshotResponse {
        self.snapshot(
            token,
            SnapshotRequest {
                scope: Scope::parse(scope).unwrap(),
                ..Default::default()
            },
        )
        .await
    }

    /// Every stored file and its bytes (lock files excluded).
    fn tree(&self) -> BTreeMap<String, Vec<u8>> {
        fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let p = e.path();
                if e.file_name().to_string_lossy().starts_with('.') {
                    continue;
                }
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                    out.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(self.dir.path(), self.dir.path(), &mut out);
        out
    }
}

fn rev(resp: &CommitResponse, i: usize) -> String {
    resp.applied[i].revision.clone()
}

#[tokio::test]
async fn health_identity_and_quotas_on_every_response() {
    let h = Harness::new();
    let r = h.raw(Method::GET, "/healthz", None, Body::empty()).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json["status"], "ok");
    let expected = format!(
        "{}, {}",
        Quotas::default().header_value(),
        StorageQuotas::default().header_value()
    );
    assert_eq!(r.headers[QUOTAS_HEADER], expected.as_str());
    let t = h.token("alice").await;
    let r = h
        .raw(Method::GET, "/v1/memory/identity", Some(&t), Body::empty())
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(r.json["userId"], "alice");
    assert_eq!(r.json["protocolVersion"], memoria_shared::PROTOCOL_VERSION);
    assert_eq!(r.json["quotas"]["liveNotesPerScope"], 5000);
    assert_eq!(r.json["quotas"]["tombstoneDays"], 90);
    // Refusals announce the quotas too.
    let r = h
        .raw(Method::GET, "/v1/memory/identity", None, Body::empty())
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(r.json["code"], "unauthorized");
    assert_eq!(r.headers[QUOTAS_HEADER], expected.as_str());
    let r = h.raw(Method::GET, "/v2/nothing", None, Body::empty()).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.json["code"], "not_found");
}

#[tokio::test]
async fn tokens_missing_invalid_or_revoked_get_401() {
    let h = Harness::new();
    let t = h.token("alice").await;
    let before = h.tree();
    let body =
        json!({"scope": "user", "changes": [serde_json::to_value(put("a", None, "x")).unwrap()]});
    for bad in [None, Some("msync_00"), Some("garbage"), Some("")] {
        let r = h.post("/v1/memory/commit", bad, body.clone()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{bad:?}");
        assert_eq!(r.headers["www-authenticate"], "Bearer");
    }
    // Auth is checked before the body is read: bad JSON without a token is still 401.
    let r = h
        .raw(Method::POST, "/v1/memory/snapshot", None, Body::from("{"))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(h.tree(), before, "a refused request changed the store");
    assert!(auth::revoke_token(h.store.as_ref(), &t).await.unwrap());
    let r = h
        .raw(Method::GET, "/v1/memory/identity", Some(&t), Body::empty())
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn commit_then_snapshot_uses_the_product_layout() {
    let h = Harness::new();
    let t = h.token("alice").await;
    let c = h
        .commit_ok(
            &t,
            "user",
            vec![put("a", None, "alpha\n"), put("b", None, "beta\n")],
        )
        .await;
    assert_eq!(c.applied.len(), 2);
    let p = h
        .commit_ok(
            &t,
            "project:proj-1",
            vec![put("a", None, "project alpha\n")],
        )
        .await;
    let keys: Vec<String> = h
        .tree()
        .into_keys()
        .filter(|k| k.starts_with("users/"))
        .collect();
    assert_eq!(
        keys,
        vec![
            format!("users/alice/account.json"),
            format!("users/alice/memory/manifest.json"),
            format!("users/alice/memory/manifest.prev.json"),
            format!("users/alice/memory/objects/a/{}.md", rev(&c, 0)),
            format!("users/alice/memory/objects/b/{}.md", rev(&c, 1)),
            format!("users/alice/projects/proj-1/memory/manifest.json"),
            format!("users/alice/projects/proj-1/memory/manifest.prev.json"),
            format!(
                "users/alice/projects/proj-1/memory/objects/a/{}.md",
                rev(&p, 0)
            ),
        ]
    );
    let s = h.snap(&t, "user").await;
    assert!(!s.unchanged && !s.more);
    assert_eq!(
        s.manifest_version.as_deref(),
        Some(c.manifest_version.as_str())
    );
    let ids: Vec<&str> = s.notes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(s.notes[0].revision, rev(&c, 0));
    assert_eq!(s.notes[0].created_at, 1_800_000_000_000);
    let (file_a, hash_a) = note_file("a", "summary of a", "alpha\n");
    assert_eq!(s.notes[0].hash.as_ref(), Some(&hash_a));
    assert_eq!(s.bodies.len(), 2);
    assert_eq!(s.bodies[0].body, file_a);
    // Bodies the client has are neither read nor returned.
    let s2 = h
        .snapshot(
            &t,
            SnapshotRequest {
                scope: Scope::User,
                have: vec![hash_a],
                known_manifest: None,
                receipt: None,
                since: None,
                kid: None,
            },
        )
        .await;
    assert_eq!(s2.notes.len(), 2);
    let ids: Vec<&str> = s2.bodies.iter().map(|b| b.id.as_str()).collect();
    assert_eq!(ids, ["b"]);
    // A poll with the current version is an empty "unchanged" answer.
    let poll = h
        .snapshot(
            &t,
            SnapshotRequest {
                scope: Scope::User,
                have: vec![],
                known_manifest: s.manifest_version.clone(),
                receipt: None,
                since: None,
                kid: None,
            },
        )
        .await;
    assert!(poll.unchanged && poll.notes.is_empty() && poll.bodies.is_empty());
    // An old version gets the full manifest.
    let stale = h
        .snapshot(
            &t,
            SnapshotRequest {
                scope: Scope::User,
                have: vec![],
                known_manifest: Some("\"old\"".into()),
                receipt: None,
                since: None,
                kid: None,
            },
        )
        .await;
    assert_eq!(stale.notes.len(), 2);
    // A never-written scope is empty, with no version.
    let empty = h.snap(&t, "project:never").await;
    assert!(empty.notes.is_empty() && empty.manifest_version.is_none());
}

#[tokio::test]
async fn stale_bases_get_409_and_other_devices_edits_do_not_conflict() {
    let h = Harness::new();
    let t = h.token("alice").await;
    let c = h
        .commit_ok(
            &t,
            "user",
            vec![put("a", None, "1\n"), put("b", None, "1\n")],
        )
        .await;
    let (ra, rb) = (rev(&c, 0), rev(&c, 1));
    // Device 1 edits a; device 2, from the same snapshot, edits b: both apply.
    let d1 = h
        .commit_ok(&t, "user", vec![put("a", Some(&ra), "2\n")])
        .await;
    h.commit_ok(&t, "user", vec![put("b", Some(&rb), "2\n")])
        .await;
    // Device 2 now edits a from the old base, together with a new note: all refused.
    let before = h.tree();
    let r = h
        .commit(
            &t,
            "user",
            vec![put("c", None, "new\n"), put("a", Some(&ra), "3\n")],
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(r.json["code"], "stale");
    assert_eq!(
        r.json["stale"],
        json!([{"id": "a", "currentRevision": rev(&d1, 0)}])
    );
    assert_eq!(h.tree(), before, "a refused commit changed the store");
    // Creating a note that exists is stale too; so is deleting from an old base.
    let r = h.commit(&t, "user", vec![put("a", None, "x\n")]).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    let r = h.commit(&t, "user", vec![delete("a", Some(&ra))]).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(h.tree(), before);
    // Delete from the current base leaves a tombstone; re-creating names the tombstone.
    let d = h
        .commit_ok(&t, "user", vec![delete("a", Some(&rev(&d1, 0)))])
        .await;
    let s = h.snap(&t, "user").await;
    let a = s.notes.iter().find(|n| n.id.as_str() == "a").unwrap();
    assert!(a.deleted && a.hash.is_none());
    assert!(s.bodies.iter().all(|b| b.id.as_str() != "a"));
    h.commit_ok(&t, "user", vec![put("a", Some(&rev(&d, 0)), "back\n")])
        .await;
}

#[tokio::test]
async fn a_server_never_answers_from_a_manifest_another_server_or_a_hand_has_replaced() {
    // Two servers on one store directory, as the filesystem store allows: each keeps the
    // manifests it read or wrote, and must still see every write the other makes.
    let one = Harness::new();
    let two = Harness::on_store_seeded(tempfile::tempdir().unwrap(), one.store.clone(), |_| {}, 7);
    let t = one.token("alice").await;
    let c = one.commit_ok(&t, "user", vec![put("a", None, "1\n")]).await;
    let r1 = rev(&c, 0);
    let s = one.snap(&t, "user").await;
    assert_eq!(s.notes.len(), 1);
    // The other server changes the note: the first one's kept manifest is now out of date.
    let c = two
        .commit_ok(&t, "user", vec![put("a", Some(&r1), "2\n")])
        .await;
    let r2 = rev(&c, 0);
    let r = one
        .commit(&t, "user", vec![put("a", Some(&r1), "3\n")])
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.json);
    assert_eq!(r.json["stale"], json!([{"id": "a", "currentRevision": r2}]));
    let c = one
        .commit_ok(&t, "user", vec![put("a", Some(&r2), "3\n")])
        .await;
    let r3 = rev(&c, 0);
    let s = two.snap(&t, "user").await;
    assert_eq!(s.notes[0].revision, r3);
    // The manifest put back by hand to an older copy of itself: what is stored counts.
    let key = one
        .tree()
        .into_keys()
        .find(|k| k.ends_with("manifest.json"))
        .expect("a manifest");
    let path = one.dir.path().join(&key);
    let now = std::fs::read(&path).unwrap();
    let r = two.commit(&t, "user", vec![put("b", None, "x\n")]).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    std::fs::write(&path, &now).unwrap();
    let s = two.snap(&t, "user").await;
    assert_eq!(
        s.notes.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(),
        ["a"],
        "the server answered from the manifest it wrote, not the one stored"
    );
}

#[tokio::test]
async fn tombstones_are_dropped_after_the_window() {
    let h = Harness::new();
    let t = h.token("alice").await;
    let c = h.commit_ok(&t, "user", vec![put("a", None, "x\n")]).await;
    h.commit_ok(&t, "user", vec![delete("a", Some(&rev(&c, 0)))])
        .await;
    h.clock.advance(90 * DAY);
    assert_eq!(h.snap(&t, "user").await.notes.len(), 1, "kept for 90 days");
    h.clock.advance(1);
    assert!(h.snap(&t, "user").await.notes.is_empty(), "dropped after");
    // Once dropped, the note is simply absent: a create with no base applies.
    h.commit_ok(&t, "user", vec![put("a", None, "again\n")])
        .await;
}

#[tokio::test]
async fn bad_input_is_refused_and_changes_nothing() {
    let h = Harness::with(|s| {
        s.quotas.changes_per_commit = 3;
        s.quotas.body_bytes = 300;
    });
    let t = h.token("alice").await;
    h.commit_ok(&t, "user", vec![put("seed", None, "x\n")])
        .await;
    let before = h.tree();
    let good = serde_json::to_value(put("a", None, "x\n")).unwrap();
    let mut wrong_hash = good.clone();
    wrong_hash["hash"] = json!(note_file("a", "other", "y").1);
    let mut other_id = good.clone();
    other_id["body"] = json!(note_file("b", "s", "x").0);
    let cases: Vec<(Value, StatusCode, &str, &str)> = vec![
        (
            json!({"scope": "user"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "changes",
        ),
        (
            json!({"scope": "user", "changes": "no"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "changes",
        ),
        (
            json!({"scope": "team:x", "changes": [good]}),
            StatusCode::NOT_FOUND,
            "not_found",
            "unknown scope",
        ),
        (
            json!({"scope": "users/bob", "changes": [good]}),
            StatusCode::NOT_FOUND,
            "not_found",
            "unknown scope",
        ),
        (
            json!({"scope": "project:../x", "changes": [good]}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "scope",
        ),
        (
            json!({"scope": "project:a/b", "changes": [good]}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "scope",
        ),
        (
            json!({"scope": "user", "changes": [{"id": "../etc/passwd", "op": "delete"}]}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "changes[0].id",
        ),
        (
            json!({"scope": "user", "changes": [{"id": "Seed", "op": "delete"}]}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "changes[0].id",
        ),
        (
            json!({"scope": "user", "changes": [{"id": "a%2f", "op": "delete"}]}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "changes[0].id",
        ),
        (
            json!({"scope": "user", "changes": [{"id": "a", "op": "upsert"}]}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "changes[0].op",
        ),
        (
            json!({"scope": "user", "changes": []}),
            StatusCode::BAD_REQUEST,
            "bad_request",
            "changes",
        ),
        (
            json!({"scope": "user", "changes": [good, good]}),
            StatusCode::BAD_REQUEST,
            "duplicate_change",
            "more than once",
        ),
        (
            json!({"scope": "user", "changes": [wrong_hash]}),
            StatusCode::BAD_REQUEST,
            "hash_mismatch",
            "hash",
        ),
        (
            json!({"scope": "user", "changes": [other_id]}),
            StatusCode::BAD_REQUEST,
            "invalid_note",
            "names note b",
        ),
        (
            json!({"scope": "user", "changes": [{"id": "a", "op": "put"}]}),
            StatusCode::BAD_REQUEST,
            "invalid_note",
            "body",
        ),
        (
            json!({"scope": "user", "changes": [{"id": "a", "op": "delete", "body": "x"}]}),
            StatusCode::BAD_REQUEST,
            "invalid_note",
            "no body",
        ),
        (
            json!({"scope": "user", "changes": [put("a", None, "1"), put("b", None, "1"), put("c", None, "1"), put("d", None, "1")]}),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "limit is 3",
        ),
        (
            json!({"scope": "user", "changes": [put("a", None, &"x".repeat(400))]}),
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            "limit is 300",
        ),
    ];
    for (body, status, code, mention) in cases {
        let r = h.post("/v1/memory/commit", Some(&t), body.clone()).await;
        assert_eq!(r.status, status, "{body}: {}", r.json);
        assert_eq!(r.json["code"], code, "{body}: {}", r.json);
        let msg = r.json["message"].as_str().unwrap();
        assert!(
            msg.contains(mention),
            "{body}: message {msg:?} should mention {mention:?}"
        );
    }
    let r = h
        .raw(
            Method::POST,
            "/v1/memory/commit",
            Some(&t),
            Body::from("{\"scope\":"),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // A request far over the size limit is refused before it is read.
    let huge = vec![b' '; h.state.request_limit + 1];
    let r = h
        .raw(
            Method::POST,
            "/v1/memory/commit",
            Some(&t),
            Body::from(huge),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.json);
    assert_eq!(r.json["code"], "too_large");
    let r = h
        .post(
            "/v1/memory/snapshot",
            Some(&t),
            json!({"scope": "project:.."}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = h
        .post(
            "/v1/memory/snapshot",
            Some(&t),
            json!({"scope": "team:alice"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.json["code"], "not_found");
    assert_eq!(h.tree(), before, "a refused request changed the store");
}

#[tokio::test]
async fn a_reduced_quota_only_blocks_growth() {
    let h = Harness::with(|s| s.quotas.live_notes_per_scope = 2);
    let t = h.token("alice").await;
    let c = h
        .commit_ok(&t, "user", vec![put("a", None, "1"), put("b", None, "1")])
        .await;
    let before = h.tree();
    let r = h.commit(&t, "user", vec![put("c", None, "1")]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(r.json["code"], "quota_exceeded");
    assert_eq!(h.tree(), before, "a refused commit left revisions behind");
    // Edits and deletes stay allowed at the limit; the quota is per scope.
    h.commit_ok(&t, "user", vec![put("a", Some(&rev(&c, 0)), "2")])
        .await;
    h.commit_ok(&t, "user", vec![delete("b", Some(&rev(&c, 1)))])
        .await;
    h.commit_ok(
        &t,
        "project:p",
        vec![put("a", None, "1"), put("b", None, "1")],
    )
    .await;
    h.commit_ok(&t, "user", vec![put("c", None, "1")]).await;
}

#[tokio::test]
async fn snapshot_pages_bodies_under_the_response_limit() {
    let h = Harness::with(|s| s.quotas.response_body_bytes = 250);
    let t = h.token("alice").await;
    let changes: Vec<Change> = (0..5)
        .map(|i| put(&format!("n{i}"), None, &"b".repeat(100)))
        .collect();
    h.commit_ok(&t, "user", changes).await;
    let mut have = Vec::new();
    let mut pages = 0;
    loop {
        pages += 1;
        let s = h
            .snapshot(
                &t,
                SnapshotRequest {
                    scope: Scope::User,
                    have: have.clone(),
                    known_manifest: None,
                    receipt: None,
                    since: None,
                    kid: None,
                },
            )
            .await;
        assert_eq!(s.notes.len(), 5, "every page carries the whole manifest");
        let bytes: usize = s.bodies.iter().map(|b| b.body.len()).sum();
        assert!(
            s.bodies.len() == 1 || bytes <= 250,
            "page over the limit: {bytes}"
        );
        have.extend(s.bodies.iter().map(|b| b.hash.clone()));
        if !s.more {
            break;
        }
        assert!(pages < 10, "paging does not end");
    }
    assert_eq!(have.len(), 5);
    assert!(
        pages >= 3,
        "bodies of ~140 bytes under a 250-byte limit take several pages"
    );
}

#[tokio::test]
async fn rate_limit_answers_429_with_retry_after() {
    let h = Harness::with(|s| {
        s.rate_limit = RateLimit {
            burst: 2,
            per_minute: 6,
        }
    });
    let t = h.token("alice").await;
    let other = h.token("bob").await;
    let id = |tok: &str| {
        let tok = tok.to_owned();
        let h = &h;
        async move {
            h.raw(
                Method::GET,
                "/v1/memory/identity",
                Some(&tok),
                Body::empty(),
            )
            .await
        }
    };
    assert_eq!(id(&t).await.status, StatusCode::OK);
    assert_eq!(id(&t).await.status, StatusCode::OK);
    let r = id(&t).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.json["code"], "rate_limited");
    assert_eq!(r.headers["retry-after"], "10");
    assert_eq!(
        id(&other).await.status,
        StatusCode::OK,
        "limits are per account"
    );
    h.clock.advance(10_000);
    assert_eq!(id(&t).await.status, StatusCode::OK);
}

/// A `commitId` sent again with the same changes is answered as before; with other changes it
/// is refused, and nothing of them is stored.
#[tokio::test]
async fn a_commit_id_reused_for_other_changes_is_refused_not_answered_as_applied() {
    let h = Harness::new();
    let alice = h.token("alice").await;
    let commit = |changes: Vec<Change>| {
        let body = json!({"scope": "user", "changes": changes, "commitId": "c-1"});
        h.post("/v1/memory/commit", Some(&alice), body)
    };
    let first = commit(vec![put("a", None, "one")]).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.json);
    let again = commit(vec![put("a", None, "one")]).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.json);
    assert_eq!(again.json["applied"], first.json["applied"]);
    let before = h.tree();
    let other = commit(vec![put("b", None, "two")]).await;
    assert_eq!(other.status, StatusCode::CONFLICT, "{}", other.json);
    assert_eq!(other.json["code"], "commit_id_reused");
    assert!(
        other.json["message"]
            .as_str()
            .unwrap()
            .contains("nothing was changed"),
        "{}",
        other.json
    );
    assert_eq!(h.tree(), before, "the refused changes left nothing behind");
}

/// Wrong admin keys spend only their own source's bucket, and the right key is never charged:
/// a caller guessing the key cannot lock the admin out.
#[tokio::test]
async fn wrong_admin_keys_lock_out_only_their_source_and_never_the_right_key() {
    let h = Harness::new();
    let erase = |key: &'static str, from: [u8; 4]| {
        let req = Request::builder()
            .method(Method::POST)
            .uri("/v1/admin/erase")
            .header("authorization", format!("Bearer {key}"))
            .header("content-type", "application/json")
            .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                from, 40_000,
            ))))
            .body(Body::from(json!({"userId": "carol"}).to_string()))
            .unwrap();
        let app = router(h.state.clone());
        async move { app.oneshot(req).await.unwrap().status() }
    };
    let guesser = [10, 0, 0, 1];
    let burst = memoria_sync_server::ADMIN_RATE_LIMIT.burst;
    for _ in 0..burst {
        assert_eq!(erase("wrong-key", guesser).await, StatusCode::FORBIDDEN);
    }
    assert_eq!(
        erase("wrong-key", guesser).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // Another source's wrong key is still only refused, not rate limited.
    assert_eq!(
        erase("wrong-key", [10, 0, 0, 2]).await,
        StatusCode::FORBIDDEN
    );
    // The right key gets through, even from the guesser's address, as often as it is used.
    for _ in 0..burst + 2 {
        assert_eq!(erase(ADMIN, guesser).await, StatusCode::OK);
    }
}

#[tokio::test]
async fn erase_needs_the_admin_key_deletes_everything_and_refuses_the_account() {
    let h = Harness::new();
    let alice = h.token("alice").await;
    let bob = h.token("bob").await;
    h.commit_ok(&alice, "user", vec![put("a", None, "1")]).await;
    h.commit_ok(&alice, "project:p", vec![put("a", None, "1")])
        .await;
    h.commit_ok(&bob, "user", vec![put("a", None, "bob")]).await;
    let body = json!({"userId": "alice"});
    let before = h.tree();
    for key in [None, Some(alice.as_str()), Some("wrong")] {
        let r = h.post("/v1/admin/erase", key, body.clone()).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{key:?}");
        assert_eq!(r.json["code"], "forbidden");
    }
    let r = h
        .post("/v1/admin/erase", Some(ADMIN), json!({"userId": "../bob"}))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json["code"], "invalid_id");
    assert_eq!(h.tree(), before);
    let r = h.post("/v1/admin/erase", Some(ADMIN), body.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    // Per scope its manifest, the manifest's copy and a revision; and the account's index.
    assert_eq!(r.json["deletedObjects"], 7);
    let left: Vec<String> = h.tree().into_keys().collect();
    assert!(
        left.iter().all(|k| !k.starts_with("users/alice/")),
        "{left:?}"
    );
    assert!(left.contains(&"erased/alice.json".to_owned()));
    // Refused from now on, even with a valid token; a second erase is harmless.
    for path in ["/v1/memory/snapshot", "/v1/memory/commit"] {
        let r = h
            .post(path, Some(&alice), json!({"scope": "user", "changes": []}))
            .await;
        assert_eq!(r.status, StatusCode::GONE, "{path}");
        assert_eq!(r.json["code"], "account_erased");
    }
    let r = h.post("/v1/admin/erase", Some(ADMIN), body).await;
    assert_eq!(r.json["deletedObjects"], 0);
    assert!(
        auth::create_token(
            h.store.as_ref(),
            &SeededRandom::new(9),
            &UserId::new("alice").unwrap(),
            0
        )
        .await
        .is_err(),
        "an erased account must not get new tokens"
    );
    // Bob is untouched.
    let s = h.snap(&bob, "user").await;
    assert_eq!(s.bodies[0].body, note_file("a", "summary of a", "bob").0);
}

#[tokio::test]
async fn tenant_isolation_on_every_endpoint() {
    let h = Harness::new();
    let alice = h.token("alice").await;
    let bob = h.token("bob").await;
    let ca = h
        .commit_ok(&alice, "user", vec![put("secret", None, "alice only\n")])
        .await;
    let cp = h
        .commit_ok(
            &alice,
            "project:shared-name",
            vec![put("plan", None, "alice plan\n")],
        )
        .await;
    let alice_tree = h.tree();
    // identity: bob is bob.
    let r = h
        .raw(
            Method::GET,
            "/v1/memory/identity",
            Some(&bob),
            Body::empty(),
        )
        .await;
    assert_eq!(r.json["userId"], "bob");
    // snapshot: the same scope names give bob his own (empty) scopes.
    for scope in ["user", "project:shared-name"] {
        let s = h.snap(&bob, scope).await;
        assert!(s.notes.is_empty() && s.bodies.is_empty(), "{scope}: {s:?}");
        assert!(s.manifest_version.is_none());
        // Alice's manifest version means nothing in bob's scope.
        let s = h
            .snapshot(
                &bob,
                SnapshotRequest {
                    scope: Scope::parse(scope).unwrap(),
                    have: vec![],
                    known_manifest: Some(ca.manifest_version.clone()),
                    receipt: None,
                    since: None,
                    kid: None,
                },
            )
            .await;
        assert!(s.notes.is_empty() && s.bodies.is_empty());
    }
    // commit: bob naming alice's note and revision is stale in *his* scope and learns nothing.
    let r = h
        .commit(
            &bob,
            "user",
            vec![put("secret", Some(&rev(&ca, 0)), "overwrite\n")],
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(
        r.json["stale"],
        json!([{"id": "secret", "currentRevision": null}])
    );
    let r = h
        .commit(
            &bob,
            "project:shared-name",
            vec![delete("plan", Some(&rev(&cp, 0)))],
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    // There is no way to name another user's scope: a user field is an unknown field.
    let r = h
        .post(
            "/v1/memory/snapshot",
            Some(&bob),
            json!({"scope": "user", "userId": "alice"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // erase: a user token is not the admin key.
    let r = h
        .post("/v1/admin/erase", Some(&bob), json!({"userId": "alice"}))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // bob writing his own notes leaves alice's objects byte for byte as they were.
    h.commit_ok(&bob, "user", vec![put("secret", None, "bob's\n")])
        .await;
    let now = h.tree();
    for (k, v) in &alice_tree {
        assert_eq!(now.get(k), Some(v), "{k} changed");
    }
    let s = h.snap(&alice, "user").await;
    assert_eq!(
        s.bodies[0].body,
        note_file("secret", "summary of secret", "alice only\n").0
    );
}

/// A store in which an erase of alice lands between a commit's authentication and its
/// manifest write: the marker appears just before the first manifest is created.
#[derive(Debug)]
struct EraseDuringCommit(FsStore);

#[async_trait::async_trait]
impl ObjectStore for EraseDuringCommit {
    async fn get(&self, k: &str, v: Option<&ETag>) -> Result<Fetched, StoreError> {
        self.0.get(k, v).await
    }
    async fn put_if_match(&self, k: &str, b: Vec<u8>, e: &ETag) -> Result<ETag, StoreError> {
        self.0.put_if_match(k, b, e).await
    }
    async fn put_if_absent(&self, k: &str, b: Vec<u8>) -> Result<ETag, StoreError> {
        if k.ends_with("manifest.json") {
            let _ = self
                .0
                .put_if_absent("erased/alice.json", b"{}".to_vec())
                .await;
        }
        self.0.put_if_absent(k, b).await
    }
    async fn list(&self, p: &str) -> Result<Vec<String>, StoreError> {
        self.0.list(p).await
    }
    async fn delete(&self, k: &str) -> Result<(), StoreError> {
        self.0.delete(k).await
    }
}

#[tokio::test]
async fn a_commit_racing_an_erase_removes_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(EraseDuringCommit(FsStore::open(dir.path()).unwrap()));
    let h = Harness::on_store(dir, store, |_| {});
    let t = h.token("alice").await;
    let r = h.commit(&t, "user", vec![put("a", None, "late\n")]).await;
    assert_eq!(r.status, StatusCode::GONE, "{}", r.json);
    let left: Vec<String> = h.tree().into_keys().collect();
    assert!(left.iter().all(|k| !k.starts_with("users/")), "{left:?}");
}

/// A store that fails every call with a message that must not reach the client.
#[derive(Debug)]
struct BrokenStore;

#[async_trait::async_trait]
impl ObjectStore for BrokenStore {
    async fn get(&self, _: &str, _: Option<&ETag>) -> Result<Fetched, StoreError> {
        Err(StoreError::Other("disk /srv/secret-path exploded".into()))
    }
    async fn put_if_match(&self, _: &str, _: Vec<u8>, _: &ETag) -> Result<ETag, StoreError> {
        Err(StoreError::Other("disk /srv/secret-path exploded".into()))
    }
    async fn put_if_absent(&self, _: &str, _: Vec<u8>) -> Result<ETag, StoreError> {
        Err(StoreError::Other("disk /srv/secret-path exploded".into()))
    }
    async fn list(&self, _: &str) -> Result<Vec<String>, StoreError> {
        Err(StoreError::Other("disk /srv/secret-path exploded".into()))
    }
    async fn delete(&self, _: &str) -> Result<(), StoreError> {
        Err(StoreError::Other("disk /srv/secret-path exploded".into()))
    }
}

#[tokio::test]
async fn internal_errors_are_500_without_internals() {
    let h = Harness::on_store(tempfile::tempdir().unwrap(), Arc::new(BrokenStore), |_| {});
    let r = h
        .raw(
            Method::GET,
            "/v1/memory/identity",
            Some("msync_0123"),
            Body::empty(),
        )
        .await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(r.json["code"], "internal");
    assert!(!r.json.to_string().contains("secret-path"), "{}", r.json);
    let r = h
        .post("/v1/admin/erase", Some(ADMIN), json!({"userId": "alice"}))
        .await;
    assert_eq!(r.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(!r.json.to_string().contains("secret-path"));
}

/// An fs store that logs every call, can slip one concurrent manifest write in just before the
/// server's next compare-and-swap, and can make every manifest swap lose.
#[derive(Debug)]
struct Instrumented {
    inner: FsStore,
    log: std::sync::Mutex<Vec<String>>,
    concurrent_write: std::sync::Mutex<Option<Vec<u8>>>,
    always_lose: bool,
}

impl Instrumented {
    fn new(dir: &Path, always_lose: bool) -> Self {
        Instrumented {
            inner: FsStore::open(dir).unwrap(),
            log: Default::default(),
            concurrent_write: Default::default(),
            always_lose,
        }
    }
    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut self.log.lock().unwrap())
    }
}

#[async_trait::async_trait]
impl ObjectStore for Instrumented {
    async fn get(&self, k: &str, v: Option<&ETag>) -> Result<Fetched, StoreError> {
        let tag = if v.is_some() {
            "get-if-none-match"
        } else {
            "get"
        };
        self.log.lock().unwrap().push(format!("{tag} {k}"));
        self.inner.get(k, v).await
    }
    async fn put_if_match(&self, k: &str, b: Vec<u8>, e: &ETag) -> Result<ETag, StoreError> {
        self.log.lock().unwrap().push(format!("put-if-match {k}"));
        if self.always_lose && k.ends_with("manifest.json") {
            return Err(StoreError::PreconditionFailed);
        }
        let injected = self.concurrent_write.lock().unwrap().take();
        if let Some(other) = injected {
            self.inner.put_if_match(k, other, e).await.unwrap();
        }
        self.inner.put_if_match(k, b, e).await
    }
    async fn put_if_absent(&self, k: &str, b: Vec<u8>) -> Result<ETag, StoreError> {
        self.log.lock().unwrap().push(format!("put-if-absent {k}"));
        self.inner.put_if_absent(k, b).await
    }
    async fn list(&self, p: &str) -> Result<Vec<String>, StoreError> {
        self.log.lock().unwrap().push(format!("list {p}"));
        self.inner.list(p).await
    }
    async fn delete(&self, k: &str) -> Result<(), StoreError> {
        self.log.lock().unwrap().push(format!("delete {k}"));
        self.inner.delete(k).await
    }
}

fn instrumented(always_lose: bool) -> (Harness, Arc<Instrumented>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Instrumented::new(dir.path(), always_lose));
    let h = Harness::on_store(dir, store.clone(), |s| s.commit_attempts = 4);
    (h, store)
}

#[tokio::test]
async fn a_poll_reads_only_the_manifest_conditionally_and_have_bodies_are_never_read() {
    let (h, store) = instrumented(false);
    let t = h.token("alice").await;
    h.commit_ok(&t, "user", vec![put("a", None, "1"), put("b", None, "2")])
        .await;
    let first = h.snap(&t, "user").await;
    store.take_log();
    let s = h
        .snapshot(
            &t,
            SnapshotRequest {
                scope: Scope::User,
                have: first.bodies.iter().map(|b| b.hash.clone()).collect(),
                known_manifest: None,
                receipt: None,
                since: None,
                kid: None,
            },
        )
        .await;
    assert!(s.bodies.is_empty());
    let log = store.take_log();
    assert!(
        log.iter().all(|l| !l.contains("/objects/")),
        "bodies in `have` were read: {log:?}"
    );
    h.snapshot(
        &t,
        SnapshotRequest {
            scope: Scope::User,
            have: vec![],
            known_manifest: first.manifest_version.clone(),
            receipt: None,
            since: None,
            kid: None,
        },
    )
    .await;
    let log = store.take_log();
    let data: Vec<&String> = log.iter().filter(|l| l.contains("users/")).collect();
    assert_eq!(
        data,
        vec!["get-if-none-match users/alice/memory/manifest.json"],
        "an unchanged poll must cost one conditional manifest read: {log:?}"
    );
}

/// Moves note `id` to revision `rev` in the stored manifest, as another device's commit would.
async fn concurrent_manifest(h: &Harness, id: &str, rev: &str) -> Vec<u8> {
    let Fetched::Object(o) = h
        .store
        .get("users/alice/memory/manifest.json", None)
        .await
        .unwrap()
    else {
        panic!("no manifest")
    };
    let mut m = memoria_sync_server::manifest::Manifest::from_bytes(&o.bytes).unwrap();
    m.generation += 1;
    let e = m
        .notes
        .get_mut(&memoria_shared::NoteId::new(id).unwrap())
        .unwrap();
    // The other device's revision file, written before its manifest as the server does.
    let dir = format!("users/alice/memory/objects/{id}");
    let Fetched::Object(body) = h
        .store
        .get(&format!("{dir}/{}.md", e.revision), None)
        .await
        .unwrap()
    else {
        panic!("no revision")
    };
    h.store
        .put_if_absent(&format!("{dir}/{rev}.md"), body.bytes)
        .await
        .unwrap();
    e.revision = rev.to_owned();
    m.to_bytes()
}

#[tokio::test]
async fn a_lost_swap_revalidates_stale_bases_are_refused_never_overwritten() {
    let (h, store) = instrumented(false);
    let t = h.token("alice").await;
    let c = h
        .commit_ok(&t, "user", vec![put("a", None, "1"), put("b", None, "1")])
        .await;
    // Another device edits `a` between this commit's manifest read and its swap.
    let other = concurrent_manifest(&h, "a", "from-another-device").await;
    *store.concurrent_write.lock().unwrap() = Some(other.clone());
    let r = h
        .commit(&t, "user", vec![put("a", Some(&rev(&c, 0)), "mine")])
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.json);
    assert_eq!(
        r.json["stale"],
        json!([{"id": "a", "currentRevision": "from-another-device"}])
    );
    let stored = h.tree()["users/alice/memory/manifest.json"].clone();
    assert_eq!(stored, other, "the other device's manifest was overwritten");
    let objects = h
        .tree()
        .into_keys()
        .filter(|k| k.contains("/objects/a/"))
        .count();
    assert_eq!(
        objects, 2,
        "only the first and the other device's revisions of a may remain"
    );
}

#[tokio::test]
async fn a_lost_swap_on_other_notes_retries_and_applies() {
    let (h, store) = instrumented(false);
    let t = h.token("alice").await;
    let c = h
        .commit_ok(&t, "user", vec![put("a", None, "1"), put("b", None, "1")])
        .await;
    *store.concurrent_write.lock().unwrap() =
        Some(concurrent_manifest(&h, "a", "from-another-device").await);
    let ok = h
        .commit_ok(&t, "user", vec![put("b", Some(&rev(&c, 1)), "mine")])
        .await;
    let s = h.snap(&t, "user").await;
    assert_eq!(
        s.notes[0].revision, "from-another-device",
        "kept the other edit"
    );
    assert_eq!(s.notes[1].revision, rev(&ok, 0));
    let swaps = store
        .take_log()
        .iter()
        .filter(|l| l.starts_with("put-if-match") && l.ends_with("/manifest.json"))
        .count();
    assert_eq!(swaps, 2, "one lost swap, one retry");
}

#[tokio::test]
async fn endless_contention_is_503_and_leaves_nothing_behind() {
    let (h, _store) = instrumented(true);
    let t = h.token("alice").await;
    // The first commit creates the manifest (create-only), the second must swap it.
    let c = h.commit_ok(&t, "user", vec![put("a", None, "1")]).await;
    let before = h.tree();
    let r = h
        .commit(
            &t,
            "user",
            vec![put("a", Some(&rev(&c, 0)), "2"), put("b", None, "2")],
        )
        .await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.json);
    assert_eq!(r.json["code"], "contention");
    assert_eq!(r.headers["retry-after"], "1");
    assert_eq!(h.tree(), before, "a refused commit left revisions behind");
}

/// A committed body whose YAML frontmatter nests aliases (eight levels of nine) is refused at
/// once with a clear error, never expanded: the server parses every body it accepts.
#[tokio::test]
async fn a_yaml_alias_bomb_is_refused_without_expanding_it() {
    let h = Harness::new();
    let t = h.token("alice").await;
    let before = h.tree();
    let mut yaml = String::from("id: bomb\na0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..=8 {
        let p = i - 1;
        yaml.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let mut change = serde_json::to_value(put("bomb", None, "x\n")).unwrap();
    change["body"] = json!(format!("---\n{yaml}---\nbody\n"));
    let r = h
        .post(
            "/v1/memory/commit",
            Some(&t),
            json!({"scope": "user", "changes": [change]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    assert_eq!(r.json["code"], "invalid_note", "{}", r.json);
    assert!(
        r.json["message"].as_str().unwrap().contains("anchor"),
        "{}",
        r.json
    );
    assert_eq!(h.tree(), before);
}

/// Deleting ids the scope never had records nothing: each such commit is refused with a reply
/// that names the note, so no client can grow a manifest with tombstones of its own invention.
#[tokio::test]
async fn deletes_of_notes_that_never_existed_are_refused_and_stored_nowhere() {
    let h = Harness::new();
    let t = h.token("alice").await;
    let c = h.commit_ok(&t, "user", vec![put("a", None, "1")]).await;
    let before = h.tree();
    for i in 0..50 {
        let ghost = format!("ghost-{i}");
        let r = h.commit(&t, "user", vec![delete(&ghost, None)]).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
        assert_eq!(r.json["code"], "invalid_note");
        let msg = r.json["message"].as_str().unwrap();
        assert!(
            msg.contains(&ghost) && msg.contains("no such note to delete"),
            "{msg}"
        );
    }
    // With a real change beside it, the whole commit is refused.
    let r = h
        .commit(
            &t,
            "user",
            vec![put("a", Some(&rev(&c, 0)), "2"), delete("ghost", None)],
        )
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    assert_eq!(h.tree(), before, "nothing was written");
    let s = h.snap(&t, "user").await;
    assert_eq!(s.notes.len(), 1);
}

/// Wrong admin keys get a few tries a minute, then 429 with `Retry-After`; the right key is
/// answered all the while; a minute later a wrong key is refused as before, not limited.
#[tokio::test]
async fn the_admin_endpoint_is_rate_limited() {
    let h = Harness::new();
    let burst = memoria_sync_server::ADMIN_RATE_LIMIT.burst;
    let body = json!({"userId": "nobody"});
    for _ in 0..burst {
        let r = h.post("/v1/admin/erase", Some("guess"), body.clone()).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
    }
    for key in ["guess", ""] {
        let r = h.post("/v1/admin/erase", Some(key), body.clone()).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS, "{}", r.json);
        assert_eq!(r.json["code"], "rate_limited");
        assert!(r.headers.contains_key("retry-after"));
    }
    let r = h.post("/v1/admin/erase", Some(ADMIN), body.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    h.clock.advance(60_000);
    let r = h.post("/v1/admin/erase", Some("guess"), body).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.json);
}

/// `memoria-sync serve` refuses to start with a short admin key, saying why and how long it
/// must be, without printing the key.
#[test]
fn the_server_refuses_a_short_admin_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("fs:{}", dir.path().display());
    let mut child = std::process::Command::new(memoria_tests::sync_server::sync_binary())
        .args(["serve", "--store", &store, "--listen", "127.0.0.1:0"])
        .env("MEMORIA_SYNC_ADMIN_KEY", "hunter2")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A server that accepted the key would serve until killed: give it a bounded time to exit.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("memoria-sync started with a 7-character admin key");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("MEMORIA_SYNC_ADMIN_KEY") && err.contains("at least 32"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}

/// The account's blobs for `key` at the lowest Argon2id costs readers accept, with a
/// rotation's `previous` and `successor` when given.
fn e2ee_blobs(
    key: &memoria_shared::e2ee::AccountKey,
    previous: Option<&memoria_shared::e2ee::AccountKey>,
    successor: bool,
) -> Value {
    use memoria_shared::e2ee::{KdfParams, RecoveryKey, WrappedKey};
    let under = |k: &memoria_shared::e2ee::AccountKey, w: &memoria_shared::e2ee::AccountKey| {
        WrappedKey::with_recovery_key_parts(k, &w.wrapping_key(), [5; 24]).to_json()
    };
    let mut v = json!({
        "passphrase": WrappedKey::with_passphrase_parts(key, "a passphrase", KdfParams::MIN, [1; 16], [2; 24])
            .unwrap()
            .to_json(),
        "recovery": WrappedKey::with_recovery_key_parts(key, &RecoveryKey::from_bytes([9; 32]), [3; 24]).to_json(),
    });
    if let Some(p) = previous {
        v["previous"] = json!(under(p, key));
        if successor {
            v["successor"] = json!(under(key, p));
        }
    }
    v
}

#[tokio::test]
async fn e2ee_rotation_and_turning_off_follow_the_keys_rules() {
    use memoria_shared::e2ee::AccountKey;
    let h = Harness::new();
    let t = h.token("alice").await;
    let kid = |k: &AccountKey| k.derive().key_id().as_str().to_owned();
    let (k0, k1, k2) = (
        AccountKey::from_bytes([1; 32]),
        AccountKey::from_bytes([2; 32]),
        AccountKey::from_bytes([3; 32]),
    );
    let keys = "/v1/memory/e2ee/keys";
    let mark = |scope: &str, k: &AccountKey, only: bool| json!({"scope": scope, "kid": kid(k), "onlyExisting": only});
    let code = |r: &Reply| r.json["code"].as_str().unwrap_or_default().to_owned();

    // Nothing to rotate yet; then the first key.
    let r = h.e2ee(&t, "keys", e2ee_blobs(&k1, Some(&k0), true)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    let r = h.e2ee(&t, "keys", e2ee_blobs(&k0, None, false)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let r = h.e2ee(&t, "mark", mark("user", &k0, false)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let envelope = memoria_shared::e2ee::envelope::seal_note_with_nonce(
        &k0.derive(),
        memoria_shared::e2ee::NoteContext {
            user_id: "alice",
            scope: &Scope::User,
        },
        &memoria_shared::NoteId::new("n").unwrap(),
        &note_file("n", "N", "b\n").0,
        1,
        [7; 24],
        memoria_shared::e2ee::envelope::ENVELOPE_VERSION,
    )
    .unwrap();
    let change = json!({"id": envelope.opaque_id.as_str(), "op": "put", "baseRevision": null, "body": envelope.body, "hash": envelope.hash.as_str()});
    let r = h
        .e2ee(&t, "commit", json!({"scope": "user", "changes": [change]}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);

    // Another key without `previous` is refused; with it, a rotation starts.
    let r = h.e2ee(&t, "keys", e2ee_blobs(&k1, None, false)).await;
    assert_eq!(code(&r), "keys_exist", "{}", r.json);
    let wrong = e2ee_blobs(&k1, Some(&k2), true);
    let r = h.e2ee(&t, "keys", wrong).await;
    assert_eq!(
        code(&r),
        "keys_exist",
        "previous must wrap the stored key: {}",
        r.json
    );
    let r = h.e2ee(&t, "keys", e2ee_blobs(&k1, Some(&k0), true)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    // Not another while it is under way; a new passphrase keeps it.
    let r = h.e2ee(&t, "keys", e2ee_blobs(&k2, Some(&k1), false)).await;
    assert_eq!(code(&r), "keys_exist", "{}", r.json);
    let r = h.e2ee(&t, "keys", e2ee_blobs(&k1, None, false)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert!(r.json["keys"]["previous"].is_string(), "{}", r.json);
    assert!(r.json["keys"]["successor"].is_string(), "{}", r.json);

    // The previous key only asks; the new key moves the scope, which then refuses the old.
    let r = h.e2ee(&t, "mark", mark("user", &k0, true)).await;
    assert_eq!(
        r.json["marked"], true,
        "still under the previous key: {}",
        r.json
    );
    let r = h.e2ee(&t, "mark", mark("project:p", &k0, false)).await;
    assert_eq!(code(&r), "keys_exist", "it never marks: {}", r.json);
    let r = h.e2ee(&t, "mark", mark("user", &k1, false)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let r = h.e2ee(&t, "mark", mark("user", &k0, true)).await;
    assert_eq!(code(&r), "scope_encrypted", "{}", r.json);
    let snap = |k: &AccountKey| json!({"scope": "user", "kid": kid(k)});
    let r = h.e2ee(&t, "snapshot", snap(&k0)).await;
    assert_eq!(
        code(&r),
        "scope_encrypted",
        "read with the old key: {}",
        r.json
    );
    let r = h.e2ee(&t, "snapshot", snap(&k1)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    assert_eq!(
        r.json["notes"],
        json!([]),
        "the old key's envelope is left out"
    );

    // No turning off while the rotation is under way; the purge ends it.
    let proof = |k: &AccountKey| {
        memoria_shared::e2ee::WrappedKey::with_recovery_key_parts(k, &k.wrapping_key(), [6; 24])
            .to_json()
    };
    let off = |k: &AccountKey, p: String| json!({"kid": kid(k), "proof": p});
    let r = h.e2ee(&t, "off", off(&k1, proof(&k1))).await;
    assert_eq!(code(&r), "keys_exist", "{}", r.json);
    let r = h.e2ee(&t, "purge", json!({"scope": "user"})).await;
    assert_eq!(r.json["removed"], 1, "{}", r.json);
    let r = h.raw(Method::GET, keys, Some(&t), Body::empty()).await;
    assert!(
        r.json["keys"].get("previous").is_none(),
        "ended: {}",
        r.json
    );

    // Turning off: a proof of another key is refused; then marks are refused, the scope is
    // unmarked, and the keys go with the last purge, the proof kept.
    let unmark = json!({"scope": "user", "kid": kid(&k1)});
    let r = h.e2ee(&t, "off", off(&k1, proof(&k0))).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.json);
    let r = h.e2ee(&t, "unmark", unmark.clone()).await;
    assert_eq!(
        code(&r),
        "scope_encrypted",
        "only while turning off: {}",
        r.json
    );
    let r = h.e2ee(&t, "off", off(&k1, proof(&k1))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let r = h.e2ee(&t, "mark", mark("project:p", &k1, false)).await;
    assert_eq!(code(&r), "scope_not_encrypted", "{}", r.json);
    let r = h.e2ee(&t, "unmark", unmark).await;
    assert_eq!(r.json["unmarked"], true, "{}", r.json);
    let r = h.e2ee(&t, "purge", json!({"scope": "user"})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    let r = h.raw(Method::GET, keys, Some(&t), Body::empty()).await;
    assert_eq!(r.json["keys"], Value::Null, "{}", r.json);
    assert_eq!(r.json["ended"], json!(proof(&k1)), "{}", r.json);
    let r = h.e2ee(&t, "purge", json!({"scope": "user"})).await;
    assert_eq!(
        code(&r),
        "scope_not_encrypted",
        "nothing left to purge: {}",
        r.json
    );
}

/// A purge looks for plaintext files only where there can be some: a scope its mark created
/// with nothing under its name is purged without listing its revision files, while a scope
/// that held a plaintext file before its mark (left by a plaintext commit that never landed)
/// or plaintext entries is purged of them.
#[tokio::test]
async fn a_purge_lists_revision_files_only_of_a_scope_that_can_hold_plaintext() {
    use memoria_shared::e2ee::AccountKey;
    use memoria_sync_server::layout::{object_key, objects_prefix};
    let (h, store) = instrumented(false);
    let t = h.token("alice").await;
    let alice = UserId::new("alice").unwrap();
    let k = AccountKey::from_bytes([1; 32]);
    let mark = |scope: &str| json!({"scope": scope, "kid": k.derive().key_id().as_str(), "onlyExisting": false});
    // Plaintext entries, committed before the account had keys.
    h.commit_ok(&t, "project:old", vec![put("kept", None, "plain\n")])
        .await;
    let r = h.e2ee(&t, "keys", e2ee_blobs(&k, None, false)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.json);
    // A plaintext revision file under a scope that has no manifest.
    let orphan_scope = Scope::parse("project:orphan").unwrap();
    let stray = object_key(
        &alice,
        &orphan_scope,
        &memoria_shared::NoteId::new("stray").unwrap(),
        "r-stray",
    );
    store
        .put_if_absent(&stray, note_file("stray", "S", "plain\n").0.into_bytes())
        .await
        .unwrap();

    for (n, (scope, removed, deleted, listed)) in [
        ("user", 0, 0, false),
        ("project:orphan", 0, 1, true),
        ("project:old", 1, 1, true),
    ]
    .into_iter()
    .enumerate()
    {
        let r = h.e2ee(&t, "mark", mark(scope)).await;
        assert_eq!(r.status, StatusCode::OK, "{scope}: {}", r.json);
        let wire = Scope::parse(scope).unwrap();
        let envelope = memoria_shared::e2ee::envelope::seal_note_with_nonce(
            &k.derive(),
            memoria_shared::e2ee::NoteContext {
                user_id: "alice",
                scope: &wire,
            },
            &memoria_shared::NoteId::new("n").unwrap(),
            &note_file("n", "N", "sealed\n").0,
            1,
            [n as u8; 24],
            memoria_shared::e2ee::envelope::ENVELOPE_VERSION,
        )
        .unwrap();
        let change = json!({"id": envelope.opaque_id.as_str(), "op": "put", "baseRevision": null, "body": envelope.body, "hash": envelope.hash.as_str()});
        let r = h
            .e2ee(&t, "commit", json!({"scope": scope, "changes": [change]}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{scope}: {}", r.json);
        store.take_log();
        let r = h.e2ee(&t, "purge", json!({"scope": scope})).await;
        assert_eq!(r.status, StatusCode::OK, "{scope}: {}", r.json);
        assert_eq!(r.json["removed"], removed, "{scope}: {}", r.json);
        assert_eq!(r.json["deletedObjects"], deleted, "{scope}: {}", r.json);
        let objects = objects_prefix(&alice, &wire);
        let log = store.take_log();
        assert_eq!(
            log.contains(&format!("list {objects}")),
            listed,
            "{scope}: {log:?}"
        );
        // Only the envelope is left under the scope's name.
        let left: Vec<String> = h
            .tree()
            .into_keys()
            .filter(|f| f.starts_with(&objects))
            .collect();
        assert_eq!(left.len(), 1, "{scope}: {left:?}");
        assert!(
            left[0].contains(envelope.opaque_id.as_str()),
            "{scope}: {left:?}"
        );
    }
}
