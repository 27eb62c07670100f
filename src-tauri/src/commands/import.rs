//! The Import page: a folder (an Obsidian vault, an OpenClaw folder, any folder of Markdown
//! files) with its progress as `indexProgress` events.

use std::path::PathBuf;

use memoria_engine::import::{self, ImportReport};
use memoria_engine::{Scope, ScopeChoice};
use serde::Deserialize;
use tauri::{AppHandle, State};

use crate::events::{self, Event};
use crate::{Shell, UiError};

#[derive(Debug, Clone, Deserialize)]
pub struct ImportRequest {
    pub path: String,
    pub scope: Option<String>,
}

fn choice(scope: Option<&str>) -> Result<Option<ScopeChoice>, UiError> {
    Ok(match scope.map(super::notes::scope).transpose()? {
        None => None,
        Some(Scope::User) => Some(ScopeChoice::User),
        Some(Scope::Project(_)) => Some(ScopeChoice::Project),
        Some(Scope::Domain(_)) => Some(ScopeChoice::Domain),
    })
}

#[tauri::command]
pub async fn import_folder(
    app: AppHandle,
    shell: State<'_, Shell>,
    request: ImportRequest,
) -> Result<ImportReport, UiError> {
    shell
        .call(move |e| {
            let progress = |done: usize, total: usize, current: Option<&str>, finished: bool| {
                Event::IndexProgress {
                    task: "import".into(),
                    done,
                    total,
                    current: current.map(str::to_owned),
                    finished,
                }
            };
            let mut report = |done: usize, total: usize, current: &str| {
                events::emit(&app, progress(done, total, Some(current), false));
            };
            let dir = PathBuf::from(&request.path);
            let r = import::import(e, &dir, choice(request.scope.as_deref())?, &mut report);
            let files = r.as_ref().map_or(0, |r| r.files);
            events::emit(&app, progress(files, files, None, true));
            Ok(r?)
        })
        .await
}
