//! The file watcher: keeps the index in step with edits made outside Memoria (an editor,
//! Obsidian, git pull) while a long-running process (`memoria watch`, the MCP server, the app)
//! is up. Events are debounced; each batch rescans the scopes it touched, which handles
//! creations, edits, deletions and renames alike. While it runs, it holds a per-scope lock so
//! short-lived CLI calls can skip their own start-up scan of that scope — so it must never lose
//! a folder: each scope folder's parent is watched too, and a folder that is deleted and
//! created again is watched again and rescanned.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
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
    debouncer: Arc<Mutex<Option<Debouncer<RecommendedWatcher>>>>,
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
        drop(
            self.debouncer
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
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
    let mut debouncer = new_debouncer(DEBOUNCE, tx).map_err(|e| Error::System {
        op: "start the file watcher".into(),
        reason: e.to_string(),
    })?;
    for (_, dir) in &scopes {
        debouncer
            .watcher()
            .watch(dir, RecursiveMode::Recursive)
            .map_err(|e| Error::System {
                op: format!("watch {}", dir.display()),
                reason: e.to_string(),
            })?;
        // The parent shows the folder being deleted and created again.
        if let Some(parent) = dir.parent() {
            debouncer
                .watcher()
                .watch(parent, RecursiveMode::NonRecursive)
                .map_err(|e| Error::System {
                    op: format!("watch {}", parent.display()),
                    reason: e.to_string(),
                })?;
        }
    }
    let debouncer = Arc::new(Mutex::new(Some(debouncer)));
    let db = engine.home().index_db();
    let thread_scopes = scopes.clone();
    let thread_debouncer = debouncer.clone();
    let thread = std::thread::Builder::new()
        .name("memoria-watch".into())
        .spawn(move || run(db, thread_scopes, &thread_debouncer, rx, on_change))
        .map_err(|e| Error::System {
            op: "start the watcher thread".into(),
            reason: e.to_string(),
        })?;
    Ok(WatchHandle {
        debouncer,
        thread: Some(thread),
        _locks: locks,
        scopes,
    })
}

/// What tells one folder from another that took its place.
type FolderIdentity = (u64, u64);

#[cfg(unix)]
fn folder_identity(dir: &Path) -> Option<FolderIdentity> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir)
        .ok()
        .filter(|m| m.is_dir())
        .map(|m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn folder_identity(dir: &Path) -> Option<FolderIdentity> {
    // Without inode numbers, the creation time tells a re-created folder apart.
    let m = std::fs::metadata(dir).ok().filter(|m| m.is_dir())?;
    let t = m
        .created()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some((t.as_secs(), u64::from(t.subsec_nanos())))
}

/// Watches `dir` again after it was deleted and created anew; false while it is missing.
fn reattach(debouncer: &Mutex<Option<Debouncer<RecommendedWatcher>>>, dir: &Path) -> bool {
    if !dir.is_dir() {
        return false;
    }
    let mut guard = debouncer.lock().unwrap_or_else(|p| p.into_inner());
    let Some(d) = guard.as_mut() else {
        return false;
    };
    // The old watch went with the deleted folder; removing it first is harmless if it did.
    let _ = d.watcher().unwatch(dir);
    match d.watcher().watch(dir, RecursiveMode::Recursive) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("memoria watch: cannot watch {} again: {e}", dir.display());
            false
        }
    }
}

fn run(
    db: PathBuf,
    scopes: Vec<(Scope, PathBuf)>,
    debouncer: &Mutex<Option<Debouncer<RecommendedWatcher>>>,
    rx: mpsc::Receiver<DebounceEventResult>,
    on_change: impl Fn(&Scope, ScanStats),
) {
    // Which folder each watch is on: a folder deleted and created again is another folder.
    let mut attached: Vec<Option<FolderIdentity>> =
        scopes.iter().map(|(_, d)| folder_identity(d)).collect();
    let mut index = match Index::open(&db) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("memoria watch: cannot open the index: {e}");
            return;
        }
    };
    while let Ok(batch) = rx.recv() {
        let touched: Vec<usize> = match &batch {
            Ok(events) => (0..scopes.len())
                .filter(|&i| events.iter().any(|e| e.path.starts_with(&scopes[i].1)))
                .collect(),
            // The OS dropped events (queue overflow): rescan everything.
            Err(_) => (0..scopes.len()).collect(),
        };
        for i in touched {
            let (scope, dir) = &scopes[i];
            let now = folder_identity(dir);
            if now.is_some() && now != attached[i] {
                // Files written before the new watch began are found by the rescan below.
                attached[i] = if reattach(debouncer, dir) { now } else { None };
            } else if now.is_none() {
                attached[i] = None;
            }
            match scan::rescan(&mut index, &scope.key(), dir) {
                Ok(stats) if stats.changed() => on_change(scope, stats),
                Ok(_) => {}
                Err(e) => eprintln!("memoria watch: rescan of {scope} failed: {e}"),
            }
        }
    }
}
