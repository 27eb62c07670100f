//! The file watcher: keeps the index in step with edits made outside Memoria (an editor,
//! Obsidian, git pull) while a long-running process (`memoria watch`, the MCP server, the app)
//! is up. Events are debounced; each batch rescans the scopes it touched, which handles
//! creations, edits, deletions and renames alike. Only events that can change a file count:
//! opening or reading one (a rescan listing the folder, a search reading a body, an editor
//! opening a note) is no change, and counting it would make every rescan set off the next. While it runs, it holds a per-scope lock so
//! short-lived CLI calls can skip their own start-up scan of that scope — so it must never lose
//! a folder: each scope folder's parent is watched too, and a folder that is deleted and
//! created again is watched again and rescanned.
//!
//! After each batch it compares the index with what it saw before, so it reports every note
//! added, changed or removed in a watched folder by any program, this process included (whose
//! own writes are already in the index when the rescan runs).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use crate::error::{Error, Result};
use crate::fsx::FileLock;
use crate::index::Index;
use crate::project::Scope;
use crate::scan::{self, ScanStats};
use crate::vault::Engine;

/// How long the watcher waits for a burst of events to settle.
pub const DEBOUNCE: Duration = Duration::from_millis(200);

/// The longest a batch waits for events to stop: a folder written to without pause (a long
/// import) is still rescanned this often.
pub const LONGEST_BATCH: Duration = Duration::from_secs(1);

/// A running watcher; dropping it stops it.
pub struct WatchHandle {
    watcher: Arc<Mutex<Option<RecommendedWatcher>>>,
    thread: Option<JoinHandle<()>>,
    rescans: Arc<AtomicU64>,
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

    /// How many scope rescans the watcher has run since it started.
    pub fn rescans(&self) -> u64 {
        self.rescans.load(Ordering::Relaxed)
    }
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        // Dropping the watcher drops its event handler, which closes the channel and so ends
        // the thread.
        drop(
            self.watcher
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What happened to one note file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NoteChange {
    Added,
    Changed,
    Removed,
}

/// What the watcher saw, in the order it saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    /// A note file of `scope` was added, changed or removed (`id` as its file says, or said).
    Note {
        scope: Scope,
        id: String,
        change: NoteChange,
    },
    /// A rescan of `scope` found files that differed from the index.
    Rescanned { scope: Scope, stats: ScanStats },
    /// A rescan failed; the next batch tries again.
    Failed { scope: Scope, message: String },
}

/// Starts watching every visible scope of `engine`. `on_change` runs after each batch that
/// changed the index (from the watcher thread).
pub fn start(
    engine: &Engine,
    on_change: impl Fn(&Scope, ScanStats) + Send + 'static,
) -> Result<WatchHandle> {
    start_with_events(engine, move |event| match event {
        WatchEvent::Rescanned { scope, stats } => on_change(&scope, stats),
        WatchEvent::Failed { scope, message } => {
            eprintln!("memoria watch: rescan of {scope} failed: {message}");
        }
        WatchEvent::Note { .. } => {}
    })
}

/// Starts watching every visible scope of `engine`, telling `on_event` (from the watcher
/// thread) about every note that changed and every rescan.
pub fn start_with_events(
    engine: &Engine,
    on_event: impl Fn(WatchEvent) + Send + 'static,
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
    let (tx, rx) = mpsc::channel::<Seen>();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let seen = match res {
            Ok(e) if e.need_rescan() => Seen::Lost,
            Ok(e) if can_change(&e.kind) => Seen::Paths(e.paths),
            Ok(_) => return,
            Err(_) => Seen::Lost,
        };
        // The thread is gone only while the watcher is being dropped.
        let _ = tx.send(seen);
    })
    .map_err(|e| Error::System {
        op: "start the file watcher".into(),
        reason: e.to_string(),
    })?;
    for (_, dir) in &scopes {
        watcher
            .watch(dir, RecursiveMode::Recursive)
            .map_err(|e| Error::System {
                op: format!("watch {}", dir.display()),
                reason: e.to_string(),
            })?;
        // The parent shows the folder being deleted and created again.
        if let Some(parent) = dir.parent() {
            watcher
                .watch(parent, RecursiveMode::NonRecursive)
                .map_err(|e| Error::System {
                    op: format!("watch {}", parent.display()),
                    reason: e.to_string(),
                })?;
        }
    }
    let watcher = Arc::new(Mutex::new(Some(watcher)));
    let rescans = Arc::new(AtomicU64::new(0));
    let db = engine.home().index_db();
    let thread_scopes = scopes.clone();
    let thread_watcher = watcher.clone();
    let thread_rescans = rescans.clone();
    let thread = std::thread::Builder::new()
        .name("memoria-watch".into())
        .spawn(move || {
            run(
                db,
                thread_scopes,
                &thread_watcher,
                &thread_rescans,
                rx,
                on_event,
            )
        })
        .map_err(|e| Error::System {
            op: "start the watcher thread".into(),
            reason: e.to_string(),
        })?;
    Ok(WatchHandle {
        watcher,
        thread: Some(thread),
        rescans,
        _locks: locks,
        scopes,
    })
}

/// What the watcher's handler passes on to its thread.
enum Seen {
    /// These paths may have changed.
    Paths(Vec<PathBuf>),
    /// The OS dropped events (a queue overflow) or the watch failed: anything may have changed.
    Lost,
}

/// Whether an event of this kind can mean a file's content, name or presence changed. Opens,
/// reads and closes after reading cannot; a close after writing can (on Linux it is the one
/// event an editor's save is sure to give).
fn can_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// The scopes (indexes into `scopes`) that a batch of events touched.
fn touched(scopes: &[(Scope, PathBuf)], batch: &[Seen]) -> Vec<usize> {
    (0..scopes.len())
        .filter(|&i| {
            batch.iter().any(|s| match s {
                Seen::Lost => true,
                Seen::Paths(paths) => paths.iter().any(|p| p.starts_with(&scopes[i].1)),
            })
        })
        .collect()
}

/// The next batch of events: the first one to come, then every one after it until none came
/// for [`DEBOUNCE`] or the batch is [`LONGEST_BATCH`] old. `None` once the watcher is gone.
fn next_batch(rx: &mpsc::Receiver<Seen>) -> Option<Vec<Seen>> {
    let mut batch = vec![rx.recv().ok()?];
    let started = Instant::now();
    loop {
        let left = LONGEST_BATCH.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Some(batch);
        }
        match rx.recv_timeout(DEBOUNCE.min(left)) {
            Ok(s) => batch.push(s),
            Err(mpsc::RecvTimeoutError::Timeout) => return Some(batch),
            // Stopping: the batch still counts.
            Err(mpsc::RecvTimeoutError::Disconnected) => return Some(batch),
        }
    }
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
fn reattach(watcher: &Mutex<Option<RecommendedWatcher>>, dir: &Path) -> bool {
    if !dir.is_dir() {
        return false;
    }
    let mut guard = watcher.lock().unwrap_or_else(|p| p.into_inner());
    let Some(w) = guard.as_mut() else {
        return false;
    };
    // The old watch went with the deleted folder; removing it first is harmless if it did.
    let _ = w.unwatch(dir);
    match w.watch(dir, RecursiveMode::Recursive) {
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
    watcher: &Mutex<Option<RecommendedWatcher>>,
    rescans: &AtomicU64,
    rx: mpsc::Receiver<Seen>,
    on_event: impl Fn(WatchEvent),
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
    let mut seen: Vec<Files> = scopes
        .iter()
        .map(|(scope, _)| files_of(&index, scope).unwrap_or_default())
        .collect();
    while let Some(batch) = next_batch(&rx) {
        for i in touched(&scopes, &batch) {
            let (scope, dir) = &scopes[i];
            let now = folder_identity(dir);
            if now.is_some() && now != attached[i] {
                // Files written before the new watch began are found by the rescan below.
                attached[i] = if reattach(watcher, dir) { now } else { None };
            } else if now.is_none() {
                attached[i] = None;
            }
            rescans.fetch_add(1, Ordering::Relaxed);
            match scan::rescan(&mut index, &scope.key(), dir) {
                Ok(stats) => {
                    match files_of(&index, scope) {
                        Ok(now) => {
                            for (id, change) in differences(&seen[i], &now) {
                                on_event(WatchEvent::Note {
                                    scope: scope.clone(),
                                    id,
                                    change,
                                });
                            }
                            seen[i] = now;
                        }
                        Err(e) => on_event(WatchEvent::Failed {
                            scope: scope.clone(),
                            message: e.to_string(),
                        }),
                    }
                    if stats.changed() {
                        on_event(WatchEvent::Rescanned {
                            scope: scope.clone(),
                            stats,
                        });
                    }
                }
                Err(e) => on_event(WatchEvent::Failed {
                    scope: scope.clone(),
                    message: e.to_string(),
                }),
            }
        }
    }
}

/// A scope's indexed files: path → (note id, mtime, size).
type Files = HashMap<String, (String, i64, i64)>;

fn files_of(index: &Index, scope: &Scope) -> Result<Files> {
    let key = scope.key();
    let ids: HashMap<String, String> = index
        .note_states()?
        .into_iter()
        .filter(|s| s.scope == key)
        .map(|s| (s.path, s.id))
        .collect();
    Ok(index
        .file_states(&key)?
        .into_iter()
        .filter_map(|(path, mtime, size)| {
            let id = ids.get(&path)?.clone();
            Some((path, (id, mtime, size)))
        })
        .collect())
}

/// The note changes from `before` to `after`, removals first; a file whose id changed is the
/// old note removed and a new one added.
fn differences(before: &Files, after: &Files) -> Vec<(String, NoteChange)> {
    let mut out = Vec::new();
    for (path, (id, ..)) in before {
        match after.get(path) {
            None => out.push((id.clone(), NoteChange::Removed)),
            Some((new_id, ..)) if new_id != id => out.push((id.clone(), NoteChange::Removed)),
            Some(_) => {}
        }
    }
    let mut added_or_changed: Vec<(String, NoteChange)> = after
        .iter()
        .filter_map(|(path, (id, mtime, size))| match before.get(path) {
            None => Some((id.clone(), NoteChange::Added)),
            Some((old_id, ..)) if old_id != id => Some((id.clone(), NoteChange::Added)),
            Some((_, m, s)) if (m, s) != (mtime, size) => Some((id.clone(), NoteChange::Changed)),
            Some(_) => None,
        })
        .collect();
    out.sort();
    added_or_changed.sort();
    out.extend(added_or_changed);
    out
}

#[cfg(test)]
mod differences_tests {
    use super::*;

    fn files(rows: &[(&str, &str, i64)]) -> Files {
        rows.iter()
            .map(|(p, id, m)| (p.to_string(), (id.to_string(), *m, 10)))
            .collect()
    }

    #[test]
    fn adds_changes_removals_and_renamed_ids_are_told_apart() {
        let before = files(&[("a.md", "a", 1), ("b.md", "b", 1), ("c.md", "c", 1)]);
        let after = files(&[
            ("a.md", "a", 1),
            ("b.md", "b", 2),
            ("c.md", "c2", 1),
            ("d.md", "d", 1),
        ]);
        assert_eq!(
            differences(&before, &after),
            vec![
                ("c".to_string(), NoteChange::Removed),
                ("b".to_string(), NoteChange::Changed),
                ("c2".to_string(), NoteChange::Added),
                ("d".to_string(), NoteChange::Added),
            ]
        );
        assert!(differences(&after, &after).is_empty());
    }
}
