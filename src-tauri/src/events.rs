//! What the engine tells the window without being asked, on the one channel [`CHANNEL`]: notes
//! changed on disk by anyone (the CLI, an agent, another editor, a sync pass), each sync pass's
//! outcome with the conflicts it left, and import progress.
//!
//! The engine's file watcher reports which scope changed (and every scope is looked at each
//! second, for writes that other processes indexed themselves); the forwarder here compares a
//! scope's notes with what it last saw and names each note added, changed or removed, so the
//! window updates one row instead of reloading.

use std::collections::HashMap;
use std::sync::mpsc;

use memoria_engine::project::Scope;
use memoria_engine::sync::{self, Coordinator, DownloadCounts, PassReport, SyncResult};
use memoria_engine::watch::{self, WatchHandle};
use serde::Serialize;
use tauri::{AppHandle, Emitter};

use crate::shell::{self, Shell};

/// How often every scope's notes are compared with what the window last heard of.
const RELIST: std::time::Duration = std::time::Duration::from_secs(1);

/// The event channel the window listens on.
pub const CHANNEL: &str = "memoria://event";

/// One event on [`CHANNEL`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    NoteAdded {
        scope: String,
        id: String,
    },
    NoteChanged {
        scope: String,
        id: String,
    },
    NoteRemoved {
        scope: String,
        id: String,
    },
    /// Work with a length: `task` is `import`, `scan` or `embed`.
    IndexProgress {
        task: String,
        done: usize,
        total: usize,
        current: Option<String>,
        finished: bool,
    },
    SyncFinished {
        scope: String,
        ok: bool,
        error: Option<String>,
        download: DownloadCounts,
        uploaded: usize,
        new_conflicts: Vec<String>,
    },
    ConflictAppeared {
        scope: String,
        id: String,
    },
}

pub fn emit(app: &AppHandle, event: Event) {
    if let Err(e) = app.emit(CHANNEL, &event) {
        log::warn!("cannot send {event:?} to the window: {e}");
    }
}

/// What the forwarder thread turns into events.
enum Report {
    /// The watcher rescanned this scope and something changed.
    Scope(Scope),
    /// A sync pass of this scope ended.
    Pass(Scope, Result<PassReport, String>),
}

/// The background work of a running app; dropping it stops the watcher and the sync thread.
pub struct Background {
    _watch: Option<WatchHandle>,
    _sync: Option<Coordinator>,
}

/// Where the watcher and the sync coordinator send what they see, before the engine is shared.
pub struct Reports {
    tx: mpsc::Sender<Report>,
    rx: mpsc::Receiver<Report>,
}

impl Reports {
    pub fn new() -> Reports {
        let (tx, rx) = mpsc::channel();
        Reports { tx, rx }
    }

    /// Starts the sync coordinator (idle while sync is not configured or off), whose passes
    /// become [`Event::SyncStatus`].
    pub fn start_sync(&self, opts: memoria_engine::OpenOptions) -> Option<Coordinator> {
        let tx = self.tx.clone();
        let on_pass = Box::new(move |scope: &Scope, r: &SyncResult<PassReport>| {
            let r = match r {
                Ok(rep) => Ok(rep.clone()),
                Err(e) => Err(e.to_string()),
            };
            let _ = tx.send(Report::Pass(scope.clone(), r));
        });
        match Coordinator::for_process(opts, std::env::var(sync::token::TOKEN_ENV).ok(), on_pass) {
            Ok(c) => Some(c),
            Err(e) => {
                log::error!("sync does not run in this window: {e}");
                None
            }
        }
    }

    /// Starts the file watcher over every visible scope and the forwarder thread that turns
    /// the reports into events.
    pub fn start(self, app: &AppHandle, shell: &Shell, sync: Option<Coordinator>) -> Background {
        let engine = shell.engine();
        let notify = shell.sync().clone();
        let tx = self.tx.clone();
        let handle = watch::start(&shell::lock(&engine), move |scope, _| {
            notify.local_write(scope);
            let _ = tx.send(Report::Scope(scope.clone()));
        });
        let handle = match handle {
            Ok(h) => Some(h),
            Err(e) => {
                log::error!("notes changed outside the app show after a restart only: {e}");
                None
            }
        };
        let mut seen = Seen::default();
        for row in shell::lock(&engine)
            .list(None, None, None)
            .unwrap_or_default()
        {
            seen.insert(&row.scope, &row.id, row.hash.clone().unwrap_or_default());
        }
        let app = app.clone();
        let rx = self.rx;
        let spawned = std::thread::Builder::new()
            .name("memoria-events".into())
            .spawn(move || {
                loop {
                    let reports = match rx.recv_timeout(RELIST) {
                        Ok(report) => vec![report],
                        // A CLI or an agent indexes its own writes, so the watcher's rescan
                        // finds nothing new to report: every scope is compared on a timer too.
                        Err(mpsc::RecvTimeoutError::Timeout) => shell::lock(&engine)
                            .visible_scopes()
                            .into_iter()
                            .map(Report::Scope)
                            .collect(),
                        Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    };
                    for report in reports {
                        for event in forward(&engine, &mut seen, report) {
                            emit(&app, event);
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            log::error!("cannot start the event forwarder: {e}");
        }
        Background {
            _watch: handle,
            _sync: sync,
        }
    }
}

impl Default for Reports {
    fn default() -> Self {
        Reports::new()
    }
}

fn forward(
    engine: &std::sync::Mutex<memoria_engine::Engine>,
    seen: &mut Seen,
    report: Report,
) -> Vec<Event> {
    match report {
        Report::Scope(scope) => match shell::lock(engine).list(Some(&scope), None, None) {
            Ok(rows) => {
                let now = rows
                    .into_iter()
                    .map(|r| (r.id, r.hash.unwrap_or_default()))
                    .collect();
                seen.update(&scope.key(), now)
            }
            Err(e) => {
                log::warn!("cannot list {scope} after a change: {e}");
                Vec::new()
            }
        },
        Report::Pass(scope, r) => {
            let mut events = Vec::new();
            let finished = match r {
                Ok(rep) => {
                    for id in &rep.new_conflicts {
                        events.push(Event::ConflictAppeared {
                            scope: scope.key(),
                            id: id.clone(),
                        });
                    }
                    Event::SyncFinished {
                        scope: scope.key(),
                        ok: true,
                        error: None,
                        download: rep.download,
                        uploaded: rep.uploaded,
                        new_conflicts: rep.new_conflicts,
                    }
                }
                Err(e) => Event::SyncFinished {
                    scope: scope.key(),
                    ok: false,
                    error: Some(e),
                    download: DownloadCounts::default(),
                    uploaded: 0,
                    new_conflicts: Vec::new(),
                },
            };
            events.insert(0, finished);
            events
        }
    }
}

/// The notes last seen in each scope, by id, with their content hash.
#[derive(Debug, Default)]
struct Seen(HashMap<String, HashMap<String, String>>);

impl Seen {
    fn insert(&mut self, scope: &str, id: &str, hash: String) {
        self.0
            .entry(scope.to_owned())
            .or_default()
            .insert(id.to_owned(), hash);
    }

    /// Replaces what was seen in `scope` by `now`, returning what changed.
    fn update(&mut self, scope: &str, now: HashMap<String, String>) -> Vec<Event> {
        let before = self.0.insert(scope.to_owned(), now).unwrap_or_default();
        let now = &self.0[scope];
        let note = |id: &String| (scope.to_owned(), id.clone());
        let mut events = Vec::new();
        for (id, hash) in now {
            match before.get(id) {
                None => {
                    let (scope, id) = note(id);
                    events.push(Event::NoteAdded { scope, id });
                }
                Some(old) if old != hash => {
                    let (scope, id) = note(id);
                    events.push(Event::NoteChanged { scope, id });
                }
                Some(_) => {}
            }
        }
        for id in before.keys().filter(|id| !now.contains_key(*id)) {
            let (scope, id) = note(id);
            events.push(Event::NoteRemoved { scope, id });
        }
        events.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_scope_update_names_each_note_added_changed_and_removed() {
        let mut seen = Seen::default();
        seen.insert("user", "a", "1".into());
        seen.insert("user", "b", "1".into());
        let events = seen.update("user", map(&[("a", "2"), ("c", "1")]));
        let ev = |t: &str, id: &str| match t {
            "add" => Event::NoteAdded {
                scope: "user".into(),
                id: id.into(),
            },
            "change" => Event::NoteChanged {
                scope: "user".into(),
                id: id.into(),
            },
            _ => Event::NoteRemoved {
                scope: "user".into(),
                id: id.into(),
            },
        };
        let mut want = vec![ev("change", "a"), ev("add", "c"), ev("remove", "b")];
        want.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        assert_eq!(events, want);
        assert!(
            seen.update("user", map(&[("a", "2"), ("c", "1")]))
                .is_empty()
        );
        let json = serde_json::to_value(ev("add", "c")).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "noteAdded", "scope": "user", "id": "c"})
        );
    }
}
