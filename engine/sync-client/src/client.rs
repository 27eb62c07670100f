//! The blocking HTTP client for the sync protocol: identity, snapshot, commit, with typed
//! errors. Bytes move through a [`Transport`], so tests can drive the server in-process and
//! inject faults (500s, replies lost after the server applied a commit).
//!
//! The real transport can abandon a request in flight: turning sync off (in any process) is
//! seen within [`CANCEL_POLL`] and closes the connection, so no more bytes reach the server.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use memoria_shared::protocol::{
    CommitRequest, CommitResponse, E2eeKeys, E2eeKeysResponse, ErrorBody, ErrorCode,
    IdentityResponse, MarkRequest, MarkResponse, OffRequest, PROTOCOL_VERSION, PurgeRequest,
    PurgeResponse, SnapshotRequest, SnapshotResponse, UnmarkRequest, UnmarkResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::{SyncError, SyncResult};

/// One HTTP request of the protocol.
#[derive(Debug, Clone)]
pub struct HttpRequest<'a> {
    /// `/v1/memory/identity` (GET, no body) or `/v1/memory/snapshot|commit` (POST, JSON).
    pub path: &'static str,
    pub body: Option<&'a [u8]>,
    pub token: &'a str,
}

/// One HTTP reply.
#[derive(Debug, Clone)]
pub struct HttpReply {
    pub status: u16,
    /// `Retry-After` in seconds, when present.
    pub retry_after_s: Option<u64>,
    pub body: Vec<u8>,
}

/// Why no reply arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The request failed or its reply was lost; the server may or may not have applied it.
    Failed(String),
    /// Abandoned because sync was turned off (or the process is stopping); like a lost reply,
    /// the server may have applied what it had fully received.
    Cancelled,
}

impl From<&str> for SendError {
    fn from(s: &str) -> SendError {
        SendError::Failed(s.to_owned())
    }
}

impl From<String> for SendError {
    fn from(s: String) -> SendError {
        SendError::Failed(s)
    }
}

/// Moves bytes to the server and back. `Err` means no reply arrived (the request may or may
/// not have been applied).
pub trait Transport: Send + Sync + fmt::Debug {
    fn send(&self, req: &HttpRequest<'_>) -> Result<HttpReply, SendError>;
}

/// Says whether the request in flight should be abandoned.
pub type CancelCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// How often a request in flight asks its [`CancelCheck`].
pub const CANCEL_POLL: Duration = Duration::from_millis(100);

/// The real transport: HTTP(S) with reqwest (rustls), driven by a small runtime of its own so
/// callers stay blocking. Never call it from inside an async runtime (use a plain thread).
pub struct HttpTransport {
    base: String,
    client: reqwest::Client,
    rt: tokio::runtime::Runtime,
    cancel: Option<CancelCheck>,
}

impl fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTransport")
            .field("base", &self.base)
            .field("cancellable", &self.cancel.is_some())
            .finish()
    }
}

/// How long a connection may sit idle and still be reused: under the sync server's idle
/// timeout (its header timeout).
const IDLE_CONNECTION: Duration = Duration::from_secs(4);

impl HttpTransport {
    pub fn new(server: &str) -> SyncResult<HttpTransport> {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120))
            // The runtime below runs only while a request is made, so a kept-alive connection
            // the server closed meanwhile (it closes idle ones after its header timeout, 10 s
            // by default) is not seen closed until a request is written to it and fails. An
            // idle connection is dropped well before that instead of reused.
            .pool_idle_timeout(IDLE_CONNECTION)
            .build()
            .map_err(|e| SyncError::Transport(e.to_string()))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| SyncError::Transport(format!("cannot start the HTTP runtime: {e}")))?;
        Ok(HttpTransport {
            base: server.trim_end_matches('/').to_owned(),
            client,
            rt,
            cancel: None,
        })
    }

    /// Abandons a request (dropping its connection) as soon as `cancelled` says so; asked
    /// before each request and every [`CANCEL_POLL`] while one is in flight.
    pub fn with_cancel(mut self, cancelled: CancelCheck) -> HttpTransport {
        self.cancel = Some(cancelled);
        self
    }

    async fn exchange(&self, req: &HttpRequest<'_>) -> Result<HttpReply, SendError> {
        let url = format!("{}{}", self.base, req.path);
        let builder = match req.body {
            Some(b) => self
                .client
                .post(url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(b.to_vec()),
            None => self.client.get(url),
        };
        let resp = builder
            .bearer_auth(req.token)
            .send()
            .await
            .map_err(|e| SendError::Failed(e.to_string()))?;
        let status = resp.status().as_u16();
        let retry_after_s = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        let body = resp
            .bytes()
            .await
            .map_err(|e| SendError::Failed(e.to_string()))?
            .to_vec();
        Ok(HttpReply {
            status,
            retry_after_s,
            body,
        })
    }
}

impl Transport for HttpTransport {
    fn send(&self, req: &HttpRequest<'_>) -> Result<HttpReply, SendError> {
        let Some(cancelled) = &self.cancel else {
            return self.rt.block_on(self.exchange(req));
        };
        if cancelled() {
            return Err(SendError::Cancelled);
        }
        self.rt.block_on(async {
            let exchange = self.exchange(req);
            tokio::pin!(exchange);
            loop {
                tokio::select! {
                    reply = &mut exchange => return reply,
                    _ = tokio::time::sleep(CANCEL_POLL) => {
                        if cancelled() {
                            // Dropping the future closes the connection mid-request.
                            return Err(SendError::Cancelled);
                        }
                    }
                }
            }
        })
    }
}

/// Requests and bytes sent and received, for benchmarks and `sync status`.
#[derive(Debug, Default)]
pub struct Traffic {
    pub requests: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
}

impl Traffic {
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.bytes_sent.load(Ordering::Relaxed),
            self.bytes_received.load(Ordering::Relaxed),
        )
    }
}

/// A token, never printed.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    pub fn new(s: impl Into<String>) -> Token {
        Token(s.into().trim().to_owned())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// The typed protocol client.
#[derive(Debug, Clone)]
pub struct SyncClient {
    transport: Arc<dyn Transport>,
    token: Token,
    pub traffic: Arc<Traffic>,
}

impl SyncClient {
    pub fn new(transport: Arc<dyn Transport>, token: Token) -> SyncClient {
        SyncClient {
            transport,
            token,
            traffic: Arc::default(),
        }
    }

    pub fn identity(&self) -> SyncResult<IdentityResponse> {
        let id: IdentityResponse = self.call("/v1/memory/identity", None::<&()>)?;
        if id.protocol_version > PROTOCOL_VERSION {
            return Err(SyncError::ProtocolTooNew(id.protocol_version));
        }
        Ok(id)
    }

    pub fn snapshot(&self, req: &SnapshotRequest) -> SyncResult<SnapshotResponse> {
        self.call("/v1/memory/snapshot", Some(req))
    }

    pub fn commit(&self, req: &CommitRequest) -> SyncResult<CommitResponse> {
        self.call("/v1/memory/commit", Some(req))
    }

    /// The snapshot of a scope marked end-to-end encrypted (feature `e2ee`): envelopes only.
    pub fn e2ee_snapshot(&self, req: &SnapshotRequest) -> SyncResult<SnapshotResponse> {
        self.call("/v1/memory/e2ee/snapshot", Some(req))
    }

    /// A commit of envelopes to a scope marked end-to-end encrypted.
    pub fn e2ee_commit(&self, req: &CommitRequest) -> SyncResult<CommitResponse> {
        self.call("/v1/memory/e2ee/commit", Some(req))
    }

    /// The account's wrapped keys, `None` when encryption was never turned on.
    pub fn e2ee_keys(&self) -> SyncResult<Option<E2eeKeys>> {
        Ok(self.e2ee_keys_response()?.keys)
    }

    /// The account's keys, or after encryption was turned off the proof that it was asked for.
    pub fn e2ee_keys_response(&self) -> SyncResult<E2eeKeysResponse> {
        self.call("/v1/memory/e2ee/keys", None::<&()>)
    }

    /// Stores the account's wrapped keys (the first time, or rewrapped around the same key).
    pub fn put_e2ee_keys(&self, keys: &E2eeKeys) -> SyncResult<()> {
        let _: E2eeKeysResponse = self.call("/v1/memory/e2ee/keys", Some(keys))?;
        Ok(())
    }

    pub fn e2ee_mark(&self, req: &MarkRequest) -> SyncResult<MarkResponse> {
        self.call("/v1/memory/e2ee/mark", Some(req))
    }

    pub fn e2ee_purge(&self, req: &PurgeRequest) -> SyncResult<PurgeResponse> {
        self.call("/v1/memory/e2ee/purge", Some(req))
    }

    /// Starts turning encryption off for the account; the blobs as they are after (`None`
    /// once no scope was marked).
    pub fn e2ee_off(&self, req: &OffRequest) -> SyncResult<Option<E2eeKeys>> {
        let r: E2eeKeysResponse = self.call("/v1/memory/e2ee/off", Some(req))?;
        Ok(r.keys)
    }

    pub fn e2ee_unmark(&self, req: &UnmarkRequest) -> SyncResult<UnmarkResponse> {
        self.call("/v1/memory/e2ee/unmark", Some(req))
    }

    fn call<B: Serialize, R: DeserializeOwned>(
        &self,
        path: &'static str,
        body: Option<&B>,
    ) -> SyncResult<R> {
        let bytes = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| SyncError::BadReply(e.to_string()))?;
        self.traffic.requests.fetch_add(1, Ordering::Relaxed);
        self.traffic.bytes_sent.fetch_add(
            bytes.as_ref().map_or(0, |b| b.len() as u64),
            Ordering::Relaxed,
        );
        let reply = self
            .transport
            .send(&HttpRequest {
                path,
                body: bytes.as_deref(),
                token: self.token.expose(),
            })
            .map_err(|e| match e {
                SendError::Cancelled => SyncError::Off,
                SendError::Failed(why) => SyncError::Transport(why),
            })?;
        self.traffic
            .bytes_received
            .fetch_add(reply.body.len() as u64, Ordering::Relaxed);
        if reply.status == 200 {
            return serde_json::from_slice(&reply.body)
                .map_err(|e| SyncError::BadReply(unreadable_reply(path, &reply.body, &e)));
        }
        Err(error_of(path, reply))
    }
}

/// What is wrong with a 200 reply that is not the JSON the protocol promises.
fn unreadable_reply(path: &str, body: &[u8], e: &serde_json::Error) -> String {
    if body.trim_ascii_start().starts_with(b"<") {
        format!("the reply to {path} is an HTML page, not the protocol's JSON")
    } else if e.is_eof() {
        format!(
            "the reply to {path} was cut short after {} bytes",
            body.len()
        )
    } else {
        format!("{path}: {e}")
    }
}

/// What a person reads of a non-200 reply that is not the protocol's error body: never the page
/// itself, but what it says about the address.
fn foreign_reply(path: &str, status: u16, body: &[u8]) -> String {
    let what = if body.trim_ascii_start().starts_with(b"<") {
        "an HTML page"
    } else if body.is_empty() {
        "no body"
    } else {
        "a reply that is not the protocol's JSON"
    };
    if status >= 500 {
        format!(
            "the server answered HTTP {status} to {path} with {what}: a proxy in front of a sync server that is down, or not a Memoria sync server"
        )
    } else {
        format!(
            "this is not a Memoria sync server: HTTP {status} to {path}, with {what}; check the server's address"
        )
    }
}

/// Maps a non-200 reply to its typed error.
fn error_of(path: &str, reply: HttpReply) -> SyncError {
    let body: Option<ErrorBody> = serde_json::from_slice(&reply.body).ok();
    match (reply.status, body) {
        (409, Some(b)) if b.code == ErrorCode::Stale => SyncError::Stale(b.stale),
        (429, _) => SyncError::RateLimited {
            retry_after_s: reply.retry_after_s.unwrap_or(60),
        },
        (status, b) => SyncError::Server {
            status,
            code: b.as_ref().map(|b| b.code),
            message: b.map_or_else(|| foreign_reply(path, status, &reply.body), |b| b.message),
            retry_after_s: reply.retry_after_s,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Debug)]
    struct Canned(Mutex<Vec<HttpReply>>);
    impl Transport for Canned {
        fn send(&self, _: &HttpRequest<'_>) -> Result<HttpReply, SendError> {
            self.0.lock().unwrap().pop().ok_or_else(|| "lost".into())
        }
    }

    fn client(replies: Vec<HttpReply>) -> SyncClient {
        SyncClient::new(Arc::new(Canned(Mutex::new(replies))), Token::new("t"))
    }

    fn reply(status: u16, retry: Option<u64>, body: &str) -> HttpReply {
        HttpReply {
            status,
            retry_after_s: retry,
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn typed_errors() {
        let c = client(vec![
            reply(503, Some(1), r#"{"code":"contention","message":"retry"}"#),
            reply(429, Some(7), r#"{"code":"rate_limited","message":"slow"}"#),
            reply(
                409,
                None,
                r#"{"code":"stale","message":"m","stale":[{"id":"a","currentRevision":"r2"}]}"#,
            ),
            reply(
                401,
                None,
                r#"{"code":"unauthorized","message":"sign in again"}"#,
            ),
        ]);
        let e = c.identity().unwrap_err();
        assert!(e.is_permanent());
        assert!(e.to_string().contains("sign in again"), "{e}");
        match c.identity().unwrap_err() {
            e @ SyncError::Stale(_) => {
                assert_eq!(e.code(), memoria_store::error::ErrorCode::ChangedSince);
                assert_eq!(e.detail(), Some(serde_json::json!({ "notes": ["a"] })));
            }
            e => panic!("{e}"),
        }
        let e = c.identity().unwrap_err();
        assert_eq!(e.retry_after_s(), Some(7));
        assert!(!e.is_permanent());
        let e = c.identity().unwrap_err();
        assert_eq!(e.retry_after_s(), Some(1));
        assert!(!e.is_permanent());
        assert!(matches!(c.identity(), Err(SyncError::Transport(_))));
        assert_eq!(c.traffic.snapshot().0, 5);
        assert_eq!(format!("{:?}", Token::new("secret")), "Token(<redacted>)");
    }

    /// A page from something that is not a Memoria sync server is summarized, never printed.
    #[test]
    fn a_foreign_page_is_summarized_not_printed() {
        let page = "<!DOCTYPE html><html><body><h1>404 Not Found</h1>nginx</body></html>";
        let c = client(vec![
            reply(502, None, "<html><body>Bad Gateway</body></html>"),
            reply(404, None, page),
        ]);
        let e = c.identity().unwrap_err().to_string();
        assert!(
            e.contains("this is not a Memoria sync server: HTTP 404 to /v1/memory/identity, with an HTML page"),
            "{e}"
        );
        assert!(!e.contains("nginx") && !e.contains("<"), "{e}");
        let e = c.identity().unwrap_err().to_string();
        assert!(e.contains("HTTP 502") && e.contains("down"), "{e}");
        assert!(!e.contains("Bad Gateway"), "{e}");
    }

    #[test]
    fn newer_protocol_stops() {
        let q = serde_json::to_string(&memoria_shared::protocol::Quotas::default()).unwrap();
        let c = client(vec![reply(
            200,
            None,
            &format!(r#"{{"userId":"a","protocolVersion":99,"quotas":{q}}}"#),
        )]);
        let e = c.identity().unwrap_err();
        assert!(matches!(e, SyncError::ProtocolTooNew(99)));
        assert_eq!(e.code(), memoria_store::error::ErrorCode::ProtocolTooNew);
    }
}
