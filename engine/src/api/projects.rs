//! Projects: the project folders bound on this machine, and pairing another checkout.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Location;
use crate::error::Result;
use crate::project::{self, Scope};

pub use crate::project::Paired;

/// A project folder bound on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectRow {
    /// The project id its `project.json` claimed when it was bound.
    pub id: String,
    /// The folder.
    pub root: String,
    /// The scope key its notes live under.
    pub scope: String,
    /// The folder is still there and still holds the project; false: the folder is gone.
    pub present: bool,
}

/// Every project folder bound on this machine.
pub fn list(loc: &Location) -> Result<Vec<ProjectRow>> {
    let home = loc.home()?;
    Ok(project::registered(&home)?
        .into_iter()
        .map(|f| ProjectRow {
            present: f.present(),
            scope: Scope::Project(f.scope).key(),
            id: f.id,
            root: f.root,
        })
        .collect())
}

/// Confirms that `dir` is another checkout of the project its `.memoria/project.json` names
/// (a git worktree, a second clone, a moved folder).
pub fn pair(loc: &Location, dir: &Path) -> Result<Paired> {
    let home = loc.home()?;
    home.ensure()?;
    project::pair(&home, dir)
}
