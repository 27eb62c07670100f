//! The Notes page: scopes, the list, open, create, edit and forget.

use memoria_engine::index::IndexedNote;
use memoria_engine::{Engine, NewNote, NoteEdit, Scope, ScopeChoice};
use memoria_shared::NoteType;
use serde::{Deserialize, Serialize};
use tauri::State;

use crate::{Shell, UiError};

/// One scope as the notes list groups it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScopeInfo {
    pub key: String,
    pub kind: &'static str,
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

pub(crate) fn row<B>(ix: &IndexedNote<B>) -> NoteRow {
    NoteRow {
        scope: ix.scope.clone(),
        id: ix.id.clone(),
        summary: ix.summary.clone(),
        note_type: ix.note_type.clone(),
        tags: ix.tags.clone(),
        updated_at: ix.updated_at,
        error: ix.error.clone(),
    }
}

pub(crate) fn scope(key: &str) -> Result<Scope, UiError> {
    Ok(Scope::from_key(key)?)
}

fn note_type(t: Option<&str>) -> Result<Option<NoteType>, UiError> {
    t.map(NoteType::parse_known)
        .transpose()
        .map_err(UiError::invalid)
}

/// A person's name for a scope.
pub(crate) fn label(engine: &Engine, scope: &Scope) -> (&'static str, String, Option<String>) {
    match scope {
        Scope::User => ("user", "User".into(), None),
        Scope::Domain(t) => ("domain", t.clone(), None),
        Scope::Project(id) => {
            let root = engine
                .project()
                .filter(|p| p.scope() == *scope)
                .map(|p| p.root.clone());
            let name = root
                .as_ref()
                .and_then(|r| r.file_name())
                .map_or_else(|| id.clone(), |n| n.to_string_lossy().into_owned());
            ("project", name, root.map(|r| r.display().to_string()))
        }
    }
}

pub fn scopes(engine: &Engine) -> Result<Vec<ScopeInfo>, UiError> {
    let mut out = Vec::new();
    for s in engine.visible_scopes() {
        let count = engine.list(Some(&s), None, None)?.len();
        let (kind, label, root) = label(engine, &s);
        out.push(ScopeInfo {
            key: s.key(),
            kind,
            label,
            root,
            count,
        });
    }
    // User first, then projects, then domains.
    out.sort_by_key(|s| match s.kind {
        "user" => 0,
        "project" => 1,
        _ => 2,
    });
    Ok(out)
}

pub fn list(engine: &Engine, filter: &ListFilter) -> Result<Vec<NoteRow>, UiError> {
    let (t, tag) = (filter.note_type.as_deref(), filter.tag.as_deref());
    let mut rows = Vec::new();
    if filter.scopes.is_empty() {
        rows = engine.list(None, t, tag)?;
    } else {
        for key in &filter.scopes {
            rows.extend(engine.list(Some(&scope(key)?), t, tag)?);
        }
    }
    let mut rows: Vec<NoteRow> = rows.iter().map(row).collect();
    rows.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.id.cmp(&b.id)));
    Ok(rows)
}

pub fn get(engine: &Engine, scope_key: &str, id: &str) -> Result<NoteDetail, UiError> {
    let view = engine.show(id, Some(&scope(scope_key)?))?;
    let raw = std::fs::read_to_string(&view.indexed.path).unwrap_or_default();
    let mut backlinks = Vec::new();
    for (s, id) in view.backlinks {
        let summary = Scope::from_key(&s)
            .and_then(|sc| engine.resolve(&id, Some(&sc)))
            .map(|(_, ix)| ix.summary)
            .unwrap_or_default();
        backlinks.push(Backlink {
            scope: s,
            id,
            summary,
        });
    }
    let ix = view.indexed;
    let body = view.note.map_or_else(|| ix.body.clone(), |n| n.body);
    Ok(NoteDetail {
        row: row(&ix),
        links: memoria_shared::note::links_in(&body),
        body,
        raw,
        path: ix.path.clone(),
        created_at: ix.created_at,
        trust: ix.trust.clone(),
        importance: ix.importance,
        backlinks,
    })
}

pub fn create(engine: &mut Engine, req: CreateNote) -> Result<NoteRow, UiError> {
    let choice = match req.scope.as_deref().map(scope).transpose()? {
        None => None,
        Some(Scope::User) => Some(ScopeChoice::User),
        Some(Scope::Project(_)) => Some(ScopeChoice::Project),
        Some(Scope::Domain(_)) => Some(ScopeChoice::Domain),
    };
    let written = engine.add(NewNote {
        summary: req.summary,
        body: req.body,
        note_type: note_type(req.note_type.as_deref())?,
        tags: req.tags,
        scope: choice,
        ..Default::default()
    })?;
    let (_, ix) = engine.resolve(&written.id, Some(&scope(&written.scope)?))?;
    Ok(row(&ix))
}

pub fn update(
    engine: &mut Engine,
    scope_key: &str,
    id: &str,
    patch: NotePatch,
) -> Result<NoteRow, UiError> {
    let s = scope(scope_key)?;
    let edit = NoteEdit {
        summary: patch.summary,
        body: patch.body,
        tags: patch.tags,
        note_type: note_type(patch.note_type.as_deref())?,
        importance: patch.importance,
        ..Default::default()
    };
    let written = engine.edit(id, Some(&s), edit)?;
    let (_, ix) = engine.resolve(&written.id, Some(&s))?;
    Ok(row(&ix))
}

pub fn forget(engine: &mut Engine, scope_key: &str, id: &str) -> Result<Forgotten, UiError> {
    let meta = engine.forget(id, Some(&scope(scope_key)?))?;
    Ok(Forgotten {
        scope: meta.scope,
        id: meta.note_id,
        backup_id: meta.backup_id,
    })
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
        .read(move |e| list(e, &filter.unwrap_or_default()))
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
            list(&engine, &ListFilter::default()).unwrap(),
            vec![created.clone()]
        );
        let detail = get(&engine, "user", &created.id).unwrap();
        assert_eq!(detail.body, "hi [[other]]\n");
        assert!(detail.raw.contains("From the UI"));
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
        assert!(list(&engine, &ListFilter::default()).unwrap().is_empty());
    }
}
