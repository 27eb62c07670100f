//! The Backups page: the latest backups, a preview against the current version, restore. Its
//! shapes are the API's (`BackupEntry` is the contract's `BackupRow`).

use memoria_engine::api::backups::{self, BackupEntry, BackupPreview, Restored};
use tauri::State;

use crate::{Shell, UiError};

#[tauri::command]
pub async fn list_backups(
    shell: State<'_, Shell>,
    limit: Option<usize>,
) -> Result<Vec<BackupEntry>, UiError> {
    shell
        .read(move |e| Ok(backups::list(e, limit.unwrap_or(50))?))
        .await
}

#[tauri::command]
pub async fn preview_backup(
    shell: State<'_, Shell>,
    backup_id: String,
) -> Result<BackupPreview, UiError> {
    shell
        .read(move |e| Ok(backups::preview(e, &backup_id)?))
        .await
}

#[tauri::command]
pub async fn restore_backup(
    shell: State<'_, Shell>,
    backup_id: String,
) -> Result<Restored, UiError> {
    shell
        .call(move |e| Ok(backups::restore(e, &backup_id)?))
        .await
}
