//! Notes: make a home or a project, add, show, edit, list and forget notes.

use std::path::Path;

use memoria_shared::NoteType;
use serde::{Deserialize, Serialize};

use super::{Location, NoteRef, path_text, scope_arg, scope_choice};
use crate::error::{Error, Result};
use crate::index::IndexedNote;
use crate::project::Project;
use crate::vault::{Engine, NewNote, NoteEdit, OpenOptions};

pub use crate::backup::BackupMeta;
pub use crate::vault::{Purged, Written};

/// A project as a front end shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectInfo {
    pub id: String,
    pub root: String,
    pub project_type: Option<String>,
}

/// What [`init`] made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Initialized {
    /// The home folder.
    pub home: String,
    /// The project made (or found) in the folder given, if one was given.
    pub project: Option<ProjectInfo>,
}

/// Creates the home's folders; with `dir`, also makes `dir` a project (`.memoria/project.json`,
/// `MEMORY/`). Without `dir` the location's explicit project folder is used, if any.
pub fn init(loc: &Location, dir: Option<&Path>, project_type: Option<&str>) -> Result<Initialized> {
    let dir = dir.or(loc.project.as_deref());
    let project = match dir {
        Some(d) => Some(Project::init(d, project_type)?),
        None if project_type.is_some() => {
            return Err(Error::Invalid(
                "a project type needs a project folder to make a project of".into(),
            ));
        }
        None => None,
    };
    let engine = Engine::open(OpenOptions {
        home: loc.home.clone(),
        project_dir: project.as_ref().map(|p| p.root.clone()),
        ..Default::default()
    })?;
    Ok(Initialized {
        home: path_text(engine.home().root()),
        project: project.map(|p| ProjectInfo {
            id: p.id,
            root: path_text(&p.root),
            project_type: p.project_type,
        }),
    })
}

/// A note to add.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AddNote {
    pub summary: String,
    pub body: String,
    /// user, feedback, project, reference or domain.
    #[serde(rename = "type")]
    pub note_type: Option<String>,
    pub tags: Vec<String>,
    /// user, project or domain (default: user for user notes, else the current project).
    pub scope: Option<String>,
    pub id: Option<String>,
}

fn note_type(arg: Option<&str>) -> Result<Option<NoteType>> {
    arg.map(|t| NoteType::parse_known(t).map_err(Error::Invalid))
        .transpose()
}

/// Tags as given, trimmed, empty ones dropped.
fn clean_tags(tags: &[String]) -> Vec<String> {
    tags.iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect()
}

/// Adds a note; the write path validates it and refuses credentials.
pub fn add(engine: &mut Engine, new: AddNote) -> Result<Written> {
    engine.add(NewNote {
        note_type: note_type(new.note_type.as_deref())?,
        tags: clean_tags(&new.tags),
        scope: scope_choice(engine, new.scope.as_deref())?,
        summary: new.summary,
        body: new.body,
        id: new.id,
        ..Default::default()
    })
}

/// Changes to a note; `None` leaves a part as it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EditNote {
    pub summary: Option<String>,
    pub body: Option<String>,
    /// Replaces the tags; an empty list clears them.
    pub tags: Option<Vec<String>>,
    #[serde(rename = "type")]
    pub note_type: Option<String>,
    /// From 0 to 1: how much the note counts in recall.
    pub importance: Option<f64>,
}

/// Changes a note. An edit that changes nothing is refused.
pub fn edit(engine: &mut Engine, id: &str, scope: Option<&str>, edit: EditNote) -> Result<Written> {
    if edit.summary.is_none()
        && edit.body.is_none()
        && edit.tags.is_none()
        && edit.note_type.is_none()
        && edit.importance.is_none()
    {
        return Err(Error::Invalid(
            "nothing to change: give a new summary, body, tags, type or importance".into(),
        ));
    }
    let id = &complete_id(engine, id, scope)?;
    let scope = scope_arg(engine, scope)?;
    let change = NoteEdit {
        summary: edit.summary,
        body: edit.body,
        tags: edit.tags.as_deref().map(clean_tags),
        note_type: note_type(edit.note_type.as_deref())?,
        importance: edit.importance,
        ..Default::default()
    };
    engine.edit(id, scope.as_ref(), change)
}

/// A note in a list: its metadata, or the parse error of a file that is not a valid note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoteRow {
    pub scope: String,
    pub id: String,
    /// The file's full path.
    pub path: String,
    /// The file's path inside its scope folder.
    pub rel_path: String,
    pub summary: String,
    #[serde(rename = "type")]
    pub note_type: Option<String>,
    pub tags: Vec<String>,
    /// Milliseconds since the epoch.
    pub created_at: Option<i64>,
    pub updated_at: Option<i64>,
    pub hash: Option<String>,
    pub trust: Option<String>,
    pub source: Option<String>,
    pub importance: Option<f64>,
    /// Why the file does not parse, when it does not.
    pub error: Option<String>,
    /// The life-cycle state as written (`working`, `consolidated`, `archived`); absent when
    /// the note states none (a working note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl<B> From<IndexedNote<B>> for NoteRow {
    fn from(r: IndexedNote<B>) -> NoteRow {
        NoteRow {
            scope: r.scope,
            id: r.id,
            path: r.path,
            rel_path: r.rel_path,
            summary: r.summary,
            note_type: r.note_type,
            tags: r.tags,
            created_at: r.created_at,
            updated_at: r.updated_at,
            hash: r.hash,
            trust: r.trust,
            source: r.source,
            importance: r.importance,
            error: r.error,
            status: r.status,
        }
    }
}

/// Which notes to list; every part is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListQuery {
    /// user, project or domain; `None`: every visible scope.
    pub scope: Option<String>,
    #[serde(rename = "type")]
    pub note_type: Option<String>,
    pub tag: Option<String>,
}

/// The visible notes (or one scope's), files that do not parse included.
pub fn list(engine: &Engine, q: &ListQuery) -> Result<Vec<NoteRow>> {
    let scope = scope_arg(engine, q.scope.as_deref())?;
    let rows = engine.list(scope.as_ref(), q.note_type.as_deref(), q.tag.as_deref())?;
    Ok(rows.into_iter().map(NoteRow::from).collect())
}

/// The id a person means: `id` itself when a visible note has it, else the one visible note
/// whose id starts with it (`deploys` for `deploys-go-out-on-tuesdays`). Several such notes
/// are refused with their ids, so nothing is guessed.
pub fn complete_id(engine: &Engine, id: &str, scope: Option<&str>) -> Result<String> {
    let scoped = scope_arg(engine, scope)?;
    match engine.resolve(id, scoped.as_ref()) {
        Err(Error::NotFound(missing)) if !id.contains(['/', ':']) => {
            let mut ids: Vec<String> = engine
                .list(scoped.as_ref(), None, None)?
                .into_iter()
                .map(|r| r.id)
                .filter(|i| i.starts_with(id))
                .collect();
            ids.sort();
            ids.dedup();
            match ids.as_slice() {
                [] => Err(Error::NotFound(missing)),
                [one] => Ok(one.clone()),
                several => Err(Error::Invalid(format!(
                    "`{id}` starts several notes' ids ({}): give more of the id",
                    several.join(", ")
                ))),
            }
        }
        Err(e) => Err(e),
        Ok(_) => Ok(id.to_owned()),
    }
}

/// One note's row, found by id as [`show`] finds it (`scope` narrows it), without its text;
/// counts no access.
pub fn row(engine: &Engine, id: &str, scope: Option<&str>) -> Result<NoteRow> {
    let scope = scope_arg(engine, scope)?;
    Ok(engine.resolve(id, scope.as_ref())?.1.into())
}

/// A visible scope and how many notes it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeSummary {
    /// `user`, `project:<id>` or `domain:<type>`.
    pub key: String,
    /// `user`, `project` or `domain`.
    pub kind: String,
    /// The project's folder, for the current project's scope.
    pub root: Option<String>,
    /// Its notes, files that do not parse included.
    pub notes: usize,
}

/// The visible scopes, most specific first: the project, its domain, the user.
pub fn scopes(engine: &Engine) -> Result<Vec<ScopeSummary>> {
    engine
        .visible_scopes()
        .into_iter()
        .map(|scope| {
            let root = engine
                .project()
                .filter(|p| p.scope() == scope)
                .map(|p| path_text(&p.root));
            Ok(ScopeSummary {
                notes: engine.list(Some(&scope), None, None)?.len(),
                key: scope.key(),
                kind: scope.kind().to_owned(),
                root,
            })
        })
        .collect()
}

/// A note with its text, links and backlinks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoteDetail {
    pub scope: String,
    pub id: String,
    pub path: String,
    pub summary: String,
    #[serde(rename = "type")]
    pub note_type: Option<String>,
    pub tags: Vec<String>,
    pub created_at: Option<i64>,
    pub updated_at: Option<i64>,
    pub hash: Option<String>,
    /// owner, peer, derived or ingested.
    pub trust: Option<String>,
    /// From 0 to 1; `None`: never set.
    pub importance: Option<f64>,
    /// Why the file does not parse, when it does not (the body is then the whole file).
    pub error: Option<String>,
    /// `consolidated` or `archived` when the note is not a working note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Why no agent, search or sync sees it, and whose mark that is: the `contains-secrets`
    /// tag written in the file (the person's to remove), or the credential guard's match
    /// (gone when the text is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_back: Option<String>,
    /// The notes this one links to, as written.
    pub links: Vec<String>,
    /// The visible notes that link to this one.
    pub backlinks: Vec<NoteRef>,
    pub body: String,
}

/// A note with its text and backlinks; counts one access on this machine.
pub fn show(engine: &Engine, id: &str, scope: Option<&str>) -> Result<NoteDetail> {
    let id = &complete_id(engine, id, scope)?;
    let scope = scope_arg(engine, scope)?;
    let view = engine.show(id, scope.as_ref())?;
    let ix = view.indexed;
    let held_back = held_back(view.note.as_ref(), &ix);
    Ok(NoteDetail {
        status: ix.status.clone(),
        held_back,
        scope: view.scope.key(),
        links: view.note.as_ref().map(|n| n.links()).unwrap_or_default(),
        backlinks: view.backlinks.iter().map(NoteRef::from_pair).collect(),
        body: view.note.map(|n| n.body).unwrap_or(ix.body),
        id: ix.id,
        path: ix.path,
        summary: ix.summary,
        note_type: ix.note_type,
        tags: ix.tags,
        created_at: ix.created_at,
        updated_at: ix.updated_at,
        hash: ix.hash,
        trust: ix.trust,
        importance: ix.importance,
        error: ix.error,
    })
}

/// Why a note holding a secret is held back, and whose mark it is.
fn held_back(
    note: Option<&memoria_shared::Note>,
    ix: &crate::index::IndexedNote,
) -> Option<String> {
    use crate::guard::SECRETS_TAG;
    if !ix.tags.iter().any(|t| t == SECRETS_TAG) {
        return None;
    }
    let tagged = note.is_some_and(|n| n.tags.iter().any(|t| t == SECRETS_TAG));
    let matched = note.and_then(|n| crate::guard::scan(&n.serialize()));
    Some(match (tagged, matched) {
        (true, Some(f)) => format!(
            "held back: the file is tagged `{SECRETS_TAG}` and the credential guard matches it (rule `{}`, line {}); take the secret out, then remove the tag",
            f.rule, f.line
        ),
        (true, None) => format!(
            "held back: the file is tagged `{SECRETS_TAG}`; the credential guard no longer matches it, so remove the tag (`memoria edit {} --tags …` without it) if it holds no secret",
            ix.id
        ),
        (false, Some(f)) => format!(
            "held back: the credential guard matches it (rule `{}`, line {}); it comes back once that text is gone",
            f.rule, f.line
        ),
        (false, None) => {
            "held back: the credential guard matches its file; it comes back once that text is gone"
                .to_owned()
        }
    })
}

/// What to forget.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ForgetRequest {
    pub id: String,
    pub scope: Option<String>,
    /// Forgetting is deliberate: without it nothing happens.
    pub confirm: bool,
    /// Also remove every backup and every copy in the index files: no restore afterwards.
    pub purge: bool,
}

/// What [`forget`] did: a backup kept (restorable), or the note purged for good.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Forgotten {
    Backup(BackupMeta),
    Purged(Purged),
}

/// Backs a note up and removes it; with `purge`, removes it and every copy Memoria kept.
pub fn forget(engine: &mut Engine, req: &ForgetRequest) -> Result<Forgotten> {
    if !req.confirm {
        return Err(Error::ConfirmationRequired(if req.purge {
            format!(
                "purging `{}` needs a confirmation: it removes the note and all its backups for good",
                req.id
            )
        } else {
            format!(
                "forgetting `{}` needs a confirmation (a backup is kept either way)",
                req.id
            )
        }));
    }
    let scope = scope_arg(engine, req.scope.as_deref())?;
    Ok(if req.purge {
        Forgotten::Purged(engine.forget_purge(&req.id, scope.as_ref())?)
    } else {
        Forgotten::Backup(engine.forget(&req.id, scope.as_ref())?)
    })
}
