//! The Notes page: scopes, the list, open, create, edit and forget.

use std::collections::HashMap;

use memoria_engine::Engine;
use memoria_engine::api::hygiene::{self, ReplacedHow};
use memoria_engine::api::notes;
use serde::{Deserialize, Serialize};
use tauri::State;

use crate::{Shell, UiError};

/// One scope as the notes list groups it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScopeInfo {
    pub key: String,
    pub kind: String,
    pub label: String,
    pub root: Option<String>,
    pub count: usize,
}

/// A row of the notes list.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NoteRow {
    pub scope: String,
    pub id: String,
    pub summary: String,
    pub note_type: Option<String>,
    pub tags: Vec<String>,
    pub updated_at: Option<i64>,
    pub error: Option<String>,
    /// The life-cycle state as written (`consolidated`, `archived`); `None` for a working note.
    pub status: Option<String>,
    /// Set when the note was consolidated into another or another supersedes it: it ranks
    /// below that note, and the list dims it.
    pub replaced_by: Option<ReplacedBy>,
}

/// What replaced a note.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReplacedBy {
    pub how: ReplacedHow,
    /// The replacing note of the same scope; `None` when it is gone.
    pub id: Option<String>,
}

/// What replaced each replaced note of the scope (or of every visible scope), by scope and id.
fn replaced(
    engine: &Engine,
    scope: Option<&str>,
) -> Result<HashMap<(String, String), ReplacedBy>, UiError> {
    Ok(hygiene::replacements(engine, scope)?
        .into_iter()
        .map(|r| {
            (
                (r.scope, r.id),
                ReplacedBy {
                    how: r.how,
                    id: r.by,
                },
            )
        })
        .collect())
}

impl NoteRow {
    fn with_replacement(mut self, replaced: &HashMap<(String, String), ReplacedBy>) -> NoteRow {
        self.replaced_by = replaced
            .get(&(self.scope.clone(), self.id.clone()))
            .cloned();
        self
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Backlink {
    pub scope: String,
    pub id: String,
    pub summary: String,
}

/// An open note.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NoteDetail {
    #[serde(flatten)]
    pub row: NoteRow,
    pub body: String,
    pub raw: String,
    pub path: String,
    pub created_at: Option<i64>,
    pub trust: Option<String>,
    pub importance: Option<f64>,
    pub links: Vec<String>,
    pub backlinks: Vec<Backlink>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListFilter {
    #[serde(default)]
    pub scopes: Vec<String>,
    pub note_type: Option<String>,
    pub tag: Option<String>,
}

/// What the editor sends to create a note.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateNote {
    pub summary: String,
    #[serde(default)]
    pub body: String,
    pub note_type: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    pub scope: Option<String>,
}

/// Changes to a note; an absent (or null) field stays as it is.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotePatch {
    pub summary: Option<String>,
    pub body: Option<String>,
    pub note_type: Option<String>,
    pub tags: Option<Vec<String>>,
    pub importance: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Forgotten {
    pub scope: String,
    pub id: String,
    pub backup_id: String,
}

impl From<notes::NoteRow> for NoteRow {
    fn from(r: notes::NoteRow) -> NoteRow {
        NoteRow {
            scope: r.scope,
            id: r.id,
            summary: r.summary,
            note_type: r.note_type,
            tags: r.tags,
            updated_at: r.updated_at,
            error: r.error,
            status: r.status,
            replaced_by: None,
        }
    }
}

/// The list's row of one note, with what replaced it.
fn row_of(engine: &Engine, scope: &str, id: &str) -> Result<NoteRow, UiError> {
    let row: NoteRow = notes::row(engine, id, Some(scope))?.into();
    let replaced = replaced(engine, Some(&row.scope))?;
    Ok(row.with_replacement(&replaced))
}

/// A person's name for a scope: the project's folder name, the domain's type, "User".
pub(crate) fn label(s: &notes::ScopeSummary) -> String {
    let name = s.key.split_once(':').map_or("User", |(_, name)| name);
    s.root
        .as_deref()
        .and_then(|r| std::path::Path::new(r).file_name())
        .map_or_else(|| name.to_owned(), |n| n.to_string_lossy().into_owned())
}

pub fn scopes(engine: &Engine) -> Result<Vec<ScopeInfo>, UiError> {
    let mut out: Vec<ScopeInfo> = notes::scopes(engine)?
        .into_iter()
        .map(|s| ScopeInfo {
            label: label(&s),
            key: s.key,
            kind: s.kind,
            root: s.root,
            count: s.notes,
        })
        .collect();
    // User first, then projects, then domains.
    out.sort_by_key(|s| match s.kind.as_str() {
        "user" => 0,
        "project" => 1,
        _ => 2,
    });
    Ok(out)
}

pub fn list(engine: &Engine, filter: ListFilter) -> Result<Vec<NoteRow>, UiError> {
    let query = |scope: Option<String>| notes::ListQuery {
        scope,
        note_type: filter.note_type.clone(),
        tag: filter.tag.clone(),
    };
    let mut rows = Vec::new();
    if filter.scopes.is_empty() {
        rows = notes::list(engine, &query(None))?;
    } else {
        for key in &filter.scopes {
            rows.extend(notes::list(engine, &query(Some(key.clone())))?);
        }
    }
    let replaced = replaced(engine, None)?;
    let mut rows: Vec<NoteRow> = rows
        .into_iter()
        .map(|r| NoteRow::from(r).with_replacement(&replaced))
        .collect();
    rows.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.id.cmp(&b.id)));
    Ok(rows)
}

pub fn get(engine: &Engine, scope: &str, id: &str) -> Result<NoteDetail, UiError> {
    let n = notes::show(engine, id, Some(scope))?;
    let backlinks = n
        .backlinks
        .into_iter()
        .map(|b| Backlink {
            summary: notes::row(engine, &b.id, Some(&b.scope))
                .map(|r| r.summary)
                .unwrap_or_default(),
            scope: b.scope,
            id: b.id,
        })
        .collect();
    // The detail of the API has no life-cycle state; the list's row has.
    let status = notes::row(engine, &n.id, Some(&n.scope))
        .ok()
        .and_then(|r| r.status);
    Ok(NoteDetail {
        row: NoteRow {
            scope: n.scope,
            id: n.id,
            summary: n.summary,
            note_type: n.note_type,
            tags: n.tags,
            updated_at: n.updated_at,
            error: n.error.clone(),
            status,
            replaced_by: None,
        }
        .with_replacement(&replaced(engine, Some(scope))?),
        raw: if n.error.is_some() {
            n.body.clone()
        } else {
            String::new()
        },
        body: n.body,
        path: n.path,
        created_at: n.created_at,
        trust: n.trust,
        importance: n.importance,
        links: n.links,
        backlinks,
    })
}

pub fn create(engine: &mut Engine, req: CreateNote) -> Result<NoteRow, UiError> {
    let written = notes::add(
        engine,
        notes::AddNote {
            summary: req.summary,
            body: req.body,
            note_type: req.note_type,
            tags: req.tags,
            scope: req.scope,
            id: None,
        },
    )?;
    row_of(engine, &written.scope, &written.id)
}

pub fn update(
    engine: &mut Engine,
    scope: &str,
    id: &str,
    patch: NotePatch,
) -> Result<NoteRow, UiError> {
    let edit = notes::EditNote {
        summary: patch.summary,
        body: patch.body,
        tags: patch.tags,
        note_type: patch.note_type,
        importance: patch.importance,
    };
    let written = notes::edit(engine, id, Some(scope), edit)?;
    row_of(engine, &written.scope, &written.id)
}

pub fn forget(engine: &mut Engine, scope: &str, id: &str) -> Result<Forgotten, UiError> {
    let req = notes::ForgetRequest {
        id: id.to_owned(),
        scope: Some(scope.to_owned()),
        confirm: true,
        purge: false,
    };
    match notes::forget(engine, &req)? {
        notes::Forgotten::Backup(meta) => Ok(Forgotten {
            scope: meta.scope,
            id: meta.note_id,
            backup_id: meta.backup_id,
        }),
        notes::Forgotten::Purged(_) => Err(UiError::internal("the note was purged, not forgotten")),
    }
}

#[tauri::command]
pub async fn list_scopes(shell: State<'_, Shell>) -> Result<Vec<ScopeInfo>, UiError> {
    shell.read(scopes).await
}

#[tauri::command]
pub async fn list_notes(
    shell: State<'_, Shell>,
    filter: Option<ListFilter>,
) -> Result<Vec<NoteRow>, UiError> {
    shell
        .read(move |e| list(e, filter.unwrap_or_default()))
        .await
}

#[tauri::command]
pub async fn get_note(
    shell: State<'_, Shell>,
    scope: String,
    id: String,
) -> Result<NoteDetail, UiError> {
    shell.read(move |e| get(e, &scope, &id)).await
}

#[tauri::command]
pub async fn create_note(shell: State<'_, Shell>, note: CreateNote) -> Result<NoteRow, UiError> {
    shell.call(move |e| create(e, note)).await
}

#[tauri::command]
pub async fn update_note(
    shell: State<'_, Shell>,
    scope: String,
    id: String,
    patch: NotePatch,
) -> Result<NoteRow, UiError> {
    shell.call(move |e| update(e, &scope, &id, patch)).await
}

#[tauri::command]
pub async fn forget_note(
    shell: State<'_, Shell>,
    scope: String,
    id: String,
) -> Result<Forgotten, UiError> {
    shell.call(move |e| forget(e, &scope, &id)).await
}

#[cfg(test)]
mod tests {
    use memoria_engine::OpenOptions;

    use super::*;

    #[test]
    fn create_open_edit_list_forget_and_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions {
            home: Some(tmp.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        let req: CreateNote = serde_json::from_value(serde_json::json!({
            "summary": "From the UI", "body": "hi [[other]]", "noteType": "user", "tags": [],
            "scope": null
        }))
        .unwrap();
        let created = create(&mut engine, req).unwrap();
        assert_eq!(created.note_type.as_deref(), Some("user"));
        assert_eq!(created.scope, "user");
        assert_eq!(
            list(&engine, ListFilter::default()).unwrap(),
            vec![created.clone()]
        );
        let detail = get(&engine, "user", &created.id).unwrap();
        assert_eq!(detail.body, "hi [[other]]\n");
        assert_eq!(detail.raw, "");
        assert_eq!(detail.links, vec!["other".to_string()]);
        let json = serde_json::to_value(&detail).unwrap();
        assert_eq!(json["summary"], "From the UI");
        assert_eq!(json["noteType"], "user");
        let patch: NotePatch =
            serde_json::from_value(serde_json::json!({"summary": "Edited"})).unwrap();
        let edited = update(&mut engine, "user", &created.id, patch).unwrap();
        assert_eq!(edited.summary, "Edited");
        assert_eq!(
            get(&engine, "user", &created.id).unwrap().body,
            "hi [[other]]\n"
        );
        let scopes = scopes(&engine).unwrap();
        assert_eq!(scopes[0].key, "user");
        assert_eq!(scopes[0].count, 1);
        assert_eq!(
            get(&engine, "user", "missing").unwrap_err().code,
            "not_found"
        );
        assert_eq!(
            get(&engine, "nowhere", "x").unwrap_err().code,
            "invalid_input"
        );
        let secret = CreateNote {
            summary: "k".into(),
            body: "AKIAIOSFODNN7EXAMPLE".into(),
            note_type: None,
            tags: vec![],
            scope: None,
        };
        assert_eq!(
            create(&mut engine, secret).unwrap_err().code,
            "credential_refused"
        );
        let bad = CreateNote {
            summary: "k".into(),
            body: String::new(),
            note_type: Some("idea".into()),
            tags: vec![],
            scope: None,
        };
        assert_eq!(create(&mut engine, bad).unwrap_err().code, "invalid_input");
        let gone = forget(&mut engine, "user", &created.id).unwrap();
        assert_eq!(gone.id, created.id);
        assert!(!gone.backup_id.is_empty());
        assert!(list(&engine, ListFilter::default()).unwrap().is_empty());
    }

    #[test]
    fn consolidated_notes_are_listed_with_the_note_that_replaced_them() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions::without_model(tmp.path())).unwrap();
        let body = "Each client gets 100 requests a minute at the API gateway, token bucket.";
        let ids: Vec<String> = (0..3)
            .map(|_| {
                let req = CreateNote {
                    summary: "Rate limit".into(),
                    body: body.into(),
                    note_type: Some("user".into()),
                    tags: vec![],
                    scope: None,
                };
                create(&mut engine, req).unwrap().id
            })
            .collect();
        assert!(
            list(&engine, ListFilter::default())
                .unwrap()
                .iter()
                .all(|r| r.status.is_none() && r.replaced_by.is_none())
        );
        let done = hygiene::consolidate(&mut engine, &Default::default()).unwrap();
        let into = done.applied[0].into.id.clone();
        let rows = list(&engine, ListFilter::default()).unwrap();
        for id in &ids {
            let r = rows.iter().find(|r| &r.id == id).unwrap();
            assert_eq!(r.status.as_deref(), Some("consolidated"));
            let json = serde_json::to_value(r).unwrap();
            assert_eq!(
                json["replacedBy"],
                serde_json::json!({"how": "consolidated", "id": into}),
                "{json}"
            );
        }
        let new = rows.iter().find(|r| r.id == into).unwrap();
        assert_eq!((new.status.as_deref(), &new.replaced_by), (None, &None));
        let detail = get(&engine, "user", &ids[0]).unwrap();
        assert_eq!(detail.row.status.as_deref(), Some("consolidated"));
        assert_eq!(
            detail.row.replaced_by.and_then(|r| r.id).as_deref(),
            Some(into.as_str())
        );
    }
}
