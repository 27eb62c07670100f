//! Errors as the UI sees them: `{code, message, detail}`, the engine's error body with its
//! stable `snake_case` code (docs/errors.md), a message a person reads, and structured detail
//! where the engine gives some.

use memoria_engine::api::sync::SyncError;
use memoria_engine::{Error, ErrorBody, ErrorCode};
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UiError {
    /// One of the engine's error codes (`not_found`, `invalid_input`, `sync_off`, …).
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<Value>,
}

impl UiError {
    fn new(code: ErrorCode, message: impl Into<String>) -> UiError {
        UiError {
            code: code.as_str(),
            message: message.into(),
            detail: None,
        }
    }

    /// A value the window sent that the shell cannot use.
    pub fn invalid(message: impl Into<String>) -> UiError {
        UiError::new(ErrorCode::InvalidInput, message)
    }

    /// A failure of the shell itself.
    pub fn internal(message: impl Into<String>) -> UiError {
        UiError::new(ErrorCode::Internal, message)
    }
}

impl From<ErrorBody> for UiError {
    fn from(b: ErrorBody) -> Self {
        UiError {
            code: b.code.as_str(),
            message: b.message,
            detail: b.detail,
        }
    }
}

impl From<Error> for UiError {
    fn from(e: Error) -> Self {
        e.body().into()
    }
}

impl From<SyncError> for UiError {
    fn from(e: SyncError) -> Self {
        e.body().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_cross_with_their_code_message_and_detail() {
        let e: UiError = SyncError::RateLimited { retry_after_s: 3 }.into();
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({
                "code": "rate_limited",
                "message": e.message,
                "detail": {"retryAfterS": 3},
            })
        );
        let e: UiError = SyncError::Off.into();
        assert_eq!(e.code, "sync_off");
        assert_eq!(
            serde_json::to_value(UiError::invalid("no")).unwrap(),
            serde_json::json!({"code": "invalid_input", "message": "no"})
        );
    }
}
