//! memoria-engine: everything that runs on a user's machine — the vault of Markdown notes, the
//! SQLite index, backups, the credential guard, import/export, the file watcher, hybrid recall,
//! the sync client and the MCP server. Front ends (the `memoria` CLI, the MCP server, the
//! desktop app) call [`api`], never the index: it takes and returns plain serde DTOs. No GUI
//! dependencies.

pub mod agent;
pub mod api;
pub mod backup;
pub mod config;
pub mod decay;
/// The one path every note derived from other notes is written by, with its labels.
pub mod derive;
pub mod doctor;
pub mod error;
/// The retrieval evaluation and benchmark harness behind `memoria eval` and `memoria bench`.
#[cfg(feature = "eval")]
pub mod eval;
pub(crate) mod fsx;
pub mod guard;
pub mod home;
pub mod hook;
/// Memory hygiene: the review queue's findings, dismissals, merging and decay. Front ends use
/// [`api::hygiene`]; the pure parts are public for benchmarks.
pub mod hygiene;
pub mod import;
pub(crate) mod index;
pub mod mcp;
pub mod project;
pub mod recall;
pub(crate) mod scan;
pub mod search;
pub mod session;
pub mod sync;
pub mod vault;
pub mod watch;
mod words;

pub use error::{Error, ErrorBody, ErrorCode, Result};
pub use project::{Project, Scope};
pub use scan::ScanStats;
pub use session::{Event, Reads, Session, SessionOptions};
pub use vault::{Engine, Limits, NewNote, NoteEdit, NoteView, OpenOptions, ScopeChoice, Written};

pub use words::counted;
