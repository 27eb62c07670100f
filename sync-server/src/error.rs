//! Every refusal the HTTP API gives, and how it is answered. Internals are logged, never sent.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use memoria_shared::NoteId;
use memoria_shared::protocol::{ErrorBody, ErrorCode, StaleNote};

use crate::store::StoreError;

/// Why a request was refused. Each variant maps to one [`ErrorCode`] and HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The JSON body is malformed or a field has the wrong shape (the message names it).
    #[error("{0}")]
    BadRequest(String),
    /// An id in the request breaks the id rules.
    #[error("{0}")]
    InvalidId(String),
    /// A `put` body is not a valid note for its change.
    #[error("note {id}: {reason}")]
    InvalidNote { id: NoteId, reason: String },
    /// The hash sent with a body is not the body's content hash.
    #[error(
        "note {0}: the hash does not match the body; recompute it with the content hash in docs/PROTOCOL.md"
    )]
    HashMismatch(NoteId),
    /// One note appears twice in a commit.
    #[error("note {0} appears more than once in this commit: send one change per note")]
    DuplicateChange(NoteId),
    /// Missing, unknown or revoked token.
    #[error("missing or invalid access token: sign in again")]
    Unauthorized,
    /// Wrong or missing admin key (or erase disabled).
    #[error("{0}")]
    Forbidden(String),
    /// The commit would grow the scope past the live-notes quota.
    #[error(
        "this commit would leave {live_after} live notes in the scope; the limit is {limit}: delete notes first"
    )]
    QuotaExceeded { live_after: usize, limit: u32 },
    /// No such route.
    #[error("no such endpoint")]
    NotFound,
    /// A scope that is neither `user` nor `project:<id>`.
    #[error("{0}")]
    UnknownScope(String),
    /// Base revisions that are not current.
    #[error("{} note(s) changed on the server since your snapshot: snapshot again and merge", .0.len())]
    Stale(Vec<StaleNote>),
    /// The account was erased.
    #[error("this account was erased: its data is gone and it can no longer sync")]
    AccountErased,
    /// Too big: the request, a body or the number of changes.
    #[error("{0}")]
    TooLarge(String),
    /// Rate limited.
    #[error("too many requests: retry in {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    /// The account already has as many requests in flight as the server allows.
    #[error(
        "this account already has {limit} requests in progress on this server, and none ended in time: retry in 1 s"
    )]
    TooManyInFlight { limit: u32 },
    /// A `commitId` that names an earlier commit with other changes.
    #[error(
        "commit id {0} was already used for other changes: nothing was changed; send these changes with a new commit id"
    )]
    CommitIdReused(String),
    /// The manifest kept changing under the commit.
    #[error("the scope is busy (the manifest kept changing): retry shortly; nothing was changed")]
    Contention,
    /// The scope's manifest is damaged and no good copy of it is kept.
    #[error(
        "this scope's data on the server is damaged and cannot be read: nothing was changed; the server's operator must restore it (its log names the file)"
    )]
    DamagedManifest,
    /// The commit would take the account past one of its storage caps.
    #[error("{0}")]
    AccountQuota(String),
    /// Plaintext to or from a scope marked end-to-end encrypted, or an envelope under another
    /// key (the message says which).
    #[error("{0}")]
    ScopeEncrypted(String),
    /// An encrypted request to a scope not marked encrypted.
    #[error("{0}")]
    ScopeNotEncrypted(String),
    /// The account's wrapped keys exist already, wrapping another account key.
    #[error("{0}")]
    KeysExist(String),
    /// Anything else; the detail is logged, not sent.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Internal(e.to_string())
    }
}

impl ApiError {
    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::BadRequest(_) => ErrorCode::BadRequest,
            ApiError::InvalidId(_) => ErrorCode::InvalidId,
            ApiError::InvalidNote { .. } => ErrorCode::InvalidNote,
            ApiError::HashMismatch(_) => ErrorCode::HashMismatch,
            ApiError::DuplicateChange(_) => ErrorCode::DuplicateChange,
            ApiError::Unauthorized => ErrorCode::Unauthorized,
            ApiError::Forbidden(_) => ErrorCode::Forbidden,
            ApiError::QuotaExceeded { .. } | ApiError::AccountQuota(_) => ErrorCode::QuotaExceeded,
            ApiError::NotFound | ApiError::UnknownScope(_) => ErrorCode::NotFound,
            ApiError::Stale(_) => ErrorCode::Stale,
            ApiError::CommitIdReused(_) => ErrorCode::CommitIdReused,
            ApiError::AccountErased => ErrorCode::AccountErased,
            ApiError::TooLarge(_) => ErrorCode::TooLarge,
            ApiError::RateLimited { .. } | ApiError::TooManyInFlight { .. } => {
                ErrorCode::RateLimited
            }
            ApiError::Contention => ErrorCode::Contention,
            ApiError::ScopeEncrypted(_) => ErrorCode::ScopeEncrypted,
            ApiError::ScopeNotEncrypted(_) => ErrorCode::ScopeNotEncrypted,
            ApiError::KeysExist(_) => ErrorCode::KeysExist,
            ApiError::Internal(_) | ApiError::DamagedManifest => ErrorCode::Internal,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_)
            | ApiError::InvalidId(_)
            | ApiError::InvalidNote { .. }
            | ApiError::HashMismatch(_)
            | ApiError::DuplicateChange(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::QuotaExceeded { .. } | ApiError::AccountQuota(_) => {
                StatusCode::FORBIDDEN
            }
            ApiError::NotFound | ApiError::UnknownScope(_) => StatusCode::NOT_FOUND,
            ApiError::Stale(_)
            | ApiError::CommitIdReused(_)
            | ApiError::ScopeEncrypted(_)
            | ApiError::ScopeNotEncrypted(_)
            | ApiError::KeysExist(_) => StatusCode::CONFLICT,
            ApiError::AccountErased => StatusCode::GONE,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::RateLimited { .. } | ApiError::TooManyInFlight { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::Contention => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) | ApiError::DamagedManifest => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = match &self {
            ApiError::Internal(detail) => {
                tracing::error!(error = %detail, "internal error");
                "internal error: nothing was changed; retry later".to_owned()
            }
            other => other.to_string(),
        };
        let body = ErrorBody {
            code: self.code(),
            message,
            stale: match &self {
                ApiError::Stale(s) => s.clone(),
                _ => Vec::new(),
            },
        };
        let mut resp = (self.status(), Json(body)).into_response();
        match &self {
            ApiError::RateLimited { retry_after_secs } => {
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
            }
            ApiError::Contention | ApiError::TooManyInFlight { .. } => {
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(1u64));
            }
            ApiError::Unauthorized => {
                resp.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        resp
    }
}
