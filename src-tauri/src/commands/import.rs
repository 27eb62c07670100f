//! The Import page: a folder (an Obsidian vault, an OpenClaw folder, any folder of Markdown
//! files) with its progress as `indexProgress` events.

use std::path::PathBuf;

use memoria_engine::api::transfer::ImportReport;
use memoria_engine::{Scope, ScopeChoice};
use serde::Deserialize;
use tauri::State;

use crate::{Shell, UiError};

#[derive(Debug, Clone, Deserialize)]
pub struct ImportRequest {
    pub path: String,
    pub scope: Option<String>,
}

fn choice(scope: Option<&str>) -> Result<Option<ScopeChoice>, UiError> {
    Ok(match scope.map(Scope::from_key).transpose()? {
        None => None,
        Some(Scope::User) => Some(ScopeChoice::User),
        Some(Scope::Project(_)) => Some(ScopeChoice::Project),
        Some(Scope::Domain(_)) => Some(ScopeChoice::Domain),
    })
}

#[tauri::command]
pub async fn import_folder(
    shell: State<'_, Shell>,
    request: ImportRequest,
) -> Result<ImportReport, UiError> {
    let scope = choice(request.scope.as_deref())?;
    shell.import(PathBuf::from(&request.path), scope).await
}
