//! The base store: for each synced note of a scope, the note file exactly as last synced, with
//! its revision id and content hash — the `base` of every three-way merge. Also the scope's last
//! known manifest (for cheap polls) and its status.
//!
//! Layout under `$MEMORIA_HOME/sync/scopes/<scope>/`: `state.json` (entries, manifest, the
//! folder they were synced from), `commit.json` (a commit sent whose reply has not been taken
//! in yet) and `base/<id>/<hash>.md` (bodies, content-addressed so a crash between writing a
//! body and the state never pairs an entry with the wrong body). It never touches the vault.
//!
//! A base belongs to one folder, not only to a scope id: two worktrees or clones of one
//! repository share a project id but not their `MEMORY/` folders, and a base compared with the
//! wrong folder reads every difference as a deletion or a revert. The first folder a scope
//! syncs from on this machine keeps `scopes/<scope>/`; any other folder claiming the same
//! scope gets `scopes/<scope>~<hash of its path>/`, a base of its own, once the user confirms
//! the pairing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memoria_shared::note::{FileContext, Note};
use memoria_shared::protocol::{ManifestEntry, Quotas};
use serde::{Deserialize, Serialize};

use super::error::SyncResult;
use super::settings::{ParsedFiles, read_json, write_json};
use crate::fsx;

/// One note as last synced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BaseEntry {
    pub revision: String,
    pub hash: String,
}

/// The folder a base was synced from, as it was: its canonical path and, on Unix, the device
/// and inode of the folder itself, so a folder re-created at the same path (a moved or
/// unmounted drive, a checkout without `MEMORY/`) is not taken for the one that was synced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FolderIdentity {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev_ino: Option<(u64, u64)>,
}

impl FolderIdentity {
    /// The identity of `dir` now; `None` when it is missing or not a folder.
    pub fn of(dir: &Path) -> Option<FolderIdentity> {
        let meta = std::fs::metadata(dir).ok().filter(|m| m.is_dir())?;
        Some(FolderIdentity {
            path: canonical_path(dir).to_string_lossy().into_owned(),
            dev_ino: dev_ino(&meta),
        })
    }
}

#[cfg(unix)]
fn dev_ino(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn dev_ino(_meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// `dir` with symbolic links resolved, also when it (or some of its parents) does not exist:
/// the longest existing ancestor is resolved and the rest appended.
pub fn canonical_path(dir: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = dir;
    loop {
        if let Ok(c) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(c, |p, name| p.join(name));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return dir.to_path_buf(),
        }
    }
}

/// A scope's sync state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeState {
    /// The folder this base was synced from (`None` before the first pass).
    #[serde(default)]
    pub folder: Option<FolderIdentity>,
    /// The manifest version every entry of `remote` is from; `None` forces a full snapshot.
    #[serde(default)]
    pub manifest_version: Option<String>,
    /// Note id → as last synced (live notes only).
    #[serde(default)]
    pub base: BTreeMap<String, BaseEntry>,
    /// The server's manifest as last seen.
    #[serde(default)]
    pub remote: Vec<ManifestEntry>,
    /// The manifest generation `remote` is from: the next snapshot asks only for what
    /// changed since (`None`: the whole list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// A commit sent whose outcome is not known yet (no reply arrived). Stored in a file of
    /// its own (read here too from a state written before it was).
    #[serde(default, skip_serializing)]
    pub pending: Option<PendingCommit>,
    /// The base was kept when the scope moved to a new account key, and no pass under that key
    /// has completed yet: a note the cloud does not list is taken as not uploaded under the
    /// new key yet (its base is dropped, so this machine's copy goes up), never as deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rekeyed: bool,
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

/// Which process polls a scope for every process on the home. Processes sharing a home share
/// its vault and sync state, so one poll serves them all: the process that polls holds the
/// lease until a little after its next poll is due, renewing it with every poll; the others
/// defer their polls to it while it holds it (they still send their own local changes). A
/// process that stops or is killed stops renewing, and the lease lapses on its own.
#[derive(Debug, Clone)]
pub struct PollLease(PathBuf);

/// The lease as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseHolder {
    /// The holder's id (its process id and a random part).
    pub holder: String,
    pub until_ms: i64,
}

impl PollLease {
    /// The holder, while the lease runs (an unreadable lease is no lease).
    pub fn holder(&self, now_ms: i64) -> Option<LeaseHolder> {
        read_json::<LeaseHolder>(&self.0)
            .ok()
            .flatten()
            .filter(|l| l.until_ms > now_ms)
    }

    /// Takes or renews the lease for `holder` until `until_ms`.
    pub fn hold(&self, holder: &str, until_ms: i64) -> SyncResult<()> {
        write_json(
            &self.0,
            &LeaseHolder {
                holder: holder.to_owned(),
                until_ms,
            },
        )
    }

    /// Gives the lease up, if `holder` has it.
    pub fn release(&self, holder: &str) {
        if read_json::<LeaseHolder>(&self.0)
            .ok()
            .flatten()
            .is_some_and(|l| l.holder == holder)
        {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// When each running background syncer (the coordinator of `memoria watch`, `memoria mcp`,
/// the app) tries a scope next, so `sync status` can say whether and when anything retries: a
/// one-shot `memoria sync now` leaves nothing behind that would. Each process keeps its own
/// entry, renews it while it runs and removes it when it stops. A process holds an OS lock on
/// `sync/running/<its id>.lock` while it runs, which the OS lets go of however it ends, so the
/// entry of a process that was killed counts for nothing (and lapses by itself where locks do
/// not work, see [`ScheduledPass::alive_until_ms`]).
#[derive(Debug, Clone)]
pub struct NextPasses {
    file: PathBuf,
    running: PathBuf,
}

/// The lock a background syncer holds while it runs, under the home's sync folder.
pub fn running_lock(sync_dir: &Path, holder: &str) -> PathBuf {
    sync_dir.join("running").join(format!("{holder}.lock"))
}

/// One process's next pass of a scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledPass {
    /// When the next pass is due (ms); `None`: none until a write here or "sync now" (the
    /// last pass needs the user, or a project scope not in use).
    pub at_ms: Option<i64>,
    /// The entry holds until then unless renewed: a running process renews it well before.
    pub alive_until_ms: i64,
}

impl NextPasses {
    fn alive(&self, holder: &str, p: &ScheduledPass, now_ms: i64) -> bool {
        p.alive_until_ms > now_ms
            && fsx::FileLock::is_held(&self.running.join(format!("{holder}.lock")))
    }

    /// The entries of the processes running at `now_ms`.
    pub fn running(&self, now_ms: i64) -> Vec<ScheduledPass> {
        read_json::<BTreeMap<String, ScheduledPass>>(&self.file)
            .ok()
            .flatten()
            .unwrap_or_default()
            .into_iter()
            .filter(|(holder, p)| self.alive(holder, p, now_ms))
            .map(|(_, p)| p)
            .collect()
    }

    /// Records `holder`'s next pass (`None`: removes its entry), dropping lapsed entries.
    pub fn record(&self, holder: &str, pass: Option<ScheduledPass>, now_ms: i64) -> SyncResult<()> {
        let lock = self.file.with_extension("lock");
        let _lock = fsx::FileLock::acquire(&lock)?;
        let mut all: BTreeMap<String, ScheduledPass> =
            read_json(&self.file).ok().flatten().unwrap_or_default();
        all.retain(|h, p| {
            let keep = h == holder || self.alive(h, p, now_ms);
            if !keep {
                // A process that ended without removing its entry: its lock file goes too.
                let _ = std::fs::remove_file(self.running.join(format!("{h}.lock")));
            }
            keep
        });
        match pass {
            Some(p) => {
                all.insert(holder.to_owned(), p);
            }
            None => {
                all.remove(holder);
            }
        }
        if all.is_empty() {
            if std::fs::symlink_metadata(&self.file).is_ok() {
                fsx::remove(&self.file)?;
            }
            return Ok(());
        }
        write_json(&self.file, &all)
    }
}

/// The scope state files this process last read or wrote (see [`ParsedFiles`]).
static STATES: ParsedFiles<ScopeState> = ParsedFiles::new();

/// The folder of one scope's sync state (for one folder of that scope).
#[derive(Debug, Clone)]
pub struct ScopeDir {
    root: PathBuf,
    /// `scopes/<scope>/`: the scope's first folder, and where its pass lock lives.
    primary: PathBuf,
}

impl ScopeDir {
    /// The state of the scope's first folder on this machine.
    pub fn new(sync_dir: &Path, scope_key: &str) -> ScopeDir {
        let primary = sync_dir.join("scopes").join(scope_key.replace(':', "_"));
        ScopeDir {
            root: primary.clone(),
            primary,
        }
    }

    /// The state of `scope_key` as synced from `folder`: the first folder's (also when it has
    /// not recorded a folder yet), else one of `folder`'s own. Call it under
    /// [`ScopeDir::lock_pass`] of [`ScopeDir::new`] when the answer must not change meanwhile.
    pub fn for_folder(sync_dir: &Path, scope_key: &str, folder: &Path) -> SyncResult<ScopeDir> {
        let first = ScopeDir::new(sync_dir, scope_key);
        let path = canonical_path(folder).to_string_lossy().into_owned();
        match first.load_folder()? {
            Some(f) if f.path != path => {
                let hash = memoria_shared::hash::sha256_hex(path.as_bytes());
                let name = format!("{}~{}", scope_key.replace(':', "_"), &hash[..16]);
                Ok(ScopeDir {
                    root: sync_dir.join("scopes").join(name),
                    primary: first.primary,
                })
            }
            _ => Ok(first),
        }
    }

    /// The state of every folder of `scope_key` on this machine that has one: the first
    /// folder's, then those of further folders paired with the scope.
    pub fn every_folder(sync_dir: &Path, scope_key: &str) -> Vec<ScopeDir> {
        let first = ScopeDir::new(sync_dir, scope_key);
        let prefix = format!("{}~", scope_key.replace(':', "_"));
        let mut more: Vec<PathBuf> = std::fs::read_dir(sync_dir.join("scopes"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .collect();
        more.sort();
        std::iter::once(first.clone())
            .chain(more.into_iter().map(|root| ScopeDir {
                root,
                primary: first.primary.clone(),
            }))
            .collect()
    }

    /// The state of `scope` as synced from its folder in `engine`.
    pub fn of(
        engine: &crate::vault::Engine,
        scope: &crate::project::Scope,
    ) -> SyncResult<ScopeDir> {
        let dir = super::settings::sync_dir(engine.home().root());
        ScopeDir::for_folder(&dir, &scope.key(), &engine.scope_dir(scope)?)
    }

    /// Whether this is the scope's first folder (else a further folder claiming the scope).
    pub fn is_primary(&self) -> bool {
        self.root == self.primary
    }

    /// The folder the scope's first base was synced from, if it recorded one.
    pub fn primary_folder(&self) -> SyncResult<Option<String>> {
        let first = ScopeDir {
            root: self.primary.clone(),
            primary: self.primary.clone(),
        };
        Ok(first
            .shared_state()?
            .folder
            .as_ref()
            .map(|f| f.path.clone()))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Held for the length of a pass (or a commitFirst batch, a resolution, a confirmation),
    /// across processes; one lock for every folder of the scope.
    pub fn lock_pass(&self) -> SyncResult<fsx::FileLock> {
        Ok(fsx::FileLock::acquire(&self.primary.join("pass.lock"))?)
    }

    /// The scope's poll lease (one for every folder of the scope, like the pass lock).
    pub fn poll_lease(&self) -> PollLease {
        PollLease(self.primary.join("poll-lease.json"))
    }

    /// The next passes of the background syncers running on the home (one file for every
    /// folder of the scope, like the poll lease).
    pub fn next_passes(&self) -> NextPasses {
        let sync_dir = self.primary.parent().and_then(Path::parent);
        NextPasses {
            file: self.primary.join("next-pass.json"),
            running: sync_dir.map_or_else(PathBuf::new, |d| d.join("running")),
        }
    }

    /// The folder the state was synced from.
    fn load_folder(&self) -> SyncResult<Option<FolderIdentity>> {
        let state = STATES.read(&self.root.join("state.json"))?;
        Ok(state.and_then(|s| s.folder.clone()))
    }

    pub fn load_state(&self) -> SyncResult<ScopeState> {
        self.shared_state().map(Arc::unwrap_or_clone)
    }

    /// [`ScopeDir::load_state`] as this process holds it, not copied: for a caller that only
    /// reads it, or copies it once it has to change it (a poll with nothing new copies none of
    /// its entries).
    pub fn shared_state(&self) -> SyncResult<Arc<ScopeState>> {
        let saved = STATES.read(&self.root.join("state.json"))?;
        Ok(match (saved, read_json(&self.commit_path())?) {
            (Some(state), None) => state,
            (saved, pending) => {
                let mut state = saved.map(Arc::unwrap_or_clone).unwrap_or_default();
                state.pending = pending;
                Arc::new(state)
            }
        })
    }

    /// Saves `state`, its commit in flight (if any) apart.
    pub fn save_state(&self, state: &ScopeState) -> SyncResult<()> {
        self.save_state_owned(state.clone()).map(drop)
    }

    /// [`ScopeDir::save_state`] of a state the caller is done changing, returned as saved
    /// (without its commit in flight): not copied on the way.
    pub fn save_state_owned(&self, mut state: ScopeState) -> SyncResult<Arc<ScopeState>> {
        // What parsing the file gives back: the commit in flight is stored apart.
        let pending = state.pending.take();
        let saved = STATES.write(&self.root.join("state.json"), state)?;
        match &pending {
            Some(p) => self.save_pending(p)?,
            None => {
                let path = self.commit_path();
                if std::fs::symlink_metadata(&path).is_ok() {
                    fsx::remove(&path)?;
                }
            }
        }
        Ok(saved)
    }

    /// Records the commit about to be sent, before it is: what a pass that finds it asks the
    /// server about. Only this small file is written, not the scope's every entry again: the
    /// rest of the state is saved as it was.
    pub fn save_pending(&self, pending: &PendingCommit) -> SyncResult<()> {
        write_json(&self.commit_path(), pending)
    }

    fn commit_path(&self) -> PathBuf {
        self.root.join("commit.json")
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

    /// Whether the base body of `id` with `hash` is stored.
    pub fn has_body(&self, id: &str, hash: &str) -> bool {
        self.body_path(id, hash).is_file()
    }

    /// Stores a base body (the note file as synced) under its hash.
    pub fn put_body(&self, id: &str, hash: &str, file: &str) -> SyncResult<()> {
        let p = self.body_path(id, hash);
        if !p.exists() {
            fsx::write_atomic(&p, file.as_bytes())?;
        }
        Ok(())
    }

    /// [`ScopeDir::put_body`] of each `(id, hash, file)`, written together (a first upload
    /// stores thousands).
    pub fn put_bodies<'a>(
        &self,
        bodies: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> SyncResult<()> {
        let files: Vec<(PathBuf, Vec<u8>)> = bodies
            .into_iter()
            .map(|(id, hash, file)| (self.body_path(id, hash), file))
            .filter(|(p, _)| !p.exists())
            .map(|(p, file)| (p, file.as_bytes().to_vec()))
            .collect();
        Ok(fsx::write_many_atomic(&files)?)
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
            self.prune_id(state, &id);
        }
        Ok(())
    }

    /// Removes the base bodies of `ids` that no entry points at: after a pass that changed
    /// only those, the same as [`Self::prune_bodies`] without listing every note's folder.
    pub fn prune_bodies_of<'a>(&self, state: &ScopeState, ids: impl IntoIterator<Item = &'a str>) {
        for id in ids {
            self.prune_id(state, id);
        }
    }

    fn prune_id(&self, state: &ScopeState, id: &str) {
        let id_dir = self.root.join("base").join(id);
        let keep = state.base.get(id).map(|e| format!("{}.md", e.hash));
        let Ok(files) = std::fs::read_dir(&id_dir) else {
            return;
        };
        for f in files.flatten() {
            if keep.as_deref() != Some(&*f.file_name().to_string_lossy()) {
                let _ = std::fs::remove_file(f.path());
            }
        }
        let _ = std::fs::remove_dir(&id_dir);
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
    fn pruning_some_notes_leaves_the_others_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let sd = ScopeDir::new(dir.path(), "user");
        let mut state = ScopeState::default();
        let mut old = BTreeMap::new();
        for id in ["a", "b"] {
            let first = Note::new(NoteId::new(id).unwrap(), "first", "one\n");
            let second = Note::new(NoteId::new(id).unwrap(), "second", "two\n");
            for n in [&first, &second] {
                sd.put_body(id, n.content_hash().as_str(), &n.serialize())
                    .unwrap();
            }
            let entry = |n: &Note| BaseEntry {
                revision: "r".into(),
                hash: n.content_hash().as_str().to_owned(),
            };
            state.base.insert(id.into(), entry(&second));
            old.insert(id, entry(&first));
        }
        sd.prune_bodies_of(&state, ["a"]);
        assert!(sd.note("a", &old["a"]).is_none());
        assert!(sd.note("a", &state.base["a"]).is_some());
        // Not named: its stale body stays until a pass prunes it.
        assert!(sd.note("b", &old["b"]).is_some());
        // A note gone from the base loses every body, and its folder.
        state.base.remove("b");
        sd.prune_bodies_of(&state, ["b"]);
        assert!(sd.note("b", &old["b"]).is_none());
        assert!(!sd.root().join("base/b").exists());
    }

    #[test]
    fn a_commit_in_flight_is_saved_apart_and_loaded_with_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let sd = ScopeDir::new(dir.path(), "user");
        let mut state = ScopeState::default();
        state.base.insert(
            "a".into(),
            BaseEntry {
                revision: "r1".into(),
                hash: "h1".into(),
            },
        );
        sd.save_state(&state).unwrap();
        let pending = PendingCommit {
            commit_id: "c1".into(),
            changes: BTreeMap::from([("a".to_owned(), Some("h2".to_owned()))]),
        };
        sd.save_pending(&pending).unwrap();
        let state_file = std::fs::read_to_string(sd.root().join("state.json")).unwrap();
        assert!(!state_file.contains("c1"), "{state_file}");
        let loaded = sd.load_state().unwrap();
        assert_eq!(loaded.pending.as_ref(), Some(&pending));
        assert_eq!(loaded.base, state.base);
        // Saved with the commit taken in, the record of it goes.
        sd.save_state(&ScopeState {
            pending: None,
            ..loaded
        })
        .unwrap();
        assert_eq!(sd.load_state().unwrap().pending, None);
        assert!(!sd.root().join("commit.json").exists());
    }

    #[test]
    fn the_shared_state_is_one_copy_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let sd = ScopeDir::new(dir.path(), "user");
        let mut state = ScopeState {
            manifest_version: Some("v1".into()),
            ..ScopeState::default()
        };
        sd.save_state(&state).unwrap();
        let (a, b) = (sd.shared_state().unwrap(), sd.shared_state().unwrap());
        assert!(Arc::ptr_eq(&a, &b), "read twice, copied");
        assert_eq!(*a, state);
        // A commit in flight comes with it, in a copy of its own.
        let pending = PendingCommit {
            commit_id: "c1".into(),
            changes: BTreeMap::new(),
        };
        sd.save_pending(&pending).unwrap();
        let c = sd.shared_state().unwrap();
        assert_eq!(c.pending.as_ref(), Some(&pending));
        assert_eq!(a.pending, None, "the shared copy is not changed");
        // Saved again, the next read is what was saved.
        state.manifest_version = Some("v2".into());
        sd.save_state(&state).unwrap();
        let d = sd.shared_state().unwrap();
        assert_eq!(d.manifest_version.as_deref(), Some("v2"));
        assert_eq!(d.pending, None);
    }

    #[test]
    fn a_commit_in_flight_recorded_inside_an_older_state_file_is_still_found() {
        let dir = tempfile::tempdir().unwrap();
        let sd = ScopeDir::new(dir.path(), "user");
        std::fs::create_dir_all(sd.root()).unwrap();
        std::fs::write(
            sd.root().join("state.json"),
            r#"{"base":{"a":{"revision":"r1","hash":"h1"}},"pending":{"commitId":"c0","changes":{"a":null}}}"#,
        )
        .unwrap();
        let state = sd.load_state().unwrap();
        let p = state.pending.clone().expect("the older file's commit");
        assert_eq!(p.commit_id, "c0");
        assert_eq!(p.changes["a"], None);
        // Saved again, it is kept in its own file.
        sd.save_state(&state).unwrap();
        assert!(sd.root().join("commit.json").exists());
        assert_eq!(sd.load_state().unwrap().pending, Some(p));
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
