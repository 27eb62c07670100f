//! The conformance suite every [`ObjectStore`] must pass: the filesystem store in unit tests,
//! the S3 store against a real S3 server (moto) in `tests/it`.
//!
//! Each check panics with a message naming the broken guarantee. The race checks start 8
//! writers at once on one key with the same precondition and require exactly one winner, every
//! round: a store that lets two racers win would let two commits both "succeed" and lose one.

use std::sync::Arc;

use super::{ETag, Fetched, ObjectStore, StoreError};

/// Concurrent writers per race round.
pub const RACERS: usize = 8;

fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("conformance/{t:x}")
}

async fn must_get(store: &dyn ObjectStore, key: &str) -> (Vec<u8>, ETag) {
    match store.get(key, None).await {
        Ok(Fetched::Object(o)) => (o.bytes, o.etag),
        other => panic!("get {key}: expected the object, got {other:?}"),
    }
}

/// Runs every check, with `race_rounds` rounds of each race.
pub async fn run_all(store: Arc<dyn ObjectStore>, race_rounds: usize) {
    let base = nonce();
    missing_keys(store.as_ref(), &base).await;
    create_only(store.as_ref(), &base).await;
    compare_and_swap(store.as_ref(), &base).await;
    validators(store.as_ref(), &base).await;
    listing(store.as_ref(), &base).await;
    deleting(store.as_ref(), &base).await;
    race_put_if_match(std::slice::from_ref(&store), race_rounds).await;
    race_put_if_absent(std::slice::from_ref(&store), race_rounds).await;
}

async fn missing_keys(store: &dyn ObjectStore, base: &str) {
    let key = format!("{base}/missing");
    assert!(
        matches!(store.get(&key, None).await, Err(StoreError::NotFound)),
        "get of a missing key must be NotFound"
    );
    let any = ETag("\"0123\"".into());
    assert!(
        matches!(
            store.put_if_match(&key, b"x".to_vec(), &any).await,
            Err(StoreError::PreconditionFailed)
        ),
        "put_if_match on a missing key must be PreconditionFailed"
    );
    assert!(
        matches!(store.get(&key, None).await, Err(StoreError::NotFound)),
        "a failed put_if_match must not create the key"
    );
}

async fn create_only(store: &dyn ObjectStore, base: &str) {
    let key = format!("{base}/create/a.md");
    let etag = store.put_if_absent(&key, b"first".to_vec()).await.unwrap();
    assert!(
        matches!(
            store.put_if_absent(&key, b"second".to_vec()).await,
            Err(StoreError::PreconditionFailed)
        ),
        "put_if_absent on an existing key must be PreconditionFailed"
    );
    let (bytes, got) = must_get(store, &key).await;
    assert_eq!(
        bytes, b"first",
        "a refused create must leave the value alone"
    );
    assert_eq!(got, etag, "get must report the ETag the write returned");
}

async fn compare_and_swap(store: &dyn ObjectStore, base: &str) {
    let key = format!("{base}/cas/manifest.json");
    let e1 = store.put_if_absent(&key, b"v1".to_vec()).await.unwrap();
    let e2 = store.put_if_match(&key, b"v2".to_vec(), &e1).await.unwrap();
    assert_ne!(e1, e2, "a new value must get a new ETag");
    assert!(
        matches!(
            store.put_if_match(&key, b"stale".to_vec(), &e1).await,
            Err(StoreError::PreconditionFailed)
        ),
        "put_if_match with a stale ETag must be PreconditionFailed"
    );
    assert_eq!(must_get(store, &key).await, (b"v2".to_vec(), e2.clone()));
    let e3 = store.put_if_match(&key, b"v3".to_vec(), &e2).await.unwrap();
    assert_eq!(must_get(store, &key).await, (b"v3".to_vec(), e3));
}

async fn validators(store: &dyn ObjectStore, base: &str) {
    let key = format!("{base}/validators/m.json");
    let e1 = store.put_if_absent(&key, b"one".to_vec()).await.unwrap();
    assert_eq!(
        store.get(&key, Some(&e1)).await.unwrap(),
        Fetched::NotModified,
        "get with the current ETag must be NotModified"
    );
    let e2 = store
        .put_if_match(&key, b"two".to_vec(), &e1)
        .await
        .unwrap();
    match store.get(&key, Some(&e1)).await.unwrap() {
        Fetched::Object(o) => {
            assert_eq!(o.bytes, b"two");
            assert_eq!(o.etag, e2);
        }
        Fetched::NotModified => panic!("get with an old ETag must return the new value"),
    }
}

async fn listing(store: &dyn ObjectStore, base: &str) {
    let p = format!("{base}/list");
    for k in ["b/2.md", "a/1.md", "a/x/3.md", "ab/4.md"] {
        store
            .put_if_absent(&format!("{p}/{k}"), k.as_bytes().to_vec())
            .await
            .unwrap();
    }
    let all = store.list(&format!("{p}/")).await.unwrap();
    let expect: Vec<String> = ["a/1.md", "a/x/3.md", "ab/4.md", "b/2.md"]
        .iter()
        .map(|k| format!("{p}/{k}"))
        .collect();
    assert_eq!(
        all, expect,
        "list must return every key under the prefix, sorted"
    );
    let a = store.list(&format!("{p}/a/")).await.unwrap();
    assert_eq!(
        a,
        expect[..2].to_vec(),
        "list must respect a directory prefix"
    );
    let partial = store.list(&format!("{p}/a")).await.unwrap();
    assert_eq!(
        partial,
        expect[..3].to_vec(),
        "a prefix may end inside a segment"
    );
    assert!(store.list(&format!("{p}/none/")).await.unwrap().is_empty());
}

async fn deleting(store: &dyn ObjectStore, base: &str) {
    let key = format!("{base}/delete/k");
    store.put_if_absent(&key, b"x".to_vec()).await.unwrap();
    store.delete(&key).await.unwrap();
    assert!(matches!(
        store.get(&key, None).await,
        Err(StoreError::NotFound)
    ));
    store
        .delete(&key)
        .await
        .expect("deleting a missing key must succeed");
    store.put_if_absent(&key, b"y".to_vec()).await.unwrap();
    assert_eq!(must_get(store, &key).await.0, b"y");
}

/// `rounds` rounds of [`RACERS`] concurrent `put_if_match` calls with the same ETag (spread over
/// `stores`, which may be several handles on one backing store): exactly one must win, and the
/// stored value must be the winner's.
pub async fn race_put_if_match(stores: &[Arc<dyn ObjectStore>], rounds: usize) {
    let key = format!("{}/race-cas/manifest.json", nonce());
    let mut etag = stores[0].put_if_absent(&key, b"0".to_vec()).await.unwrap();
    for round in 0..rounds {
        let mut tasks = tokio::task::JoinSet::new();
        for racer in 0..RACERS {
            let store = stores[racer % stores.len()].clone();
            let (key, etag) = (key.clone(), etag.clone());
            tasks.spawn(async move {
                let value = format!("round {round} racer {racer}").into_bytes();
                let r = store.put_if_match(&key, value.clone(), &etag).await;
                (value, r)
            });
        }
        let mut winners = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            match joined.unwrap() {
                (value, Ok(new_etag)) => winners.push((value, new_etag)),
                (_, Err(StoreError::PreconditionFailed)) => {}
                (_, Err(e)) => panic!("round {round}: racer failed with {e}"),
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "round {round}: exactly one of {RACERS} conditional writers must win"
        );
        let (value, new_etag) = winners.pop().unwrap();
        assert_eq!(
            must_get(stores[0].as_ref(), &key).await,
            (value, new_etag.clone()),
            "round {round}: the stored value must be the winner's"
        );
        etag = new_etag;
    }
}

/// `rounds` rounds of [`RACERS`] concurrent `put_if_absent` calls on a fresh key: exactly one
/// must win.
pub async fn race_put_if_absent(stores: &[Arc<dyn ObjectStore>], rounds: usize) {
    let base = format!("{}/race-create", nonce());
    for round in 0..rounds {
        let key = format!("{base}/{round}.md");
        let mut tasks = tokio::task::JoinSet::new();
        for racer in 0..RACERS {
            let store = stores[racer % stores.len()].clone();
            let key = key.clone();
            tasks.spawn(async move { store.put_if_absent(&key, vec![racer as u8]).await });
        }
        let mut wins = 0;
        while let Some(joined) = tasks.join_next().await {
            match joined.unwrap() {
                Ok(_) => wins += 1,
                Err(StoreError::PreconditionFailed) => {}
                Err(e) => panic!("round {round}: racer failed with {e}"),
            }
        }
        assert_eq!(
            wins, 1,
            "round {round}: exactly one of {RACERS} creators must win"
        );
    }
}
