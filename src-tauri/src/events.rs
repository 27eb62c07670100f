//! What the engine tells the window without being asked, on the one channel [`CHANNEL`]: notes
//! changed on disk by anyone (the app, the CLI, an agent, another editor, a sync pass), index
//! progress, the model's state, each sync pass's start and outcome with the conflicts it left,
//! and background failures. The session publishes them; [`forward`] turns each into the
//! window's shape (`ui/src/lib/backend/types.ts`).

use memoria_engine::api::sync::DownloadCounts;
use memoria_engine::session::{self, IndexTask};
use serde::Serialize;
use tauri::{AppHandle, Emitter};

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
    /// What search embeds with: `embedder` is `onnx` (the model) or `hash` (no model).
    ModelLoaded {
        embedder: String,
        model_id: String,
    },
    SyncStarted {
        scope: String,
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
    /// A consolidation pass folded notes (the Review page reads what it did).
    Consolidated {
        at: i64,
        folded: usize,
        notes: usize,
    },
    Error {
        code: String,
        message: String,
    },
}

pub fn emit(app: &AppHandle, event: Event) {
    if let Err(e) = app.emit(CHANNEL, &event) {
        log::warn!("cannot send {event:?} to the window: {e}");
    }
}

/// The window's shape of a session event; `None` for what the window has no use for.
pub fn forward(event: session::Event) -> Option<Event> {
    use session::Event as S;
    Some(match event {
        S::NoteAdded { scope, id } => Event::NoteAdded { scope, id },
        S::NoteChanged { scope, id } => Event::NoteChanged { scope, id },
        S::NoteRemoved { scope, id } => Event::NoteRemoved { scope, id },
        S::Rescanned { .. } => return None,
        S::IndexProgress { task, done, total } => Event::IndexProgress {
            task: match task {
                IndexTask::Import => "import",
                IndexTask::Rebuild => "scan",
                IndexTask::Embedding => "embed",
            }
            .into(),
            done,
            total,
            current: None,
            finished: done >= total,
        },
        S::ModelLoaded { model_id } => Event::ModelLoaded {
            embedder: "onnx".into(),
            model_id,
        },
        S::ModelFallback { .. } => Event::ModelLoaded {
            embedder: "hash".into(),
            model_id: String::new(),
        },
        S::SyncStarted { scope } => Event::SyncStarted { scope },
        S::SyncFinished {
            scope,
            report,
            error,
        } => {
            let report = report.unwrap_or_default();
            Event::SyncFinished {
                scope,
                ok: error.is_none(),
                error,
                download: report.download,
                uploaded: report.uploaded,
                new_conflicts: report.new_conflicts,
            }
        }
        S::ConflictAppeared { scope, id } => Event::ConflictAppeared { scope, id },
        S::Consolidated { at, folded, notes } => Event::Consolidated { at, folded, notes },
        S::Error { scope, message } => Event::Error {
            code: "internal".into(),
            message: match scope {
                Some(scope) => format!("{scope}: {message}"),
                None => message,
            },
        },
    })
}

/// Forwards the session's events to the window until the session ends.
pub fn start(app: &AppHandle, events: std::sync::mpsc::Receiver<session::Event>) {
    let app = app.clone();
    let spawned = std::thread::Builder::new()
        .name("memoria-events".into())
        .spawn(move || {
            for event in events {
                if let Some(event) = forward(event) {
                    emit(&app, event);
                }
            }
        });
    if let Err(e) = spawned {
        log::error!("notes changed outside the app show after a restart only: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_events_take_the_windows_shape() {
        let added = forward(session::Event::NoteAdded {
            scope: "user".into(),
            id: "c".into(),
        });
        assert_eq!(
            serde_json::to_value(added).unwrap(),
            serde_json::json!({"kind": "noteAdded", "scope": "user", "id": "c"})
        );
        let progress = forward(session::Event::IndexProgress {
            task: IndexTask::Import,
            done: 3,
            total: 3,
        });
        assert_eq!(
            serde_json::to_value(progress).unwrap(),
            serde_json::json!({"kind": "indexProgress", "task": "import", "done": 3,
                "total": 3, "current": null, "finished": true})
        );
        let started = forward(session::Event::SyncStarted {
            scope: "user".into(),
        });
        assert_eq!(
            serde_json::to_value(started).unwrap(),
            serde_json::json!({"kind": "syncStarted", "scope": "user"})
        );
        let failed = forward(session::Event::SyncFinished {
            scope: "user".into(),
            report: None,
            error: Some("offline".into()),
        });
        assert_eq!(
            serde_json::to_value(failed).unwrap()["ok"],
            serde_json::json!(false)
        );
        let folded = forward(session::Event::Consolidated {
            at: 5,
            folded: 1,
            notes: 3,
        });
        assert_eq!(
            serde_json::to_value(folded).unwrap(),
            serde_json::json!({"kind": "consolidated", "at": 5, "folded": 1, "notes": 3})
        );
        assert_eq!(
            forward(session::Event::Rescanned {
                scope: "user".into(),
                added: 1,
                updated: 0,
                removed: 0
            }),
            None
        );
    }
}
