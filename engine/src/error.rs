//! The engine's one error type. Every message names the problem and the fix.

use std::path::PathBuf;

use memoria_shared::IdError;

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An id that breaks the id rules.
    #[error(transparent)]
    InvalidId(#[from] IdError),
    /// No visible note has this id.
    #[error("note `{0}` not found in the visible scopes: list notes with `memoria list`")]
    NotFound(String),
    /// A note with this id already exists in the scope.
    #[error(
        "note `{0}` already exists in this scope: pick another --id or edit it with `memoria edit {0}`"
    )]
    Exists(String),
    /// A file whose name differs only in case already exists.
    #[error(
        "id `{id}` collides with `{existing}` (they differ only in case, which macOS and Windows treat as one file): pick another id"
    )]
    CaseCollision { id: String, existing: String },
    /// A body over the size limit.
    #[error(
        "note body is {size} bytes; the limit is {limit} bytes (128 KiB): split it into several notes"
    )]
    BodyTooLarge { size: usize, limit: usize },
    /// The scope holds the maximum number of notes.
    #[error(
        "scope {scope} already holds {limit} notes, the limit: forget or merge notes before adding more"
    )]
    ScopeFull { scope: String, limit: usize },
    /// Project scope was asked for outside a project.
    #[error(
        "no Memoria project here: run `memoria init DIR` to make a folder a project, or pass --project DIR"
    )]
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
        "domain notes belong to a project type, and this project has none: set \"projectType\" in .memoria/project.json (or `memoria init DIR --type T`)"
    )]
    NoProjectType,
    /// Text that looks like a credential.
    #[error(
        "refused: the {field} looks like it contains a secret (rule `{rule}`, line {line}); store where the secret lives instead of the secret itself"
    )]
    Secret {
        field: &'static str,
        rule: &'static str,
        line: usize,
    },
    /// A note whose file has a broken frontmatter cannot be rewritten until fixed.
    #[error(
        "note `{id}` in {path} has a frontmatter error ({reason}); fix the file by hand first, nothing was changed"
    )]
    Broken {
        id: String,
        path: PathBuf,
        reason: String,
    },
    /// A file changed between reading it and replacing it (an editor saved it meanwhile).
    #[error(
        "{path} changed while Memoria was writing it (another program saved it meanwhile): nothing was overwritten; look at the file and try again"
    )]
    ChangedMeanwhile { path: PathBuf },
    /// No backup with this id.
    #[error("backup `{0}` not found: list backups with `memoria backups`")]
    BackupNotFound(String),
    /// A value the user passed is not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The SQLite index failed.
    #[error(
        "index database error: {0} (the index is derived: `memoria doctor --rebuild` recreates it)"
    )]
    Index(#[from] rusqlite::Error),
}

impl Error {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { op, path, source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
