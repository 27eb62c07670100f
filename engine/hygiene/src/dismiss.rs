//! Dismissed findings, kept on this machine (`$MEMORIA_HOME/review/dismissed.json`, never
//! synced): each finding id with the content hashes its notes had when it was dismissed. A
//! dismissal holds while every one of those notes still has that hash, so an edit brings the
//! finding back.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Finding;
use crate::error::{Error, Result};
use crate::fsx;
use crate::home::Home;

/// What [`super::dismiss`] stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dismissed {
    pub finding_id: String,
    /// `scope/id` → content hash: the versions the dismissal holds for.
    pub notes: BTreeMap<String, String>,
    /// Milliseconds since the epoch.
    pub dismissed_at: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    #[serde(default)]
    dismissed: BTreeMap<String, Dismissed>,
}

pub struct DismissStore {
    path: PathBuf,
    file: File,
}

fn versions(f: &Finding) -> BTreeMap<String, String> {
    f.notes
        .iter()
        .map(|n| (format!("{}/{}", n.scope, n.id), n.hash.clone()))
        .collect()
}

impl DismissStore {
    pub fn open(home: &Home) -> Result<DismissStore> {
        let path = home.root().join("review").join("dismissed.json");
        let file = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| Error::Damaged {
                path: path.clone(),
                reason: e.to_string(),
                fix: "fix it, or delete it to bring back every dismissed finding",
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => File::default(),
            Err(e) => return Err(Error::io("read", &path)(e)),
        };
        Ok(DismissStore { path, file })
    }

    /// Whether a dismissal of this finding holds for its notes as they are now.
    pub fn holds(&self, f: &Finding) -> bool {
        self.file
            .dismissed
            .get(&f.id)
            .is_some_and(|d| d.notes == versions(f))
    }

    /// Stores a dismissal of `f` against its notes' current versions.
    pub fn dismiss(mut self, f: &Finding, now_ms: i64) -> Result<Dismissed> {
        let d = Dismissed {
            finding_id: f.id.clone(),
            notes: versions(f),
            dismissed_at: now_ms,
        };
        self.file.dismissed.insert(f.id.clone(), d.clone());
        if let Some(dir) = self.path.parent() {
            fsx::private_dir(dir)?;
        }
        let bytes = serde_json::to_vec_pretty(&self.file)
            .map_err(|e| Error::Internal(format!("dismissals do not serialize: {e}")))?;
        fsx::write_atomic(&self.path, &bytes)?;
        Ok(d)
    }
}
