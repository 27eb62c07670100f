//! Search-as-you-type over hybrid recall, with each result's explanation on demand.

use memoria_engine::Engine;
use memoria_engine::recall::{Explain, SearchOptions};
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
pub struct ExplainDto {
    pub bm25_rank: Option<usize>,
    pub bm25_score: Option<f32>,
    pub vector_rank: Option<usize>,
    pub cosine: Option<f32>,
    pub fused: f64,
    pub coverage: Option<f64>,
    pub vector_weight: Option<f64>,
    pub decay: f64,
    pub trust: f64,
    pub importance: f64,
    pub access: f64,
}

impl From<Explain> for ExplainDto {
    fn from(e: Explain) -> Self {
        ExplainDto {
            bm25_rank: e.bm25_rank,
            bm25_score: e.bm25_score,
            vector_rank: e.vector_rank,
            cosine: e.cosine,
            fused: e.fused,
            coverage: e.coverage,
            vector_weight: e.vector_weight,
            decay: e.decay,
            trust: e.trust,
            importance: e.importance,
            access: e.access,
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub scope: String,
    pub id: String,
    pub summary: String,
    pub note_type: Option<String>,
    pub score: f64,
    pub snippet: Option<String>,
    pub explain: Option<ExplainDto>,
}

/// How much of the body a result shows.
const SNIPPET_CHARS: usize = 160;

/// A piece of `body` around the first word of `query` it holds (else its start), on one line.
fn snippet(body: &str, query: &str) -> Option<String> {
    let flat: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return None;
    }
    let lower = flat.to_lowercase();
    let at = query
        .split_whitespace()
        .filter_map(|w| lower.find(&w.to_lowercase()))
        .min()
        .filter(|_| lower.len() == flat.len())
        .unwrap_or(0);
    let start = flat[..at]
        .char_indices()
        .rev()
        .nth(SNIPPET_CHARS / 4)
        .map_or(0, |(i, _)| i);
    let text: String = flat[start..].chars().take(SNIPPET_CHARS).collect();
    let more = flat[start..].chars().count() > SNIPPET_CHARS;
    let lead = if start > 0 { "…" } else { "" };
    Some(format!("{lead}{text}{}", if more { "…" } else { "" }))
}

pub fn search(engine: &Engine, q: &SearchQuery) -> Result<Vec<SearchHit>, UiError> {
    let opts = SearchOptions {
        limit: q.limit.unwrap_or(20),
        explain: q.explain,
        ..Default::default()
    };
    let hits = engine.hybrid_search(&q.query, opts)?;
    let mut out = Vec::new();
    for h in hits {
        if !q.scopes.is_empty() && !q.scopes.contains(&h.scope) {
            continue;
        }
        let body = memoria_engine::Scope::from_key(&h.scope)
            .and_then(|s| engine.resolve(&h.id, Some(&s)))
            .map(|(_, ix)| ix.body)
            .unwrap_or_default();
        out.push(SearchHit {
            snippet: snippet(&body, &q.query),
            scope: h.scope,
            id: h.id,
            summary: h.summary,
            note_type: h.note_type,
            score: h.score,
            explain: h.explain.map(Into::into),
        });
    }
    Ok(out)
}

#[tauri::command]
pub async fn search_notes(
    shell: State<'_, Shell>,
    query: SearchQuery,
) -> Result<Vec<SearchHit>, UiError> {
    shell.read(move |e| search(e, &query)).await
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
        let hits = search(&engine, &q).unwrap();
        assert_eq!(hits[0].summary, "Deploys go out on Tuesdays");
        assert!(hits[0].explain.is_some());
        assert!(hits[0].snippet.as_deref().unwrap().contains("Fridays"));
        let json = serde_json::to_value(&hits[0]).unwrap();
        assert!(json["explain"]["bm25Rank"].is_number());
        let empty = SearchQuery {
            query: "  ".into(),
            ..q
        };
        assert_eq!(search(&engine, &empty).unwrap_err().code, "invalid_input");
    }

    #[test]
    fn a_snippet_is_cut_around_the_match_on_char_boundaries() {
        let body = format!("{} 关键 词 end", "字".repeat(300));
        let s = snippet(&body, "关键").unwrap();
        assert!(s.starts_with('…') && s.contains("关键"));
        assert_eq!(snippet("", "x"), None);
    }
}
