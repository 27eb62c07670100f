//! The DTOs' JSON shapes: camelCase, stable, and read back as written.

use serde_json::json;

use super::NoteRef;
use super::backups::BackupEntry;
use super::conflicts::{KeepChoice, ResolveRequest};
use super::notes::{AddNote, EditNote, ListQuery, NoteDetail, NoteRow};
use super::projects::ProjectRow;
use super::search::{ScoreParts, SearchHit, SearchMode, SearchRequest};
use super::sync::Switches;

fn round_trip<T>(value: &T, expected: serde_json::Value)
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let v = serde_json::to_value(value).unwrap();
    assert_eq!(v, expected);
    let back: T = serde_json::from_value(v).unwrap();
    assert_eq!(&back, value);
}

#[test]
fn note_dtos_are_camel_case_and_round_trip() {
    round_trip(
        &NoteRow {
            scope: "user".into(),
            id: "tea".into(),
            path: "/h/memory/user/tea.md".into(),
            rel_path: "tea.md".into(),
            summary: "Green tea".into(),
            note_type: Some("user".into()),
            tags: vec!["drink".into()],
            created_at: Some(1),
            updated_at: Some(2),
            hash: Some("h".into()),
            trust: None,
            source: None,
            importance: Some(0.5),
            error: None,
        },
        json!({"scope": "user", "id": "tea", "path": "/h/memory/user/tea.md", "relPath": "tea.md",
            "summary": "Green tea", "type": "user", "tags": ["drink"], "createdAt": 1,
            "updatedAt": 2, "hash": "h", "trust": null, "source": null, "importance": 0.5,
            "error": null}),
    );
    round_trip(
        &NoteDetail {
            scope: "user".into(),
            id: "tea".into(),
            path: "p".into(),
            summary: "s".into(),
            note_type: None,
            tags: vec![],
            created_at: None,
            updated_at: Some(3),
            hash: None,
            error: None,
            links: vec!["milk".into()],
            backlinks: vec![NoteRef {
                scope: "user".into(),
                id: "cake".into(),
            }],
            body: "b\n".into(),
        },
        json!({"scope": "user", "id": "tea", "path": "p", "summary": "s", "type": null,
            "tags": [], "createdAt": null, "updatedAt": 3, "hash": null, "error": null,
            "links": ["milk"], "backlinks": [{"scope": "user", "id": "cake"}], "body": "b\n"}),
    );
}

#[test]
fn requests_read_with_defaults_for_what_is_left_out() {
    let add: AddNote = serde_json::from_value(json!({"summary": "s", "type": "user"})).unwrap();
    assert_eq!(add.note_type.as_deref(), Some("user"));
    assert!(add.tags.is_empty() && add.scope.is_none());
    let edit: EditNote = serde_json::from_value(json!({"tags": []})).unwrap();
    assert_eq!(edit.tags, Some(vec![]));
    assert_eq!(edit.summary, None);
    let q: ListQuery = serde_json::from_value(json!({"tag": "x"})).unwrap();
    assert_eq!(q.tag.as_deref(), Some("x"));
    let s: SearchRequest = serde_json::from_value(json!({"query": "tea"})).unwrap();
    assert_eq!(
        (s.limit, s.mode, s.explain),
        (10, SearchMode::Hybrid, false)
    );
    let r: ResolveRequest = serde_json::from_value(json!({"id": "n", "keep": "cloud"})).unwrap();
    assert_eq!(r.keep, Some(KeepChoice::Cloud));
    assert_eq!("both".parse::<KeepChoice>().unwrap(), KeepChoice::Both);
    assert!("mine".parse::<KeepChoice>().is_err());
}

#[test]
fn search_hits_carry_score_parts_only_when_asked() {
    let mut hit = SearchHit {
        scope: "user".into(),
        id: "tea".into(),
        summary: "s".into(),
        note_type: None,
        score: 0.5,
        explain: None,
    };
    round_trip(
        &hit,
        json!({"scope": "user", "id": "tea", "summary": "s", "type": null, "score": 0.5}),
    );
    hit.explain = Some(ScoreParts {
        bm25_rank: Some(1),
        bm25_score: Some(2.0),
        vector_rank: None,
        cosine: None,
        fused: 0.25,
        coverage: None,
        vector_weight: Some(0.5),
        decay: 1.0,
        trust: 1.0,
        importance: 1.0,
        access: 1.0,
    });
    let v = serde_json::to_value(&hit).unwrap();
    assert_eq!(
        v["explain"],
        json!({"bm25Rank": 1, "bm25Score": 2.0, "vectorRank": null, "cosine": null,
            "fused": 0.25, "coverage": null, "vectorWeight": 0.5, "decay": 1.0, "trust": 1.0,
            "importance": 1.0, "access": 1.0})
    );
}

#[test]
fn project_backup_and_switch_rows_are_camel_case() {
    round_trip(
        &ProjectRow {
            id: "p1".into(),
            root: "/code/app".into(),
            scope: "project:p1".into(),
            present: false,
        },
        json!({"id": "p1", "root": "/code/app", "scope": "project:p1", "present": false}),
    );
    round_trip(
        &BackupEntry {
            backup_id: "b1".into(),
            scope: "user".into(),
            note_id: "tea".into(),
            reason: "forget".into(),
            created_at: 7,
        },
        json!({"backupId": "b1", "scope": "user", "noteId": "tea", "reason": "forget",
            "createdAt": 7}),
    );
    round_trip(
        &Switches {
            on: true,
            include_secrets: false,
        },
        json!({"on": true, "includeSecrets": false}),
    );
}
