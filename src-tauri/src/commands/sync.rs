//! The Sync page: sign in and out, the 关闭云同步 switch, 立即同步, and each scope's state.

use memoria_engine::Engine;
use memoria_engine::api::sync::DownloadCounts;
use memoria_engine::api::{notes, sync};
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
    /// The address the scope was synced at, when it is not the one signed in to: its sync is
    /// paused until it is re-pointed here (`sync_repoint`).
    pub moved_from: Option<String>,
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
    /// This machine holds the account key: its notes sync end-to-end encrypted.
    pub encrypted: bool,
    /// The key this machine holds was replaced on another machine, which locked the others
    /// out (as this machine's last pass found): nothing syncs until it is unlocked.
    pub encryption_locked: bool,
    /// A rotation of the account key is under way: scopes synced only from other machines
    /// move to the new key when one of them syncs.
    pub rotation_under_way: bool,
    /// End-to-end encryption is being turned off: each scope goes back to plaintext at its
    /// next pass.
    pub encryption_turning_off: bool,
    /// Another machine turned end-to-end encryption off: this one syncs in plaintext again.
    pub encryption_ended: bool,
    pub scopes: Vec<ScopeSync>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SyncLogin {
    pub server: String,
    pub token: String,
}

pub fn status(engine: &Engine) -> Result<SyncStatus, UiError> {
    let st = sync::status(engine)?;
    let scopes = notes::scopes(engine)?;
    let user_id = st
        .scopes
        .iter()
        .filter_map(|sc| sc.pin.as_ref())
        .find(|p| st.server.as_ref() == Some(&p.server))
        .map(|p| p.user_id.clone());
    let scopes = st
        .scopes
        .into_iter()
        .map(|sc| {
            let known = scopes.iter().find(|s| s.key == sc.scope);
            ScopeSync {
                label: known.map_or_else(|| sc.scope.clone(), super::notes::label),
                live_notes: known.map_or(0, |s| s.notes),
                enabled: sc.enabled,
                scope: sc.scope,
                last_synced_ms: sc.last_synced_ms,
                last_error: sc.last_error,
                last_download: sc.last_download,
                quotas: sc.quotas,
                held_back: sc.held_back,
                moved_from: sc.pin.filter(|_| sc.address_changed).map(|p| p.server),
            }
        })
        .collect();
    Ok(SyncStatus {
        signed_in: st.server.is_some(),
        server: st.server,
        user_id,
        enabled: st.on,
        running: false,
        last_synced_ms: st.last_synced_ms,
        paused_until_ms: st.paused_until_ms,
        encrypted: st.encrypted,
        encryption_locked: st.encryption_locked,
        rotation_under_way: st.encrypted && sync::rotation_under_way(engine)?,
        encryption_turning_off: st.encryption_turning_off,
        encryption_ended: st.encryption_ended,
        scopes,
    })
}

pub fn login(engine: &Engine, login: SyncLogin) -> Result<SyncStatus, UiError> {
    let req = sync::LoginRequest {
        server: login.server,
        token: Some(login.token),
    };
    let signed_in = sync::login(engine, &req)?;
    if let Some(e) = signed_in.keychain_error {
        log::warn!("{e}; using the token from the environment");
    }
    status(engine)
}

pub fn logout(engine: &Engine) -> Result<SyncStatus, UiError> {
    sync::logout(engine)?;
    status(engine)
}

pub fn set_enabled(
    engine: &Engine,
    enabled: bool,
    scope: Option<&str>,
) -> Result<SyncStatus, UiError> {
    if let Some(scope) = scope {
        sync::set_scope(engine, scope, enabled)?;
        return status(engine);
    }
    if enabled {
        sync::turn_on(engine, None)?;
    } else {
        sync::turn_off(engine)?;
    }
    status(engine)
}

/// One pass over every synced scope, on the app's engine; a scope's failure is in its status.
pub fn now(engine: &mut Engine) -> Result<SyncStatus, UiError> {
    warn_failed(&sync::now(engine)?);
    status(engine)
}

/// Moves the scopes synced at another address to `server` once it proves to be the same
/// store (refused with `account_mismatch` or `not_same_store`, nothing changed), then syncs.
pub fn repoint(engine: &mut Engine, server: &str) -> Result<SyncStatus, UiError> {
    sync::repoint(engine, server)?;
    // Moved: the pass that follows is like 立即同步's, and a failure of it is the scope's error
    // in the status, not the re-point's.
    now(engine).or_else(|_| status(engine))
}

/// What turning end-to-end encryption on gives the window: the recovery key, to show once,
/// and the status after the encrypted passes.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SyncEncrypted {
    pub recovery_key: String,
    pub status: SyncStatus,
}

/// Turns end-to-end encryption on for the signed-in account with `passphrase`; a scope whose
/// encrypted pass failed shows its error in the status.
pub fn encrypt(engine: &mut Engine, passphrase: &str) -> Result<SyncEncrypted, UiError> {
    let done = sync::encrypt(engine, passphrase)?;
    warn_failed(&done.scopes);
    Ok(SyncEncrypted {
        recovery_key: done.recovery_key,
        status: status(engine)?,
    })
}

/// Unlocks end-to-end encrypted sync on this machine with the passphrase or the recovery key
/// (exactly one); a wrong one is `wrong_passphrase` and changes nothing.
pub fn unlock(
    engine: &mut Engine,
    passphrase: Option<String>,
    recovery_key: Option<String>,
) -> Result<SyncStatus, UiError> {
    let secret = secret(passphrase, recovery_key, "to unlock")?;
    let done = sync::unlock(engine, &secret)?;
    warn_failed(&done.scopes);
    status(engine)
}

/// Exactly one of the passphrase and the recovery key, as the window sends them.
fn secret(
    passphrase: Option<String>,
    recovery_key: Option<String>,
    purpose: &str,
) -> Result<sync::Secret, UiError> {
    match (passphrase, recovery_key) {
        (Some(p), None) => Ok(sync::Secret::Passphrase(p)),
        (None, Some(k)) => Ok(sync::Secret::RecoveryKey(k)),
        _ => Err(UiError::invalid(format!(
            "give either the passphrase or the recovery key {purpose}"
        ))),
    }
}

/// Changes the account's passphrase to `new_passphrase`, proven with the current passphrase
/// or the recovery key (exactly one): the account key is wrapped again and nothing is
/// uploaded again. A wrong current secret is `wrong_passphrase` and changes nothing.
pub fn change_passphrase(
    engine: &mut Engine,
    passphrase: Option<String>,
    recovery_key: Option<String>,
    new_passphrase: &str,
) -> Result<(), UiError> {
    let current = secret(passphrase, recovery_key, "to change the passphrase")?;
    sync::change_passphrase(engine, &current, new_passphrase)?;
    Ok(())
}

/// Sets a new passphrase and a new recovery key proven by the account key this machine holds,
/// for when both are lost (`api::sync::reset_passphrase`): the new recovery key, to show once.
/// A machine without the account's current key is `e2ee_locked` and changes nothing.
pub fn reset_passphrase(
    engine: &mut Engine,
    new_passphrase: &str,
) -> Result<sync::PassphraseReset, UiError> {
    Ok(sync::reset_passphrase(engine, new_passphrase)?)
}

/// What rotating the account key gives the window: the new recovery key, to show once, and
/// the status after the passes that moved each scope.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SyncRotated {
    pub recovery_key: String,
    /// Machines holding only the previous key must unlock again.
    pub locked_out: bool,
    /// No scope holds anything under the previous key any more; false while scopes synced
    /// only from other machines wait for one of them to sync.
    pub complete: bool,
    pub status: SyncStatus,
}

/// Replaces the account key and re-encrypts every scope under it, proven with the passphrase
/// (a wrong one is `wrong_passphrase` and changes nothing); with `lock_out`, machines holding
/// only the previous key must unlock again. Run again, it goes on with a rotation under way.
pub fn rotate_key(
    engine: &mut Engine,
    passphrase: &str,
    lock_out: bool,
) -> Result<SyncRotated, UiError> {
    let done = sync::rotate_key(engine, passphrase, lock_out)?;
    warn_failed(&done.scopes);
    Ok(SyncRotated {
        recovery_key: done.recovery_key,
        locked_out: done.locked_out,
        complete: done.complete,
        status: status(engine)?,
    })
}

/// What turning end-to-end encryption off gives the window.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SyncDecrypted {
    /// No scope of the account is encrypted any more; false while scopes synced only from
    /// other machines wait for one of them to sync.
    pub complete: bool,
    pub status: SyncStatus,
}

/// Turns end-to-end encryption off for the account, on the user's explicit request: every
/// note goes up again in plaintext and then the ciphertext is removed from the server.
/// Refused (`keys_exist`) while a rotation is under way, `e2ee_locked` on a locked machine.
pub fn decrypt(engine: &mut Engine) -> Result<SyncDecrypted, UiError> {
    let done = sync::decrypt(engine)?;
    warn_failed(&done.scopes);
    Ok(SyncDecrypted {
        complete: done.complete,
        status: status(engine)?,
    })
}

fn warn_failed(passes: &[sync::ScopePass]) {
    for pass in passes {
        if let Some(e) = &pass.error {
            log::warn!("sync of {}: {}", pass.scope, e.message);
        }
    }
}

#[tauri::command]
pub async fn sync_e2ee(shell: State<'_, Shell>) -> Result<sync::E2eeState, UiError> {
    shell.read(|e| Ok(sync::e2ee_state(e)?)).await
}

#[tauri::command]
pub async fn sync_encrypt(
    shell: State<'_, Shell>,
    passphrase: String,
) -> Result<SyncEncrypted, UiError> {
    shell.call(move |e| encrypt(e, &passphrase)).await
}

#[tauri::command]
pub async fn sync_unlock(
    shell: State<'_, Shell>,
    passphrase: Option<String>,
    recovery_key: Option<String>,
) -> Result<SyncStatus, UiError> {
    shell
        .call(move |e| unlock(e, passphrase, recovery_key))
        .await
}

#[tauri::command]
pub async fn sync_change_passphrase(
    shell: State<'_, Shell>,
    passphrase: Option<String>,
    recovery_key: Option<String>,
    new_passphrase: String,
) -> Result<(), UiError> {
    shell
        .call(move |e| change_passphrase(e, passphrase, recovery_key, &new_passphrase))
        .await
}

#[tauri::command]
pub async fn sync_reset_passphrase(
    shell: State<'_, Shell>,
    new_passphrase: String,
) -> Result<sync::PassphraseReset, UiError> {
    shell
        .call(move |e| reset_passphrase(e, &new_passphrase))
        .await
}

#[tauri::command]
pub async fn sync_rotate_key(
    shell: State<'_, Shell>,
    passphrase: String,
    lock_out: bool,
) -> Result<SyncRotated, UiError> {
    shell
        .call(move |e| rotate_key(e, &passphrase, lock_out))
        .await
}

#[tauri::command]
pub async fn sync_decrypt(shell: State<'_, Shell>) -> Result<SyncDecrypted, UiError> {
    shell.call(decrypt).await
}

#[tauri::command]
pub async fn sync_repoint(shell: State<'_, Shell>, server: String) -> Result<SyncStatus, UiError> {
    shell.call(move |e| repoint(e, &server)).await
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
        assert_eq!(now(&mut engine).unwrap_err().code, "not_signed_in");
        sync::set_server(&engine, Some("http://127.0.0.1:9")).unwrap();
        assert_eq!(now(&mut engine).unwrap_err().code, "sync_off");
        assert!(set_enabled(&engine, true, None).unwrap().enabled);
        // One scope's switch: off leaves sync as a whole on; on again brings it back.
        let st = set_enabled(&engine, false, Some("user")).unwrap();
        assert!(st.enabled && !st.scopes[0].enabled, "{st:?}");
        let st = set_enabled(&engine, true, Some("user")).unwrap();
        assert!(st.scopes[0].enabled, "{st:?}");
        assert_eq!(
            set_enabled(&engine, true, Some("project"))
                .unwrap_err()
                .code,
            "no_project"
        );
        let bad = SyncLogin {
            server: " ".into(),
            token: "t".into(),
        };
        assert_eq!(login(&engine, bad).unwrap_err().code, "invalid_input");
    }

    #[test]
    fn encryption_refuses_a_short_passphrase_and_unlocking_takes_exactly_one_secret() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = Engine::open(OpenOptions {
            home: Some(tmp.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        let short = encrypt(&mut engine, "short").unwrap_err();
        assert_eq!(short.code, "invalid_input");
        assert!(short.message.contains("at least 8 characters"), "{short:?}");
        assert_eq!(
            encrypt(&mut engine, "long enough passphrase")
                .unwrap_err()
                .code,
            "not_signed_in"
        );
        for (p, k) in [(None, None), (Some("p".into()), Some("k".into()))] {
            let e = unlock(&mut engine, p, k).unwrap_err();
            assert_eq!(e.code, "invalid_input", "{e:?}");
        }
        assert_eq!(
            unlock(&mut engine, Some("a passphrase".into()), None)
                .unwrap_err()
                .code,
            "not_signed_in"
        );
        for (p, k) in [(None, None), (Some("p".into()), Some("k".into()))] {
            let e = change_passphrase(&mut engine, p, k, "long enough passphrase").unwrap_err();
            assert_eq!(e.code, "invalid_input", "{e:?}");
        }
        let short = change_passphrase(&mut engine, Some("a passphrase".into()), None, "short");
        assert_eq!(short.unwrap_err().code, "invalid_input");
        assert_eq!(
            change_passphrase(
                &mut engine,
                Some("a passphrase".into()),
                None,
                "long enough passphrase"
            )
            .unwrap_err()
            .code,
            "not_signed_in"
        );
        assert_eq!(
            rotate_key(&mut engine, "a passphrase", true)
                .unwrap_err()
                .code,
            "not_signed_in"
        );
        assert_eq!(decrypt(&mut engine).unwrap_err().code, "not_signed_in");
        let st = status(&engine).unwrap();
        assert!(!st.encrypted && !st.encryption_locked && !st.rotation_under_way);
        assert!(!st.encryption_turning_off);
        let state = sync::e2ee_state(&engine).map_err(UiError::from);
        assert_eq!(state.unwrap_err().code, "not_signed_in");
    }
}
