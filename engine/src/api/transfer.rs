//! Import and export: a folder of Markdown in, every visible note out.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::scope_choice;
use crate::error::Result;
use crate::import;
use crate::vault::Engine;

pub use crate::import::{ExportReport, ImportReport, Skipped};

/// How far an import got: `done` of `total` files, the last one read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportProgress {
    pub done: usize,
    pub total: usize,
    /// The file's path inside the imported folder.
    pub file: String,
}

/// Imports every Markdown file under `dir` into one scope (user, project or domain; default
/// user). Credentials in the files are caught by the same guard as every write: such notes
/// are kept, tagged and never recalled (the report counts them).
pub fn import(
    engine: &mut Engine,
    dir: &Path,
    scope: Option<&str>,
    progress: &mut dyn FnMut(ImportProgress),
) -> Result<ImportReport> {
    let choice = scope_choice(engine, scope)?;
    import::import(engine, dir, choice, &mut |done, total, rel| {
        progress(ImportProgress {
            done,
            total,
            file: rel.to_owned(),
        })
    })
}

/// Copies every note an agent may see into `dir/<scope>/`; private notes stay behind (the
/// report counts them).
pub fn export(engine: &Engine, dir: &Path) -> Result<ExportReport> {
    import::export(engine, dir)
}
