//! memoria-sync-server: a stateless axum service over an object store. It validates and
//! compare-and-swaps; it never merges.
//!
//! Entry points: [`router`] (tests drive it with `tower::ServiceExt::oneshot`), [`serve`] (the
//! binary and listener tests; its connection handling is in `connections`), the [`store`]
//! trait with its filesystem and S3 implementations, and [`auth`] for tokens. Every object key
//! is built in [`layout`] from validated ids.

pub mod account;
pub mod api;
pub mod auth;
pub mod config;
mod connections;
pub mod e2ee;
pub mod error;
pub mod inflight;
pub mod layout;
pub mod manifest;
pub mod random;
pub mod ratelimit;
pub mod store;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use memoria_shared::protocol::{QUOTAS_HEADER, Quotas, StorageQuotas};
use memoria_shared::{Clock, SystemClock};
use tracing::Instrument;

pub use config::{Secret, Settings};
pub use error::ApiError;
pub use random::{OsRandom, Randomness, SeededRandom};
pub use store::{ObjectStore, StoreError};

/// Wrong or missing admin keys, per source address: erase is rare, and a caller guessing the
/// key gets a few tries a minute. The right key is never charged.
pub const ADMIN_RATE_LIMIT: config::RateLimit = config::RateLimit {
    burst: 10,
    per_minute: 10,
};

/// Work a request leaves running after its reply (a commit's collection and copy), counted
/// so tests and shutdown can wait for it to settle.
#[derive(Debug, Default)]
pub struct Background {
    running: std::sync::atomic::AtomicUsize,
    settled: tokio::sync::Notify,
}

impl Background {
    /// Runs `work` on its own task.
    pub fn spawn(self: &Arc<Self>, work: impl Future<Output = ()> + Send + 'static) {
        use std::sync::atomic::Ordering;
        self.running.fetch_add(1, Ordering::SeqCst);
        let me = self.clone();
        tokio::spawn(async move {
            work.await;
            if me.running.fetch_sub(1, Ordering::SeqCst) == 1 {
                me.settled.notify_waiters();
            }
        });
    }

    /// Waits until no background work is running.
    pub async fn settled(&self) {
        use std::sync::atomic::Ordering;
        loop {
            let notified = self.settled.notified();
            if self.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// What every handler shares. Nothing in it is per-user state except the rate limiter's
/// buckets, so any number of instances can serve one store.
#[derive(Debug)]
pub struct AppState {
    pub store: Arc<dyn ObjectStore>,
    pub quotas: Quotas,
    pub storage: StorageQuotas,
    pub clock: Arc<dyn Clock>,
    pub rng: Arc<dyn Randomness>,
    pub limiter: ratelimit::RateLimiter,
    /// Wrong admin keys, one bucket per source address.
    pub admin_limiter: ratelimit::RateLimiter,
    pub admin_key: Option<Secret>,
    pub commit_attempts: u32,
    pub request_limit: usize,
    /// Connections and time a client may hold; the request timeout is applied in [`router`].
    pub limits: config::Limits,
    /// Each account's slots for requests in flight.
    pub in_flight: Arc<inflight::InFlight>,
    pub manifests: manifest::ManifestCache,
    pub background: Arc<Background>,
}

impl AppState {
    pub fn new(
        settings: &Settings,
        store: Arc<dyn ObjectStore>,
        clock: Arc<dyn Clock>,
        rng: Arc<dyn Randomness>,
    ) -> Arc<Self> {
        Arc::new(AppState {
            store,
            quotas: settings.quotas,
            storage: settings.storage,
            limiter: ratelimit::RateLimiter::new(settings.rate_limit, clock.clone()),
            admin_limiter: ratelimit::RateLimiter::new(ADMIN_RATE_LIMIT, clock.clone()),
            clock,
            rng,
            admin_key: settings.admin_key.clone(),
            commit_attempts: settings.commit_attempts,
            request_limit: settings.request_limit(),
            limits: settings.limits,
            in_flight: inflight::InFlight::new(settings.limits.requests_per_account),
            manifests: manifest::ManifestCache::default(),
            background: Arc::default(),
        })
    }
}

impl AppState {
    /// How long a replaced or unreferenced revision file is kept: twice the request timeout.
    /// A snapshot that read an older manifest fetches its files within its request timeout of
    /// that read, and a commit writes its manifest within its request timeout of making its
    /// revision ids or not at all, so neither can need a file older than this.
    pub fn garbage_grace_ms(&self) -> i64 {
        2 * 1000 * i64::from(self.limits.request_timeout_secs)
    }
}

/// The whole HTTP API.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(api::healthz))
        .route("/v1/memory/identity", get(api::identity))
        .route(
            "/v1/memory/snapshot",
            post(api::snapshot).layer(DefaultBodyLimit::max(snapshot_limit(&state))),
        )
        .route("/v1/memory/commit", post(api::commit))
        .route(
            "/v1/memory/e2ee/snapshot",
            post(api::e2ee_snapshot).layer(DefaultBodyLimit::max(snapshot_limit(&state))),
        )
        .route("/v1/memory/e2ee/commit", post(api::e2ee_commit))
        .route(
            "/v1/memory/e2ee/keys",
            get(e2ee::keys_get).put(e2ee::keys_put).post(e2ee::keys_put),
        )
        .route("/v1/memory/e2ee/mark", post(e2ee::mark))
        .route("/v1/memory/e2ee/purge", post(e2ee::purge))
        .route("/v1/memory/e2ee/off", post(e2ee::off))
        .route("/v1/memory/e2ee/unmark", post(e2ee::unmark))
        .route("/v1/admin/erase", post(api::erase))
        .fallback(api::not_found)
        .layer(DefaultBodyLimit::max(state.request_limit))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            refuse_declared_oversize,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            bound_request_time,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            around_request,
        ))
        .with_state(state)
}

/// The body limit of a snapshot request: it carries hashes, never note bodies.
fn snapshot_limit(st: &AppState) -> usize {
    st.request_limit
        .min(memoria_shared::protocol::SNAPSHOT_REQUEST_BYTES)
}

/// Refuses a request whose `Content-Length` is over the limit before any of its body is read;
/// a body that does not declare its length is cut at the limit as it is read.
async fn refuse_declared_oversize(
    State(st): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let limit = if req.uri().path() == "/v1/memory/snapshot" {
        snapshot_limit(&st)
    } else {
        st.request_limit
    };
    if declared.is_some_and(|n| n > limit as u64) {
        return axum::response::IntoResponse::into_response(ApiError::TooLarge(
            "the request body is larger than this server accepts: split the commit".into(),
        ));
    }
    next.run(req).await
}

/// Answers 408 when a request is not answered within `request_timeout_secs` of its header:
/// its body trickled in, or its handling took too long. The handler is dropped where it
/// stands, as when a client disconnects; a commit's store work runs on a task of its own and
/// finishes, and its `commitId` tells the client whether it applied.
async fn bound_request_time(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let limit = st.limits.request_timeout();
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => {
            tracing::warn!(
                limit_secs = st.limits.request_timeout_secs,
                "request timed out: its body did not arrive or it was not answered in time"
            );
            request_timeout_response(st.limits.request_timeout_secs)
        }
    }
}

/// 408 with an error body of the protocol's shape, closing the connection: the rest of the
/// body may still be on its way, and the connection cannot carry another request after it.
fn request_timeout_response(limit_secs: u32) -> Response {
    let body = serde_json::json!({
        "code": memoria_shared::protocol::ErrorCode::RequestTimeout,
        "message": format!(
            "the request was not received and answered within {limit_secs} s: retry; \
             if it keeps happening, the connection to the server is too slow"
        ),
    });
    let mut resp = axum::response::IntoResponse::into_response((
        StatusCode::REQUEST_TIMEOUT,
        axum::Json(body),
    ));
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    resp
}

/// Logs each request in a span named after its route, and announces the quotas on every
/// response.
async fn around_request(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let span = tracing::info_span!(
        "request",
        method = %req.method(),
        route = %route,
        user = tracing::field::Empty
    );
    let started = Instant::now();
    let mut resp = next.run(req).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::info!(
            status = resp.status().as_u16(),
            ms = started.elapsed().as_millis() as u64,
            "answered"
        )
    });
    let quotas = format!(
        "{}, {}",
        st.quotas.header_value(),
        st.storage.header_value()
    );
    if let Ok(v) = HeaderValue::from_str(&quotas) {
        resp.headers_mut().insert(QUOTAS_HEADER, v);
    }
    resp
}

/// Serves the API on `listener` until `shutdown` completes, then finishes requests in flight
/// for at most `limits.shutdown_grace_secs` and drops every connection still open.
pub async fn serve(
    settings: &Settings,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let store = settings.store.open().map_err(std::io::Error::other)?;
    let state = AppState::new(settings, store, Arc::new(SystemClock), Arc::new(OsRandom));
    serve_state(state, listener, shutdown).await
}

/// [`serve`] with a prepared state (tests inject a clock, randomness or a store).
pub async fn serve_state(
    state: Arc<AppState>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = state.limits;
    connections::serve(router(state), listener, limits, shutdown).await
}
