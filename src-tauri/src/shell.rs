//! The engine the window talks to: one [`Session`] per app on the same `MEMORIA_HOME` as the
//! CLI and the MCP servers. The session owns the engine that writes, the file watcher, the
//! sync coordinator and the search indexer. Every command runs on Tauri's blocking pool, so a
//! slow call (an import, a sync pass) never blocks the window's event loop: reads
//! ([`Shell::read`]) go to the session's read engine and never wait for a write; writes
//! ([`Shell::call`]) queue on the session's writer.

use std::path::PathBuf;
use std::sync::Arc;

use memoria_engine::api::transfer::ImportReport;
use memoria_engine::{Engine, ScopeChoice, Session};

use crate::UiError;

/// What every command gets: the app's session.
pub struct Shell {
    session: Arc<Session>,
}

impl Shell {
    pub fn new(session: Session) -> Shell {
        Shell {
            session: Arc::new(session),
        }
    }

    /// Runs `f` on the session's read engine off the window's thread; it never waits for a
    /// write in progress.
    pub async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Engine) -> Result<T, UiError> + Send + 'static,
    ) -> Result<T, UiError> {
        let reads = self.session.reads();
        off_thread(move || f(reads.engine())).await
    }

    /// Runs `f` on the session's writing engine off the window's thread; searches see what it
    /// wrote once it returns.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> Result<T, UiError> + Send + 'static,
    ) -> Result<T, UiError> {
        let session = self.session.clone();
        off_thread(move || write(&session, f)).await
    }

    /// Imports a folder into one scope off the window's thread; the session reports the
    /// progress as events.
    pub async fn import(
        &self,
        dir: PathBuf,
        scope: Option<ScopeChoice>,
    ) -> Result<ImportReport, UiError> {
        let session = self.session.clone();
        off_thread(move || Ok(session.import(&dir, scope)?)).await
    }

    /// Turns the session's daily consolidation on or off; turning it off waits for a pass in
    /// progress.
    pub async fn set_consolidation(&self, on: bool) -> Result<(), UiError> {
        let session = self.session.clone();
        off_thread(move || Ok(session.set_consolidation(on)?)).await
    }
}

/// Runs `f` on the session's writer. A write that succeeded stays a success when bringing
/// search in step afterwards fails: the note is on disk, and the indexer tries again.
pub fn write<T>(
    session: &Session,
    f: impl FnOnce(&mut Engine) -> Result<T, UiError>,
) -> Result<T, UiError> {
    let mut out = None;
    if let Err(e) = session.write(|e| {
        out = Some(f(e));
        Ok(())
    }) {
        log::warn!("search does not show the last write yet: {e}");
    }
    out.unwrap_or_else(|| Err(UiError::internal("the write did not run")))
}

async fn off_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, UiError> + Send + 'static,
) -> Result<T, UiError> {
    tauri::async_runtime::spawn_blocking(f)
        .await
        .map_err(|e| UiError::internal(format!("the command stopped unexpectedly: {e}")))?
}
