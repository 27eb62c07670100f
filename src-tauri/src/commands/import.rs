//! The Import page: a folder (an Obsidian vault, an OpenClaw folder, any folder of Markdown
//! files) with its progress as `indexProgress` events.

use std::path::PathBuf;

use memoria_engine::api::{self, transfer::ImportReport};
use serde::Deserialize;
use tauri::State;

use crate::{Shell, UiError};

#[derive(Debug, Clone, Deserialize)]
pub struct ImportRequest {
    pub path: String,
    pub scope: Option<String>,
}

#[tauri::command]
pub async fn import_folder(
    shell: State<'_, Shell>,
    request: ImportRequest,
) -> Result<ImportReport, UiError> {
    let scope = request.scope.clone();
    let scope = shell
        .read(move |e| Ok(api::scope_choice(e, scope.as_deref())?))
        .await?;
    shell.import(PathBuf::from(&request.path), scope).await
}
