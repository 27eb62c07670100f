//! The S3 store: R2, MinIO, AWS — anything that honours `If-Match` and `If-None-Match: *` on
//! PutObject. A lost race may come back as 412, as 404 (an `If-Match` on a key that vanished:
//! AWS, moto) or as 409 (R2/AWS `ConditionalRequestConflict` for simultaneous writes); all three
//! are [`StoreError::PreconditionFailed`], so the caller re-reads and never overwrites.
//!
//! Conditional writes are sent once, never retried by the SDK: a write that took effect but
//! whose reply was lost would, retried, come back as a lost race against itself. A write without
//! an answer is [`StoreError::Other`] — its outcome is unknown, and the caller resolves it by
//! reading the value back. Reads, lists and deletes keep the SDK's retries: they are idempotent.

use std::fmt;

use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};

use super::{ETag, Fetched, Object, ObjectStore, StoreError, check_key};

/// Where the bucket is: parsed from `s3://BUCKET[/PREFIX][?endpoint=URL&region=R&path_style=B]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// Prepended (with `/`) to every key; empty for none.
    pub prefix: String,
    /// `None` for AWS itself; `http://127.0.0.1:9000` for MinIO, the account URL for R2.
    pub endpoint: Option<String>,
    /// `auto` for R2 (the default).
    pub region: String,
    /// Path-style addressing (`endpoint/bucket/key`); the default when an endpoint is given.
    pub path_style: bool,
}

impl S3Location {
    /// Parses what follows `s3://`.
    pub fn parse(rest: &str) -> Result<Self, String> {
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (bucket, prefix) = path.split_once('/').unwrap_or((path, ""));
        if bucket.is_empty() {
            return Err("store `s3://` needs a bucket: `s3://BUCKET?endpoint=URL`".into());
        }
        let prefix = prefix.trim_end_matches('/').to_owned();
        if !prefix.is_empty() {
            check_key(&prefix)
                .map_err(|_| format!("invalid key prefix {prefix:?} in store URL"))?;
        }
        let mut loc = S3Location {
            bucket: bucket.to_owned(),
            prefix,
            endpoint: None,
            region: "auto".to_owned(),
            path_style: false,
        };
        let mut path_style = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "endpoint" => loc.endpoint = Some(v.to_owned()),
                "region" => loc.region = v.to_owned(),
                "path_style" => path_style = Some(v == "true" || v == "1"),
                _ => {
                    return Err(format!(
                        "unknown store URL option {k:?}: use endpoint, region or path_style"
                    ));
                }
            }
        }
        loc.path_style = path_style.unwrap_or(loc.endpoint.is_some());
        Ok(loc)
    }
}

impl fmt::Display for S3Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s3://{}", self.bucket)?;
        if !self.prefix.is_empty() {
            write!(f, "/{}", self.prefix)?;
        }
        write!(f, "?region={}", self.region)?;
        if let Some(ep) = &self.endpoint {
            write!(f, "&endpoint={ep}")?;
        }
        Ok(())
    }
}

/// A store in an S3 bucket.
#[derive(Clone)]
pub struct S3Store {
    client: aws_sdk_s3::Client,
    loc: S3Location,
}

impl fmt::Debug for S3Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The client holds credentials: never print it.
        f.debug_struct("S3Store").field("loc", &self.loc).finish()
    }
}

impl S3Store {
    /// Credentials from `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`
    /// when set).
    pub fn from_env(loc: S3Location) -> Result<Self, StoreError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let (Some(ak), Some(sk)) = (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) else {
            return Err(StoreError::Other(
                "S3 store needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
                    .into(),
            ));
        };
        Ok(Self::new(loc, &ak, &sk, var("AWS_SESSION_TOKEN")))
    }

    pub fn new(
        loc: S3Location,
        access_key: &str,
        secret_key: &str,
        session: Option<String>,
    ) -> Self {
        let creds = Credentials::new(access_key, secret_key, session, None, "memoria-sync");
        let mut b = aws_sdk_s3::config::Builder::new()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(loc.region.clone()))
            .credentials_provider(creds)
            .force_path_style(loc.path_style);
        if let Some(ep) = &loc.endpoint {
            b = b.endpoint_url(ep);
        }
        S3Store {
            client: aws_sdk_s3::Client::from_conf(b.build()),
            loc,
        }
    }

    /// Creates the bucket (for tests and first-time MinIO setups); an existing bucket is fine.
    pub async fn create_bucket(&self) -> Result<(), StoreError> {
        let mut req = self.client.create_bucket().bucket(&self.loc.bucket);
        if self.loc.region != "us-east-1" {
            req = req.create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(self.loc.region.as_str()))
                    .build(),
            );
        }
        match req.send().await {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.code(),
                    Some("BucketAlreadyOwnedByYou" | "BucketAlreadyExists")
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(other(e)),
        }
    }

    fn full_key(&self, key: &str) -> Result<String, StoreError> {
        check_key(key)?;
        Ok(self.with_prefix(key))
    }

    fn with_prefix(&self, key: &str) -> String {
        if self.loc.prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{}/{key}", self.loc.prefix)
        }
    }
}

/// The per-request override that turns the SDK's automatic retries off.
fn sent_once() -> aws_sdk_s3::config::Builder {
    aws_sdk_s3::config::Builder::default().retry_config(RetryConfig::disabled())
}

fn status<E>(e: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>) -> Option<u16> {
    e.raw_response().map(|r| r.status().as_u16())
}

fn other<E: std::error::Error + Send + Sync + 'static>(
    e: SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
) -> StoreError
where
    SdkError<E, aws_sdk_s3::config::http::HttpResponse>: ProvideErrorMetadata,
{
    let code = e.code().unwrap_or("-").to_owned();
    let msg = e.message().unwrap_or("").to_owned();
    StoreError::Other(format!(
        "S3 request failed (status {:?}, code {code}): {msg} {}",
        status(&e),
        aws_sdk_s3::error::DisplayErrorContext(&e)
    ))
}

/// Conditional-write failures that mean "someone else wrote first".
fn lost_race<E>(e: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>) -> bool
where
    SdkError<E, aws_sdk_s3::config::http::HttpResponse>: ProvideErrorMetadata,
{
    matches!(status(e), Some(412 | 409))
        || matches!(
            e.code(),
            Some("PreconditionFailed" | "ConditionalRequestConflict")
        )
}

#[async_trait::async_trait]
impl ObjectStore for S3Store {
    async fn get(&self, key: &str, if_none_match: Option<&ETag>) -> Result<Fetched, StoreError> {
        let full = self.full_key(key)?;
        let out = self
            .client
            .get_object()
            .bucket(&self.loc.bucket)
            .key(full)
            .set_if_none_match(if_none_match.map(|e| e.0.clone()))
            .send()
            .await;
        let out = match out {
            Ok(o) => o,
            Err(e) if status(&e) == Some(304) => return Ok(Fetched::NotModified),
            Err(e) if status(&e) == Some(404) || e.code() == Some("NoSuchKey") => {
                return Err(StoreError::NotFound);
            }
            Err(e) => return Err(other(e)),
        };
        let etag = ETag(out.e_tag().unwrap_or_default().to_owned());
        let bytes = out
            .body
            .collect()
            .await
            .map_err(StoreError::other)?
            .into_bytes()
            .to_vec();
        Ok(Fetched::Object(Object { bytes, etag }))
    }

    async fn put_if_match(
        &self,
        key: &str,
        bytes: Vec<u8>,
        etag: &ETag,
    ) -> Result<ETag, StoreError> {
        let full = self.full_key(key)?;
        let out = self
            .client
            .put_object()
            .bucket(&self.loc.bucket)
            .key(full)
            .if_match(etag.0.clone())
            .body(ByteStream::from(bytes))
            .customize()
            .config_override(sent_once())
            .send()
            .await;
        match out {
            Ok(o) => Ok(ETag(o.e_tag().unwrap_or_default().to_owned())),
            // 404 NoSuchKey: the key vanished since it was read — also a lost race.
            Err(e) if lost_race(&e) || status(&e) == Some(404) || e.code() == Some("NoSuchKey") => {
                Err(StoreError::PreconditionFailed)
            }
            Err(e) => Err(other(e)),
        }
    }

    async fn put_if_absent(&self, key: &str, bytes: Vec<u8>) -> Result<ETag, StoreError> {
        let full = self.full_key(key)?;
        let out = self
            .client
            .put_object()
            .bucket(&self.loc.bucket)
            .key(full)
            .if_none_match("*")
            .body(ByteStream::from(bytes))
            .customize()
            .config_override(sent_once())
            .send()
            .await;
        match out {
            Ok(o) => Ok(ETag(o.e_tag().unwrap_or_default().to_owned())),
            Err(e) if lost_race(&e) => Err(StoreError::PreconditionFailed),
            Err(e) => Err(other(e)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let full_prefix = self.with_prefix(prefix);
        let strip = if self.loc.prefix.is_empty() {
            0
        } else {
            self.loc.prefix.len() + 1
        };
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = self
                .client
                .list_objects_v2()
                .bucket(&self.loc.bucket)
                .prefix(&full_prefix)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(other)?;
            for obj in out.contents() {
                if let Some(k) = obj.key() {
                    keys.push(k[strip..].to_owned());
                }
            }
            match out.next_continuation_token() {
                Some(t) if out.is_truncated() == Some(true) => token = Some(t.to_owned()),
                _ => break,
            }
        }
        keys.sort();
        Ok(keys)
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let full = self.full_key(key)?;
        match self
            .client
            .delete_object()
            .bucket(&self.loc.bucket)
            .key(full)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if status(&e) == Some(404) => Ok(()),
            Err(e) => Err(other(e)),
        }
    }
}
