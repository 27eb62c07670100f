//! One sync pass over one scope: snapshot (sending the hashes this machine has, and the last
//! manifest version for a cheap poll), a three-way decision per note with
//! [`memoria_shared::merge::merge`], backups before any download that changes or deletes a
//! local note and before every merge, uploads by compare-and-swap commits naming each note's
//! base revision, and conflicts recorded and held back — each only for its own note.
//!
//! A pass never deletes on evidence it cannot trust: a missing scope folder stops it before
//! any request, and a replaced folder, a second folder claiming the scope, or many deletions at
//! once make it wait for the user ([`super::pending`]). A note file that cannot be read is held
//! back, never taken for a deletion; a note tagged `contains-secrets` is not uploaded unless
//! the settings say so (held back too: the cloud keeps the version it has).
//!
//! Crash safety: every step is idempotent. A local write is made before the base store learns
//! of it, and the base store only after the server acknowledged; a pass interrupted anywhere
//! (or a reply lost after the server applied a commit) is finished by the next pass, which sees
//! the same content on both sides and adopts the server's revision.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use memoria_shared::e2ee::{AccountKey, AccountKeys};
use memoria_shared::merge::{MergeOutcome, merge};
use memoria_shared::note::{FileContext, Note};
use memoria_shared::protocol::{
    Change, ChangeOp, CommitRequest, CommitResponse, ErrorCode as ProtocolCode, FEATURE_E2EE,
    FEATURE_MANIFEST_DELTA, ManifestEntry, MarkRequest, NoteBody, OffRequest, ProjectId,
    PurgeRequest, Quotas, Scope as WireScope, SnapshotRequest, SnapshotResponse, UnmarkRequest,
    verify_note_file,
};
use memoria_shared::{Clock, ContentHash, NoteId};
use serde::Serialize;

use super::base::{BaseEntry, DownloadCounts, FolderIdentity, ScopeDir, ScopeState};
use super::client::SyncClient;
use super::conflict::{Conflict, ConflictReason};
use super::e2ee::{Refused, ScopeCrypt};
use super::error::{SyncError, SyncResult};
use super::local::{self, LocalCache};
use super::pending::{Pending, PendingReason, too_many_deletes};
use super::settings::{Settings, sync_dir};
use crate::backup::BackupReason;
use crate::guard::{self, SECRETS_TAG};
use crate::index::FileRow;
use crate::project::Scope;
use crate::scan::{self, FoundFile};
use crate::vault::Engine;

/// How often a pass starts over after a 409 before giving up until the next pass.
const STALE_RETRIES: usize = 4;

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassReport {
    pub scope: String,
    /// The server said nothing changed since the last pass.
    pub unchanged: bool,
    pub uploaded: usize,
    pub download: DownloadCounts,
    /// Notes merged from both sides.
    pub merged: usize,
    /// Conflicts found by this pass.
    pub new_conflicts: Vec<String>,
    /// Notes held back (conflicts, refused ids), with the reason.
    pub held_back: Vec<(String, String)>,
    /// Note files and base copies the pass read (files unchanged since they were last read
    /// are known without reading them).
    pub files_read: usize,
    /// Not a pass of this process's own: another process on the home polls the scope, and
    /// nothing changed here since the last pass, so nothing was sent.
    pub deferred: bool,
}

impl PassReport {
    /// True when the pass changed something on either side.
    pub fn changed(&self) -> bool {
        self.uploaded > 0
            || self.download != DownloadCounts::default()
            || self.merged > 0
            || !self.new_conflicts.is_empty()
    }
}

/// The wire scope of a vault scope; domain scopes are not synced.
pub fn wire_scope(scope: &Scope) -> SyncResult<WireScope> {
    match scope {
        Scope::User => Ok(WireScope::User),
        // Every checkout of a project (paired folders too) syncs the one project of the cloud.
        Scope::Project(_) => ProjectId::new(scope.project_id().unwrap_or_default())
            .map(WireScope::Project)
            .map_err(|_| SyncError::NotSyncable(scope.key())),
        Scope::Domain(_) => Err(SyncError::NotSyncable(scope.key())),
    }
}

/// The scopes of `engine` that sync: user, and the current project if any.
pub fn synced_scopes(engine: &Engine) -> Vec<Scope> {
    engine
        .visible_scopes()
        .into_iter()
        .filter(|s| !matches!(s, Scope::Domain(_)))
        .collect()
}

/// The scope's folder as the pass found it.
#[derive(Debug, Clone)]
struct FolderCheck {
    ident: FolderIdentity,
    /// Not the folder last synced (same path, another folder: moved, re-created, remounted).
    replaced: bool,
}

/// A note file of this machine: its sync hash, known from the file or from the local cache
/// while the file is unchanged, and its text and note once read.
#[derive(Debug, Clone)]
struct LocalNote {
    rel: String,
    path: PathBuf,
    id: String,
    hash: String,
    /// The file's fingerprint, taken before it was read.
    fp: Option<local::Fingerprint>,
    body: Option<(String, Note)>,
}

impl LocalNote {
    /// Reads the file (a file that cannot be read, or no longer parses, is held back with
    /// the reason). Its hash is then the text's.
    fn load(&mut self) -> Result<(), String> {
        let text = read_text(&self.path).map_err(|e| {
            unreadable(
                &self.path.to_string_lossy(),
                &format!("cannot be read: {e}"),
            )
        })?;
        let note = parse_note(&text, &self.rel)?;
        self.hash = synced_hash(&note);
        self.body = Some((text, note));
        Ok(())
    }

    /// The text and note, once [`LocalNote::load`]ed.
    fn loaded(&self) -> (&str, &Note) {
        let (text, note) = self
            .body
            .as_ref()
            .expect("the note was read before its text is used");
        (text, note)
    }
}

/// Runs sync passes for one home against one server.
#[derive(Debug)]
pub struct Syncer {
    home: PathBuf,
    dir: PathBuf,
    server: String,
    client: SyncClient,
    clock: Arc<dyn Clock>,
    user: Option<String>,
    /// The server lists what changed since a generation (`manifest-delta`).
    delta: bool,
    /// The server keeps end-to-end encrypted scopes (`e2ee`).
    e2ee: bool,
    /// The account key's subkeys, when this machine holds the key: every scope then syncs
    /// end-to-end encrypted.
    keys: Option<AccountKeys>,
    /// The account key itself (what unwraps a rotation's new key).
    account: Option<AccountKey>,
    /// While a rotation is under way, the key it replaces: a scope still under it is synced
    /// with it once, then moved to the account key.
    previous: Option<AccountKey>,
    /// A rotation's new key kept before the server was told was looked at.
    next_settled: bool,
    cancel: Arc<AtomicBool>,
}

impl Syncer {
    pub fn new(
        home_root: &Path,
        server: &str,
        client: SyncClient,
        clock: Arc<dyn Clock>,
    ) -> Syncer {
        Syncer {
            home: home_root.to_path_buf(),
            dir: sync_dir(home_root),
            server: server.trim_end_matches('/').to_owned(),
            client,
            clock,
            user: None,
            delta: false,
            e2ee: false,
            keys: None,
            account: None,
            previous: None,
            next_settled: false,
            cancel: Arc::default(),
        }
    }

    /// A syncer for the signed-in server of `home_root`, over HTTP, with the token from
    /// `env_token` (`MEMORIA_SYNC_TOKEN`) or the keychain. Refuses while sync is off.
    ///
    /// A request in flight is abandoned (its connection closed) within
    /// [`CANCEL_POLL`](super::client::CANCEL_POLL) of `cancel` being set or of sync being
    /// turned off in any process sharing the home; the pass then ends with [`SyncError::Off`].
    pub fn from_settings(
        home_root: &Path,
        env_token: Option<String>,
        clock: Arc<dyn Clock>,
        cancel: Arc<AtomicBool>,
    ) -> SyncResult<Syncer> {
        let dir = sync_dir(home_root);
        let settings = Settings::load(&dir)?;
        let server = settings.server.clone().ok_or(SyncError::NotSignedIn)?;
        if !settings.is_on() {
            return Err(SyncError::Off);
        }
        let token = super::token::load(home_root, &server, env_token)?;
        let flag = cancel.clone();
        let transport =
            super::client::HttpTransport::new(&server)?.with_cancel(Arc::new(move || {
                flag.load(Ordering::SeqCst) || Settings::load(&dir).is_ok_and(|s| !s.is_on())
            }));
        let mut syncer = Syncer::new(
            home_root,
            &server,
            SyncClient::new(Arc::new(transport), token),
            clock,
        );
        syncer.cancel = cancel;
        syncer.load_keys()?;
        Ok(syncer)
    }

    /// Whether this syncer holds the account key (every scope then syncs encrypted).
    pub fn holds_key(&self) -> bool {
        self.keys.is_some()
    }

    /// Syncs every scope end-to-end encrypted under `key` (`None`: in plaintext).
    pub fn set_account_key(&mut self, key: Option<&AccountKey>) {
        self.keys = key.map(AccountKey::derive);
        self.account = key.cloned();
    }

    /// The key a rotation under way replaces (`None`: no rotation).
    pub fn set_previous_key(&mut self, key: Option<&AccountKey>) {
        self.previous = key.cloned();
    }

    /// Takes the account key and a rotation's previous key from this machine's key store.
    fn load_keys(&mut self) -> SyncResult<()> {
        let key = super::e2ee::load_key(&self.home, &self.server)?;
        self.set_account_key(key.as_ref());
        self.previous = match key {
            Some(_) => super::e2ee::load_previous_key(&self.home, &self.server)?,
            None => None,
        };
        Ok(())
    }

    /// A rotation this machine began and whose process ended between keeping the new key and
    /// making it the account key: once the server holds the new key's blobs, it becomes the
    /// account key here (the one it replaces kept as the previous key), so the next pass goes
    /// on with the rotation; if the server never took it, it is forgotten. Looked at once.
    fn settle_next_key(&mut self) -> SyncResult<()> {
        if self.next_settled {
            return Ok(());
        }
        let Some(next) = super::e2ee::load_next_key(&self.home, &self.server)? else {
            self.next_settled = true;
            return Ok(());
        };
        self.check_on()?;
        let kid = next.derive().key_id().as_str().to_owned();
        let taken = self
            .client
            .e2ee_keys()?
            .is_some_and(|b| super::e2ee::blobs_kid(&b).as_deref() == Some(kid.as_str()));
        if taken {
            if let Some(old) = self
                .account
                .clone()
                .filter(|k| k.as_bytes() != next.as_bytes())
            {
                super::e2ee::store_previous_key(&self.home, &self.server, &old)?;
            }
            super::e2ee::store_key(&self.home, &self.server, &next)?;
        }
        super::e2ee::forget_next_key(&self.home, &self.server)?;
        self.load_keys()?;
        self.next_settled = true;
        Ok(())
    }

    /// After a refusal saying a scope is under another account key: takes up the key the
    /// account moved to, when this machine can. The key store first (a rotation run by another
    /// process of this machine, an unlock); else the server's `successor`, the new key wrapped
    /// under the one held here. `Ok(true)` when the key changed; `e2ee_locked` when the
    /// account's key was replaced and the key held here no longer leads to it.
    fn follow_rotation(&mut self) -> SyncResult<bool> {
        let Some(held) = self.account.clone() else {
            return Ok(false);
        };
        let held_kid = held.derive().key_id().as_str().to_owned();
        self.load_keys()?;
        if self.keys.as_ref().map(|k| k.key_id().as_str()) != Some(held_kid.as_str()) {
            return Ok(self.keys.is_some());
        }
        self.check_on()?;
        let Some(blobs) = self.client.e2ee_keys()? else {
            return Ok(false);
        };
        if super::e2ee::blobs_kid(&blobs).as_deref() == Some(held_kid.as_str()) {
            return Ok(false);
        }
        let next = match blobs.successor.as_deref() {
            Some(b) => super::e2ee::unwrap_under(b, &held)?,
            None => None,
        };
        let Some(next) = next else {
            // Kept, so the state this machine shows (`sync status`, the app) says it is locked
            // without asking the server, until a key other than this one is held.
            Settings::update(&self.dir, |s| s.e2ee_replaced_kid = Some(held_kid.clone()))?;
            return Err(SyncError::E2ee {
                code: memoria_store::error::ErrorCode::E2eeLocked,
                message: "the account's key was replaced on another machine, and the key this machine holds no longer opens the notes: unlock this machine with the passphrase or the new recovery key".into(),
            });
        };
        if blobs.previous.is_some() {
            super::e2ee::store_previous_key(&self.home, &self.server, &held)?;
        }
        super::e2ee::store_key(&self.home, &self.server, &next)?;
        self.load_keys()?;
        Ok(true)
    }

    pub fn client(&self) -> &SyncClient {
        &self.client
    }

    /// Setting this flag stops the pass before its next request (turning sync off in this
    /// process); `sync off` in another process is seen through the settings file.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        self.cancel.clone()
    }

    /// Refuses to send a request while sync is off, cancelled, or paused by a 429.
    fn check_on(&self) -> SyncResult<()> {
        if self.cancel.load(Ordering::SeqCst) {
            return Err(SyncError::Off);
        }
        let s = Settings::load(&self.dir)?;
        if !s.is_on() {
            return Err(SyncError::Off);
        }
        if let Some(left) = s.paused_for_ms(self.clock.now_ms()) {
            return Err(SyncError::RateLimited {
                retry_after_s: (left as u64).div_ceil(1000),
            });
        }
        Ok(())
    }

    fn user(&mut self) -> SyncResult<String> {
        if let Some(u) = &self.user {
            return Ok(u.clone());
        }
        self.check_on()?;
        let id = self.client.identity()?;
        self.delta = id.supports(FEATURE_MANIFEST_DELTA);
        self.e2ee = id.supports(FEATURE_E2EE);
        self.user = Some(id.user_id.clone());
        Ok(id.user_id)
    }

    /// The scope's notes as they are now: the index brought up to date, then each file read
    /// unless `cache` knows it unchanged.
    #[allow(clippy::type_complexity)]
    fn read_scope(
        &self,
        engine: &mut Engine,
        scope: &Scope,
        (files, walk): (&[FoundFile], &local::Walk),
        cache: &LocalCache,
        report: &mut PassReport,
    ) -> SyncResult<(BTreeMap<String, LocalNote>, BTreeMap<String, String>)> {
        let rows = engine.refresh_scope_listed(scope, files)?;
        read_local(rows, walk, cache, &mut report.files_read)
    }

    /// Syncs every synced scope of `engine`; one scope's failure does not stop the others.
    pub fn sync_all(&mut self, engine: &mut Engine) -> Vec<(Scope, SyncResult<PassReport>)> {
        synced_scopes(engine)
            .into_iter()
            .map(|s| {
                let r = self.sync_scope(engine, &s);
                (s, r)
            })
            .collect()
    }

    /// One pass over `scope`, recording its status (last synced, error naming the scope, what
    /// the download brought) for `sync status`.
    pub fn sync_scope(&mut self, engine: &mut Engine, scope: &Scope) -> SyncResult<PassReport> {
        self.sync_scope_when(engine, scope, false)
            .map(|r| r.expect("a pass asked for unconditionally runs"))
    }

    /// [`Syncer::sync_scope`] for a process that defers polling `scope` to another: the pass
    /// runs only when [`Syncer::has_local_changes`] says so, checked under the same pass lock,
    /// so a change another process's pass sent meanwhile is not sent again. `None` when it
    /// had nothing to do (no request sent).
    pub fn sync_scope_if_changed(
        &mut self,
        engine: &mut Engine,
        scope: &Scope,
    ) -> SyncResult<Option<PassReport>> {
        self.sync_scope_when(engine, scope, true)
    }

    fn sync_scope_when(
        &mut self,
        engine: &mut Engine,
        scope: &Scope,
        only_if_changed: bool,
    ) -> SyncResult<Option<PassReport>> {
        let key = scope.key();
        if Settings::load(&self.dir)?.off_scopes.contains(&key) {
            return Err(SyncError::ScopeOff(key));
        }
        let folder = engine.scope_dir(scope)?;
        // One pass per scope at a time across processes (a watcher's coordinator and
        // `memoria sync now` share the base store), whichever folder of the scope it is for.
        let _pass = ScopeDir::new(&self.dir, &key).lock_pass()?;
        // A check that fails runs the pass, which reports what is wrong.
        if only_if_changed && self.local_changes(engine, scope).ok() == Some(false) {
            return Ok(None);
        }
        let sd = ScopeDir::for_folder(&self.dir, &key, &folder)?;
        let mut result = self.sync_scope_inner(engine, scope, &sd, &folder);
        // A scope under another key, an account under another key (a mark refused), or a
        // scope no longer encrypted: the account's key was rotated or encryption is being
        // turned off, from another machine or another process of this one.
        let followed = match &result {
            Err(SyncError::Server {
                code: Some(ProtocolCode::ScopeEncrypted | ProtocolCode::KeysExist),
                ..
            }) => Some(self.follow_rotation()),
            Err(SyncError::Server {
                code: Some(ProtocolCode::ScopeNotEncrypted),
                ..
            }) => Some(self.follow_off()),
            _ => None,
        };
        if let Some(followed) = followed {
            result = match followed {
                Ok(true) => self.sync_scope_inner(engine, scope, &sd, &folder),
                Ok(false) => result,
                Err(e) => Err(e),
            };
        }
        let now = self.clock.now_ms();
        if let Err(SyncError::RateLimited { retry_after_s }) = &result {
            Settings::update(&self.dir, |s| s.pause(*retry_after_s, now))?;
        }
        let status = sd.update_status(|st| match &result {
            Ok(r) => {
                st.last_synced_ms = Some(now);
                st.last_error = None;
                if r.download != DownloadCounts::default() {
                    st.last_download = r.download;
                }
                st.held_back = r.held_back.iter().map(|(id, _)| id.clone()).collect();
            }
            // Off is not a failure: `sync status` says "off" already.
            Err(SyncError::Off) => {}
            Err(e) => st.last_error = Some(format!("{key}: {e}")),
        });
        let report = result?;
        status?;
        Ok(Some(report))
    }

    /// Whether this machine has anything for `scope` that the last pass (of any process on
    /// the home) did not leave in sync: a note file changed since, or a pass left unfinished.
    /// Reads only the note files that pass could not vouch for by their file times (changed
    /// just before or during it); waits for a pass in flight.
    pub fn has_local_changes(&self, engine: &Engine, scope: &Scope) -> SyncResult<bool> {
        // After a pass in flight elsewhere, which may be sending this very change.
        let _pass = ScopeDir::new(&self.dir, &scope.key()).lock_pass()?;
        self.local_changes(engine, scope)
    }

    /// [`Syncer::has_local_changes`], the pass lock held by the caller.
    fn local_changes(&self, engine: &Engine, scope: &Scope) -> SyncResult<bool> {
        let sd = ScopeDir::of(engine, scope)?;
        let state = sd.shared_state()?;
        let folder = engine.scope_dir(scope)?;
        if state.pending.is_some() || !folder.exists() {
            return Ok(true);
        }
        let walk = local::walk(&folder)?;
        let read = |rel: &str| {
            let text = read_text(&folder.join(rel)).ok()?;
            let note = parse_note(&text, rel).ok()?;
            Some((note.id.as_str().to_owned(), synced_hash(&note)))
        };
        let synced = |id: &str| state.base.get(id).map(|b| b.hash.as_str());
        Ok(!LocalCache::load(sd.root()).is_clean_reading(
            &walk,
            state.manifest_version.as_deref(),
            read,
            synced,
        ))
    }

    /// What every request to the server for `scope` needs first: sync on, an identity, and the
    /// scope pinned to this server and account. Returns the scope's name on the wire.
    fn admit(&mut self, scope: &Scope) -> SyncResult<WireScope> {
        let wire = wire_scope(scope)?;
        self.check_on()?;
        let user = self.user()?;
        let now = self.clock.now_ms();
        Settings::update(&self.dir, |s| {
            s.check_pin(&scope.key(), &self.server, &user, now)
        })??;
        Ok(wire)
    }

    /// Checks the scope's folder before anything is sent: missing → [`SyncError::FolderMissing`];
    /// a further folder claiming the scope → it waits for the user; the scope's first folder
    /// is recorded on its first pass. A folder that does not exist yet on a scope never synced
    /// from here (a fresh clone: git keeps no empty `MEMORY/`) is made: with no base, the pass
    /// has nothing it could delete.
    fn check_folder(
        &self,
        sd: &ScopeDir,
        scope: &Scope,
        folder: &Path,
    ) -> SyncResult<(FolderCheck, Arc<ScopeState>)> {
        let state = sd.shared_state()?;
        if state.folder.is_none() && state.base.is_empty() && !folder.exists() {
            std::fs::create_dir_all(folder).map_err(crate::Error::io("create folder", folder))?;
        }
        let ident = FolderIdentity::of(folder).ok_or_else(|| SyncError::FolderMissing {
            scope: scope.key(),
            folder: folder.display().to_string(),
        })?;
        match &state.folder {
            None if sd.is_primary() => {
                let mut state = Arc::unwrap_or_clone(state);
                state.folder = Some(ident.clone());
                sd.save_state(&state)?;
                let check = FolderCheck {
                    ident,
                    replaced: false,
                };
                Ok((check, Arc::new(state)))
            }
            None => {
                let p = Pending {
                    scope: scope.key(),
                    folder: ident.path.clone(),
                    reason: PendingReason::NewFolder {
                        paired: sd.primary_folder()?.unwrap_or_default(),
                    },
                    local_deletes: Vec::new(),
                    cloud_deletes: Vec::new(),
                    synced: 0,
                    found_at_ms: self.clock.now_ms(),
                    confirmed: false,
                };
                sd.put_pending(&p)?;
                Err(p.error())
            }
            Some(f) => {
                let check = FolderCheck {
                    replaced: f != &ident,
                    ident,
                };
                Ok((check, state))
            }
        }
    }

    fn sync_scope_inner(
        &mut self,
        engine: &mut Engine,
        scope: &Scope,
        sd: &ScopeDir,
        folder: &Path,
    ) -> SyncResult<PassReport> {
        let (check, state) = self.check_folder(sd, scope, folder)?;
        let wire = self.admit(scope)?;
        if self.keys.is_none() {
            self.take_up_kept_key(sd)?;
        }
        if self.keys.is_some() {
            self.settle_next_key()?;
        }
        if self.keys.is_some() && Settings::load(&self.dir)?.e2ee_turning_off {
            return self.pass_to_plaintext(engine, scope, &wire, sd, &check, folder, state);
        }
        if self.keys.is_none() && self.back_to_plaintext(sd)? {
            return self.passes(engine, scope, (&wire, &mut None), sd, &check, folder, None);
        }
        let state =
            self.pass_under_previous_key(engine, scope, &wire, sd, &check, folder, state)?;
        let mut crypt = self.e2ee_scope(&wire, sd)?;
        // A scope just marked encrypted starts over from an empty state.
        let state = state.filter(|_| crypt.as_ref().is_none_or(|c| c.purged()));
        let report = self.passes(
            engine,
            scope,
            (&wire, &mut crypt),
            sd,
            &check,
            folder,
            state,
        )?;
        if let Some(c) = crypt.as_mut().filter(|c| !c.purged()) {
            self.purge_plaintext(&wire, c)?;
        }
        Ok(report)
    }

    /// A pass, again after a 409 (up to [`STALE_RETRIES`]).
    #[allow(clippy::too_many_arguments)]
    fn passes(
        &mut self,
        engine: &mut Engine,
        scope: &Scope,
        (wire, crypt): (&WireScope, &mut Option<ScopeCrypt>),
        sd: &ScopeDir,
        check: &FolderCheck,
        folder: &Path,
        mut state: Option<Arc<ScopeState>>,
    ) -> SyncResult<PassReport> {
        let mut last = None;
        for attempt in 0..STALE_RETRIES {
            // After a 409, or a list of changes that lacks a body, the whole manifest is read
            // again, not only what changed.
            let full = attempt > 0;
            let ctx = (wire, &mut *crypt);
            match self.pass(engine, scope, ctx, sd, check, folder, full, state.take()) {
                Err(SyncError::Stale(s)) => last = Some(SyncError::Stale(s)),
                other => return other,
            }
        }
        Err(last.unwrap_or(SyncError::Stale(Vec::new())))
    }

    /// While a rotation is under way and this machine has not moved `wire` to the account key
    /// yet: when the server says the scope is still under the previous key, one complete pass
    /// with that key first, so this machine holds everything the cloud has before the scope is
    /// moved (what is under the previous key is left out once it is, and purged after the
    /// re-upload). Returns the state the next pass starts from (`None`: read it again).
    #[allow(clippy::too_many_arguments)]
    fn pass_under_previous_key(
        &mut self,
        engine: &mut Engine,
        scope: &Scope,
        wire: &WireScope,
        sd: &ScopeDir,
        check: &FolderCheck,
        folder: &Path,
        state: Arc<ScopeState>,
    ) -> SyncResult<Option<Arc<ScopeState>>> {
        let (Some(keys), Some(previous)) = (self.keys.clone(), self.previous.clone()) else {
            return Ok(Some(state));
        };
        let user = self.user()?;
        if ScopeCrypt::open(keys, &user, wire, sd.root())?.marked() {
            return Ok(Some(state));
        }
        let mut old = ScopeCrypt::open(previous.derive(), &user, wire, sd.root())?;
        self.check_on()?;
        let under_previous = match self.client.e2ee_mark(&MarkRequest {
            scope: old.wire().clone(),
            kid: old.kid(),
            only_existing: true,
        }) {
            Ok(r) => r.marked,
            // Moved to the account key already (by another machine), or never marked.
            Err(SyncError::Server {
                code: Some(ProtocolCode::ScopeEncrypted | ProtocolCode::KeysExist),
                ..
            }) => false,
            Err(e) => return Err(e),
        };
        if !under_previous {
            return Ok(Some(state));
        }
        let state = match old.marked() && old.purged() {
            true => Some(state),
            false => {
                reset_for_mark(sd)?;
                old.set_marked()?;
                None
            }
        };
        let mut crypt = Some(old);
        self.passes(engine, scope, (wire, &mut crypt), sd, check, folder, state)?;
        Ok(None)
    }

    /// The encryption of `wire` when this machine holds the account key. A scope this machine
    /// has not synced encrypted yet is marked on the server (so nothing can write plaintext
    /// into it from then on) and its pass state starts over: its base and list name plaintext
    /// ids and revisions. Every note is then matched by content against the encrypted cloud,
    /// as on a first sync; nothing is deleted on either side for lack of a base.
    ///
    /// A scope this machine synced under another account key (the account's key was rotated)
    /// keeps its base: each note as last synced is the same text under any key, so an edit
    /// made here since merges against it and uploads under the new key, never a conflict. Only
    /// the list and revisions start over ([`ScopeState::rekeyed`]).
    fn e2ee_scope(&mut self, wire: &WireScope, sd: &ScopeDir) -> SyncResult<Option<ScopeCrypt>> {
        let Some(keys) = self.keys.clone() else {
            return Ok(None);
        };
        let user = self.user()?;
        if !self.e2ee {
            return Err(SyncError::E2ee {
                code: memoria_store::error::ErrorCode::ServerError,
                message: format!(
                    "the sync server at {} does not keep end-to-end encrypted notes: update it (memoria-sync) before syncing from this machine, whose notes are encrypted",
                    self.server
                ),
            });
        }
        let mut crypt = ScopeCrypt::open(keys, &user, wire, sd.root())?;
        if !crypt.marked() {
            let kid = crypt.kid();
            self.check_on()?;
            self.client.e2ee_mark(&MarkRequest {
                scope: crypt.wire().clone(),
                kid: kid.clone(),
                only_existing: false,
            })?;
            if crypt.wire() != wire {
                // The project's plaintext scope, if it was ever synced, is marked too, so no
                // client without the key writes into it again; so is its name under a
                // rotation's previous key, whose envelopes are then purged.
                for other in std::iter::once(wire.clone()).chain(self.previous_wire(wire)) {
                    self.client.e2ee_mark(&MarkRequest {
                        scope: other,
                        kid: kid.clone(),
                        only_existing: true,
                    })?;
                }
            }
            match crypt.marked_under_another_key() {
                true => reset_for_new_key(sd)?,
                false => reset_for_mark(sd)?,
            }
            crypt.set_marked()?;
        }
        Ok(Some(crypt))
    }

    /// After a complete encrypted pass, the scope's plaintext is removed from the server:
    /// every note of this machine is in the cloud encrypted by then.
    fn purge_plaintext(&mut self, wire: &WireScope, crypt: &mut ScopeCrypt) -> SyncResult<()> {
        self.check_on()?;
        self.client.e2ee_purge(&PurgeRequest {
            scope: crypt.wire().clone(),
        })?;
        if crypt.wire() != wire {
            for other in std::iter::once(wire.clone()).chain(self.previous_wire(wire)) {
                match self.client.e2ee_purge(&PurgeRequest { scope: other }) {
                    // Never marked: it was never written.
                    Err(SyncError::Server {
                        code: Some(ProtocolCode::ScopeNotEncrypted),
                        ..
                    }) => {}
                    other => {
                        other?;
                    }
                }
            }
        }
        crypt.set_purged()?;
        if self.previous.is_some() {
            // The server ends the rotation once no scope holds anything under the previous
            // key; this machine then forgets that key.
            let rotating = self
                .client
                .e2ee_keys()?
                .is_some_and(|k| k.previous.is_some());
            if !rotating {
                super::e2ee::forget_previous_key(&self.home, &self.server)?;
                self.previous = None;
            }
        }
        Ok(())
    }

    /// After a refusal saying a scope is not encrypted while this machine holds the key: when
    /// the account is turning encryption off (or has), this machine goes along. `Ok(true)`
    /// when it learnt something.
    ///
    /// Only a machine holding the account key can turn encryption off: the server's word
    /// counts only with that machine's proof, checked here with the key, so a server cannot
    /// get plaintext out of this machine by saying encryption is off. Keys that are simply
    /// gone, without this machine having seen that proof, change nothing.
    fn follow_off(&mut self) -> SyncResult<bool> {
        let Some(key) = self.account.clone() else {
            return Ok(false);
        };
        let turning_off = Settings::load(&self.dir)?.e2ee_turning_off;
        self.check_on()?;
        let unproven = || {
            SyncError::E2ee {
            code: memoria_store::error::ErrorCode::ServerError,
            message: "the sync server says this account's notes are no longer end-to-end encrypted, without proof from a machine holding the account key: nothing is sent in plaintext; if you turned encryption off, do it again from an unlocked machine".into(),
        }
        };
        let resp = self.client.e2ee_keys_response()?;
        let proven = |p: &Option<String>| {
            p.as_deref()
                .is_some_and(|p| super::e2ee::check_off_proof(p, &key))
        };
        match resp.keys {
            None if turning_off || proven(&resp.ended) => {
                self.end_encryption()?;
                Ok(true)
            }
            None => Err(unproven()),
            Some(k) => match k.off {
                Some(proof) if super::e2ee::check_off_proof(&proof, &key) => {
                    if turning_off {
                        return Ok(false);
                    }
                    Settings::update(&self.dir, |s| s.e2ee_turning_off = true)?;
                    Ok(true)
                }
                Some(_) => Err(unproven()),
                None => Ok(false),
            },
        }
    }

    /// The account's notes are no longer encrypted: this machine forgets the account key (and
    /// a rotation's previous key), and every scope syncs in plaintext from now on.
    fn end_encryption(&mut self) -> SyncResult<()> {
        super::e2ee::forget_key(&self.home, &self.server)?;
        super::e2ee::forget_previous_key(&self.home, &self.server)?;
        Settings::update(&self.dir, |s| {
            s.e2ee_turning_off = false;
            s.e2ee_ended = true;
        })?;
        self.set_account_key(None);
        self.previous = None;
        Ok(())
    }

    /// A scope going back to plaintext while encryption is turned off. Unless this machine
    /// did it before: one last complete encrypted pass (this machine then holds what the cloud
    /// has; skipped when another machine unmarked the scope already), the scope unmarked (its
    /// envelopes are then left out of every request), its pass state started over. Then a
    /// plaintext pass, which uploads every note again in plaintext, and only after it has
    /// completed the envelopes are purged. The server removes the account's keys once no scope
    /// is marked or holds envelopes; this machine then forgets the key.
    #[allow(clippy::too_many_arguments)]
    fn pass_to_plaintext(
        &mut self,
        engine: &mut Engine,
        scope: &Scope,
        wire: &WireScope,
        sd: &ScopeDir,
        check: &FolderCheck,
        folder: &Path,
        state: Arc<ScopeState>,
    ) -> SyncResult<PassReport> {
        use super::e2ee::{Plain, plain_state, set_plain};
        let user = self.user()?;
        let keys = self
            .keys
            .clone()
            .expect("a key to read the encrypted scope with");
        let encrypted = memoria_shared::e2ee::opaque_scope(&keys, wire);
        let names: Vec<WireScope> = std::iter::once(encrypted.clone())
            .chain((&encrypted != wire).then(|| wire.clone()))
            .collect();
        let (plain, _) = plain_state(sd.root())?;
        let mut state = Some(state);
        if plain == Plain::No {
            let mut crypt = ScopeCrypt::open(keys.clone(), &user, wire, sd.root())?;
            let kid = crypt.kid();
            let last = match crypt.marked() {
                true => state.take().filter(|_| crypt.purged()),
                false => {
                    reset_for_mark(sd)?;
                    crypt.set_marked()?;
                    None
                }
            };
            let mut crypt = Some(crypt);
            match self.passes(engine, scope, (wire, &mut crypt), sd, check, folder, last) {
                Ok(_)
                | Err(SyncError::Server {
                    code: Some(ProtocolCode::ScopeNotEncrypted),
                    ..
                }) => {}
                Err(e) => return Err(e),
            }
            drop(crypt);
            for name in &names {
                self.check_on()?;
                let unmark = UnmarkRequest {
                    scope: name.clone(),
                    kid: kid.clone(),
                };
                match self.client.e2ee_unmark(&unmark) {
                    // The server did not hear the request yet (the process that made it here
                    // ended first): it is made again, with this machine's proof.
                    Err(SyncError::Server {
                        code: Some(ProtocolCode::ScopeEncrypted),
                        ..
                    }) => {
                        let account = self.account.clone().expect("held with the keys");
                        self.client.e2ee_off(&OffRequest {
                            kid: kid.clone(),
                            proof: super::e2ee::off_proof(&account)?,
                        })?;
                        self.client.e2ee_unmark(&unmark)?;
                    }
                    other => {
                        other?;
                    }
                }
            }
            reset_for_mark(sd)?;
            set_plain(sd.root(), Plain::Unpurged)?;
            state = None;
        }
        let report = self.passes(engine, scope, (wire, &mut None), sd, check, folder, state)?;
        if plain != Plain::Done {
            for name in names {
                self.check_on()?;
                match self.client.e2ee_purge(&PurgeRequest { scope: name }) {
                    // Never marked: it was never written.
                    Ok(_)
                    | Err(SyncError::Server {
                        code: Some(ProtocolCode::ScopeNotEncrypted),
                        ..
                    }) => {}
                    Err(e) => return Err(e),
                }
            }
            set_plain(sd.root(), Plain::Done)?;
            if self.client.e2ee_keys()?.is_none() {
                self.end_encryption()?;
            }
        }
        Ok(report)
    }

    /// A syncer without the account key whose scope this machine synced encrypted: when the key
    /// store holds the key now (kept by another process since this syncer was made: `sync
    /// unlock`, `sync encrypt`), it is taken up, so the scope goes on encrypted with its base,
    /// never taken for one going back to plaintext ([`Self::back_to_plaintext`]).
    fn take_up_kept_key(&mut self, sd: &ScopeDir) -> SyncResult<()> {
        use super::e2ee::{Plain, plain_state};
        let (plain, marked) = plain_state(sd.root())?;
        if marked && plain != Plain::Done {
            self.load_keys()?;
        }
        Ok(())
    }

    /// A scope this machine synced encrypted, now that the account's notes are not: its pass
    /// state starts over (its base names the envelopes' revisions), once. Whether it did.
    fn back_to_plaintext(&self, sd: &ScopeDir) -> SyncResult<bool> {
        use super::e2ee::{Plain, plain_state, set_plain};
        let (plain, marked) = plain_state(sd.root())?;
        if !marked || plain == Plain::Done {
            return Ok(false);
        }
        reset_for_mark(sd)?;
        set_plain(sd.root(), Plain::Done)?;
        Ok(true)
    }

    /// A project scope's name on the wire under the previous key of a rotation under way.
    fn previous_wire(&self, wire: &WireScope) -> Option<WireScope> {
        let previous = self.previous.as_ref()?;
        let old = memoria_shared::e2ee::opaque_scope(&previous.derive(), wire);
        (&old != wire).then_some(old)
    }

    /// A snapshot, through the scope's encryption when it has one: bodies that fail its checks
    /// come back refused, beside the reply. `learn` tells the encryption the note ids the
    /// reply may name by their opaque ids; a reply that names no note (nothing new) needs none.
    fn snapshot_via(
        &self,
        crypt: &mut Option<ScopeCrypt>,
        req: SnapshotRequest,
        learn: impl FnOnce(&mut ScopeCrypt),
    ) -> SyncResult<(SnapshotResponse, Vec<Refused>)> {
        match crypt {
            None => Ok((self.client.snapshot(&req)?, Vec::new())),
            Some(c) => {
                let sealed = c.snapshot_request(&req);
                let resp = self.client.e2ee_snapshot(&sealed)?;
                let names_none = resp.notes.is_empty()
                    && resp.bodies.is_empty()
                    && resp.damaged.is_empty()
                    && resp.receipt.as_ref().is_none_or(Vec::is_empty);
                if !(resp.unchanged && names_none) {
                    learn(c);
                }
                c.open_snapshot(resp)
            }
        }
    }

    /// A commit, through the scope's encryption when it has one.
    fn commit_via(
        &self,
        crypt: &mut Option<ScopeCrypt>,
        req: CommitRequest,
    ) -> SyncResult<CommitResponse> {
        match crypt {
            None => self.client.commit(&req),
            Some(c) => {
                let sealed = c.seal_commit(&req, self.clock.now_ms().max(0) as u64)?;
                match self.client.e2ee_commit(&sealed) {
                    Ok(resp) => c.open_commit(&req, resp),
                    Err(e) => Err(c.open_error(e)),
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn pass(
        &mut self,
        engine: &mut Engine,
        scope: &Scope,
        (wire, crypt): (&WireScope, &mut Option<ScopeCrypt>),
        sd: &ScopeDir,
        check: &FolderCheck,
        folder: &Path,
        full: bool,
        state: Option<Arc<ScopeState>>,
    ) -> SyncResult<PassReport> {
        let mut report = PassReport {
            scope: scope.key(),
            ..PassReport::default()
        };
        let include_secrets = Settings::load(&self.dir)?.include_secrets;
        // As `check_folder` read it, for the first attempt; shared with the process's copy of
        // the file until the pass has something to change in it.
        let shared = match state {
            Some(s) => s,
            None => sd.shared_state()?,
        };
        let state = &*shared;
        // Fingerprints first, reads after: an edit in between is seen by the next pass. One
        // walk of the folder serves the index's rescan and the pass.
        let files = scan::list_for_scan(folder)?;
        let walk = local::walk_of(&files);
        let cache = LocalCache::load(sd.root());
        // Nothing changed here since a pass that left nothing to do: unless the server moved
        // on too, there is nothing to read.
        let quiet = !full
            && !check.replaced
            && state.pending.is_none()
            && cache.is_clean(&walk, state.manifest_version.as_deref());
        let since = match (self.delta, full, &state.pending) {
            (true, false, None) => state.generation,
            _ => None,
        };
        let mut read = None;
        if !quiet {
            read = Some(self.read_scope(engine, scope, (&files, &walk), &cache, &mut report)?);
        }
        let conflicts: BTreeMap<String, Conflict> = sd
            .conflicts()?
            .into_iter()
            .map(|c| (c.id.clone(), c))
            .collect();

        // The hashes whose bodies the server need not send. Against a full list: every body
        // this machine holds. Against the changes since `since`: those of its own uploads
        // since then and of its local edits, the only ones it can hold among them.
        let local_hashes: BTreeMap<&str, &str> = match &read {
            Some((local, _)) => local
                .iter()
                .map(|(id, l)| (id.as_str(), l.hash.as_str()))
                .collect(),
            None => cache
                .files
                .values()
                .map(|c| (c.id.as_str(), c.hash.as_str()))
                .collect(),
        };
        let mut have: BTreeSet<String> = match since {
            None => state
                .base
                .iter()
                .filter(|(id, e)| sd.has_body(id, &e.hash))
                .map(|(_, e)| e.hash.as_str())
                .chain(local_hashes.values().copied())
                .map(str::to_owned)
                .collect(),
            Some(_) => {
                let seen: HashMap<&str, &str> = state
                    .remote
                    .iter()
                    .map(|e| (e.id.as_str(), e.revision.as_str()))
                    .collect();
                let uploaded = state
                    .base
                    .iter()
                    .filter(|(id, e)| seen.get(id.as_str()) != Some(&e.revision.as_str()))
                    .map(|(_, e)| e.hash.as_str());
                let edited = local_hashes
                    .iter()
                    .filter(|(id, h)| state.base.get(**id).is_none_or(|e| e.hash != **h))
                    .map(|(_, h)| *h);
                uploaded.chain(edited).map(str::to_owned).collect()
            }
        };
        // The ids a reply may name by their opaque ids: this machine's notes and its base.
        let learn = |c: &mut ScopeCrypt| {
            c.learn(
                local_hashes
                    .keys()
                    .copied()
                    .chain(state.base.keys().map(String::as_str)),
            )
        };

        self.check_on()?;
        let pending = state.pending.clone();
        let (mut resp, mut refused_bodies) = self.snapshot_via(
            crypt,
            SnapshotRequest {
                scope: wire.clone(),
                have: hashes(&have),
                // A pending commit needs the manifest read, not a cheap poll.
                known_manifest: match pending {
                    Some(_) => None,
                    None => state.manifest_version.clone(),
                },
                receipt: pending.as_ref().map(|p| p.commit_id.clone()),
                since,
                kid: None,
            },
            learn,
        )?;
        drop(local_hashes);
        if quiet && resp.unchanged {
            report.unchanged = true;
            return Ok(report);
        }
        let mut state = Arc::unwrap_or_clone(shared);
        let (mut local, refused) = match read {
            Some(r) => r,
            None => self.read_scope(engine, scope, (&files, &walk), &cache, &mut report)?,
        };
        if let Some(p) = pending {
            // Applied: its notes' bases are what it sent. Not applied (or forgotten): the
            // bases stay, and the merge below decides as if it had never been sent.
            for a in resp.receipt.iter().flatten() {
                match p.changes.get(a.id.as_str()) {
                    Some(Some(hash)) => {
                        state.base.insert(
                            a.id.as_str().to_owned(),
                            BaseEntry {
                                revision: a.revision.clone(),
                                hash: hash.clone(),
                            },
                        );
                    }
                    Some(None) => {
                        state.base.remove(a.id.as_str());
                    }
                    None => {}
                }
            }
            state.pending = None;
            sd.save_state(&state)?;
        }
        let quotas: Quotas = resp.quotas;
        // Bodies the server sent, by hash; bodies it left out are this machine's own (its
        // base, or its local note).
        let mut texts: HashMap<String, String> = HashMap::new();
        // Notes of the reply that failed verification, with the reason: never written, and
        // the pass is not recorded complete, so the next one asks for them again.
        let mut corrupt: BTreeMap<String, String> = BTreeMap::new();
        refuse(std::mem::take(&mut refused_bodies), &mut have, &mut corrupt);
        let mut delta = false;
        // The state's own list when the reply is that it is unchanged: put back if the pass
        // does not complete. Its version and generation go with it, so a state saved mid-pass
        // never pairs an empty list with a generation (a later delta on top of nothing would
        // read every note as gone from the cloud).
        let (remote, manifest_version, generation) = if resp.unchanged {
            report.unchanged = true;
            (
                std::mem::take(&mut state.remote),
                state.manifest_version.take(),
                state.generation.take(),
            )
        } else {
            loop {
                let page: HashMap<&str, &ManifestEntry> =
                    resp.notes.iter().map(|e| (e.id.as_str(), e)).collect();
                let before = have.len();
                for b in std::mem::take(&mut resp.bodies) {
                    // Not asked for again on the next page, whatever it holds.
                    have.insert(b.hash.as_str().to_owned());
                    match check_body(&b, page.get(b.id.as_str()).copied()) {
                        Ok(()) => {
                            texts.insert(b.hash.as_str().to_owned(), b.body);
                        }
                        Err(why) => {
                            corrupt.insert(b.id.as_str().to_owned(), why);
                        }
                    }
                }
                for d in &resp.damaged {
                    corrupt.insert(
                        d.id.as_str().to_owned(),
                        format!(
                            "the server's stored copy (revision {}) is damaged; a new version saved on a machine that holds the note replaces it",
                            d.revision
                        ),
                    );
                    if let Some(h) = page.get(d.id.as_str()).and_then(|e| e.hash.as_ref()) {
                        have.insert(h.as_str().to_owned());
                    }
                }
                if !resp.more {
                    break;
                }
                if have.len() == before {
                    return Err(SyncError::BadReply(
                        "the snapshot said more notes follow, but its page brought none".into(),
                    ));
                }
                self.check_on()?;
                let (next, refused) = self.snapshot_via(
                    crypt,
                    SnapshotRequest {
                        scope: wire.clone(),
                        have: hashes(&have),
                        known_manifest: None,
                        receipt: None,
                        since,
                        kid: None,
                    },
                    |_| {},
                )?;
                resp = next;
                refuse(refused, &mut have, &mut corrupt);
            }
            let notes = if resp.delta {
                // The entries changed since `since`, on top of the manifest as it was then.
                let mut all: BTreeMap<String, ManifestEntry> = state
                    .remote
                    .iter()
                    .map(|e| (e.id.as_str().to_owned(), e.clone()))
                    .collect();
                for e in resp.notes {
                    all.insert(e.id.as_str().to_owned(), e);
                }
                all.into_values().collect()
            } else {
                resp.notes
            };
            delta = resp.delta;
            (notes, resp.manifest_version, resp.generation)
        };
        let remote_map: BTreeMap<&str, &ManifestEntry> =
            remote.iter().map(|e| (e.id.as_str(), e)).collect();
        if state.rekeyed {
            // A note the cloud does not list under the new key is not uploaded there yet (the
            // machine moving the scope may still be at it): this machine's copy goes up, as on
            // a first sync, and is never taken as deleted.
            state
                .base
                .retain(|id, _| remote_map.contains_key(id.as_str()));
        }

        // A list of changes brings the bodies of those only. A note it did not change whose
        // cloud version this machine never took (held back until now, e.g. a conflict just
        // resolved) needs its body too: the pass starts over with the whole list.
        if delta {
            let lacking = remote_map.iter().any(|(&id, e)| {
                let Some(h) = e.hash.as_ref().filter(|_| !e.deleted) else {
                    return false;
                };
                let b = state.base.get(id);
                !(refused.contains_key(id)
                    || conflicts.contains_key(id)
                    || b.is_some_and(|b| b.revision == e.revision || b.hash == h.as_str())
                    || local.get(id).is_some_and(|l| l.hash == h.as_str())
                    || texts.contains_key(h.as_str())
                    || sd.has_body(id, h.as_str()))
            });
            if lacking {
                return Err(SyncError::Stale(Vec::new()));
            }
        }

        self.guard_deletes(
            sd,
            scope,
            check,
            &state.base,
            &local,
            &refused,
            &conflicts,
            &remote_map,
        )?;

        // The notes not in sync; refused files count too, so each one is reported as held back.
        let ids: Vec<String> = each_id(&state.base, &local, &remote_map, &refused)
            .filter(|n| n.refused || conflicts.contains_key(n.id) || !n.in_sync())
            .map(|n| n.id.to_owned())
            .collect();
        // Those whose base this pass may change: the only ones with base bodies to prune.
        let mut rebased: Vec<String> = Vec::new();
        let mut incomplete = false;
        let mut uploads: Vec<(Change, Option<(String, String)>)> = Vec::new();
        for id in ids {
            if let Some(reason) = refused.get(&id) {
                report.held_back.push((id, reason.clone()));
                continue;
            }
            if conflicts.contains_key(&id) {
                report.held_back.push((id, "conflict".into()));
                continue;
            }
            // As it was before this note's turn: only this turn changes it.
            let base_entry = state.base.get(&id).cloned();
            let b = base_entry.as_ref();
            let rem = remote_map.get(id.as_str()).copied();
            let remote_same = remote_same(b, rem);
            let base_note = b.and_then(|e| {
                report.files_read += 1;
                sd.note(&id, e)
            });
            if b.is_some() && base_note.is_none() {
                // The base body is gone: merge without it (a both-sided change conflicts).
                incomplete = true;
            }
            if let Some(l) = local.get_mut(&id)
                && l.body.is_none()
            {
                report.files_read += 1;
                if let Err(why) = l.load() {
                    report.held_back.push((id, why));
                    continue;
                }
            }
            let loc = local.get(&id);
            let base_hash = b.map(|e| synced_base_hash(e, base_note.as_ref()));
            let local_hash = loc.map(|l| l.hash.clone());
            if remote_same && local_hash == base_hash {
                if let (Some(e), Some((_, text)), Some(hash)) = (b, &base_note, &base_hash)
                    && e.hash != *hash
                {
                    // Recorded in the text form: kept in the sync form from now on, so the
                    // next pass finds it in sync without reading it.
                    sd.put_body(&id, hash, text)?;
                    rebased.push(id.clone());
                    state.base.insert(
                        id.clone(),
                        BaseEntry {
                            revision: e.revision.clone(),
                            hash: hash.clone(),
                        },
                    );
                }
                continue;
            }
            let theirs: Option<(Note, String)> = match rem {
                Some(e) if !e.deleted => {
                    // A body the server left out is one this machine named in `have`: sent
                    // before, its local note, or a base copy (kept by hash until the pass ends,
                    // so also one a receipt has just replaced).
                    let held = e.hash.as_ref().and_then(|h| {
                        let text = texts
                            .get(h.as_str())
                            .cloned()
                            .or_else(|| {
                                loc.filter(|l| l.hash == h.as_str())
                                    .map(|l| l.loaded().0.to_owned())
                            })
                            .or_else(|| {
                                b.filter(|b| b.hash == h.as_str())
                                    .and(base_note.as_ref())
                                    .map(|(_, t)| t.clone())
                            })
                            .or_else(|| {
                                report.files_read += 1;
                                let entry = BaseEntry {
                                    revision: String::new(),
                                    hash: h.as_str().to_owned(),
                                };
                                sd.note(&id, &entry).map(|(_, t)| t)
                            })?;
                        Some((h, text))
                    });
                    match held {
                        Some((h, text)) => match verify_note_file(&e.id, h, &text) {
                            Ok(n) => Some((n, text)),
                            Err(_) => {
                                incomplete = true;
                                continue;
                            }
                        },
                        None => {
                            // A full snapshot leaves out only bodies whose hash was in `have`:
                            // this one had to come with it. (After a cheap poll the body is
                            // one this machine should hold; a full snapshot next time brings it.)
                            if !report.unchanged {
                                corrupt.entry(id.clone()).or_insert_with(|| {
                                    format!(
                                        "the server lists revision {} but sent no body for it",
                                        e.revision
                                    )
                                });
                            }
                            incomplete = true;
                            continue;
                        }
                    }
                }
                _ => None,
            };
            if let Some(l) = loc
                && b.is_some()
                && rem.is_none()
                && local_hash != base_hash
            {
                // Edited here while its tombstone expired on the server: the user decides.
                let c = Conflict {
                    scope: scope.key(),
                    id: id.clone(),
                    reason: ConflictReason::VanishedWhileEdited,
                    found_at_ms: self.clock.now_ms(),
                    cloud_revision: None,
                    cloud: None,
                    local: Some(l.loaded().0.to_owned()),
                    base: base_note.as_ref().map(|(_, t)| t.clone()),
                };
                sd.put_conflict(&c)?;
                report.new_conflicts.push(id.clone());
                report.held_back.push((id, "conflict".into()));
                continue;
            }
            let outcome = merge(
                base_note.as_ref().map(|(n, _)| n),
                loc.map(|l| l.loaded().1),
                theirs.as_ref().map(|(n, _)| n),
                quotas.body_bytes as usize,
            );
            let result = match outcome {
                MergeOutcome::Conflict(kinds) => {
                    let c = Conflict {
                        scope: scope.key(),
                        id: id.clone(),
                        reason: ConflictReason::Merge(kinds),
                        found_at_ms: self.clock.now_ms(),
                        cloud_revision: rem.map(|r| r.revision.clone()),
                        cloud: theirs.as_ref().map(|(_, t)| t.clone()),
                        local: loc.map(|l| l.loaded().0.to_owned()),
                        base: base_note.as_ref().map(|(_, t)| t.clone()),
                    };
                    sd.put_conflict(&c)?;
                    report.new_conflicts.push(id.clone());
                    report.held_back.push((id, "conflict".into()));
                    continue;
                }
                MergeOutcome::Clean(result) => result,
            };
            let result_hash = result.as_ref().map(synced_hash);
            let theirs_hash = theirs.as_ref().map(|(n, _)| synced_hash(n));
            if result_hash == theirs_hash {
                // The cloud's version wins as it is: download when this machine differs.
                if local_hash != result_hash {
                    let new = theirs.as_ref().map(|(n, _)| n);
                    let reason = loc.map(|_| BackupReason::SyncDownload);
                    if !write_local(engine, scope, &id, loc, new, reason)? {
                        incomplete = true;
                        continue;
                    }
                    match (loc, new) {
                        (None, Some(_)) => report.download.added += 1,
                        (Some(_), None) => report.download.deleted += 1,
                        _ => report.download.changed += 1,
                    }
                }
                rebased.push(id.clone());
                match (rem, &theirs) {
                    (Some(r), Some((n, text))) => {
                        let hash = synced_hash(n);
                        sd.put_body(&id, &hash, text)?;
                        state.base.insert(
                            id.clone(),
                            BaseEntry {
                                revision: r.revision.clone(),
                                hash,
                            },
                        );
                    }
                    _ => {
                        state.base.remove(&id);
                    }
                }
                continue;
            }
            // This machine's (or the merged) version goes up.
            if local_hash != result_hash {
                // Both sides changed: back up both versions, then write the merge here.
                if let Some((_, text)) = &theirs {
                    let rel = loc.map_or_else(|| format!("{id}.md"), |l| l.rel.clone());
                    engine.backup_bytes(scope, &id, &rel, text.as_bytes(), BackupReason::Merge)?;
                }
                if !write_local(
                    engine,
                    scope,
                    &id,
                    loc,
                    result.as_ref(),
                    Some(BackupReason::Merge),
                )? {
                    incomplete = true;
                    continue;
                }
                report.merged += 1;
            }
            let base_revision = rem.map(|r| r.revision.clone());
            match &result {
                Some(n) => {
                    if !include_secrets && guard::holds_secret(n) {
                        report.held_back.push((
                            id,
                            format!(
                                "tagged {SECRETS_TAG} or holds text that looks like a credential: kept on this machine, not uploaded (the cloud keeps the version it has, if any)"
                            ),
                        ));
                        continue;
                    }
                    let file = n.serialize();
                    if file.len() > quotas.body_bytes as usize {
                        report.held_back.push((
                            id,
                            format!(
                                "{} bytes, over the server's {} byte limit: split the note",
                                file.len(),
                                quotas.body_bytes
                            ),
                        ));
                        continue;
                    }
                    let hash = ContentHash::of_synced_note(n);
                    uploads.push((
                        Change {
                            id: n.id.clone(),
                            op: ChangeOp::Put,
                            base_revision,
                            body: Some(file.clone()),
                            hash: Some(hash.clone()),
                        },
                        Some((file, hash.as_str().to_owned())),
                    ));
                }
                None => uploads.push((
                    Change {
                        id: NoteId::new(&id).map_err(crate::Error::from)?,
                        op: ChangeOp::Delete,
                        base_revision,
                        body: None,
                        hash: None,
                    },
                    None,
                )),
            }
        }
        // Downloads are in the vault; remember them before uploading (with nothing to upload,
        // the save at the end follows at once).
        if !rebased.is_empty() && !uploads.is_empty() {
            sd.save_state(&state)?;
        }

        // While every commit's generation follows the one before, the manifest after them is
        // the one this pass saw plus its own changes: known without asking again.
        // The entries those commits changed, by id, on top of `remote`.
        let mut chained = generation
            .filter(|_| !uploads.is_empty())
            .map(|g| (g, BTreeMap::<String, ManifestEntry>::new()));
        let mut last_version = None;
        let per_commit = (quotas.changes_per_commit as usize).max(1);
        let commits = uploads.len().div_ceil(per_commit);
        for (n, chunk) in uploads.chunks(per_commit).enumerate() {
            self.check_on()?;
            // Remembered before it is sent: if no reply arrives, the next pass asks for the
            // commit's receipt. The bodies go to the base store first for the same reason.
            let commit_id = crate::fsx::random_hex(16);
            sd.put_bodies(chunk.iter().filter_map(|(change, file)| {
                let (text, hash) = file.as_ref()?;
                Some((change.id.as_str(), hash.as_str(), text.as_str()))
            }))?;
            let sent: BTreeMap<String, Option<String>> = chunk
                .iter()
                .map(|(change, file)| {
                    let hash = file.as_ref().map(|(_, hash)| hash.clone());
                    (change.id.as_str().to_owned(), hash)
                })
                .collect();
            let pending = super::base::PendingCommit {
                commit_id: commit_id.clone(),
                changes: sent,
            };
            sd.save_pending(&pending)?;
            state.pending = Some(pending);
            let resp = self.commit_via(
                crypt,
                CommitRequest {
                    scope: wire.clone(),
                    changes: chunk.iter().map(|(c, _)| c.clone()).collect(),
                    commit_id: Some(commit_id),
                },
            )?;
            state.pending = None;
            for (applied, (change, file)) in resp.applied.iter().zip(chunk) {
                let id = change.id.as_str().to_owned();
                match file {
                    Some((_, hash)) => {
                        state.base.insert(
                            id,
                            BaseEntry {
                                revision: applied.revision.clone(),
                                hash: hash.clone(),
                            },
                        );
                    }
                    None => {
                        state.base.remove(&id);
                    }
                }
            }
            chained =
                chained
                    .filter(|(g, _)| resp.generation == Some(g + 1))
                    .map(|(g, mut notes)| {
                        for (applied, (change, file)) in resp.applied.iter().zip(chunk) {
                            let prior = remote_map.get(applied.id.as_str());
                            let entry = ManifestEntry {
                                id: applied.id.clone(),
                                revision: applied.revision.clone(),
                                hash: change.hash.clone(),
                                size: file.as_ref().map(|(text, _)| text.len() as u64),
                                deleted: file.is_none(),
                                created_at: prior.map_or(0, |p| p.created_at),
                                updated_at: prior.map_or(0, |p| p.updated_at),
                            };
                            notes.insert(applied.id.as_str().to_owned(), entry);
                        }
                        (g + 1, notes)
                    });
            last_version = Some(resp.manifest_version.clone());
            report.uploaded += chunk.len();
            // Others may have committed too: the next pass asks what changed since the
            // manifest last seen whole (this commit included).
            state.manifest_version = None;
            // After the last commit, the save below records the same and more.
            if n + 1 < commits {
                sd.save_state(&state)?;
            }
        }
        let (manifest_version, generation, known) = match (uploads.is_empty(), &chained) {
            (true, _) => (manifest_version, generation, true),
            (false, Some((g, _))) => (last_version, Some(*g), true),
            (false, None) => (None, None, false),
        };
        let complete = known && !incomplete && corrupt.is_empty();
        if complete {
            state.rekeyed = false;
            let mut remote = remote;
            if let Some((_, changed)) = chained {
                patch_manifest(&mut remote, changed);
            }
            state.manifest_version = manifest_version;
            state.remote = remote;
            state.generation = generation;
        } else {
            state.manifest_version = None;
            if report.unchanged {
                state.remote = remote;
                state.generation = generation;
            }
        }
        // The folder as found is the scope's folder from now on; what waited is done.
        state.folder = Some(check.ident.clone());
        let state = sd.save_state_owned(state)?;
        sd.clear_pending()?;
        if since.is_none() {
            // A pass over the whole list also sweeps what an interrupted pass left.
            sd.prune_bodies(&state)?;
        } else {
            // Only the notes this pass synced can have bodies no entry points at.
            let sent = uploads.iter().map(|(c, _)| c.id.as_str());
            sd.prune_bodies_of(&state, rebased.iter().map(String::as_str).chain(sent));
        }
        // What this pass read, for the next one; and whether it left nothing to do.
        let now = local::now_ns();
        let files: BTreeMap<String, local::CachedFile> = local
            .into_values()
            .filter_map(|l| {
                let fp = l.fp.filter(|fp| fp.settled(now))?;
                let file = local::CachedFile {
                    fp,
                    id: l.id,
                    hash: l.hash,
                };
                Some((l.rel, file))
            })
            .collect();
        let clean = (complete
            && report.held_back.is_empty()
            && report.download == DownloadCounts::default()
            && report.merged == 0)
            .then(|| state.manifest_version.clone())
            .flatten();
        if cache.files != files || cache.clean != clean {
            LocalCache { clean, files }.save(sd.root())?;
        }
        if !corrupt.is_empty() {
            return Err(SyncError::CorruptReply {
                scope: scope.key(),
                notes: corrupt.into_iter().collect(),
            });
        }
        Ok(report)
    }

    /// Refuses to go on when the pass would delete on evidence it cannot trust: notes of the
    /// last sync missing from a replaced folder, or many deletions at once in either direction
    /// (beyond those the user confirmed). The pass then waits for the user, with nothing sent.
    #[allow(clippy::too_many_arguments)]
    fn guard_deletes(
        &self,
        sd: &ScopeDir,
        scope: &Scope,
        check: &FolderCheck,
        base: &BTreeMap<String, BaseEntry>,
        local: &BTreeMap<String, LocalNote>,
        refused: &BTreeMap<String, String>,
        conflicts: &BTreeMap<String, Conflict>,
        remote: &BTreeMap<&str, &ManifestEntry>,
    ) -> SyncResult<()> {
        let confirmed: BTreeSet<String> = match sd.pending()? {
            Some(p) if p.confirmed => p.local_deletes.into_iter().chain(p.cloud_deletes).collect(),
            _ => BTreeSet::new(),
        };
        let mut local_deletes = Vec::new();
        let mut cloud_deletes = Vec::new();
        for (id, entry) in base {
            if refused.contains_key(id) || conflicts.contains_key(id) || confirmed.contains(id) {
                continue;
            }
            let rem = remote.get(id.as_str());
            match local.get(id) {
                // Gone here, unchanged in the cloud (the same revision, or the same text under
                // another one, as after a move to a new account key): the pass would delete it
                // everywhere.
                None if rem.is_some_and(|r| {
                    !r.deleted
                        && (r.revision == entry.revision
                            || r.hash.as_ref().is_some_and(|h| h.as_str() == entry.hash))
                }) =>
                {
                    local_deletes.push(id.clone())
                }
                // Deleted in the cloud (or its tombstone expired), unchanged here.
                Some(l) if rem.is_none_or(|r| r.deleted) && l.hash == entry.hash => {
                    cloud_deletes.push(id.clone())
                }
                _ => {}
            }
        }
        let synced = base.len();
        let reason = if check.replaced && !local_deletes.is_empty() {
            PendingReason::FolderReplaced
        } else if too_many_deletes(local_deletes.len(), synced)
            || too_many_deletes(cloud_deletes.len(), synced)
        {
            PendingReason::ManyDeletes
        } else {
            return Ok(());
        };
        let p = Pending {
            scope: scope.key(),
            folder: check.ident.path.clone(),
            reason,
            local_deletes,
            cloud_deletes,
            synced,
            found_at_ms: self.clock.now_ms(),
            confirmed: false,
        };
        sd.put_pending(&p)?;
        Err(p.error())
    }
}

/// One change of a batch nobody reviews note by note (a review-queue merge, consolidation),
/// with the version of the note it was planned over: the batch is refused unless this
/// machine's file is still that version.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchChange {
    /// Create or replace the note.
    Put {
        note: Box<Note>,
        /// The sync-form hash of the note the change was planned over; `None`: the note is new.
        planned: Option<String>,
    },
    /// Delete the note.
    Delete {
        id: String,
        /// The sync-form hash of the note the deletion was planned over.
        planned: String,
    },
}

impl BatchChange {
    fn id(&self) -> &str {
        match self {
            BatchChange::Put { note, .. } => note.id.as_str(),
            BatchChange::Delete { id, .. } => id,
        }
    }

    fn planned(&self) -> Option<&str> {
        match self {
            BatchChange::Put { planned, .. } => planned.as_deref(),
            BatchChange::Delete { planned, .. } => Some(planned),
        }
    }
}

impl Syncer {
    /// commitFirst: a batch change goes to the server before it is written here. Every note it
    /// touches must be the version the batch was planned over and fully synced (this machine's
    /// version is its base, no conflict); the commit names those base revisions, so a change
    /// from another device in between — in the cloud, or already downloaded here by a pass —
    /// makes the whole batch refused, and then nothing is written locally. Returns the number
    /// of changes applied.
    pub fn commit_first(
        &mut self,
        engine: &mut Engine,
        scope: &Scope,
        batch: &[BatchChange],
    ) -> SyncResult<usize> {
        let wire = self.admit(scope)?;
        let _pass = ScopeDir::new(&self.dir, &scope.key()).lock_pass()?;
        let sd = ScopeDir::of(engine, scope)?;
        if let (Some(keys), Some(_)) = (self.keys.clone(), &self.previous) {
            let user = self.user()?;
            if !ScopeCrypt::open(keys, &user, &wire, sd.root())?.marked() {
                // Only a complete pass moves a scope to a rotation's new key (it first takes
                // in what is still under the previous one).
                return Err(SyncError::E2ee {
                    code: memoria_store::error::ErrorCode::Busy,
                    message: format!(
                        "{} is being moved to the account's new key: nothing is written until its next sync has done so",
                        scope.key()
                    ),
                });
            }
        }
        let mut crypt = self.e2ee_scope(&wire, &sd)?;
        let mut state = sd.load_state()?;
        let files = scan::list_for_scan(&engine.scope_dir(scope)?)?;
        let walk = local::walk_of(&files);
        let rows = engine.refresh_scope_listed(scope, &files)?;
        let (mut local, mut refused) =
            read_local(rows, &walk, &LocalCache::load(sd.root()), &mut 0)?;
        let include_secrets = Settings::load(&self.dir)?.include_secrets;
        let mut changes = Vec::new();
        for ch in batch {
            let id = ch.id();
            if let Some(l) = local.get_mut(id)
                && l.body.is_none()
                && let Err(why) = l.load()
            {
                local.remove(id);
                refused.insert(id.to_owned(), why);
            }
            if local.get(id).map(|l| l.hash.as_str()) != ch.planned() {
                return Err(SyncError::BatchRefused(format!(
                    "note `{id}` changed since the plan"
                )));
            }
            if let BatchChange::Put { note: n, .. } = ch
                && !include_secrets
                && guard::holds_secret(n)
            {
                return Err(SyncError::BatchRefused(format!(
                    "note `{id}` is tagged {SECRETS_TAG} or holds text that looks like a credential, and such notes are not uploaded"
                )));
            }
            if refused.contains_key(id) || sd.conflict(id)?.is_some() {
                return Err(SyncError::BatchRefused(format!(
                    "note `{id}` is held back by sync"
                )));
            }
            let base = state.base.get(id);
            let base_hash = base.map(|b| synced_base_hash(b, sd.note(id, b).as_ref()));
            if base_hash.as_ref() != local.get(id).map(|l| &l.hash) {
                return Err(SyncError::BatchRefused(format!(
                    "note `{id}` has changes not synced yet"
                )));
            }
            let base_revision = base.map(|b| b.revision.clone()).or_else(|| {
                state
                    .remote
                    .iter()
                    .find(|e| e.id.as_str() == id && e.deleted)
                    .map(|e| e.revision.clone())
            });
            changes.push(match ch {
                BatchChange::Put { note: n, .. } => Change {
                    id: n.id.clone(),
                    op: ChangeOp::Put,
                    base_revision,
                    body: Some(n.serialize()),
                    hash: Some(ContentHash::of_synced_note(n)),
                },
                BatchChange::Delete { id, .. } => Change {
                    id: NoteId::new(id).map_err(crate::Error::from)?,
                    op: ChangeOp::Delete,
                    base_revision,
                    body: None,
                    hash: None,
                },
            });
        }
        self.check_on()?;
        let resp = match self.commit_via(
            &mut crypt,
            CommitRequest {
                scope: wire,
                changes,
                commit_id: None,
            },
        ) {
            Err(SyncError::Stale(stale)) => {
                let ids: Vec<&str> = stale.iter().map(|s| s.id.as_str()).collect();
                return Err(SyncError::BatchRefused(format!(
                    "another device changed {} meanwhile",
                    ids.join(", ")
                )));
            }
            other => other?,
        };
        for (ch, applied) in batch.iter().zip(&resp.applied) {
            let id = ch.id();
            let new = match ch {
                BatchChange::Put { note: n, .. } => Some(&**n),
                BatchChange::Delete { .. } => None,
            };
            // A local edit that raced in stays, and so does this note's base: the next pass
            // sees the batch as the cloud's change and the edit as this machine's, and merges
            // them. Recording the batch as the base would make the edit look like a change on
            // top of the batch and silently undo the batch's change.
            if !write_local(
                engine,
                scope,
                id,
                local.get(id),
                new,
                Some(BackupReason::Merge),
            )? {
                continue;
            }
            match new {
                Some(n) => {
                    let hash = synced_hash(n);
                    sd.put_body(id, &hash, &n.serialize())?;
                    state.base.insert(
                        id.to_owned(),
                        BaseEntry {
                            revision: applied.revision.clone(),
                            hash,
                        },
                    );
                }
                None => {
                    state.base.remove(id);
                }
            }
        }
        state.manifest_version = None;
        sd.save_state(&state)?;
        Ok(resp.applied.len())
    }
}

/// The hash sync compares notes by (the sync form), as stored in the base and sent.
fn synced_hash(note: &Note) -> String {
    ContentHash::of_synced_note(note).as_str().to_owned()
}

/// A base entry's hash in the sync form: recomputed from its body, since an entry recorded
/// before metadata synced holds the text form of the same note, which is no change.
fn synced_base_hash(entry: &BaseEntry, note: Option<&(Note, String)>) -> String {
    note.map_or_else(|| entry.hash.clone(), |(n, _)| synced_hash(n))
}

/// Whether the cloud's entry for a note is still the one of its base (both absent counts).
fn remote_same(base: Option<&BaseEntry>, remote: Option<&ManifestEntry>) -> bool {
    match (base, remote) {
        (Some(e), Some(r)) => e.revision == r.revision && !r.deleted,
        (None, None) => true,
        (None, Some(r)) => r.deleted,
        (Some(_), None) => false,
    }
}

/// What each side of a pass holds for one note id.
struct IdEntries<'a> {
    id: &'a str,
    base: Option<&'a BaseEntry>,
    local: Option<&'a LocalNote>,
    remote: Option<&'a ManifestEntry>,
    refused: bool,
}

impl IdEntries<'_> {
    /// Unchanged here and in the cloud since the last sync: nothing of it is read.
    fn in_sync(&self) -> bool {
        remote_same(self.base, self.remote)
            && self.local.map(|l| &l.hash) == self.base.map(|e| &e.hash)
    }
}

/// Every id of the four maps once, in order, with what each holds for it: one walk of them
/// side by side, where looking every id up in each map costs a search per map.
fn each_id<'a>(
    base: &'a BTreeMap<String, BaseEntry>,
    local: &'a BTreeMap<String, LocalNote>,
    remote: &'a BTreeMap<&str, &ManifestEntry>,
    refused: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = IdEntries<'a>> {
    let mut b = base.iter().peekable();
    let mut l = local.iter().peekable();
    let mut r = remote.iter().peekable();
    let mut f = refused.keys().peekable();
    std::iter::from_fn(move || {
        let id: &'a str = [
            b.peek().map(|&(k, _)| k.as_str()),
            l.peek().map(|&(k, _)| k.as_str()),
            r.peek().map(|&(&k, _)| k),
            f.peek().map(|&k| k.as_str()),
        ]
        .into_iter()
        .flatten()
        .min()?;
        Some(IdEntries {
            id,
            base: b.next_if(|&(k, _)| k == id).map(|(_, e)| e),
            local: l.next_if(|&(k, _)| k == id).map(|(_, n)| n),
            remote: r.next_if(|&(&k, _)| k == id).map(|(_, &e)| e),
            refused: f.next_if(|&k| k == id).is_some(),
        })
    })
}

/// `manifest` with the entries of `changed` in place of those of the same ids, and those of
/// new ids added (in id order).
fn patch_manifest(manifest: &mut Vec<ManifestEntry>, mut changed: BTreeMap<String, ManifestEntry>) {
    for e in manifest.iter_mut() {
        if let Some(new) = changed.remove(e.id.as_str()) {
            *e = new;
        }
    }
    if !changed.is_empty() {
        manifest.extend(changed.into_values());
        manifest.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    }
}

/// A scope moving to a new account key: what names the server's copy (the list, its version
/// and generation, a commit in flight) starts over, and the base stays, taken for what it is
/// only where the cloud under the new key lists the note ([`ScopeState::rekeyed`]).
fn reset_for_new_key(sd: &ScopeDir) -> SyncResult<()> {
    let mut state = sd.load_state()?;
    state.remote.clear();
    state.manifest_version = None;
    state.generation = None;
    state.pending = None;
    state.rekeyed = true;
    sd.save_state(&state)?;
    sd.clear_pending()
}

/// A scope's pass state started over as it is marked encrypted under a key: its base and list
/// name ids and revisions of what it was before. Every note is then matched by content, as on
/// a first sync; nothing is deleted on either side for lack of a base.
fn reset_for_mark(sd: &ScopeDir) -> SyncResult<()> {
    let mut state = sd.load_state()?;
    state.base.clear();
    state.remote.clear();
    state.manifest_version = None;
    state.generation = None;
    state.pending = None;
    sd.save_state(&state)?;
    sd.clear_pending()
}

/// Bodies the scope's encryption refused: never asked for again within the pass, and each
/// reported with its reason.
fn refuse(
    refused: Vec<Refused>,
    have: &mut BTreeSet<String>,
    corrupt: &mut BTreeMap<String, String>,
) {
    for r in refused {
        have.insert(r.have);
        corrupt.insert(r.note, r.reason);
    }
}

fn hashes(set: &BTreeSet<String>) -> Vec<ContentHash> {
    set.iter().filter_map(|h| ContentHash::parse(h)).collect()
}

/// Checks a body of a snapshot reply against its own claims and against the entry the same
/// reply lists for its note.
fn check_body(b: &NoteBody, entry: Option<&ManifestEntry>) -> Result<(), String> {
    let listed = entry.is_some_and(|e| {
        !e.deleted && e.revision == b.revision && e.hash.as_ref() == Some(&b.hash)
    });
    if !listed {
        return Err(format!(
            "the server sent a body for revision {}, which its list of notes does not name",
            b.revision
        ));
    }
    verify_note_file(&b.id, &b.hash, &b.body)
        .map(|_| ())
        .map_err(|e| format!("{e}, as the server sent it"))
}

/// The scope's notes, and the ids refused before upload (with the reason). A file whose
/// fingerprint in `walk` is the one `cache` knows is not read: its hash is the cache's.
#[allow(clippy::type_complexity)]
fn read_local(
    rows: Vec<FileRow>,
    walk: &local::Walk,
    cache: &LocalCache,
    files_read: &mut usize,
) -> SyncResult<(BTreeMap<String, LocalNote>, BTreeMap<String, String>)> {
    let mut local = BTreeMap::new();
    let mut refused = BTreeMap::new();
    // By id, then path: the files of one id are next to each other.
    let mut rows = rows.into_iter().peekable();
    while let Some(row) = rows.next() {
        let mut others = Vec::new();
        while let Some(other) = rows.next_if(|r| r.id == row.id) {
            others.push(other.rel_path);
        }
        if !others.is_empty() {
            let files: Vec<&str> = std::iter::once(row.rel_path.as_str())
                .chain(others.iter().map(String::as_str))
                .collect();
            let why = format!(
                "several files claim this id ({}; names differing only in case are one file on macOS and Windows): rename all but one",
                files.join(", ")
            );
            refused.insert(row.id, why);
            continue;
        }
        if let Some(e) = &row.error {
            let why = match row.size == crate::scan::UNREADABLE_SIZE {
                true => unreadable(&row.path, e),
                false => format!("frontmatter error ({e}): fix the file"),
            };
            refused.insert(row.id, why);
            continue;
        }
        let known = cache.hash_of(walk, &row.rel_path, &row.id);
        let mut note = LocalNote {
            fp: walk.get(&row.rel_path).copied(),
            hash: known.unwrap_or_default().to_owned(),
            rel: row.rel_path,
            path: PathBuf::from(row.path),
            id: row.id,
            body: None,
        };
        if known.is_none() {
            *files_read += 1;
            if let Err(why) = note.load() {
                // Absent from this pass would read as deleted: it is held back instead.
                refused.insert(note.id, why);
                continue;
            }
        }
        local.insert(note.id.clone(), note);
    }
    Ok((local, refused))
}

/// A note file's text (a regular file only, as a scan reads it).
fn read_text(path: &Path) -> std::io::Result<String> {
    crate::scan::read_note_bytes(path)
        .and_then(|b| String::from_utf8(b).map_err(std::io::Error::other))
}

fn parse_note(text: &str, rel: &str) -> Result<Note, String> {
    Note::parse(text, FileContext { relative_path: rel })
        .map_err(|_| "the file does not parse: fix it".to_owned())
}

/// Why a note file that cannot be read is held back.
fn unreadable(path: &str, error: &str) -> String {
    format!("{path} {error}; held back (not synced, not deleted) until it can be read")
}

/// Replaces (or removes, or creates) a local note under the scope lock, if the file is still
/// what the pass read; backs the current file up first under `reason`. `false` when the file
/// changed meanwhile (the next pass handles it).
fn write_local(
    engine: &mut Engine,
    scope: &Scope,
    id: &str,
    current: Option<&LocalNote>,
    new: Option<&Note>,
    reason: Option<BackupReason>,
) -> SyncResult<bool> {
    let _lock = engine.lock_scope(scope)?;
    let written = match current {
        Some(l) => engine.swap_note_file(
            scope,
            id,
            &l.rel,
            Some(l.loaded().0.as_bytes()),
            new,
            reason,
        )?,
        None => engine.swap_note_file(scope, id, &format!("{id}.md"), None, new, reason)?,
    };
    Ok(written)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use memoria_shared::FixedClock;

    use super::*;
    use crate::client::{HttpReply, HttpRequest, SendError};
    use crate::vault::OpenOptions;
    use crate::{Token, Transport};

    /// Counts requests; the server is always down.
    #[derive(Debug, Default)]
    struct Down(AtomicUsize);

    impl Transport for Down {
        fn send(&self, _req: &HttpRequest<'_>) -> Result<HttpReply, SendError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(HttpReply {
                status: 503,
                retry_after_s: None,
                body: br#"{"code":"internal","message":"down"}"#.to_vec(),
            })
        }
    }

    #[test]
    fn a_note_file_that_fails_to_read_is_held_back_naming_it() {
        let home = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions {
            home: Some(home.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        for id in ["a", "b"] {
            engine
                .add(crate::vault::NewNote {
                    summary: id.into(),
                    body: "x\n".into(),
                    id: Some(id.into()),
                    scope: Some(crate::vault::ScopeChoice::User),
                    ..Default::default()
                })
                .unwrap();
        }
        // The index saw a regular file; by the time the pass reads it, it cannot be read
        // (here: a dangling link put in its place, as a file evicted in between would be).
        let file = engine.scope_dir(&Scope::User).unwrap().join("a.md");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(home.path().join("gone.md"), &file).unwrap();
        let (local, refused) = read_local(
            engine.index().files("user").unwrap(),
            &local::Walk::new(),
            &LocalCache::default(),
            &mut 0,
        )
        .unwrap();
        assert!(local.contains_key("b"));
        assert!(!local.contains_key("a"));
        let why = &refused["a"];
        assert!(
            why.contains("a.md") && why.contains("cannot be read"),
            "{why}"
        );
        // And a scan lists it with the same reason, read again by every scan.
        engine.refresh_scope(&Scope::User).unwrap();
        let row = engine.index().find("user", "a").unwrap().remove(0);
        assert_eq!(row.size, crate::scan::UNREADABLE_SIZE);
        let (_, refused) = read_local(
            engine.index().files("user").unwrap(),
            &local::Walk::new(),
            &LocalCache::default(),
            &mut 0,
        )
        .unwrap();
        assert!(refused["a"].contains("cannot be read"), "{}", refused["a"]);
    }

    #[test]
    fn a_pause_from_before_the_clock_was_set_back_holds_nothing() {
        let home = tempfile::tempdir().unwrap();
        let now = 1_800_000_000_000;
        let clock = Arc::new(FixedClock::new(now));
        let mut engine = Engine::open(OpenOptions {
            home: Some(home.path().to_path_buf()),
            clock: clock.clone(),
            ..Default::default()
        })
        .unwrap();
        let dir = sync_dir(home.path());
        // A 429 recorded while the clock stood a day ahead.
        Settings::update(&dir, |s| {
            s.enabled = Some(true);
            s.server = Some("http://x".into());
            s.pause(60, now + 86_400_000);
        })
        .unwrap();
        let down = Arc::new(Down::default());
        let client = SyncClient::new(down.clone(), Token::new("t"));
        let mut syncer = Syncer::new(home.path(), "http://x", client, clock.clone());
        let e = syncer.sync_scope(&mut engine, &Scope::User).unwrap_err();
        assert!(!matches!(e, SyncError::RateLimited { .. }), "{e}");
        assert_eq!(
            down.0.load(Ordering::SeqCst),
            1,
            "the pass asked the server"
        );

        // A pause within the longest Retry-After holds, without a request.
        Settings::update(&dir, |s| s.pause(30, now)).unwrap();
        let e = syncer.sync_scope(&mut engine, &Scope::User).unwrap_err();
        assert!(
            matches!(e, SyncError::RateLimited { retry_after_s: 30 }),
            "{e}"
        );
        assert_eq!(down.0.load(Ordering::SeqCst), 1);
        clock.advance(30_000);
        syncer.sync_scope(&mut engine, &Scope::User).unwrap_err();
        assert_eq!(down.0.load(Ordering::SeqCst), 2);
    }

    fn entry(id: &str, revision: &str) -> ManifestEntry {
        ManifestEntry {
            id: memoria_shared::NoteId::new(id).unwrap(),
            revision: revision.into(),
            hash: None,
            size: None,
            deleted: false,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn each_id_walks_every_id_of_the_four_maps_once_with_what_each_holds() {
        let base_entry = |r: &str| BaseEntry {
            revision: r.into(),
            hash: format!("h{r}"),
        };
        let base: BTreeMap<String, BaseEntry> = [("b", "1"), ("d", "2"), ("f", "3")]
            .into_iter()
            .map(|(id, r)| (id.to_owned(), base_entry(r)))
            .collect();
        let local: BTreeMap<String, LocalNote> = ["a", "d", "g"]
            .into_iter()
            .map(|id| {
                let note = LocalNote {
                    rel: format!("{id}.md"),
                    path: PathBuf::from(format!("{id}.md")),
                    id: id.to_owned(),
                    hash: "h2".into(),
                    fp: None,
                    body: None,
                };
                (id.to_owned(), note)
            })
            .collect();
        let manifest = [entry("c", "9"), entry("d", "2"), entry("f", "4")];
        let remote: BTreeMap<&str, &ManifestEntry> =
            manifest.iter().map(|e| (e.id.as_str(), e)).collect();
        let refused: BTreeMap<String, String> = [("e".to_owned(), "why".to_owned())].into();
        let seen: Vec<(String, bool, bool, bool, bool)> = each_id(&base, &local, &remote, &refused)
            .map(|n| {
                (
                    n.id.to_owned(),
                    n.base.is_some(),
                    n.local.is_some(),
                    n.remote.is_some(),
                    n.refused,
                )
            })
            .collect();
        let want = [
            ("a", false, true, false, false),
            ("b", true, false, false, false),
            ("c", false, false, true, false),
            ("d", true, true, true, false),
            ("e", false, false, false, true),
            ("f", true, false, true, false),
            ("g", false, true, false, false),
        ]
        .map(|(id, b, l, r, f)| (id.to_owned(), b, l, r, f));
        assert_eq!(seen, want);
        // Only "d" is the same here, in its base and in the cloud; "e" is on no side (its
        // refusal is reported apart).
        let in_sync: Vec<&str> = each_id(&base, &local, &remote, &refused)
            .filter(|n| n.in_sync())
            .map(|n| n.id)
            .collect();
        assert_eq!(in_sync, ["d", "e"]);
    }

    #[test]
    fn a_patched_manifest_replaces_entries_in_place_and_adds_new_ones_in_order() {
        let mut manifest = vec![entry("b", "1"), entry("d", "1")];
        patch_manifest(&mut manifest, BTreeMap::new());
        assert_eq!(manifest, [entry("b", "1"), entry("d", "1")]);
        let changed = [entry("d", "2"), entry("a", "1"), entry("c", "1")]
            .map(|e| (e.id.as_str().to_owned(), e))
            .into();
        patch_manifest(&mut manifest, changed);
        let want = [("a", "1"), ("b", "1"), ("c", "1"), ("d", "2")].map(|(i, r)| entry(i, r));
        assert_eq!(manifest, want);
    }
}
