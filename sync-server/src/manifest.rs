//! A scope's manifest and the pure decision of whether a commit may be applied to it.
//!
//! The manifest lists every live note and unexpired tombstone of one scope. Nothing here does
//! I/O: [`plan_commit`] takes the current manifest and a validated commit and either refuses it
//! or returns the next manifest plus the revisions to write. The server never merges: a change
//! applies only when its base revision is the note's current one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};

use memoria_shared::protocol::{Applied, Change, ChangeOp, ManifestEntry, Quotas, StaleNote};
use memoria_shared::{ContentHash, NoteId};
use serde::{Deserialize, Serialize};

use crate::store::ETag;

const MS_PER_DAY: i64 = 86_400_000;

/// Version of the stored manifest's shape.
pub const MANIFEST_FORMAT: u32 = 1;

/// Receipts a manifest keeps, newest first; older ones are forgotten.
pub const MAX_RECEIPTS: usize = 64;
/// Applied entries all kept receipts may hold together, so receipts never dwarf the notes.
pub const MAX_RECEIPT_ENTRIES: usize = 4096;

/// One scope's manifest, as stored in `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    /// Incremented by every commit.
    pub generation: u64,
    pub notes: BTreeMap<NoteId, ManifestEntry>,
    /// The generation of each note's last change, for the notes changed after `tracked_from`.
    pub changed: BTreeMap<NoteId, u64>,
    /// `changed` is complete for every change after this generation. A manifest written by a
    /// server that did not track changes starts tracking at the generation it had.
    pub tracked_from: u64,
    /// The generation of the commit that last dropped expired tombstones: a client that saw an
    /// older generation may still hold them, so it gets the whole list.
    pub pruned_at: u64,
    /// The last commits that carried a `commitId`, newest first. Written in the same
    /// compare-and-swap as the notes, so a receipt exists exactly when its commit applied.
    pub receipts: Vec<Receipt>,
    /// Revision files a commit replaced (an edit or a delete of a live note), oldest first,
    /// with when: garbage once no snapshot that read an older manifest can still fetch them.
    pub superseded: Vec<Superseded>,
    /// The scope's end-to-end encryption mark, once a client set it.
    pub e2ee: Option<ScopeMark>,
    /// The mark a client removed (turning encryption off): its key and the generation it was
    /// removed at. Entries last changed at or before it are the envelopes the scope held,
    /// which plaintext requests never see and a purge removes.
    pub e2ee_off: Option<ScopeMark>,
}

/// A scope marked end-to-end encrypted: from then on it takes envelopes only, under `kid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeMark {
    /// The account key's id every envelope of the scope must name.
    pub kid: String,
    /// The generation the mark was set at: entries last changed at or before it are the
    /// scope's plaintext, which encrypted requests never see and a purge removes.
    pub since: u64,
    /// The mark created the scope and found no file under its name: the scope never held
    /// plaintext, so a purge has no file to look for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub born_encrypted: bool,
}

/// A revision file no longer named by the manifest, kept for a grace period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Superseded {
    pub id: NoteId,
    pub revision: String,
    /// Server time (ms) of the commit that replaced it.
    pub at: i64,
}

/// Superseded revisions a manifest lists at most; beyond it the oldest are forgotten (their
/// files are left to the scope's sweep), so a burst of edits cannot grow the manifest without
/// bound.
pub const MAX_SUPERSEDED: usize = 10_000;

/// What a commit with a `commitId` applied, and which changes it carried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub commit_id: String,
    pub applied: Vec<Applied>,
    /// A digest of the commit's changes ([`commit_fingerprint`]), so the same id sent with other
    /// changes is told apart from a retry. Absent in receipts written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

/// A digest of a commit's changes: each note's id, operation, base revision and content hash,
/// in order.
pub fn commit_fingerprint(changes: &[memoria_shared::protocol::Change]) -> String {
    let mut text = String::new();
    for c in changes {
        text.push_str(&format!(
            "{}\n{:?}\n{}\n{}\n",
            c.id,
            c.op,
            c.base_revision.as_deref().unwrap_or(""),
            c.hash.as_ref().map_or("", |h| h.as_str())
        ));
    }
    memoria_shared::hash::sha256_hex(text.as_bytes())
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    format: u32,
    generation: u64,
    notes: Vec<ManifestEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    receipts: Vec<Receipt>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    changed: BTreeMap<NoteId, u64>,
    /// Absent in a manifest written without change tracking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tracked_from: Option<u64>,
    #[serde(default)]
    pruned_at: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    superseded: Vec<Superseded>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    e2ee: Option<ScopeMark>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    e2ee_off: Option<ScopeMark>,
}

impl Manifest {
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let s: Stored = serde_json::from_slice(bytes).map_err(|e| format!("manifest: {e}"))?;
        if s.format != MANIFEST_FORMAT {
            return Err(format!("manifest format {} is not supported", s.format));
        }
        // Without `trackedFrom`, nothing is known about changes up to this generation (also
        // when a server that does not track them rewrote a tracked manifest: it drops both).
        let (changed, tracked_from) = match s.tracked_from {
            Some(from) => (s.changed, from),
            None => (BTreeMap::new(), s.generation),
        };
        Ok(Manifest {
            generation: s.generation,
            notes: s.notes.into_iter().map(|e| (e.id.clone(), e)).collect(),
            receipts: s.receipts,
            changed,
            tracked_from,
            pruned_at: s.pruned_at,
            superseded: s.superseded,
            e2ee: s.e2ee,
            e2ee_off: s.e2ee_off,
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let s = Stored {
            format: MANIFEST_FORMAT,
            generation: self.generation,
            notes: self.notes.values().cloned().collect(),
            receipts: self.receipts.clone(),
            changed: self.changed.clone(),
            tracked_from: Some(self.tracked_from),
            pruned_at: self.pruned_at,
            superseded: self.superseded.clone(),
            e2ee: self.e2ee.clone(),
            e2ee_off: self.e2ee_off.clone(),
        };
        serde_json::to_vec(&s).expect("manifest serializes")
    }

    /// The entries changed after generation `since` (live notes and tombstones), when this
    /// manifest can tell them exactly; `None` when the client must get the whole list: `since`
    /// is from before changes were tracked or before tombstones were dropped, or from a
    /// generation this manifest never had.
    pub fn changed_since(&self, since: u64) -> Option<Vec<ManifestEntry>> {
        if since < self.tracked_from || since < self.pruned_at || since > self.generation {
            return None;
        }
        Some(
            self.changed
                .iter()
                .filter(|&(_, &g)| g > since)
                .filter_map(|(id, _)| self.notes.get(id).cloned())
                .collect(),
        )
    }

    /// Whether note `id` is plaintext of a scope since marked encrypted: last changed at or
    /// before the mark (`changed` is complete after `tracked_from`, which the mark never
    /// precedes).
    pub fn is_plaintext(&self, id: &NoteId) -> bool {
        match &self.e2ee {
            Some(mark) => self.changed.get(id).is_none_or(|&g| g <= mark.since),
            None => true,
        }
    }

    /// Whether note `id` is an envelope left from before the scope's mark was removed (last
    /// changed at or before the removal).
    pub fn is_left_encrypted(&self, id: &NoteId) -> bool {
        match (&self.e2ee, &self.e2ee_off) {
            (None, Some(off)) => self.changed.get(id).is_none_or(|&g| g <= off.since),
            _ => false,
        }
    }

    /// What the commit `commit_id` applied, if this manifest remembers it.
    pub fn receipt(&self, commit_id: &str) -> Option<&Receipt> {
        self.receipts.iter().find(|r| r.commit_id == commit_id)
    }

    /// Remembers a commit's outcome, forgetting the oldest receipts past the bounds.
    pub fn add_receipt(&mut self, commit_id: &str, fingerprint: String, applied: Vec<Applied>) {
        self.receipts.insert(
            0,
            Receipt {
                commit_id: commit_id.to_owned(),
                applied,
                fingerprint: Some(fingerprint),
            },
        );
        let mut entries = 0;
        let keep = self
            .receipts
            .iter()
            .take(MAX_RECEIPTS)
            .take_while(|r| {
                entries += r.applied.len();
                entries <= MAX_RECEIPT_ENTRIES
            })
            .count()
            .max(1);
        self.receipts.truncate(keep);
    }

    pub fn live_count(&self) -> usize {
        self.notes.values().filter(|e| !e.deleted).count()
    }

    /// Bytes of the live notes' files.
    pub fn live_bytes(&self) -> u64 {
        self.notes
            .values()
            .filter(|e| !e.deleted)
            .map(|e| e.size.unwrap_or(0))
            .sum()
    }

    /// Takes the superseded revisions replaced `grace_ms` or more before `now_ms` out of the
    /// list: their files may be deleted once this manifest is written.
    pub fn take_expired_superseded(&mut self, now_ms: i64, grace_ms: i64) -> Vec<Superseded> {
        let (expired, kept) = std::mem::take(&mut self.superseded)
            .into_iter()
            .partition(|s| now_ms.saturating_sub(s.at) >= grace_ms);
        self.superseded = kept;
        expired
    }

    /// Drops the oldest tombstones beyond `max`, as if they had expired. Returns whether any
    /// was dropped.
    pub fn cap_tombstones(&mut self, max: u32) -> bool {
        let mut tombstones: Vec<(i64, NoteId)> = self
            .notes
            .values()
            .filter(|e| e.deleted)
            .map(|e| (e.updated_at, e.id.clone()))
            .collect();
        let Some(excess) = tombstones
            .len()
            .checked_sub(max as usize)
            .filter(|n| *n > 0)
        else {
            return false;
        };
        tombstones.sort();
        for (_, id) in tombstones.into_iter().take(excess) {
            self.notes.remove(&id);
            self.changed.remove(&id);
        }
        true
    }

    /// Drops tombstones older than the quota's window. Returns whether anything was dropped.
    pub fn prune_tombstones(&mut self, quotas: &Quotas, now_ms: i64) -> bool {
        let window = i64::from(quotas.tombstone_days) * MS_PER_DAY;
        let before = self.notes.len();
        self.notes
            .retain(|_, e| !(e.deleted && now_ms.saturating_sub(e.updated_at) > window));
        let notes = &self.notes;
        self.changed.retain(|id, _| notes.contains_key(id));
        self.notes.len() != before
    }
}

/// A `put` whose body has been checked: it parses as a note with the change's id, and its
/// content hash is the one sent. The body itself stays in its change, written from there
/// once: a request holds one copy of each note file.
#[derive(Debug, Clone)]
pub struct CheckedPut {
    pub hash: ContentHash,
    /// The body's length in bytes.
    pub size: u64,
    /// The account key id of an envelope (a put to an encrypted scope).
    pub kid: Option<memoria_shared::e2ee::KeyId>,
}

/// A revision file the commit needs written before the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRevision {
    pub id: NoteId,
    pub revision: String,
}

/// Why a commit cannot apply to the current manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// These notes' base revisions are not current.
    Stale(Vec<StaleNote>),
    /// The scope would grow past the live-notes quota.
    Quota { live_after: usize, limit: u32 },
    /// A delete names a note the manifest does not have (never created, or its tombstone
    /// expired): recording it would only grow the manifest.
    UnknownDelete(NoteId),
}

/// The outcome of a commit that may apply: the next manifest and the new revision per change
/// (in request order).
#[derive(Debug, Clone)]
pub struct Plan {
    pub next: Manifest,
    pub revisions: Vec<NewRevision>,
}

/// Decides whether `changes` apply to `current`. `puts[i]` is the checked body of
/// `changes[i]` when it is a put. `revisions[i]` is the revision id to give `changes[i]`.
pub fn plan_commit(
    current: &Manifest,
    changes: &[Change],
    puts: &[Option<CheckedPut>],
    revisions: &[String],
    quotas: &Quotas,
    now_ms: i64,
) -> Result<Plan, Refusal> {
    let stale: Vec<StaleNote> = changes
        .iter()
        .filter_map(|c| {
            let cur = current.notes.get(&c.id).map(|e| e.revision.clone());
            (cur != c.base_revision).then(|| StaleNote {
                id: c.id.clone(),
                current_revision: cur,
            })
        })
        .collect();
    if !stale.is_empty() {
        return Err(Refusal::Stale(stale));
    }
    if let Some(c) = changes
        .iter()
        .find(|c| c.op == ChangeOp::Delete && !current.notes.contains_key(&c.id))
    {
        return Err(Refusal::UnknownDelete(c.id.clone()));
    }
    let mut next = current.clone();
    next.generation += 1;
    let generation = next.generation;
    let mut out = Vec::with_capacity(changes.len());
    for ((change, put), rev) in changes.iter().zip(puts).zip(revisions) {
        let prev = current.notes.get(&change.id);
        // A live note's file is replaced by a put or a delete (a delete of a tombstone keeps
        // its revision; a tombstone has no file).
        if let Some(p) = prev.filter(|p| !p.deleted) {
            next.superseded.push(Superseded {
                id: p.id.clone(),
                revision: p.revision.clone(),
                at: now_ms,
            });
        }
        let created_at = prev.map_or(now_ms, |p| if p.deleted { now_ms } else { p.created_at });
        match (change.op, put) {
            (ChangeOp::Put, Some(put)) => {
                next.notes.insert(
                    change.id.clone(),
                    ManifestEntry {
                        id: change.id.clone(),
                        revision: rev.clone(),
                        hash: Some(put.hash.clone()),
                        size: Some(put.size),
                        deleted: false,
                        created_at,
                        updated_at: now_ms,
                    },
                );
                next.changed.insert(change.id.clone(), generation);
                out.push(NewRevision {
                    id: change.id.clone(),
                    revision: rev.clone(),
                });
            }
            (ChangeOp::Delete, _) => match prev {
                // Deleting a tombstone changes nothing: it keeps its revision.
                Some(p) if p.deleted => out.push(NewRevision {
                    id: change.id.clone(),
                    revision: p.revision.clone(),
                }),
                None => unreachable!("deletes of unknown notes are refused above"),
                Some(p) => {
                    next.notes.insert(
                        change.id.clone(),
                        ManifestEntry {
                            id: change.id.clone(),
                            revision: rev.clone(),
                            hash: None,
                            size: None,
                            deleted: true,
                            created_at: p.created_at,
                            updated_at: now_ms,
                        },
                    );
                    next.changed.insert(change.id.clone(), generation);
                    out.push(NewRevision {
                        id: change.id.clone(),
                        revision: rev.clone(),
                    });
                }
            },
            (ChangeOp::Put, None) => unreachable!("puts are checked before planning"),
        }
    }
    let (before, after) = (current.live_count(), next.live_count());
    // A reduced quota only blocks growth: shrinking or staying level is always allowed.
    if after > quotas.live_notes_per_scope as usize && after > before {
        return Err(Refusal::Quota {
            live_after: after,
            limit: quotas.live_notes_per_scope,
        });
    }
    if let Some(excess) = next.superseded.len().checked_sub(MAX_SUPERSEDED) {
        next.superseded.drain(..excess);
    }
    Ok(Plan {
        next,
        revisions: out,
    })
}

/// Ids that occur more than once in a commit.
pub fn duplicate_ids(changes: &[Change]) -> Option<NoteId> {
    let mut seen = HashSet::new();
    changes
        .iter()
        .find(|c| !seen.insert(&c.id))
        .map(|c| c.id.clone())
}

/// Manifests as this server last read or wrote them, by key, with their ETags: a manifest the
/// store still reports at the same ETag is that manifest, and is not parsed again. An entry is
/// taken out while a request works on it (a commit changes it), and put back with the ETag of
/// what was written.
#[derive(Debug, Default)]
pub struct ManifestCache(Mutex<HashMap<String, (ETag, Manifest)>>);

/// Manifests kept at most: a server of many accounts keeps only the scopes in use lately.
const CACHED_MANIFESTS: usize = 16;

impl ManifestCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, (ETag, Manifest)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The manifest at `key` if it is the one stored at `etag`, taken out of the cache.
    pub fn take(&self, key: &str, etag: &ETag) -> Option<Manifest> {
        let mut map = self.lock();
        match map.remove(key) {
            Some((e, m)) if e == *etag => Some(m),
            _ => None,
        }
    }

    /// Keeps `manifest`, stored at `key` with `etag`.
    pub fn put(&self, key: &str, etag: ETag, manifest: Manifest) {
        let mut map = self.lock();
        if map.len() >= CACHED_MANIFESTS && !map.contains_key(key) {
            map.clear();
        }
        map.insert(key.to_owned(), (etag, manifest));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> NoteId {
        NoteId::new(s).unwrap()
    }
    fn hash(n: u8) -> ContentHash {
        ContentHash::parse(&format!("{:064x}", n)).unwrap()
    }
    fn put(i: &str, base: Option<&str>) -> (Change, Option<CheckedPut>) {
        (
            Change {
                id: id(i),
                op: ChangeOp::Put,
                base_revision: base.map(str::to_owned),
                body: Some("b".into()),
                hash: Some(hash(1)),
            },
            Some(CheckedPut {
                hash: hash(1),
                size: 1,
                kid: None,
            }),
        )
    }
    fn del(i: &str, base: Option<&str>) -> (Change, Option<CheckedPut>) {
        (
            Change {
                id: id(i),
                op: ChangeOp::Delete,
                base_revision: base.map(str::to_owned),
                body: None,
                hash: None,
            },
            None,
        )
    }
    fn apply(
        m: &Manifest,
        cs: Vec<(Change, Option<CheckedPut>)>,
        q: &Quotas,
        now: i64,
    ) -> Result<Plan, Refusal> {
        let (changes, puts): (Vec<_>, Vec<_>) = cs.into_iter().unzip();
        let revs: Vec<String> = (0..changes.len()).map(|i| format!("r{now}-{i}")).collect();
        plan_commit(m, &changes, &puts, &revs, q, now)
    }

    #[test]
    fn bases_must_be_current() {
        let q = Quotas::default();
        let m = apply(&Manifest::default(), vec![put("a", None)], &q, 1)
            .unwrap()
            .next;
        assert_eq!(m.notes[&id("a")].revision, "r1-0");
        assert_eq!(m.generation, 1);
        // Creating an existing note, or editing from an old base, is stale.
        let err = apply(&m, vec![put("a", None), put("b", None)], &q, 2).unwrap_err();
        assert_eq!(
            err,
            Refusal::Stale(vec![StaleNote {
                id: id("a"),
                current_revision: Some("r1-0".into())
            }])
        );
        let m2 = apply(&m, vec![put("a", Some("r1-0")), put("b", None)], &q, 2)
            .unwrap()
            .next;
        assert_eq!(m2.notes[&id("a")].created_at, 1);
        assert_eq!(m2.notes[&id("a")].updated_at, 2);
        assert!(apply(&m2, vec![put("a", Some("r1-0"))], &q, 3).is_err());
    }

    #[test]
    fn deletes_make_tombstones_that_expire() {
        let q = Quotas::default();
        let m = apply(&Manifest::default(), vec![put("a", None)], &q, 0)
            .unwrap()
            .next;
        let mut m = apply(&m, vec![del("a", Some("r0-0"))], &q, 10)
            .unwrap()
            .next;
        let t = &m.notes[&id("a")];
        assert!(t.deleted && t.hash.is_none() && t.revision == "r10-0");
        // Deleting again from the tombstone's revision is a no-op.
        let again = apply(&m, vec![del("a", Some("r10-0"))], &q, 11).unwrap();
        assert_eq!(again.revisions[0].revision, "r10-0");
        // A put over a tombstone names the tombstone's revision and is a new note.
        let back = apply(&m, vec![put("a", Some("r10-0"))], &q, 12)
            .unwrap()
            .next;
        assert_eq!(back.notes[&id("a")].created_at, 12);
        let day = MS_PER_DAY;
        assert!(!m.prune_tombstones(&q, 10 + 90 * day));
        assert!(m.prune_tombstones(&q, 11 + 90 * day));
        assert!(m.notes.is_empty());
    }

    #[test]
    fn deletes_of_unknown_notes_are_refused_and_record_nothing() {
        let q = Quotas::default();
        let m = apply(&Manifest::default(), vec![put("a", None)], &q, 1)
            .unwrap()
            .next;
        assert_eq!(
            apply(&m, vec![del("never", None)], &q, 2).unwrap_err(),
            Refusal::UnknownDelete(id("never"))
        );
        // The whole commit is refused, known changes with it.
        assert!(apply(&m, vec![put("a", Some("r1-0")), del("never", None)], &q, 2).is_err());
        // An expired tombstone is unknown too.
        let mut t = apply(&m, vec![del("a", Some("r1-0"))], &q, 3).unwrap().next;
        t.prune_tombstones(&q, 3 + 91 * MS_PER_DAY);
        assert_eq!(
            apply(&t, vec![del("a", None)], &q, 4).unwrap_err(),
            Refusal::UnknownDelete(id("a"))
        );
    }

    #[test]
    fn receipts_are_bounded_and_round_trip() {
        let mut m = Manifest::default();
        let applied = |n: usize| -> Vec<Applied> {
            (0..n)
                .map(|i| Applied {
                    id: id(&format!("n{i}")),
                    revision: format!("r{i}"),
                })
                .collect()
        };
        for i in 0..MAX_RECEIPTS + 5 {
            m.add_receipt(&format!("c{i}"), String::new(), applied(1));
        }
        assert_eq!(m.receipts.len(), MAX_RECEIPTS);
        assert!(m.receipt("c0").is_none(), "the oldest are forgotten");
        assert_eq!(
            m.receipt(&format!("c{}", MAX_RECEIPTS + 4))
                .unwrap()
                .applied
                .len(),
            1
        );
        m.add_receipt("big", String::new(), applied(MAX_RECEIPT_ENTRIES));
        assert_eq!(
            m.receipts.len(),
            1,
            "entries are bounded too, keeping the newest"
        );
        assert_eq!(Manifest::from_bytes(&m.to_bytes()).unwrap(), m);
        // A manifest written without receipts reads as having none.
        let old = br#"{"format":1,"generation":3,"notes":[]}"#;
        assert!(Manifest::from_bytes(old).unwrap().receipts.is_empty());
    }

    #[test]
    fn a_reduced_quota_only_blocks_growth() {
        let big = Quotas::default();
        let m = apply(
            &Manifest::default(),
            vec![put("a", None), put("b", None), put("c", None)],
            &big,
            1,
        )
        .unwrap()
        .next;
        let small = Quotas {
            live_notes_per_scope: 2,
            ..big
        };
        assert_eq!(
            apply(&m, vec![put("d", None)], &small, 2).unwrap_err(),
            Refusal::Quota {
                live_after: 4,
                limit: 2
            }
        );
        // Editing and deleting stay allowed above the quota.
        assert!(apply(&m, vec![put("a", Some("r1-0"))], &small, 2).is_ok());
        assert!(apply(&m, vec![del("a", Some("r1-0"))], &small, 2).is_ok());
        // Swapping one note for another keeps the count level: allowed.
        assert!(apply(&m, vec![del("a", Some("r1-0")), put("d", None)], &small, 2).is_ok());
    }

    #[test]
    fn replaced_revisions_are_listed_until_their_grace_is_over() {
        let q = Quotas::default();
        let m = apply(&Manifest::default(), vec![put("a", None)], &q, 1)
            .unwrap()
            .next;
        assert!(m.superseded.is_empty(), "a new note replaces nothing");
        let m = apply(&m, vec![put("a", Some("r1-0"))], &q, 2).unwrap().next;
        let mut m = apply(&m, vec![del("a", Some("r2-0"))], &q, 3).unwrap().next;
        let listed: Vec<(&str, i64)> = m
            .superseded
            .iter()
            .map(|s| (s.revision.as_str(), s.at))
            .collect();
        assert_eq!(listed, [("r1-0", 2), ("r2-0", 3)]);
        // Deleting the tombstone again and re-creating the note replace no file.
        let again = apply(&m, vec![del("a", Some("r3-0"))], &q, 4).unwrap().next;
        assert_eq!(again.superseded.len(), 2);
        let back = apply(&m, vec![put("a", Some("r3-0"))], &q, 4).unwrap().next;
        assert_eq!(back.superseded.len(), 2);
        assert_eq!(Manifest::from_bytes(&m.to_bytes()).unwrap(), m);
        let expired = m.take_expired_superseded(12, 10);
        assert_eq!(expired.len(), 1);
        assert_eq!(expired[0].revision, "r1-0");
        assert_eq!(m.superseded.len(), 1, "r2-0 is still in its grace period");
    }

    #[test]
    fn tombstones_beyond_the_cap_are_dropped_oldest_first() {
        let q = Quotas::default();
        let mut m = Manifest::default();
        for i in 0..5 {
            m = apply(&m, vec![put(&format!("n{i}"), None)], &q, i)
                .unwrap()
                .next;
        }
        for i in 0..5 {
            let base = m.notes[&id(&format!("n{i}"))].revision.clone();
            m = apply(&m, vec![del(&format!("n{i}"), Some(&base))], &q, 10 + i)
                .unwrap()
                .next;
        }
        assert!(!m.cap_tombstones(5));
        assert!(m.cap_tombstones(2));
        let left: Vec<&str> = m.notes.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["n3", "n4"]);
        assert!(m.changed.keys().all(|k| m.notes.contains_key(k)));
    }

    #[test]
    fn manifest_round_trips_and_duplicates_are_found() {
        let q = Quotas::default();
        let m = apply(
            &Manifest::default(),
            vec![put("a", None), put("b", None)],
            &q,
            5,
        )
        .unwrap()
        .next;
        let m = apply(&m, vec![del("b", Some("r5-1"))], &q, 6).unwrap().next;
        assert!(m.notes[&id("b")].deleted);
        assert_eq!(Manifest::from_bytes(&m.to_bytes()).unwrap(), m);
        assert!(Manifest::from_bytes(b"{\"format\":9,\"generation\":0,\"notes\":[]}").is_err());
        let (cs, _): (Vec<_>, Vec<_>) = vec![put("a", None), del("a", None)].into_iter().unzip();
        assert_eq!(duplicate_ids(&cs), Some(id("a")));
    }
}
