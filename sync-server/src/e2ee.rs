//! End-to-end encrypted scopes (feature `e2ee`, `docs/PROTOCOL.md`): the account's wrapped
//! keys, the per-scope mark, the rules a commit to a marked scope follows, and the purge of a
//! marked scope's plaintext. The server never holds a key: it stores the wrapped blobs as they
//! came, and checks envelopes with [`verify_envelope_file`], which needs none.

use std::collections::HashSet;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use memoria_shared::NoteId;
use memoria_shared::e2ee::{KeyId, WrapKind, WrappedKey};
use memoria_shared::protocol::{
    Change, ChangeOp, E2eeKeys, E2eeKeysResponse, MarkRequest, MarkResponse, PurgeRequest,
    PurgeResponse, Scope,
};

use crate::AppState;
use crate::account::{self, ScopeUsage};
use crate::api::{ApiJson, keep_manifest_copy, load_manifest};
use crate::auth::AuthUser;
use crate::error::ApiError;
use crate::layout::{
    UserId, manifest_key, object_key, objects_prefix, parse_object_key, user_prefix,
};
use crate::manifest::{CheckedPut, Manifest, ScopeMark};
use crate::store::{ObjectStore, StoreError, get_opt};

/// Where an account's wrapped keys are kept.
pub fn keys_key(user: &UserId) -> String {
    format!("{}e2ee/keys.json", user_prefix(user))
}

async fn stored_keys(store: &dyn ObjectStore, user: &UserId) -> Result<Option<E2eeKeys>, ApiError> {
    match get_opt(store, &keys_key(user)).await? {
        Some(o) => serde_json::from_slice(&o.bytes)
            .map(Some)
            .map_err(|e| ApiError::Internal(format!("{}: {e}", keys_key(user)))),
        None => Ok(None),
    }
}

/// `GET /v1/memory/e2ee/keys`.
pub async fn keys_get(
    State(st): State<Arc<AppState>>,
    AuthUser { user, permit: _p }: AuthUser,
) -> Result<Json<E2eeKeysResponse>, ApiError> {
    Ok(Json(E2eeKeysResponse {
        keys: stored_keys(st.store.as_ref(), &user).await?,
    }))
}

/// The key id both blobs wrap, once each is checked to be the blob its field names.
fn blobs_kid(keys: &E2eeKeys) -> Result<KeyId, ApiError> {
    let read = |field: &str, text: &str, kind: WrapKind| -> Result<KeyId, ApiError> {
        let blob = WrappedKey::from_json(text)
            .map_err(|e| ApiError::BadRequest(format!("{field}: {e}")))?;
        if blob.kind() != kind {
            return Err(ApiError::BadRequest(format!(
                "{field}: the blob is not a {field} blob"
            )));
        }
        if kind == WrapKind::Passphrase && !blob.kdf_params().is_some_and(|k| k.accepted()) {
            return Err(ApiError::BadRequest(format!(
                "{field}: the Argon2id costs are outside what readers accept"
            )));
        }
        blob.key_id()
            .ok_or_else(|| ApiError::BadRequest(format!("{field}: no key id")))
    };
    let a = read("passphrase", &keys.passphrase, WrapKind::Passphrase)?;
    let b = read("recovery", &keys.recovery, WrapKind::Recovery)?;
    if a != b {
        return Err(ApiError::BadRequest(
            "passphrase and recovery wrap different account keys".into(),
        ));
    }
    Ok(a)
}

/// `PUT /v1/memory/e2ee/keys`: the first write stores the account's blobs; later ones must
/// wrap the same account key (a new passphrase), else `keys_exist`.
pub async fn keys_put(
    State(st): State<Arc<AppState>>,
    AuthUser { user, permit: _p }: AuthUser,
    ApiJson(req): ApiJson<E2eeKeys>,
) -> Result<Json<E2eeKeysResponse>, ApiError> {
    let kid = blobs_kid(&req)?;
    let store = st.store.as_ref();
    let key = keys_key(&user);
    let bytes = serde_json::to_vec(&req).expect("keys serialize");
    let written = match get_opt(store, &key).await? {
        None => store.put_if_absent(&key, bytes).await,
        Some(o) => {
            let old: E2eeKeys = serde_json::from_slice(&o.bytes)
                .map_err(|e| ApiError::Internal(format!("{key}: {e}")))?;
            if blobs_kid(&old).ok() != Some(kid.clone()) {
                return Err(keys_exist());
            }
            store.put_if_match(&key, bytes, &o.etag).await
        }
    };
    match written {
        Ok(_) => Ok(Json(E2eeKeysResponse { keys: Some(req) })),
        Err(StoreError::PreconditionFailed) => Err(keys_exist()),
        Err(e) => Err(e.into()),
    }
}

fn keys_exist() -> ApiError {
    ApiError::KeysExist(
        "this account's notes are already end-to-end encrypted under another key (set on another \
         machine): unlock this machine with that passphrase or the recovery key instead"
            .into(),
    )
}

/// `POST /v1/memory/e2ee/mark`: from now on the scope takes envelopes under `kid` only; what
/// it holds is its plaintext until a purge removes it. Idempotent.
pub async fn mark(
    State(st): State<Arc<AppState>>,
    AuthUser { user, permit: _p }: AuthUser,
    ApiJson(req): ApiJson<MarkRequest>,
) -> Result<Json<MarkResponse>, ApiError> {
    let kid =
        KeyId::parse(&req.kid).ok_or_else(|| ApiError::BadRequest("kid: not a key id".into()))?;
    let store = st.store.as_ref();
    let Some(keys) = stored_keys(store, &user).await? else {
        return Err(ApiError::ScopeNotEncrypted(
            "this account has no wrapped keys on this server: store them before marking a scope"
                .into(),
        ));
    };
    if blobs_kid(&keys).ok() != Some(kid.clone()) {
        return Err(keys_exist());
    }
    let key = manifest_key(&user, &req.scope);
    for _ in 0..st.commit_attempts.max(1) {
        let (mut m, etag) = load_manifest(&st, &key, None)
            .await?
            .unwrap_or_else(|| unreachable!("no validator was sent"));
        if etag.is_none() && req.only_existing {
            return Ok(Json(MarkResponse { marked: false }));
        }
        match &m.e2ee {
            Some(have) if have.kid == kid.as_str() => {
                return Ok(Json(MarkResponse { marked: true }));
            }
            Some(_) => return Err(other_key()),
            None => {}
        }
        if etag.is_none() {
            let (index, _) = account::load(store, &user).await?;
            if let Err(refusal) = index.check(&req.scope, false, 0, 0, &st.storage) {
                return Err(crate::api::account_refusal(refusal));
            }
        }
        m.generation += 1;
        // A client holding an older generation gets the whole list again.
        m.pruned_at = m.generation;
        m.e2ee = Some(ScopeMark {
            kid: kid.as_str().to_owned(),
            since: m.generation,
        });
        let bytes = m.to_bytes();
        let swapped = match &etag {
            Some(etag) => store.put_if_match(&key, bytes, etag).await,
            None => store.put_if_absent(&key, bytes).await,
        };
        match swapped {
            Ok(new_etag) => {
                if etag.is_none() {
                    let usage = ScopeUsage {
                        bytes: 0,
                        generation: m.generation,
                    };
                    account::record(store, &user, &req.scope, usage).await;
                }
                st.manifests.put(&key, new_etag, m);
                tracing::info!(scope = %req.scope, "scope marked end-to-end encrypted");
                return Ok(Json(MarkResponse { marked: true }));
            }
            Err(StoreError::PreconditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Contention)
}

fn other_key() -> ApiError {
    ApiError::ScopeEncrypted(
        "this scope is end-to-end encrypted under another account key: unlock this machine with \
         the account's passphrase or recovery key"
            .into(),
    )
}

/// Whether a commit may go to a scope whose manifest is `current`: plaintext commits
/// (`e2ee` false) only to unmarked scopes; encrypted ones only to marked scopes, with every
/// envelope under the mark's key, and never onto the scope's plaintext.
pub fn check_commit(
    current: &Manifest,
    changes: &[Change],
    puts: &[Option<CheckedPut>],
    e2ee: bool,
) -> Result<(), ApiError> {
    match (&current.e2ee, e2ee) {
        (None, false) => Ok(()),
        (Some(_), false) => Err(encrypted_scope()),
        (None, true) => Err(not_encrypted()),
        (Some(mark), true) => {
            for (c, p) in changes.iter().zip(puts) {
                if p.as_ref().and_then(|p| p.kid.as_ref()).map(KeyId::as_str)
                    != (c.op == ChangeOp::Put).then_some(mark.kid.as_str())
                {
                    return Err(other_key());
                }
                if current.notes.contains_key(&c.id) && current.is_plaintext(&c.id) {
                    return Err(ApiError::ScopeEncrypted(format!(
                        "note {} is plaintext kept from before this scope was encrypted: it is \
                         not changed, only purged",
                        c.id
                    )));
                }
            }
            Ok(())
        }
    }
}

/// A plaintext commit never creates a scope in an account that has wrapped keys: a client
/// without the key (one that does not know encryption, or a machine not unlocked) would
/// otherwise put plaintext beside the account's ciphertext. A client with the key marks a
/// scope before its first commit, which creates it.
pub async fn refuse_new_plaintext_scope(
    store: &dyn ObjectStore,
    user: &UserId,
) -> Result<(), ApiError> {
    if stored_keys(store, user).await?.is_some() {
        return Err(ApiError::ScopeEncrypted(
            "this account's notes are end-to-end encrypted, and a new scope is only ever created \
             encrypted: update Memoria, then unlock this machine with the account's passphrase \
             or recovery key"
                .into(),
        ));
    }
    Ok(())
}

pub fn encrypted_scope() -> ApiError {
    ApiError::ScopeEncrypted(
        "this scope is end-to-end encrypted: update Memoria, then unlock this machine with the \
         account's passphrase or recovery key"
            .into(),
    )
}

pub fn not_encrypted() -> ApiError {
    ApiError::ScopeNotEncrypted(
        "this scope is not marked end-to-end encrypted on this server: mark it first".into(),
    )
}

/// The encrypted view of a marked scope: its plaintext left out. `Err` for a scope not
/// marked.
pub fn encrypted_view(m: &mut Manifest) -> Result<bool, ApiError> {
    if m.e2ee.is_none() {
        return Err(not_encrypted());
    }
    let plain: Vec<NoteId> = m
        .notes
        .keys()
        .filter(|id| m.is_plaintext(id))
        .cloned()
        .collect();
    for id in &plain {
        m.notes.remove(id);
    }
    Ok(!plain.is_empty())
}

/// Whether a stored note id is an opaque id (32 symbols of lowercase Crockford base32).
fn opaque_shaped(id: &str) -> bool {
    id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b.is_ascii_lowercase() && !b"ilou".contains(&b)))
}

/// `POST /v1/memory/e2ee/purge`: removes a marked scope's plaintext — its entries, their
/// revision files, the receipts and replaced revisions naming them, and the manifest's copy —
/// leaving only what was written encrypted. Idempotent.
pub async fn purge(
    State(st): State<Arc<AppState>>,
    AuthUser { user, permit: _p }: AuthUser,
    ApiJson(req): ApiJson<PurgeRequest>,
) -> Result<Json<PurgeResponse>, ApiError> {
    let store = st.store.as_ref();
    let key = manifest_key(&user, &req.scope);
    for _ in 0..st.commit_attempts.max(1) {
        let (m, etag) = load_manifest(&st, &key, None)
            .await?
            .unwrap_or_else(|| unreachable!("no validator was sent"));
        let Some(etag) = etag else {
            return Ok(Json(PurgeResponse {
                removed: 0,
                deleted_objects: 0,
            }));
        };
        if m.e2ee.is_none() {
            return Err(not_encrypted());
        }
        let mut next = m.clone();
        let removed = encrypted_view(&mut next)?;
        let plain: HashSet<NoteId> = m
            .notes
            .keys()
            .filter(|id| !next.notes.contains_key(*id))
            .cloned()
            .collect();
        next.changed.retain(|id, _| next.notes.contains_key(id));
        next.receipts
            .retain(|r| r.applied.iter().all(|a| next.notes.contains_key(&a.id)));
        next.superseded.retain(|s| opaque_shaped(s.id.as_str()));
        let changed = removed
            || next.receipts.len() != m.receipts.len()
            || next.superseded.len() != m.superseded.len();
        if changed {
            next.generation += 1;
            next.pruned_at = next.generation;
            let bytes = next.to_bytes();
            match store.put_if_match(&key, bytes.clone(), &etag).await {
                Ok(new_etag) => {
                    keep_manifest_copy(st.store.clone(), key.clone(), bytes, next.generation).await;
                    let usage = ScopeUsage {
                        bytes: next.live_bytes(),
                        generation: next.generation,
                    };
                    account::record(store, &user, &req.scope, usage).await;
                    st.manifests.put(&key, new_etag, next.clone());
                }
                Err(StoreError::PreconditionFailed) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let deleted = delete_plaintext_files(&st, &user, &req.scope, &next, &plain).await?;
        tracing::info!(scope = %req.scope, removed = plain.len(), deleted, "plaintext purged");
        return Ok(Json(PurgeResponse {
            removed: plain.len() as u64,
            deleted_objects: deleted,
        }));
    }
    Err(ApiError::Contention)
}

/// Deletes the revision files of the purged notes `plain`, and any other file of a note id
/// that is not an opaque id and not in the manifest (plaintext kept from before the mark). A
/// file of an opaque id the manifest does not name yet may be a commit in flight: left to the
/// scope's sweep.
async fn delete_plaintext_files(
    st: &AppState,
    user: &UserId,
    scope: &Scope,
    next: &Manifest,
    plain: &HashSet<NoteId>,
) -> Result<u64, ApiError> {
    let prefix = objects_prefix(user, scope);
    let keys = st.store.list(&prefix).await?;
    let mut deleted = 0;
    for k in keys {
        let Some((note, rev)) = parse_object_key(&prefix, &k) else {
            continue;
        };
        let purged = NoteId::new(note).is_ok_and(|id| {
            plain.contains(&id) || (!next.notes.contains_key(&id) && !opaque_shaped(note))
        });
        if purged {
            debug_assert_eq!(
                object_key(user, scope, &NoteId::new(note).expect("checked"), rev),
                k
            );
            match st.store.delete(&k).await {
                Ok(()) | Err(StoreError::NotFound) => deleted += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    use memoria_shared::ContentHash;
    use memoria_shared::protocol::ManifestEntry;

    fn id(s: &str) -> NoteId {
        NoteId::new(s).unwrap()
    }

    fn entry(n: &str) -> ManifestEntry {
        ManifestEntry {
            id: id(n),
            revision: format!("r-{n}"),
            hash: ContentHash::parse(&"ab".repeat(32)),
            size: Some(1),
            deleted: false,
            created_at: 1,
            updated_at: 1,
        }
    }

    fn change(n: &str, op: ChangeOp) -> Change {
        Change {
            id: id(n),
            op,
            base_revision: Some(format!("r-{n}")),
            body: None,
            hash: None,
        }
    }

    fn put(kid: &str) -> Option<CheckedPut> {
        Some(CheckedPut {
            hash: ContentHash::parse(&"cd".repeat(32)).unwrap(),
            size: 0,
            kid: KeyId::parse(kid),
        })
    }

    const KID: &str = "0123456789abcdef";
    const OTHER: &str = "fedcba9876543210";

    /// `old` was written before the mark (generation 2), `new` after it.
    fn marked() -> Manifest {
        let mut m = Manifest {
            generation: 3,
            e2ee: Some(ScopeMark {
                kid: KID.into(),
                since: 2,
            }),
            ..Manifest::default()
        };
        for (n, g) in [("old", 1), ("new", 3)] {
            m.notes.insert(id(n), entry(n));
            m.changed.insert(id(n), g);
        }
        m
    }

    #[test]
    fn a_marked_scope_takes_envelopes_under_its_key_only_and_never_touches_its_plaintext() {
        let m = marked();
        assert!(m.is_plaintext(&id("old")) && !m.is_plaintext(&id("new")));
        let ok = |c: &[Change], p: &[Option<CheckedPut>], e2ee| check_commit(&m, c, p, e2ee);
        let code = |r: Result<(), ApiError>| r.unwrap_err().code();
        use memoria_shared::protocol::ErrorCode as C;
        assert!(ok(&[change("new", ChangeOp::Put)], &[put(KID)], true).is_ok());
        assert!(ok(&[change("new", ChangeOp::Delete)], &[None], true).is_ok());
        assert_eq!(
            code(ok(&[change("new", ChangeOp::Put)], &[put(OTHER)], true)),
            C::ScopeEncrypted
        );
        assert_eq!(
            code(ok(&[change("old", ChangeOp::Delete)], &[None], true)),
            C::ScopeEncrypted
        );
        assert_eq!(
            code(ok(&[change("new", ChangeOp::Put)], &[put(KID)], false)),
            C::ScopeEncrypted,
            "plaintext commits to a marked scope are refused"
        );
        let unmarked = Manifest::default();
        assert_eq!(
            check_commit(&unmarked, &[change("x", ChangeOp::Put)], &[put(KID)], true)
                .unwrap_err()
                .code(),
            C::ScopeNotEncrypted
        );
        assert!(check_commit(&unmarked, &[change("x", ChangeOp::Put)], &[put(KID)], false).is_ok());

        let mut view = marked();
        assert!(encrypted_view(&mut view).unwrap());
        assert_eq!(view.notes.keys().collect::<Vec<_>>(), [&id("new")]);
        assert!(encrypted_view(&mut Manifest::default()).is_err());
    }

    #[test]
    fn opaque_ids_are_told_from_slugs() {
        assert!(opaque_shaped("0123456789abcdefghjkmnpqrstvwxyz"));
        assert!(!opaque_shaped("pricing-borderless-3fa"));
        assert!(!opaque_shaped("0123456789abcdefghjkmnpqrstvwxyi"));
    }
}
