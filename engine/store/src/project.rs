//! Projects and scopes: which folder a note lives in, and who may see it.
//!
//! A project is a folder with `.memoria/project.json` (`{"id": …, "projectType": …}`); its notes
//! live in `<project>/MEMORY/` and travel with it. The id is stable: a git repository's
//! root-commit hash, else random. A project sees its own notes, its type's domain notes and the
//! user's notes — never another project's.
//!
//! A scope is a folder, not a claim. The id in `project.json` is only a claim anyone can copy
//! (root commits of public repositories are public, forks and clones share them), so this
//! machine's registry (`$MEMORIA_HOME/projects.json`) binds each project scope to one real
//! folder. The first folder seen with an id gets the scope `project:<id>`; another folder
//! claiming a registered id is refused until the user confirms it with [`pair`], and then gets
//! a scope of its own, `project:<id>@<tag>`, so each folder only ever sees the notes in its own
//! `MEMORY/`. A `MEMORY` that is a link is followed only while it stays inside the project.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use memoria_shared::NoteId;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsx::{self, FileLock};
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
    /// The key stored in the index and the backups: `user`, `project:<id>` (or
    /// `project:<id>@<tag>` for a paired second folder of one project), `domain:<type>`.
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
        match kind {
            "project" => {
                let (id, tag) = match name.split_once('@') {
                    Some((id, tag)) => (id, Some(tag)),
                    None => (name, None),
                };
                NoteId::new(id).map_err(|_| bad())?;
                if tag.is_some_and(|t| !is_folder_tag(t)) {
                    return Err(bad());
                }
                Ok(Scope::Project(name.into()))
            }
            "domain" => {
                NoteId::new(name).map_err(|_| bad())?;
                Ok(Scope::Domain(name.into()))
            }
            _ => Err(bad()),
        }
    }

    /// The project id of a project scope (without the folder tag of a paired folder): what
    /// every checkout of the project shares, on this machine and others.
    pub fn project_id(&self) -> Option<&str> {
        match self {
            Scope::Project(name) => Some(name.split_once('@').map_or(name.as_str(), |(id, _)| id)),
            _ => None,
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

/// A project folder.
#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    /// The real folder (links resolved).
    pub root: PathBuf,
    pub id: String,
    pub project_type: Option<String>,
    /// The notes folder: `<root>/MEMORY`, or where a `MEMORY` link inside the project leads.
    memory: PathBuf,
    /// The scope name this folder is bound to on this machine (see [`bind`]); the id until then.
    scope_name: String,
}

impl Project {
    /// This folder's scope: `project:<id>`, or `project:<id>@<tag>` for a paired folder.
    pub fn scope(&self) -> Scope {
        Scope::Project(self.scope_name.clone())
    }
    pub fn memory_dir(&self) -> PathBuf {
        self.memory.clone()
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

    /// Reads `<root>/.memoria/project.json`. Refuses a `MEMORY` link that leads out of `root`.
    /// The project is not bound to its scope yet: [`Project::open`] does that.
    pub fn load(root: &Path) -> Result<Project> {
        let root = &root
            .canonicalize()
            .map_err(Error::io("open folder", root))?;
        let cfg = Self::config_path(root);
        let text = std::fs::read_to_string(&cfg).map_err(Error::io("read", &cfg))?;
        let file: ProjectFile = serde_json::from_str(&text).map_err(|e| Error::Damaged {
            path: cfg.clone(),
            reason: e.to_string(),
            fix: "fix or delete it",
        })?;
        validate_name(&file.id, "project id", &cfg)?;
        if let Some(t) = &file.project_type {
            validate_name(t, "projectType", &cfg)?;
        }
        Ok(Project {
            root: root.to_path_buf(),
            memory: memory_dir_inside(root)?,
            scope_name: file.id.clone(),
            id: file.id,
            project_type: file.project_type,
        })
    }

    /// Finds the project containing `start` and binds it to its scope on this machine (see
    /// [`bind`]). A folder claiming an id another folder holds is refused until paired.
    pub fn open(home: &Home, start: &Path) -> Result<Option<Project>> {
        Self::discover(start)?.map(|p| bind(home, p)).transpose()
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
            serde_json::from_str(&text).map_err(|e| Error::Damaged {
                path: cfg.clone(),
                reason: e.to_string(),
                fix: "fix or delete it",
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
                Some(p) if &p.scope_name == id => Ok(p.memory_dir()),
                _ => Err(Error::ScopeNotVisible {
                    scope: scope.key(),
                    reason: format!("project {id} is not the current project"),
                }),
            },
        }
    }
}

/// `<root>/MEMORY`, following a link only while it stays inside `root`: a link to another
/// project's notes would let this folder read and delete them.
fn memory_dir_inside(root: &Path) -> Result<PathBuf> {
    let dir = root.join("MEMORY");
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() => {
            let target = std::fs::read_link(&dir).unwrap_or_default();
            let real = dir.canonicalize().map_err(|_| Error::LinkOutsideProject {
                link: dir.clone(),
                target: target.clone(),
            })?;
            if real == root || !real.starts_with(root) {
                return Err(Error::LinkOutsideProject { link: dir, target });
            }
            Ok(real)
        }
        _ => Ok(dir),
    }
}

/// A folder tag: 8 or more lowercase hex digits.
fn is_folder_tag(tag: &str) -> bool {
    tag.len() >= 8
        && tag
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// One folder bound to a project scope on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectFolder {
    /// The real folder.
    pub root: String,
    /// The id its `project.json` claimed when it was bound.
    pub id: String,
    /// Its scope name: the id, or `<id>@<tag>` for a paired folder.
    pub scope: String,
}

impl ProjectFolder {
    /// Whether the folder is still there and still holds the project it was bound as.
    pub fn present(&self) -> bool {
        Project::load(Path::new(&self.root)).is_ok_and(|p| p.id == self.id)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct RegistryFile {
    folders: Vec<ProjectFolder>,
}

fn registry_path(home: &Home) -> PathBuf {
    home.root().join("projects.json")
}

fn registry_lock(home: &Home) -> Result<FileLock> {
    FileLock::acquire(&home.locks_dir().join("projects.lock"))
}

fn read_registry(home: &Home) -> Result<RegistryFile> {
    let path = registry_path(home);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| Error::Damaged {
            path: path.clone(),
            reason: e.to_string(),
            fix: "fix it, or delete it and confirm each project folder again",
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(seed_registry(home)),
        Err(e) => Err(Error::io("read", &path)(e)),
    }
}

/// The registry of a home that has none yet: the projects the index remembers, each bound to
/// the folder it was last seen in.
fn seed_registry(home: &Home) -> RegistryFile {
    let rows = crate::index::Index::open(&home.index_db())
        .and_then(|ix| ix.projects())
        .unwrap_or_default();
    RegistryFile {
        folders: rows
            .into_iter()
            .map(|(id, root, _, _)| ProjectFolder {
                root,
                scope: id.clone(),
                id,
            })
            .collect(),
    }
}

fn write_registry(home: &Home, reg: &RegistryFile) -> Result<()> {
    let json = serde_json::to_string_pretty(reg).unwrap_or_default() + "\n";
    fsx::write_atomic(&registry_path(home), json.as_bytes())
}

/// The scopes a process over `project` (or no project) may see, most specific first: the
/// project, its domain, the user.
pub fn visible_scopes(project: Option<&Project>) -> Vec<Scope> {
    let mut v = Vec::new();
    if let Some(p) = project {
        v.push(p.scope());
        if let Some(t) = &p.project_type {
            v.push(Scope::Domain(t.clone()));
        }
    }
    v.push(Scope::User);
    v
}

/// Every folder bound to a project scope on this machine.
pub fn registered(home: &Home) -> Result<Vec<ProjectFolder>> {
    Ok(read_registry(home)?.folders)
}

/// The scope name `root` is bound to, if any.
pub fn registered_scope(home: &Home, root: &Path) -> Result<Option<String>> {
    let root = root.to_string_lossy();
    Ok(registered(home)?
        .into_iter()
        .find(|f| f.root == root)
        .map(|f| f.scope))
}

/// Binds `project` to its scope: the scope its folder is registered with, or — for a folder
/// seen for the first time whose id no other folder holds — `project:<id>`, registered now.
/// A folder claiming an id another folder holds is refused ([`Error::ProjectClaimed`]) until
/// the user confirms it with [`pair`].
pub fn bind(home: &Home, mut project: Project) -> Result<Project> {
    let root = project.root.to_string_lossy().into_owned();
    let fast = read_registry(home)?;
    if let Some(f) = fast
        .folders
        .iter()
        .find(|f| f.root == root && f.id == project.id)
    {
        project.scope_name = f.scope.clone();
        return Ok(project);
    }
    let _lock = registry_lock(home)?;
    let mut reg = read_registry(home)?;
    if let Some(f) = reg
        .folders
        .iter()
        .find(|f| f.root == root && f.id == project.id)
    {
        project.scope_name = f.scope.clone();
        return Ok(project);
    }
    if let Some(other) = reg
        .folders
        .iter()
        .find(|f| f.id == project.id && f.root != root)
    {
        return Err(Error::ProjectClaimed {
            id: project.id.clone(),
            dir: project.root.clone(),
            registered: PathBuf::from(&other.root),
        });
    }
    // A folder whose project.json now claims another (free) id gives up its old binding.
    reg.folders.retain(|f| f.root != root);
    reg.folders.push(ProjectFolder {
        root,
        id: project.id.clone(),
        scope: project.id.clone(),
    });
    write_registry(home, &reg)?;
    project.scope_name = project.id.clone();
    Ok(project)
}

/// What [`pair`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Paired {
    pub root: String,
    pub id: String,
    /// The scope key the folder is bound to now.
    pub scope: String,
    /// A registered folder that no longer holds the project, whose scope this folder took over
    /// (the project was moved).
    pub took_over_from: Option<String>,
    /// The folder was bound already; nothing changed.
    pub unchanged: bool,
}

/// Confirms that the project folder containing `dir` is a checkout of the project whose id it
/// claims (a git worktree, a second clone, a moved folder). If a registered folder with that
/// id no longer holds the project, this folder takes over its scope; otherwise it gets a scope
/// of its own, `project:<id>@<tag>`, and sees only the notes in its own `MEMORY/`.
pub fn pair(home: &Home, dir: &Path) -> Result<Paired> {
    let project = Project::discover(dir)?.ok_or(Error::NoProject)?;
    let root = project.root.to_string_lossy().into_owned();
    let _lock = registry_lock(home)?;
    let mut reg = read_registry(home)?;
    let done = |scope: &str, took_over_from: Option<String>, unchanged: bool| Paired {
        root: root.clone(),
        id: project.id.clone(),
        scope: Scope::Project(scope.to_owned()).key(),
        took_over_from,
        unchanged,
    };
    if let Some(f) = reg
        .folders
        .iter()
        .find(|f| f.root == root && f.id == project.id)
    {
        return Ok(done(&f.scope, None, true));
    }
    reg.folders.retain(|f| f.root != root);
    let still_holds =
        |f: &ProjectFolder| Project::load(Path::new(&f.root)).is_ok_and(|p| p.id == f.id);
    let (scope, took_over_from) = match reg
        .folders
        .iter_mut()
        .find(|f| f.id == project.id && !still_holds(f))
    {
        Some(gone) => {
            let old = std::mem::replace(&mut gone.root, root.clone());
            (gone.scope.clone(), Some(old))
        }
        None => {
            let scope = if reg.folders.iter().any(|f| f.id == project.id) {
                let hash = memoria_shared::hash::sha256_hex(root.as_bytes());
                (8..=hash.len())
                    .map(|n| format!("{}@{}", project.id, &hash[..n]))
                    .find(|s| reg.folders.iter().all(|f| &f.scope != s))
                    .unwrap_or_else(|| format!("{}@{hash}", project.id))
            } else {
                project.id.clone()
            };
            reg.folders.push(ProjectFolder {
                root: root.clone(),
                id: project.id.clone(),
                scope: scope.clone(),
            });
            (scope, None)
        }
    };
    write_registry(home, &reg)?;
    Ok(done(&scope, took_over_from, false))
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
