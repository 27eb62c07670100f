//! Server settings: defaults → config file (TOML) → environment (`MEMORIA_SYNC_…`, `__` between
//! a section and its key) → command-line flags (applied by the binary).
//!
//! ```toml
//! store = "fs:/var/lib/memoria-sync"
//! listen = "0.0.0.0:8787"
//! admin_key = "…"
//! [quotas]
//! live_notes_per_scope = 5000
//! [rate_limit]
//! burst = 120
//! per_minute = 60
//! [limits]
//! max_connections = 512
//! header_timeout_secs = 10
//! ```

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use memoria_shared::protocol::{Quotas, StorageQuotas};
use serde::Deserialize;

use crate::store::StoreUrl;

/// A secret string whose `Debug` never shows it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The shortest admin key accepted: the key is the only guard on erasing any account, so it
/// must be too long to guess.
pub const MIN_ADMIN_KEY_CHARS: usize = 32;

/// Per-account token bucket: `burst` requests at once, refilled at `per_minute`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub burst: u32,
    pub per_minute: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            burst: 120,
            per_minute: 120,
        }
    }
}

/// What one client may hold: open connections, and the time it may take at each step. Every
/// wait on a client is bounded, so a stalled or hostile client holds at most one connection
/// slot, and only for a bounded time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; one more is answered 503 and closed at once.
    pub max_connections: u32,
    /// Seconds a client has to send a complete request header: on a new connection, and on a
    /// kept-alive one between its requests.
    pub header_timeout_secs: u32,
    /// Seconds from a request's header to its response (the body's arrival and the handling);
    /// slower requests are answered 408. Also how long a response may sit unread by the
    /// client (no byte taken) before its connection is dropped.
    pub request_timeout_secs: u32,
    /// Seconds requests in flight get to finish on shutdown; every connection still open after
    /// that is dropped. 0 drops them at once.
    pub shutdown_grace_secs: u32,
    /// Requests one account may have in flight at once on this instance; one more waits up to
    /// 2 s for a slot, then is answered 429 with `Retry-After: 1`.
    pub requests_per_account: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 512,
            header_timeout_secs: 10,
            request_timeout_secs: 60,
            shutdown_grace_secs: 10,
            requests_per_account: 4,
        }
    }
}

impl Limits {
    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_secs.into())
    }
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs.into())
    }
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs.into())
    }
}

/// Everything `memoria-sync serve` needs.
#[derive(Debug, Clone)]
pub struct Settings {
    pub store: StoreUrl,
    pub listen: SocketAddr,
    /// Key for `POST /v1/admin/erase`; `None` disables the endpoint.
    pub admin_key: Option<Secret>,
    pub quotas: Quotas,
    /// What an account may store: tombstones per scope, scopes, bytes (`[quotas]` too).
    pub storage: StorageQuotas,
    pub rate_limit: RateLimit,
    pub limits: Limits,
    /// Attempts at the manifest compare-and-swap before answering 503.
    pub commit_attempts: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            store: StoreUrl::Fs("./memoria-sync-data".into()),
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            admin_key: None,
            quotas: Quotas::default(),
            storage: StorageQuotas::default(),
            rate_limit: RateLimit::default(),
            limits: Limits::default(),
            commit_attempts: 16,
        }
    }
}

/// Why the settings could not be loaded. Each message names the setting to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {error}")]
    Read { path: String, error: String },
    /// The config file is not valid TOML or has unknown keys.
    #[error("config file {path} is invalid: {error}")]
    Parse { path: String, error: String },
    /// A setting has an invalid value.
    #[error("setting `{name}` is invalid: {error}")]
    Value { name: String, error: String },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileQuotas {
    live_notes_per_scope: Option<u32>,
    changes_per_commit: Option<u32>,
    body_bytes: Option<u32>,
    response_body_bytes: Option<u32>,
    tombstone_days: Option<u32>,
    tombstones_per_scope: Option<u32>,
    scopes_per_account: Option<u32>,
    bytes_per_account: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRate {
    burst: Option<u32>,
    per_minute: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLimits {
    max_connections: Option<u32>,
    header_timeout_secs: Option<u32>,
    request_timeout_secs: Option<u32>,
    shutdown_grace_secs: Option<u32>,
    requests_per_account: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    store: Option<String>,
    listen: Option<String>,
    admin_key: Option<Secret>,
    commit_attempts: Option<u32>,
    #[serde(default)]
    quotas: FileQuotas,
    #[serde(default)]
    rate_limit: FileRate,
    #[serde(default)]
    limits: FileLimits,
}

fn value<T: std::str::FromStr>(name: &str, raw: &str) -> Result<T, ConfigError>
where
    T::Err: fmt::Display,
{
    raw.parse().map_err(|e: T::Err| ConfigError::Value {
        name: name.to_owned(),
        error: e.to_string(),
    })
}

impl Settings {
    /// Loads defaults, then `file` (if given), then the environment as read by `env`.
    pub fn load(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Settings, ConfigError> {
        let mut s = Settings::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
                path: path.display().to_string(),
                error: e.to_string(),
            })?;
            let f: File = toml::from_str(&text).map_err(|e| ConfigError::Parse {
                path: path.display().to_string(),
                error: e.to_string(),
            })?;
            s.apply_file(f)?;
        }
        s.apply_env(env)?;
        s.check_admin_key()?;
        s.check_limits()?;
        Ok(s)
    }

    /// Refuses an admin key shorter than [`MIN_ADMIN_KEY_CHARS`].
    pub fn check_admin_key(&self) -> Result<(), ConfigError> {
        match &self.admin_key {
            Some(k) if k.expose().chars().count() < MIN_ADMIN_KEY_CHARS => {
                Err(ConfigError::Value {
                    name: "admin_key (MEMORIA_SYNC_ADMIN_KEY)".into(),
                    error: format!(
                        "the admin key is {} characters; it must be at least \
                         {MIN_ADMIN_KEY_CHARS} (a random one: `openssl rand -hex 32`)",
                        k.expose().chars().count()
                    ),
                })
            }
            _ => Ok(()),
        }
    }

    /// Refuses limits that would refuse every client: no connection slot, or no time to send a
    /// request.
    pub fn check_limits(&self) -> Result<(), ConfigError> {
        let l = &self.limits;
        let at_least_one = [
            (
                "[limits] max_connections (MEMORIA_SYNC_LIMITS__MAX_CONNECTIONS)",
                l.max_connections,
            ),
            (
                "[limits] header_timeout_secs (MEMORIA_SYNC_LIMITS__HEADER_TIMEOUT_SECS)",
                l.header_timeout_secs,
            ),
            (
                "[limits] request_timeout_secs (MEMORIA_SYNC_LIMITS__REQUEST_TIMEOUT_SECS)",
                l.request_timeout_secs,
            ),
            (
                "[limits] requests_per_account (MEMORIA_SYNC_LIMITS__REQUESTS_PER_ACCOUNT)",
                l.requests_per_account,
            ),
        ];
        for (name, v) in at_least_one {
            if v == 0 {
                return Err(ConfigError::Value {
                    name: name.into(),
                    error: "it is 0; it must be at least 1".into(),
                });
            }
        }
        Ok(())
    }

    fn apply_file(&mut self, f: File) -> Result<(), ConfigError> {
        if let Some(v) = f.store {
            self.store = value("store", &v)?;
        }
        if let Some(v) = f.listen {
            self.listen = value("listen", &v)?;
        }
        if f.admin_key.is_some() {
            self.admin_key = f.admin_key;
        }
        let q = &mut self.quotas;
        let fq = f.quotas;
        q.live_notes_per_scope = fq.live_notes_per_scope.unwrap_or(q.live_notes_per_scope);
        q.changes_per_commit = fq.changes_per_commit.unwrap_or(q.changes_per_commit);
        q.body_bytes = fq.body_bytes.unwrap_or(q.body_bytes);
        q.response_body_bytes = fq.response_body_bytes.unwrap_or(q.response_body_bytes);
        q.tombstone_days = fq.tombstone_days.unwrap_or(q.tombstone_days);
        let sq = &mut self.storage;
        sq.tombstones_per_scope = fq.tombstones_per_scope.unwrap_or(sq.tombstones_per_scope);
        sq.scopes_per_account = fq.scopes_per_account.unwrap_or(sq.scopes_per_account);
        sq.bytes_per_account = fq.bytes_per_account.unwrap_or(sq.bytes_per_account);
        self.rate_limit.burst = f.rate_limit.burst.unwrap_or(self.rate_limit.burst);
        self.rate_limit.per_minute = f
            .rate_limit
            .per_minute
            .unwrap_or(self.rate_limit.per_minute);
        self.commit_attempts = f.commit_attempts.unwrap_or(self.commit_attempts);
        let (l, fl) = (&mut self.limits, f.limits);
        l.max_connections = fl.max_connections.unwrap_or(l.max_connections);
        l.header_timeout_secs = fl.header_timeout_secs.unwrap_or(l.header_timeout_secs);
        l.request_timeout_secs = fl.request_timeout_secs.unwrap_or(l.request_timeout_secs);
        l.shutdown_grace_secs = fl.shutdown_grace_secs.unwrap_or(l.shutdown_grace_secs);
        l.requests_per_account = fl.requests_per_account.unwrap_or(l.requests_per_account);
        Ok(())
    }

    fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let get = |k: &str| env(k).filter(|v| !v.is_empty()).map(|v| (k.to_owned(), v));
        if let Some((k, v)) = get("MEMORIA_SYNC_STORE") {
            self.store = value(&k, &v)?;
        }
        if let Some((k, v)) = get("MEMORIA_SYNC_LISTEN") {
            self.listen = value(&k, &v)?;
        }
        if let Some((_, v)) = get("MEMORIA_SYNC_ADMIN_KEY") {
            self.admin_key = Some(Secret(v));
        }
        let (q, l) = (&mut self.quotas, &mut self.limits);
        if let Some((k, v)) = get("MEMORIA_SYNC_QUOTAS__BYTES_PER_ACCOUNT") {
            self.storage.bytes_per_account = value(&k, &v)?;
        }
        let sq = &mut self.storage;
        let numbers: [(&str, &mut u32); 15] = [
            (
                "MEMORIA_SYNC_QUOTAS__LIVE_NOTES_PER_SCOPE",
                &mut q.live_notes_per_scope,
            ),
            (
                "MEMORIA_SYNC_QUOTAS__CHANGES_PER_COMMIT",
                &mut q.changes_per_commit,
            ),
            ("MEMORIA_SYNC_QUOTAS__BODY_BYTES", &mut q.body_bytes),
            (
                "MEMORIA_SYNC_QUOTAS__RESPONSE_BODY_BYTES",
                &mut q.response_body_bytes,
            ),
            ("MEMORIA_SYNC_QUOTAS__TOMBSTONE_DAYS", &mut q.tombstone_days),
            (
                "MEMORIA_SYNC_QUOTAS__TOMBSTONES_PER_SCOPE",
                &mut sq.tombstones_per_scope,
            ),
            (
                "MEMORIA_SYNC_QUOTAS__SCOPES_PER_ACCOUNT",
                &mut sq.scopes_per_account,
            ),
            ("MEMORIA_SYNC_RATE_LIMIT__BURST", &mut self.rate_limit.burst),
            (
                "MEMORIA_SYNC_RATE_LIMIT__PER_MINUTE",
                &mut self.rate_limit.per_minute,
            ),
            ("MEMORIA_SYNC_COMMIT_ATTEMPTS", &mut self.commit_attempts),
            (
                "MEMORIA_SYNC_LIMITS__MAX_CONNECTIONS",
                &mut l.max_connections,
            ),
            (
                "MEMORIA_SYNC_LIMITS__HEADER_TIMEOUT_SECS",
                &mut l.header_timeout_secs,
            ),
            (
                "MEMORIA_SYNC_LIMITS__REQUEST_TIMEOUT_SECS",
                &mut l.request_timeout_secs,
            ),
            (
                "MEMORIA_SYNC_LIMITS__SHUTDOWN_GRACE_SECS",
                &mut l.shutdown_grace_secs,
            ),
            (
                "MEMORIA_SYNC_LIMITS__REQUESTS_PER_ACCOUNT",
                &mut l.requests_per_account,
            ),
        ];
        for (name, slot) in numbers {
            if let Some((k, v)) = get(name) {
                *slot = value(&k, &v)?;
            }
        }
        Ok(())
    }

    /// The largest request body accepted: a full commit of maximal bodies, JSON-escaped, with
    /// headroom. Anything bigger is answered 413 before it is read.
    pub fn request_limit(&self) -> usize {
        let q = &self.quotas;
        let commit = (q.changes_per_commit as usize) * (2 * q.body_bytes as usize + 512);
        commit.clamp(1 << 20, 512 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn defaults_then_file_then_env() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sync.toml");
        std::fs::write(
            &path,
            "store = \"fs:/data\"\nlisten = \"0.0.0.0:9000\"\nadmin_key = \"file-key-0123456789abcdef0123456789\"\n\
             [quotas]\nlive_notes_per_scope = 10\nscopes_per_account = 4\n[rate_limit]\nburst = 3\n\
             [limits]\nmax_connections = 7\nheader_timeout_secs = 2\n",
        )
        .unwrap();
        let env: HashMap<&str, &str> = [
            ("MEMORIA_SYNC_LISTEN", "127.0.0.1:1234"),
            ("MEMORIA_SYNC_QUOTAS__BODY_BYTES", "1000"),
            ("MEMORIA_SYNC_QUOTAS__BYTES_PER_ACCOUNT", "5000000000"),
            ("MEMORIA_SYNC_QUOTAS__TOMBSTONES_PER_SCOPE", "7"),
            ("MEMORIA_SYNC_LIMITS__HEADER_TIMEOUT_SECS", "3"),
            ("MEMORIA_SYNC_LIMITS__SHUTDOWN_GRACE_SECS", "0"),
        ]
        .into();
        let s = Settings::load(Some(&path), |k| env.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(s.store, StoreUrl::Fs("/data".into()));
        assert_eq!(s.listen.to_string(), "127.0.0.1:1234");
        assert_eq!(s.quotas.live_notes_per_scope, 10);
        assert_eq!(s.quotas.body_bytes, 1000);
        assert_eq!(s.quotas.changes_per_commit, 500);
        assert_eq!(
            s.storage,
            StorageQuotas {
                tombstones_per_scope: 7,
                scopes_per_account: 4,
                bytes_per_account: 5_000_000_000,
            }
        );
        assert_eq!(s.rate_limit.burst, 3);
        assert_eq!(
            s.limits,
            Limits {
                max_connections: 7,
                header_timeout_secs: 3,
                request_timeout_secs: Limits::default().request_timeout_secs,
                shutdown_grace_secs: 0,
                requests_per_account: 4,
            }
        );
        assert_eq!(
            s.admin_key.as_ref().unwrap().expose(),
            "file-key-0123456789abcdef0123456789"
        );
        assert!(
            !format!("{s:?}").contains("file-key"),
            "Debug leaks the admin key"
        );
    }

    #[test]
    fn bad_values_name_the_setting() {
        let err = Settings::load(None, |k| {
            (k == "MEMORIA_SYNC_QUOTAS__TOMBSTONE_DAYS").then(|| "soon".to_owned())
        })
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("MEMORIA_SYNC_QUOTAS__TOMBSTONE_DAYS"),
            "{err}"
        );
        let err = Settings::load(None, |k| {
            (k == "MEMORIA_SYNC_ADMIN_KEY").then(|| "short-key".to_owned())
        })
        .unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("MEMORIA_SYNC_ADMIN_KEY") && msg.contains("at least 32"),
            "{msg}"
        );
        assert!(
            !msg.contains("short-key"),
            "the message leaks the key: {msg}"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "colour = 1\n").unwrap();
        assert!(matches!(
            Settings::load(Some(&path), |_| None),
            Err(ConfigError::Parse { .. })
        ));
        std::fs::write(&path, "[limits]\nmax_conections = 1\n").unwrap();
        let err = Settings::load(Some(&path), |_| None).unwrap_err();
        assert!(
            matches!(err, ConfigError::Parse { .. }) && err.to_string().contains("max_conections"),
            "{err}"
        );
    }

    #[test]
    fn limits_that_would_refuse_every_client_name_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("limits.toml");
        std::fs::write(&path, "[limits]\nmax_connections = 0\n").unwrap();
        let msg = Settings::load(Some(&path), |_| None)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("max_connections") && msg.contains("at least 1"),
            "{msg}"
        );
        for key in [
            "HEADER_TIMEOUT_SECS",
            "REQUEST_TIMEOUT_SECS",
            "REQUESTS_PER_ACCOUNT",
        ] {
            let name = format!("MEMORIA_SYNC_LIMITS__{key}");
            let msg = Settings::load(None, |k| (k == name).then(|| "0".to_owned()))
                .unwrap_err()
                .to_string();
            assert!(msg.contains(&name) && msg.contains("at least 1"), "{msg}");
            let msg = Settings::load(None, |k| (k == name).then(|| "-1".to_owned()))
                .unwrap_err()
                .to_string();
            assert!(msg.contains(&name), "{msg}");
        }
        // No grace is a choice: connections are dropped as soon as shutdown begins.
        let s = Settings::load(None, |k| {
            (k == "MEMORIA_SYNC_LIMITS__SHUTDOWN_GRACE_SECS").then(|| "0".to_owned())
        })
        .unwrap();
        assert_eq!(s.limits.shutdown_grace(), Duration::ZERO);
    }
}
