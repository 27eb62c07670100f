//! The engine the window talks to: one [`Engine`] per app on the same `MEMORIA_HOME` as the
//! CLI and the MCP servers, behind a mutex. Every command runs on Tauri's blocking pool
//! ([`Shell::call`]), so a slow call (the first search loads the model; an import) never
//! blocks the window's event loop; calls queue on the mutex instead.

use std::sync::{Arc, Mutex, MutexGuard};

use memoria_engine::sync::SyncNotifier;
use memoria_engine::{Engine, OpenOptions};

use crate::UiError;

/// What every command gets: the engine, and how to tell the sync coordinator about writes.
pub struct Shell {
    engine: Arc<Mutex<Engine>>,
    opts: OpenOptions,
    sync: SyncNotifier,
}

impl Shell {
    pub fn new(engine: Engine, opts: OpenOptions, sync: SyncNotifier) -> Shell {
        Shell {
            engine: Arc::new(Mutex::new(engine)),
            opts,
            sync,
        }
    }

    /// The options the engine was opened with (the sync coordinator opens its own the same way).
    pub fn open_options(&self) -> &OpenOptions {
        &self.opts
    }

    pub fn sync(&self) -> &SyncNotifier {
        &self.sync
    }

    /// Runs `f` on the engine off the window's thread.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Engine) -> Result<T, UiError> + Send + 'static,
    ) -> Result<T, UiError> {
        let engine = self.engine.clone();
        tauri::async_runtime::spawn_blocking(move || f(&mut lock(&engine)))
            .await
            .map_err(|e| UiError::internal(format!("the command stopped unexpectedly: {e}")))?
    }

    /// The engine, for the app's own background threads (the watcher's forwarder).
    pub(crate) fn engine(&self) -> Arc<Mutex<Engine>> {
        self.engine.clone()
    }
}

/// A panic in one command must not lock every later one out: the engine's state is on disk.
pub(crate) fn lock(engine: &Mutex<Engine>) -> MutexGuard<'_, Engine> {
    engine.lock().unwrap_or_else(|p| p.into_inner())
}
