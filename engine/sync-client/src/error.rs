//! The sync client's errors. Messages say what happened and what helps, without naming a
//! command; [`SyncError::code`] maps each into the engine's [`ErrorCode`]s, and
//! [`SyncError::is_permanent`] tells the scheduler whether retrying later can help.

use memoria_shared::protocol::{self, StaleNote};
use serde_json::{Value, json};

use memoria_store::error::ErrorCode;

/// Everything that can stop a sync pass (or a sync command).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// Cloud sync was turned off; nothing is sent until it is turned on.
    #[error(
        "cloud sync is off: nothing is sent or received until it is turned on (local notes keep working)"
    )]
    Off,
    /// Sync of this scope is turned off on this machine (sync of the others goes on).
    #[error(
        "cloud sync of {0} is turned off on this machine: its notes stay here, nothing of them is sent or received"
    )]
    ScopeOff(String),
    /// No server is configured.
    #[error("not signed in to a sync server: sign in with the server's URL and a token")]
    NotSignedIn,
    /// Signing in: the server refused the token given.
    #[error(
        "the sync server at {server} refused this token: check it was copied whole, or ask whoever runs the server for a new one"
    )]
    TokenRefused { server: String },
    /// No token in the keychain, the token file, nor `MEMORIA_SYNC_TOKEN`.
    #[error(
        "no sync token for this server on this machine (neither in the keychain nor in the token file): sign in again (or set MEMORIA_SYNC_TOKEN)"
    )]
    NoToken,
    /// Neither a keychain nor the token file could keep or give back the token.
    #[error(
        "cannot keep the sync token on this machine ({0}): set MEMORIA_SYNC_TOKEN in the environment instead"
    )]
    Keychain(String),
    /// The scope is pinned to another account or server; sync of it is paused. The same
    /// account at another address can be re-pointed (see [`crate::repoint`]), which first
    /// checks that the server there holds the same notes.
    #[error(
        "sync of {scope} is paused: it was first synced as `{pinned_user}` on {pinned_server}, but you are signed in as `{user}` on {server}; {}",
        if pinned_user == user {
            "if that is the same server at a new address, re-point the scope to it (which first checks that the server there holds the notes last synced)"
        } else {
            "sign in with the original account (two accounts' notes are never mixed)"
        }
    )]
    Pinned {
        scope: String,
        pinned_user: String,
        pinned_server: String,
        user: String,
        server: String,
    },
    /// The server speaks a newer protocol.
    #[error("the sync server speaks protocol {0}, newer than this Memoria: update Memoria")]
    ProtocolTooNew(u32),
    /// 429: the account sent too many requests.
    #[error("the sync server asks to slow down: retrying in {retry_after_s} s")]
    RateLimited { retry_after_s: u64 },
    /// 409: notes changed on the server since the snapshot; the pass snapshots again.
    #[error("{} note(s) changed on the server meanwhile: syncing again", .0.len())]
    Stale(Vec<StaleNote>),
    /// The server refused the request.
    #[error("the sync server refused the request ({status}{}): {message}", code.map(|c| format!(" {}", server_code(c))).unwrap_or_default())]
    Server {
        status: u16,
        code: Option<protocol::ErrorCode>,
        message: String,
        retry_after_s: Option<u64>,
    },
    /// The server could not be reached, or the reply was lost.
    #[error(
        "cannot reach the sync server ({0}): check its address and this machine's connection; a running app, `memoria watch` or `memoria mcp` tries again by itself"
    )]
    Transport(String),
    /// A reply that is not what the protocol promises.
    #[error(
        "unexpected reply from the sync server ({0}): check that the server URL is a Memoria sync server"
    )]
    BadReply(String),
    /// Notes of the server's reply failed verification (a body that is not the note or does
    /// not match its hash, a listed note without its body) or the server reports its stored
    /// copy damaged: they were not written, their base stays, and the next pass asks again.
    #[error(
        "sync of {scope} is incomplete: {}. {} not written here (this machine keeps what it had), and the next sync asks for {} again",
        corrupt_list(notes),
        if notes.len() == 1 { "It was" } else { "They were" },
        if notes.len() == 1 { "it" } else { "them" }
    )]
    CorruptReply {
        scope: String,
        /// Each note's id and what is wrong with it.
        notes: Vec<(String, String)>,
    },
    /// No conflict is recorded for this note.
    #[error("no sync conflict for note `{0}`")]
    NoConflict(String),
    /// The scope cannot be synced (domain scopes are local only).
    #[error("scope {0} is not synced: only user and project scopes are")]
    NotSyncable(String),
    /// A batch change (commitFirst) touched notes that are not fully synced, or the server
    /// refused it because another device changed one of them.
    #[error("batch change refused: {0}; sync, review the notes, and try again")]
    BatchRefused(String),
    /// The scope's folder is missing (moved, an unmounted drive, a checkout without it): the
    /// pass stops before any request and runs again once the folder is back.
    #[error(
        "sync of {scope} is paused: the folder {folder} is missing; nothing was synced (put the folder back, or mount its drive, and sync again)"
    )]
    FolderMissing { scope: String, folder: String },
    /// The pass would delete on evidence it cannot trust (a replaced folder, a second folder for
    /// the scope, many deletions at once): it waits for the user to confirm or cancel.
    #[error("{message}")]
    NeedsConfirmation { scope: String, message: String },
    /// Nothing waits for a confirmation.
    #[error("no sync of {0} waits for a confirmation")]
    NothingPending(String),
    /// A pass stopped on a bug (a panic) in Memoria; the process keeps running.
    #[error("sync stopped on an internal error ({0}): please report it; retrying in a minute")]
    Internal(String),
    /// A re-point found that the server at the new address is not the store the scopes were
    /// synced with (another user, other notes): no pin moved.
    #[error(
        "nothing was re-pointed to {server}: {}; sync of these scopes stays paused until you sign in with the account and at the address they were synced with",
        refusals.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    RepointRefused {
        server: String,
        refusals: Vec<crate::repoint::Refusal>,
    },
    /// A re-point could not reach the server at the new address: nothing moved.
    #[error(
        "cannot reach the sync server at {server} ({reason}): nothing was re-pointed; check the address and that the server runs there"
    )]
    RepointUnreachable { server: String, reason: String },
    /// Another process changed the scopes' pins while a re-point checked the server.
    #[error("the scopes' pins changed while the server was checked: nothing was re-pointed")]
    PinsChanged,
    /// End-to-end encryption: a step refused, with the engine code that says why.
    #[error("{message}")]
    E2ee { code: ErrorCode, message: String },
    /// A sync state file does not parse.
    #[error(
        "sync state {path} is damaged ({reason}): delete the file to start that scope's sync over"
    )]
    State { path: String, reason: String },
    /// A vault operation failed.
    #[error(transparent)]
    Engine(#[from] crate::Error),
}

impl memoria_store::error::LayerError for SyncError {
    fn code(&self) -> ErrorCode {
        SyncError::code(self)
    }

    fn detail(&self) -> Option<Value> {
        SyncError::detail(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl From<SyncError> for crate::Error {
    fn from(e: SyncError) -> crate::Error {
        match e {
            SyncError::Engine(e) => e,
            other => crate::Error::Sync(Box::new(other)),
        }
    }
}

impl SyncError {
    /// True when retrying later cannot help without the user doing something.
    pub fn is_permanent(&self) -> bool {
        match self {
            SyncError::RateLimited { .. }
            | SyncError::Stale(_)
            | SyncError::Transport(_)
            | SyncError::Internal(_)
            | SyncError::FolderMissing { .. }
            | SyncError::CorruptReply { .. }
            | SyncError::Engine(_) => false,
            SyncError::Server { status, .. } => !(*status >= 500 || *status == 408),
            _ => true,
        }
    }

    /// When the scheduler may try again, if the error says so (429, 503).
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            SyncError::RateLimited { retry_after_s } => Some(*retry_after_s),
            SyncError::Server { retry_after_s, .. } => *retry_after_s,
            _ => None,
        }
    }

    /// The engine code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            SyncError::Off | SyncError::ScopeOff(_) => ErrorCode::SyncOff,
            SyncError::NotSignedIn | SyncError::NoToken | SyncError::TokenRefused { .. } => {
                ErrorCode::NotSignedIn
            }
            SyncError::Keychain(_) => ErrorCode::KeychainUnavailable,
            SyncError::Pinned { .. } => ErrorCode::AccountMismatch,
            SyncError::RepointRefused { refusals, .. } => {
                match refusals
                    .iter()
                    .all(|r| matches!(r, crate::repoint::Refusal::DifferentUser { .. }))
                {
                    true => ErrorCode::AccountMismatch,
                    false => ErrorCode::NotSameStore,
                }
            }
            SyncError::PinsChanged => ErrorCode::ChangedSince,
            SyncError::RepointUnreachable { .. } => ErrorCode::ServerUnreachable,
            SyncError::ProtocolTooNew(_) => ErrorCode::ProtocolTooNew,
            SyncError::RateLimited { .. } => ErrorCode::RateLimited,
            SyncError::Stale(_) => ErrorCode::ChangedSince,
            SyncError::Server { status, code, .. } => match code {
                Some(protocol::ErrorCode::Unauthorized) => ErrorCode::NotSignedIn,
                Some(protocol::ErrorCode::AccountErased) => ErrorCode::AccountErased,
                Some(protocol::ErrorCode::QuotaExceeded) => ErrorCode::LimitReached,
                Some(protocol::ErrorCode::TooLarge) => ErrorCode::TooLarge,
                Some(protocol::ErrorCode::RateLimited) => ErrorCode::RateLimited,
                Some(protocol::ErrorCode::Stale) => ErrorCode::ChangedSince,
                Some(protocol::ErrorCode::ScopeEncrypted) => ErrorCode::E2eeLocked,
                None if *status == 401 => ErrorCode::NotSignedIn,
                None if *status == 413 => ErrorCode::TooLarge,
                _ => ErrorCode::ServerError,
            },
            SyncError::Transport(_) => ErrorCode::ServerUnreachable,
            SyncError::BadReply(_) => ErrorCode::ServerError,
            SyncError::CorruptReply { .. } => ErrorCode::CorruptReply,
            SyncError::NoConflict(_) | SyncError::NothingPending(_) => ErrorCode::NotFound,
            SyncError::NotSyncable(_) => ErrorCode::InvalidInput,
            SyncError::BatchRefused(_) => ErrorCode::Conflict,
            SyncError::FolderMissing { .. } => ErrorCode::FolderMissing,
            SyncError::NeedsConfirmation { .. } => ErrorCode::ConfirmationRequired,
            SyncError::Internal(_) => ErrorCode::Internal,
            SyncError::State { .. } => ErrorCode::DamagedFile,
            SyncError::E2ee { code, .. } => *code,
            SyncError::Engine(e) => e.code(),
        }
    }

    /// Structured facts about this error (the scope, the server's answer, when to retry).
    pub fn detail(&self) -> Option<Value> {
        Some(match self {
            SyncError::Pinned {
                scope,
                pinned_user,
                pinned_server,
                user,
                server,
            } => json!({
                "scope": scope, "pinnedUser": pinned_user, "pinnedServer": pinned_server,
                "user": user, "server": server,
            }),
            SyncError::RepointRefused { server, refusals } => {
                json!({ "server": server, "refusals": refusals })
            }
            SyncError::RepointUnreachable { server, .. } => {
                json!({ "server": server, "repoint": true })
            }
            SyncError::ProtocolTooNew(v) => json!({ "serverProtocol": v }),
            SyncError::ScopeOff(scope) => json!({ "scope": scope }),
            SyncError::TokenRefused { server } => json!({ "server": server, "tokenRefused": true }),
            SyncError::RateLimited { retry_after_s } => json!({ "retryAfterS": retry_after_s }),
            SyncError::Stale(notes) => {
                json!({ "notes": notes.iter().map(|n| &n.id).collect::<Vec<_>>() })
            }
            SyncError::Server {
                status,
                code,
                retry_after_s,
                ..
            } => json!({
                "status": status,
                "serverCode": code.map(server_code),
                "retryAfterS": retry_after_s,
            }),
            SyncError::NoConflict(id) => json!({ "conflict": id }),
            SyncError::NotSyncable(scope) | SyncError::NothingPending(scope) => {
                json!({ "scope": scope })
            }
            SyncError::FolderMissing { scope, folder } => {
                json!({ "scope": scope, "path": folder })
            }
            SyncError::NeedsConfirmation { scope, .. } => json!({ "scope": scope }),
            SyncError::CorruptReply { scope, notes } => json!({
                "scope": scope,
                "notes": notes
                    .iter()
                    .map(|(id, reason)| json!({ "id": id, "reason": reason }))
                    .collect::<Vec<_>>(),
            }),
            SyncError::State { path, .. } => json!({ "path": path }),
            SyncError::Engine(e) => return e.detail(),
            _ => return None,
        })
    }

    /// The error as a front end sends it.
    pub fn body(&self) -> memoria_store::error::ErrorBody {
        memoria_store::error::ErrorBody {
            code: self.code(),
            message: self.to_string(),
            detail: self.detail(),
        }
    }
}

/// "note `a`: why; note `b`: why".
fn corrupt_list(notes: &[(String, String)]) -> String {
    notes
        .iter()
        .map(|(id, why)| format!("note `{id}`: {why}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The server's code as it is on the wire (`quota_exceeded`).
fn server_code(c: protocol::ErrorCode) -> String {
    match serde_json::to_value(c) {
        Ok(Value::String(s)) => s,
        _ => format!("{c:?}"),
    }
}

pub type SyncResult<T> = std::result::Result<T, SyncError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permanence() {
        assert!(!SyncError::Transport("x".into()).is_permanent());
        assert!(!SyncError::RateLimited { retry_after_s: 3 }.is_permanent());
        let server = |status| SyncError::Server {
            status,
            code: None,
            message: String::new(),
            retry_after_s: None,
        };
        assert!(!server(500).is_permanent());
        assert!(!server(503).is_permanent());
        assert!(server(401).is_permanent());
        assert!(server(413).is_permanent());
        assert!(SyncError::Off.is_permanent());
    }

    #[test]
    fn a_corrupt_reply_names_the_scope_and_each_note_and_is_retried() {
        let e = SyncError::CorruptReply {
            scope: "project:p1".into(),
            notes: vec![
                (
                    "a".into(),
                    "the body does not match its content hash".into(),
                ),
                (
                    "b".into(),
                    "the server lists revision r2 but sent no body for it".into(),
                ),
            ],
        };
        assert_eq!(e.code(), ErrorCode::CorruptReply);
        assert!(!e.is_permanent());
        let m = e.to_string();
        assert!(
            m.contains("project:p1") && m.contains("note `a`: the body") && m.contains("`b`"),
            "{m}"
        );
        assert!(m.contains("They were not written here"), "{m}");
        assert_eq!(
            e.detail(),
            Some(json!({"scope": "project:p1", "notes": [
                {"id": "a", "reason": "the body does not match its content hash"},
                {"id": "b", "reason": "the server lists revision r2 but sent no body for it"},
            ]}))
        );
    }
}
