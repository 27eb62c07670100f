//! Backups: what is kept, for how long, and putting one back.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::vault::Engine;

pub use crate::backup::BackupPolicy;
pub use crate::vault::Restored;

/// One backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupEntry {
    pub backup_id: String,
    pub scope: String,
    pub note_id: String,
    /// Why it was made (edit, forget, import, sync, …).
    pub reason: String,
    /// Milliseconds since the epoch.
    pub created_at: i64,
}

/// At most `limit` backups, newest first.
pub fn list(engine: &Engine, limit: usize) -> Result<Vec<BackupEntry>> {
    Ok(engine
        .backups(limit)?
        .into_iter()
        .map(|b| BackupEntry {
            backup_id: b.backup_id,
            scope: b.scope,
            note_id: b.note_id,
            reason: b.reason,
            created_at: b.created_at,
        })
        .collect())
}

/// How long backups stay (`config.json`, `MEMORIA_BACKUPS__…`).
pub fn policy(engine: &Engine) -> BackupPolicy {
    engine.backup_policy()
}

/// Puts a backup back into the scope it came from (a different current version is backed up
/// first).
pub fn restore(engine: &mut Engine, backup_id: &str) -> Result<Restored> {
    engine.restore(backup_id)
}
