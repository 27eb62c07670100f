//! An account's index (`users/<id>/account.json`): its scopes and each one's live bytes as of
//! its last commit, so a commit checks the per-account caps (scopes, bytes) without reading
//! every scope's manifest.
//!
//! The index is advisory bookkeeping beside the manifests, which stay the truth: it is updated
//! with compare-and-swap after a commit's manifest write, an entry only ever moves to a newer
//! generation of its scope, and when it is missing (an account from before it was kept) or
//! unreadable it is rebuilt from the scopes' manifests. Commits to different scopes running at
//! once each check the index as it was before them, so together they may overshoot a cap by
//! what they add (at most `requests_per_account` commits per instance).

use std::collections::BTreeMap;

use memoria_shared::protocol::{Scope, StorageQuotas};
use serde::{Deserialize, Serialize};

use crate::layout::{UserId, account_key, user_prefix};
use crate::manifest::Manifest;
use crate::store::{ETag, Fetched, ObjectStore, StoreError};

/// Version of the stored index's shape.
const ACCOUNT_FORMAT: u32 = 1;

/// Compare-and-swap attempts at recording a commit in the index before leaving it to the next
/// commit of the scope.
const RECORD_ATTEMPTS: usize = 8;

/// One scope as the index knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeUsage {
    /// Bytes of the scope's live note files.
    pub bytes: u64,
    /// The manifest generation these bytes are from.
    pub generation: u64,
}

/// An account's scopes (by their wire name, `user` or `project:<id>`) and their usage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountIndex {
    pub format: u32,
    pub scopes: BTreeMap<String, ScopeUsage>,
}

/// Why a commit would take an account past one of its caps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountRefusal {
    /// The commit would start one scope more than the account may have.
    Scopes { scope: String, limit: u32 },
    /// The commit would grow the account's live bytes past the cap.
    Bytes { after: u64, limit: u64 },
}

impl AccountIndex {
    /// Whether a commit that takes `scope` from `before` to `after` live bytes may apply.
    /// `exists` says whether the scope already has a manifest. Only growth is refused: a
    /// commit that does not add bytes passes even above a lowered cap.
    pub fn check(
        &self,
        scope: &Scope,
        exists: bool,
        before: u64,
        after: u64,
        quotas: &StorageQuotas,
    ) -> Result<(), AccountRefusal> {
        let name = scope.to_string();
        if !exists
            && !self.scopes.contains_key(&name)
            && self.scopes.len() >= quotas.scopes_per_account as usize
        {
            return Err(AccountRefusal::Scopes {
                scope: name,
                limit: quotas.scopes_per_account,
            });
        }
        let others: u64 = self
            .scopes
            .iter()
            .filter(|(s, _)| **s != name)
            .map(|(_, u)| u.bytes)
            .sum();
        let total = others.saturating_add(after);
        if after > before && total > quotas.bytes_per_account {
            return Err(AccountRefusal::Bytes {
                after: total,
                limit: quotas.bytes_per_account,
            });
        }
        Ok(())
    }

    /// Records `scope`'s usage at `generation`, unless the index already has a newer one.
    /// Returns whether anything changed.
    pub fn record(&mut self, scope: &Scope, usage: ScopeUsage) -> bool {
        let slot = self.scopes.entry(scope.to_string()).or_insert(ScopeUsage {
            bytes: 0,
            generation: 0,
        });
        if slot.generation > usage.generation || *slot == usage {
            return false;
        }
        *slot = usage;
        true
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut me = self.clone();
        me.format = ACCOUNT_FORMAT;
        serde_json::to_vec(&me).expect("the account index serializes")
    }
}

/// The scope a manifest key under `users/<id>/` belongs to, if it is one.
fn scope_of_manifest(user: &UserId, key: &str) -> Option<Scope> {
    let rest = key.strip_prefix(&user_prefix(user))?;
    if rest == "memory/manifest.json" {
        return Some(Scope::User);
    }
    let pid = rest
        .strip_prefix("projects/")?
        .strip_suffix("/memory/manifest.json")?;
    Scope::parse(&format!("project:{pid}")).ok()
}

/// Builds the index from the account's manifests: for an account from before the index was
/// kept, or one whose index is unreadable. A manifest that cannot be read counts as a scope
/// with its bytes unknown (0).
async fn rebuild(store: &dyn ObjectStore, user: &UserId) -> Result<AccountIndex, StoreError> {
    let mut index = AccountIndex::default();
    for key in store.list(&user_prefix(user)).await? {
        let Some(scope) = scope_of_manifest(user, &key) else {
            continue;
        };
        let usage = match store.get(&key, None).await {
            Ok(Fetched::Object(o)) => match Manifest::from_bytes(&o.bytes) {
                Ok(m) => ScopeUsage {
                    bytes: m.live_bytes(),
                    generation: m.generation,
                },
                Err(why) => {
                    tracing::warn!(%key, %why, "unreadable manifest counted as an empty scope");
                    ScopeUsage {
                        bytes: 0,
                        generation: 0,
                    }
                }
            },
            Ok(Fetched::NotModified) | Err(StoreError::NotFound) => continue,
            Err(e) => return Err(e),
        };
        index.record(&scope, usage);
    }
    Ok(index)
}

/// The account's index and its ETag (`None` when it is not stored yet, or unreadable: then it
/// is rebuilt from the manifests).
pub async fn load(
    store: &dyn ObjectStore,
    user: &UserId,
) -> Result<(AccountIndex, Option<ETag>), StoreError> {
    let key = account_key(user);
    match store.get(&key, None).await {
        Ok(Fetched::Object(o)) => match serde_json::from_slice::<AccountIndex>(&o.bytes) {
            Ok(index) if index.format == ACCOUNT_FORMAT => Ok((index, Some(o.etag))),
            Ok(index) => {
                tracing::warn!(%key, format = index.format, "unknown account index format; rebuilding it");
                Ok((rebuild(store, user).await?, Some(o.etag)))
            }
            Err(why) => {
                tracing::warn!(%key, %why, "account index unreadable; rebuilding it");
                Ok((rebuild(store, user).await?, Some(o.etag)))
            }
        },
        Ok(Fetched::NotModified) => Err(StoreError::Other(
            "store answered NotModified to a get without a validator".into(),
        )),
        Err(StoreError::NotFound) => Ok((rebuild(store, user).await?, None)),
        Err(e) => Err(e),
    }
}

/// Records a commit's outcome for `scope` in the account's index, with compare-and-swap. A
/// failure is logged and left for the scope's next commit to correct: the manifest, not the
/// index, holds the commit.
pub async fn record(store: &dyn ObjectStore, user: &UserId, scope: &Scope, usage: ScopeUsage) {
    let key = account_key(user);
    for _ in 0..RECORD_ATTEMPTS {
        let (mut index, etag) = match load(store, user).await {
            Ok(loaded) => loaded,
            Err(e) => {
                tracing::warn!(%key, error = %e, "account index not updated");
                return;
            }
        };
        if !index.record(scope, usage) && etag.is_some() {
            return;
        }
        let bytes = index.to_bytes();
        let written = match &etag {
            Some(etag) => store.put_if_match(&key, bytes, etag).await,
            None => store.put_if_absent(&key, bytes).await,
        };
        match written {
            Ok(_) => return,
            Err(StoreError::PreconditionFailed) => continue,
            Err(e) => {
                tracing::warn!(%key, error = %e, "account index not updated");
                return;
            }
        }
    }
    tracing::warn!(%key, "account index kept changing; not updated");
}

#[cfg(test)]
mod tests {
    use super::*;
    use memoria_shared::protocol::ProjectId;

    fn project(p: &str) -> Scope {
        Scope::Project(ProjectId::new(p).unwrap())
    }

    fn usage(bytes: u64, generation: u64) -> ScopeUsage {
        ScopeUsage { bytes, generation }
    }

    #[test]
    fn scope_and_byte_caps_only_block_growth() {
        let q = StorageQuotas {
            tombstones_per_scope: 10,
            scopes_per_account: 2,
            bytes_per_account: 100,
        };
        let mut index = AccountIndex::default();
        index.record(&Scope::User, usage(60, 1));
        index.record(&project("a"), usage(30, 4));
        // A third scope is refused; the two it has still take commits.
        assert_eq!(
            index.check(&project("b"), false, 0, 1, &q),
            Err(AccountRefusal::Scopes {
                scope: "project:b".into(),
                limit: 2
            })
        );
        // A scope that has a manifest the index does not list yet is not new.
        assert!(index.check(&project("b"), true, 0, 1, &q).is_ok());
        assert!(index.check(&project("a"), true, 30, 40, &q).is_ok());
        assert_eq!(
            index.check(&project("a"), true, 30, 41, &q),
            Err(AccountRefusal::Bytes {
                after: 101,
                limit: 100
            })
        );
        // Above a lowered cap, shrinking or staying level passes; growing does not.
        let low = StorageQuotas {
            bytes_per_account: 50,
            ..q
        };
        assert!(index.check(&Scope::User, true, 60, 60, &low).is_ok());
        assert!(index.check(&Scope::User, true, 60, 10, &low).is_ok());
        assert!(index.check(&Scope::User, true, 60, 61, &low).is_err());
    }

    #[test]
    fn an_entry_only_moves_forward() {
        let mut index = AccountIndex::default();
        assert!(index.record(&Scope::User, usage(5, 3)));
        assert!(!index.record(&Scope::User, usage(9, 2)), "an older commit");
        assert!(!index.record(&Scope::User, usage(5, 3)), "the same");
        assert!(index.record(&Scope::User, usage(7, 4)));
        assert_eq!(index.scopes["user"], usage(7, 4));
    }

    #[tokio::test]
    async fn a_missing_or_unreadable_index_is_rebuilt_from_the_manifests() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::fs::FsStore::open(dir.path()).unwrap();
        let user = UserId::new("alice").unwrap();
        let mut m = Manifest {
            generation: 3,
            ..Manifest::default()
        };
        let id = memoria_shared::NoteId::new("n").unwrap();
        m.notes.insert(
            id.clone(),
            memoria_shared::protocol::ManifestEntry {
                id,
                revision: "r".into(),
                hash: None,
                size: Some(42),
                deleted: false,
                created_at: 1,
                updated_at: 1,
            },
        );
        for scope in [Scope::User, project("p.1")] {
            let key = crate::layout::manifest_key(&user, &scope);
            store.put_if_absent(&key, m.to_bytes()).await.unwrap();
        }
        let (index, etag) = load(&store, &user).await.unwrap();
        assert_eq!(etag, None);
        assert_eq!(index.scopes.len(), 2);
        assert_eq!(index.scopes["project:p.1"], usage(42, 3));
        record(&store, &user, &Scope::User, usage(50, 4)).await;
        let (index, etag) = load(&store, &user).await.unwrap();
        assert!(etag.is_some());
        assert_eq!(index.scopes["user"], usage(50, 4));
        assert_eq!(index.scopes["project:p.1"], usage(42, 3));
        // Damaged by hand: rebuilt from the manifests again.
        let key = account_key(&user);
        let Fetched::Object(o) = store.get(&key, None).await.unwrap() else {
            unreachable!()
        };
        store
            .put_if_match(&key, b"{not json".to_vec(), &o.etag)
            .await
            .unwrap();
        let (index, _) = load(&store, &user).await.unwrap();
        assert_eq!(index.scopes["user"], usage(42, 3));
    }
}
