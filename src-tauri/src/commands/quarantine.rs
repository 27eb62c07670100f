//! Quarantining a provider's memory on the Overview page: the providers that wrote memory and
//! the history of quarantines, a preview's counts, applying one and releasing one. The API's
//! DTOs are the window's shapes (`QuarantineOverview`, `QuarantineCounts`, `QuarantineApplied`
//! and `QuarantineRelease` in `types.ts`). The person's window only: the MCP server has no way
//! to any of this.

use memoria_engine::Engine;
use memoria_engine::api::quarantine::{
    self, Applied, Counts, QuarantineOverview, Release, Selection,
};
use tauri::State;

use crate::{Shell, UiError};

/// The quarantines, the latest first, and the providers to choose from.
pub fn overview(engine: &Engine) -> Result<QuarantineOverview, UiError> {
    Ok(quarantine::overview(engine)?)
}

/// What `selection` would hide now; nothing changes.
pub fn preview(engine: &Engine, selection: &Selection) -> Result<Counts, UiError> {
    Ok(quarantine::preview(engine, selection)?)
}

/// Hides what `selection` takes now.
pub fn apply(engine: &mut Engine, selection: &Selection) -> Result<Applied, UiError> {
    Ok(quarantine::apply(engine, selection)?)
}

/// Brings quarantine `id` back exactly as it was.
pub fn release(engine: &mut Engine, id: &str) -> Result<Release, UiError> {
    Ok(quarantine::release(engine, id)?)
}

#[tauri::command]
pub async fn quarantine_overview(shell: State<'_, Shell>) -> Result<QuarantineOverview, UiError> {
    shell.read(overview).await
}

#[tauri::command]
pub async fn quarantine_preview(
    shell: State<'_, Shell>,
    selection: Selection,
) -> Result<Counts, UiError> {
    shell.read(move |e| preview(e, &selection)).await
}

#[tauri::command]
pub async fn quarantine_apply(
    shell: State<'_, Shell>,
    selection: Selection,
) -> Result<Applied, UiError> {
    shell.call(move |e| apply(e, &selection)).await
}

#[tauri::command]
pub async fn quarantine_release(shell: State<'_, Shell>, id: String) -> Result<Release, UiError> {
    shell.call(move |e| release(e, &id)).await
}

#[cfg(test)]
mod tests {
    use memoria_engine::OpenOptions;
    use memoria_engine::api::conversations::{CaptureRequest, capture_text};

    use super::*;

    const SAID: &str = r#"{"conversation":"g1","id":"1","role":"user","host":"grok","text":"I live in Lisbon."}
{"conversation":"g1","id":"2","role":"assistant","host":"grok","model":"grok-3","text":"My favourite book is Dune."}
{"conversation":"c1","id":"1","role":"assistant","host":"claude","model":"opus","text":"My favourite city is Porto."}
"#;

    #[test]
    fn the_window_previews_applies_lists_and_releases_a_quarantine() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions::without_model(tmp.path())).unwrap();
        capture_text(&engine, SAID, &CaptureRequest::default()).unwrap();
        let listed = serde_json::to_value(overview(&engine).unwrap()).unwrap();
        assert_eq!(listed["quarantines"], serde_json::json!([]), "{listed}");
        let providers: Vec<(String, String, u64)> = listed["providers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["kind"].as_str().unwrap().to_owned(),
                    p["name"].as_str().unwrap().to_owned(),
                    p["recallable"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            providers,
            [
                ("host".into(), "claude".into(), 1),
                ("host".into(), "grok".into(), 1),
                ("model".into(), "grok-3".into(), 1),
                ("model".into(), "opus".into(), 1),
            ]
        );
        // The window sends the selection as JSON.
        let grok: Selection =
            serde_json::from_value(serde_json::json!({"hosts": ["grok"]})).unwrap();
        let counts = serde_json::to_value(preview(&engine, &grok).unwrap()).unwrap();
        assert_eq!(counts["messages"], 1, "{counts}");
        assert_eq!(counts["conversations"], 1, "{counts}");
        let applied = serde_json::to_value(apply(&mut engine, &grok).unwrap()).unwrap();
        let id = applied["id"].as_str().unwrap().to_owned();
        let listed = serde_json::to_value(overview(&engine).unwrap()).unwrap();
        assert_eq!(listed["quarantines"][0]["id"], id.as_str(), "{listed}");
        assert_eq!(
            listed["quarantines"][0]["releasedAt"],
            serde_json::Value::Null
        );
        let released = serde_json::to_value(release(&mut engine, &id).unwrap()).unwrap();
        assert_eq!(released["messages"], 1, "{released}");
        let again = release(&mut engine, &id).unwrap_err();
        assert_eq!(again.code, "invalid_input", "{}", again.message);
        assert_eq!(
            release(&mut engine, "q-unknown").unwrap_err().code,
            "not_found"
        );
    }
}
