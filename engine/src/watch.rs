//! The file watcher: keeps the index in step with edits made outside Memoria (an editor,
//! Obsidian, git pull) while a long-running process (`memoria watch`, the MCP server, the app)
//! is up. Events are debounced; each batch rescans the scopes it touched, which handles
//! creations, edits, deletions and renames alike. While it runs, it holds a per-scope lock so
//! short-lived CLI calls can skip their own start-up scan of that scope.

use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use notify_debouncer_mini::notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{DebounceEventResult, Debouncer, new_debouncer};

use crate::error::{Error, Result};
use crate::fsx::FileLock;
use crate::index::Index;
use crate::project::Scope;
use crate::scan::{self, ScanStats};
use crate::vault::Engine;

/// How long the watcher waits for a burst of events to settle.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// A running watcher; dropping it stops it.
pub struct WatchHandle {
    debouncer: Option<Debouncer<RecommendedWatcher>>,
    thread: Option<JoinHandle<()>>,
    _locks: Vec<FileLock>,
    scopes: Vec<(Scope, PathBuf)>,
}

impl std::fmt::Debug for WatchHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchHandle")
            .field("scopes", &self.scopes)
            .finish()
    }
}

impl WatchHandle {
    /// The scopes and folders being watched.
    pub fn scopes(&self) -> &[(Scope, PathBuf)] {
        &self.scopes
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        // Dropping the debouncer closes the channel, which ends the thread.
        self.debouncer.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts watching every visible scope of `engine`. `on_change` runs after each batch that
/// changed the index (from the watcher thread).
pub fn start(
    engine: &Engine,
    on_change: impl Fn(&Scope, ScanStats) + Send + 'static,
) -> Result<WatchHandle> {
    let mut scopes = Vec::new();
    let mut locks = Vec::new();
    for scope in engine.visible_scopes() {
        let dir = engine.scope_dir(&scope)?;
        std::fs::create_dir_all(&dir).map_err(Error::io("create folder", &dir))?;
        let dir = dir.canonicalize().map_err(Error::io("open folder", &dir))?;
        if let Some(lock) = FileLock::try_acquire(&engine.watch_lock_path(&scope))? {
            locks.push(lock);
        }
        scopes.push((scope, dir));
    }
    let (tx, rx) = mpsc::channel::<DebounceEventResult>();
    let mut debouncer = new_debouncer(DEBOUNCE, tx)
        .map_err(|e| Error::Invalid(format!("cannot start the file watcher: {e}")))?;
    for (_, dir) in &scopes {
        debouncer
            .watcher()
            .watch(dir, RecursiveMode::Recursive)
            .map_err(|e| Error::Invalid(format!("cannot watch {}: {e}", dir.display())))?;
    }
    let db = engine.home().index_db();
    let thread_scopes = scopes.clone();
    let thread = std::thread::Builder::new()
        .name("memoria-watch".into())
        .spawn(move || run(db, thread_scopes, rx, on_change))
        .map_err(|e| Error::Invalid(format!("cannot start the watcher thread: {e}")))?;
    Ok(WatchHandle {
        debouncer: Some(debouncer),
        thread: Some(thread),
        _locks: locks,
        scopes,
    })
}

fn run(
    db: PathBuf,
    scopes: Vec<(Scope, PathBuf)>,
    rx: mpsc::Receiver<DebounceEventResult>,
    on_change: impl Fn(&Scope, ScanStats),
) {
    let mut index = match Index::open(&db) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("memoria watch: cannot open the index: {e}");
            return;
        }
    };
    while let Ok(batch) = rx.recv() {
        let touched: Vec<&(Scope, PathBuf)> = match &batch {
            Ok(events) => scopes
                .iter()
                .filter(|(_, dir)| events.iter().any(|e| e.path.starts_with(dir)))
                .collect(),
            // The OS dropped events (queue overflow): rescan everything.
            Err(_) => scopes.iter().collect(),
        };
        for (scope, dir) in touched {
            match scan::rescan(&mut index, &scope.key(), dir) {
                Ok(stats) if stats.changed() => on_change(scope, stats),
                Ok(_) => {}
                Err(e) => eprintln!("memoria watch: rescan of {scope} failed: {e}"),
            }
        }
    }
}
