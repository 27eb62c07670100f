//! Projects and scopes: which folder a note lives in, and who may see it.
//!
//! A project is a folder with `.memoria/project.json` (`{"id": …, "projectType": …}`); its notes
//! live in `<project>/MEMORY/` and travel with it. The id is stable: a git repository's
//! root-commit hash, else random. A project sees its own notes, its type's domain notes and the
//! user's notes — never another project's.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use memoria_shared::NoteId;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsx;
use crate::home::Home;

/// Where a note lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// The person's own notes, visible everywhere.
    User,
    /// One project's notes.
    Project(String),
    /// Notes shared by every project of one type.
    Domain(String),
}

impl Scope {
    /// The key stored in the index and the backups: `user`, `project:<id>`, `domain:<type>`.
    pub fn key(&self) -> String {
        match self {
            Scope::User => "user".into(),
            Scope::Project(id) => format!("project:{id}"),
            Scope::Domain(t) => format!("domain:{t}"),
        }
    }

    pub fn from_key(key: &str) -> Result<Scope> {
        let bad = || {
            Error::Invalid(format!(
                "unknown scope {key:?}: use user, project:<id> or domain:<type>"
            ))
        };
        if key == "user" {
            return Ok(Scope::User);
        }
        let (kind, name) = key.split_once(':').ok_or_else(bad)?;
        NoteId::new(name).map_err(|_| bad())?;
        match kind {
            "project" => Ok(Scope::Project(name.into())),
            "domain" => Ok(Scope::Domain(name.into())),
            _ => Err(bad()),
        }
    }

    /// Short human name: `user`, `project`, `domain`.
    pub fn kind(&self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project(_) => "project",
            Scope::Domain(_) => "domain",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

/// The contents of `.memoria/project.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProjectFile {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_type: Option<String>,
    /// Keys other tools put there survive.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// A registered project folder.
#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    pub root: PathBuf,
    pub id: String,
    pub project_type: Option<String>,
}

impl Project {
    pub fn scope(&self) -> Scope {
        Scope::Project(self.id.clone())
    }
    pub fn memory_dir(&self) -> PathBuf {
        self.root.join("MEMORY")
    }
    pub fn config_path(root: &Path) -> PathBuf {
        root.join(".memoria").join("project.json")
    }

    /// Finds the project containing `start` (walking up), if any.
    pub fn discover(start: &Path) -> Result<Option<Project>> {
        let start = start
            .canonicalize()
            .map_err(Error::io("open folder", start))?;
        for dir in start.ancestors() {
            let cfg = Self::config_path(dir);
            if cfg.is_file() {
                return Self::load(dir).map(Some);
            }
        }
        Ok(None)
    }

    /// Reads `<root>/.memoria/project.json`.
    pub fn load(root: &Path) -> Result<Project> {
        let cfg = Self::config_path(root);
        let text = std::fs::read_to_string(&cfg).map_err(Error::io("read", &cfg))?;
        let file: ProjectFile = serde_json::from_str(&text).map_err(|e| {
            Error::Invalid(format!(
                "{} is not valid ({e}): fix or delete it",
                cfg.display()
            ))
        })?;
        validate_name(&file.id, "project id", &cfg)?;
        if let Some(t) = &file.project_type {
            validate_name(t, "projectType", &cfg)?;
        }
        Ok(Project {
            root: root.to_path_buf(),
            id: file.id,
            project_type: file.project_type,
        })
    }

    /// Makes `root` a project (idempotent: an existing id is kept; a given type is set).
    pub fn init(root: &Path, project_type: Option<&str>) -> Result<Project> {
        std::fs::create_dir_all(root).map_err(Error::io("create folder", root))?;
        let root = root
            .canonicalize()
            .map_err(Error::io("open folder", root))?;
        let cfg = Self::config_path(&root);
        let mut file = if cfg.is_file() {
            let text = std::fs::read_to_string(&cfg).map_err(Error::io("read", &cfg))?;
            serde_json::from_str(&text).map_err(|e| {
                Error::Invalid(format!(
                    "{} is not valid ({e}): fix or delete it",
                    cfg.display()
                ))
            })?
        } else {
            ProjectFile {
                id: stable_id(&root),
                project_type: None,
                extra: Default::default(),
            }
        };
        if let Some(t) = project_type {
            validate_name(t, "project type", &cfg)?;
            file.project_type = Some(t.to_owned());
        }
        let json = serde_json::to_string_pretty(&file).unwrap_or_default() + "\n";
        fsx::write_atomic(&cfg, json.as_bytes())?;
        let dir = root.join("MEMORY");
        std::fs::create_dir_all(&dir).map_err(Error::io("create folder", &dir))?;
        Self::load(&root)
    }

    /// The folder holding a scope's notes.
    pub fn scope_dir(home: &Home, project: Option<&Project>, scope: &Scope) -> Result<PathBuf> {
        match scope {
            Scope::User => Ok(home.user_dir()),
            Scope::Domain(t) => Ok(home.domain_dir(t)),
            Scope::Project(id) => match project {
                Some(p) if &p.id == id => Ok(p.memory_dir()),
                _ => Err(Error::Invalid(format!(
                    "project {id} is not the current project: run the command inside that project or pass --project DIR"
                ))),
            },
        }
    }
}

fn validate_name(name: &str, what: &str, cfg: &Path) -> Result<()> {
    NoteId::new(name).map(|_| ()).map_err(|e| {
        Error::Invalid(format!(
            "{what} {name:?} in {} is invalid: {e}",
            cfg.display()
        ))
    })
}

/// A git repository's first root commit, else 16 random bytes.
fn stable_id(root: &Path) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-list", "--max-parents=0", "HEAD"])
        .output();
    if let Ok(out) = out
        && out.status.success()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        // Several roots (merged histories): the smallest is stable whichever branch is checked out.
        if let Some(first) = text.lines().map(str::trim).filter(|l| l.len() == 40).min() {
            return first.to_owned();
        }
    }
    fsx::random_hex(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_keys_round_trip() {
        for s in [
            Scope::User,
            Scope::Project("abc".into()),
            Scope::Domain("rust-cli".into()),
        ] {
            assert_eq!(Scope::from_key(&s.key()).unwrap(), s);
        }
        for bad in [
            "",
            "users",
            "project:",
            "project:../x",
            "team:x",
            "domain:A",
        ] {
            assert!(Scope::from_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn init_is_idempotent_and_keeps_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        let p = Project::init(dir.path(), Some("web")).unwrap();
        assert_eq!(p.id.len(), 32, "random id without git: {}", p.id);
        let cfg = Project::config_path(&p.root);
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
        v["editor"] = "vim".into();
        std::fs::write(&cfg, v.to_string()).unwrap();
        let again = Project::init(dir.path(), None).unwrap();
        assert_eq!(again.id, p.id);
        assert_eq!(again.project_type.as_deref(), Some("web"));
        assert!(std::fs::read_to_string(&cfg).unwrap().contains("vim"));
        let sub = p.root.join("src/deep");
        std::fs::create_dir_all(&sub).unwrap();
        assert_eq!(Project::discover(&sub).unwrap().unwrap().id, p.id);
    }

    #[test]
    fn git_root_commit_is_the_id() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .unwrap();
            assert!(ok.status.success(), "{ok:?}");
            String::from_utf8(ok.stdout).unwrap()
        };
        git(&["init", "-q"]);
        git(&["commit", "-q", "--allow-empty", "-m", "root"]);
        let root = git(&["rev-parse", "HEAD"]).trim().to_owned();
        git(&["commit", "-q", "--allow-empty", "-m", "second"]);
        assert_eq!(Project::init(dir.path(), None).unwrap().id, root);
    }
}
