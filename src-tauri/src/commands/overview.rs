//! The Overview page: counts by scope and type, the relevance distribution, the engine card.

use std::collections::BTreeMap;

use memoria_engine::Engine;
use serde::Serialize;
use tauri::State;

use crate::{Shell, UiError};

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScopeCount {
    pub scope: String,
    pub label: String,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TypeCount {
    pub note_type: String,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TierCount {
    pub tier: String,
    pub count: usize,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Switch {
    pub name: String,
    pub on: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EngineCard {
    pub embedder: String,
    pub model_id: String,
    pub fallback_reason: Option<String>,
    pub fallback_fix: Option<String>,
    pub documents: usize,
    pub documents_with_vectors: usize,
    pub pending_embeddings: usize,
    pub last_vector_update_ms: Option<i64>,
    pub model_dir: Option<String>,
    pub switches: Vec<Switch>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    pub total_notes: usize,
    pub by_scope: Vec<ScopeCount>,
    pub by_type: Vec<TypeCount>,
    pub by_tier: Vec<TierCount>,
    pub relevance: Vec<usize>,
    pub broken_notes: usize,
    pub engine: EngineCard,
}

/// Buckets of the relevance chart.
const BUCKETS: usize = 10;

pub fn build(engine: &Engine) -> Result<Overview, UiError> {
    let rows = engine.list(None, None, None)?;
    let mut by_scope = Vec::new();
    for s in engine.visible_scopes() {
        let key = s.key();
        by_scope.push(ScopeCount {
            count: rows.iter().filter(|r| r.scope == key).count(),
            label: super::notes::label(engine, &s).1,
            scope: key,
        });
    }
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    for r in &rows {
        *types
            .entry(r.note_type.clone().unwrap_or_else(|| "untyped".into()))
            .or_default() += 1;
    }
    // A note's importance (0..1, a half when unset) is what its relevance starts from.
    let mut relevance = vec![0; BUCKETS];
    for r in rows.iter().filter(|r| r.error.is_none()) {
        let v = r.importance.unwrap_or(0.5).clamp(0.0, 1.0);
        relevance[((v * BUCKETS as f64) as usize).min(BUCKETS - 1)] += 1;
    }
    let model_dir = engine.model_dir().map(|p| p.display().to_string());
    let sync = memoria_engine::sync::Settings::load(&memoria_engine::sync::sync_dir(
        engine.home().root(),
    ))?;
    let status = engine.recall()?.status();
    let fallback_fix = status.fallback_reason.as_ref().map(|_| {
        "Install the embedding model (scripts/install-model.sh) and put it in the home's \
         models/default folder, or choose its folder in Settings, then restart Memoria."
            .to_owned()
    });
    Ok(Overview {
        total_notes: rows.len(),
        by_scope,
        by_type: types
            .into_iter()
            .map(|(note_type, count)| TypeCount { note_type, count })
            .collect(),
        by_tier: Vec::new(),
        relevance,
        broken_notes: rows.iter().filter(|r| r.error.is_some()).count(),
        engine: EngineCard {
            embedder: status.embedder.to_owned(),
            model_id: status.model_id,
            fallback_reason: status.fallback_reason,
            fallback_fix,
            documents: status.documents,
            documents_with_vectors: status.documents_with_vectors,
            pending_embeddings: status.pending_embeddings,
            last_vector_update_ms: None,
            model_dir,
            switches: vec![
                Switch {
                    name: "Cloud sync".into(),
                    on: sync.is_on(),
                },
                Switch {
                    name: "Include secrets in sync".into(),
                    on: sync.include_secrets,
                },
            ],
        },
    })
}

#[tauri::command]
pub async fn overview(shell: State<'_, Shell>) -> Result<Overview, UiError> {
    shell.read(build).await
}

#[cfg(test)]
mod tests {
    use memoria_engine::{NewNote, OpenOptions};

    use super::*;

    #[test]
    fn counts_and_the_engine_card() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions {
            home: Some(tmp.path().to_path_buf()),
            model_dir: Some(tmp.path().join("no-model")),
            ..Default::default()
        })
        .unwrap();
        for (s, t) in [("a", None), ("b", Some(memoria_shared::NoteType::Feedback))] {
            engine
                .add(NewNote {
                    summary: s.into(),
                    note_type: t,
                    ..Default::default()
                })
                .unwrap();
        }
        let o = build(&engine).unwrap();
        assert_eq!(o.total_notes, 2);
        assert_eq!(o.by_scope[0].count, 2);
        assert_eq!(o.relevance.iter().sum::<usize>(), 2);
        assert_eq!(o.engine.embedder, "hash");
        assert!(o.engine.fallback_fix.is_some());
        let json = serde_json::to_value(&o).unwrap();
        assert!(json["byType"][0]["noteType"].is_string());
    }
}
