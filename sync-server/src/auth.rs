//! Accounts without a database: an access token is 32 random bytes; the store keeps only its
//! SHA-256 (`tokens/<hash>.json`) and the user it belongs to. Requests present the token as
//! `Authorization: Bearer …`; [`AuthUser`] verifies it, refuses erased accounts, applies the
//! account's rate limit and takes one of its slots for requests in flight.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use memoria_shared::hash::sha256_hex;
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::error::ApiError;
use crate::inflight::InFlightPermit;
use crate::layout::{UserId, erased_key, token_key};
use crate::random::{Randomness, random_hex};
use crate::store::{ObjectStore, StoreError, get_opt};

/// Prefix of every access token, so a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = "msync_";

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TokenRecord {
    user_id: String,
    token_hash: String,
    created_at: i64,
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn token_hash(token: &str) -> String {
    sha256_hex(token.as_bytes())
}

/// Creates a token for `user`, stores its hash, and returns the token (shown once).
pub async fn create_token(
    store: &dyn ObjectStore,
    rng: &dyn Randomness,
    user: &UserId,
    now_ms: i64,
) -> Result<String, StoreError> {
    if get_opt(store, &erased_key(user)).await?.is_some() {
        return Err(StoreError::Other(format!(
            "account {user} was erased: it cannot get new tokens"
        )));
    }
    let token = format!("{TOKEN_PREFIX}{}", random_hex(rng, 32));
    let hash = token_hash(&token);
    let record = TokenRecord {
        user_id: user.to_string(),
        token_hash: hash.clone(),
        created_at: now_ms,
    };
    let bytes = serde_json::to_vec(&record).map_err(StoreError::other)?;
    store.put_if_absent(&token_key(&hash), bytes).await?;
    Ok(token)
}

/// Revokes `token`. Returns false when it was not a known token.
pub async fn revoke_token(store: &dyn ObjectStore, token: &str) -> Result<bool, StoreError> {
    let key = token_key(&token_hash(token));
    let existed = get_opt(store, &key).await?.is_some();
    store.delete(&key).await?;
    Ok(existed)
}

/// The user a token belongs to, or `None` for an unknown or revoked token.
pub async fn verify_token(
    store: &dyn ObjectStore,
    token: &str,
) -> Result<Option<UserId>, StoreError> {
    if !token.starts_with(TOKEN_PREFIX) || token.len() > 256 {
        return Ok(None);
    }
    let hash = token_hash(token);
    let Some(obj) = get_opt(store, &token_key(&hash)).await? else {
        return Ok(None);
    };
    let record: TokenRecord = serde_json::from_slice(&obj.bytes)
        .map_err(|e| StoreError::Other(format!("token record is corrupt: {e}")))?;
    if !constant_time_eq(record.token_hash.as_bytes(), hash.as_bytes()) {
        return Ok(None);
    }
    UserId::new(&record.user_id)
        .map(Some)
        .map_err(|e| StoreError::Other(format!("token record has a bad user id: {e}")))
}

/// Whether `user` has been erased.
pub async fn is_erased(store: &dyn ObjectStore, user: &UserId) -> Result<bool, StoreError> {
    Ok(get_opt(store, &erased_key(user)).await?.is_some())
}

/// The bearer credential of a request, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, cred) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| cred.trim())
}

/// The verified account of a request: valid token, account not erased, within its rate limit,
/// holding one of the account's slots for requests in flight (given back when dropped: keep it
/// until the request is done).
#[derive(Debug)]
pub struct AuthUser {
    pub user: UserId,
    pub permit: InFlightPermit,
}

impl FromRequestParts<Arc<AppState>> for AuthUser {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(&parts.headers).ok_or(ApiError::Unauthorized)?;
        let store = state.store.as_ref();
        let user = verify_token(store, token)
            .await?
            .ok_or(ApiError::Unauthorized)?;
        tracing::Span::current().record("user", user.as_str());
        if is_erased(store, &user).await? {
            return Err(ApiError::AccountErased);
        }
        state
            .limiter
            .check(user.as_str())
            .map_err(|retry_after_secs| ApiError::RateLimited { retry_after_secs })?;
        let permit = state
            .in_flight
            .acquire(user.as_str(), crate::inflight::SLOT_WAIT)
            .await
            .map_err(|limit| ApiError::TooManyInFlight { limit })?;
        Ok(AuthUser { user, permit })
    }
}

/// A request carrying the admin key. The key is checked before anything is charged: the right
/// key always gets through, and only wrong or missing keys spend their source's bucket, so a
/// caller guessing the key can lock out only itself.
#[derive(Debug, Clone, Copy)]
pub struct Admin;

impl FromRequestParts<Arc<AppState>> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let Some(key) = &state.admin_key else {
            return Err(ApiError::Forbidden(
                "erase is disabled on this server: set MEMORIA_SYNC_ADMIN_KEY".into(),
            ));
        };
        if let Some(given) = bearer(&parts.headers)
            && constant_time_eq(given.as_bytes(), key.expose().as_bytes())
        {
            return Ok(Admin);
        }
        // The peer's address when the server knows it (a real listener); one bucket otherwise.
        let source = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or_else(|| "unknown".to_owned(), |c| c.0.ip().to_string());
        state
            .admin_limiter
            .check(&source)
            .map_err(|retry_after_secs| ApiError::RateLimited { retry_after_secs })?;
        Err(ApiError::Forbidden(
            "this endpoint needs the admin key as the bearer token".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SeededRandom;
    use crate::store::fs::FsStore;

    #[test]
    fn constant_time_eq_is_eq() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }

    #[tokio::test]
    async fn tokens_are_stored_as_hashes_and_revocable() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::open(dir.path()).unwrap();
        let user = UserId::new("alice").unwrap();
        let token = create_token(&store, &SeededRandom::new(1), &user, 5)
            .await
            .unwrap();
        assert!(token.starts_with(TOKEN_PREFIX));
        let keys = store.list("tokens/").await.unwrap();
        assert_eq!(keys, vec![token_key(&token_hash(&token))]);
        let stored = std::fs::read_to_string(dir.path().join(&keys[0])).unwrap();
        assert!(
            !stored.contains(&token),
            "the token itself must not be stored"
        );
        assert_eq!(verify_token(&store, &token).await.unwrap(), Some(user));
        assert_eq!(verify_token(&store, "msync_nope").await.unwrap(), None);
        assert_eq!(verify_token(&store, "").await.unwrap(), None);
        assert!(revoke_token(&store, &token).await.unwrap());
        assert_eq!(verify_token(&store, &token).await.unwrap(), None);
        assert!(!revoke_token(&store, &token).await.unwrap());
    }
}
