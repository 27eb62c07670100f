//! The Notes page: list, open, search and create notes.

use memoria_engine::{Engine, NewNote};
use memoria_shared::NoteType;
use serde::{Deserialize, Serialize};

use crate::UiError;

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

/// An open note.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NoteDetail {
    #[serde(flatten)]
    pub row: NoteRow,
    pub body: String,
    pub backlinks: Vec<String>,
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
}

fn row(ix: &memoria_engine::index::IndexedNote) -> NoteRow {
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

pub fn list_notes(engine: &Engine) -> Result<Vec<NoteRow>, UiError> {
    Ok(engine.list(None, None, None)?.iter().map(row).collect())
}

pub fn open_note(engine: &mut Engine, id: &str) -> Result<NoteDetail, UiError> {
    let view = engine.show(id, None)?;
    Ok(NoteDetail {
        row: row(&view.indexed),
        body: view.note.map(|n| n.body).unwrap_or(view.indexed.body),
        backlinks: view.backlinks.into_iter().map(|(_, id)| id).collect(),
    })
}

pub fn create_note(engine: &mut Engine, req: CreateNote) -> Result<NoteRow, UiError> {
    let note_type = req
        .note_type
        .as_deref()
        .map(NoteType::parse_known)
        .transpose()
        .map_err(|message| UiError {
            code: "invalid",
            message,
        })?;
    let written = engine.add(NewNote {
        summary: req.summary,
        body: req.body,
        note_type,
        tags: req.tags,
        ..Default::default()
    })?;
    let (_, ix) = engine.resolve(&written.id, None)?;
    Ok(row(&ix))
}

#[cfg(test)]
mod tests {
    use memoria_engine::OpenOptions;

    use super::*;

    #[test]
    fn create_open_list_and_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions {
            home: Some(tmp.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        let req: CreateNote = serde_json::from_value(
            serde_json::json!({"summary": "From the UI", "body": "hi", "noteType": "user"}),
        )
        .unwrap();
        let created = create_note(&mut engine, req).unwrap();
        assert_eq!(created.note_type.as_deref(), Some("user"));
        assert_eq!(list_notes(&engine).unwrap(), vec![created.clone()]);
        let detail = open_note(&mut engine, &created.id).unwrap();
        assert_eq!(detail.body, "hi\n");
        let json = serde_json::to_value(&detail).unwrap();
        assert_eq!(json["summary"], "From the UI");
        assert_eq!(
            open_note(&mut engine, "missing").unwrap_err().code,
            "not-found"
        );
        let secret = CreateNote {
            summary: "k".into(),
            body: "AKIAIOSFODNN7EXAMPLE".into(),
            note_type: None,
            tags: vec![],
        };
        assert_eq!(create_note(&mut engine, secret).unwrap_err().code, "secret");
        let bad = CreateNote {
            summary: "k".into(),
            body: String::new(),
            note_type: Some("idea".into()),
            tags: vec![],
        };
        assert_eq!(create_note(&mut engine, bad).unwrap_err().code, "invalid");
    }
}
