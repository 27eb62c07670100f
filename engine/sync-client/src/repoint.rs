//! Moving scopes to a new address of the server they were synced with: the same account and
//! the same store, reached as `localhost` instead of `127.0.0.1`, over TLS, under a domain or
//! behind a reverse proxy.
//!
//! A scope is pinned to the account and server address it first synced with, so two accounts'
//! (or two stores') notes never mix. A re-point moves the pins only after the server at the new
//! address proves to be the same store: it knows the token as the pinned user, and for every
//! folder of every pinned scope, each note this machine holds a base revision for is either at
//! that same revision there, or listed as changed after the manifest generation last synced
//! here (keeping the creation time recorded then, when one was). Revision ids are random, so
//! one note at its revision proves the store; a list of changes counts only once the store is
//! proven, as another store's generations say nothing about this one's. So a store that was not
//! the one synced with — another server with an account of the same name — fails; a later
//! manifest of the same store (another machine synced meanwhile) passes, and the next pass
//! merges it as usual. Either every pin moves, in one write of the settings, or none.
//!
//! A scope this machine syncs end-to-end encrypted is compared the same way through its
//! `ScopeCrypt`: the encrypted snapshot's opaque ids and keyed hashes are translated back with
//! the account key (no body is opened or kept), so a note at its revision proves the store as
//! it does in plaintext. A scope the server holds encrypted that this machine has not synced
//! encrypted yet (its state is from before, and its next pass starts it over) is proven by the
//! server holding it under this account's key id; without the key it cannot be compared, and
//! the re-point is refused as `e2ee_locked`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use memoria_shared::ContentHash;
use memoria_shared::e2ee::WrappedKey;
use memoria_shared::protocol::{
    ErrorCode as ProtocolCode, ManifestEntry, SnapshotRequest, SnapshotResponse,
};
use memoria_store::error::ErrorCode;
use serde::Serialize;

use super::base::{ScopeDir, ScopeState};
use super::client::SyncClient;
use super::e2ee::{self, ScopeCrypt};
use super::error::{SyncError, SyncResult};
use super::reconcile::wire_scope;
use super::settings::{Pin, Settings, sync_dir};
use crate::project::Scope;

/// What a re-point moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Repointed {
    /// The address the scopes are pinned to now.
    pub server: String,
    /// The account the server there knows the token as.
    pub user_id: String,
    /// Each scope moved, with what the check found (empty: every scope was pinned there already).
    pub scopes: Vec<MovedScope>,
}

/// One scope moved to the new address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MovedScope {
    pub scope: String,
    /// The address it was pinned to.
    pub from: String,
    /// Notes last synced here that the server there holds at the same revision.
    pub same: usize,
    /// Notes changed there after the last sync here (by another machine): the next pass
    /// merges them.
    pub changed_since: usize,
}

/// Why a scope cannot move to the new address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all_fields = "camelCase")]
pub enum Refusal {
    /// The server there knows the token as another user than the scope's.
    #[serde(rename = "different-user")]
    DifferentUser {
        scope: String,
        pinned_user: String,
        user: String,
    },
    /// The scope's manifest there is not the one last synced, nor a later one of it.
    #[serde(rename = "manifest-differs")]
    ManifestDiffers {
        scope: String,
        /// How many notes differ, and of how many compared.
        differing: usize,
        compared: usize,
        /// The first few of them.
        notes: Vec<String>,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::DifferentUser {
                scope,
                pinned_user,
                user,
            } => write!(
                f,
                "a different user: {scope} was synced as `{pinned_user}`, and the server there knows this token as `{user}`"
            ),
            Refusal::ManifestDiffers {
                scope,
                differing,
                compared,
                notes,
            } => write!(
                f,
                "{scope}'s manifest does not match: {differing} of {compared} note(s) differ from the last sync here ({})",
                notes
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// How many notes of a refusal are named.
const NAMED: usize = 5;

/// Re-points every scope pinned to another address than `server` to it, after checking through
/// `client` (talking to `server`) that it is the same account and store. All or nothing: on any
/// refusal nothing changes, and the error lists every reason. `server` also becomes the
/// address this home syncs with.
pub fn repoint(home_root: &Path, server: &str, client: &SyncClient) -> SyncResult<Repointed> {
    let dir = sync_dir(home_root);
    let identity = client.identity()?;
    let user = identity.user_id;
    let pins: BTreeMap<String, Pin> = Settings::load(&dir)?
        .pins
        .into_iter()
        .filter(|(_, p)| p.server != server)
        .collect();
    // The account key, kept for this address (unlocked here since the sign-in) or for the one
    // the scopes synced at.
    let kept_here = e2ee::load_key(home_root, server)?;
    let mut account_key = kept_here.clone();
    for pin in pins.values() {
        if account_key.is_none() {
            account_key = e2ee::load_key(home_root, &pin.server)?;
        }
    }
    let mut refusals = Vec::new();
    let mut moved = Vec::new();
    for (key, pin) in &pins {
        if pin.user_id != user {
            refusals.push(Refusal::DifferentUser {
                scope: key.clone(),
                pinned_user: pin.user_id.clone(),
                user: user.clone(),
            });
            continue;
        }
        let wire = wire_scope(&Scope::from_key(key)?)?;
        let mut found = Comparison::default();
        for sd in ScopeDir::every_folder(&dir, key) {
            let state = sd.load_state()?;
            let crypt = match &account_key {
                Some(k) => Some(ScopeCrypt::open(k.derive(), &user, &wire, sd.root())?),
                None => None,
            };
            found.add(compare_scope(client, key, &wire, &state, crypt)?);
        }
        if found.differing.is_empty() {
            moved.push(MovedScope {
                scope: key.clone(),
                from: pin.server.clone(),
                same: found.same,
                changed_since: found.changed_since,
            });
        } else {
            refusals.push(Refusal::ManifestDiffers {
                scope: key.clone(),
                differing: found.differing.len(),
                compared: found.compared,
                notes: found.differing.into_iter().take(NAMED).collect(),
            });
        }
    }
    if !refusals.is_empty() {
        return Err(SyncError::RepointRefused {
            server: server.to_owned(),
            refusals,
        });
    }
    // The pins checked are the ones moved: a sign-in or a re-point in another process
    // meanwhile makes this one start over.
    Settings::update(&dir, |s| {
        let now: BTreeMap<String, Pin> = s
            .pins
            .iter()
            .filter(|(_, p)| p.server != server)
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect();
        if now != pins {
            return Err(SyncError::PinsChanged);
        }
        for p in s.pins.values_mut() {
            p.server = server.to_owned();
        }
        s.server = Some(server.to_owned());
        Ok(())
    })??;
    if let (Some(k), None) = (&account_key, &kept_here) {
        // The passes at the new address need the account key kept for it.
        e2ee::store_key(home_root, server, k)?;
    }
    Ok(Repointed {
        server: server.to_owned(),
        user_id: user,
        scopes: moved,
    })
}

/// What comparing a scope's last sync with the manifest at the new address found.
#[derive(Debug, Default)]
struct Comparison {
    compared: usize,
    same: usize,
    changed_since: usize,
    differing: Vec<String>,
}

impl Comparison {
    fn add(&mut self, other: Comparison) {
        self.compared += other.compared;
        self.same += other.same;
        self.changed_since += other.changed_since;
        self.differing.extend(other.differing);
    }
}

/// Compares one folder's sync state with the scope at the new address, in plaintext or, when
/// the server holds it encrypted, through `crypt` (this machine's account key).
fn compare_scope(
    client: &SyncClient,
    key: &str,
    wire: &memoria_shared::protocol::Scope,
    state: &ScopeState,
    crypt: Option<ScopeCrypt>,
) -> SyncResult<Comparison> {
    let is = |e: &SyncError, code: ProtocolCode| matches!(e, SyncError::Server { code: Some(c), .. } if *c == code);
    let mut plain = |mut req: SnapshotRequest| {
        req.scope = wire.clone();
        client.snapshot(&req)
    };
    let Some(mut crypt) = crypt else {
        return compare(&mut plain, state).map_err(|e| {
            if is(&e, ProtocolCode::ScopeEncrypted) {
                SyncError::E2ee {
                    code: ErrorCode::E2eeLocked,
                    message: format!(
                        "{key} is end-to-end encrypted on the server and this machine does not hold the account key, so it cannot tell whether the server there holds this scope's notes: unlock this machine with the account's passphrase or recovery key, then re-point again"
                    ),
                }
            } else {
                e
            }
        });
    };
    // Bodies are never opened here: the comparison needs ids and revisions only, and a check
    // that may be refused writes nothing.
    crypt.learn(
        state
            .base
            .keys()
            .map(String::as_str)
            .chain(state.remote.iter().map(|e| e.id.as_str())),
    );
    let (marked, kid) = (crypt.marked(), crypt.kid());
    let mut fetch = |req: SnapshotRequest| -> SyncResult<SnapshotResponse> {
        let mut resp = client.e2ee_snapshot(&crypt.snapshot_request(&req))?;
        resp.bodies.clear();
        Ok(crypt.open_snapshot(resp)?.0)
    };
    if marked {
        // A server that does not hold the scope encrypted is compared in plaintext: it is
        // another store unless its revisions are the ones synced here.
        return match compare(&mut fetch, state) {
            Err(e) if is(&e, ProtocolCode::ScopeNotEncrypted) => compare(&mut plain, state),
            other => other,
        };
    }
    // Not synced encrypted from here yet: the state names plaintext revisions, which the
    // server no longer serves once the scope is encrypted, and the next pass starts the scope
    // over. The server holding the scope encrypted, with this account's key wrapped, is the
    // proof.
    match fetch(SnapshotRequest::default()) {
        Ok(_) if account_kid(client)?.as_deref() == Some(kid.as_str()) => Ok(Comparison::default()),
        Ok(_) => Err(SyncError::E2ee {
            code: ErrorCode::NotSameStore,
            message: format!(
                "{key} is end-to-end encrypted on the server there under another account key than this machine's: it is not the store this scope synced with, or the account key changed since; nothing was re-pointed"
            ),
        }),
        Err(e) if is(&e, ProtocolCode::ScopeNotEncrypted) => compare(&mut plain, state),
        Err(e) => Err(e),
    }
}

/// Compares one folder's sync state with the scope's manifest at the new address, as `fetch`
/// reads it: the whole manifest, and the entries changed since the generation last synced
/// here.
fn compare(
    fetch: &mut dyn FnMut(SnapshotRequest) -> SyncResult<SnapshotResponse>,
    state: &ScopeState,
) -> SyncResult<Comparison> {
    let mut found = Comparison::default();
    if state.base.is_empty() && state.remote.is_empty() && state.manifest_version.is_none() {
        // Nothing was ever synced from this folder: nothing to compare, nothing to mix up.
        return Ok(found);
    }
    // Bodies this machine holds are not sent back; the check needs only the lists.
    let have: Vec<ContentHash> = state
        .base
        .values()
        .map(|e| e.hash.as_str())
        .chain(
            state
                .remote
                .iter()
                .filter_map(|e| e.hash.as_ref())
                .map(|h| h.as_str()),
        )
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter_map(ContentHash::parse)
        .collect();
    let whole = fetch(SnapshotRequest {
        have: have.clone(),
        ..SnapshotRequest::default()
    })?;
    let changed: BTreeSet<String> = match state.generation {
        Some(since) => {
            let delta = fetch(SnapshotRequest {
                have,
                since: Some(since),
                ..SnapshotRequest::default()
            })?;
            match delta.delta {
                true => delta
                    .notes
                    .iter()
                    .map(|e| e.id.as_str().to_owned())
                    .collect(),
                // The server cannot tell what changed since: only the same revisions count.
                false => BTreeSet::new(),
            }
        }
        None => BTreeSet::new(),
    };
    let there: BTreeMap<&str, &ManifestEntry> =
        whole.notes.iter().map(|e| (e.id.as_str(), e)).collect();
    let seen: BTreeMap<&str, &ManifestEntry> =
        state.remote.iter().map(|e| (e.id.as_str(), e)).collect();
    // What the changes listed since the generation synced here are worth depends on the store
    // being the one synced with: that takes a proof, a revision as last synced here (random
    // ids no other store has) or a creation time as recorded here. A note changed since with a
    // creation time recorded here (it is 0 for a note first uploaded from here) must keep it.
    let mut proven = false;
    let mut later = Vec::new();
    let mut changed_since = |id: &str, e: &ManifestEntry, proven: &mut bool| match seen.get(id) {
        _ if !changed.contains(id) => false,
        Some(s) if s.created_at != 0 && s.created_at != e.created_at => false,
        Some(s) => {
            *proven |= s.created_at != 0;
            later.push(id.to_owned());
            true
        }
        None => {
            later.push(id.to_owned());
            true
        }
    };
    for (id, base) in &state.base {
        found.compared += 1;
        match there.get(id.as_str()) {
            Some(e) if e.revision == base.revision => {
                found.same += 1;
                proven = true;
            }
            Some(e) if changed_since(id, e, &mut proven) => {}
            _ => found.differing.push(id.clone()),
        }
    }
    for (id, e) in &there {
        if state.base.contains_key(*id) {
            continue;
        }
        match seen.get(id) {
            // A tombstone or a note held back here, as last seen.
            Some(s) if s.revision == e.revision => proven = true,
            _ if changed_since(id, e, &mut proven) => {}
            _ => {
                found.compared += 1;
                found.differing.push((*id).to_owned());
            }
        }
    }
    if proven || found.compared == 0 {
        found.changed_since = later.len();
    } else {
        // Nothing there is as it was synced here: whatever it lists as changed since is
        // another store's history.
        found.differing.extend(later);
        found.differing.sort();
        found.differing.dedup();
    }
    Ok(found)
}

/// The key id of the account key the server keeps wrapped, if it keeps one.
fn account_kid(client: &SyncClient) -> SyncResult<Option<String>> {
    Ok(client
        .e2ee_keys()?
        .and_then(|b| WrappedKey::from_json(&b.passphrase).ok())
        .and_then(|w| w.key_id().map(|k| k.as_str().to_owned())))
}
