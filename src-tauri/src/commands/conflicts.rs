//! The Conflicts page: every held-back note with base / this machine / cloud, and resolving it.

use memoria_engine::Engine;
use memoria_engine::api::conflicts::{self, ConflictReason, KeepChoice, ResolveRequest, Resolved};
use memoria_shared::merge::ConflictKind;
use serde::{Deserialize, Serialize};
use tauri::State;

use crate::{Shell, UiError};

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Conflict {
    pub scope: String,
    pub id: String,
    pub reason: &'static str,
    pub kinds: Vec<ConflictKind>,
    pub found_at_ms: i64,
    pub base: Option<String>,
    pub local: Option<String>,
    pub cloud: Option<String>,
}

/// What the user chose.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "keep", rename_all = "snake_case")]
pub enum Resolution {
    KeepLocal,
    KeepCloud,
    KeepBoth,
    Merged { text: String },
}

pub fn list(engine: &Engine) -> Result<Vec<Conflict>, UiError> {
    Ok(conflicts::list(engine)?
        .into_iter()
        .map(|c| {
            let (reason, kinds) = match c.reason {
                ConflictReason::Merge(kinds) => ("merge", kinds),
                ConflictReason::VanishedWhileEdited => ("vanished-while-edited", Vec::new()),
            };
            Conflict {
                scope: c.scope,
                id: c.id,
                reason,
                kinds,
                found_at_ms: c.found_at_ms,
                base: c.base,
                local: c.local,
                cloud: c.cloud,
            }
        })
        .collect())
}

pub fn resolve(
    engine: &mut Engine,
    scope: String,
    id: String,
    resolution: Resolution,
) -> Result<Resolved, UiError> {
    let (keep, merged) = match resolution {
        Resolution::KeepLocal => (Some(KeepChoice::Local), None),
        Resolution::KeepCloud => (Some(KeepChoice::Cloud), None),
        Resolution::KeepBoth => (Some(KeepChoice::Both), None),
        Resolution::Merged { text } => (None, Some(text)),
    };
    let req = ResolveRequest {
        id,
        scope: Some(scope),
        keep,
        merged,
    };
    Ok(conflicts::resolve(engine, req)?)
}

#[tauri::command]
pub async fn list_conflicts(shell: State<'_, Shell>) -> Result<Vec<Conflict>, UiError> {
    shell.read(list).await
}

#[tauri::command]
pub async fn resolve_conflict(
    shell: State<'_, Shell>,
    scope: String,
    id: String,
    resolution: Resolution,
) -> Result<Resolved, UiError> {
    shell.call(move |e| resolve(e, scope, id, resolution)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolutions_read_the_contract_shapes() {
        let r = |v| serde_json::from_value::<Resolution>(v).unwrap();
        assert_eq!(
            r(serde_json::json!({"keep": "keep_local"})),
            Resolution::KeepLocal
        );
        assert_eq!(
            r(serde_json::json!({"keep": "keep_both"})),
            Resolution::KeepBoth
        );
        assert_eq!(
            r(serde_json::json!({"keep": "merged", "text": "x"})),
            Resolution::Merged { text: "x".into() }
        );
        assert!(serde_json::from_value::<Resolution>(serde_json::json!({"keep": "mine"})).is_err());
    }
}
