//! Recorded sync conflicts: a note both sides changed in ways that cannot merge by the rules.
//! A conflict holds back only its own note. It stores the cloud version as it was when found,
//! so the user can resolve it offline; `$MEMORIA_HOME/sync/scopes/<scope>/conflicts/<id>.json`.

use std::path::PathBuf;

use memoria_shared::merge::ConflictKind;
use serde::{Deserialize, Serialize};

use super::base::ScopeDir;
use super::error::SyncResult;
use super::settings::{read_json, write_json};

/// Why a note is in conflict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "reason", content = "kinds")]
pub enum ConflictReason {
    /// The three-way merge refused (summaries, types, same/adjacent lines, size, no base).
    Merge(Vec<ConflictKind>),
    /// The note was edited here but vanished from the server (its tombstone expired while this
    /// machine was away).
    VanishedWhileEdited,
}

/// One held-back note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    pub scope: String,
    pub id: String,
    pub reason: ConflictReason,
    pub found_at_ms: i64,
    /// The cloud's revision when found (`None`: not in the manifest at all).
    pub cloud_revision: Option<String>,
    /// The cloud's note file (`None`: deleted or gone in the cloud).
    pub cloud: Option<String>,
    /// This machine's note file when found (`None`: deleted here).
    pub local: Option<String>,
    /// The last synced note file, when there is one.
    pub base: Option<String>,
}

impl ScopeDir {
    fn conflicts_dir(&self) -> PathBuf {
        self.root().join("conflicts")
    }

    pub fn conflicts(&self) -> SyncResult<Vec<Conflict>> {
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(self.conflicts_dir()) else {
            return Ok(out);
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "json")
                && let Some(c) = read_json::<Conflict>(&p)?
            {
                out.push(c);
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    pub fn conflict(&self, id: &str) -> SyncResult<Option<Conflict>> {
        read_json(&self.conflicts_dir().join(format!("{id}.json")))
    }

    pub fn put_conflict(&self, c: &Conflict) -> SyncResult<()> {
        write_json(&self.conflicts_dir().join(format!("{}.json", c.id)), c)
    }

    pub fn remove_conflict(&self, id: &str) -> SyncResult<()> {
        let p = self.conflicts_dir().join(format!("{id}.json"));
        if p.exists() {
            crate::fsx::remove(&p)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicts_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let sd = ScopeDir::new(dir.path(), "user");
        assert!(sd.conflicts().unwrap().is_empty());
        let c = Conflict {
            scope: "user".into(),
            id: "a".into(),
            reason: ConflictReason::Merge(vec![ConflictKind::Body]),
            found_at_ms: 5,
            cloud_revision: Some("r".into()),
            cloud: Some("x".into()),
            local: None,
            base: None,
        };
        sd.put_conflict(&c).unwrap();
        assert_eq!(sd.conflicts().unwrap(), vec![c.clone()]);
        assert_eq!(sd.conflict("a").unwrap(), Some(c));
        sd.remove_conflict("a").unwrap();
        assert!(sd.conflict("a").unwrap().is_none());
    }
}
