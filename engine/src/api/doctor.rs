//! The health check: paths, counts, files with errors, secrets kept from agents, index
//! health, which embedder recall runs on; and rebuilding the index from the notes.

use super::Location;
use crate::error::{Error, Result};

pub use crate::doctor::{
    BrokenFile, DoctorReport, ProjectInfo, ScopeHealth, SecretNote, SyncSignIn,
};

/// What to check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DoctorRequest {
    /// Delete the index and rebuild it from the notes first (usage counts restart from zero).
    pub rebuild: bool,
}

/// Runs the health check here (rebuilding the index first when asked).
pub fn doctor(loc: &Location, req: DoctorRequest) -> Result<DoctorReport> {
    if req.rebuild {
        rebuild_index(loc)?;
    }
    let mut engine = loc.open()?;
    crate::doctor::run(&mut engine)
}

/// Deletes the SQLite index; the next open rebuilds it from the notes. Backups and notes are
/// untouched; usage counts restart from zero.
pub fn rebuild_index(loc: &Location) -> Result<()> {
    let home = loc.home()?;
    for ext in ["sqlite", "sqlite-wal", "sqlite-shm"] {
        let p = home.index_db().with_extension(ext);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove", &p)(e)),
        }
    }
    Ok(())
}
