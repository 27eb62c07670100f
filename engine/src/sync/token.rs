//! Where the sync token lives: the OS keychain (keyring), never a config file. On Linux that is
//! the desktop's Secret Service (GNOME Keyring, KWallet) when a session bus is there, else the
//! kernel keyring (keyutils: works headless, emptied at reboot); Keychain on macOS, Credential
//! Manager on Windows. Headless machines without any set `MEMORIA_SYNC_TOKEN`, which also
//! overrides the keychain.

use std::path::Path;

use super::client::Token;
use super::error::{SyncError, SyncResult};

/// The environment variable that supplies (or overrides) the token.
pub const TOKEN_ENV: &str = "MEMORIA_SYNC_TOKEN";

const SERVICE: &str = "memoria-sync";

/// A keychain a token can live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keychain {
    /// The freedesktop Secret Service over the D-Bus session bus (Linux desktops).
    SecretService,
    /// The Linux kernel's key store (keyutils).
    KernelKeyring,
    /// The platform's own (macOS Keychain, Windows Credential Manager).
    Platform,
}

impl std::fmt::Display for Keychain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Keychain::SecretService => "the Secret Service keychain",
            Keychain::KernelKeyring => "the kernel keyring",
            Keychain::Platform => "the OS keychain",
        })
    }
}

/// The keychains to use, most durable first.
pub fn keychains() -> Vec<Keychain> {
    if cfg!(target_os = "linux") {
        let mut v = Vec::new();
        if session_bus() {
            v.push(Keychain::SecretService);
        }
        v.push(Keychain::KernelKeyring);
        v
    } else {
        vec![Keychain::Platform]
    }
}

/// Whether a D-Bus session bus is there to ask (as zbus finds it).
fn session_bus() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty())
        || std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| Path::new(&d).join("bus").exists())
}

/// One keychain entry per home and server, so two homes on one machine stay apart.
fn entry(kc: Keychain, home_root: &Path, server: &str) -> keyring::Result<keyring::Entry> {
    let account = format!("{}|{}", home_root.display(), server.trim_end_matches('/'));
    match kc {
        #[cfg(target_os = "linux")]
        Keychain::SecretService => Ok(keyring::Entry::new_with_credential(Box::new(
            keyring::secret_service::SsCredential::new_with_target(None, SERVICE, &account)?,
        ))),
        #[cfg(target_os = "linux")]
        Keychain::KernelKeyring => Ok(keyring::Entry::new_with_credential(Box::new(
            keyring::keyutils::KeyutilsCredential::new_with_target(None, SERVICE, &account)?,
        ))),
        _ => keyring::Entry::new(SERVICE, &account),
    }
}

fn unavailable(errors: Vec<String>) -> SyncError {
    SyncError::Keychain(errors.join("; "))
}

/// Stores `token` in the first keychain that takes it; says which.
pub fn store(home_root: &Path, server: &str, token: &Token) -> SyncResult<Keychain> {
    let mut errors = Vec::new();
    for kc in keychains() {
        match entry(kc, home_root, server).and_then(|e| e.set_password(token.expose())) {
            Ok(()) => return Ok(kc),
            Err(e) => errors.push(format!("{kc}: {e}")),
        }
    }
    Err(unavailable(errors))
}

/// The token: `MEMORIA_SYNC_TOKEN` when set, else the first keychain's that has one.
pub fn load(home_root: &Path, server: &str, env: Option<String>) -> SyncResult<Token> {
    if let Some(t) = env.filter(|t| !t.trim().is_empty()) {
        return Ok(Token::new(t));
    }
    let mut errors = Vec::new();
    let mut answered = false;
    for kc in keychains() {
        match entry(kc, home_root, server).and_then(|e| e.get_password()) {
            Ok(t) => return Ok(Token::new(t)),
            Err(keyring::Error::NoEntry) => answered = true,
            Err(e) => errors.push(format!("{kc}: {e}")),
        }
    }
    // A keychain that works but holds nothing: sign in. None working: say so.
    Err(if answered {
        SyncError::NoToken
    } else {
        unavailable(errors)
    })
}

/// Removes the token from every keychain (nothing stored is fine).
pub fn forget(home_root: &Path, server: &str) -> SyncResult<()> {
    let mut errors = Vec::new();
    let mut answered = false;
    for kc in keychains() {
        match entry(kc, home_root, server).and_then(|e| e.delete_credential()) {
            Ok(()) | Err(keyring::Error::NoEntry) => answered = true,
            Err(e) => errors.push(format!("{kc}: {e}")),
        }
    }
    if answered {
        Ok(())
    } else {
        Err(unavailable(errors))
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
            Ok(_) => {
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

    #[test]
    fn linux_prefers_the_secret_service_only_with_a_session_bus() {
        let kcs = keychains();
        if cfg!(target_os = "linux") {
            assert_eq!(kcs.last(), Some(&Keychain::KernelKeyring));
            assert_eq!(kcs.contains(&Keychain::SecretService), session_bus());
            assert_eq!(kcs[0] == Keychain::SecretService, session_bus());
        } else {
            assert_eq!(kcs, vec![Keychain::Platform]);
        }
    }
}
