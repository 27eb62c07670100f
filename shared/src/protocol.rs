//! The sync protocol's wire types: every request and response body the sync server and its
//! clients exchange, as serde DTOs. `docs/PROTOCOL.md` ("Sync protocol") describes them in prose.
//!
//! This module owns only shapes and their validation. It never does I/O; the server decides what
//! to do with them, and it never merges.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::hash::ContentHash;
use crate::id::{IdError, NoteId};
use crate::note::{FileContext, Note};

/// Version of the request and response shapes below. A client that sees a higher major version
/// from `GET /v1/memory/identity` must stop syncing and ask its user to update. Version 2: the
/// `hash` of snapshots and commits is the sync form of the content hash, which covers the
/// metadata that syncs (a version-1 client could not check those hashes).
pub const PROTOCOL_VERSION: u32 = 2;

/// Optional capabilities a server announces in `features` of `GET /v1/memory/identity`. An
/// addition a version-2 client can ignore is a feature, not a new version: old clients keep
/// working, and a client uses a feature only when the server names it.
pub const FEATURES: &[&str] = &[FEATURE_MANIFEST_DELTA, FEATURE_E2EE];

/// `since` in a snapshot request: the server lists only the entries changed after that
/// manifest generation (`delta: true`), when it can tell them.
pub const FEATURE_MANIFEST_DELTA: &str = "manifest-delta";

/// End-to-end encrypted scopes: the account's wrapped keys, the scope mark, the encrypted
/// snapshot and commit, and the purge of a scope's plaintext (`docs/PROTOCOL.md`).
pub const FEATURE_E2EE: &str = "e2ee";

/// Response header that carries the server's quotas on every response, as
/// `notes=5000, changes=500, body=131072, response=16777216, tombstone-days=90`.
pub const QUOTAS_HEADER: &str = "memoria-quotas";

/// A project id: the same character rules as a note id (lowercase `[a-z0-9._-]`, no `..`), so it
/// is safe as a path segment in every store.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProjectId(String);

impl ProjectId {
    /// Validates `s` as a project id.
    pub fn new(s: &str) -> Result<Self, IdError> {
        NoteId::new(s).map(|id| Self(id.as_str().to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which set of notes a request is about. Every scope belongs to the token's user; there is no
/// way to name another user's scope.
///
/// On the wire: `"user"` or `"project:<project-id>"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Scope {
    /// The user's own notes (`users/<uid>/memory/`).
    #[default]
    User,
    /// One project's notes (`users/<uid>/projects/<pid>/memory/`).
    Project(ProjectId),
}

/// Why a scope string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    /// Neither `user` nor `project:<id>`.
    #[error("unknown scope {0:?}: use \"user\" or \"project:<project-id>\"")]
    Unknown(String),
    /// `project:` followed by an invalid project id.
    #[error("invalid project id in scope: {0}")]
    ProjectId(IdError),
}

impl Scope {
    pub fn parse(s: &str) -> Result<Self, ScopeError> {
        if s == "user" {
            return Ok(Scope::User);
        }
        match s.strip_prefix("project:") {
            Some(pid) => ProjectId::new(pid)
                .map(Scope::Project)
                .map_err(ScopeError::ProjectId),
            None => Err(ScopeError::Unknown(s.to_owned())),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::User => f.write_str("user"),
            Scope::Project(pid) => write!(f, "project:{pid}"),
        }
    }
}

impl Serialize for Scope {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Scope::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The server's limits. The server owns them and announces them in every response; clients keep
/// no copy of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Quotas {
    /// Live (not deleted) notes per scope. A commit that would end above it *and* above the
    /// scope's current count is refused; shrinking is always allowed.
    pub live_notes_per_scope: u32,
    /// Changes in one commit.
    pub changes_per_commit: u32,
    /// Bytes of one note file (frontmatter + body).
    pub body_bytes: u32,
    /// Bytes of note bodies in one snapshot response (the snapshot pages beyond it).
    pub response_body_bytes: u32,
    /// Days a tombstone stays in the manifest before it is dropped.
    pub tombstone_days: u32,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            live_notes_per_scope: 5_000,
            changes_per_commit: 500,
            body_bytes: 128 * 1024,
            response_body_bytes: 16 * 1024 * 1024,
            tombstone_days: 90,
        }
    }
}

impl Quotas {
    /// The value of the [`QUOTAS_HEADER`] response header.
    pub fn header_value(&self) -> String {
        format!(
            "notes={}, changes={}, body={}, response={}, tombstone-days={}",
            self.live_notes_per_scope,
            self.changes_per_commit,
            self.body_bytes,
            self.response_body_bytes,
            self.tombstone_days
        )
    }
}

/// The server's bounds on what an account stores, announced beside [`Quotas`] as
/// `storageQuotas` (a separate object: clients that predate it refuse unknown keys inside
/// `quotas`, and ignore unknown keys beside it). Absent from servers that predate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageQuotas {
    /// Tombstones per scope: beyond it the oldest are dropped, as if expired.
    pub tombstones_per_scope: u32,
    /// Scopes (the user scope and each project) per account. A commit to a new scope beyond it
    /// is refused.
    pub scopes_per_account: u32,
    /// Bytes of live note files per account, all scopes together. A commit that would leave
    /// the account above it *and* above what it had is refused.
    pub bytes_per_account: u64,
}

impl Default for StorageQuotas {
    fn default() -> Self {
        StorageQuotas {
            tombstones_per_scope: 5_000,
            scopes_per_account: 100,
            bytes_per_account: 1 << 30,
        }
    }
}

impl StorageQuotas {
    /// What these quotas add to the [`QUOTAS_HEADER`] response header.
    pub fn header_value(&self) -> String {
        format!(
            "tombstones={}, scopes={}, account-bytes={}",
            self.tombstones_per_scope, self.scopes_per_account, self.bytes_per_account
        )
    }
}

/// `GET /v1/memory/identity` → 200.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityResponse {
    /// The user id the server verified from the token.
    pub user_id: String,
    pub protocol_version: u32,
    pub quotas: Quotas,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_quotas: Option<StorageQuotas>,
    /// The [`FEATURES`] this server supports; absent from servers that predate them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
}

impl IdentityResponse {
    /// Whether the server announced `feature`.
    pub fn supports(&self, feature: &str) -> bool {
        self.features.iter().any(|f| f == feature)
    }
}

/// One note's current state in a scope's manifest: live, or a tombstone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestEntry {
    pub id: NoteId,
    /// The server-assigned revision id of the note's current state (live or deleted). A commit
    /// names it as `baseRevision`.
    pub revision: String,
    /// Content hash of the live revision; `None` for a tombstone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<ContentHash>,
    /// Bytes of the live revision's note file; `None` for a tombstone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// True for a tombstone.
    #[serde(default)]
    pub deleted: bool,
    /// Server time (ms since the epoch) the note was first created in this scope.
    pub created_at: i64,
    /// Server time (ms) of the last change: the last put, or the delete for a tombstone.
    pub updated_at: i64,
}

/// `POST /v1/memory/snapshot` request.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SnapshotRequest {
    pub scope: Scope,
    /// Content hashes whose bodies the client already holds; the server neither reads nor
    /// returns those bodies. Each must be a content hash (64 lowercase hex characters): checked
    /// as it is read, so a request cannot hold longer strings in memory.
    #[serde(default, deserialize_with = "content_hashes")]
    pub have: Vec<ContentHash>,
    /// The `manifestVersion` of the client's last snapshot. When it is still current the
    /// response is `unchanged: true` with no entries and no bodies: a cheap poll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_manifest: Option<String>,
    /// The `commitId` of a commit whose reply never arrived: the response's `receipt` says
    /// whether the server applied it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    /// The `generation` of the client's last complete snapshot (feature `manifest-delta`):
    /// when the manifest moved on, the response lists only the entries changed since, with
    /// `delta: true`, if the server can tell them; otherwise every entry, as without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// The account key id an encrypted snapshot (`/v1/memory/e2ee/snapshot`) reads with:
    /// a scope marked under another key answers 409 `scope_encrypted` instead of a list that
    /// key cannot read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
}

/// A note body in a snapshot response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteBody {
    pub id: NoteId,
    pub revision: String,
    pub hash: ContentHash,
    /// The whole note file (frontmatter + body), as committed.
    pub body: String,
}

/// `POST /v1/memory/snapshot` → 200.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotResponse {
    pub protocol_version: u32,
    pub quotas: Quotas,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_quotas: Option<StorageQuotas>,
    /// Opaque version of the manifest this response describes; `None` when the scope has never
    /// been written. Send it back as `knownManifest` to poll cheaply.
    pub manifest_version: Option<String>,
    /// True when `knownManifest` was current: `notes` and `bodies` are then empty.
    pub unchanged: bool,
    /// Every live note and unexpired tombstone, sorted by id.
    pub notes: Vec<ManifestEntry>,
    /// Bodies of live notes whose hash was not in `have`, sorted by id, up to
    /// `quotas.responseBodyBytes` (at least one body per response).
    pub bodies: Vec<NoteBody>,
    /// True when bodies were left out to stay under the limit: ask again with the received
    /// hashes added to `have`.
    pub more: bool,
    /// For a request's `receipt`: the commit's `applied` when the server applied it and still
    /// remembers it, else absent (not applied, or too long ago).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Vec<Applied>>,
    /// Live notes whose stored revision no longer matches its manifest entry (bit rot, an
    /// edit in the store by hand): the server does not send their bodies, and says so here.
    /// A new revision of the note replaces the damaged one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub damaged: Vec<DamagedNote>,
    /// The manifest's generation (it grows with every commit), to send back as `since`;
    /// absent in an `unchanged` answer and from servers without `manifest-delta`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// True when `notes` lists only the entries changed after the request's `since` (live
    /// notes and tombstones); the client keeps its copy of the others.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub delta: bool,
}

/// Why a note file is not the note a change or a manifest entry says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoteFileMismatch {
    /// It does not parse as a note file.
    NotANote(String),
    /// Its frontmatter names another note.
    OtherId(NoteId),
    /// It does not hash to the declared content hash (in either form).
    Hash,
}

impl fmt::Display for NoteFileMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoteFileMismatch::NotANote(e) => write!(f, "the body is not a note file ({e})"),
            NoteFileMismatch::OtherId(id) => write!(f, "the body's frontmatter names note {id}"),
            NoteFileMismatch::Hash => f.write_str("the body does not match its content hash"),
        }
    }
}

/// Checks that `body` is the note file of `id` with content hash `hash` (the sync form, or
/// the text form of older clients), the way the server checks a commit and a client checks
/// what it downloads. Returns the parsed note.
pub fn verify_note_file(
    id: &NoteId,
    hash: &ContentHash,
    body: &str,
) -> Result<Note, NoteFileMismatch> {
    let file = id.file_name();
    let note = Note::parse(
        body,
        FileContext {
            relative_path: &file,
        },
    )
    .map_err(|e| NoteFileMismatch::NotANote(e.to_string()))?;
    if note.id != *id {
        return Err(NoteFileMismatch::OtherId(note.id));
    }
    if !hash.names(&note) {
        return Err(NoteFileMismatch::Hash);
    }
    Ok(note)
}

/// A note the server cannot serve because its stored revision fails verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DamagedNote {
    pub id: NoteId,
    /// The manifest's revision of the note, whose stored file is damaged.
    pub revision: String,
}

/// What a change does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeOp {
    /// Create or replace the note with `body`.
    Put,
    /// Turn the note into a tombstone.
    Delete,
}

/// One change in a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Change {
    pub id: NoteId,
    pub op: ChangeOp,
    /// The revision the client based this change on: the note's current revision in the
    /// manifest (live or tombstone), or `None` when the note is not in the manifest at all.
    #[serde(default)]
    pub base_revision: Option<String>,
    /// The note file for `put` (required), absent for `delete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The content hash of `body` for `put` (required), absent for `delete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<ContentHash>,
}

/// `POST /v1/memory/commit` request: all changes apply, or none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommitRequest {
    pub scope: Scope,
    pub changes: Vec<Change>,
    /// A fresh id the client picks for this commit (1–64 of `[A-Za-z0-9_-]`). The server
    /// remembers the last commits' ids with their `applied`, so a client whose reply was lost
    /// can learn the outcome (`receipt` in a snapshot), and a retry of an applied commit is
    /// answered with its original reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_id: Option<String>,
}

/// Whether `id` is a valid `commitId`.
pub fn valid_commit_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The new state of one changed note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    pub id: NoteId,
    pub revision: String,
}

/// `POST /v1/memory/commit` → 200.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitResponse {
    pub protocol_version: u32,
    pub quotas: Quotas,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_quotas: Option<StorageQuotas>,
    /// The manifest version after this commit.
    pub manifest_version: String,
    /// One entry per change, in request order.
    pub applied: Vec<Applied>,
    /// The manifest's generation after this commit (feature `manifest-delta`); absent when
    /// the reply repeats an earlier one. One more than the generation a client last saw means
    /// the manifest is that one with this commit's changes and nothing else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
}

/// A note whose `baseRevision` was not its current revision (in a 409 `stale` error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StaleNote {
    pub id: NoteId,
    /// The note's current revision, `None` when it is not in the manifest.
    pub current_revision: Option<String>,
}

/// `POST /v1/admin/erase` request (admin key, not a user token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EraseRequest {
    pub user_id: String,
}

/// `POST /v1/admin/erase` → 200.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EraseResponse {
    pub user_id: String,
    /// Objects deleted by this call (0 on a repeated call).
    pub deleted_objects: u64,
}

/// Every error code the server answers with. The HTTP status is part of the contract too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the body is not JSON or a field has the wrong shape; the message names the field.
    BadRequest,
    /// 400: a note id, project id or user id breaks the id rules.
    InvalidId,
    /// 400: a `put` body is not a note file, its id differs from the change's id, or it lacks
    /// `body`/`hash`.
    InvalidNote,
    /// 400: the hash sent with a body is not the body's content hash.
    HashMismatch,
    /// 400: the same note id appears twice in one commit.
    DuplicateChange,
    /// 401: the bearer token is missing, unknown or revoked.
    Unauthorized,
    /// 403: the admin key is missing or wrong.
    Forbidden,
    /// 403: the commit would grow the scope past the live-notes quota.
    QuotaExceeded,
    /// 404: no such route, or a scope that is neither `user` nor `project:<id>`.
    NotFound,
    /// 409: some `baseRevision`s are not current; `stale` lists them.
    Stale,
    /// 409: the `commitId` names an earlier commit with other changes; nothing was changed.
    CommitIdReused,
    /// 408: the request's body did not arrive, or it was not answered, within the server's
    /// request timeout; retry.
    RequestTimeout,
    /// 410: the account was erased; its requests are refused from then on.
    AccountErased,
    /// 413: the request is larger than the server accepts, a body is over `bodyBytes`, or a
    /// commit has more than `changesPerCommit` changes.
    TooLarge,
    /// 429: too many requests from this account; retry after `Retry-After` seconds.
    RateLimited,
    /// 500: the server failed; nothing was changed. Retry later.
    Internal,
    /// 503: the manifest kept changing under this commit; retry.
    Contention,
    /// 409: the scope is end-to-end encrypted: plaintext is neither served nor taken, and an
    /// envelope under another key is refused.
    ScopeEncrypted,
    /// 409: an encrypted request to a scope not marked encrypted: mark it first.
    ScopeNotEncrypted,
    /// 409: the account's wrapped keys exist already (another machine turned encryption on).
    KeysExist,
}

/// The account's two wrapped account-key blobs (`docs/PROTOCOL.md`, "Wrapped account key"),
/// each the exact JSON line; `GET`/`PUT /v1/memory/e2ee/keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct E2eeKeys {
    pub passphrase: String,
    pub recovery: String,
    /// While a rotation re-encrypts the account (`docs/PROTOCOL.md`, "Rotating the account
    /// key"): the previous account key wrapped under this one, so every machine holding this
    /// key also reads what is still under the previous one. Dropped by the server once no
    /// scope holds anything under the previous key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// This account key wrapped under the previous one, so a machine that still holds only
    /// the previous key follows the rotation; absent when the rotation locked it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<String>,
    /// Encryption is being turned off (`POST /v1/memory/e2ee/off`): scopes are unmarked and
    /// go back to plaintext, and the server removes these blobs once none is marked. The
    /// value is the proof a machine holding the account key made (the key wrapped under
    /// itself), which every other machine checks before it sends anything in plaintext: the
    /// server cannot make one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<String>,
}

/// `GET /v1/memory/e2ee/keys` → 200: the blobs, `null` when encryption was never turned on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct E2eeKeysResponse {
    pub keys: Option<E2eeKeys>,
    /// With `keys: null` after encryption was turned off: the proof the machine that asked for
    /// it made (`E2eeKeys::off`), so a machine that did not see the keys while they were
    /// being turned off can still tell it was asked for with the account key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
}

/// `POST /v1/memory/e2ee/mark`: marks `scope` encrypted under key `kid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MarkRequest {
    pub scope: Scope,
    pub kid: String,
    /// Mark the scope only if it was ever written (a plaintext project scope, whose name would
    /// otherwise reach the server just to be marked).
    #[serde(default)]
    pub only_existing: bool,
}

/// `POST /v1/memory/e2ee/mark` → 200.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MarkResponse {
    /// False only for `onlyExisting` on a scope never written (nothing was made).
    pub marked: bool,
}

/// `POST /v1/memory/e2ee/purge`: removes the plaintext a marked scope still holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PurgeRequest {
    pub scope: Scope,
}

/// `POST /v1/memory/e2ee/off`: turning encryption off for the account whose key is `kid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OffRequest {
    pub kid: String,
    /// The account key wrapped under itself (`docs/PROTOCOL.md`, "Turning encryption off").
    pub proof: String,
}

/// `POST /v1/memory/e2ee/unmark`: `scope`, marked under `kid`, goes back to plaintext.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UnmarkRequest {
    pub scope: Scope,
    pub kid: String,
}

/// `POST /v1/memory/e2ee/unmark` → 200.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnmarkResponse {
    /// False when the scope was not marked (never written, or unmarked already).
    pub unmarked: bool,
}

/// `POST /v1/memory/e2ee/purge` → 200.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PurgeResponse {
    /// Manifest entries (live notes and tombstones) of plaintext removed.
    pub removed: u64,
    /// Stored files removed.
    pub deleted_objects: u64,
}

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// For `stale`: the notes whose base revision is not current.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<StaleNote>,
}

/// A list of content hashes, each checked as it is read (see [`SnapshotRequest::have`]): a
/// string is looked at where the parser holds it and copied only once it is a content hash.
/// Most `have` entries a snapshot request may list: more than any scope's note quota, so a
/// client never needs more, and few enough that a request stays small (about 6.7 MB of JSON).
pub const MAX_HAVE: usize = 100_000;

/// Largest snapshot request body a server reads: `MAX_HAVE` hashes and the rest, far below a
/// commit's limit, since a snapshot carries no note bodies.
pub const SNAPSHOT_REQUEST_BYTES: usize = 8 << 20;

fn content_hashes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<ContentHash>, D::Error> {
    struct Hashes;
    impl<'de> serde::de::Visitor<'de> for Hashes {
        type Value = Vec<ContentHash>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of content hashes (64 lowercase hex characters each)")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(CheckedHash(h)) = seq.next_element()? {
                if out.len() == MAX_HAVE {
                    return Err(serde::de::Error::custom(format!(
                        "have: more than {MAX_HAVE} content hashes; a scope never holds that many notes"
                    )));
                }
                out.push(h);
            }
            Ok(out)
        }
    }
    struct CheckedHash(ContentHash);
    impl<'de> Deserialize<'de> for CheckedHash {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct One;
            impl serde::de::Visitor<'_> for One {
                type Value = CheckedHash;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a content hash (64 lowercase hex characters)")
                }
                fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<CheckedHash, E> {
                    ContentHash::parse(s).map(CheckedHash).ok_or_else(|| {
                        E::custom(format!(
                            "have: {:?} is not a content hash (64 lowercase hex characters)",
                            s.chars().take(70).collect::<String>()
                        ))
                    })
                }
            }
            d.deserialize_str(One)
        }
    }
    d.deserialize_seq(Hashes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn have_takes_only_content_hashes() {
        let h = ContentHash::of_parts("x", "s", None, &[], "");
        let ok: SnapshotRequest =
            serde_json::from_str(&format!(r#"{{"scope":"user","have":["{}"]}}"#, h.as_str()))
                .unwrap();
        assert_eq!(ok.have, [h]);
        for bad in [
            r#"["a"]"#,
            r#"[""]"#,
            &format!(r#"["{}"]"#, "A".repeat(64)),
            r#"[1]"#,
        ] {
            let e = serde_json::from_str::<SnapshotRequest>(&format!(
                r#"{{"scope":"user","have":{bad}}}"#
            ))
            .unwrap_err();
            assert!(e.to_string().contains("content hash"), "{bad}: {e}");
        }
    }

    #[test]
    fn scope_round_trips_and_refuses_bad_ids() {
        for s in ["user", "project:abc-1", "project:2024.x"] {
            let scope = Scope::parse(s).unwrap();
            assert_eq!(scope.to_string(), s);
            let json = serde_json::to_string(&scope).unwrap();
            assert_eq!(serde_json::from_str::<Scope>(&json).unwrap(), scope);
        }
        for bad in [
            "",
            "User",
            "project",
            "project:",
            "project:../x",
            "project:A",
            "team:x",
        ] {
            assert!(Scope::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn commit_request_shape() {
        let json = r#"{"scope":"project:p1","changes":[
            {"id":"a","op":"put","baseRevision":null,"body":"x","hash":"00000000000000000000000000000000000000000000000000000000000000ff"},
            {"id":"b","op":"delete","baseRevision":"r1"}]}"#;
        let req: CommitRequest = serde_json::from_str(json).unwrap();
        assert_eq!(req.changes.len(), 2);
        assert_eq!(req.changes[1].op, ChangeOp::Delete);
        assert_eq!(req.changes[1].base_revision.as_deref(), Some("r1"));
        let bad = r#"{"scope":"user","changes":[{"id":"../etc","op":"put"}]}"#;
        let err = serde_json::from_str::<CommitRequest>(bad).unwrap_err();
        assert!(err.to_string().contains("note id"), "{err}");
        let unknown = r#"{"scope":"user","changes":[],"extra":1}"#;
        assert!(serde_json::from_str::<CommitRequest>(unknown).is_err());
    }

    #[test]
    fn storage_quotas_sit_beside_quotas_and_may_be_absent() {
        let q = serde_json::to_value(Quotas::default()).unwrap();
        let json = format!(
            r#"{{"userId":"a","protocolVersion":2,"quotas":{q},"storageQuotas":{{"tombstonesPerScope":7,"scopesPerAccount":3,"bytesPerAccount":9}}}}"#
        );
        let id: IdentityResponse = serde_json::from_str(&json).unwrap();
        assert_eq!(
            id.storage_quotas,
            Some(StorageQuotas {
                tombstones_per_scope: 7,
                scopes_per_account: 3,
                bytes_per_account: 9
            })
        );
        let old = format!(r#"{{"userId":"a","protocolVersion":2,"quotas":{q}}}"#);
        let id: IdentityResponse = serde_json::from_str(&old).unwrap();
        assert_eq!(id.storage_quotas, None);
        assert_eq!(
            StorageQuotas::default().header_value(),
            "tombstones=5000, scopes=100, account-bytes=1073741824"
        );
    }

    #[test]
    fn quotas_defaults_match_the_product() {
        let q = Quotas::default();
        assert_eq!(
            q.header_value(),
            "notes=5000, changes=500, body=131072, response=16777216, tombstone-days=90"
        );
    }
}
