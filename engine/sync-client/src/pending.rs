//! Passes held for the user's word: a scope whose evidence for deleting notes cannot be
//! trusted pauses instead of deleting, and waits for [`confirm_pending`] or [`cancel_pending`]
//! (`memoria sync confirm` / `cancel`, and the desktop app).
//!
//! Evidence that is not trusted:
//! - a folder that is not the one last synced (moved away, re-created, an unmounted drive, a
//!   checkout without `MEMORY/`) while notes of the last sync are missing from it;
//! - a second folder on this machine claiming a scope already synced from another folder
//!   (a second worktree or clone of one repository, or a copied `.memoria/project.json`);
//! - a pass that would delete many notes at once, in either direction ([`too_many_deletes`]).
//!
//! A missing folder is not held here: its pass stops before any request
//! ([`SyncError::FolderMissing`]) and runs again once the folder is back.
//!
//! Stored in `scopes/<scope>/pending.json`, next to the base it is about.

use serde::{Deserialize, Serialize};

use super::base::{FolderIdentity, ScopeDir};
use super::error::{SyncError, SyncResult};
use super::settings::{read_json, write_json};
use crate::project::Scope;
use crate::vault::Engine;

/// A pass never deletes more than this many notes at once without asking...
pub const MASS_DELETE_COUNT: usize = 10;
/// ...nor more than this share (1 / N) of the scope's synced notes; one note never asks.
pub const MASS_DELETE_SHARE: usize = 4;

/// Whether deleting `deletes` of the scope's `synced` notes in one pass needs the user's word:
/// more than one note, and more than [`MASS_DELETE_COUNT`] or more than a quarter of them.
pub fn too_many_deletes(deletes: usize, synced: usize) -> bool {
    deletes > 1 && (deletes > MASS_DELETE_COUNT || deletes * MASS_DELETE_SHARE > synced)
}

/// Why a scope waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "reason")]
pub enum PendingReason {
    /// This folder claims a scope this machine already syncs from the folder `paired`.
    #[serde(rename_all = "camelCase")]
    NewFolder { paired: String },
    /// The folder is not the one last synced, and notes of the last sync are missing from it.
    FolderReplaced,
    /// The pass would delete many notes at once.
    ManyDeletes,
}

/// A pass that waits for the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    pub scope: String,
    /// The scope's folder on this machine.
    pub folder: String,
    #[serde(flatten)]
    pub reason: PendingReason,
    /// Notes missing here that the pass would delete in the cloud (and so on every machine).
    #[serde(default)]
    pub local_deletes: Vec<String>,
    /// Notes deleted in the cloud that the pass would delete here.
    #[serde(default)]
    pub cloud_deletes: Vec<String>,
    /// How many notes the scope had at its last sync.
    #[serde(default)]
    pub synced: usize,
    pub found_at_ms: i64,
    /// Confirmed by the user: the next pass makes exactly these deletions.
    #[serde(default)]
    pub confirmed: bool,
}

impl Pending {
    /// What the user reads: what was found, that nothing was synced, what each choice does.
    pub fn message(&self) -> String {
        let Pending {
            scope,
            folder,
            local_deletes: local,
            cloud_deletes: cloud,
            synced,
            ..
        } = self;
        match &self.reason {
            PendingReason::NewFolder { paired } => format!(
                "sync of {scope} is paused for the folder {folder}: this machine already syncs {scope} from {paired}, and nothing was synced from this folder; confirm to sync this folder too (with its own sync state: it receives the cloud's notes and adds its own), or leave it unsynced"
            ),
            PendingReason::FolderReplaced => format!(
                "sync of {scope} is paused: the folder {folder} is not the folder last synced (it was moved, re-created or unmounted) and {} of the {synced} synced notes are not in it ({}); nothing was synced; confirm to delete them everywhere, or cancel to restore them here from the last sync",
                local.len(),
                preview(local)
            ),
            PendingReason::ManyDeletes => {
                let mut parts = Vec::new();
                if !local.is_empty() {
                    parts.push(format!(
                        "delete {} of the {synced} synced notes everywhere (they are missing in {folder}: {})",
                        local.len(),
                        preview(local)
                    ));
                }
                if !cloud.is_empty() {
                    parts.push(format!(
                        "delete {} of the {synced} synced notes here (deleted on another machine: {})",
                        cloud.len(),
                        preview(cloud)
                    ));
                }
                format!(
                    "sync of {scope} is paused: it would {}; nothing was synced; confirm to make these deletions, or cancel to keep the notes (notes missing here are restored from the last sync, notes deleted elsewhere are kept and uploaded again)",
                    parts.join(" and ")
                )
            }
        }
    }

    /// The error a pass ends with while this waits.
    pub fn error(&self) -> SyncError {
        SyncError::NeedsConfirmation {
            scope: self.scope.clone(),
            message: self.message(),
        }
    }
}

/// The first few ids of a list, for a message.
fn preview(ids: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut s = ids
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if ids.len() > SHOWN {
        s.push_str(&format!(", and {} more", ids.len() - SHOWN));
    }
    s
}

impl ScopeDir {
    fn pending_path(&self) -> std::path::PathBuf {
        self.root().join("pending.json")
    }

    pub fn pending(&self) -> SyncResult<Option<Pending>> {
        read_json(&self.pending_path())
    }

    pub fn put_pending(&self, p: &Pending) -> SyncResult<()> {
        write_json(&self.pending_path(), p)
    }

    pub fn clear_pending(&self) -> SyncResult<()> {
        match std::fs::remove_file(self.pending_path()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(crate::Error::io("remove", self.pending_path())(e).into())
            }
            _ => Ok(()),
        }
    }
}

/// What a pending pass waits for, per synced scope of `engine` (for `sync status`).
pub fn list_pending(engine: &Engine) -> SyncResult<Vec<Pending>> {
    let mut out = Vec::new();
    for scope in super::reconcile::synced_scopes(engine) {
        out.extend(ScopeDir::of(engine, &scope)?.pending()?);
    }
    Ok(out)
}

/// The scopes `scope` names (or every synced scope) with a pass waiting, and their state.
fn waiting(engine: &Engine, scope: Option<&Scope>) -> SyncResult<Vec<(Scope, ScopeDir)>> {
    let mut out = Vec::new();
    for s in super::reconcile::synced_scopes(engine) {
        if scope.is_some_and(|want| want != &s) {
            continue;
        }
        let sd = ScopeDir::of(engine, &s)?;
        if sd.pending()?.is_some() {
            out.push((s, sd));
        }
    }
    if out.is_empty() {
        return Err(SyncError::NothingPending(
            scope.map_or_else(|| "any scope".to_owned(), Scope::key),
        ));
    }
    Ok(out)
}

/// The user agrees: a new folder is paired (it syncs with a base of its own from the next
/// pass); listed deletions are made by the next pass (deletes beyond them still ask). Returns
/// what was confirmed.
pub fn confirm_pending(engine: &mut Engine, scope: Option<&Scope>) -> SyncResult<Vec<Pending>> {
    let mut done = Vec::new();
    for (s, sd) in waiting(engine, scope)? {
        let _pass = sd.lock_pass()?;
        let Some(mut p) = sd.pending()? else { continue };
        let folder = engine.scope_dir(&s)?;
        let ident = FolderIdentity::of(&folder).ok_or_else(|| SyncError::FolderMissing {
            scope: s.key(),
            folder: folder.display().to_string(),
        })?;
        match p.reason {
            PendingReason::NewFolder { .. } => {
                let mut state = sd.load_state()?;
                state.folder = Some(ident);
                sd.save_state(&state)?;
                sd.clear_pending()?;
            }
            PendingReason::FolderReplaced | PendingReason::ManyDeletes => {
                // The folder as it is now is the scope's folder.
                let mut state = sd.load_state()?;
                state.folder = Some(ident);
                sd.save_state(&state)?;
                p.confirmed = true;
                sd.put_pending(&p)?;
            }
        }
        done.push(p);
    }
    Ok(done)
}

/// The user declines: notes missing here are restored from the last sync (the base store);
/// notes deleted in the cloud are kept here and uploaded again by the next pass (so every
/// machine gets them back); a new folder stays unsynced (the next pass asks again). Returns
/// what was cancelled.
pub fn cancel_pending(engine: &mut Engine, scope: Option<&Scope>) -> SyncResult<Vec<Pending>> {
    let mut done = Vec::new();
    for (s, sd) in waiting(engine, scope)? {
        let _pass = sd.lock_pass()?;
        let Some(p) = sd.pending()? else { continue };
        if !matches!(p.reason, PendingReason::NewFolder { .. }) {
            let folder = engine.scope_dir(&s)?;
            let ident = FolderIdentity::of(&folder).ok_or_else(|| SyncError::FolderMissing {
                scope: s.key(),
                folder: folder.display().to_string(),
            })?;
            let mut state = sd.load_state()?;
            engine.refresh_scope(&s)?;
            for id in &p.local_deletes {
                let Some(entry) = state.base.get(id) else {
                    continue;
                };
                let Some((note, _)) = sd.note(id, entry) else {
                    continue;
                };
                let _lock = engine.lock_scope(&s)?;
                if engine.index().find(&s.key(), id)?.is_empty() {
                    // A file that appeared there meanwhile stays: it is never overwritten.
                    engine.swap_note_file(&s, id, &format!("{id}.md"), None, Some(&note), None)?;
                }
            }
            for id in &p.cloud_deletes {
                // No base: the next pass sees a note here that the cloud deleted and, merging
                // without a base, keeps it and uploads it over the deletion.
                state.base.remove(id);
            }
            state.folder = Some(ident);
            state.manifest_version = None;
            sd.save_state(&state)?;
        }
        sd.clear_pending()?;
        done.push(p);
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mass_delete_rule() {
        // One note never asks.
        assert!(!too_many_deletes(1, 1));
        assert!(!too_many_deletes(0, 0));
        // All of a small scope asks.
        assert!(too_many_deletes(2, 2));
        assert!(too_many_deletes(3, 3));
        // Up to a quarter of the scope, and at most ten notes, goes through.
        assert!(!too_many_deletes(2, 8));
        assert!(too_many_deletes(3, 8));
        assert!(!too_many_deletes(10, 100));
        assert!(too_many_deletes(11, 1000));
    }

    #[test]
    fn messages_say_nothing_was_synced_and_name_the_scope() {
        let p = Pending {
            scope: "user".into(),
            folder: "/h/memory/user".into(),
            reason: PendingReason::FolderReplaced,
            local_deletes: (0..7).map(|i| format!("n{i}")).collect(),
            cloud_deletes: Vec::new(),
            synced: 7,
            found_at_ms: 1,
            confirmed: false,
        };
        let m = p.message();
        assert!(m.contains("sync of user is paused"), "{m}");
        assert!(m.contains("7 of the 7"), "{m}");
        assert!(m.contains("n0, n1, n2, n3, n4, and 2 more"), "{m}");
        assert!(m.contains("nothing was synced"), "{m}");
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["reason"], "folder-replaced");
        let back: Pending = serde_json::from_value(json).unwrap();
        assert_eq!(back, p);
    }
}
