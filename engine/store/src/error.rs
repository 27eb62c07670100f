//! The engine's one error type, and the closed set of codes a front end branches on.
//!
//! Every [`Error`] (recall's and sync's failures included, each layer saying its own code
//! through [`LayerError`]) has a stable
//! [`ErrorCode`], a message a person reads without knowing any front end, and optional
//! structured [`Error::detail`] (the limit, the rule that matched, the scope, the path).
//! Messages never name a command or a flag: a front end adds its own hints by code.
//! A disk, index or internal failure always has its own code, never `invalid_input`.

use std::path::PathBuf;

use memoria_shared::IdError;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A failure of a layer above the store (recall, the sync client), carried by [`Error`]: the
/// layer says its code and detail. [`Error::layer`] gives the layer's own error back.
pub trait LayerError: std::error::Error + Send + Sync + 'static {
    /// The stable code of this failure.
    fn code(&self) -> ErrorCode;
    /// Structured facts about it, for front ends.
    fn detail(&self) -> Option<Value> {
        None
    }
    /// The layer's error itself, to look at its kind.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// What kind of failure an error is: stable, serialized in `snake_case`. docs/errors.md says
/// what each means and what a user does about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// No note, backup, conflict or pending confirmation with this id in the visible scopes.
    NotFound,
    /// A note, project or user id breaks the id rules.
    InvalidId,
    /// A value given to Memoria is not acceptable (empty summary, bad tag, unknown scope, …).
    InvalidInput,
    /// A note with this id (or one differing only in case) already exists.
    Exists,
    /// The text looks like it contains a credential; nothing was stored.
    CredentialRefused,
    /// A note derived from other text (a consolidation, a merge, a promoted fact) reads as
    /// instructions to an assistant (the poison gate); nothing was written.
    InstructionRefused,
    /// A body, summary or query is over its size limit, or the server refused a request as
    /// too large.
    TooLarge,
    /// A count limit is reached: notes in a scope, or the server's quota.
    LimitReached,
    /// Another device changed the same notes: the change waits until they are synced and
    /// reviewed.
    Conflict,
    /// A file or a server note changed between reading and writing it; nothing was
    /// overwritten.
    ChangedSince,
    /// A note file's frontmatter does not parse; it is left as it is until fixed by hand.
    BrokenNote,
    /// A file Memoria keeps (project settings, the project registry, backup metadata, sync
    /// state) does not parse.
    DamagedFile,
    /// Project scope was asked for outside a project.
    NoProject,
    /// Domain scope was asked for in a project without a project type.
    NoProjectType,
    /// The folder claims a project id that another folder on this machine holds.
    ProjectClaimed,
    /// A project's `MEMORY` folder is a link that leads outside the project.
    LinkOutsideProject,
    /// The scope is not the current one (another project, or a project folder that is gone).
    ScopeNotVisible,
    /// An agent asked for a note it may not read or change (it holds secrets or does not
    /// parse).
    Quarantined,
    /// The operation deletes or replaces notes and waits for the user's explicit yes.
    ConfirmationRequired,
    /// A scope's folder is missing (moved, an unmounted drive); its sync is paused.
    FolderMissing,
    /// The scope was first synced with another account or server; its sync is paused.
    AccountMismatch,
    /// A re-point found that the server at the new address is not the store the scopes were
    /// synced with: its notes are not the ones last synced, nor later versions of them. No
    /// scope moved.
    NotSameStore,
    /// The sync account was erased on the server.
    AccountErased,
    /// The sync server speaks a newer protocol than this Memoria.
    ProtocolTooNew,
    /// Cloud sync is turned off.
    SyncOff,
    /// No sync server or token, or the server no longer accepts the token.
    NotSignedIn,
    /// Neither a keychain nor the token file could keep or give back the sync token.
    KeychainUnavailable,
    /// The sync server could not be reached, or its reply was lost.
    ServerUnreachable,
    /// The sync server failed or answered something the protocol does not allow.
    ServerError,
    /// Notes the sync server sent fail verification (a body that does not match its content
    /// hash or its id, a listed note whose body is missing), or the server reports its stored
    /// copy of a note damaged. Nothing unverified was written; the next pass asks again.
    CorruptReply,
    /// The notes are end-to-end encrypted and this machine does not hold the account key:
    /// nothing of the scope is sent or received until it is unlocked.
    E2eeLocked,
    /// The passphrase or recovery key does not open the account key; nothing was written.
    WrongPassphrase,
    /// The sync server asks to slow down.
    RateLimited,
    /// Automatic capture of conversations is turned off on this machine.
    CaptureOff,
    /// An environment variable or setting holds a value Memoria cannot use.
    Config,
    /// Another process holds the search index's writer; try again in a moment.
    Busy,
    /// The embedding model could not be loaded or run, or the configured chat model could
    /// not draft a merge.
    Model,
    /// A file-system or operating-system operation failed.
    Io,
    /// The SQLite index or the search index failed; both are derived from the notes and can
    /// be rebuilt.
    Index,
    /// A bug in Memoria.
    Internal,
}

impl ErrorCode {
    /// Every code, in documentation order.
    pub const ALL: [ErrorCode; 40] = [
        ErrorCode::NotFound,
        ErrorCode::InvalidId,
        ErrorCode::InvalidInput,
        ErrorCode::Exists,
        ErrorCode::CredentialRefused,
        ErrorCode::InstructionRefused,
        ErrorCode::TooLarge,
        ErrorCode::LimitReached,
        ErrorCode::Conflict,
        ErrorCode::ChangedSince,
        ErrorCode::BrokenNote,
        ErrorCode::DamagedFile,
        ErrorCode::NoProject,
        ErrorCode::NoProjectType,
        ErrorCode::ProjectClaimed,
        ErrorCode::LinkOutsideProject,
        ErrorCode::ScopeNotVisible,
        ErrorCode::Quarantined,
        ErrorCode::ConfirmationRequired,
        ErrorCode::FolderMissing,
        ErrorCode::AccountMismatch,
        ErrorCode::NotSameStore,
        ErrorCode::AccountErased,
        ErrorCode::ProtocolTooNew,
        ErrorCode::SyncOff,
        ErrorCode::NotSignedIn,
        ErrorCode::KeychainUnavailable,
        ErrorCode::ServerUnreachable,
        ErrorCode::ServerError,
        ErrorCode::CorruptReply,
        ErrorCode::E2eeLocked,
        ErrorCode::WrongPassphrase,
        ErrorCode::RateLimited,
        ErrorCode::CaptureOff,
        ErrorCode::Config,
        ErrorCode::Busy,
        ErrorCode::Model,
        ErrorCode::Io,
        ErrorCode::Index,
        ErrorCode::Internal,
    ];

    /// The code as serialized, e.g. `not_found`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "not_found",
            ErrorCode::InvalidId => "invalid_id",
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::Exists => "exists",
            ErrorCode::CredentialRefused => "credential_refused",
            ErrorCode::InstructionRefused => "instruction_refused",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::LimitReached => "limit_reached",
            ErrorCode::Conflict => "conflict",
            ErrorCode::ChangedSince => "changed_since",
            ErrorCode::BrokenNote => "broken_note",
            ErrorCode::DamagedFile => "damaged_file",
            ErrorCode::NoProject => "no_project",
            ErrorCode::NoProjectType => "no_project_type",
            ErrorCode::ProjectClaimed => "project_claimed",
            ErrorCode::LinkOutsideProject => "link_outside_project",
            ErrorCode::ScopeNotVisible => "scope_not_visible",
            ErrorCode::Quarantined => "quarantined",
            ErrorCode::ConfirmationRequired => "confirmation_required",
            ErrorCode::FolderMissing => "folder_missing",
            ErrorCode::AccountMismatch => "account_mismatch",
            ErrorCode::NotSameStore => "not_same_store",
            ErrorCode::AccountErased => "account_erased",
            ErrorCode::ProtocolTooNew => "protocol_too_new",
            ErrorCode::SyncOff => "sync_off",
            ErrorCode::NotSignedIn => "not_signed_in",
            ErrorCode::KeychainUnavailable => "keychain_unavailable",
            ErrorCode::ServerUnreachable => "server_unreachable",
            ErrorCode::ServerError => "server_error",
            ErrorCode::CorruptReply => "corrupt_reply",
            ErrorCode::E2eeLocked => "e2ee_locked",
            ErrorCode::WrongPassphrase => "wrong_passphrase",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::CaptureOff => "capture_off",
            ErrorCode::Config => "config",
            ErrorCode::Busy => "busy",
            ErrorCode::Model => "model",
            ErrorCode::Io => "io",
            ErrorCode::Index => "index",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error as a front end shows or sends it: `{"code", "message", "detail"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// Structured facts for a front end (the limit, the rule, the scope, the path); absent
    /// when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An id that breaks the id rules.
    #[error(transparent)]
    InvalidId(#[from] IdError),
    /// No visible note has this id.
    #[error("note `{0}` not found in the visible scopes")]
    NotFound(String),
    /// A note with this id already exists in the scope.
    #[error("note `{0}` already exists in this scope: pick another id, or change that note")]
    Exists(String),
    /// A file whose name differs only in case already exists.
    #[error(
        "id `{id}` collides with `{existing}` (they differ only in case, which macOS and Windows treat as one file): pick another id"
    )]
    CaseCollision { id: String, existing: String },
    /// A body over the size limit.
    #[error(
        "note body is {size} bytes; the limit is {}: split it into several notes",
        byte_limit(*limit)
    )]
    BodyTooLarge { size: usize, limit: usize },
    /// A one-line text (a summary, a query) over its length limit.
    #[error("the {field} is {len} {unit}; the limit is {limit}: {fix}")]
    TooLong {
        field: &'static str,
        len: usize,
        limit: usize,
        unit: &'static str,
        fix: &'static str,
    },
    /// The scope holds the maximum number of notes.
    #[error(
        "scope {scope} already holds {limit} notes, the limit: forget or merge notes before adding more"
    )]
    ScopeFull { scope: String, limit: usize },
    /// Project scope was asked for outside a project.
    #[error("no Memoria project here: this folder is not inside a Memoria project")]
    NoProject,
    /// A project's `MEMORY` is a link that leads out of the project folder.
    #[error(
        "{link} is a link to {target}, outside the project folder: a project's notes must live inside it, so another folder's notes stay private to it; replace the link with a folder"
    )]
    LinkOutsideProject { link: PathBuf, target: PathBuf },
    /// A folder claims a project id that another folder on this machine holds.
    #[error(
        "{dir} claims project {id}, which on this machine belongs to {registered}; nothing was read. If it is another checkout of that project (a git worktree, a clone, a moved folder), confirm the pairing: it then keeps its own notes in its own MEMORY folder. Otherwise give it its own id: delete {dir}/.memoria/project.json and make it a project again"
    )]
    ProjectClaimed {
        id: String,
        dir: PathBuf,
        registered: PathBuf,
    },
    /// Domain scope needs a project with a projectType.
    #[error(
        "domain notes belong to a project type, and this project has none: set \"projectType\" in .memoria/project.json"
    )]
    NoProjectType,
    /// A scope other than the current ones.
    #[error("{reason}")]
    ScopeNotVisible { scope: String, reason: String },
    /// Text that looks like a credential.
    #[error(
        "refused: the {field} looks like it contains a secret (rule `{rule}`, line {line}); store where the secret lives instead of the secret itself"
    )]
    Secret {
        field: &'static str,
        rule: &'static str,
        line: usize,
    },
    /// A derived note whose text reads as instructions to an assistant.
    #[error(
        "refused: the {field} of `{id}` reads as instructions to an assistant (poison gate, detector `{detector}`); nothing was written"
    )]
    InstructionRefused {
        id: String,
        field: &'static str,
        detector: &'static str,
    },
    /// A note agents may not read, change or forget.
    #[error(
        "note `{id}` is quarantined, holds secrets or does not parse: agents cannot read, change or forget it; ask the user"
    )]
    Quarantined { id: String },
    /// A note whose file has a broken frontmatter cannot be rewritten until fixed.
    #[error(
        "note `{id}` in {path} has a frontmatter error ({reason}); fix the file by hand first, nothing was changed"
    )]
    Broken {
        id: String,
        path: PathBuf,
        reason: String,
    },
    /// A file Memoria keeps (not a note) does not parse.
    #[error("{} is damaged ({reason}): {fix}", path.display())]
    Damaged {
        path: PathBuf,
        reason: String,
        fix: &'static str,
    },
    /// A file changed between reading it and replacing it (an editor saved it meanwhile).
    #[error(
        "{path} changed while Memoria was writing it (another program saved it meanwhile): nothing was overwritten; look at the file and try again"
    )]
    ChangedMeanwhile { path: PathBuf },
    /// A destructive operation asked for without the user's explicit yes.
    #[error("{0}")]
    ConfirmationRequired(String),
    /// No backup with this id.
    #[error("backup `{0}` not found")]
    BackupNotFound(String),
    /// No quarantine of a provider's memory with this id.
    #[error("no quarantine `{0}` (the history lists every quarantine there is)")]
    QuarantineNotFound(String),
    /// No finding with this id in the review (it may have been resolved).
    #[error("no finding `{0}` in the review of the visible notes (it may be resolved already)")]
    FindingNotFound(String),
    /// A note of a merge plan changed (or went) after the plan was made.
    #[error(
        "note `{id}` changed since the merge was planned: nothing was merged; plan the merge again to see the current versions"
    )]
    MergeSourceChanged { id: String },
    /// The notes of a merge plan named by its id changed (or went) since it was made.
    #[error(
        "the notes of merge {plan} changed since it was planned: nothing was merged; plan the merge again to see the current versions"
    )]
    MergePlanChanged { plan: String },
    /// An agent's conversation was sent to be captured while automatic capture is off.
    #[error(
        "conversation capture is turned off on this machine (the setting `conversations.capture`): nothing was kept"
    )]
    CaptureOff,
    /// A merge draft from a model was asked for and none is configured.
    #[error(
        "no model is configured for merge drafts: set `model.url` to an OpenAI-compatible endpoint, or use the manual draft"
    )]
    NoModelConfigured,
    /// The configured chat model failed or answered something unusable.
    #[error("the model at {url} failed: {reason}")]
    ModelEndpoint { url: String, reason: String },
    /// A value the user passed is not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// An environment variable or setting that Memoria cannot use.
    #[error("{0}")]
    Config(String),
    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The operating system refused something that is not one file (a thread, a file watch).
    #[error("cannot {op}: {reason}")]
    System { op: String, reason: String },
    /// The SQLite index failed.
    #[error("index database error: {0} (the index is derived from the notes and can be rebuilt)")]
    Index(#[from] rusqlite::Error),
    /// Recall (the search index, the embedding model) failed.
    #[error("search: {0}")]
    Recall(Box<dyn LayerError>),
    /// A bug in Memoria: a state the code rules out.
    #[error("internal error: {0}")]
    Internal(String),
    /// A sync operation failed.
    #[error("{0}")]
    Sync(Box<dyn LayerError>),
}

impl Error {
    pub fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { op, path, source }
    }

    /// The error of the layer `T` this error carries, if it is one.
    pub fn layer<T: LayerError>(&self) -> Option<&T> {
        match self {
            Error::Recall(e) | Error::Sync(e) => e.as_any().downcast_ref(),
            _ => None,
        }
    }

    /// The stable code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidId(_) => ErrorCode::InvalidId,
            Error::NotFound(_)
            | Error::BackupNotFound(_)
            | Error::FindingNotFound(_)
            | Error::QuarantineNotFound(_) => ErrorCode::NotFound,
            Error::MergeSourceChanged { .. } | Error::MergePlanChanged { .. } => {
                ErrorCode::ChangedSince
            }
            Error::NoModelConfigured => ErrorCode::Config,
            Error::CaptureOff => ErrorCode::CaptureOff,
            Error::ModelEndpoint { .. } => ErrorCode::Model,
            Error::Exists(_) | Error::CaseCollision { .. } => ErrorCode::Exists,
            Error::BodyTooLarge { .. } | Error::TooLong { .. } => ErrorCode::TooLarge,
            Error::ScopeFull { .. } => ErrorCode::LimitReached,
            Error::NoProject => ErrorCode::NoProject,
            Error::LinkOutsideProject { .. } => ErrorCode::LinkOutsideProject,
            Error::ProjectClaimed { .. } => ErrorCode::ProjectClaimed,
            Error::NoProjectType => ErrorCode::NoProjectType,
            Error::ScopeNotVisible { .. } => ErrorCode::ScopeNotVisible,
            Error::Secret { .. } => ErrorCode::CredentialRefused,
            Error::InstructionRefused { .. } => ErrorCode::InstructionRefused,
            Error::Quarantined { .. } => ErrorCode::Quarantined,
            Error::Broken { .. } => ErrorCode::BrokenNote,
            Error::Damaged { .. } => ErrorCode::DamagedFile,
            Error::ChangedMeanwhile { .. } => ErrorCode::ChangedSince,
            Error::ConfirmationRequired(_) => ErrorCode::ConfirmationRequired,
            Error::Invalid(_) => ErrorCode::InvalidInput,
            Error::Config(_) => ErrorCode::Config,
            Error::Io { .. } | Error::System { .. } => ErrorCode::Io,
            Error::Index(_) => ErrorCode::Index,
            Error::Recall(e) | Error::Sync(e) => e.code(),
            Error::Internal(_) => ErrorCode::Internal,
        }
    }

    /// Structured facts about this error, for front ends that show or act on them.
    pub fn detail(&self) -> Option<Value> {
        Some(match self {
            Error::NotFound(id) | Error::Exists(id) => json!({ "id": id }),
            Error::BackupNotFound(id) => json!({ "backup": id }),
            Error::FindingNotFound(id) => json!({ "finding": id }),
            Error::QuarantineNotFound(id) => json!({ "quarantine": id }),
            Error::MergeSourceChanged { id } => json!({ "id": id }),
            Error::MergePlanChanged { plan } => json!({ "plan": plan }),
            Error::NoModelConfigured => json!({ "setting": "model.url" }),
            Error::CaptureOff => json!({ "setting": "conversations.capture" }),
            Error::ModelEndpoint { url, .. } => json!({ "url": url }),
            Error::CaseCollision { id, existing } => json!({ "id": id, "existing": existing }),
            Error::BodyTooLarge { size, limit } => {
                json!({ "field": "body", "size": size, "limit": limit, "unit": "bytes" })
            }
            Error::TooLong {
                field,
                len,
                limit,
                unit,
                ..
            } => json!({ "field": field, "size": len, "limit": limit, "unit": unit }),
            Error::ScopeFull { scope, limit } => json!({ "scope": scope, "limit": limit }),
            Error::LinkOutsideProject { link, target } => {
                json!({ "path": link, "target": target })
            }
            Error::ProjectClaimed {
                id,
                dir,
                registered,
            } => json!({ "project": id, "path": dir, "registered": registered }),
            Error::ScopeNotVisible { scope, .. } => json!({ "scope": scope }),
            Error::Secret { field, rule, line } => {
                json!({ "field": field, "rule": rule, "line": line })
            }
            Error::InstructionRefused {
                id,
                field,
                detector,
            } => json!({ "id": id, "field": field, "detector": detector }),
            Error::Quarantined { id } => json!({ "id": id }),
            Error::Broken { id, path, reason } => {
                json!({ "id": id, "path": path, "reason": reason })
            }
            Error::Damaged { path, .. } | Error::ChangedMeanwhile { path } => {
                json!({ "path": path })
            }
            Error::Io { op, path, .. } => json!({ "op": op, "path": path }),
            Error::System { op, .. } => json!({ "op": op }),
            Error::Recall(e) | Error::Sync(e) => return e.detail(),
            _ => return None,
        })
    }

    /// The error as a front end sends it.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            code: self.code(),
            message: self.to_string(),
            detail: self.detail(),
        }
    }
}

impl From<&Error> for ErrorBody {
    fn from(e: &Error) -> ErrorBody {
        e.body()
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A limit in bytes as a person reads it: with its KiB when it is a whole number of them.
fn byte_limit(limit: usize) -> String {
    if limit >= 1024 && limit.is_multiple_of(1024) {
        format!("{limit} bytes ({} KiB)", limit / 1024)
    } else {
        format!("{limit} bytes")
    }
}
