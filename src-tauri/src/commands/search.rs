//! Search-as-you-type over hybrid recall, with each result's explanation on demand.

use memoria_engine::Engine;
use memoria_engine::api::search::{self, ScoreParts, SearchRequest};
use serde::{Deserialize, Serialize};
use tauri::State;

use crate::{Shell, UiError};

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchQuery {
    pub query: String,
    pub limit: Option<usize>,
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub explain: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub scope: String,
    pub id: String,
    pub summary: String,
    pub note_type: Option<String>,
    pub score: f64,
    /// How likely the note answers the query, 0 to 1; `None` without the semantic model.
    pub relevance: Option<f64>,
    pub snippet: Option<String>,
    pub explain: Option<ScoreParts>,
}

pub fn search(engine: &Engine, q: SearchQuery) -> Result<Vec<SearchHit>, UiError> {
    let req = SearchRequest {
        limit: q.limit.unwrap_or(20),
        explain: q.explain,
        snippets: true,
        query: q.query,
        ..Default::default()
    };
    Ok(search::search(engine, &req)?
        .into_iter()
        .filter(|h| q.scopes.is_empty() || q.scopes.contains(&h.scope))
        .map(|h| SearchHit {
            scope: h.scope,
            id: h.id,
            summary: h.summary,
            note_type: h.note_type,
            score: h.score,
            relevance: h.relevance,
            snippet: h.snippet,
            explain: h.explain,
        })
        .collect())
}

#[tauri::command]
pub async fn search_notes(
    shell: State<'_, Shell>,
    query: SearchQuery,
) -> Result<Vec<SearchHit>, UiError> {
    shell.read(move |e| search(e, query)).await
}

#[cfg(test)]
mod tests {
    use memoria_engine::{NewNote, OpenOptions};

    use super::*;

    #[test]
    fn finds_a_note_with_its_explanation_and_a_snippet() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions {
            home: Some(tmp.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        engine
            .add(NewNote {
                summary: "Deploys go out on Tuesdays".into(),
                body: "Never on Fridays: the on-call week starts on Monday.".into(),
                ..Default::default()
            })
            .unwrap();
        let q = SearchQuery {
            query: "fridays deploy".into(),
            limit: None,
            scopes: vec![],
            explain: true,
        };
        let hits = search(&engine, q.clone()).unwrap();
        assert_eq!(hits[0].summary, "Deploys go out on Tuesdays");
        assert!(hits[0].explain.is_some());
        assert!(hits[0].snippet.as_deref().unwrap().contains("Fridays"));
        let json = serde_json::to_value(&hits[0]).unwrap();
        assert!(json["explain"]["bm25Rank"].is_number());
        let empty = SearchQuery {
            query: "  ".into(),
            ..q
        };
        assert_eq!(search(&engine, empty).unwrap_err().code, "invalid_input");
    }
}
