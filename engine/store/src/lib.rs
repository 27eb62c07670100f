//! memoria-store: the bottom layer of what runs on a user's machine — the `MEMORIA_HOME`
//! layout, atomic file writes and cross-process locks, the SQLite index derived from the note
//! files, scans of scope folders, backups, the credential guard and the masking classes,
//! projects and scopes, machine-local config, the decay rule, and the one error type every layer maps into.
//! **Invariant:** it knows nothing above it: no recall, sync, hygiene or front end.

pub mod audit;
pub mod backup;
pub mod config;
pub mod decay;
pub mod error;
pub mod fsx;
pub mod guard;
pub mod home;
pub mod index;
pub mod log;
pub mod mask;
pub mod project;
pub mod scan;
pub mod words;

pub use error::{Error, ErrorBody, ErrorCode, Result};
pub use project::{Project, Scope};
pub use scan::ScanStats;
pub use words::counted;
