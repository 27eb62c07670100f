//! The Sync page: sign in and out, the 关闭云同步 switch, 立即同步, and each scope's state.

use std::sync::Arc;

use memoria_engine::Engine;
use memoria_engine::sync::{
    self, DownloadCounts, HttpTransport, Settings, SyncClient, SyncError, Syncer, Token,
};
use memoria_shared::SystemClock;
use memoria_shared::protocol::Quotas;
use serde::{Deserialize, Serialize};
use tauri::State;

use crate::{Shell, UiError};

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ScopeSync {
    pub scope: String,
    pub label: String,
    pub enabled: bool,
    pub last_synced_ms: Option<i64>,
    pub last_error: Option<String>,
    pub last_download: DownloadCounts,
    pub quotas: Option<Quotas>,
    pub live_notes: usize,
    pub held_back: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    pub signed_in: bool,
    pub server: Option<String>,
    pub user_id: Option<String>,
    pub enabled: bool,
    pub running: bool,
    pub last_synced_ms: Option<i64>,
    pub paused_until_ms: Option<i64>,
    pub scopes: Vec<ScopeSync>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SyncLogin {
    pub server: String,
    pub token: String,
}

fn env_token() -> Option<String> {
    std::env::var(sync::token::TOKEN_ENV).ok()
}

fn settings_dir(engine: &Engine) -> std::path::PathBuf {
    sync::sync_dir(engine.home().root())
}

pub fn status(engine: &Engine) -> Result<SyncStatus, UiError> {
    let s = Settings::load(&settings_dir(engine))?;
    let mut scopes = Vec::new();
    for scope in sync::synced_scopes(engine) {
        let st = sync::base::ScopeDir::of(engine, &scope)?.load_status()?;
        let live_notes = engine.list(Some(&scope), None, None)?.len();
        scopes.push(ScopeSync {
            scope: scope.key(),
            label: super::notes::label(engine, &scope).1,
            enabled: s.is_on(),
            last_synced_ms: st.last_synced_ms,
            last_error: st.last_error,
            last_download: st.last_download,
            quotas: st.quotas,
            live_notes,
            held_back: st.held_back,
        });
    }
    let user_id = s
        .server
        .as_ref()
        .and_then(|server| s.pins.values().find(|p| &p.server == server))
        .map(|p| p.user_id.clone());
    let last_synced_ms = scopes
        .iter()
        .map(|sc| sc.last_synced_ms)
        .try_fold(None::<i64>, |acc, t| {
            t.map(|t| Some(acc.map_or(t, |a| a.min(t))))
        })
        .flatten();
    Ok(SyncStatus {
        signed_in: s.server.is_some(),
        server: s.server.clone(),
        user_id,
        enabled: s.is_on(),
        running: false,
        last_synced_ms,
        paused_until_ms: s.paused_until_ms,
        scopes,
    })
}

pub fn login(engine: &Engine, login: SyncLogin) -> Result<SyncStatus, UiError> {
    let server = login.server.trim().trim_end_matches('/').to_owned();
    let token = Token::new(login.token);
    if server.is_empty() || token.expose().is_empty() {
        return Err(UiError::invalid(
            "give the sync server's address and your token to sign in",
        ));
    }
    let root = engine.home().root();
    let transport = Arc::new(HttpTransport::new(&server)?);
    SyncClient::new(transport, token.clone()).identity()?;
    if let Err(e) = sync::token::store(root, &server, &token) {
        // Without a keychain, a token in the environment still lets sync run.
        if env_token().is_none() {
            return Err(e.into());
        }
        log::warn!("{e}; using the token from the environment");
    }
    Settings::update(&settings_dir(engine), |s| {
        s.server = Some(server.clone());
        s.enabled.get_or_insert(true);
    })?;
    status(engine)
}

pub fn logout(engine: &Engine) -> Result<SyncStatus, UiError> {
    let dir = settings_dir(engine);
    if let Some(server) = Settings::load(&dir)?.server {
        sync::token::forget(engine.home().root(), &server)?;
    }
    Settings::update(&dir, |s| s.server = None)?;
    status(engine)
}

pub fn set_enabled(
    engine: &Engine,
    enabled: bool,
    scope: Option<&str>,
) -> Result<SyncStatus, UiError> {
    if let Some(scope) = scope {
        return Err(UiError::invalid(format!(
            "sync is switched on or off for every scope at once, not for {scope} alone"
        )));
    }
    Settings::update(&settings_dir(engine), |s| s.enabled = Some(enabled))?;
    status(engine)
}

/// One pass over every synced scope, on the app's engine; a scope's failure is in its status.
pub fn now(engine: &mut Engine) -> Result<SyncStatus, UiError> {
    let s = Settings::load(&settings_dir(engine))?;
    if s.enabled == Some(false) {
        return Err(SyncError::Off.into());
    }
    let root = engine.home().root().to_path_buf();
    let mut syncer =
        Syncer::from_settings(&root, env_token(), Arc::new(SystemClock), Arc::default())?;
    for (scope, r) in syncer.sync_all(engine) {
        if let Err(e) = r {
            log::warn!("sync of {scope}: {e}");
        }
    }
    status(engine)
}

#[tauri::command]
pub async fn sync_status(shell: State<'_, Shell>) -> Result<SyncStatus, UiError> {
    shell.read(status).await
}

#[tauri::command]
pub async fn sync_login(shell: State<'_, Shell>, login: SyncLogin) -> Result<SyncStatus, UiError> {
    shell.call(move |e| self::login(e, login)).await
}

#[tauri::command]
pub async fn sync_logout(shell: State<'_, Shell>) -> Result<SyncStatus, UiError> {
    shell.call(|e| logout(e)).await
}

#[tauri::command]
pub async fn sync_set_enabled(
    shell: State<'_, Shell>,
    enabled: bool,
    scope: Option<String>,
) -> Result<SyncStatus, UiError> {
    shell
        .call(move |e| set_enabled(e, enabled, scope.as_deref()))
        .await
}

#[tauri::command]
pub async fn sync_now(shell: State<'_, Shell>) -> Result<SyncStatus, UiError> {
    shell.call(now).await
}

#[cfg(test)]
mod tests {
    use memoria_engine::OpenOptions;

    use super::*;

    #[test]
    fn turned_off_sync_refuses_sync_now_and_signed_out_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions {
            home: Some(tmp.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        let st = status(&engine).unwrap();
        assert!(!st.signed_in && !st.enabled);
        assert_eq!(st.scopes[0].scope, "user");
        assert_eq!(now(&mut engine).unwrap_err().code, "not_signed_in");
        assert!(!set_enabled(&engine, false, None).unwrap().enabled);
        assert_eq!(now(&mut engine).unwrap_err().code, "sync_off");
        assert!(set_enabled(&engine, true, None).unwrap().enabled);
        assert_eq!(now(&mut engine).unwrap_err().code, "not_signed_in");
        assert_eq!(
            set_enabled(&engine, true, Some("user")).unwrap_err().code,
            "invalid_input"
        );
        let bad = SyncLogin {
            server: " ".into(),
            token: "t".into(),
        };
        assert_eq!(login(&engine, bad).unwrap_err().code, "invalid_input");
    }
}
