//! The sync client: a base store of each note as last synced, three-way reconciliation per
//! note against the sync server's manifest, conflicts held back note by note, resolution, the
//! on/off switch and account pinning, the token in the OS keychain, the scheduler, and the
//! coordinator that runs it in long-running processes.
//!
//! It never decides a merge itself (that is `memoria_shared::merge`, pure and tested), never
//! overwrites a local version without a backup, and never sends a request while sync is off.
//! The engine never depends on the server crate: requests go through [`client::Transport`].

// A layer built on the vault: it may call the vault's internals (see clippy.toml).
#![allow(clippy::disallowed_methods)]

pub mod base;
pub mod client;
pub mod conflict;
pub mod coordinator;
pub mod e2ee;
pub mod error;
pub mod local;
pub mod pending;
pub mod reconcile;
pub mod repoint;
pub mod resolve;
pub mod schedule;
pub mod settings;
pub mod token;

pub use base::{DownloadCounts, ScopeStatus};
pub use client::{HttpTransport, SyncClient, Token, Transport};
pub use conflict::{Conflict, ConflictReason};
pub use coordinator::{Coordinator, SyncNotifier};
pub use error::{SyncError, SyncResult};
pub use pending::{Pending, PendingReason, cancel_pending, confirm_pending, list_pending};
pub use reconcile::{BatchChange, PassReport, Syncer, synced_scopes};
pub use repoint::{MovedScope, Refusal, Repointed, repoint};
pub use resolve::{Keep, Resolved, list_conflicts, resolve};
pub use settings::{Settings, sync_dir};
pub use token::env_token;

// The layers below, by the paths this crate names them.
pub(crate) use memoria_store::Error;
use memoria_store::{backup, fsx, guard, home, index, project, scan};
use memoria_vault::vault;
