//! The HTTP handlers. They validate, read the manifest, and compare-and-swap; they never merge.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use memoria_shared::ContentHash;
use memoria_shared::e2ee::{EnvelopeError, verify_envelope_file};
use memoria_shared::protocol::{
    Applied, ChangeOp, CommitRequest, CommitResponse, DamagedNote, EraseRequest, EraseResponse,
    FEATURES, IdentityResponse, NoteBody, NoteFileMismatch, PROTOCOL_VERSION, Quotas, Scope,
    ScopeError, SnapshotRequest, SnapshotResponse, valid_commit_id, verify_note_file,
};
use serde::de::DeserializeOwned;
use tokio::task::JoinSet;

use crate::AppState;
use crate::account::{self, AccountRefusal, ScopeUsage};
use crate::auth::{Admin, AuthUser, is_erased};
use crate::error::ApiError;
use crate::layout::{
    UserId, erased_key, manifest_copy_key, manifest_key, object_key, objects_prefix,
    parse_object_key, user_prefix,
};
use crate::manifest::{CheckedPut, Manifest, Refusal, Superseded, duplicate_ids, plan_commit};
use crate::random::{revision_id, revision_time};
use crate::store::{ETag, Fetched, ObjectStore, StoreError};

/// Store requests a handler keeps in flight at once.
const PARALLEL: usize = 16;

/// JSON body extractor whose refusals are [`ApiError`]s: 400 naming the field, 413 when too big,
/// 404 for a scope that is neither `user` nor `project:<id>`.
pub struct ApiJson<T>(pub T);

/// Just the scope of a request body, to tell an unknown scope from other bad input.
#[derive(serde::Deserialize)]
struct ScopeOnly {
    scope: String,
}

impl<T: DeserializeOwned + Send + 'static, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rej| {
            if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::TooLarge(
                    "the request body is larger than this server accepts: split the commit".into(),
                )
            } else {
                ApiError::BadRequest(rej.body_text())
            }
        })?;
        if bytes.len() > OFF_WORKER_BYTES {
            // Parsing a large body takes milliseconds of CPU: on a blocking thread, the async
            // workers keep answering other requests meanwhile.
            tokio::task::spawn_blocking(move || parse_body(&bytes))
                .await
                .map_err(|e| ApiError::Internal(format!("parsing a request body: {e}")))?
        } else {
            parse_body(&bytes)
        }
    }
}

/// Bodies larger than this are parsed and checked on a blocking thread, not an async worker.
pub const OFF_WORKER_BYTES: usize = 64 * 1024;

fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<ApiJson<T>, ApiError> {
    match Json::<T>::from_bytes(bytes) {
        Ok(Json(v)) => Ok(ApiJson(v)),
        Err(rej) => {
            if let Ok(ScopeOnly { scope }) = serde_json::from_slice(bytes)
                && let Err(e @ ScopeError::Unknown(_)) = Scope::parse(&scope)
            {
                return Err(ApiError::UnknownScope(e.to_string()));
            }
            Err(ApiError::BadRequest(rej.body_text()))
        }
    }
}

pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

pub async fn identity(
    State(st): State<Arc<AppState>>,
    AuthUser { user, .. }: AuthUser,
) -> Json<IdentityResponse> {
    Json(IdentityResponse {
        user_id: user.to_string(),
        protocol_version: PROTOCOL_VERSION,
        quotas: st.quotas,
        storage_quotas: Some(st.storage),
        features: FEATURES.iter().map(|f| (*f).to_owned()).collect(),
    })
}

/// The scope's manifest (empty when never written) and its ETag; `None` when it is still the
/// version `known`. Taken from [`AppState::manifests`] when kept there at that ETag.
pub(crate) async fn load_manifest(
    st: &AppState,
    key: &str,
    known: Option<&ETag>,
) -> Result<Option<(Manifest, Option<ETag>)>, ApiError> {
    match st.store.get(key, known).await {
        Ok(Fetched::NotModified) => Ok(None),
        Ok(Fetched::Object(o)) => {
            let m = match st.manifests.take(key, &o.etag) {
                Some(m) => m,
                None => match Manifest::from_bytes(&o.bytes) {
                    Ok(m) => m,
                    Err(why) => last_good_manifest(st, key, &why).await?,
                },
            };
            // With a damaged manifest this is still its ETag: the next commit's
            // compare-and-swap replaces it, which repairs the scope.
            Ok(Some((m, Some(o.etag))))
        }
        Err(StoreError::NotFound) => Ok(Some((Manifest::default(), None))),
        Err(e) => Err(e.into()),
    }
}

/// The copy of a damaged manifest kept beside it, or a refusal saying the scope needs its
/// operator. The copy is a recent manifest of the scope: the notes committed after it are
/// missing from it until their machines send them again, and revision files it names that
/// were collected since are reported as `damaged`.
async fn last_good_manifest(st: &AppState, key: &str, why: &str) -> Result<Manifest, ApiError> {
    let copy_key = manifest_copy_key(key);
    let copy = match st.store.get(&copy_key, None).await {
        Ok(Fetched::Object(o)) => Manifest::from_bytes(&o.bytes).map_err(|e| (e, true)),
        Ok(Fetched::NotModified) => unreachable!("no validator was sent"),
        Err(StoreError::NotFound) => Err(("there is no copy".to_owned(), false)),
        Err(e) => return Err(e.into()),
    };
    match copy {
        Ok(m) => {
            tracing::error!(
                %key,
                %why,
                copy = %copy_key,
                generation = m.generation,
                "manifest is damaged: serving its last good copy until the next commit replaces it"
            );
            Ok(m)
        }
        Err((copy_why, _)) => {
            tracing::error!(
                %key,
                %why,
                copy = %copy_key,
                copy_why = %copy_why,
                "manifest is damaged and has no good copy: restore it from a backup"
            );
            Err(ApiError::DamagedManifest)
        }
    }
}

/// Keeps `bytes`, the manifest just written at generation `generation`, as the scope's last
/// good copy, unless the copy there is as new already. Best effort: a failure only leaves an
/// older copy.
pub(crate) async fn keep_manifest_copy(
    store: Arc<dyn ObjectStore>,
    key: String,
    bytes: Vec<u8>,
    generation: u64,
) {
    #[derive(serde::Deserialize)]
    struct GenerationOnly {
        generation: u64,
    }
    let copy_key = manifest_copy_key(&key);
    let written = match store.get(&copy_key, None).await {
        Ok(Fetched::Object(o)) => {
            let newer = serde_json::from_slice::<GenerationOnly>(&o.bytes)
                .is_ok_and(|c| c.generation >= generation);
            if newer {
                return;
            }
            store.put_if_match(&copy_key, bytes, &o.etag).await
        }
        Ok(Fetched::NotModified) => return,
        Err(StoreError::NotFound) => store.put_if_absent(&copy_key, bytes).await,
        Err(e) => Err(e),
    };
    match written {
        Ok(_) | Err(StoreError::PreconditionFailed) => {}
        Err(e) => tracing::warn!(key = %copy_key, error = %e, "manifest copy not written"),
    }
}

pub async fn snapshot(
    State(st): State<Arc<AppState>>,
    AuthUser {
        user,
        permit: _permit,
    }: AuthUser,
    ApiJson(req): ApiJson<SnapshotRequest>,
) -> Result<Json<SnapshotResponse>, ApiError> {
    snapshot_of(st, user, req, false).await
}

/// `POST /v1/memory/e2ee/snapshot`: the snapshot of a scope marked encrypted, its plaintext
/// left out and every body checked as an envelope.
pub async fn e2ee_snapshot(
    State(st): State<Arc<AppState>>,
    AuthUser {
        user,
        permit: _permit,
    }: AuthUser,
    ApiJson(req): ApiJson<SnapshotRequest>,
) -> Result<Json<SnapshotResponse>, ApiError> {
    snapshot_of(st, user, req, true).await
}

async fn snapshot_of(
    st: Arc<AppState>,
    user: UserId,
    req: SnapshotRequest,
    e2ee: bool,
) -> Result<Json<SnapshotResponse>, ApiError> {
    let key = manifest_key(&user, &req.scope);
    let known = req.known_manifest.clone().map(ETag);
    let empty = |version: Option<String>, unchanged: bool| SnapshotResponse {
        protocol_version: PROTOCOL_VERSION,
        quotas: st.quotas,
        storage_quotas: Some(st.storage),
        manifest_version: version,
        unchanged,
        notes: Vec::new(),
        bodies: Vec::new(),
        more: false,
        receipt: None,
        damaged: Vec::new(),
        generation: None,
        delta: false,
    };
    let Some((mut manifest, etag)) = load_manifest(&st, &key, known.as_ref()).await? else {
        return Ok(Json(empty(req.known_manifest, true)));
    };
    let version = etag.as_ref().map(|e| e.0.clone());
    // The encrypted view of a marked scope leaves its plaintext out; plaintext requests to
    // a marked scope are refused.
    let filtered = match (e2ee, manifest.e2ee.is_some()) {
        (true, _) => {
            crate::e2ee::check_reader(&manifest, req.kid.as_deref())?;
            crate::e2ee::encrypted_view(&mut manifest)?
        }
        (false, true) => return Err(crate::e2ee::encrypted_scope()),
        (false, false) => crate::e2ee::plaintext_view(&mut manifest),
    };
    let expired = manifest.prune_tombstones(&st.quotas, st.clock.now_ms());
    let pruned = manifest.cap_tombstones(st.storage.tombstones_per_scope) || expired;
    // Only the entries changed since the client's generation, when the manifest can tell them
    // (a tombstone dropped just now for this answer is a change it cannot list).
    let delta = match req.since {
        Some(since) if !pruned => manifest.changed_since(since),
        _ => None,
    };
    let have: HashSet<&ContentHash> = req.have.iter().collect();
    let budget = u64::from(st.quotas.response_body_bytes);
    let (mut wanted, mut used, mut more) = (Vec::new(), 0u64, false);
    let listed: Vec<&memoria_shared::protocol::ManifestEntry> = match &delta {
        Some(entries) => entries.iter().collect(),
        None => manifest.notes.values().collect(),
    };
    for e in listed.into_iter().filter(|e| !e.deleted) {
        let Some(hash) = &e.hash else { continue };
        if have.contains(hash) {
            continue;
        }
        let size = e.size.unwrap_or(0);
        // Always send at least one body, so a client always makes progress.
        if !wanted.is_empty() && used + size > budget {
            more = true;
            break;
        }
        used += size;
        wanted.push(e.clone());
    }
    let mut bodies = Vec::with_capacity(wanted.len());
    let mut damaged = Vec::new();
    for chunk in wanted.chunks(PARALLEL) {
        let mut tasks = JoinSet::new();
        for e in chunk {
            let store = st.store.clone();
            let key = object_key(&user, &req.scope, &e.id, &e.revision);
            let e = e.clone();
            tasks.spawn(async move {
                let o = store.get(&key, None).await;
                (e, key, o)
            });
        }
        while let Some(joined) = tasks.join_next().await {
            let (e, key, got) = joined.map_err(|e| ApiError::Internal(e.to_string()))?;
            let bytes = match got {
                Ok(Fetched::Object(o)) => o.bytes,
                Ok(Fetched::NotModified) => unreachable!("no validator was sent"),
                // A revision the manifest names but the store lost is that note's damage alone:
                // the scope keeps serving every other note, and a new version repairs it.
                Err(StoreError::NotFound) => {
                    tracing::error!(
                        %key,
                        note = %e.id,
                        "stored revision is damaged: the manifest names it but the store has no such file, not served"
                    );
                    damaged.push(DamagedNote {
                        id: e.id,
                        revision: e.revision,
                    });
                    continue;
                }
                Err(err) => {
                    return Err(ApiError::Internal(format!("revision {key}: {err}")));
                }
            };
            let hash = e
                .hash
                .clone()
                .unwrap_or_else(|| unreachable!("live entries have hashes"));
            // What the store returns is checked like a commit: bit rot or an edit by hand must
            // not reach a client as the note.
            let checked = String::from_utf8(bytes)
                .map_err(|_| "it is not UTF-8".to_owned())
                .and_then(|body| {
                    let checked = match e2ee {
                        true => verify_envelope_file(&e.id, &hash, &body)
                            .map(|_| ())
                            .map_err(|e| e.to_string()),
                        false => verify_note_file(&e.id, &hash, &body)
                            .map(|_| ())
                            .map_err(|e| e.to_string()),
                    };
                    checked.map(|()| body)
                });
            match checked {
                Ok(body) => bodies.push(NoteBody {
                    id: e.id,
                    revision: e.revision,
                    hash,
                    body,
                }),
                Err(why) => {
                    tracing::error!(
                        %key,
                        note = %e.id,
                        %why,
                        "stored revision is damaged: it does not match its manifest entry, not served"
                    );
                    damaged.push(DamagedNote {
                        id: e.id,
                        revision: e.revision,
                    });
                }
            }
        }
    }
    bodies.sort_by(|a, b| a.id.cmp(&b.id));
    damaged.sort_by(|a: &DamagedNote, b| a.id.cmp(&b.id));
    let mut resp = empty(version, false);
    resp.generation = Some(manifest.generation);
    resp.delta = delta.is_some();
    resp.receipt = req
        .receipt
        .as_deref()
        .and_then(|c| manifest.receipt(c))
        .map(|r| r.applied.clone());
    resp.notes = match delta {
        Some(entries) => {
            // Nothing was pruned for this answer: the manifest is the one stored, kept for the
            // next request.
            if let Some(etag) = etag.filter(|_| !filtered) {
                st.manifests.put(&key, etag, manifest);
            }
            entries
        }
        None => manifest.notes.into_values().collect(),
    };
    resp.bodies = bodies;
    resp.more = more;
    resp.damaged = damaged;
    Ok(Json(resp))
}

/// Checks every change on its own (shape, size, id, hash), before the manifest is read.
/// With `e2ee`, every put must be an envelope ([`verify_envelope_file`]) instead of a note
/// file with its content hash.
fn check_changes(
    q: &Quotas,
    req: &CommitRequest,
    e2ee: bool,
) -> Result<Vec<Option<CheckedPut>>, ApiError> {
    if req.changes.is_empty() {
        return Err(ApiError::BadRequest(
            "changes: a commit needs at least one change".into(),
        ));
    }
    if req.changes.len() > q.changes_per_commit as usize {
        return Err(ApiError::TooLarge(format!(
            "changes: {} changes in one commit; the limit is {}: split the commit",
            req.changes.len(),
            q.changes_per_commit
        )));
    }
    if let Some(id) = duplicate_ids(&req.changes) {
        return Err(ApiError::DuplicateChange(id));
    }
    if let Some(c) = &req.commit_id
        && !valid_commit_id(c)
    {
        return Err(ApiError::BadRequest(
            "commitId: 1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`".into(),
        ));
    }
    req.changes
        .iter()
        .map(|c| match c.op {
            ChangeOp::Delete => {
                if c.body.is_some() || c.hash.is_some() {
                    return Err(ApiError::InvalidNote {
                        id: c.id.clone(),
                        reason: "a delete carries no body or hash".into(),
                    });
                }
                Ok(None)
            }
            ChangeOp::Put => {
                let (Some(body), Some(hash)) = (&c.body, &c.hash) else {
                    return Err(ApiError::InvalidNote {
                        id: c.id.clone(),
                        reason: "a put needs both `body` and `hash`".into(),
                    });
                };
                if body.len() > q.body_bytes as usize {
                    return Err(ApiError::TooLarge(format!(
                        "note {}: the body is {} bytes; the limit is {}: shorten the note",
                        c.id,
                        body.len(),
                        q.body_bytes
                    )));
                }
                let mut kid = None;
                if e2ee {
                    match verify_envelope_file(&c.id, hash, body) {
                        Ok(env) => kid = Some(env.kid),
                        Err(EnvelopeError::HashMismatch) => {
                            return Err(ApiError::HashMismatch(c.id.clone()));
                        }
                        Err(e) => {
                            return Err(ApiError::InvalidNote {
                                id: c.id.clone(),
                                reason: e.to_string(),
                            });
                        }
                    }
                } else {
                    match verify_note_file(&c.id, hash, body) {
                        Ok(_) => {}
                        Err(NoteFileMismatch::Hash) => {
                            return Err(ApiError::HashMismatch(c.id.clone()));
                        }
                        Err(e) => {
                            return Err(ApiError::InvalidNote {
                                id: c.id.clone(),
                                reason: match e {
                                    NoteFileMismatch::NotANote(why) => why,
                                    other => other.to_string(),
                                },
                            });
                        }
                    }
                }
                Ok(Some(CheckedPut {
                    hash: hash.clone(),
                    size: body.len() as u64,
                    kid,
                }))
            }
        })
        .collect()
}

/// Deletes revision files a refused commit wrote; nothing references them.
async fn remove_orphans(store: &dyn ObjectStore, keys: &[String]) {
    for key in keys {
        if let Err(e) = store.delete(key).await {
            tracing::warn!(%key, error = %e, "could not remove an unreferenced revision");
        }
    }
}

/// Deletes revision files nothing references any more, [`PARALLEL`] at a time: a commit that
/// replaced many notes leaves many to collect.
async fn remove_garbage(store: &Arc<dyn ObjectStore>, keys: Vec<String>) {
    for chunk in keys.chunks(PARALLEL) {
        let mut tasks = JoinSet::new();
        for key in chunk {
            let (store, key) = (store.clone(), key.clone());
            tasks.spawn(async move {
                if let Err(e) = store.delete(&key).await {
                    tracing::warn!(%key, error = %e, "could not remove an unreferenced revision");
                }
            });
        }
        while tasks.join_next().await.is_some() {}
    }
}

async fn write_revisions(
    store: &Arc<dyn ObjectStore>,
    objects: Vec<(String, String)>,
    written: &mut Vec<String>,
) -> Result<(), ApiError> {
    let mut objects = objects.into_iter().peekable();
    while objects.peek().is_some() {
        let mut tasks = JoinSet::new();
        for (key, body) in objects.by_ref().take(PARALLEL) {
            let store = store.clone();
            tasks.spawn(async move {
                let r = store.put_if_absent(&key, body.into_bytes()).await;
                (key, r)
            });
        }
        let mut failed = None;
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((key, Ok(_))) => written.push(key),
                Ok((key, Err(e))) => failed = Some(format!("revision {key}: {e}")),
                Err(e) => failed = Some(e.to_string()),
            }
        }
        if let Some(detail) = failed {
            return Err(ApiError::Internal(detail));
        }
    }
    Ok(())
}

/// Whether the manifest holds this commit: some change's note has the fresh revision id the
/// commit gave it. Revision ids are random and the manifest is replaced as a whole, so one is
/// enough. A commit of only no-op deletes writes nothing and is never "landed".
fn landed(
    manifest: &Manifest,
    changes: &[memoria_shared::protocol::Change],
    revisions: &[String],
) -> bool {
    changes.iter().zip(revisions).any(|(c, rev)| {
        manifest
            .notes
            .get(&c.id)
            .is_some_and(|e| &e.revision == rev)
    })
}

/// The reply to a commit whose manifest write took effect (`etag` is a manifest version that
/// holds it).
async fn accepted(
    st: &AppState,
    user: &UserId,
    key: &str,
    mut written: Vec<String>,
    etag: ETag,
    applied: Vec<Applied>,
    generation: Option<u64>,
) -> Result<Json<CommitResponse>, ApiError> {
    let store = st.store.as_ref();
    // An erase that began after this request was authenticated wrote its marker before
    // listing; if it listed before our writes, they are ours to remove.
    if is_erased(store, user).await? {
        written.push(key.to_owned());
        remove_orphans(store, &written).await;
        return Err(ApiError::AccountErased);
    }
    Ok(Json(CommitResponse {
        protocol_version: PROTOCOL_VERSION,
        quotas: st.quotas,
        storage_quotas: Some(st.storage),
        manifest_version: etag.0,
        applied,
        generation,
    }))
}

pub async fn commit(
    State(st): State<Arc<AppState>>,
    auth: AuthUser,
    ApiJson(req): ApiJson<CommitRequest>,
) -> Result<Json<CommitResponse>, ApiError> {
    commit_of(st, auth, req, false).await
}

/// `POST /v1/memory/e2ee/commit`: a commit of envelopes to a scope marked encrypted.
pub async fn e2ee_commit(
    State(st): State<Arc<AppState>>,
    auth: AuthUser,
    ApiJson(req): ApiJson<CommitRequest>,
) -> Result<Json<CommitResponse>, ApiError> {
    commit_of(st, auth, req, true).await
}

async fn commit_of(
    st: Arc<AppState>,
    AuthUser { user, permit }: AuthUser,
    req: CommitRequest,
    e2ee: bool,
) -> Result<Json<CommitResponse>, ApiError> {
    let body_bytes: usize = req
        .changes
        .iter()
        .filter_map(|c| c.body.as_ref())
        .map(String::len)
        .sum();
    let (req, puts) = if body_bytes > OFF_WORKER_BYTES {
        // Hashing and parsing every body takes CPU in proportion to their size: on a blocking
        // thread, so the async workers keep serving.
        let quotas = st.quotas;
        tokio::task::spawn_blocking(move || {
            let puts = check_changes(&quotas, &req, e2ee);
            (req, puts)
        })
        .await
        .map_err(|e| ApiError::Internal(format!("checking a commit: {e}")))?
    } else {
        let puts = check_changes(&st.quotas, &req, e2ee);
        (req, puts)
    };
    let puts = puts?;
    // The store work runs in a task of its own: when the client goes away (or the request
    // times out) the handler is dropped, and the commit still finishes — its manifest written,
    // or its revisions removed — instead of stopping between the two. The account's slot goes
    // with it.
    let work = tokio::spawn(async move {
        let _permit = permit;
        apply_commit(st, user, req, puts, e2ee).await
    });
    work.await
        .map_err(|e| ApiError::Internal(format!("commit task: {e}")))?
}

/// The store work of a checked commit: read the manifest, plan, write the revisions, swap the
/// manifest (again after a lost race), and clean up after a refusal.
async fn apply_commit(
    st: Arc<AppState>,
    user: UserId,
    mut req: CommitRequest,
    puts: Vec<Option<CheckedPut>>,
    e2ee: bool,
) -> Result<Json<CommitResponse>, ApiError> {
    let store = st.store.as_ref();
    let key = manifest_key(&user, &req.scope);
    let started = st.clock.now_ms();
    let revisions: Vec<String> = req
        .changes
        .iter()
        .map(|_| revision_id(st.rng.as_ref(), started))
        .collect();
    let mut written = Vec::new();
    let mut objects_written = false;
    // What the last manifest write tried would apply: every attempt gives each change the same
    // fresh revision id, so a later read can tell whether that write landed.
    let mut tried: Option<Vec<Applied>> = None;
    let fingerprint = crate::manifest::commit_fingerprint(&req.changes);
    for attempt in 0..st.commit_attempts.max(1) {
        let now = st.clock.now_ms();
        let (mut current, etag) = load_manifest(&st, &key, None)
            .await?
            .unwrap_or_else(|| unreachable!("no validator was sent"));
        if let (Some(id), Some(etag)) = (&req.commit_id, &etag)
            && let Some(receipt) = current.receipt(id)
        {
            if receipt
                .fingerprint
                .as_ref()
                .is_some_and(|f| *f != fingerprint)
            {
                // The id names another commit: answering with its receipt would report these
                // changes as applied when none of them were.
                remove_orphans(store, &written).await;
                return Err(ApiError::CommitIdReused(id.clone()));
            }
            // Applied before (its reply was lost, or this is a retry): the same answer again.
            return accepted(
                &st,
                &user,
                &key,
                written,
                etag.clone(),
                receipt.applied.clone(),
                None,
            )
            .await;
        }
        if let (Some(revs), Some(etag)) = (&tried, &etag)
            && landed(&current, &req.changes, &revisions)
        {
            // A write reported as lost took effect after all (a retry below the store, or a
            // reply that went astray): it is this commit's success, not a race to redo.
            return accepted(&st, &user, &key, written, etag.clone(), revs.clone(), None).await;
        }
        if let Err(refusal) = crate::e2ee::check_commit(&current, &req.changes, &puts, e2ee) {
            remove_orphans(store, &written).await;
            return Err(refusal);
        }
        if !e2ee
            && etag.is_none()
            && let Err(refusal) = crate::e2ee::refuse_new_plaintext_scope(store, &user).await
        {
            remove_orphans(store, &written).await;
            return Err(refusal);
        }
        if current.prune_tombstones(&st.quotas, now) {
            current.pruned_at = current.generation + 1;
        }
        let exists = etag.is_some();
        let plan = match plan_commit(&current, &req.changes, &puts, &revisions, &st.quotas, now) {
            Ok(plan) => plan,
            Err(refusal) => {
                remove_orphans(store, &written).await;
                return Err(match refusal {
                    Refusal::Stale(stale) => ApiError::Stale(stale),
                    Refusal::Quota { live_after, limit } => {
                        ApiError::QuotaExceeded { live_after, limit }
                    }
                    Refusal::UnknownDelete(id) => ApiError::InvalidNote {
                        id,
                        reason: "there is no such note to delete (it was never created in this \
                                 scope, or its tombstone has expired): drop the change"
                            .into(),
                    },
                });
            }
        };
        let (before, after) = (current.live_bytes(), plan.next.live_bytes());
        if after > before || !exists {
            let (index, _) = account::load(store, &user).await?;
            if let Err(refusal) = index.check(&req.scope, exists, before, after, &st.storage) {
                remove_orphans(store, &written).await;
                return Err(account_refusal(refusal));
            }
        }
        if !objects_written {
            // Revisions first, create-only: the manifest must never name a missing file.
            // Each body moves out of its change into its revision file: a commit never holds
            // two copies of a note file.
            let objects = req
                .changes
                .iter_mut()
                .zip(&puts)
                .zip(&revisions)
                .filter_map(|((c, p), rev)| {
                    p.as_ref().and_then(|_| {
                        let key = object_key(&user, &req.scope, &c.id, rev);
                        c.body.take().map(|body| (key, body))
                    })
                })
                .collect();
            if let Err(e) = write_revisions(&st.store, objects, &mut written).await {
                remove_orphans(store, &written).await;
                return Err(e);
            }
            objects_written = true;
        }
        let applied: Vec<Applied> = plan
            .revisions
            .into_iter()
            .map(|r| Applied {
                id: r.id,
                revision: r.revision,
            })
            .collect();
        let mut next = plan.next;
        if next.cap_tombstones(st.storage.tombstones_per_scope) {
            // Clients that saw an older generation may hold the dropped tombstones: they get
            // the whole list, as after expiry.
            next.pruned_at = next.generation;
        }
        let garbage = next.take_expired_superseded(now, st.garbage_grace_ms());
        if let Some(id) = &req.commit_id {
            next.add_receipt(id, fingerprint.clone(), applied.clone());
        }
        let bytes = next.to_bytes();
        let generation = next.generation;
        if st.clock.now_ms().saturating_sub(started)
            >= st.limits.request_timeout().as_millis() as i64
        {
            // Past its request timeout a commit never writes its manifest: a sweep may remove
            // unreferenced revisions once they are twice that old, and these must not be named
            // after that.
            remove_orphans(store, &written).await;
            return Err(ApiError::Contention);
        }
        tried = Some(applied.clone());
        let swapped = match &etag {
            Some(etag) => store.put_if_match(&key, bytes.clone(), etag).await,
            None => store.put_if_absent(&key, bytes.clone()).await,
        };
        match swapped {
            Ok(new_etag) => {
                let usage = ScopeUsage {
                    bytes: next.live_bytes(),
                    generation,
                };
                // A commit the account's caps were checked for (a new scope, or more bytes) is
                // recorded before its reply, so the next commit is checked against it; one that
                // shrinks or keeps the account's size is recorded after.
                let grew = !exists || usage.bytes > before;
                let sweep = (generation % SWEEP_EVERY == 0).then(|| next.clone());
                st.manifests.put(&key, new_etag.clone(), next);
                let reply = accepted(
                    &st,
                    &user,
                    &key,
                    written,
                    new_etag,
                    applied,
                    Some(generation),
                )
                .await?;
                // Recorded once the commit is known to stand (an erase that began meanwhile
                // has refused it above and removed what it wrote).
                if grew {
                    account::record(store, &user, &req.scope, usage).await;
                }
                st.background.spawn(after_commit(
                    st.clone(),
                    user,
                    req.scope,
                    (generation % COPY_EVERY == 0 || generation <= COPY_EVERY).then_some(bytes),
                    generation,
                    (!grew).then_some(usage),
                    garbage,
                    sweep,
                ));
                return Ok(reply);
            }
            Err(StoreError::PreconditionFailed) => {
                // Lost the race: re-read the manifest and validate again; never overwrite.
                tracing::debug!(attempt, %key, "manifest changed under the commit; retrying");
                let mut jitter = [0u8; 1];
                st.rng.fill(&mut jitter);
                let cap = 2u64 << attempt.min(6);
                tokio::time::sleep(Duration::from_millis(u64::from(jitter[0]) % cap)).await;
            }
            Err(e) => {
                // The write's outcome is unknown: read the manifest back to learn it. When it
                // did not land (or the read fails too) the revisions stay: a write still on its
                // way could yet make the manifest name them; unreferenced, they are harmless.
                tracing::warn!(%key, error = %e, "manifest write unanswered; reading it back");
                if let Ok(Some((m, Some(etag)))) = load_manifest(&st, &key, None).await
                    && landed(&m, &req.changes, &revisions)
                {
                    return accepted(&st, &user, &key, written, etag, applied, None).await;
                }
                return Err(e.into());
            }
        }
    }
    remove_orphans(store, &written).await;
    Err(ApiError::Contention)
}

/// A scope's unreferenced revision files are swept at every commit whose generation is a
/// multiple of this.
pub const SWEEP_EVERY: u64 = 32;

pub(crate) fn account_refusal(refusal: AccountRefusal) -> ApiError {
    ApiError::AccountQuota(match refusal {
        AccountRefusal::Scopes { scope, limit } => format!(
            "this account already has {limit} scopes on this server, the most it keeps: \
             {scope} cannot be added; ask the server's operator to raise scopes_per_account"
        ),
        AccountRefusal::Bytes { after, limit } => format!(
            "this commit would leave the account with {after} bytes of notes on this server; \
             the limit is {limit}: delete or shorten notes first"
        ),
    })
}

/// The manifest's last good copy is written at a scope's first commits and then at every
/// commit whose generation is a multiple of this: a copy at most this many commits old, for
/// one more manifest write in this many.
pub const COPY_EVERY: u64 = 4;

/// The work a commit leaves for after its reply: recording its scope's usage in the account's
/// index when it did not grow the account (`usage`; a commit that grew it was recorded before
/// its reply), keeping the manifest's last good copy (`manifest`, when it is this commit's
/// turn, at `generation`), deleting the revision files whose grace is over, and now and then
/// sweeping the scope's unreferenced revision files. Best effort: what it misses, a later
/// commit does. Concurrent commits may still overshoot a cap by one commit each.
#[allow(clippy::too_many_arguments)]
async fn after_commit(
    st: Arc<AppState>,
    user: UserId,
    scope: Scope,
    manifest: Option<Vec<u8>>,
    generation: u64,
    usage: Option<ScopeUsage>,
    garbage: Vec<Superseded>,
    sweep: Option<Manifest>,
) {
    if let Some(usage) = usage {
        account::record(st.store.as_ref(), &user, &scope, usage).await;
    }
    if let Some(bytes) = manifest {
        let key = manifest_key(&user, &scope);
        keep_manifest_copy(st.store.clone(), key, bytes, generation).await;
    }
    let keys: Vec<String> = garbage
        .iter()
        .map(|g| object_key(&user, &scope, &g.id, &g.revision))
        .collect();
    remove_garbage(&st.store, keys).await;
    if let Some(manifest) = sweep
        && let Err(e) = sweep_scope(&st, &user, &scope, &manifest).await
    {
        tracing::warn!(scope = %scope, error = %e, "sweep of unreferenced revisions failed");
    }
}

/// Deletes the scope's revision files that `manifest` does not keep and whose id says they
/// were made longer than the grace period ago (left by a process that stopped between its
/// revisions and its manifest, or a collection that did not finish). A file whose age is
/// unknown (an id from an older server) is left alone.
async fn sweep_scope(
    st: &AppState,
    user: &UserId,
    scope: &Scope,
    manifest: &Manifest,
) -> Result<usize, StoreError> {
    let prefix = objects_prefix(user, scope);
    let keys = st.store.list(&prefix).await?;
    let kept: HashSet<(&str, &str)> = manifest
        .notes
        .values()
        .filter(|e| !e.deleted)
        .map(|e| (e.id.as_str(), e.revision.as_str()))
        .chain(
            manifest
                .superseded
                .iter()
                .map(|s| (s.id.as_str(), s.revision.as_str())),
        )
        .collect();
    let (now, grace) = (st.clock.now_ms(), st.garbage_grace_ms());
    let orphans: Vec<String> = keys
        .iter()
        .filter(|key| {
            parse_object_key(&prefix, key).is_some_and(|(note, rev)| {
                !kept.contains(&(note, rev))
                    && revision_time(rev).is_some_and(|t| now.saturating_sub(t) >= grace)
            })
        })
        .cloned()
        .collect();
    if !orphans.is_empty() {
        tracing::info!(scope = %scope, removed = orphans.len(), "unreferenced revisions swept");
        let n = orphans.len();
        remove_garbage(&st.store, orphans).await;
        return Ok(n);
    }
    Ok(0)
}

pub async fn erase(
    State(st): State<Arc<AppState>>,
    _admin: Admin,
    ApiJson(req): ApiJson<EraseRequest>,
) -> Result<Json<EraseResponse>, ApiError> {
    let user =
        UserId::new(&req.user_id).map_err(|e| ApiError::InvalidId(format!("userId: {e}")))?;
    let store = st.store.as_ref();
    // The marker first: from now on the account's tokens are refused, so a device still signed
    // in cannot upload the data again while it is being deleted.
    let marker = serde_json::json!({ "userId": user.as_str(), "erasedAt": st.clock.now_ms() });
    match store
        .put_if_absent(&erased_key(&user), marker.to_string().into_bytes())
        .await
    {
        Ok(_) | Err(StoreError::PreconditionFailed) => {}
        Err(e) => return Err(e.into()),
    }
    let keys = store.list(&user_prefix(&user)).await?;
    let mut deleted = 0u64;
    for chunk in keys.chunks(PARALLEL) {
        let mut tasks = JoinSet::new();
        for key in chunk {
            let (store, key) = (st.store.clone(), key.clone());
            tasks.spawn(async move { store.delete(&key).await });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.map_err(|e| ApiError::Internal(e.to_string()))??;
            deleted += 1;
        }
    }
    tracing::info!(user = %user, deleted, "account erased");
    Ok(Json(EraseResponse {
        user_id: user.to_string(),
        deleted_objects: deleted,
    }))
}

pub async fn not_found() -> ApiError {
    ApiError::NotFound
}
