//! Errors as the UI sees them: `{code, message}`. A code exists only where the UI branches on it.

use memoria_engine::Error;
use memoria_engine::sync::SyncError;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UiError {
    /// `not-found`, `invalid`, `secret`, `broken-note`, `limit`, `sync-off`, `signed-out`,
    /// `conflict`, `busy`, `sync` (the server or the network) or `internal`.
    pub code: &'static str,
    pub message: String,
}

impl UiError {
    pub fn invalid(message: impl Into<String>) -> UiError {
        UiError {
            code: "invalid",
            message: message.into(),
        }
    }

    pub fn internal(message: impl Into<String>) -> UiError {
        UiError {
            code: "internal",
            message: message.into(),
        }
    }
}

impl From<Error> for UiError {
    fn from(e: Error) -> Self {
        let code = match &e {
            Error::NotFound(_) | Error::BackupNotFound(_) => "not-found",
            Error::Secret { .. } => "secret",
            Error::Broken { .. } => "broken-note",
            Error::BodyTooLarge { .. } | Error::ScopeFull { .. } => "limit",
            Error::Io { .. } | Error::Index(_) => "internal",
            _ => "invalid",
        };
        UiError {
            code,
            message: e.to_string(),
        }
    }
}

impl From<SyncError> for UiError {
    fn from(e: SyncError) -> Self {
        match e {
            SyncError::Engine(e) => e.into(),
            e => UiError {
                code: match &e {
                    SyncError::Off => "sync-off",
                    SyncError::NotSignedIn | SyncError::NoToken => "signed-out",
                    SyncError::NoConflict(_) | SyncError::NothingPending(_) => "not-found",
                    SyncError::RateLimited { .. } => "busy",
                    SyncError::Stale(_) | SyncError::NeedsConfirmation { .. } => "conflict",
                    SyncError::Internal(_) | SyncError::State { .. } => "internal",
                    _ => "sync",
                },
                message: e.to_string(),
            },
        }
    }
}
