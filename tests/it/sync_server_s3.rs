//! The S3 store against a real S3 server (moto, started per test by [`MotoServer`]): the same
//! conformance suite as the filesystem store, and the `memoria-sync` binary serving from S3.

use std::sync::Arc;

use memoria_shared::protocol::SnapshotResponse;
use memoria_sync_server::store::s3::{S3Location, S3Store};
use memoria_sync_server::store::{ObjectStore, StoreUrl, conformance, get_opt};
use memoria_tests::moto::{BUCKET, MotoServer};
use memoria_tests::proxy::Proxy;
use memoria_tests::sync_server::{
    ADMIN_KEY, ServerProcess, create_token, post_json, put, send_post,
};
use serde_json::json;

const CREDS: [(&str, &str); 2] = memoria_tests::moto::CREDENTIALS;

fn store_on(moto: &MotoServer) -> Arc<dyn ObjectStore> {
    let StoreUrl::S3(loc) = moto.store_url().parse::<StoreUrl>().unwrap() else {
        panic!("not an s3 url")
    };
    Arc::new(S3Store::new(loc, "test", "test", None))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_store_passes_the_conformance_suite_on_moto() {
    let moto = MotoServer::start();
    conformance::run_all(store_on(&moto), 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_store_with_a_key_prefix_and_region_auto() {
    let moto = MotoServer::start();
    let loc = S3Location::parse(&format!(
        "r2-like/tenant-a?endpoint={}&region=auto",
        moto.endpoint()
    ))
    .unwrap();
    assert!(loc.path_style);
    let store = S3Store::new(loc, "test", "test", None);
    store.create_bucket().await.unwrap();
    store
        .create_bucket()
        .await
        .expect("an existing bucket is fine");
    let e = store
        .put_if_absent("a/b.json", b"1".to_vec())
        .await
        .unwrap();
    store
        .put_if_match("a/b.json", b"2".to_vec(), &e)
        .await
        .unwrap();
    assert_eq!(store.list("a/").await.unwrap(), vec!["a/b.json".to_owned()]);
    store.delete("a/b.json").await.unwrap();
    assert!(store.list("").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_from_s3_commit_snapshot_and_erase() {
    let moto = MotoServer::start();
    let url = moto.store_url();
    let token = create_token(&url, "alice", &CREDS);
    let mut env = CREDS.to_vec();
    env.push(("MEMORIA_SYNC_ADMIN_KEY", ADMIN_KEY));
    let server = ServerProcess::start(&url, &env);
    let http = reqwest::Client::new();
    let r = send_post(
        &http,
        &server.url("/v1/memory/commit"),
        &token,
        &json!({"scope": "project:p1", "changes": [put("a", None, "from s3\n")]}),
    )
    .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let s: SnapshotResponse = post_json(
        &http,
        &server.url("/v1/memory/snapshot"),
        &token,
        &json!({"scope": "project:p1"}),
    )
    .await;
    assert_eq!(s.bodies.len(), 1);
    // The poll with the current version is unchanged (S3 answers 304 to the validator).
    let poll: SnapshotResponse = post_json(
        &http,
        &server.url("/v1/memory/snapshot"),
        &token,
        &json!({"scope": "project:p1", "knownManifest": s.manifest_version}),
    )
    .await;
    assert!(poll.unchanged);
    let store = store_on(&moto);
    let keys = store.list("users/alice/").await.unwrap();
    let objects = keys.iter().filter(|k| k.contains("/objects/")).count();
    assert_eq!(objects, 1, "{keys:?}");
    for kept in [
        "users/alice/account.json",
        "users/alice/projects/p1/memory/manifest.json",
    ] {
        assert!(keys.iter().any(|k| k == kept), "{kept}: {keys:?}");
    }
    let r = send_post(
        &http,
        &server.url("/v1/admin/erase"),
        ADMIN_KEY,
        &json!({"userId": "alice"}),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert!(store.list("users/alice/").await.unwrap().is_empty());
    let r = http
        .get(server.url("/v1/memory/identity"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 410);
}

/// Every live manifest entry of `scope_prefix` names a revision object that exists.
async fn every_entry_has_its_body(
    store: &dyn ObjectStore,
    http: &reqwest::Client,
    server: &ServerProcess,
    token: &str,
) -> SnapshotResponse {
    let r = send_post(
        http,
        &server.url("/v1/memory/snapshot"),
        token,
        &json!({"scope": "project:p1"}),
    )
    .await;
    assert_eq!(r.status(), 200, "snapshot: {}", r.text().await.unwrap());
    let s: SnapshotResponse = r.json().await.unwrap();
    let keys = store
        .list("users/alice/projects/p1/memory/objects/")
        .await
        .unwrap();
    for e in s.notes.iter().filter(|e| !e.deleted) {
        let want = format!(
            "users/alice/projects/p1/memory/objects/{}/{}.md",
            e.id, e.revision
        );
        assert!(
            keys.contains(&want),
            "the manifest names {want}, which is gone: {keys:?}"
        );
    }
    s
}

/// A manifest write on S3 that took effect but whose reply was lost (moto behind a proxy that
/// closes the connection instead of passing the answer on) is this commit's success: it must not
/// come back as a lost race against itself, and the revisions it names must stay. Both the
/// create-only write of a new scope and the `If-Match` replace of an edit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_write_whose_reply_is_lost_keeps_its_revisions() {
    let moto = MotoServer::start();
    let proxy = Proxy::start(&moto.endpoint());
    let url = format!("s3://{BUCKET}?endpoint={}&region=us-east-1", proxy.url);
    let token = create_token(&url, "alice", &CREDS);
    let server = ServerProcess::start(&url, &CREDS);
    let store = store_on(&moto);
    let http = reqwest::Client::new();
    let manifest_put = format!("PUT /{BUCKET}/users/alice/projects/p1/memory/manifest.json");
    let commit = |changes: serde_json::Value| {
        let (http, server, token) = (&http, &server, &token);
        async move {
            let r = send_post(
                http,
                &server.url("/v1/memory/commit"),
                token,
                &json!({"scope": "project:p1", "changes": changes}),
            )
            .await;
            let status = r.status();
            (status, r.json::<serde_json::Value>().await.unwrap())
        }
    };

    proxy.drop_replies(&manifest_put, 1);
    let (status, body) = commit(json!([put("a", None, "first\n")])).await;
    assert_eq!(
        proxy.dropped(),
        1,
        "the proxy lost no reply: {:?}",
        proxy.forwarded()
    );
    assert_eq!(
        status, 200,
        "the create landed, so the commit succeeded: {body}"
    );
    let rev = body["applied"][0]["revision"].as_str().unwrap().to_owned();
    let s = every_entry_has_its_body(store.as_ref(), &http, &server, &token).await;
    assert_eq!(s.notes[0].revision, rev);

    proxy.drop_replies(&manifest_put, 1);
    let (status, body) = commit(json!([put("a", Some(&rev), "second\n")])).await;
    assert_eq!(proxy.dropped(), 2);
    assert_eq!(status, 200, "the If-Match replace landed: {body}");
    let rev2 = body["applied"][0]["revision"].as_str().unwrap().to_owned();
    let s = every_entry_has_its_body(store.as_ref(), &http, &server, &token).await;
    assert_eq!(s.notes[0].revision, rev2);
    assert!(s.bodies[0].body.ends_with("second\n"));
}

/// On S3 too, many edits of one note leave a bounded number of revision objects: once the grace
/// period (twice the request timeout, 2 s here) is over, the next edit's commit deletes the
/// revisions it replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_objects_after_many_edits_of_one_note_are_bounded() {
    let moto = MotoServer::start();
    let url = moto.store_url();
    let token = create_token(&url, "alice", &CREDS);
    let mut env = CREDS.to_vec();
    env.push(("MEMORIA_SYNC_LIMITS__REQUEST_TIMEOUT_SECS", "1"));
    let server = ServerProcess::start(&url, &env);
    let store = store_on(&moto);
    let http = reqwest::Client::new();
    let mut base: Option<String> = None;
    let mut commit = async |i: usize| {
        let r = send_post(
            &http,
            &server.url("/v1/memory/commit"),
            &token,
            &json!({"scope": "user", "changes": [put("n", base.as_deref(), &format!("{i}\n"))]}),
        )
        .await;
        assert_eq!(r.status(), 200);
        let body: serde_json::Value = r.json().await.unwrap();
        base = Some(body["applied"][0]["revision"].as_str().unwrap().to_owned());
    };
    for i in 0..10 {
        commit(i).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(2300)).await;
    commit(10).await;
    let prefix = "users/alice/memory/objects/n/";
    let mut left = usize::MAX;
    for _ in 0..60 {
        left = store.list(prefix).await.unwrap().len();
        if left <= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        left <= 2,
        "{left} revision objects of one note after 11 edits"
    );
}

/// On S3 too, a damaged manifest is served from the copy kept beside it and replaced by the
/// next commit, and a revision object gone from the bucket is reported in `damaged` while the
/// scope's other notes are still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_a_damaged_manifest_and_a_missing_revision_keep_the_scope_serving() {
    let moto = MotoServer::start();
    let url = moto.store_url();
    let token = create_token(&url, "alice", &CREDS);
    let server = ServerProcess::start(&url, &CREDS);
    let store = store_on(&moto);
    let http = reqwest::Client::new();
    let post = async |path: &str, body: serde_json::Value| -> (u16, serde_json::Value) {
        let r = send_post(&http, &server.url(path), &token, &body).await;
        (r.status().as_u16(), r.json().await.unwrap_or_default())
    };
    let (status, c) = post(
        "/v1/memory/commit",
        json!({"scope": "user", "changes": [put("a", None, "1\n"), put("b", None, "1\n")]}),
    )
    .await;
    assert_eq!(status, 200, "{c}");
    let rev_a = c["applied"][0]["revision"].as_str().unwrap().to_owned();
    let rev_b = c["applied"][1]["revision"].as_str().unwrap().to_owned();
    let (status, c) = post(
        "/v1/memory/commit",
        json!({"scope": "user", "changes": [put("a", Some(&rev_a), "2\n")]}),
    )
    .await;
    assert_eq!(status, 200, "{c}");
    let manifest = "users/alice/memory/manifest.json";
    let copy = "users/alice/memory/manifest.prev.json";
    let mut copied = false;
    for _ in 0..100 {
        if let Ok(Some(o)) = get_opt(store.as_ref(), copy).await
            && String::from_utf8_lossy(&o.bytes).contains("\"generation\":2")
        {
            copied = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(copied, "no copy of generation 2 beside the manifest");
    let etag = get_opt(store.as_ref(), manifest)
        .await
        .unwrap()
        .expect("the manifest")
        .etag;
    store
        .put_if_match(
            manifest,
            b"{\"format\":1,\"generation\":2,\"no".to_vec(),
            &etag,
        )
        .await
        .unwrap();

    let (status, s) = post("/v1/memory/snapshot", json!({"scope": "user"})).await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["notes"].as_array().unwrap().len(), 2, "{s}");
    assert_eq!(s["bodies"].as_array().unwrap().len(), 2, "{s}");

    let (status, c) = post(
        "/v1/memory/commit",
        json!({"scope": "user", "changes": [put("c", None, "new\n")]}),
    )
    .await;
    assert_eq!(status, 200, "{c}");
    let repaired: serde_json::Value = serde_json::from_slice(
        &get_opt(store.as_ref(), manifest)
            .await
            .unwrap()
            .unwrap()
            .bytes,
    )
    .expect("the commit replaced the damaged manifest");
    assert_eq!(repaired["generation"], 3);

    store
        .delete(&format!("users/alice/memory/objects/b/{rev_b}.md"))
        .await
        .unwrap();
    let (status, s) = post("/v1/memory/snapshot", json!({"scope": "user"})).await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["damaged"][0]["id"], "b", "{s}");
    let served: Vec<&str> = s["bodies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(served.len(), 2, "a and c still served: {s}");
    assert!(!served.contains(&"b"), "{s}");
}
