//! The serving loop: accepts TCP connections and serves HTTP/1.1 on each with hyper, bounding
//! what one client can hold. It caps the connections open at once, gives a client a limited
//! time to send each request header (on a new connection and between requests on a kept-alive
//! one), drops a connection whose response the client stops reading, and on shutdown stops
//! accepting at once, lets requests in flight finish and drops whatever is still open after
//! the grace period. The time limit on a request itself (its body and its handling) is a
//! middleware in the router, so `oneshot` tests see it too.
//!
//! It never reads or answers a request itself, except the fixed 503 for a connection over the
//! cap: everything else about HTTP is hyper's and the router's.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use memoria_shared::protocol::{ErrorBody, ErrorCode};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tower::ServiceExt;

use crate::config::Limits;

/// How often, at most, refused connections are logged: a flood of them must not flood the log.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until `shutdown` completes, within `limits`.
pub async fn serve(
    router: Router,
    listener: TcpListener,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let mut http = http1::Builder::new();
    // hyper starts the header timer whenever it waits for a request head, so it also closes a
    // kept-alive connection that stays idle. Without a timer hyper ignores the timeout.
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout());
    let slots = Arc::new(Semaphore::new(limits.max_connections as usize));
    let busy_reply = busy_reply();
    let (stop, stopping) = watch::channel(());
    let mut open = JoinSet::new();
    let mut refusals = Refusals::default();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(ended) = open.join_next(), if !open.is_empty() => {
                if let Err(e) = ended
                    && e.is_panic()
                {
                    tracing::error!(error = %e, "a connection's task panicked");
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match slots.clone().try_acquire_owned() {
                    Ok(slot) => {
                        let conn = Connection {
                            http: http.clone(),
                            router: router.clone(),
                            peer,
                            write_stall: limits.request_timeout(),
                            _slot: slot,
                        };
                        open.spawn(conn.serve(stream, stopping.clone()));
                    }
                    Err(_) => {
                        refuse(&stream, &busy_reply);
                        refusals.record(peer, limits.max_connections);
                    }
                },
                // The peer gave up before we took its connection: nothing to do.
                Err(e) if is_peer_error(&e) => {}
                // Out of file descriptors, most likely: wait for connections to close rather
                // than spin. New connections wait in the listen backlog meanwhile.
                Err(e) => {
                    tracing::error!(error = %e, "cannot accept connections; retrying in 1 s");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                        () = &mut shutdown => break,
                    }
                }
            },
        }
    }
    drop(listener);
    refusals.flush(limits.max_connections);
    tracing::info!(
        open = open.len(),
        grace_secs = limits.shutdown_grace_secs,
        "shutting down: accepting no more connections, finishing requests in flight"
    );
    // Idle connections close now, busy ones once their request is answered; one stalled
    // mid-header stays until its header timeout or the end of the grace.
    let _ = stop.send(());
    let drained = tokio::time::timeout(limits.shutdown_grace(), async {
        while open.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        let dropped = open.len();
        open.abort_all();
        while open.join_next().await.is_some() {}
        tracing::warn!(
            dropped,
            grace_secs = limits.shutdown_grace_secs,
            "dropped the connections still open at the end of the shutdown grace"
        );
    }
    tracing::info!("stopped");
    Ok(())
}

/// One accepted connection and what it needs; its slot is released when it is dropped.
struct Connection {
    http: http1::Builder,
    router: Router,
    peer: SocketAddr,
    write_stall: Duration,
    _slot: OwnedSemaphorePermit,
}

impl Connection {
    async fn serve(self, stream: TcpStream, mut stopping: watch::Receiver<()>) {
        let Connection {
            http,
            router,
            peer,
            write_stall,
            _slot,
        } = self;
        // The peer's address reaches the handlers: wrong admin keys are limited per source.
        let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            router.clone().oneshot(req)
        });
        let io = TokioIo::new(StallGuard::new(stream, write_stall));
        let conn = http.serve_connection(io, service);
        let mut conn = std::pin::pin!(conn);
        let ended = tokio::select! {
            ended = conn.as_mut() => ended,
            _ = stopping.changed() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        // Timeouts, resets and malformed requests end here; hyper has answered what it could.
        if let Err(e) = ended {
            tracing::debug!(%peer, error = %e, "connection ended");
        }
    }
}

/// Whether an `accept` error concerns only the one connection (the peer reset or went away).
fn is_peer_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The fixed answer to a connection over the cap: busy, retry shortly. `contention` is the code
/// clients already treat as "busy, retry after `Retry-After`".
fn busy_reply() -> Vec<u8> {
    let body = serde_json::to_vec(&ErrorBody {
        code: ErrorCode::Contention,
        message: "the server has as many connections open as it allows: retry shortly".into(),
        stale: Vec::new(),
    })
    .unwrap_or_default();
    let mut reply = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    reply.extend_from_slice(&body);
    reply
}

/// Answers a connection over the cap without waiting on it: the reply goes into the fresh
/// socket's empty send buffer, and whatever the client already sent is read and discarded,
/// because closing a socket with unread data resets the connection and the client may lose
/// the reply. The socket closes when the caller drops it.
fn refuse(stream: &TcpStream, reply: &[u8]) {
    let _ = stream.try_write(reply);
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match stream.try_read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
}

/// Connections refused over the cap, logged at most every [`REFUSAL_LOG_EVERY`]: each line
/// counts the refusals since the previous one and names the latest peer.
#[derive(Default)]
struct Refusals {
    since_log: u64,
    logged_at: Option<Instant>,
    last_peer: Option<SocketAddr>,
}

impl Refusals {
    fn record(&mut self, peer: SocketAddr, max_connections: u32) {
        self.since_log += 1;
        self.last_peer = Some(peer);
        if self
            .logged_at
            .is_none_or(|at| at.elapsed() >= REFUSAL_LOG_EVERY)
        {
            self.flush(max_connections);
        }
    }

    /// Logs the refusals not logged yet, if any.
    fn flush(&mut self, max_connections: u32) {
        if self.since_log == 0 {
            return;
        }
        let peer = self.last_peer.map(|p| p.to_string()).unwrap_or_default();
        tracing::warn!(
            %peer,
            refused = self.since_log,
            max_connections,
            "refused connections: the server had as many open as it allows \
             ([limits] max_connections)"
        );
        self.since_log = 0;
        self.logged_at = Some(Instant::now());
    }
}

/// A connection's socket whose writes fail with `TimedOut` once one has waited `limit` without
/// the client taking a byte. A client that stops reading its response would otherwise hold the
/// connection for as long as its TCP stack keeps answering.
struct StallGuard {
    stream: TcpStream,
    limit: Duration,
    /// Running while a write waits on the client; cleared by any progress.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl StallGuard {
    fn new(stream: TcpStream, limit: Duration) -> Self {
        StallGuard {
            stream,
            limit,
            stalled: None,
        }
    }

    fn on_write(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read none of its response for {} s",
                    limit.as_secs()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for StallGuard {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for StallGuard {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.on_write(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.on_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}
