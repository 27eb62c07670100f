//! The S3 store against a real S3 server (moto, started per test by [`MotoServer`]): the same
//! conformance suite as the filesystem store, and the `memoria-sync` binary serving from S3.

use std::sync::Arc;

use memoria_shared::protocol::SnapshotResponse;
use memoria_sync_server::store::s3::{S3Location, S3Store};
use memoria_sync_server::store::{ObjectStore, StoreUrl, conformance};
use memoria_tests::moto::MotoServer;
use memoria_tests::sync_server::{ServerProcess, create_token, put};
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
    env.push(("MEMORIA_SYNC_ADMIN_KEY", "adm"));
    let server = ServerProcess::start(&url, &env);
    let http = reqwest::Client::new();
    let r = http
        .post(server.url("/v1/memory/commit"))
        .bearer_auth(&token)
        .json(&json!({"scope": "project:p1", "changes": [put("a", None, "from s3\n")]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let s: SnapshotResponse = http
        .post(server.url("/v1/memory/snapshot"))
        .bearer_auth(&token)
        .json(&json!({"scope": "project:p1"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(s.bodies.len(), 1);
    // The poll with the current version is unchanged (S3 answers 304 to the validator).
    let poll: SnapshotResponse = http
        .post(server.url("/v1/memory/snapshot"))
        .bearer_auth(&token)
        .json(&json!({"scope": "project:p1", "knownManifest": s.manifest_version}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(poll.unchanged);
    let store = store_on(&moto);
    let keys = store.list("users/alice/").await.unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let r = http
        .post(server.url("/v1/admin/erase"))
        .bearer_auth("adm")
        .json(&json!({"userId": "alice"}))
        .send()
        .await
        .unwrap();
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
