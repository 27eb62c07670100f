//! memoria-vault: the vault of Markdown notes over the store — its write path ([`vault::Engine`]:
//! validate → guard → lock the scope → write atomically → index, with backups), the bridge to
//! recall ([`search`]), import and export, agents' writes ([`agent`]) and the file watcher.
//! **Invariant:** it knows nothing of sync, hygiene, the Session or any front end.

// The vault itself: it calls its own internals (see clippy.toml).
#![allow(clippy::disallowed_methods)]

pub mod agent;
pub mod import;
pub mod said;
pub mod search;
pub mod vault;
pub mod watch;

// The layers below, by the paths this crate names them.
use memoria_recall as recall;
use memoria_store::{backup, config, error, fsx, guard, home, index, project, scan};

pub use memoria_store::{Error, Project, Result, Scope};
pub use vault::{Engine, Limits, NewNote, NoteEdit, NoteView, OpenOptions, ScopeChoice, Written};
