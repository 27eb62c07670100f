//! The Backups page: the latest backups, a preview against the current version, restore.

use memoria_engine::Engine;
use memoria_engine::backup::Backups;
use memoria_engine::index::BackupRow as IndexedBackup;
use memoria_shared::note::{FileContext, Note};
use serde::Serialize;
use tauri::State;

use crate::{Shell, UiError};

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackupRow {
    pub backup_id: String,
    pub scope: String,
    pub note_id: String,
    pub reason: String,
    pub created_at: i64,
    pub summary: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BackupPreview {
    pub backup: BackupRow,
    pub backup_text: String,
    pub current_text: Option<String>,
}

fn backups(engine: &Engine) -> Backups {
    Backups::new(engine.home().backups_dir(), engine.backup_policy())
}

fn summary_of(text: &str, id: &str) -> Option<String> {
    let rel = format!("{id}.md");
    Note::parse(
        text,
        FileContext {
            relative_path: &rel,
        },
    )
    .ok()
    .map(|n| n.summary)
}

fn row(engine: &Engine, b: IndexedBackup) -> (BackupRow, Option<String>) {
    let text = backups(engine)
        .read(&b.backup_id)
        .ok()
        .map(|(_, bytes)| String::from_utf8_lossy(&bytes).into_owned());
    let summary = text.as_deref().and_then(|t| summary_of(t, &b.note_id));
    let row = BackupRow {
        backup_id: b.backup_id,
        scope: b.scope,
        note_id: b.note_id,
        reason: b.reason,
        created_at: b.created_at,
        summary,
    };
    (row, text)
}

pub fn list(engine: &Engine, limit: usize) -> Result<Vec<BackupRow>, UiError> {
    Ok(engine
        .backups(limit)?
        .into_iter()
        .map(|b| row(engine, b).0)
        .collect())
}

pub fn preview(engine: &Engine, backup_id: &str) -> Result<BackupPreview, UiError> {
    let (meta, bytes) = backups(engine).read(backup_id)?;
    let backup_text = String::from_utf8_lossy(&bytes).into_owned();
    let current_text = memoria_engine::Scope::from_key(&meta.scope)
        .and_then(|s| engine.resolve(&meta.note_id, Some(&s)))
        .ok()
        .and_then(|(_, ix)| std::fs::read_to_string(&ix.path).ok());
    let backup = BackupRow {
        summary: summary_of(&backup_text, &meta.note_id),
        backup_id: meta.backup_id,
        scope: meta.scope,
        note_id: meta.note_id,
        reason: meta.reason.as_str().to_owned(),
        created_at: meta.created_at,
    };
    Ok(BackupPreview {
        backup,
        backup_text,
        current_text,
    })
}

#[tauri::command]
pub async fn list_backups(
    shell: State<'_, Shell>,
    limit: Option<usize>,
) -> Result<Vec<BackupRow>, UiError> {
    shell.read(move |e| list(e, limit.unwrap_or(50))).await
}

#[tauri::command]
pub async fn preview_backup(
    shell: State<'_, Shell>,
    backup_id: String,
) -> Result<BackupPreview, UiError> {
    shell.read(move |e| preview(e, &backup_id)).await
}

#[tauri::command]
pub async fn restore_backup(
    shell: State<'_, Shell>,
    backup_id: String,
) -> Result<memoria_engine::vault::Restored, UiError> {
    shell.call(move |e| Ok(e.restore(&backup_id)?)).await
}

#[cfg(test)]
mod tests {
    use memoria_engine::{NewNote, OpenOptions};

    use super::*;

    #[test]
    fn a_forgotten_note_is_listed_previewed_and_restored() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions {
            home: Some(tmp.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        let w = engine
            .add(NewNote {
                summary: "Keep me".into(),
                body: "body".into(),
                ..Default::default()
            })
            .unwrap();
        engine.forget(&w.id, None).unwrap();
        let rows = list(&engine, 50).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].summary.as_deref(), Some("Keep me"));
        assert_eq!(rows[0].reason, "forget");
        let p = preview(&engine, &rows[0].backup_id).unwrap();
        assert!(p.backup_text.contains("Keep me"));
        assert_eq!(p.current_text, None);
        engine.restore(&rows[0].backup_id).unwrap();
        let p = preview(&engine, &rows[0].backup_id).unwrap();
        assert_eq!(p.current_text.as_deref(), Some(p.backup_text.as_str()));
        assert_eq!(preview(&engine, "nope").unwrap_err().code, "not_found");
    }
}
