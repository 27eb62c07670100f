//! Backups: what is kept, for how long, a look at one against the note today, and putting one
//! back.

use memoria_shared::note::{FileContext, Note};
use serde::{Deserialize, Serialize};

use crate::backup::Backups;
use crate::error::Result;
use crate::project::Scope;
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
    /// The backed-up note's summary; `None` when its file does not parse or cannot be read.
    pub summary: Option<String>,
}

fn backups(engine: &Engine) -> Backups {
    Backups::new(engine.home().backups_dir(), engine.backup_policy())
}

/// The summary of a note file's text, when it parses.
fn summary_of(text: &str, note_id: &str) -> Option<String> {
    let rel = format!("{note_id}.md");
    Note::parse(
        text,
        FileContext {
            relative_path: &rel,
        },
    )
    .ok()
    .map(|n| n.summary)
}

/// A backup's file as text (invalid UTF-8 replaced).
fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// At most `limit` backups, newest first.
pub fn list(engine: &Engine, limit: usize) -> Result<Vec<BackupEntry>> {
    let store = backups(engine);
    Ok(engine
        .backups(limit)?
        .into_iter()
        .map(|b| BackupEntry {
            summary: store
                .read(&b.backup_id)
                .ok()
                .and_then(|(_, bytes)| summary_of(&text_of(&bytes), &b.note_id)),
            backup_id: b.backup_id,
            scope: b.scope,
            note_id: b.note_id,
            reason: b.reason,
            created_at: b.created_at,
        })
        .collect())
}

/// A backup beside the note it was taken of, as it is today.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupPreview {
    pub backup: BackupEntry,
    /// The backed-up file's text.
    pub backup_text: String,
    /// The note file's text today; `None` when the note is gone (or its scope not visible).
    pub current_text: Option<String>,
}

/// One backup's text and the current version of its note, to compare before a restore.
pub fn preview(engine: &Engine, backup_id: &str) -> Result<BackupPreview> {
    let (meta, bytes) = backups(engine).read(backup_id)?;
    let backup_text = text_of(&bytes);
    let current_text = Scope::from_key(&meta.scope)
        .and_then(|s| engine.resolve(&meta.note_id, Some(&s)))
        .ok()
        .and_then(|(_, row)| std::fs::read(&row.path).ok())
        .map(|b| text_of(&b));
    Ok(BackupPreview {
        backup: BackupEntry {
            summary: summary_of(&backup_text, &meta.note_id),
            backup_id: meta.backup_id,
            scope: meta.scope,
            note_id: meta.note_id,
            reason: meta.reason.as_str().to_owned(),
            created_at: meta.created_at,
        },
        backup_text,
        current_text,
    })
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
