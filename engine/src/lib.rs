//! memoria-engine: the API every front end calls ([`api`]: plain serde DTOs in and out) and the
//! long-running [`session::Session`] (watcher, recall model, sync coordinator), over the layers
//! below it — the store (`memoria-store`), recall (`memoria-recall`), the vault
//! (`memoria-vault`), the sync client (`memoria-sync-client`), the derive path
//! (`memoria-derive`) and hygiene (`memoria-hygiene`). Front ends (the `memoria` CLI, the MCP
//! server, the desktop app) call [`api`] and the [`Session`]; the lower layers are re-exported
//! under their module names for the types the API hands out. No GUI dependencies.

// A layer built on the vault: it may call the vault's internals (see clippy.toml).
#![allow(clippy::disallowed_methods)]

pub mod api;
pub mod doctor;
pub mod hook;
pub mod quarantine;
pub mod session;

pub use memoria_capture as capture;
pub use memoria_derive as derive;
/// Memory hygiene: the review queue's findings, dismissals, merging and decay. Front ends use
/// [`api::hygiene`]; the pure parts are public for benchmarks.
pub use memoria_hygiene as hygiene;
pub use memoria_recall as recall;
pub use memoria_store::{backup, config, decay, error, guard, home, log, project};
pub use memoria_sync_client as sync;
pub use memoria_vault::{agent, import, said, search, vault, watch};

pub(crate) use memoria_store::{fsx, index, scan};

pub use error::{Error, ErrorBody, ErrorCode, Result};
pub use project::{Project, Scope};
pub use scan::ScanStats;
pub use session::{Event, Reads, Session, SessionOptions};
pub use vault::{Engine, Limits, NewNote, NoteEdit, NoteView, OpenOptions, ScopeChoice, Written};

pub use memoria_store::counted;

#[cfg(test)]
mod error_tests;
#[cfg(test)]
mod hygiene_tests;
