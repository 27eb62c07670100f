//! Sync conflicts: the notes held back, and resolving one.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::sync::{self, Keep, SyncResult};
use crate::vault::Engine;

pub use crate::sync::{Conflict, ConflictReason, Resolved};

/// Every recorded conflict of the synced scopes.
pub fn list(engine: &Engine) -> SyncResult<Vec<Conflict>> {
    sync::list_conflicts(engine)
}

/// Which version a resolution keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeepChoice {
    /// This machine's version (the cloud's is backed up).
    Local,
    /// The cloud's version (this machine's is backed up).
    Cloud,
    /// This machine's version under its id, the cloud's as a new note beside it.
    Both,
}

impl std::str::FromStr for KeepChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "local" => Ok(KeepChoice::Local),
            "cloud" => Ok(KeepChoice::Cloud),
            "both" => Ok(KeepChoice::Both),
            other => Err(Error::Invalid(format!(
                "cannot keep {other:?}: keep local, cloud or both"
            ))),
        }
    }
}

/// A resolution: keep a version, or a hand-merged file (or just its body).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResolveRequest {
    pub id: String,
    /// user or project; `None`: the first scope with a conflict for the id.
    pub scope: Option<String>,
    pub keep: Option<KeepChoice>,
    /// The merged note file's text; wins over `keep`.
    pub merged: Option<String>,
}

/// Resolves one conflict; the result uploads with the next sync.
pub fn resolve(engine: &mut Engine, req: ResolveRequest) -> SyncResult<Resolved> {
    let keep = match (req.keep, req.merged) {
        (_, Some(text)) => Keep::Merged(text),
        (Some(KeepChoice::Local), None) => Keep::Local,
        (Some(KeepChoice::Cloud), None) => Keep::Cloud,
        (Some(KeepChoice::Both), None) => Keep::Both,
        (None, None) => {
            return Err(Error::Invalid(
                "say what to keep: this machine's version, the cloud's, both, or a merged file"
                    .into(),
            )
            .into());
        }
    };
    let scope = super::scope_arg(engine, req.scope.as_deref())?;
    sync::resolve(engine, &req.id, scope.as_ref(), keep)
}
