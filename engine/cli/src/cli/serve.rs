//! The long-running commands: `memoria watch` and `memoria mcp`. Each starts one engine
//! [`Session`] (watcher, sync coordinator, indexer) and prints what it reports.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use memoria_engine::{Event, Session, SessionOptions};
use memoria_mcp::{self as mcp, HttpAuth};
use serde_json::json;

use super::{Globals, outln};

/// What a long-running process watches, syncs and loads.
fn session_options(g: &Globals) -> Result<SessionOptions> {
    let mut options = SessionOptions::new(g.location.open_options()?);
    options.sync_token = std::env::var(memoria_engine::sync::token::TOKEN_ENV).ok();
    Ok(options)
}

/// One line per event of `memoria watch`: every sync pass and every note change in JSON
/// (scripts see the schedule at work), each folder rescan, changes and errors in text.
fn print_watch_event(event: &Event, json: bool) -> Result<()> {
    match event {
        Event::SyncFinished {
            scope,
            report: Some(rep),
            ..
        } if json => outln!("{}", json!({"sync": scope, "report": rep})),
        Event::SyncFinished {
            scope,
            report: Some(rep),
            ..
        } if rep.changed() => outln!(
            "sync {scope}: uploaded {}, downloaded +{} ~{} -{}, merged {}, conflicts {}",
            rep.uploaded,
            rep.download.added,
            rep.download.changed,
            rep.download.deleted,
            rep.merged,
            rep.new_conflicts.len()
        ),
        Event::SyncFinished {
            scope,
            error: Some(e),
            ..
        } => {
            if json {
                outln!("{}", json!({"sync": scope, "error": e}));
            } else {
                outln!("sync {scope}: {e}");
            }
        }
        Event::NoteAdded { .. } | Event::NoteChanged { .. } | Event::NoteRemoved { .. } if json => {
            outln!("{}", json!(event));
        }
        Event::Rescanned {
            scope,
            added,
            updated,
            removed,
        } => {
            if json {
                outln!(
                    "{}",
                    json!({"scope": scope, "added": added, "updated": updated, "removed": removed})
                );
            } else {
                outln!("{scope}: {added} added, {updated} updated, {removed} removed");
            }
        }
        Event::Error {
            scope: Some(scope),
            message,
        } => eprintln!("memoria watch: {scope}: {message}"),
        Event::Error {
            scope: None,
            message,
        } => eprintln!("memoria watch: {message}"),
        _ => {}
    }
    Ok(())
}

/// `memoria watch`: keeps the index in step with edits made elsewhere, and syncs, until stopped.
pub fn watch(g: &Globals) -> Result<()> {
    // Subscribed from the start: the first sync pass can end before `start` returns.
    let (session, events) = Session::start_subscribed(session_options(g)?)?;
    for (scope, dir) in session.watched() {
        if !g.json {
            outln!("watching {scope} in {}", dir.display());
        }
    }
    if g.json {
        outln!("{}", json!({"ready": true}));
    } else {
        outln!("ready; press Ctrl-C to stop");
    }
    for event in events {
        print_watch_event(&event, g.json)?;
    }
    Ok(())
}

/// `memoria mcp`: serves the memory tools over stdio, or streamable HTTP on `http`. Watches and
/// syncs while the agent session runs; standard output is the MCP channel, so sync failures go
/// to standard error (and to `memoria sync status`).
pub fn mcp(
    g: &Globals,
    http: Option<SocketAddr>,
    token: Option<String>,
    no_token: bool,
) -> Result<()> {
    let session = Session::start(session_options(g)?)?;
    let home_root = session.reads().engine().home().root().to_path_buf();
    let events = session.subscribe();
    std::thread::spawn(move || {
        for event in events {
            if let Event::SyncFinished {
                scope,
                error: Some(e),
                ..
            } = event
            {
                eprintln!("memoria mcp: sync {scope}: {e}");
            }
        }
    });
    let server = mcp::MemoriaMcp::shared(session.writer()).with_sync(session.sync_notifier());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match http {
        Some(addr) => {
            let auth = mcp::http_auth(&home_root, addr, token, no_token)?;
            match &auth {
                HttpAuth::Kept {
                    token,
                    path,
                    created: true,
                } => eprintln!(
                    "memoria mcp: clients must send `Authorization: Bearer {token}` (kept in {}; --no-token turns this off)",
                    path.display()
                ),
                HttpAuth::Kept { path, .. } => eprintln!(
                    "memoria mcp: clients must send the bearer token kept in {}",
                    path.display()
                ),
                HttpAuth::Given(_) | HttpAuth::Open => {}
            }
            runtime.block_on(mcp::serve_http(server, addr, auth.token()))?
        }
        None => runtime.block_on(mcp::serve_stdio(server))?,
    }
    Ok(())
}
