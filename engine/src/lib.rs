//! memoria-engine: the vault of Markdown notes and its write path, the derive path, import and
//! export, the file watcher, the bridge to recall, the sync client, hygiene, the Session and
//! the MCP server, over the store (`memoria-store`) and recall (`memoria-recall`). Front ends
//! (the `memoria` CLI, the MCP server, the desktop app) call [`api`], never the index: it takes
//! and returns plain serde DTOs. No GUI dependencies.

pub mod agent;
pub mod api;
pub use memoria_store::backup;
pub use memoria_store::config;
pub use memoria_store::decay;
/// The one path every note derived from other notes is written by, with its labels.
pub mod derive;
pub mod doctor;
pub use memoria_store::error;
pub(crate) use memoria_store::fsx;
pub use memoria_store::guard;
pub use memoria_store::home;
pub mod hook;
/// Memory hygiene: the review queue's findings, dismissals, merging and decay. Front ends use
/// [`api::hygiene`]; the pure parts are public for benchmarks.
pub mod hygiene;
pub mod import;
pub(crate) use memoria_store::index;
pub mod mcp;
pub use memoria_recall as recall;
pub use memoria_store::project;
pub(crate) use memoria_store::scan;
pub mod search;
pub mod session;
pub mod sync;
pub mod vault;
pub mod watch;

pub use error::{Error, ErrorBody, ErrorCode, Result};
pub use project::{Project, Scope};
pub use scan::ScanStats;
pub use session::{Event, Reads, Session, SessionOptions};
pub use vault::{Engine, Limits, NewNote, NoteEdit, NoteView, OpenOptions, ScopeChoice, Written};

pub use memoria_store::counted;

#[cfg(test)]
mod error_tests;
