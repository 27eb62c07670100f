//! Cloud sync: sign in and out, turn on and off, sync now, confirm or decline what a paused
//! sync waits for, and the status roll-up per scope.

use std::sync::Arc;

use memoria_shared::SystemClock;
use memoria_shared::protocol::{E2eeKeys, FEATURE_E2EE, OffRequest, Quotas};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::sync::base::ScopeDir;
use crate::sync::{self, Settings, SyncClient, Syncer, Token, e2ee, token};
use crate::vault::Engine;

pub use crate::sync::settings::Pin;
pub use crate::sync::{DownloadCounts, PassReport, Pending, SyncError, SyncResult};

pub use crate::sync::e2ee::Secret;
pub use crate::sync::env_token;

/// Whether `MEMORIA_SYNC_TOKEN` is set: a front end then need not ask for a token.
pub fn token_in_environment() -> bool {
    env_token().is_some()
}

/// A sign-in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoginRequest {
    /// The server's URL, e.g. `https://sync.example.com`.
    pub server: String,
    /// The token; `None`: `MEMORIA_SYNC_TOKEN`.
    #[serde(skip_serializing)]
    pub token: Option<String>,
}

/// What a sign-in did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignedIn {
    pub server: String,
    pub user_id: String,
    /// Cloud sync is on (a sign-in turns it on unless it was turned off).
    pub on: bool,
    /// Where the token is kept: a keychain, or the token file (its path); `None` when neither
    /// could keep it and the token comes from `MEMORIA_SYNC_TOKEN`.
    pub keychain: Option<String>,
    /// Why no store could keep the token, when none could.
    pub keychain_error: Option<String>,
    /// Scopes first synced at another address or as another account: their sync stays
    /// paused (a re-point moves those of the same account, after checking the server).
    pub pinned_elsewhere: Vec<PinnedElsewhere>,
}

/// Signs in: checks the token with the server, keeps it in the OS keychain (else in the token
/// file, readable only by the user), reads it back from there, and turns sync on unless it was
/// turned off. When no store keeps it the sign-in stands only when the token is in
/// `MEMORIA_SYNC_TOKEN`.
pub fn login(engine: &Engine, req: &LoginRequest) -> SyncResult<SignedIn> {
    let root = engine.home().root();
    let server = req.server.trim().trim_end_matches('/').to_owned();
    if server.is_empty() {
        return Err(Error::Invalid("give the sync server's address to sign in".into()).into());
    }
    check_address(&server)?;
    let token = Token::new(req.token.clone().or_else(env_token).unwrap_or_default());
    if token.expose().is_empty() {
        return Err(SyncError::NoToken);
    }
    let transport = Arc::new(sync::HttpTransport::new(&server)?);
    let identity = SyncClient::new(transport, token.clone())
        .identity()
        .map_err(|e| match e.code() {
            crate::error::ErrorCode::NotSignedIn => SyncError::TokenRefused {
                server: server.clone(),
            },
            _ => e,
        })?;
    let (keychain, keychain_error) = match token::store(root, &server, &token) {
        Ok(kc) => (Some(kc.to_string()), None),
        Err(e) if env_token().is_some() => (None, Some(e.to_string())),
        Err(e) => return Err(e),
    };
    let (on, pinned_elsewhere) = Settings::update(&sync::sync_dir(root), |s| {
        s.server = Some(server.clone());
        let on = *s.enabled.get_or_insert(true);
        (on, pinned_elsewhere(s, &server, Some(&identity.user_id)))
    })?;
    Ok(SignedIn {
        server,
        user_id: identity.user_id,
        on,
        keychain,
        keychain_error,
        pinned_elsewhere,
    })
}

/// A scope pinned to another address or account than the one signed in to: its sync is paused
/// until the scope is re-pointed ([`repoint`]) or the original account signs in again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PinnedElsewhere {
    pub scope: String,
    /// The address and account the scope was synced with.
    pub server: String,
    pub user_id: String,
}

/// The scopes whose pin names another server address or account than `server` and `user`.
fn pinned_elsewhere(s: &Settings, server: &str, user: Option<&str>) -> Vec<PinnedElsewhere> {
    s.pins
        .iter()
        .filter(|(_, p)| p.server != server || user.is_some_and(|u| u != p.user_id))
        .map(|(scope, p)| PinnedElsewhere {
            scope: scope.clone(),
            server: p.server.clone(),
            user_id: p.user_id.clone(),
        })
        .collect()
}

pub use crate::sync::{MovedScope, Refusal, Repointed};

/// Moves every scope pinned to another address to `server`, once the server there proves to be
/// the same store: it knows this machine's token (the one for `server`, else the one signed in
/// with) as the scopes' user, and each scope's manifest there is the one last synced here or a
/// later one of it. All or nothing; on success `server` is the address this home syncs with
/// (the token is kept for it too). Nothing is synced: the next pass does that.
pub fn repoint(engine: &Engine, server: &str) -> SyncResult<Repointed> {
    let root = engine.home().root();
    let server = server.trim().trim_end_matches('/').to_owned();
    if server.is_empty() {
        return Err(Error::Invalid("give the sync server's new address".into()).into());
    }
    check_address(&server)?;
    let settings = Settings::load(&sync::sync_dir(root))?;
    let (token, kept) = match token::load(root, &server, env_token()) {
        Ok(t) => (t, true),
        Err(SyncError::NoToken) => match &settings.server {
            Some(old) if *old != server => (token::load(root, old, env_token())?, false),
            _ => return Err(SyncError::NotSignedIn),
        },
        Err(e) => return Err(e),
    };
    let transport = Arc::new(sync::HttpTransport::new(&server)?);
    let client = SyncClient::new(transport, token.clone());
    let done = sync::repoint(root, &server, &client).map_err(|e| match e {
        SyncError::Server { status: 401, .. } => SyncError::TokenRefused {
            server: server.clone(),
        },
        SyncError::Transport(reason) => SyncError::RepointUnreachable {
            server: server.clone(),
            reason,
        },
        e => e,
    })?;
    if !kept && env_token().is_none() {
        token::store(root, &server, &token)?;
    }
    Ok(done)
}

/// Refuses a server address that is not an `http://` or `https://` URL with a host, saying how
/// to write it.
fn check_address(server: &str) -> SyncResult<()> {
    let rest = server
        .strip_prefix("https://")
        .or_else(|| server.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        Some(_) => Err(Error::Invalid(format!(
            "the sync server's address {server} has no host: give it as http://HOST:PORT or https://HOST"
        ))
        .into()),
        None => Err(Error::Invalid(format!(
            "the sync server's address {server} does not start with http:// or https://: give it as http://{server} (or https://{server} behind TLS)"
        ))
        .into()),
    }
}

/// The sync server this home signs in to; `None`: none chosen.
pub fn server(engine: &Engine) -> SyncResult<Option<String>> {
    Ok(Settings::load(&sync::sync_dir(engine.home().root()))?.server)
}

/// Chooses the sync server (or none) without signing in: a sign-in checks it later. The
/// address is kept without surrounding spaces or a trailing `/`.
pub fn set_server(engine: &Engine, server: Option<&str>) -> SyncResult<Option<String>> {
    let server = server
        .map(|s| s.trim().trim_end_matches('/').to_owned())
        .filter(|s| !s.is_empty());
    if let Some(s) = &server {
        check_address(s)?;
    }
    Settings::update(&sync::sync_dir(engine.home().root()), |s| {
        s.server = server.clone();
    })?;
    Ok(server)
}

/// What a sign-out did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignedOut {
    /// The server signed out of, if one was signed in.
    pub server: Option<String>,
}

/// Forgets the token and the server; the scopes' pins to an account stay.
pub fn logout(engine: &Engine) -> SyncResult<SignedOut> {
    let root = engine.home().root();
    let dir = sync::sync_dir(root);
    let server = Settings::load(&dir)?.server;
    if let Some(server) = &server {
        token::forget(root, server)?;
    }
    Settings::update(&dir, |s| s.server = None)?;
    Ok(SignedOut { server })
}

/// The sync switches after a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Switches {
    pub on: bool,
    /// Notes tagged `contains-secrets` are uploaded too.
    pub include_secrets: bool,
}

/// Turns cloud sync on; `include_secrets` changes whether notes tagged `contains-secrets` are
/// uploaded (`None` leaves it as it is; they stay on this machine by default).
pub fn turn_on(engine: &Engine, include_secrets: Option<bool>) -> SyncResult<Switches> {
    Settings::update(&sync::sync_dir(engine.home().root()), |s| {
        s.enabled = Some(true);
        if let Some(v) = include_secrets {
            s.include_secrets = v;
        }
        Switches {
            on: true,
            include_secrets: s.include_secrets,
        }
    })
}

/// Turns cloud sync off; it stays off across restarts and sign-ins, local notes keep working.
pub fn turn_off(engine: &Engine) -> SyncResult<Switches> {
    Settings::update(&sync::sync_dir(engine.home().root()), |s| {
        s.enabled = Some(false);
        Switches {
            on: false,
            include_secrets: s.include_secrets,
        }
    })
}

/// One scope's sync switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeSwitch {
    pub scope: String,
    /// The scope's own switch (sync as a whole may still be off).
    pub enabled: bool,
}

/// Turns sync of one scope (`user`, `project`, or a visible scope's key) on or off on this
/// machine, leaving the others and sync as a whole as they are. Off, its notes stay local and
/// nothing of them is sent or received; on again, the next pass syncs it as before.
pub fn set_scope(engine: &Engine, scope: &str, on: bool) -> SyncResult<ScopeSwitch> {
    let scope = super::scope_arg(engine, Some(scope))?
        .ok_or_else(|| crate::Error::Invalid("name the scope to turn on or off".into()))?;
    if !sync::synced_scopes(engine).contains(&scope) {
        return Err(crate::Error::Invalid(format!("{} never syncs", scope.key())).into());
    }
    let key = scope.key();
    Settings::update(&sync::sync_dir(engine.home().root()), |s| {
        if on {
            s.off_scopes.remove(&key);
        } else {
            s.off_scopes.insert(key.clone());
        }
    })?;
    Ok(ScopeSwitch {
        scope: key,
        enabled: on,
    })
}

/// Agrees to what a paused sync waits for (`scope`: user or project; `None`: every scope that
/// waits); the next pass does it.
pub fn confirm(engine: &mut Engine, scope: Option<&str>) -> SyncResult<Vec<Pending>> {
    let scope = super::scope_arg(engine, scope)?;
    sync::confirm_pending(engine, scope.as_ref())
}

/// Declines what a paused sync waits for: notes missing here are restored from the last sync,
/// notes deleted on another machine are kept (and uploaded again).
pub fn cancel(engine: &mut Engine, scope: Option<&str>) -> SyncResult<Vec<Pending>> {
    let scope = super::scope_arg(engine, scope)?;
    sync::cancel_pending(engine, scope.as_ref())
}

/// One scope's pass: its report, or the error that stopped it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopePass {
    pub scope: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<PassReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::error::ErrorBody>,
    /// The scope's sync is turned off on this machine: it was left alone.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub off: bool,
}

/// Syncs every synced scope now. A scope's failure is in its [`ScopePass`]; the others still
/// sync. Fails as a whole only when sync cannot start (off, not signed in, no token).
pub fn now(engine: &mut Engine) -> SyncResult<Vec<ScopePass>> {
    let mut syncer = syncer(engine)?;
    Ok(passes(&mut syncer, engine))
}

fn syncer(engine: &Engine) -> SyncResult<Syncer> {
    Syncer::from_settings(
        engine.home().root(),
        env_token(),
        Arc::new(SystemClock),
        Arc::default(),
    )
}

fn passes(syncer: &mut Syncer, engine: &mut Engine) -> Vec<ScopePass> {
    syncer
        .sync_all(engine)
        .into_iter()
        .map(|(scope, r)| match r {
            Ok(rep) => ScopePass {
                scope: scope.key(),
                report: Some(rep),
                error: None,
                off: false,
            },
            Err(SyncError::ScopeOff(_)) => ScopePass {
                scope: scope.key(),
                report: None,
                error: None,
                off: true,
            },
            Err(e) => ScopePass {
                scope: scope.key(),
                report: None,
                error: Some(e.body()),
                off: false,
            },
        })
        .collect()
}

/// The shortest passphrase [`encrypt`] takes.
pub const MIN_PASSPHRASE_CHARS: usize = 8;

/// What turning end-to-end encryption on did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Encrypted {
    /// The recovery key, shown this once: with it, or the passphrase, a machine unlocks the
    /// notes; with neither, the cloud copy cannot be read by anyone.
    pub recovery_key: String,
    /// Where this machine keeps the account key.
    pub keychain: String,
    /// The encrypted passes that followed (each scope re-uploaded encrypted, then its
    /// plaintext removed from the server).
    pub scopes: Vec<ScopePass>,
}

/// Turns end-to-end encryption on for the signed-in account: syncs every scope once in
/// plaintext (so this machine holds what the cloud has), makes a random account key, keeps it
/// on the server wrapped under `passphrase` (Argon2id) and under a new recovery key, keeps it
/// on this machine, and syncs every scope again encrypted: each is marked on the server (no
/// plaintext is taken into it from then on), re-uploaded, and then its plaintext is removed
/// from the server. Refused, with nothing changed, when the account is encrypted already.
pub fn encrypt(engine: &mut Engine, passphrase: &str) -> SyncResult<Encrypted> {
    check_passphrase(passphrase)?;
    let (root, server) = signed_in(engine)?;
    if e2ee::load_key(&root, &server)?.is_some() {
        return Err(SyncError::E2ee {
            code: crate::error::ErrorCode::Exists,
            message: "this machine's notes are already end-to-end encrypted".into(),
        });
    }
    let mut syncer = syncer(engine)?;
    check_e2ee_server(&syncer, &server)?;
    if syncer.client().e2ee_keys()?.is_some() {
        return Err(SyncError::E2ee {
            code: crate::error::ErrorCode::Exists,
            message: "this account's notes are already end-to-end encrypted (turned on from another machine): unlock this machine with its passphrase or recovery key".into(),
        });
    }
    // What the cloud holds in plaintext of the scopes this machine synced comes here first:
    // it goes back up encrypted. A scope never synced from here is not sent in plaintext now
    // (its name would reach the server); another machine's plaintext of it is purged once it
    // is marked, and that machine uploads its own copies again when it unlocks.
    for scope in sync::synced_scopes(engine) {
        if ScopeDir::of(engine, &scope)?.load_state()?.folder.is_none() {
            continue;
        }
        match syncer.sync_scope(engine, &scope) {
            Ok(_) | Err(SyncError::ScopeOff(_)) => {}
            Err(e) => {
                return Err(SyncError::E2ee {
                    code: e.code(),
                    message: format!(
                        "encryption was not turned on: {} must sync first ({e})",
                        scope.key()
                    ),
                });
            }
        }
    }
    let (key, recovery, blobs) = e2ee::new_account(passphrase)?;
    syncer.client().put_e2ee_keys(&blobs)?;
    Settings::update(&sync::sync_dir(&root), |s| s.e2ee_ended = false)?;
    let keychain = e2ee::store_key(&root, &server, &key)?.to_string();
    syncer.set_account_key(Some(&key));
    let scopes = passes(&mut syncer, engine);
    Ok(Encrypted {
        recovery_key: recovery.to_text().to_string(),
        keychain,
        scopes,
    })
}

/// A new passphrase long enough to set.
fn check_passphrase(passphrase: &str) -> SyncResult<()> {
    if passphrase.chars().count() < MIN_PASSPHRASE_CHARS {
        return Err(Error::Invalid(format!(
            "the passphrase is too short: use at least {MIN_PASSPHRASE_CHARS} characters (a few unrelated words are best)"
        ))
        .into());
    }
    Ok(())
}

/// What changing the passphrase did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassphraseChanged {
    /// Where this machine keeps the account key (it holds it from now on).
    pub keychain: String,
}

/// Replaces the account's passphrase: the account key, unwrapped with `current` (the
/// passphrase, or the recovery key when the passphrase is forgotten), is wrapped under
/// `new` and kept on the server in place of the old wrap. No note is uploaded again, the
/// recovery key still unlocks, and machines already unlocked keep syncing; a machine unlocked
/// from now on needs the new passphrase. A wrong `current` changes nothing.
pub fn change_passphrase(
    engine: &mut Engine,
    current: &e2ee::Secret,
    new: &str,
) -> SyncResult<PassphraseChanged> {
    check_passphrase(new)?;
    let (root, server) = signed_in(engine)?;
    let syncer = syncer(engine)?;
    check_e2ee_server(&syncer, &server)?;
    let blobs = wrapped_keys(&syncer, "no passphrase to change")?;
    let key = e2ee::unwrap_account_key(&blobs, current)?;
    syncer
        .client()
        .put_e2ee_keys(&e2ee::rewrap_passphrase(&key, &blobs, new)?)?;
    let keychain = e2ee::store_key(&root, &server, &key)?.to_string();
    Ok(PassphraseChanged { keychain })
}

/// What setting a new passphrase with the key this machine holds did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassphraseReset {
    /// The new recovery key, shown this once; the one before no longer unlocks.
    pub recovery_key: String,
}

/// Sets a new passphrase and a new recovery key for the account, proven by the account key
/// this machine holds rather than by the current passphrase or recovery key: the way back when
/// both are lost while a machine is still unlocked. Holding the key is what either of them
/// would prove, since each only unwraps it. The key must be the account's current one (the key
/// the server's blobs wrap): a machine holding none, or one a rotation replaced, is
/// `e2ee_locked` and changes nothing. The key is wrapped under `new` and under a new recovery
/// key, in place of both wraps on the server; no note is uploaded again and machines already
/// unlocked keep syncing. The passphrase and recovery key before, if found again, no longer
/// unlock.
pub fn reset_passphrase(engine: &mut Engine, new: &str) -> SyncResult<PassphraseReset> {
    check_passphrase(new)?;
    let (root, server) = signed_in(engine)?;
    let syncer = syncer(engine)?;
    check_e2ee_server(&syncer, &server)?;
    let blobs = wrapped_keys(&syncer, "no passphrase to set")?;
    let key = e2ee::load_key(&root, &server)?
        .filter(|k| e2ee::blobs_kid(&blobs).as_deref() == Some(k.derive().key_id().as_str()))
        .ok_or_else(|| SyncError::E2ee {
            code: crate::error::ErrorCode::E2eeLocked,
            message: "this machine does not hold the account's current key, which is what proves the account without the passphrase or the recovery key: set the new passphrase on a machine that syncs end-to-end encrypted now".into(),
        })?;
    let (recovery, next) = e2ee::new_recovery(&key, &blobs)?;
    let next = e2ee::rewrap_passphrase(&key, &next, new)?;
    syncer.client().put_e2ee_keys(&next)?;
    Ok(PassphraseReset {
        recovery_key: recovery.to_text().to_string(),
    })
}

/// What unlocking a machine did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unlocked {
    /// Where this machine keeps the account key.
    pub keychain: String,
    /// The encrypted passes that followed.
    pub scopes: Vec<ScopePass>,
}

/// Unlocks end-to-end encrypted sync on this machine with the account's passphrase or
/// recovery key, then syncs. A wrong passphrase or recovery key changes nothing here.
pub fn unlock(engine: &mut Engine, secret: &e2ee::Secret) -> SyncResult<Unlocked> {
    let (root, server) = signed_in(engine)?;
    let mut syncer = syncer(engine)?;
    check_e2ee_server(&syncer, &server)?;
    let blobs = wrapped_keys(&syncer, "nothing to unlock")?;
    let key = e2ee::unwrap_account_key(&blobs, secret)?;
    Settings::update(&sync::sync_dir(&root), |s| {
        s.e2ee_ended = false;
        s.e2ee_replaced_kid = None;
    })?;
    // While a rotation is under way the previous key comes too: scopes still under it are
    // read with it before they move.
    let previous = match blobs.previous.as_deref() {
        Some(b) => e2ee::unwrap_under(b, &key)?,
        None => None,
    };
    if let Some(p) = &previous {
        e2ee::store_previous_key(&root, &server, p)?;
    }
    let keychain = e2ee::store_key(&root, &server, &key)?.to_string();
    syncer.set_account_key(Some(&key));
    syncer.set_previous_key(previous.as_ref());
    let scopes = passes(&mut syncer, engine);
    Ok(Unlocked { keychain, scopes })
}

/// What rotating the account key did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rotated {
    /// The new recovery key, shown this once; the one before no longer unlocks.
    pub recovery_key: String,
    /// The new account key's id.
    pub kid: String,
    /// Where this machine keeps the account key.
    pub keychain: String,
    /// Machines holding only the previous key were locked out: each unlocks again.
    pub locked_out: bool,
    /// No scope of the account holds anything under the previous key any more. False while
    /// scopes synced only from other machines wait for one of them to sync.
    pub complete: bool,
    /// The passes that moved each scope (synced with the previous key, re-uploaded under the
    /// new one, then what was under the previous key removed from the server).
    pub scopes: Vec<ScopePass>,
}

/// Replaces the account key with a new one and re-encrypts every scope under it: the
/// passphrase (checked against the account's blob: a wrong one changes nothing) wraps the new
/// key, and a new recovery key replaces the old one. The server keeps the previous key wrapped
/// under the new one until no scope holds anything under it, and, unless `lock_out`, the new
/// key wrapped under the previous one, so machines holding only the previous key follow at
/// their next sync; with `lock_out` they must unlock again (a lost or stolen machine keeps
/// nothing that reads the notes from then on). Each scope is synced once with the previous key,
/// moved to the new key, uploaded again and then purged of what was under the previous key.
/// Resumable: run again after an interruption it continues the rotation under way (with a
/// new recovery key, since the one made before may never have been shown), and any machine's
/// next sync moves the scopes it syncs.
pub fn rotate_key(engine: &mut Engine, passphrase: &str, lock_out: bool) -> SyncResult<Rotated> {
    let (root, server) = signed_in(engine)?;
    let mut syncer = syncer(engine)?;
    check_e2ee_server(&syncer, &server)?;
    let blobs = wrapped_keys(&syncer, "no key to rotate")?;
    let current = e2ee::unwrap_account_key(&blobs, &Secret::Passphrase(passphrase.to_owned()))?;
    let under_way = match blobs.previous.as_deref() {
        Some(b) => e2ee::unwrap_under(b, &current)?,
        None => None,
    };
    let (key, previous, recovery) = match under_way {
        Some(previous) => {
            // A rotation under way (begun here or elsewhere) goes on under its key.
            let (recovery, mut next) = e2ee::new_recovery(&current, &blobs)?;
            if lock_out {
                next.successor = None;
            }
            e2ee::store_previous_key(&root, &server, &previous)?;
            syncer.client().put_e2ee_keys(&next)?;
            (current, previous, recovery)
        }
        None => {
            let (key, recovery, next) = e2ee::rotation(&current, passphrase, lock_out)?;
            // Both keys are kept here before the server hears of the new one, so an
            // interruption never leaves this machine without the key its scopes are under,
            // and its next pass takes up the new key if the server took it.
            e2ee::store_previous_key(&root, &server, &current)?;
            e2ee::store_next_key(&root, &server, &key)?;
            syncer.client().put_e2ee_keys(&next)?;
            (key, current, recovery)
        }
    };
    let keychain = e2ee::store_key(&root, &server, &key)?.to_string();
    e2ee::forget_next_key(&root, &server)?;
    let locked_out = syncer
        .client()
        .e2ee_keys()?
        .is_some_and(|k| k.successor.is_none());
    syncer.set_account_key(Some(&key));
    syncer.set_previous_key(Some(&previous));
    let scopes = passes(&mut syncer, engine);
    let complete = syncer
        .client()
        .e2ee_keys()?
        .is_some_and(|k| k.previous.is_none());
    if complete {
        e2ee::forget_previous_key(&root, &server)?;
    }
    Ok(Rotated {
        recovery_key: recovery.to_text().to_string(),
        kid: key.derive().key_id().as_str().to_owned(),
        keychain,
        locked_out,
        complete,
        scopes,
    })
}

/// What turning end-to-end encryption off did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decrypted {
    /// No scope of the account is encrypted any more: the wrapped keys are gone from the
    /// server and this machine no longer keeps the account key. False while scopes synced
    /// only from other machines wait for one of them to sync.
    pub complete: bool,
    /// The passes that took each scope back (a last encrypted pass, the scope unmarked, every
    /// note uploaded again in plaintext, then the envelopes removed from the server).
    pub scopes: Vec<ScopePass>,
}

/// Turns end-to-end encryption off for the signed-in account, on the user's explicit request:
/// the server is told (from then on no scope is marked encrypted), then each scope this
/// machine syncs goes back to plaintext — one last encrypted pass so this machine holds what
/// the cloud has, the scope unmarked, every note uploaded again in plaintext, and only then
/// its envelopes purged. The server removes the wrapped keys once no scope is encrypted, and
/// this machine forgets the account key. Needs the key (an unlocked machine); refused while a
/// rotation is under way. Resumable: run again, or any pass, continues where it stopped.
pub fn decrypt(engine: &mut Engine) -> SyncResult<Decrypted> {
    let (root, server) = signed_in(engine)?;
    let mut syncer = syncer(engine)?;
    check_e2ee_server(&syncer, &server)?;
    if held_key(&root, &server, &Settings::load(&sync::sync_dir(&root))?)? == HeldKey::Replaced {
        return Err(SyncError::E2ee {
            code: crate::error::ErrorCode::E2eeLocked,
            message: "the key this machine holds was replaced on another machine, so it cannot read the encrypted notes before they go back to plaintext: unlock this machine first".into(),
        });
    }
    let Some(key) = e2ee::load_key(&root, &server)? else {
        let code = match syncer.client().e2ee_keys()? {
            Some(_) => crate::error::ErrorCode::E2eeLocked,
            None => crate::error::ErrorCode::InvalidInput,
        };
        return Err(SyncError::E2ee {
            code,
            message: match code {
                crate::error::ErrorCode::E2eeLocked => "this machine does not hold the account key, which reads the encrypted notes before they go back to plaintext: unlock it first".into(),
                _ => "this account's notes are not end-to-end encrypted: there is nothing to turn off".into(),
            },
        });
    };
    let kid = key.derive().key_id().as_str().to_owned();
    // Recorded here first: a pass that finds it tells the server again if this process ends
    // before the server heard it, so an interruption never leaves the request half made.
    let dir = sync::sync_dir(&root);
    Settings::update(&dir, |s| s.e2ee_turning_off = true)?;
    if syncer.client().e2ee_keys()?.is_some() {
        let proof = e2ee::off_proof(&key)?;
        if let Err(e) = syncer.client().e2ee_off(&OffRequest { kid, proof }) {
            Settings::update(&dir, |s| s.e2ee_turning_off = false)?;
            return Err(e);
        }
    }
    let scopes = passes(&mut syncer, engine);
    let complete = syncer.client().e2ee_keys()?.is_none();
    if complete {
        e2ee::forget_key(&root, &server)?;
        e2ee::forget_previous_key(&root, &server)?;
        Settings::update(&sync::sync_dir(&root), |s| {
            s.e2ee_turning_off = false;
            s.e2ee_ended = false;
        })?;
    }
    Ok(Decrypted { complete, scopes })
}

/// End-to-end encryption as the signed-in account and this machine have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct E2eeState {
    /// The server keeps end-to-end encrypted notes (feature `e2ee`).
    pub supported: bool,
    /// The account's notes are end-to-end encrypted: its wrapped key is on the server.
    pub account_encrypted: bool,
    /// This machine holds the account key. Encrypted but not unlocked is the `e2ee_locked`
    /// state: nothing syncs until [`unlock`].
    pub unlocked: bool,
    /// Locked because the key this machine holds was replaced on another machine, which
    /// locked the others out: the passphrase or the new recovery key unlocks it.
    pub key_replaced: bool,
}

/// What this machine holds of the account key for `server`, as its passes left it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeldKey {
    None,
    /// Held, and no pass found it replaced.
    Current,
    /// Held, and a pass found the account's key replaced on another machine with no way from
    /// this one to the new key (a rotation that locked the other machines out).
    Replaced,
}

fn held_key(root: &std::path::Path, server: &str, s: &Settings) -> SyncResult<HeldKey> {
    let Some(key) = e2ee::load_key(root, server)? else {
        return Ok(HeldKey::None);
    };
    let replaced = s.e2ee_replaced_kid.as_deref() == Some(key.derive().key_id().as_str());
    Ok(match replaced {
        true => HeldKey::Replaced,
        false => HeldKey::Current,
    })
}

/// Whether the signed-in account is end-to-end encrypted and this machine holds its key.
///
/// A machine that holds a key answers without asking the server, from what its passes found:
/// the key is current unless a pass was refused because the account's key was replaced on
/// another machine and the key held here no longer leads to the new one (a rotation with
/// `--lock-out`); that pass recorded the held key's id, and the machine is then locked
/// (`key_replaced`) until it holds another key. So a rotation made elsewhere shows here at
/// this machine's next pass (the app's background sync, or `sync now`). A machine that holds
/// no key asks the server whether the account is encrypted.
pub fn e2ee_state(engine: &Engine) -> SyncResult<E2eeState> {
    let root = engine.home().root();
    let settings = Settings::load(&sync::sync_dir(root))?;
    let server = settings.server.clone().ok_or(SyncError::NotSignedIn)?;
    let held = held_key(root, &server, &settings)?;
    if held != HeldKey::None {
        return Ok(E2eeState {
            supported: true,
            account_encrypted: true,
            unlocked: held == HeldKey::Current,
            key_replaced: held == HeldKey::Replaced,
        });
    }
    let syncer = syncer(engine)?;
    let supported = syncer.client().identity()?.supports(FEATURE_E2EE);
    let account_encrypted = supported && syncer.client().e2ee_keys()?.is_some();
    Ok(E2eeState {
        supported,
        account_encrypted,
        unlocked: false,
        key_replaced: false,
    })
}

/// Whether a rotation of the account key is under way as this machine knows it: it keeps the
/// previous key until no scope of the account holds anything under it. Answered from this
/// machine alone.
pub fn rotation_under_way(engine: &Engine) -> SyncResult<bool> {
    let root = engine.home().root();
    match Settings::load(&sync::sync_dir(root))?.server {
        Some(server) => Ok(e2ee::load_previous_key(root, &server)?.is_some()),
        None => Ok(false),
    }
}

/// This machine's home and the sync server it is signed in to.
fn signed_in(engine: &Engine) -> SyncResult<(std::path::PathBuf, String)> {
    let root = engine.home().root().to_path_buf();
    let server = Settings::load(&sync::sync_dir(&root))?
        .server
        .ok_or(SyncError::NotSignedIn)?;
    Ok((root, server))
}

/// The account's wrapped keys; `InvalidInput` naming `what` there is not when the account is
/// not end-to-end encrypted.
fn wrapped_keys(syncer: &Syncer, what: &str) -> SyncResult<E2eeKeys> {
    syncer.client().e2ee_keys()?.ok_or_else(|| SyncError::E2ee {
        code: crate::error::ErrorCode::InvalidInput,
        message: format!(
            "this account's notes are not end-to-end encrypted: there is {what} (turn encryption \
             on instead)"
        ),
    })
}

fn check_e2ee_server(syncer: &Syncer, server: &str) -> SyncResult<()> {
    let id = syncer.client().identity()?;
    if !id.supports(FEATURE_E2EE) {
        return Err(SyncError::E2ee {
            code: crate::error::ErrorCode::ServerError,
            message: format!(
                "the sync server at {server} does not keep end-to-end encrypted notes: update it (memoria-sync) first"
            ),
        });
    }
    Ok(())
}

/// A paused pass waiting for the user, with what it found in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    #[serde(flatten)]
    pub pending: Pending,
    /// What was found, that nothing was synced, and what each choice does.
    pub message: String,
}

/// One synced scope's state.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeSyncStatus {
    pub scope: String,
    /// The scope syncs: sync is on, the scope's own switch is on, signed in, and no pass
    /// waits for the user.
    pub on: bool,
    /// The scope's own switch on this machine.
    pub enabled: bool,
    /// When the scope was last fully synced (ms since the epoch).
    pub last_synced_ms: Option<i64>,
    /// The last pass's error, naming the scope; cleared by a successful pass.
    pub last_error: Option<String>,
    /// What the last download added, changed and deleted here.
    pub last_download: DownloadCounts,
    /// The server's limits, as last reported.
    pub quotas: Option<Quotas>,
    /// Notes held back by conflicts or refusals.
    pub held_back: Vec<String>,
    /// Unresolved conflicts.
    pub conflicts: usize,
    /// The account and server the scope was first synced with.
    pub pin: Option<Pin>,
    /// The scope was synced at another address than the one signed in to: its sync is
    /// paused until it is re-pointed (or that address is signed in to again).
    pub address_changed: bool,
    /// A paused pass waiting for the user.
    pub pending: Option<Waiting>,
    /// The background syncers running on this home (`memoria watch`, `memoria mcp`, the
    /// app) and when the next of them tries this scope; `None`: none runs, so nothing tries
    /// again until a sync is asked for.
    pub background: Option<Background>,
}

/// The background syncers of a scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Background {
    /// How many processes sync the scope in the background.
    pub processes: usize,
    /// When the next of them tries it (ms since the epoch); `None`: none will until a note
    /// is written here or a sync is asked for (the last pass needs the user).
    pub next_attempt_ms: Option<i64>,
}

/// Cloud sync as a whole and per scope.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    pub on: bool,
    /// The server signed in to; `None`: not signed in.
    pub server: Option<String>,
    /// The oldest of the scopes' last syncs; `None` when a scope never synced.
    pub last_synced_ms: Option<i64>,
    /// The server asked to slow down: no pass before this (ms since the epoch).
    pub paused_until_ms: Option<i64>,
    pub include_secrets: bool,
    /// This machine holds the account key: its notes sync end-to-end encrypted.
    pub encrypted: bool,
    /// The key this machine holds was replaced on another machine, which locked the others
    /// out (as this machine's last pass found, [`e2ee_state`]): nothing syncs until it is
    /// unlocked with the passphrase or the new recovery key.
    pub encryption_locked: bool,
    /// End-to-end encryption is being turned off for the account: each scope goes back to
    /// plaintext at its next pass.
    pub encryption_turning_off: bool,
    /// A pass found end-to-end encryption turned off for the account (from another machine):
    /// this machine no longer keeps the account key, and its notes sync in plaintext.
    pub encryption_ended: bool,
    pub scopes: Vec<ScopeSyncStatus>,
}

/// The sync status roll-up: the switches, and each synced scope's last sync, last download,
/// conflicts, error, limits and what it waits for.
pub fn status(engine: &Engine) -> SyncResult<SyncStatus> {
    let dir = sync::sync_dir(engine.home().root());
    let s = Settings::load(&dir)?;
    let now = memoria_shared::Clock::now_ms(&SystemClock);
    let mut scopes = Vec::new();
    for scope in sync::synced_scopes(engine) {
        let running = ScopeDir::new(&dir, &scope.key()).next_passes().running(now);
        let background = (!running.is_empty()).then(|| Background {
            processes: running.len(),
            next_attempt_ms: running.iter().filter_map(|p| p.at_ms).min(),
        });
        let sd = ScopeDir::of(engine, &scope)?;
        let st = sd.load_status()?;
        let pending = sd.pending()?.map(|p| Waiting {
            message: p.message(),
            pending: p,
        });
        scopes.push(ScopeSyncStatus {
            on: s.scope_on(&scope.key()) && s.server.is_some() && pending.is_none(),
            enabled: !s.off_scopes.contains(&scope.key()),
            conflicts: sd.conflicts()?.len(),
            pin: s.pins.get(&scope.key()).cloned(),
            address_changed: s
                .pins
                .get(&scope.key())
                .zip(s.server.as_ref())
                .is_some_and(|(p, server)| p.server != *server),
            scope: scope.key(),
            last_synced_ms: st.last_synced_ms,
            last_error: st.last_error,
            last_download: st.last_download,
            quotas: st.quotas,
            held_back: st.held_back,
            pending,
            background,
        });
    }
    let last_synced_ms = scopes
        .iter()
        .map(|sc| sc.last_synced_ms)
        .try_fold(i64::MAX, |acc, t| t.map(|t| acc.min(t)))
        .filter(|_| !scopes.is_empty());
    let held = match &s.server {
        Some(server) => held_key(engine.home().root(), server, &s)?,
        None => HeldKey::None,
    };
    let encrypted = held == HeldKey::Current;
    Ok(SyncStatus {
        encrypted,
        encryption_locked: held == HeldKey::Replaced,
        encryption_turning_off: encrypted && s.e2ee_turning_off,
        encryption_ended: !encrypted && s.e2ee_ended,
        on: s.is_on(),
        server: s.server,
        last_synced_ms,
        paused_until_ms: s.paused_until_ms,
        include_secrets: s.include_secrets,
        scopes,
    })
}

#[cfg(test)]
mod tests {
    use memoria_shared::e2ee::AccountKey;

    use super::*;
    use crate::vault::OpenOptions;

    #[test]
    fn a_rotation_is_under_way_while_this_machine_keeps_a_previous_key_other_than_its_own() {
        let tmp = tempfile::tempdir().unwrap();
        let engine = Engine::open(OpenOptions::without_model(tmp.path())).unwrap();
        let root = engine.home().root().to_path_buf();
        assert!(!rotation_under_way(&engine).unwrap(), "signed out");
        let server = "http://127.0.0.1:9/rotation-under-way-test";
        set_server(&engine, Some(server)).unwrap();
        let (current, previous) = (
            AccountKey::from_bytes([1; 32]),
            AccountKey::from_bytes([2; 32]),
        );
        e2ee::store_key(&root, server, &current).unwrap();
        assert!(
            !rotation_under_way(&engine).unwrap(),
            "the account key alone"
        );
        e2ee::store_previous_key(&root, server, &previous).unwrap();
        assert!(rotation_under_way(&engine).unwrap());
        // A previous key that is the account key itself is no rotation.
        e2ee::store_previous_key(&root, server, &current).unwrap();
        assert!(!rotation_under_way(&engine).unwrap());
        e2ee::store_previous_key(&root, server, &previous).unwrap();
        e2ee::forget_previous_key(&root, server).unwrap();
        assert!(!rotation_under_way(&engine).unwrap(), "finished");
        e2ee::forget_key(&root, server).unwrap();
    }

    /// The state a machine holding a key shows comes from this machine alone: the server's
    /// address here reaches nothing, so any request would fail.
    #[test]
    fn a_held_key_a_pass_found_replaced_is_locked_until_another_key_is_held() {
        let tmp = tempfile::tempdir().unwrap();
        let engine = Engine::open(OpenOptions::without_model(tmp.path())).unwrap();
        let root = engine.home().root().to_path_buf();
        let server = "http://127.0.0.1:9/replaced-key-test";
        set_server(&engine, Some(server)).unwrap();
        let (old, new) = (
            AccountKey::from_bytes([3; 32]),
            AccountKey::from_bytes([4; 32]),
        );
        let shown = |engine: &Engine| {
            let st = status(engine).unwrap();
            let e = e2ee_state(engine).unwrap();
            assert!(e.supported && e.account_encrypted, "{e:?}");
            assert_eq!(st.encrypted, e.unlocked, "{st:?} {e:?}");
            assert_eq!(st.encryption_locked, e.key_replaced, "{st:?} {e:?}");
            (e.unlocked, e.key_replaced)
        };
        e2ee::store_key(&root, server, &old).unwrap();
        assert_eq!(shown(&engine), (true, false));
        let dir = sync::sync_dir(&root);
        Settings::update(&dir, |s| {
            s.e2ee_replaced_kid = Some(old.derive().key_id().as_str().to_owned())
        })
        .unwrap();
        assert_eq!(shown(&engine), (false, true), "locked out");
        // Unlocked again: the key held is another one, whatever the record says.
        e2ee::store_key(&root, server, &new).unwrap();
        assert_eq!(shown(&engine), (true, false));
        e2ee::forget_key(&root, server).unwrap();
    }
}
