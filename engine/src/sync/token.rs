//! Where the sync token lives: the OS keychain (keyring), never a config file. Headless machines
//! without a keychain set `MEMORIA_SYNC_TOKEN`, which also overrides the keychain.

use std::path::Path;

use super::client::Token;
use super::error::{SyncError, SyncResult};

/// The environment variable that supplies (or overrides) the token.
pub const TOKEN_ENV: &str = "MEMORIA_SYNC_TOKEN";

const SERVICE: &str = "memoria-sync";

/// One keychain entry per home and server, so two homes on one machine stay apart.
fn entry(home_root: &Path, server: &str) -> SyncResult<keyring::Entry> {
    let account = format!("{}|{}", home_root.display(), server.trim_end_matches('/'));
    keyring::Entry::new(SERVICE, &account).map_err(|e| SyncError::Keychain(e.to_string()))
}

/// Stores `token` in the keychain.
pub fn store(home_root: &Path, server: &str, token: &Token) -> SyncResult<()> {
    entry(home_root, server)?
        .set_password(token.expose())
        .map_err(|e| SyncError::Keychain(e.to_string()))
}

/// The token: `MEMORIA_SYNC_TOKEN` when set, else the keychain's.
pub fn load(home_root: &Path, server: &str, env: Option<String>) -> SyncResult<Token> {
    if let Some(t) = env.filter(|t| !t.trim().is_empty()) {
        return Ok(Token::new(t));
    }
    match entry(home_root, server)?.get_password() {
        Ok(t) => Ok(Token::new(t)),
        Err(keyring::Error::NoEntry) => Err(SyncError::NoToken),
        Err(e) => Err(SyncError::Keychain(e.to_string())),
    }
}

/// Removes the token from the keychain (nothing stored is fine).
pub fn forget(home_root: &Path, server: &str) -> SyncResult<()> {
    match entry(home_root, server)?.delete_credential() {
        Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
        Err(e) => Err(SyncError::Keychain(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_overrides_and_keychain_round_trips_or_says_what_to_do() {
        let home = tempfile::tempdir().unwrap();
        let server = "http://127.0.0.1:1";
        let t = load(home.path(), server, Some("msync_env".into())).unwrap();
        assert_eq!(t.expose(), "msync_env");
        match store(home.path(), server, &Token::new("msync_kc")) {
            Ok(()) => {
                assert_eq!(
                    load(home.path(), server, None).unwrap().expose(),
                    "msync_kc"
                );
                forget(home.path(), server).unwrap();
                assert!(matches!(
                    load(home.path(), server, None),
                    Err(SyncError::NoToken)
                ));
            }
            // No keychain at all (a container without the kernel key store): the message
            // must point at the environment variable.
            Err(e) => assert!(e.to_string().contains(TOKEN_ENV), "{e}"),
        }
    }
}
