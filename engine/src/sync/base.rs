//! The base store: for each synced note of a scope, the note file exactly as last synced, with
//! its revision id and content hash — the `base` of every three-way merge. Also the scope's last
//! known manifest (for cheap polls) and its status.
//!
//! Layout under `$MEMORIA_HOME/sync/scopes/<scope>/`: `state.json` (entries, manifest) and
//! `base/<id>/<hash>.md` (bodies, content-addressed so a crash between writing a body and the
//! state never pairs an entry with the wrong body). It never touches the vault.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use memoria_shared::note::{FileContext, Note};
use memoria_shared::protocol::{ManifestEntry, Quotas};
use serde::{Deserialize, Serialize};

use super::error::SyncResult;
use super::settings::{read_json, write_json};
use crate::fsx;

/// One note as last synced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BaseEntry {
    pub revision: String,
    pub hash: String,
}

/// A scope's sync state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeState {
    /// The manifest version every entry of `remote` is from; `None` forces a full snapshot.
    #[serde(default)]
    pub manifest_version: Option<String>,
    /// Note id → as last synced (live notes only).
    #[serde(default)]
    pub base: BTreeMap<String, BaseEntry>,
    /// The server's manifest as last seen.
    #[serde(default)]
    pub remote: Vec<ManifestEntry>,
    /// A commit sent whose outcome is not known yet (no reply arrived).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingCommit>,
}

/// A commit whose reply may have been lost. The next pass asks the server for its receipt
/// before merging: when it applied, its notes' bases become what it sent, so a change another
/// machine made on top of it merges against the right base (a delete stays a delete).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingCommit {
    pub commit_id: String,
    /// Note id → the hash its `put` sent (the body is in the base store), `None` for a delete.
    pub changes: BTreeMap<String, Option<String>>,
}

/// What the last download brought, for `sync status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadCounts {
    pub added: usize,
    pub changed: usize,
    pub deleted: usize,
}

/// A scope's last outcome, for `sync status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeStatus {
    /// When the scope was last fully synced (ms).
    #[serde(default)]
    pub last_synced_ms: Option<i64>,
    /// The last pass's error, naming the scope; cleared by a successful pass.
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub last_download: DownloadCounts,
    #[serde(default)]
    pub quotas: Option<Quotas>,
    /// Notes held back by conflicts or refusals.
    #[serde(default)]
    pub held_back: Vec<String>,
}

/// The folder of one scope's sync state.
#[derive(Debug, Clone)]
pub struct ScopeDir {
    root: PathBuf,
}

impl ScopeDir {
    pub fn new(sync_dir: &Path, scope_key: &str) -> ScopeDir {
        ScopeDir {
            root: sync_dir.join("scopes").join(scope_key.replace(':', "_")),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Held for the length of a pass (or a commitFirst batch), across processes.
    pub fn lock_pass(&self) -> SyncResult<fsx::FileLock> {
        Ok(fsx::FileLock::acquire(&self.root.join("pass.lock"))?)
    }

    pub fn load_state(&self) -> SyncResult<ScopeState> {
        read_json(&self.root.join("state.json")).map(Option::unwrap_or_default)
    }

    pub fn save_state(&self, state: &ScopeState) -> SyncResult<()> {
        write_json(&self.root.join("state.json"), state)
    }

    pub fn load_status(&self) -> SyncResult<ScopeStatus> {
        read_json(&self.root.join("status.json")).map(Option::unwrap_or_default)
    }

    pub fn update_status(&self, f: impl FnOnce(&mut ScopeStatus)) -> SyncResult<()> {
        let mut s = self.load_status()?;
        f(&mut s);
        write_json(&self.root.join("status.json"), &s)
    }

    fn body_path(&self, id: &str, hash: &str) -> PathBuf {
        self.root.join("base").join(id).join(format!("{hash}.md"))
    }

    /// Stores a base body (the note file as synced) under its hash.
    pub fn put_body(&self, id: &str, hash: &str, file: &str) -> SyncResult<()> {
        let p = self.body_path(id, hash);
        if !p.exists() {
            fsx::write_atomic(&p, file.as_bytes())?;
        }
        Ok(())
    }

    /// The base note of `entry`, as synced. `None` when its body is missing or unreadable
    /// (treated as "no base": a both-sided change then becomes a conflict, never a silent pick).
    pub fn note(&self, id: &str, entry: &BaseEntry) -> Option<(Note, String)> {
        let text = std::fs::read_to_string(self.body_path(id, &entry.hash)).ok()?;
        let rel = format!("{id}.md");
        let note = Note::parse(
            &text,
            FileContext {
                relative_path: &rel,
            },
        )
        .ok()?;
        // Either hash form: an entry recorded before metadata synced holds the text form.
        memoria_shared::ContentHash::parse(&entry.hash)
            .is_some_and(|h| h.names(&note))
            .then_some((note, text))
    }

    /// Removes base bodies no entry points at.
    pub fn prune_bodies(&self, state: &ScopeState) -> SyncResult<()> {
        let dir = self.root.join("base");
        let Ok(ids) = std::fs::read_dir(&dir) else {
            return Ok(());
        };
        for id_dir in ids.flatten() {
            let id = id_dir.file_name().to_string_lossy().into_owned();
            let keep = state.base.get(&id).map(|e| format!("{}.md", e.hash));
            let Ok(files) = std::fs::read_dir(id_dir.path()) else {
                continue;
            };
            for f in files.flatten() {
                if keep.as_deref() != Some(&*f.file_name().to_string_lossy()) {
                    let _ = std::fs::remove_file(f.path());
                }
            }
            let _ = std::fs::remove_dir(id_dir.path());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memoria_shared::NoteId;

    #[test]
    fn base_bodies_round_trip_and_prune() {
        let dir = tempfile::tempdir().unwrap();
        let sd = ScopeDir::new(dir.path(), "project:p1");
        assert!(sd.root().ends_with("scopes/project_p1"));
        let note = Note::new(NoteId::new("a").unwrap(), "A", "body\n");
        let file = note.serialize();
        let hash = note.content_hash().as_str().to_owned();
        sd.put_body("a", &hash, &file).unwrap();
        let entry = BaseEntry {
            revision: "r1".into(),
            hash: hash.clone(),
        };
        let (back, text) = sd.note("a", &entry).unwrap();
        assert_eq!(back, note);
        assert_eq!(text, file);
        // A body whose hash does not match its entry is no base at all.
        let wrong = BaseEntry {
            revision: "r1".into(),
            hash: "0".repeat(64),
        };
        assert!(sd.note("a", &wrong).is_none());

        let mut state = ScopeState::default();
        state.base.insert("a".into(), entry.clone());
        sd.save_state(&state).unwrap();
        assert_eq!(sd.load_state().unwrap(), state);
        sd.prune_bodies(&state).unwrap();
        assert!(sd.note("a", &entry).is_some());
        sd.prune_bodies(&ScopeState::default()).unwrap();
        assert!(sd.note("a", &entry).is_none());
    }

    #[test]
    fn status_updates() {
        let dir = tempfile::tempdir().unwrap();
        let sd = ScopeDir::new(dir.path(), "user");
        sd.update_status(|s| s.last_error = Some("x".into()))
            .unwrap();
        assert_eq!(sd.load_status().unwrap().last_error.as_deref(), Some("x"));
    }
}
