//! The object store: the only place the sync server keeps anything.
//!
//! One trait, [`ObjectStore`], with two implementations — [`fs::FsStore`] (a directory, the
//! self-hosted default) and [`s3::S3Store`] (R2, MinIO, AWS) — and one conformance suite
//! ([`conformance`]) that both must pass. Writes are conditional only: create-only or
//! compare-and-swap on an ETag. There is deliberately no unconditional put, so nothing in the
//! server can overwrite a value it has not seen.

pub mod conformance;
pub mod fs;
pub mod s3;

use std::fmt;
use std::sync::Arc;

/// An opaque version of one stored value, as the store reports it (quotes included for S3).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ETag(pub String);

impl fmt::Display for ETag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A stored value and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub bytes: Vec<u8>,
    pub etag: ETag,
}

/// The answer to a get with a validator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The value changed (or no validator was given).
    Object(Object),
    /// The value still has the validator's ETag.
    NotModified,
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A conditional write lost: the key exists (create-only) or has another ETag (or vanished)
    /// (compare-and-swap). Re-read and decide again; never overwrite.
    #[error("conditional write lost a race: re-read the value and try again")]
    PreconditionFailed,
    /// The key does not exist.
    #[error("no such object")]
    NotFound,
    /// The store failed (I/O, network, credentials). Check the store's configuration and health.
    /// After a conditional write this means its outcome is unknown: the value may have been
    /// written (the reply was lost) or not.
    #[error("object store failed: {0}")]
    Other(String),
}

impl StoreError {
    pub fn other(e: impl fmt::Display) -> Self {
        StoreError::Other(e.to_string())
    }
}

/// A key-value store with conditional writes.
///
/// Keys are `/`-separated relative paths of `[A-Za-z0-9._-]` segments that start with a letter or
/// digit (so never `..`, empty or hidden);
/// implementations refuse anything else with [`StoreError::Other`].
#[async_trait::async_trait]
pub trait ObjectStore: Send + Sync + fmt::Debug {
    /// Reads `key`. With `if_none_match`, answers [`Fetched::NotModified`] when the value still
    /// has that ETag. A missing key is [`StoreError::NotFound`].
    async fn get(&self, key: &str, if_none_match: Option<&ETag>) -> Result<Fetched, StoreError>;

    /// Replaces `key` only if its ETag is `etag`; otherwise [`StoreError::PreconditionFailed`]
    /// (also when the key has vanished).
    async fn put_if_match(
        &self,
        key: &str,
        bytes: Vec<u8>,
        etag: &ETag,
    ) -> Result<ETag, StoreError>;

    /// Creates `key` only if it does not exist; otherwise [`StoreError::PreconditionFailed`].
    async fn put_if_absent(&self, key: &str, bytes: Vec<u8>) -> Result<ETag, StoreError>;

    /// Every key that starts with `prefix`, sorted.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError>;

    /// Deletes `key`; deleting a missing key succeeds.
    async fn delete(&self, key: &str) -> Result<(), StoreError>;
}

/// Reads a key fully, or `None` when it does not exist.
pub async fn get_opt(store: &dyn ObjectStore, key: &str) -> Result<Option<Object>, StoreError> {
    match store.get(key, None).await {
        Ok(Fetched::Object(o)) => Ok(Some(o)),
        Ok(Fetched::NotModified) => Err(StoreError::Other(
            "store answered NotModified to a get without a validator".into(),
        )),
        Err(StoreError::NotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Checks a key against the rules in [`ObjectStore`].
pub fn check_key(key: &str) -> Result<(), StoreError> {
    let ok = !key.is_empty()
        && key.split('/').all(|seg| {
            seg.starts_with(|c: char| c.is_ascii_alphanumeric())
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        });
    if ok {
        Ok(())
    } else {
        Err(StoreError::Other(format!("refused object key {key:?}")))
    }
}

/// Where the store lives, as given on the command line: `fs:DIR` or
/// `s3://BUCKET[/PREFIX][?endpoint=URL&region=R&path_style=true|false]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    Fs(std::path::PathBuf),
    S3(s3::S3Location),
}

impl std::str::FromStr for StoreUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(dir) = s.strip_prefix("fs:") {
            if dir.is_empty() {
                return Err("store `fs:` needs a directory: `fs:/var/lib/memoria-sync`".into());
            }
            return Ok(StoreUrl::Fs(dir.into()));
        }
        if let Some(rest) = s.strip_prefix("s3://") {
            return s3::S3Location::parse(rest).map(StoreUrl::S3);
        }
        Err(format!(
            "unknown store {s:?}: use `fs:DIR` or `s3://BUCKET?endpoint=URL&region=R`"
        ))
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreUrl::Fs(dir) => write!(f, "fs:{}", dir.display()),
            StoreUrl::S3(loc) => write!(f, "{loc}"),
        }
    }
}

impl StoreUrl {
    /// Opens the store. S3 credentials come from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`.
    pub fn open(&self) -> Result<Arc<dyn ObjectStore>, StoreError> {
        match self {
            StoreUrl::Fs(dir) => Ok(Arc::new(fs::FsStore::open(dir)?)),
            StoreUrl::S3(loc) => Ok(Arc::new(s3::S3Store::from_env(loc.clone())?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        for ok in ["a", "users/u1/memory/manifest.json", "tokens/ab_c-1.json"] {
            assert!(check_key(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "/a", "a/", "a//b", "../a", "a/../b", "a/./b", ".a", "a/-b", "a b", "a\\b", "é",
        ] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn store_urls_parse() {
        assert_eq!(
            "fs:/tmp/x".parse::<StoreUrl>().unwrap(),
            StoreUrl::Fs("/tmp/x".into())
        );
        assert!("fs:".parse::<StoreUrl>().is_err());
        assert!("ftp://x".parse::<StoreUrl>().is_err());
        let StoreUrl::S3(loc) = "s3://b1/pre/fix?endpoint=http://127.0.0.1:9000&region=auto"
            .parse::<StoreUrl>()
            .unwrap()
        else {
            panic!("not s3")
        };
        assert_eq!(loc.bucket, "b1");
        assert_eq!(loc.prefix, "pre/fix");
        assert_eq!(loc.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(loc.region, "auto");
        assert!(loc.path_style);
    }
}
