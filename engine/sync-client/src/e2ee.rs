//! End-to-end encrypted sync on the client (feature `e2ee`, `docs/PROTOCOL.md`): the account
//! key kept on this machine, and the translation between the plaintext a pass reconciles and
//! the envelopes the server stores.
//!
//! A pass works on note ids, content hashes and note files exactly as it does for a plaintext
//! scope, so the three-way merge against the base copy is unchanged. [`ScopeCrypt`] stands
//! between it and the server: it turns note ids into opaque ids and content hashes into keyed
//! hashes on the way out, seals every uploaded note, and on the way back opens every body and
//! checks it (the envelope, the key, the binding to this account, scope and note, the note
//! inside, its hash, and its sequence number against the highest one this machine knows). A
//! body that fails any check is refused naming the note and never reaches the pass.
//!
//! The account key lives where the sync token lives ([`super::token`]): the OS keychain when
//! the machine has one, else `$MEMORIA_HOME/sync/credentials.json` (0600), under an entry of
//! its own per server. Per scope, `e2ee.json` beside the scope's base keeps each note's highest
//! sequence number and keyed hash (kept across deletes) and whether the scope was marked and
//! its plaintext purged; `e2ee.log` beside it the notes' versions changed since
//! ([`journal`]), so a pass that changes a few notes does not write every note's again. A
//! process keeps what a pass left of a scope (its notes' versions, the opaque ids and keyed
//! hashes it made) for the next pass, which takes it up while the scope's files still hold
//! exactly what it was built from.

mod journal;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use memoria_shared::e2ee::{
    AccountKey, AccountKeys, KdfParams, KnownVersion, NoteContext, RecoveryKey, UnwrapError,
    WrappedKey, check_rollback, keyed_hash, next_seq, opaque_note_id, opaque_scope, open_note,
    seal_note, seal_serialized,
};
use memoria_shared::protocol::{
    Applied, Change, ChangeOp, CommitRequest, CommitResponse, E2eeKeys, NoteBody,
    Scope as WireScope, SnapshotRequest, SnapshotResponse, StaleNote,
};
use memoria_shared::{ContentHash, NoteId};
use serde::{Deserialize, Serialize};

use super::client::Token;
use super::error::{SyncError, SyncResult};
use super::settings::{ParsedFiles, read_json, write_json};

/// The scopes' `e2ee.json` as this process last read or wrote each: a pass opens its scope's
/// every time, and a poll with nothing new then neither parses nor writes it.
static STATES: ParsedFiles<ScopeFile> = ParsedFiles::new();

/// What the last pass over each scope left, by the path of its `e2ee.json`: taken up by the
/// next pass in this process while the scope's files still hold what it was built from, so a
/// pass copies no note's versions and makes no opaque id or keyed hash made before.
static KEPT: LazyLock<Mutex<HashMap<PathBuf, Kept>>> = LazyLock::new(Mutex::default);

/// A scope's state as a pass left it, equal to what its files hold.
struct Kept {
    /// Whose and which scope, under which key: the ids and hashes are theirs.
    kid: String,
    user: String,
    scope: WireScope,
    /// `e2ee.json` as parsed (the value [`STATES`] holds for its bytes; `None`: no file) and
    /// the journal's text beside it, which `file` is built from.
    base: Option<Arc<ScopeFile>>,
    journal: String,
    file: ScopeFile,
    derived: Derived,
}

/// What a scope's key makes of its ids and hashes, learnt as a pass needs them: the same
/// under the same key, user and scope, whatever the files hold.
#[derive(Default)]
struct Derived {
    /// Opaque id → note id, of the notes learnt so far.
    ids: HashMap<String, String>,
    /// Every note id named to it, learnt or not; sorted, so the ids a pass names (its notes
    /// and its base, each in order) are checked against it in one walk.
    named: BTreeSet<String>,
    /// Note ids whose opaque ids are made only when a reply names an id not learnt yet (a
    /// poll with nothing new makes none).
    unlearnt: Vec<String>,
    /// Keyed hash → content hash, and back.
    to_plain: HashMap<String, String>,
    to_keyed: HashMap<String, String>,
}

impl Derived {
    /// Bounds what is kept of hashes to a few versions a note: older versions' hashes are made
    /// again when a pass names them.
    fn trim(&mut self, notes: usize) {
        if self.to_keyed.len() > 4 * notes + 4096 {
            self.to_plain.clear();
            self.to_keyed.clear();
        }
    }
}

/// The key-store entry of a server's account key, beside its token's.
fn key_entry(server: &str) -> String {
    format!("{}#e2ee-account-key", server.trim_end_matches('/'))
}

/// The key-store entry of the account key a rotation replaces, kept while the rotation is
/// under way: what is still under it is read with it and re-encrypted.
fn previous_entry(server: &str) -> String {
    format!("{}#e2ee-previous-key", server.trim_end_matches('/'))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn load_entry(home_root: &Path, entry: &str) -> SyncResult<Option<AccountKey>> {
    match super::token::find(home_root, entry, None) {
        Ok((t, _)) => {
            let text = t.expose();
            let bytes: Option<Vec<u8>> = (text.len() == 64)
                .then(|| {
                    (0..32)
                        .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok())
                        .collect()
                })
                .flatten();
            let bytes: [u8; 32] = bytes.and_then(|b| b.try_into().ok()).ok_or_else(|| {
                SyncError::Internal(
                    "the account key kept on this machine is damaged: unlock again".into(),
                )
            })?;
            Ok(Some(AccountKey::from_bytes(bytes)))
        }
        Err(SyncError::NoToken) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The account key this machine holds for `server`, if any.
pub fn load_key(home_root: &Path, server: &str) -> SyncResult<Option<AccountKey>> {
    load_entry(home_root, &key_entry(server))
}

/// Keeps the account key on this machine; says where.
pub fn store_key(
    home_root: &Path,
    server: &str,
    key: &AccountKey,
) -> SyncResult<super::token::TokenStore> {
    super::token::store(
        home_root,
        &key_entry(server),
        &Token::new(hex(key.as_bytes())),
    )
}

/// Removes the account key from this machine.
pub fn forget_key(home_root: &Path, server: &str) -> SyncResult<()> {
    super::token::forget(home_root, &key_entry(server))
}

/// The previous account key this machine keeps while a rotation is under way, if any (never
/// the account key itself).
pub fn load_previous_key(home_root: &Path, server: &str) -> SyncResult<Option<AccountKey>> {
    let previous = load_entry(home_root, &previous_entry(server))?;
    let current = load_key(home_root, server)?.map(|k| k.derive().key_id().clone());
    Ok(previous.filter(|p| Some(p.derive().key_id()) != current.as_ref()))
}

/// Keeps the previous account key on this machine while a rotation is under way.
pub fn store_previous_key(home_root: &Path, server: &str, key: &AccountKey) -> SyncResult<()> {
    super::token::store(
        home_root,
        &previous_entry(server),
        &Token::new(hex(key.as_bytes())),
    )
    .map(drop)
}

/// Removes the previous account key from this machine (the rotation finished).
pub fn forget_previous_key(home_root: &Path, server: &str) -> SyncResult<()> {
    super::token::forget(home_root, &previous_entry(server))
}

/// The key-store entry of a rotation's new key between its making and the server's answer.
fn next_entry(server: &str) -> String {
    format!("{}#e2ee-next-key", server.trim_end_matches('/'))
}

/// The new key of a rotation this machine began and the server may not have taken yet.
pub fn load_next_key(home_root: &Path, server: &str) -> SyncResult<Option<AccountKey>> {
    load_entry(home_root, &next_entry(server))
}

/// Keeps a rotation's new key before the server is told of it.
pub fn store_next_key(home_root: &Path, server: &str, key: &AccountKey) -> SyncResult<()> {
    super::token::store(
        home_root,
        &next_entry(server),
        &Token::new(hex(key.as_bytes())),
    )
    .map(drop)
}

/// Forgets a rotation's new key once it is the account key here, or was never taken.
pub fn forget_next_key(home_root: &Path, server: &str) -> SyncResult<()> {
    super::token::forget(home_root, &next_entry(server))
}

/// `key` wrapped under the account key `under` (`docs/PROTOCOL.md`, "Rotating the account
/// key"): the recovery blob's form, with `under`'s wrapping key as the recovery key.
pub fn wrap_under(key: &AccountKey, under: &AccountKey) -> SyncResult<String> {
    WrappedKey::with_recovery_key(key, &under.wrapping_key(), &mut rand_core::OsRng)
        .map(|b| b.to_json())
        .map_err(|e| SyncError::Internal(format!("cannot wrap the account key: {e}")))
}

/// The account key in `blob` when `under` wrapped it; `None` when `under` does not open it.
pub fn unwrap_under(blob: &str, under: &AccountKey) -> SyncResult<Option<AccountKey>> {
    let blob = WrappedKey::from_json(blob).map_err(|e| SyncError::E2ee {
        code: memoria_store::error::ErrorCode::ServerError,
        message: format!("the account's key kept on the sync server cannot be read: {e}"),
    })?;
    match blob.unwrap_with_recovery_key(&under.wrapping_key()) {
        Ok(k) => Ok(Some(k)),
        Err(UnwrapError::WrongRecoveryKey) => Ok(None),
        Err(e) => Err(SyncError::E2ee {
            code: memoria_store::error::ErrorCode::ServerError,
            message: format!("the account's key kept on the sync server cannot be read: {e}"),
        }),
    }
}

/// The proof that a machine holding `key` asks for encryption to be turned off: the key
/// wrapped under itself, which nobody without it can make.
pub fn off_proof(key: &AccountKey) -> SyncResult<String> {
    wrap_under(key, key)
}

/// Whether `proof` was made by a machine holding `key` ([`off_proof`]).
pub fn check_off_proof(proof: &str, key: &AccountKey) -> bool {
    unwrap_under(proof, key)
        .ok()
        .flatten()
        .is_some_and(|k| k.as_bytes() == key.as_bytes())
}

/// The key id of the account key the server's blobs wrap.
pub fn blobs_kid(blobs: &E2eeKeys) -> Option<String> {
    WrappedKey::from_json(&blobs.passphrase)
        .ok()
        .and_then(|b| b.key_id())
        .map(|k| k.as_str().to_owned())
}

/// A rotation's blobs: a new account key wrapped under `passphrase` and a new recovery key,
/// the current key `old` wrapped under the new one (`previous`), and, unless `lock_out`, the
/// new key wrapped under `old` (`successor`), which machines holding only `old` unwrap.
pub fn rotation(
    old: &AccountKey,
    passphrase: &str,
    lock_out: bool,
) -> SyncResult<(AccountKey, RecoveryKey, E2eeKeys)> {
    let (key, recovery, mut blobs) = new_account(passphrase)?;
    blobs.previous = Some(wrap_under(old, &key)?);
    blobs.successor = match lock_out {
        true => None,
        false => Some(wrap_under(&key, old)?),
    };
    Ok((key, recovery, blobs))
}

/// The account's blobs with the recovery key's replaced by a new recovery key for `key`.
pub fn new_recovery(key: &AccountKey, blobs: &E2eeKeys) -> SyncResult<(RecoveryKey, E2eeKeys)> {
    let failed = |e: String| SyncError::Internal(format!("cannot make a recovery key: {e}"));
    let recovery =
        RecoveryKey::generate(&mut rand_core::OsRng).map_err(|e| failed(e.to_string()))?;
    let rec = WrappedKey::with_recovery_key(key, &recovery, &mut rand_core::OsRng)
        .map_err(|e| failed(e.to_string()))?;
    Ok((
        recovery,
        E2eeKeys {
            recovery: rec.to_json(),
            ..blobs.clone()
        },
    ))
}

/// What this machine keeps per encrypted scope.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScopeFile {
    /// The scope was marked encrypted under this key, and the pass state reset for it.
    #[serde(default)]
    marked_kid: Option<String>,
    /// Its plaintext was purged from the server.
    #[serde(default)]
    purged: bool,
    /// Encryption was turned off: the scope syncs in plaintext again from this machine (its
    /// pass state started over then), and, once true, the envelopes it held were purged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    off: Option<bool>,
    /// Note id → the highest version this machine accepted or wrote.
    #[serde(default)]
    notes: BTreeMap<String, Known>,
}

/// A line of the scope's journal: one note's versions, as they are from then on.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    id: String,
    #[serde(flatten)]
    known: Known,
}

/// Within a pass the journal is folded into `e2ee.json` once it holds more lines than this or
/// than the scope has notes, whichever is more (a first upload appends a line per note and
/// writes the whole file a few times at most); a pass that opens it with more lines than this
/// folds it first, so a pass replays a few dozen lines, not one per note of an upload.
const FOLD_AT: usize = 64;

/// One note's versions as this machine knows them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Known {
    /// The highest version taken from the cloud or committed from here (0: none), and its
    /// keyed hash: what an incoming version is checked against.
    seq: u64,
    hash: String,
    /// The highest number this machine sealed for the note, committed or not: the next
    /// version is numbered above it.
    #[serde(default)]
    sealed: u64,
}

/// A body refused on its way in: the note it is (its id when this machine knows it, else its
/// opaque id), why, and the token a pass lists in `have` so the server does not send it again
/// within the pass.
#[derive(Debug, Clone)]
pub struct Refused {
    pub note: String,
    pub reason: String,
    pub have: String,
}

/// The translation for one encrypted scope during one pass.
pub struct ScopeCrypt {
    keys: AccountKeys,
    user: String,
    scope: WireScope,
    wire: WireScope,
    path: PathBuf,
    file: ScopeFile,
    /// The changes to `file` since it was last written whole, and the notes changed since the
    /// last append.
    journal: journal::Journal,
    dirty: BTreeSet<String>,
    /// `e2ee.json` as last read or written whole.
    base: Option<Arc<ScopeFile>>,
    /// A write of `file` was begun and did not finish: the files may hold less than `file`.
    unsaved: bool,
    derived: Derived,
    /// Keyed hashes of bodies refused in this pass, listed in `have` as they are.
    refused: HashSet<String>,
    /// The versions of the commit in flight (note id → number, keyed hash), known once it
    /// applied.
    sent: HashMap<String, (u64, String)>,
}

/// A pass's state is kept for the next pass in this process when it is what the files hold.
impl Drop for ScopeCrypt {
    fn drop(&mut self) {
        if self.unsaved || !self.dirty.is_empty() {
            return;
        }
        let kept = Kept {
            kid: self.kid(),
            user: std::mem::take(&mut self.user),
            scope: self.scope.clone(),
            base: self.base.take(),
            journal: self.journal.text().to_owned(),
            file: std::mem::take(&mut self.file),
            derived: std::mem::take(&mut self.derived),
        };
        KEPT.lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(std::mem::take(&mut self.path), kept);
    }
}

impl ScopeCrypt {
    /// The state of `scope` kept in `root` (the scope's sync folder).
    pub fn open(keys: AccountKeys, user: &str, scope: &WireScope, root: &Path) -> SyncResult<Self> {
        let path = root.join("e2ee.json");
        let base = STATES.read(&path)?;
        let (journal, lines, torn) = journal::Journal::open::<Line>(&path)?;
        let kid = keys.key_id().as_str();
        let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner()).remove(&path);
        let (file, derived) = match kept {
            // The files hold what the last pass left: its state as it is.
            Some(k)
                if !torn
                    && k.kid == kid
                    && k.user == user
                    && k.scope == *scope
                    && k.journal == journal.text()
                    && match (&k.base, &base) {
                        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                        (None, None) => true,
                        _ => false,
                    } =>
            {
                let mut derived = k.derived;
                derived.trim(k.file.notes.len());
                (k.file, derived)
            }
            _ => {
                let mut file = base.as_deref().cloned().unwrap_or_default();
                for l in lines {
                    file.notes.insert(l.id, l.known);
                }
                let derived = Derived {
                    named: file.notes.keys().cloned().collect(),
                    unlearnt: file.notes.keys().cloned().collect(),
                    ..Derived::default()
                };
                (file, derived)
            }
        };
        let wire = opaque_scope(&keys, scope);
        let mut me = ScopeCrypt {
            keys,
            user: user.to_owned(),
            scope: scope.clone(),
            wire,
            path,
            file,
            journal,
            dirty: BTreeSet::new(),
            base,
            unsaved: false,
            derived,
            refused: HashSet::new(),
            sent: HashMap::new(),
        };
        if torn || me.journal.len() > FOLD_AT {
            me.save()?;
        }
        Ok(me)
    }

    /// The scope as the server names it (a project's id made opaque).
    pub fn wire(&self) -> &WireScope {
        &self.wire
    }

    /// Whether this machine marked the scope under its key (and reset its pass state then).
    /// The account key's id, as the server's mark names it.
    pub fn kid(&self) -> String {
        self.keys.key_id().as_str().to_owned()
    }

    pub fn marked(&self) -> bool {
        self.file.marked_kid.as_deref() == Some(self.keys.key_id().as_str())
    }

    /// Whether this machine synced the scope encrypted under another account key (one a
    /// rotation replaced), rather than in plaintext.
    pub fn marked_under_another_key(&self) -> bool {
        self.file.off.is_none()
            && self
                .file
                .marked_kid
                .as_ref()
                .is_some_and(|k| *k != self.kid())
    }

    pub fn set_marked(&mut self) -> SyncResult<()> {
        self.file.marked_kid = Some(self.keys.key_id().as_str().to_owned());
        self.file.purged = false;
        self.file.off = None;
        self.save()
    }

    pub fn purged(&self) -> bool {
        self.file.purged
    }

    pub fn set_purged(&mut self) -> SyncResult<()> {
        self.file.purged = true;
        self.save()
    }

    /// Writes the whole state, the journal folded in.
    fn save(&mut self) -> SyncResult<()> {
        self.unsaved = true;
        self.base = Some(STATES.write(&self.path, self.file.clone())?);
        crate::fsx::private_file(&self.path)?;
        self.journal.clear()?;
        self.dirty.clear();
        self.unsaved = false;
        Ok(())
    }

    /// Makes the notes' versions changed since the last call durable: appended to the
    /// journal, or the whole state written once the journal is long.
    fn flush(&mut self) -> SyncResult<()> {
        if self.dirty.is_empty() {
            return Ok(());
        }
        if self.journal.len() + self.dirty.len() > FOLD_AT.max(self.file.notes.len()) {
            return self.save();
        }
        let lines: Vec<Line> = self
            .dirty
            .iter()
            .filter_map(|id| {
                let known = self.file.notes.get(id)?.clone();
                Some(Line {
                    id: id.clone(),
                    known,
                })
            })
            .collect();
        self.unsaved = true;
        self.journal.append(&lines)?;
        self.dirty.clear();
        self.unsaved = false;
        Ok(())
    }

    fn ctx(&self) -> NoteContext<'_> {
        NoteContext {
            user_id: &self.user,
            scope: &self.scope,
        }
    }

    /// Makes the opaque ids of `ids` known when a reply needs them, so entries listed
    /// without a body map back.
    pub fn learn<'b>(&mut self, ids: impl Iterator<Item = &'b str>) {
        let named = &self.derived.named;
        let mut fresh = Vec::new();
        let mut last: Option<&str> = None;
        let from = |id: &'b str| {
            named
                .range::<str, _>((std::ops::Bound::Included(id), std::ops::Bound::Unbounded))
                .peekable()
        };
        let mut at = from("");
        for id in ids {
            if last.is_some_and(|l| id < l) {
                at = from(id);
            }
            while at.next_if(|n| n.as_str() < id).is_some() {}
            if at.peek().map(|n| n.as_str()) != Some(id) {
                fresh.push(id.to_owned());
            }
            last = Some(id);
        }
        for id in fresh {
            if self.derived.named.insert(id.clone()) {
                self.derived.unlearnt.push(id);
            }
        }
    }

    fn learn_all(&mut self) {
        for id in std::mem::take(&mut self.derived.unlearnt) {
            if let Ok(n) = NoteId::new(&id) {
                let opaque = opaque_note_id(&self.keys, &self.scope, &n);
                self.learnt(opaque.as_str(), &id);
            }
        }
    }

    /// Remembers that `opaque` is note `id`.
    fn learnt(&mut self, opaque: &str, id: &str) {
        let d = &mut self.derived;
        d.ids.insert(opaque.to_owned(), id.to_owned());
        if !d.named.contains(id) {
            d.named.insert(id.to_owned());
        }
    }

    /// Remembers that `keyed` is the keyed hash of `plain`.
    fn hashed(&mut self, keyed: &str, plain: &str) {
        let d = &mut self.derived;
        d.to_plain.insert(keyed.to_owned(), plain.to_owned());
        d.to_keyed.insert(plain.to_owned(), keyed.to_owned());
    }

    fn keyed(&mut self, plain: &ContentHash) -> ContentHash {
        if self.refused.contains(plain.as_str()) {
            return plain.clone();
        }
        if let Some(k) = self.derived.to_keyed.get(plain.as_str()) {
            return ContentHash::parse(k).unwrap_or_else(|| plain.clone());
        }
        let k = keyed_hash(&self.keys, &self.scope, plain);
        self.hashed(k.as_str(), plain.as_str());
        k
    }

    fn plain_hash(&self, keyed: &ContentHash) -> ContentHash {
        self.derived
            .to_plain
            .get(keyed.as_str())
            .and_then(|p| ContentHash::parse(p))
            .unwrap_or_else(|| keyed.clone())
    }

    fn plain_id(&mut self, opaque: &NoteId) -> NoteId {
        if !self.derived.ids.contains_key(opaque.as_str()) {
            self.learn_all();
        }
        self.derived
            .ids
            .get(opaque.as_str())
            .and_then(|p| NoteId::new(p).ok())
            .unwrap_or_else(|| opaque.clone())
    }

    fn name(&mut self, opaque: &NoteId) -> String {
        if !self.derived.ids.contains_key(opaque.as_str()) {
            self.learn_all();
        }
        match self.derived.ids.get(opaque.as_str()) {
            Some(id) => id.clone(),
            None => opaque.as_str().to_owned(),
        }
    }

    /// The request as the server sees it: the opaque scope, keyed hashes.
    pub fn snapshot_request(&mut self, req: &SnapshotRequest) -> SnapshotRequest {
        SnapshotRequest {
            scope: self.wire.clone(),
            have: req.have.iter().map(|h| self.keyed(h)).collect(),
            known_manifest: req.known_manifest.clone(),
            receipt: req.receipt.clone(),
            since: req.since,
            kid: Some(self.kid()),
        }
    }

    /// The reply as the pass reads it: every body opened and checked, ids and hashes plain.
    /// Bodies that fail a check are left out and returned with the reason.
    pub fn open_snapshot(
        &mut self,
        mut resp: SnapshotResponse,
    ) -> SyncResult<(SnapshotResponse, Vec<Refused>)> {
        let mut refused = Vec::new();
        let opened_any = !resp.bodies.is_empty();
        let mut bodies = Vec::with_capacity(resp.bodies.len());
        for b in std::mem::take(&mut resp.bodies) {
            let opened = open_note(&self.keys, self.ctx(), &b.id, &b.hash, &b.body)
                .map_err(|e| e.to_string())
                .and_then(|o| {
                    let known = self
                        .file
                        .notes
                        .get(o.id.as_str())
                        .filter(|k| k.seq > 0)
                        .map(|k| KnownVersion {
                            seq: k.seq,
                            hash: ContentHash::parse(&k.hash).unwrap_or_else(|| b.hash.clone()),
                        });
                    check_rollback(known.as_ref(), o.seq, &b.hash)
                        .map(|()| o)
                        .map_err(|e| e.to_string())
                });
            match opened {
                Ok(o) => {
                    self.learnt(b.id.as_str(), o.id.as_str());
                    self.hashed(b.hash.as_str(), o.plain_hash.as_str());
                    let k = self.file.notes.entry(o.id.as_str().to_owned()).or_default();
                    k.seq = o.seq;
                    k.hash = b.hash.as_str().to_owned();
                    self.dirty.insert(o.id.as_str().to_owned());
                    bodies.push(NoteBody {
                        id: o.id,
                        revision: b.revision,
                        hash: o.plain_hash,
                        body: o.text,
                    });
                }
                Err(reason) => {
                    // Listed in `have` as itself, so the server does not send it again.
                    self.refused.insert(b.hash.as_str().to_owned());
                    refused.push(Refused {
                        note: self.name(&b.id),
                        reason: format!("{reason} (the cloud copy was refused)"),
                        have: b.hash.as_str().to_owned(),
                    });
                }
            }
        }
        resp.bodies = bodies;
        let mut notes = std::mem::take(&mut resp.notes);
        for e in &mut notes {
            e.id = self.plain_id(&e.id);
            e.hash = e.hash.as_ref().map(|h| self.plain_hash(h));
        }
        notes.sort_by(|a, b| a.id.cmp(&b.id));
        resp.notes = notes;
        let mut damaged = std::mem::take(&mut resp.damaged);
        for d in &mut damaged {
            d.id = self.plain_id(&d.id);
        }
        resp.damaged = damaged;
        if let Some(mut r) = resp.receipt.take() {
            for a in r.iter_mut() {
                a.id = self.plain_id(&a.id);
            }
            resp.receipt = Some(r);
        }
        if opened_any {
            self.flush()?;
        }
        Ok((resp, refused))
    }

    /// The commit as the server takes it: every put sealed with the next sequence number,
    /// ids opaque. The numbers sealed are kept before the request is sent, so a version sealed
    /// again (the commit retried, its reply lost) is numbered above them; they count as the
    /// note's versions once the commit applied ([`Self::open_commit`]).
    pub fn seal_commit(&mut self, req: &CommitRequest, now_ms: u64) -> SyncResult<CommitRequest> {
        self.sent.clear();
        let mut changes = Vec::with_capacity(req.changes.len());
        for c in &req.changes {
            // The plaintext body stays in `req`: only the envelope is copied out. A put's
            // opaque id comes with its envelope.
            let mut out = Change {
                id: c.id.clone(),
                op: c.op,
                base_revision: c.base_revision.clone(),
                body: None,
                hash: None,
            };
            if c.op == ChangeOp::Put {
                let file = c.body.as_deref().unwrap_or_default();
                let known = self
                    .file
                    .notes
                    .get(c.id.as_str())
                    .map(|k| k.seq.max(k.sealed))
                    .filter(|&n| n > 0);
                let seq = next_seq(known, now_ms);
                let rng = &mut rand_core::OsRng;
                // A pass's put carries the hash of the note it serialized: the file need not
                // be parsed again to seal it.
                let sealed = match &c.hash {
                    Some(h) => seal_serialized(&self.keys, self.ctx(), &c.id, file, h, seq, rng),
                    None => seal_note(&self.keys, self.ctx(), &c.id, file, seq, rng),
                }
                .map_err(|e| SyncError::Internal(e.to_string()))?;
                self.hashed(sealed.hash.as_str(), sealed.plain_hash.as_str());
                self.file
                    .notes
                    .entry(c.id.as_str().to_owned())
                    .or_default()
                    .sealed = seq;
                self.dirty.insert(c.id.as_str().to_owned());
                self.sent.insert(
                    c.id.as_str().to_owned(),
                    (seq, sealed.hash.as_str().to_owned()),
                );
                out.id = sealed.opaque_id;
                out.body = Some(sealed.body);
                out.hash = Some(sealed.hash);
            } else {
                out.id = opaque_note_id(&self.keys, &self.scope, &c.id);
            }
            self.learnt(out.id.as_str(), c.id.as_str());
            changes.push(out);
        }
        self.flush()?;
        Ok(CommitRequest {
            scope: self.wire.clone(),
            changes,
            commit_id: req.commit_id.clone(),
        })
    }

    /// The reply with the notes' own ids (one `applied` per change, in request order); the
    /// versions it committed are this machine's highest from now on.
    pub fn open_commit(
        &mut self,
        req: &CommitRequest,
        mut resp: CommitResponse,
    ) -> SyncResult<CommitResponse> {
        for (id, (seq, hash)) in self.sent.drain() {
            let k = self.file.notes.entry(id.clone()).or_default();
            if seq > k.seq {
                k.seq = seq;
                k.hash = hash;
                self.dirty.insert(id);
            }
        }
        self.flush()?;
        resp.applied = resp
            .applied
            .into_iter()
            .zip(&req.changes)
            .map(|(a, c)| Applied {
                id: c.id.clone(),
                revision: a.revision,
            })
            .collect();
        Ok(resp)
    }

    /// A 409's notes with their own ids.
    pub fn open_error(&mut self, e: SyncError) -> SyncError {
        match e {
            SyncError::Stale(stale) => SyncError::Stale(
                stale
                    .into_iter()
                    .map(|s| StaleNote {
                        id: self.plain_id(&s.id),
                        current_revision: s.current_revision,
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

/// Where a scope is in going back to plaintext, as this machine left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plain {
    /// Synced encrypted from here (or never synced): not switched yet.
    No,
    /// Syncs in plaintext; the envelopes it held may still be on the server.
    Unpurged,
    /// Syncs in plaintext, and the envelopes it held were purged.
    Done,
}

/// What this machine last did with `root`'s scope regarding encryption, without a key.
pub fn plain_state(root: &Path) -> SyncResult<(Plain, bool)> {
    let file: ScopeFile = read_json(&root.join("e2ee.json"))?.unwrap_or_default();
    let plain = match file.off {
        None => Plain::No,
        Some(false) => Plain::Unpurged,
        Some(true) => Plain::Done,
    };
    Ok((plain, file.marked_kid.is_some()))
}

/// Records where `root`'s scope is in going back to plaintext.
pub fn set_plain(root: &Path, plain: Plain) -> SyncResult<()> {
    let path = root.join("e2ee.json");
    let mut file: ScopeFile = read_json(&path)?.unwrap_or_default();
    file.off = match plain {
        Plain::No => None,
        Plain::Unpurged => Some(false),
        Plain::Done => Some(true),
    };
    write_json(&path, &file)?;
    crate::fsx::private_file(&path)?;
    Ok(())
}

/// A new account key, its recovery key, and the two blobs that wrap it (the passphrase one at
/// the default Argon2id costs).
pub fn new_account(passphrase: &str) -> SyncResult<(AccountKey, RecoveryKey, E2eeKeys)> {
    let failed = |e: String| SyncError::Internal(format!("cannot make the account key: {e}"));
    let key = AccountKey::generate(&mut rand_core::OsRng).map_err(|e| failed(e.to_string()))?;
    let recovery =
        RecoveryKey::generate(&mut rand_core::OsRng).map_err(|e| failed(e.to_string()))?;
    let pass =
        WrappedKey::with_passphrase(&key, passphrase, KdfParams::DEFAULT, &mut rand_core::OsRng)
            .map_err(|e| failed(e.to_string()))?;
    let rec = WrappedKey::with_recovery_key(&key, &recovery, &mut rand_core::OsRng)
        .map_err(|e| failed(e.to_string()))?;
    let blobs = E2eeKeys {
        passphrase: pass.to_json(),
        recovery: rec.to_json(),
        previous: None,
        successor: None,
        off: None,
    };
    Ok((key, recovery, blobs))
}

/// The account's blobs with the passphrase's replaced by `key` wrapped under `passphrase`; the
/// recovery key's is kept as it is, so the recovery key still unlocks.
pub fn rewrap_passphrase(
    key: &AccountKey,
    blobs: &E2eeKeys,
    passphrase: &str,
) -> SyncResult<E2eeKeys> {
    let pass =
        WrappedKey::with_passphrase(key, passphrase, KdfParams::DEFAULT, &mut rand_core::OsRng)
            .map_err(|e| SyncError::Internal(format!("cannot wrap the account key: {e}")))?;
    Ok(E2eeKeys {
        passphrase: pass.to_json(),
        ..blobs.clone()
    })
}

/// What unlocks the account key on a machine.
#[derive(Debug, Clone)]
pub enum Secret {
    Passphrase(String),
    /// A recovery key's text.
    RecoveryKey(String),
}

/// The account key out of the server's blobs; a wrong secret is `wrong_passphrase`, a
/// mistyped recovery key `invalid_input`.
pub fn unwrap_account_key(blobs: &E2eeKeys, secret: &Secret) -> SyncResult<AccountKey> {
    let damaged = |e: UnwrapError| SyncError::E2ee {
        code: memoria_store::error::ErrorCode::ServerError,
        message: format!("the account's key kept on the sync server cannot be read: {e}"),
    };
    let wrong = |e: UnwrapError| SyncError::E2ee {
        code: memoria_store::error::ErrorCode::WrongPassphrase,
        message: format!("{e}; nothing was changed on this machine"),
    };
    match secret {
        Secret::Passphrase(p) => {
            let blob = WrappedKey::from_json(&blobs.passphrase).map_err(damaged)?;
            blob.unwrap_with_passphrase(p).map_err(|e| match e {
                UnwrapError::WrongPassphrase => wrong(e),
                other => damaged(other),
            })
        }
        Secret::RecoveryKey(text) => {
            let rk = RecoveryKey::parse(text).map_err(|e| SyncError::E2ee {
                code: memoria_store::error::ErrorCode::InvalidInput,
                message: format!("{e}; nothing was changed on this machine"),
            })?;
            let blob = WrappedKey::from_json(&blobs.recovery).map_err(damaged)?;
            blob.unwrap_with_recovery_key(&rk).map_err(|e| match e {
                UnwrapError::WrongRecoveryKey => wrong(e),
                other => damaged(other),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> AccountKey {
        AccountKey::from_bytes([b; 32])
    }

    #[test]
    fn a_key_wrapped_under_another_opens_with_that_key_only() {
        let (old, new) = (key(1), key(2));
        let blob = wrap_under(&new, &old).unwrap();
        let opened = unwrap_under(&blob, &old)
            .unwrap()
            .expect("the wrapping key opens it");
        assert_eq!(opened.as_bytes(), new.as_bytes());
        assert!(unwrap_under(&blob, &new).unwrap().is_none());
        assert!(unwrap_under(&blob, &key(3)).unwrap().is_none());
        // Not the wrapping key of the recovery blob form's own recovery key either.
        let recovery = RecoveryKey::from_bytes([1; 32]);
        let rec = WrappedKey::with_recovery_key(&new, &recovery, &mut rand_core::OsRng)
            .unwrap()
            .to_json();
        assert!(unwrap_under(&rec, &old).unwrap().is_none());
    }

    #[test]
    fn only_the_account_key_makes_the_proof_that_turns_encryption_off() {
        let k = key(7);
        assert!(check_off_proof(&off_proof(&k).unwrap(), &k));
        assert!(!check_off_proof(&off_proof(&key(8)).unwrap(), &k));
        // A rotation's blobs name the account key but are no proof.
        let (old, new) = (key(7), key(9));
        assert!(!check_off_proof(&wrap_under(&old, &new).unwrap(), &old));
        assert!(!check_off_proof(&wrap_under(&new, &old).unwrap(), &old));
        let (_, _, blobs) = new_account("a long passphrase").unwrap();
        assert!(!check_off_proof(&blobs.recovery, &k));
        assert!(!check_off_proof("not a blob", &k));
    }

    #[test]
    fn a_rotation_wraps_both_ways_unless_it_locks_the_old_key_out() {
        let old = key(4);
        let (new, recovery, blobs) = rotation(&old, "a long passphrase", false).unwrap();
        let back = unwrap_under(blobs.previous.as_deref().unwrap(), &new).unwrap();
        assert_eq!(back.unwrap().as_bytes(), old.as_bytes());
        let ahead = unwrap_under(blobs.successor.as_deref().unwrap(), &old).unwrap();
        assert_eq!(ahead.unwrap().as_bytes(), new.as_bytes());
        let by_recovery =
            unwrap_account_key(&blobs, &Secret::RecoveryKey(recovery.to_text().to_string()))
                .unwrap();
        assert_eq!(by_recovery.as_bytes(), new.as_bytes());
        let (_, _, locked) = rotation(&old, "a long passphrase", true).unwrap();
        assert!(locked.previous.is_some() && locked.successor.is_none());
    }
}
