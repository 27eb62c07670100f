//! The Settings page: language, theme, the daily consolidation, conversation capture, sync
//! server and model folder. The app's own choices live in `desktop.json` in the home; the sync
//! server is the sync settings' own, and conversation capture is the engine's setting
//! `conversations.capture` (`config.json`), which the hook and the MCP server read too.

use std::path::{Path, PathBuf};

use memoria_engine::Engine;
use memoria_engine::api::{self, sync};
use serde::{Deserialize, Serialize};
use tauri::State;

use crate::{Shell, UiError};

/// What `desktop.json` holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DesktopFile {
    #[serde(default)]
    pub language: Option<String>,
    #[serde(default)]
    pub theme: Option<String>,
    #[serde(default)]
    pub model_dir: Option<String>,
    /// Whether the app runs the daily consolidation; on when unset.
    #[serde(default)]
    pub daily_consolidation: Option<bool>,
}

impl DesktopFile {
    pub fn daily_consolidation(&self) -> bool {
        self.daily_consolidation.unwrap_or(true)
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    pub language: Option<String>,
    pub theme: String,
    pub sync_server: Option<String>,
    pub model_dir: Option<String>,
    /// Once a day, fold clusters of near-identical recent notes into one.
    pub daily_consolidation: bool,
    /// Agents' conversations are captured automatically (the hook, MCP's `memory_log`).
    pub conversation_capture: bool,
    /// `MEMORIA_CONVERSATIONS__CAPTURE` decides capture: the switch cannot change it.
    pub conversation_capture_env: bool,
    pub home: String,
    /// The language of the system locale (`LC_ALL`, `LC_MESSAGES`, `LANG`) as a BCP 47 tag,
    /// e.g. `zh-CN`: what "follow the system" means (the web view's own `navigator.language`
    /// does not follow the locale on Linux).
    pub system_language: Option<String>,
}

/// The system locale's language, `zh_CN.UTF-8` → `zh-CN`.
pub fn system_language() -> Option<String> {
    ["LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.is_empty())
        .map(|v| v.split(['.', '@']).next().unwrap_or("").replace('_', "-"))
        .filter(|v| !v.is_empty() && v != "C" && v != "POSIX")
}

/// Changes; an absent field stays, `null` clears (language: follow the system).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SettingsPatch {
    #[serde(default, with = "present")]
    pub language: Option<Option<String>>,
    pub theme: Option<String>,
    #[serde(default, with = "present")]
    pub sync_server: Option<Option<String>>,
    #[serde(default, with = "present")]
    pub model_dir: Option<Option<String>>,
    pub daily_consolidation: Option<bool>,
    pub conversation_capture: Option<bool>,
}

/// Tells an absent field (`None`) from a `null` one (`Some(None)`).
mod present {
    use serde::{Deserialize, Deserializer};
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<String>>, D::Error> {
        Option::<String>::deserialize(d).map(Some)
    }
}

pub fn file_path(home_root: &Path) -> PathBuf {
    home_root.join("desktop.json")
}

/// The app's own settings; a missing or unreadable file is the defaults.
pub fn load(home_root: &Path) -> DesktopFile {
    std::fs::read(file_path(home_root))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

pub fn get(engine: &Engine) -> Result<Settings, UiError> {
    let folders = api::folders(engine);
    let f = load(&folders.home);
    let capture = api::config::capture(engine)?;
    Ok(Settings {
        daily_consolidation: f.daily_consolidation(),
        conversation_capture: capture.on,
        conversation_capture_env: capture.source == api::config::Source::Env,
        language: f.language,
        theme: f.theme.unwrap_or_else(|| "system".into()),
        sync_server: sync::server(engine)?,
        model_dir: f
            .model_dir
            .or_else(|| folders.model_dir.map(|p| p.display().to_string())),
        home: folders.home.display().to_string(),
        system_language: system_language(),
    })
}

pub fn set(engine: &Engine, patch: SettingsPatch) -> Result<Settings, UiError> {
    let root = api::folders(engine).home;
    let mut f = load(&root);
    if let Some(l) = patch.language {
        if let Some(l) = l.as_deref().filter(|l| !["en", "zh", "es"].contains(l)) {
            return Err(UiError::invalid(format!(
                "unknown language {l:?}: choose en, zh or es"
            )));
        }
        f.language = l;
    }
    if let Some(t) = patch.theme {
        if !["system", "light", "dark"].contains(&t.as_str()) {
            return Err(UiError::invalid(format!(
                "unknown theme {t:?}: choose system, light or dark"
            )));
        }
        f.theme = Some(t);
    }
    if let Some(m) = patch.model_dir {
        if let Some(dir) = m.as_deref().filter(|d| !Path::new(d).is_dir()) {
            return Err(UiError::invalid(format!("{dir} is not a folder")));
        }
        f.model_dir = m;
    }
    if let Some(on) = patch.daily_consolidation {
        f.daily_consolidation = Some(on);
    }
    if let Some(server) = patch.sync_server {
        sync::set_server(engine, server.as_deref())?;
    }
    if let Some(on) = patch.conversation_capture {
        api::config::set_capture(engine, on)?;
    }
    let bytes = serde_json::to_vec_pretty(&f).map_err(|e| UiError::internal(e.to_string()))?;
    api::write_file_atomically(&file_path(&root), &bytes)?;
    get(engine)
}

#[tauri::command]
pub async fn get_settings(shell: State<'_, Shell>) -> Result<Settings, UiError> {
    shell.read(get).await
}

#[tauri::command]
pub async fn set_settings(
    shell: State<'_, Shell>,
    patch: SettingsPatch,
) -> Result<Settings, UiError> {
    let daily = patch.daily_consolidation;
    let settings = shell.call(move |e| set(e, patch)).await?;
    if let Some(on) = daily {
        shell.set_consolidation(on).await?;
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use memoria_engine::OpenOptions;

    use super::*;

    #[test]
    fn settings_round_trip_and_refuse_unknown_values() {
        let tmp = tempfile::tempdir().unwrap();
        let engine = Engine::open(OpenOptions {
            home: Some(tmp.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        let s = get(&engine).unwrap();
        assert_eq!((s.language, s.theme.as_str()), (None, "system"));
        let patch = |v| serde_json::from_value::<SettingsPatch>(v).unwrap();
        let s = set(
            &engine,
            patch(serde_json::json!({"language": "zh", "theme": "dark"})),
        )
        .unwrap();
        assert_eq!(
            (s.language.as_deref(), s.theme.as_str()),
            (Some("zh"), "dark")
        );
        let s = set(&engine, patch(serde_json::json!({"theme": "light"}))).unwrap();
        assert_eq!(s.language.as_deref(), Some("zh"));
        let s = set(&engine, patch(serde_json::json!({"language": null}))).unwrap();
        assert_eq!(s.language, None);
        assert!(s.daily_consolidation, "on unless turned off");
        let s = set(
            &engine,
            patch(serde_json::json!({"dailyConsolidation": false})),
        )
        .unwrap();
        assert!(!s.daily_consolidation);
        assert!(!load(tmp.path()).daily_consolidation());
        assert_eq!(s.language, None, "the other settings stay");
        assert!(s.conversation_capture && !s.conversation_capture_env);
        let s = set(
            &engine,
            patch(serde_json::json!({"conversationCapture": false})),
        )
        .unwrap();
        assert!(!s.conversation_capture);
        assert!(!s.daily_consolidation, "the other settings stay");
        // The engine's own setting: the hook and the MCP server read it from config.json.
        let kept = std::fs::read_to_string(tmp.path().join("config.json")).unwrap();
        assert!(kept.contains("\"capture\": false"), "{kept}");
        assert!(
            set(
                &engine,
                patch(serde_json::json!({"conversationCapture": true}))
            )
            .unwrap()
            .conversation_capture
        );
        assert_eq!(
            set(&engine, patch(serde_json::json!({"language": "fr"})))
                .unwrap_err()
                .code,
            "invalid_input"
        );
    }
}
