//! Where the sync token lives. In a keychain where one keeps it across processes and restarts:
//! the desktop's Secret Service on Linux (GNOME Keyring, KWallet) when a session bus is there,
//! Keychain on macOS, Credential Manager on Windows. Where none does (a headless machine, a
//! server, an ssh session, a CI runner), in a file readable only by the user,
//! `$MEMORIA_HOME/sync/credentials.json` (0600 in a 0700 folder), as well-kept CLIs do: it is
//! machine-local state that sync never uploads and export never copies. The kernel keyring is
//! not used: its keys sit in a session keyring another login session does not see, and a
//! reboot empties it. `MEMORIA_SYNC_TOKEN` overrides every store.
//!
//! A token counts as stored only once a fresh read from the store gives it back: a new keychain
//! entry asks the keychain's daemon again, and the file is read again from disk, as another
//! process would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::client::Token;
use super::error::{SyncError, SyncResult};
use super::settings::{read_json, sync_dir, write_json};
use crate::fsx;

/// The environment variable that supplies (or overrides) the token.
pub const TOKEN_ENV: &str = "MEMORIA_SYNC_TOKEN";

const SERVICE: &str = "memoria-sync";

/// A place a token can be kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenStore {
    /// The freedesktop Secret Service over the D-Bus session bus (Linux desktops).
    SecretService,
    /// The platform's own (macOS Keychain, Windows Credential Manager).
    Platform,
    /// `$MEMORIA_HOME/sync/credentials.json`, readable only by the user.
    File(PathBuf),
}

impl std::fmt::Display for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenStore::SecretService => f.write_str("the Secret Service keychain"),
            TokenStore::Platform => f.write_str("the OS keychain"),
            TokenStore::File(p) => write!(f, "{} (readable only by you)", p.display()),
        }
    }
}

/// Where a home's token file is.
pub fn token_file(home_root: &Path) -> PathBuf {
    sync_dir(home_root).join("credentials.json")
}

/// The stores to use for a home, the first one preferred: a keychain when this machine has
/// one, then the file.
pub fn stores(home_root: &Path) -> Vec<TokenStore> {
    let mut v = Vec::new();
    if cfg!(target_os = "linux") {
        if session_bus() {
            v.push(TokenStore::SecretService);
        }
    } else {
        v.push(TokenStore::Platform);
    }
    v.push(TokenStore::File(token_file(home_root)));
    v
}

/// Whether a D-Bus session bus is there to ask (as zbus finds it).
fn session_bus() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty())
        || std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| Path::new(&d).join("bus").exists())
}

/// The token file: one token per server.
#[derive(Debug, Default, Serialize, Deserialize)]
struct TokenFile {
    tokens: BTreeMap<String, String>,
}

fn server_key(server: &str) -> String {
    server.trim_end_matches('/').to_owned()
}

/// One store's answer: `Ok(None)` when it works and holds no token for the server.
fn get(store: &TokenStore, home_root: &Path, server: &str) -> Result<Option<String>, String> {
    match store {
        TokenStore::File(path) => match read_json::<TokenFile>(path) {
            Ok(f) => Ok(f.and_then(|mut f| f.tokens.remove(&server_key(server)))),
            Err(e) => Err(e.to_string()),
        },
        kc => match entry(kc, home_root, server).and_then(|e| e.get_password()) {
            Ok(t) => Ok(Some(t)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(e.to_string()),
        },
    }
}

fn set(store: &TokenStore, home_root: &Path, server: &str, token: &Token) -> Result<(), String> {
    match store {
        TokenStore::File(path) => edit_file(path, |f| {
            f.tokens
                .insert(server_key(server), token.expose().to_owned());
        }),
        kc => entry(kc, home_root, server)
            .and_then(|e| e.set_password(token.expose()))
            .map_err(|e| e.to_string()),
    }
}

fn delete(store: &TokenStore, home_root: &Path, server: &str) -> Result<(), String> {
    match store {
        TokenStore::File(path) => {
            if !path.exists() {
                return Ok(());
            }
            edit_file(path, |f| {
                f.tokens.remove(&server_key(server));
            })
        }
        kc => match entry(kc, home_root, server).and_then(|e| e.delete_credential()) {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(e.to_string()),
        },
    }
}

/// Reads, changes and writes the token file, private to the user; an empty one is removed.
fn edit_file(path: &Path, change: impl FnOnce(&mut TokenFile)) -> Result<(), String> {
    let result = (|| -> SyncResult<()> {
        if let Some(dir) = path.parent() {
            fsx::private_dir(dir)?;
        }
        let mut f = read_json::<TokenFile>(path)?.unwrap_or_default();
        change(&mut f);
        if f.tokens.is_empty() {
            fsx::remove(path)?;
        } else {
            write_json(path, &f)?;
            fsx::private_file(path)?;
        }
        Ok(())
    })();
    result.map_err(|e| e.to_string())
}

/// One keychain entry per home and server, so two homes on one machine stay apart.
fn entry(kc: &TokenStore, home_root: &Path, server: &str) -> keyring::Result<keyring::Entry> {
    let account = format!("{}|{}", home_root.display(), server_key(server));
    match kc {
        #[cfg(target_os = "linux")]
        TokenStore::SecretService => Ok(keyring::Entry::new_with_credential(Box::new(
            keyring::secret_service::SsCredential::new_with_target(None, SERVICE, &account)?,
        ))),
        _ => keyring::Entry::new(SERVICE, &account),
    }
}

fn unavailable(errors: Vec<String>) -> SyncError {
    SyncError::Keychain(errors.join("; "))
}

/// Stores `token` in the first store that gives it back on a fresh read, and removes copies
/// from the others this machine can reach (a token stays in one place); says where it is.
pub fn store(home_root: &Path, server: &str, token: &Token) -> SyncResult<TokenStore> {
    let all = stores(home_root);
    let mut errors = Vec::new();
    for (i, s) in all.iter().enumerate() {
        let kept =
            set(s, home_root, server, token).and_then(|()| match get(s, home_root, server)? {
                Some(t) if t == token.expose() => Ok(()),
                Some(_) => Err("a fresh read gave another token back".to_owned()),
                None => Err("a fresh read found no token".to_owned()),
            });
        match kept {
            Ok(()) => {
                for other in all.iter().skip(i + 1) {
                    let _ = delete(other, home_root, server);
                }
                return Ok(s.clone());
            }
            Err(e) => {
                let _ = delete(s, home_root, server);
                errors.push(format!("{s}: {e}"));
            }
        }
    }
    Err(unavailable(errors))
}

/// Where the token comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// `MEMORIA_SYNC_TOKEN`.
    Environment,
    Store(TokenStore),
}

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::Environment => write!(f, "{TOKEN_ENV} in the environment"),
            TokenSource::Store(s) => s.fmt(f),
        }
    }
}

/// The token and where it came from: `MEMORIA_SYNC_TOKEN` when set, else the first store that
/// has one.
pub fn find(
    home_root: &Path,
    server: &str,
    env: Option<String>,
) -> SyncResult<(Token, TokenSource)> {
    if let Some(t) = env.filter(|t| !t.trim().is_empty()) {
        return Ok((Token::new(t), TokenSource::Environment));
    }
    let mut errors = Vec::new();
    let mut answered = false;
    for s in stores(home_root) {
        match get(&s, home_root, server) {
            Ok(Some(t)) => return Ok((Token::new(t), TokenSource::Store(s))),
            Ok(None) => answered = true,
            Err(e) => errors.push(format!("{s}: {e}")),
        }
    }
    // A store that works but holds nothing: sign in. None working: say so.
    Err(if answered {
        SyncError::NoToken
    } else {
        unavailable(errors)
    })
}

/// The token: `MEMORIA_SYNC_TOKEN` when set, else the first store's that has one.
pub fn load(home_root: &Path, server: &str, env: Option<String>) -> SyncResult<Token> {
    find(home_root, server, env).map(|(t, _)| t)
}

/// Removes the token from every store (nothing stored is fine); fails only when no store
/// could be asked.
pub fn forget(home_root: &Path, server: &str) -> SyncResult<()> {
    let mut errors = Vec::new();
    let mut answered = false;
    for s in stores(home_root) {
        match delete(&s, home_root, server) {
            Ok(()) => answered = true,
            Err(e) => errors.push(format!("{s}: {e}")),
        }
    }
    if answered {
        Ok(())
    } else {
        Err(unavailable(errors))
    }
}

/// The token in `MEMORIA_SYNC_TOKEN`, which overrides the stored one: what a front end hands
/// its session (`SessionOptions::sync_token`).
pub fn env_token() -> Option<String> {
    std::env::var(TOKEN_ENV).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_overrides_and_a_store_round_trips() {
        let home = tempfile::tempdir().unwrap();
        let server = "http://127.0.0.1:1";
        let t = load(home.path(), server, Some("msync_env".into())).unwrap();
        assert_eq!(t.expose(), "msync_env");
        let kept = store(home.path(), server, &Token::new("msync_kc")).unwrap();
        let (t, from) = find(home.path(), &format!("{server}/"), None).unwrap();
        assert_eq!(t.expose(), "msync_kc");
        assert_eq!(from, TokenSource::Store(kept));
        forget(home.path(), server).unwrap();
        assert!(matches!(
            load(home.path(), server, None),
            Err(SyncError::NoToken)
        ));
    }

    #[cfg(unix)]
    #[test]
    fn the_token_file_is_private_keeps_one_token_per_server_and_goes_when_empty() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let file = TokenStore::File(token_file(home.path()));
        set(&file, home.path(), "http://a/", &Token::new("ta")).unwrap();
        set(&file, home.path(), "http://b", &Token::new("tb")).unwrap();
        let path = token_file(home.path());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(
            get(&file, home.path(), "http://a").unwrap().as_deref(),
            Some("ta")
        );
        assert_eq!(
            get(&file, home.path(), "http://b").unwrap().as_deref(),
            Some("tb")
        );
        delete(&file, home.path(), "http://a").unwrap();
        assert_eq!(get(&file, home.path(), "http://a").unwrap(), None);
        delete(&file, home.path(), "http://b").unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn the_file_is_the_last_store_and_linux_asks_the_secret_service_only_with_a_session_bus() {
        let home = tempfile::tempdir().unwrap();
        let s = stores(home.path());
        assert_eq!(s.last(), Some(&TokenStore::File(token_file(home.path()))));
        if cfg!(target_os = "linux") {
            assert_eq!(s.contains(&TokenStore::SecretService), session_bus());
            assert_eq!(s[0] == TokenStore::SecretService, session_bus());
        } else {
            assert_eq!(s[0], TokenStore::Platform);
        }
    }
}
