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
    Change, ChangeOp, E2eeKeys, E2eeKeysResponse, MarkRequest, MarkResponse, OffRequest,
    PurgeRequest, PurgeResponse, Scope, UnmarkRequest, UnmarkResponse,
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
use crate::store::{ETag, ObjectStore, StoreError, get_opt};

/// Where an account's wrapped keys are kept.
pub fn keys_key(user: &UserId) -> String {
    format!("{}e2ee/keys.json", user_prefix(user))
}

async fn stored_keys(store: &dyn ObjectStore, user: &UserId) -> Result<Option<E2eeKeys>, ApiError> {
    Ok(stored_keys_at(store, user).await?.map(|(keys, _)| keys))
}

/// The account's wrapped keys as stored, with the object's ETag for a compare-and-swap.
async fn stored_keys_at(
    store: &dyn ObjectStore,
    user: &UserId,
) -> Result<Option<(E2eeKeys, ETag)>, ApiError> {
    let key = keys_key(user);
    match get_opt(store, &key).await? {
        Some(o) => serde_json::from_slice(&o.bytes)
            .map(|keys| Some((keys, o.etag)))
            .map_err(|e| ApiError::Internal(format!("{key}: {e}"))),
        None => Ok(None),
    }
}

/// Whether `done` holds for every scope of the account (a scope whose manifest is gone holds).
async fn every_scope(
    st: &AppState,
    user: &UserId,
    done: impl Fn(&Manifest) -> bool,
) -> Result<bool, ApiError> {
    let (index, _) = account::load(st.store.as_ref(), user).await?;
    for name in index.scopes.keys() {
        let Ok(scope) = Scope::parse(name) else {
            continue;
        };
        let Some((m, _)) = load_manifest(st, &manifest_key(user, &scope), None).await? else {
            continue;
        };
        if !done(&m) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Where the proof of the last turning off is kept once the keys are removed.
fn ended_key(user: &UserId) -> String {
    format!("{}e2ee/ended.json", user_prefix(user))
}

/// The account's keys as `GET /v1/memory/e2ee/keys` answers them.
async fn keys_response(
    store: &dyn ObjectStore,
    user: &UserId,
) -> Result<E2eeKeysResponse, ApiError> {
    let keys = stored_keys(store, user).await?;
    let ended = match &keys {
        Some(_) => None,
        None => get_opt(store, &ended_key(user))
            .await?
            .and_then(|o| String::from_utf8(o.bytes).ok()),
    };
    Ok(E2eeKeysResponse { keys, ended })
}

/// `GET /v1/memory/e2ee/keys`.
pub async fn keys_get(
    State(st): State<Arc<AppState>>,
    AuthUser { user, permit: _p }: AuthUser,
) -> Result<Json<E2eeKeysResponse>, ApiError> {
    Ok(Json(keys_response(st.store.as_ref(), &user).await?))
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

/// The key id a rotation blob (`previous`, `successor`: an account key wrapped under another,
/// in the recovery blob's form) wraps, if the field is there.
fn chain_kid(field: &str, text: Option<&str>) -> Result<Option<KeyId>, ApiError> {
    let Some(text) = text else { return Ok(None) };
    let blob =
        WrappedKey::from_json(text).map_err(|e| ApiError::BadRequest(format!("{field}: {e}")))?;
    if blob.kind() != WrapKind::Recovery {
        return Err(ApiError::BadRequest(format!(
            "{field}: an account key wrapped under another has the recovery blob's form"
        )));
    }
    blob.key_id()
        .map(Some)
        .ok_or_else(|| ApiError::BadRequest(format!("{field}: no key id")))
}

/// The previous account key's id while a rotation is under way.
fn previous_kid(keys: &E2eeKeys) -> Option<KeyId> {
    chain_kid("previous", keys.previous.as_deref())
        .ok()
        .flatten()
}

/// `PUT /v1/memory/e2ee/keys`: the first write stores the account's blobs; later ones must
/// wrap the same account key (a new passphrase, a new recovery key), else `keys_exist`,
/// unless they start a rotation: blobs of a new key with `previous`, the stored key wrapped
/// under the new one. A write without `previous` keeps the stored `previous` and `successor`.
pub async fn keys_put(
    State(st): State<Arc<AppState>>,
    AuthUser { user, permit: _p }: AuthUser,
    ApiJson(req): ApiJson<E2eeKeys>,
) -> Result<Json<E2eeKeysResponse>, ApiError> {
    let kid = blobs_kid(&req)?;
    let previous = chain_kid("previous", req.previous.as_deref())?;
    let successor = chain_kid("successor", req.successor.as_deref())?;
    if successor.is_some() && (previous.is_none() || successor.as_ref() != Some(&kid)) {
        return Err(ApiError::BadRequest(
            "successor: it wraps this account key, and comes with previous".into(),
        ));
    }
    if previous.as_ref() == Some(&kid) {
        return Err(ApiError::BadRequest(
            "previous: it wraps the key before this one, not this one".into(),
        ));
    }
    let store = st.store.as_ref();
    let key = keys_key(&user);
    let (next, written) = match get_opt(store, &key).await? {
        None if previous.is_some() => {
            return Err(ApiError::BadRequest(
                "previous: this account has no key to rotate".into(),
            ));
        }
        None => {
            let bytes = serde_json::to_vec(&req).expect("keys serialize");
            (req, store.put_if_absent(&key, bytes).await)
        }
        Some(o) => {
            let old: E2eeKeys = serde_json::from_slice(&o.bytes)
                .map_err(|e| ApiError::Internal(format!("{key}: {e}")))?;
            let old_kid = blobs_kid(&old).ok();
            let mut next = req;
            if old_kid.as_ref() == Some(&kid) {
                next.off = old.off.clone();
                match &previous {
                    None => {
                        next.previous = old.previous;
                        next.successor = old.successor;
                    }
                    Some(p) if previous_kid(&old).as_ref() != Some(p) => {
                        return Err(keys_exist());
                    }
                    Some(_) => {}
                }
            } else if previous.is_none() || previous != old_kid {
                return Err(keys_exist());
            } else if old.off.is_some() {
                return Err(ApiError::KeysExist(
                    "encryption is being turned off for this account: a new key is not taken"
                        .into(),
                ));
            } else if old.previous.is_some() {
                return Err(ApiError::KeysExist(
                    "a rotation of this account's key is under way: run it again to finish it \
                     before starting another"
                        .into(),
                ));
            }
            let bytes = serde_json::to_vec(&next).expect("keys serialize");
            (next, store.put_if_match(&key, bytes, &o.etag).await)
        }
    };
    match written {
        Ok(_) => Ok(Json(E2eeKeysResponse {
            keys: Some(next),
            ended: None,
        })),
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
    if keys.off.is_some() {
        return Err(ApiError::ScopeNotEncrypted(
            "encryption is being turned off for this account: its scopes sync in plaintext".into(),
        ));
    }
    let current = blobs_kid(&keys).ok();
    let previous = previous_kid(&keys);
    // During a rotation a mark under the previous key only asks whether the scope is still
    // under it: it never marks anything.
    let asks = previous.as_ref() == Some(&kid);
    if current.as_ref() != Some(&kid) && !asks {
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
            Some(_) if asks => return Err(other_key()),
            // A rotation moves the scope to the new key: what it holds under the previous
            // key is left out from now on, as plaintext is after a first mark, and purged once
            // a pass re-uploaded it. A scope holding nothing takes any key of the account.
            Some(have)
                if previous.as_ref().is_some_and(|p| p.as_str() == have.kid)
                    || m.notes.is_empty() => {}
            Some(_) => return Err(other_key()),
            None if asks => return Err(keys_exist()),
            None => {}
        }
        let mut born_encrypted = false;
        if etag.is_none() {
            let (index, _) = account::load(store, &user).await?;
            if let Err(refusal) = index.check(&req.scope, false, 0, 0, &st.storage) {
                return Err(crate::api::account_refusal(refusal));
            }
            // A scope without a manifest holds no entry; a file under its name can only be
            // left by a plaintext commit that never landed. With none, nothing of the scope is
            // ever plaintext: a plaintext commit still in flight loses its compare-and-swap to
            // this mark, is refused against it and removes what it wrote.
            born_encrypted = store
                .list(&objects_prefix(&user, &req.scope))
                .await?
                .is_empty();
        }
        m.generation += 1;
        // A client holding an older generation gets the whole list again.
        m.pruned_at = m.generation;
        m.e2ee = Some(ScopeMark {
            kid: kid.as_str().to_owned(),
            since: m.generation,
            born_encrypted,
        });
        // Envelopes left from an earlier unmark are older than this mark: its plaintext.
        m.e2ee_off = None;
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
        (None, false) => match changes
            .iter()
            .find(|c| current.notes.contains_key(&c.id) && current.is_left_encrypted(&c.id))
        {
            Some(c) => Err(ApiError::ScopeEncrypted(format!(
                "note {} is an envelope kept from when this scope was encrypted: it is not \
                 changed, only purged",
                c.id
            ))),
            None => Ok(()),
        },
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
    if stored_keys(store, user)
        .await?
        .is_some_and(|k| k.off.is_none())
    {
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

/// The plaintext view of a scope whose mark was removed: the envelopes it kept left out.
/// Whether any was.
pub fn plaintext_view(m: &mut Manifest) -> bool {
    if m.e2ee_off.is_none() {
        return false;
    }
    let left: Vec<NoteId> = m
        .notes
        .keys()
        .filter(|id| m.is_left_encrypted(id))
        .cloned()
        .collect();
    for id in &left {
        m.notes.remove(id);
    }
    !left.is_empty()
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
        let mut next = m.clone();
        let removed = match (&m.e2ee, &m.e2ee_off) {
            (None, None) => return Err(not_encrypted()),
            (None, Some(_)) => plaintext_view(&mut next),
            (Some(_), _) => encrypted_view(&mut next)?,
        };
        let plain: HashSet<NoteId> = m
            .notes
            .keys()
            .filter(|id| !next.notes.contains_key(*id))
            .cloned()
            .collect();
        next.changed.retain(|id, _| next.notes.contains_key(id));
        next.receipts
            .retain(|r| r.applied.iter().all(|a| next.notes.contains_key(&a.id)));
        next.superseded.retain(|s| {
            !plain.contains(&s.id) && (next.e2ee.is_none() || opaque_shaped(s.id.as_str()))
        });
        // Once its envelopes are gone, an unmarked scope is a plaintext scope like any other.
        if next.e2ee.is_none() {
            next.e2ee_off = None;
        }
        let changed = removed
            || next.e2ee_off != m.e2ee_off
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
        // A scope the mark created empty has no plaintext file to find: its listing, a walk
        // over every note's revisions, is skipped.
        let born_encrypted =
            plain.is_empty() && next.e2ee.as_ref().is_some_and(|e| e.born_encrypted);
        let deleted = match born_encrypted {
            true => 0,
            false => delete_plaintext_files(&st, &user, &req.scope, &next, &plain).await?,
        };
        tracing::info!(scope = %req.scope, removed = plain.len(), deleted, "plaintext purged");
        finish_rotation(&st, &user).await?;
        finish_off(&st, &user).await?;
        return Ok(Json(PurgeResponse {
            removed: plain.len() as u64,
            deleted_objects: deleted,
        }));
    }
    Err(ApiError::Contention)
}

/// Ends a rotation once no scope of the account holds anything under the previous key: every
/// marked scope is under the current key with its older entries purged, or holds nothing.
/// The previous key is then dropped from the account's blobs; `successor` stays, so a machine
/// still holding the previous key follows on its next pass (unless the rotation locked it out).
async fn finish_rotation(st: &AppState, user: &UserId) -> Result<(), ApiError> {
    let store = st.store.as_ref();
    let Some((mut keys, etag)) = stored_keys_at(store, user).await? else {
        return Ok(());
    };
    let Ok(kid) = blobs_kid(&keys) else {
        return Ok(());
    };
    if keys.previous.is_none() {
        return Ok(());
    }
    let moved = |m: &Manifest| match &m.e2ee {
        None => true,
        Some(mark) => {
            m.notes.is_empty()
                || (mark.kid == kid.as_str() && !m.notes.keys().any(|id| m.is_plaintext(id)))
        }
    };
    if !every_scope(st, user, moved).await? {
        return Ok(());
    }
    keys.previous = None;
    let bytes = serde_json::to_vec(&keys).expect("keys serialize");
    match store.put_if_match(&keys_key(user), bytes, &etag).await {
        // Another write came first: the next purge looks again.
        Ok(_) | Err(StoreError::PreconditionFailed) => {
            tracing::info!("account key rotation finished");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /v1/memory/e2ee/off`: starts turning encryption off for the account (its key must
/// be `kid`, and no rotation under way): from now on no scope is marked, each client unmarks
/// the scopes it syncs, and the keys are removed once no scope is marked or holds envelopes.
pub async fn off(
    State(st): State<Arc<AppState>>,
    AuthUser { user, permit: _p }: AuthUser,
    ApiJson(req): ApiJson<OffRequest>,
) -> Result<Json<E2eeKeysResponse>, ApiError> {
    let store = st.store.as_ref();
    let key = keys_key(&user);
    let Some(o) = get_opt(store, &key).await? else {
        return Ok(Json(keys_response(store, &user).await?));
    };
    let mut keys: E2eeKeys =
        serde_json::from_slice(&o.bytes).map_err(|e| ApiError::Internal(format!("{key}: {e}")))?;
    if blobs_kid(&keys).ok().map(|k| k.as_str().to_owned()) != Some(req.kid) {
        return Err(keys_exist());
    }
    if keys.previous.is_some() {
        return Err(ApiError::KeysExist(
            "a rotation of this account's key is under way: finish it (run it again) before \
             turning encryption off"
                .into(),
        ));
    }
    if chain_kid("proof", Some(&req.proof))?.as_ref() != blobs_kid(&keys).ok().as_ref() {
        return Err(ApiError::BadRequest(
            "proof: it wraps the account key under itself".into(),
        ));
    }
    if keys.off.is_none() {
        keys.off = Some(req.proof);
        let bytes = serde_json::to_vec(&keys).expect("keys serialize");
        match store.put_if_match(&key, bytes, &o.etag).await {
            Ok(_) => {}
            Err(StoreError::PreconditionFailed) => return Err(ApiError::Contention),
            Err(e) => return Err(e.into()),
        }
        tracing::info!("turning end-to-end encryption off");
    }
    finish_off(&st, &user).await?;
    Ok(Json(keys_response(store, &user).await?))
}

/// `POST /v1/memory/e2ee/unmark`: while encryption is being turned off, the scope goes back to
/// plaintext: its mark is removed, and the envelopes it holds are left out of every request
/// until a purge removes them. Idempotent.
pub async fn unmark(
    State(st): State<Arc<AppState>>,
    AuthUser { user, permit: _p }: AuthUser,
    ApiJson(req): ApiJson<UnmarkRequest>,
) -> Result<Json<UnmarkResponse>, ApiError> {
    let store = st.store.as_ref();
    // Without keys encryption is off already (nothing is marked then): a no-op.
    if stored_keys(store, &user)
        .await?
        .is_some_and(|k| k.off.is_none())
    {
        return Err(ApiError::ScopeEncrypted(
            "encryption is not being turned off for this account: a scope is unmarked only then"
                .into(),
        ));
    }
    let key = manifest_key(&user, &req.scope);
    for _ in 0..st.commit_attempts.max(1) {
        let (mut m, etag) = load_manifest(&st, &key, None)
            .await?
            .unwrap_or_else(|| unreachable!("no validator was sent"));
        let Some(etag) = etag else {
            return Ok(Json(UnmarkResponse { unmarked: false }));
        };
        match &m.e2ee {
            None => return Ok(Json(UnmarkResponse { unmarked: false })),
            Some(mark) if mark.kid != req.kid => return Err(other_key()),
            Some(_) => {}
        }
        m.generation += 1;
        m.pruned_at = m.generation;
        m.e2ee_off = m.e2ee.take().map(|mark| ScopeMark {
            kid: mark.kid,
            since: m.generation,
            born_encrypted: false,
        });
        match store.put_if_match(&key, m.to_bytes(), &etag).await {
            Ok(new_etag) => {
                st.manifests.put(&key, new_etag, m);
                tracing::info!(scope = %req.scope, "scope unmarked: back to plaintext");
                return Ok(Json(UnmarkResponse { unmarked: true }));
            }
            Err(StoreError::PreconditionFailed) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::Contention)
}

/// Ends turning encryption off once no scope of the account is marked or holds an envelope
/// from before its unmark: the account's wrapped keys are removed, and the proof that it was
/// asked for is kept in their place.
async fn finish_off(st: &AppState, user: &UserId) -> Result<(), ApiError> {
    let store = st.store.as_ref();
    let Some((keys, _)) = stored_keys_at(store, user).await? else {
        return Ok(());
    };
    let Some(proof) = keys.off else {
        return Ok(());
    };
    let plaintext =
        |m: &Manifest| m.e2ee.is_none() && !m.notes.keys().any(|id| m.is_left_encrypted(id));
    if !every_scope(st, user, plaintext).await? {
        return Ok(());
    }
    let key = keys_key(user);
    let ended = ended_key(user);
    let written = match get_opt(store, &ended).await? {
        Some(o) => {
            store
                .put_if_match(&ended, proof.into_bytes(), &o.etag)
                .await
        }
        None => store.put_if_absent(&ended, proof.into_bytes()).await,
    };
    match written {
        // Another purge finishing at once wrote it.
        Ok(_) | Err(StoreError::PreconditionFailed) => {}
        Err(e) => return Err(e.into()),
    }
    match store.delete(&key).await {
        Ok(()) | Err(StoreError::NotFound) => {
            tracing::info!("end-to-end encryption is off: the account's keys are removed");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether an encrypted snapshot reading with key `kid` may read the marked scope of `m`.
pub fn check_reader(m: &Manifest, kid: Option<&str>) -> Result<(), ApiError> {
    match (&m.e2ee, kid) {
        (Some(mark), Some(kid)) if mark.kid != kid => Err(other_key()),
        _ => Ok(()),
    }
}

/// Deletes the revision files of the purged notes `plain`, and in a marked scope any other
/// file of a note id that is not an opaque id and not in the manifest (plaintext kept from
/// before the mark). A file the manifest does not name yet that may be a commit in flight (an
/// opaque id in a marked scope, any id in an unmarked one) is left to the scope's sweep.
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
            plain.contains(&id)
                || (next.e2ee.is_some() && !next.notes.contains_key(&id) && !opaque_shaped(note))
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
                born_encrypted: false,
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
    fn an_unmarked_scope_keeps_its_envelopes_out_of_plaintext_requests_until_purged() {
        let mut m = marked();
        m.e2ee_off = m.e2ee.take().map(|mark| ScopeMark {
            kid: mark.kid,
            since: 3,
            born_encrypted: false,
        });
        m.generation = 4;
        m.notes.insert(id("plain"), entry("plain"));
        m.changed.insert(id("plain"), 4);
        assert!(m.is_left_encrypted(&id("new")) && m.is_left_encrypted(&id("old")));
        assert!(!m.is_left_encrypted(&id("plain")));
        use memoria_shared::protocol::ErrorCode as C;
        assert_eq!(
            check_commit(&m, &[change("new", ChangeOp::Put)], &[None], false)
                .unwrap_err()
                .code(),
            C::ScopeEncrypted,
            "an envelope is only purged"
        );
        assert!(check_commit(&m, &[change("plain", ChangeOp::Put)], &[None], false).is_ok());
        assert!(check_commit(&m, &[change("fresh", ChangeOp::Put)], &[None], false).is_ok());
        let mut view = m.clone();
        assert!(plaintext_view(&mut view));
        assert_eq!(view.notes.keys().collect::<Vec<_>>(), [&id("plain")]);
        // A marked scope is never read through the plaintext view.
        let mut view = marked();
        assert!(!plaintext_view(&mut view));
        assert!(!view.is_left_encrypted(&id("old")));
    }

    #[test]
    fn an_encrypted_snapshot_names_the_key_it_reads_with() {
        let m = marked();
        assert!(check_reader(&m, Some(KID)).is_ok());
        assert!(check_reader(&m, None).is_ok());
        assert_eq!(
            check_reader(&m, Some(OTHER)).unwrap_err().code(),
            memoria_shared::protocol::ErrorCode::ScopeEncrypted
        );
    }

    #[test]
    fn opaque_ids_are_told_from_slugs() {
        assert!(opaque_shaped("0123456789abcdefghjkmnpqrstvwxyz"));
        assert!(!opaque_shaped("pricing-borderless-3fa"));
        assert!(!opaque_shaped("0123456789abcdefghjkmnpqrstvwxyi"));
    }
}
