//! The engine's API: the one layer every front end calls — the `memoria` CLI, the MCP server
//! and the desktop app. Plain functions grouped by area, taking and returning serde DTOs of
//! their own (camelCase JSON), never index rows or the raw index. A front end parses its input,
//! makes one call here and shows the result; nothing a second front end would need lives
//! outside this module. Errors are the engine's [`Error`](crate::Error) (sync calls return the
//! sync client's [`SyncError`](crate::sync::SyncError), which wraps it).

/// What agents may do with memory — search, expand, remember, forget — scoped to the project
/// the engine was opened in: the MCP server's area.
pub mod agent {
    pub use crate::agent::{
        AgentHit, AgentQuery, Expanded, Forgotten, Link, MAX_QUERY_BYTES, Related, Remember,
        Remembered, SNIPPET_CHARS, expand, forget, remember, search,
    };
}
pub mod backups;
pub mod card;
pub mod config;
pub mod conflicts;
pub mod conversations;
pub mod doctor;
pub mod hook;
pub mod hygiene;
pub mod model;
pub mod notes;
pub mod projects;
pub mod quarantine;
pub mod search;
pub mod sync;
pub mod transfer;
pub mod working;

/// A random token of `bytes` bytes, as hex, from the operating system's generator.
pub use crate::fsx::random_hex;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::home::Home;
use crate::project::{Project, Scope};
use crate::vault::{Engine, OpenOptions, ScopeChoice};

#[cfg(test)]
mod tests;

/// Writes a front end's own file (the desktop app's settings, say) so that a reader sees the
/// old content or the new one, never a mix, even if the machine stops halfway.
pub fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    crate::fsx::write_atomic(path, bytes)
}

/// Where a front end runs: the home, the project folder and the model folder it was given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    /// The home folder; `None`: `$MEMORIA_HOME`, else the platform data folder.
    pub home: Option<PathBuf>,
    /// A project folder the user named explicitly: it must be inside a project.
    pub project: Option<PathBuf>,
    /// The folder the front end runs in; the project is found walking up from it.
    pub working_dir: Option<PathBuf>,
    /// The embedding model folder; `None`: `$MEMORIA_MODEL_DIR`, else the home's default.
    pub model_dir: Option<PathBuf>,
}

impl Location {
    /// How to open the engine here. A project folder named explicitly that is not inside a
    /// project is refused.
    pub fn open_options(&self) -> Result<OpenOptions> {
        let project_dir = match &self.project {
            Some(dir) => {
                if Project::discover(dir)?.is_none() {
                    return Err(Error::Invalid(format!(
                        "{} is not inside a Memoria project: make it one first",
                        dir.display()
                    )));
                }
                Some(dir.clone())
            }
            None => self.working_dir.clone(),
        };
        Ok(OpenOptions {
            home: self.home.clone(),
            project_dir,
            model_dir: self.model_dir.clone(),
            ..Default::default()
        })
    }

    /// Opens the engine here.
    pub fn open(&self) -> Result<Engine> {
        Engine::open(self.open_options()?)
    }

    /// The home, resolved (not created).
    pub fn home(&self) -> Result<Home> {
        Home::resolve(self.home.as_deref())
    }
}

/// The folders an engine works in, for a front end to show and to keep its own files beside
/// the engine's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Folders {
    /// The home folder (`MEMORIA_HOME`).
    pub home: PathBuf,
    /// The embedding model folder the engine looks in, when it has one.
    pub model_dir: Option<PathBuf>,
}

/// The folders `engine` works in.
pub fn folders(engine: &Engine) -> Folders {
    Folders {
        home: engine.home().root().to_path_buf(),
        model_dir: engine.model_dir().map(Path::to_path_buf),
    }
}

/// A note named by its scope key and id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoteRef {
    pub scope: String,
    pub id: String,
}

impl NoteRef {
    fn from_pair((scope, id): &(String, String)) -> NoteRef {
        NoteRef {
            scope: scope.clone(),
            id: id.clone(),
        }
    }
}

/// The scope a front end named — `user`, `project`, `domain`, or the key of a visible scope
/// (`project:<id>`, `domain:<type>`) — resolved from here; `None` leaves the choice to the
/// engine.
pub(crate) fn scope_arg(engine: &Engine, arg: Option<&str>) -> Result<Option<Scope>> {
    let Some(arg) = arg else { return Ok(None) };
    if !arg.contains(':') {
        return engine.scope_of(arg.parse::<ScopeChoice>()?).map(Some);
    }
    let scope = Scope::from_key(arg)?;
    if !engine.visible_scopes().contains(&scope) {
        return Err(Error::Invalid(format!(
            "the scope {arg} is not visible here: only the user's notes, the current project's \
             and its domain's are"
        )));
    }
    Ok(Some(scope))
}

/// The scope a front end named (as for [`scope_arg`]: `user`, `project`, `domain`, or a visible
/// scope's key), as the choice a write or an import takes; `None` leaves the choice to the
/// engine. A key of a scope not visible here is refused.
pub fn scope_choice(engine: &Engine, arg: Option<&str>) -> Result<Option<ScopeChoice>> {
    Ok(scope_arg(engine, arg)?.map(|s| match s {
        Scope::User => ScopeChoice::User,
        Scope::Project(_) => ScopeChoice::Project,
        Scope::Domain(_) => ScopeChoice::Domain,
    }))
}

/// A path as text for a DTO.
pub(crate) fn path_text(p: &Path) -> String {
    p.display().to_string()
}
