//! Sync settings under `$MEMORIA_HOME/sync/settings.json`: on/off, the server, and each scope's
//! pin (the first account + server it synced with). Written atomically under a lock so the CLI,
//! the desktop app and MCP servers sharing one home never lose each other's changes. The token
//! is never here (see [`super::token`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::error::{SyncError, SyncResult};
use crate::fsx::{self, FileLock};

/// The persisted settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// `None` until the first sign-in turns sync on; `Some(false)` once turned off, which then
    /// survives restarts and later sign-ins.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Base URL of the sync server.
    #[serde(default)]
    pub server: Option<String>,
    /// Scope key → the account and server it is pinned to.
    #[serde(default)]
    pub pins: BTreeMap<String, Pin>,
    /// After a 429, no request before this time (ms), for every scope. Never honoured further
    /// ahead than [`MAX_RETRY_AFTER_S`] (see [`Settings::paused_for_ms`]).
    #[serde(default)]
    pub paused_until_ms: Option<i64>,
    /// Upload notes tagged `contains-secrets` too (off: they stay on this machine).
    #[serde(default)]
    pub include_secrets: bool,
    /// Scopes whose sync is turned off on this machine while sync as a whole stays on: their
    /// notes stay local, and nothing of them is sent or received.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub off_scopes: BTreeSet<String>,
    /// End-to-end encryption is being turned off for the account (this machine asked for it,
    /// or learnt it from the server): each scope's next pass takes it back to plaintext.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub e2ee_turning_off: bool,
    /// This machine found end-to-end encryption turned off for the account and forgot the
    /// account key (said by `sync status` until encryption is turned on again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub e2ee_ended: bool,
    /// The key id of the account key this machine holds, as a pass found it replaced on
    /// another machine with no way from it to the new key (a rotation that locked the other
    /// machines out): this machine is locked while it holds that key, until it is unlocked
    /// with the passphrase or the new recovery key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2ee_replaced_kid: Option<String>,
}

/// The longest a server's Retry-After is honoured. A pause that reaches further ahead than
/// this can only come from a wall clock set backwards since it was recorded.
pub const MAX_RETRY_AFTER_S: u64 = 3_600;

/// The account and server a scope first synced with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    pub server: String,
    pub user_id: String,
    pub pinned_at_ms: i64,
}

/// `$MEMORIA_HOME/sync`.
pub fn sync_dir(home_root: &Path) -> PathBuf {
    home_root.join("sync")
}

impl Settings {
    fn path(dir: &Path) -> PathBuf {
        dir.join("settings.json")
    }

    /// Reads the settings (defaults when there are none yet).
    pub fn load(dir: &Path) -> SyncResult<Settings> {
        read_json(&Self::path(dir)).map(Option::unwrap_or_default)
    }

    /// Loads and changes the settings under the settings lock, saving them when they changed.
    pub fn update<T>(dir: &Path, f: impl FnOnce(&mut Settings) -> T) -> SyncResult<T> {
        let _lock = FileLock::acquire(&dir.join("settings.lock"))?;
        let mut s = Self::load(dir)?;
        let before = s.clone();
        let out = f(&mut s);
        // Every pass checks its scope's pin through here: most change nothing.
        if s != before || !Self::path(dir).exists() {
            write_json(&Self::path(dir), &s)?;
        }
        Ok(out)
    }

    /// Whether sync may send requests.
    pub fn is_on(&self) -> bool {
        self.enabled == Some(true)
    }

    /// Whether `scope` (a scope key) syncs: sync is on and the scope is not turned off.
    pub fn scope_on(&self, scope: &str) -> bool {
        self.is_on() && !self.off_scopes.contains(scope)
    }

    /// Records a 429's pause from `now_ms`, capped at [`MAX_RETRY_AFTER_S`].
    pub fn pause(&mut self, retry_after_s: u64, now_ms: i64) {
        let until = now_ms + retry_after_s.min(MAX_RETRY_AFTER_S) as i64 * 1000;
        self.paused_until_ms = Some(match self.paused_for_ms(now_ms) {
            Some(_) => self.paused_until_ms.unwrap_or(0).max(until),
            None => until,
        });
    }

    /// How long requests still wait after a 429, at `now_ms`. A recorded pause further ahead
    /// than [`MAX_RETRY_AFTER_S`] was recorded by a clock that has since been set back, and
    /// no longer holds anything.
    pub fn paused_for_ms(&self, now_ms: i64) -> Option<i64> {
        let left = self.paused_until_ms? - now_ms;
        (left > 0 && left <= MAX_RETRY_AFTER_S as i64 * 1000).then_some(left)
    }

    /// Pins `scope` to (`server`, `user`) on first use; refuses a different account or server.
    pub fn check_pin(
        &mut self,
        scope: &str,
        server: &str,
        user: &str,
        now_ms: i64,
    ) -> SyncResult<()> {
        match self.pins.get(scope) {
            None => {
                self.pins.insert(
                    scope.to_owned(),
                    Pin {
                        server: server.to_owned(),
                        user_id: user.to_owned(),
                        pinned_at_ms: now_ms,
                    },
                );
                Ok(())
            }
            Some(p) if p.server == server && p.user_id == user => Ok(()),
            Some(p) => Err(SyncError::Pinned {
                scope: scope.to_owned(),
                pinned_user: p.user_id.clone(),
                pinned_server: p.server.clone(),
                user: user.to_owned(),
                server: server.to_owned(),
            }),
        }
    }
}

/// Reads a JSON file; `None` when it does not exist.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> SyncResult<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| SyncError::State {
                path: path.display().to_string(),
                reason: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(crate::Error::io("read", path)(e).into()),
    }
}

/// Writes a JSON file atomically, laid out for a person to read.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> SyncResult<()> {
    let bytes = serde_json::to_vec_pretty(value)
        .map_err(|e| crate::Error::Internal(format!("encoding {}: {e}", path.display())))?;
    fsx::write_atomic(path, &bytes)?;
    Ok(())
}

/// The large JSON files of per-note entries a pass reads and rewrites (a scope's sync state,
/// its fingerprint cache), as this process last read or wrote each, by path, with its bytes:
/// a file that still holds the same bytes holds the same value, and is not parsed again. A
/// pass reads its scope's state more than once, a long-running process passes every minute,
/// and at thousands of notes parsing is most of what reading costs. Written on one line.
pub(crate) struct ParsedFiles<T>(LazyLock<Mutex<Parsed<T>>>);

/// Each file's bytes as last read or written, and the value they hold.
type Parsed<T> = HashMap<PathBuf, (Vec<u8>, Arc<T>)>;

impl<T: Serialize + serde::de::DeserializeOwned> ParsedFiles<T> {
    pub(crate) const fn new() -> ParsedFiles<T> {
        ParsedFiles(LazyLock::new(Mutex::default))
    }

    fn lock(&self) -> MutexGuard<'_, Parsed<T>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The value at `path`; `None` when there is no file.
    pub(crate) fn read(&self, path: &Path) -> SyncResult<Option<Arc<T>>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(crate::Error::io("read", path)(e).into()),
        };
        if let Some((known, value)) = self.lock().get(path)
            && *known == bytes
        {
            return Ok(Some(value.clone()));
        }
        let value: Arc<T> =
            Arc::new(
                serde_json::from_slice(&bytes).map_err(|e| SyncError::State {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })?,
            );
        self.lock()
            .insert(path.to_path_buf(), (bytes, value.clone()));
        Ok(Some(value))
    }

    /// Writes `value` to `path` atomically; `value` must be what parsing the file gives back
    /// (no field skipped when written). Returns it as [`ParsedFiles::read`] would.
    pub(crate) fn write(&self, path: &Path, value: T) -> SyncResult<Arc<T>> {
        let bytes = serde_json::to_vec(&value)
            .map_err(|e| crate::Error::Internal(format!("encoding {}: {e}", path.display())))?;
        // Forgotten first: should the write fail, the file is parsed again when next read.
        self.lock().remove(path);
        fsx::write_atomic(path, &bytes)?;
        let value = Arc::new(value);
        self.lock()
            .insert(path.to_path_buf(), (bytes, value.clone()));
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_file_changed_by_another_process_is_read_again() {
        static FILES: ParsedFiles<BTreeMap<String, u32>> = ParsedFiles::new();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert_eq!(FILES.read(&path).unwrap(), None);
        FILES
            .write(&path, BTreeMap::from([("a".to_owned(), 1)]))
            .unwrap();
        assert_eq!(FILES.read(&path).unwrap().unwrap()["a"], 1);
        // Another process (or a hand) replaces it, even with the same length: what the file
        // holds now is what is read.
        std::fs::write(&path, r#"{"a":2}"#).unwrap();
        assert_eq!(FILES.read(&path).unwrap().unwrap()["a"], 2);
        // Unparsable, it is an error naming the file, never the value kept before.
        std::fs::write(&path, "{").unwrap();
        let err = FILES.read(&path).unwrap_err().to_string();
        assert!(err.contains("state.json"), "{err}");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(FILES.read(&path).unwrap(), None);
    }

    #[test]
    fn settings_persist_and_off_survives() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Settings::load(dir.path()).unwrap(), Settings::default());
        Settings::update(dir.path(), |s| {
            s.enabled = Some(false);
            s.server = Some("http://x".into());
        })
        .unwrap();
        let s = Settings::load(dir.path()).unwrap();
        assert!(!s.is_on());
        assert_eq!(s.server.as_deref(), Some("http://x"));
    }

    #[test]
    fn a_pause_never_outlasts_the_longest_retry_after_even_when_the_clock_goes_back() {
        let mut s = Settings::default();
        let now = 1_800_000_000_000;
        s.pause(30, now);
        assert_eq!(s.paused_for_ms(now), Some(30_000));
        assert_eq!(s.paused_for_ms(now + 30_000), None);
        // A server asking for a day is honoured for the cap only.
        s.pause(86_400, now);
        assert_eq!(s.paused_for_ms(now), Some(MAX_RETRY_AFTER_S as i64 * 1000));
        // The wall clock is set back a day: the recorded pause holds nothing.
        let back = now - 86_400_000;
        assert_eq!(s.paused_for_ms(back), None);
        // A new 429 then pauses from the clock as it is now.
        s.pause(5, back);
        assert_eq!(s.paused_for_ms(back), Some(5_000));
    }

    #[test]
    fn pins_refuse_another_account_or_server() {
        let mut s = Settings::default();
        s.check_pin("user", "http://a", "alice", 1).unwrap();
        s.check_pin("user", "http://a", "alice", 2).unwrap();
        assert_eq!(s.pins["user"].pinned_at_ms, 1);
        let e = s.check_pin("user", "http://a", "bob", 3).unwrap_err();
        assert!(e.to_string().contains("paused"), "{e}");
        assert!(matches!(
            s.check_pin("user", "http://b", "alice", 3),
            Err(SyncError::Pinned { .. })
        ));
        s.check_pin("project:p", "http://b", "bob", 3).unwrap();
    }
}
