//! Rollback detection: the one attack the AEAD alone cannot see.
//!
//! A server (or whoever holds the bucket) can serve an older envelope of the same note: it
//! authenticates, because it is a genuine ciphertext of that note. So every encrypted payload
//! carries a sequence number, inside the ciphertext where the server can neither read nor
//! change it, that grows along each note's history: a version gets [`next_seq`] of the highest
//! number its writer knew for the note, and never less than the writer's clock in
//! milliseconds, so a note deleted and made again by a machine that never saw it still
//! continues above its earlier versions (clocks within the time between the two).
//!
//! A client keeps, beside its base of each note, the highest sequence number it accepted or
//! wrote for the note, and keeps it across a tombstone. [`check_rollback`] then refuses an
//! incoming version numbered below it, or numbered the same with other content: the client
//! never applies such a version silently, and shows it as a conflict for the person to
//! choose. A machine that has never seen a note cannot tell an old version from a current
//! one; what it then trusts is still a genuine version of the note, never a forgery.

use crate::hash::ContentHash;

/// The highest version of a note a client has accepted or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownVersion {
    pub seq: u64,
    /// Its keyed hash.
    pub hash: ContentHash,
}

/// An incoming version that would take a note back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rollback {
    /// Numbered below a version this machine already had.
    #[error(
        "the cloud copy is an older version (number {incoming}) than one this machine already had (number {known}): it was not applied"
    )]
    Older { known: u64, incoming: u64 },
    /// Numbered as a version this machine had, with other content.
    #[error(
        "the cloud copy has the number of a version this machine already had ({seq}) with other content: it was not applied"
    )]
    Fork { seq: u64 },
}

/// The sequence number of a new version of a note whose highest known number is `known`
/// (`None` for a note never seen), written at `now_ms` (milliseconds since the epoch).
pub fn next_seq(known: Option<u64>, now_ms: u64) -> u64 {
    known.map_or(1, |k| k.saturating_add(1)).max(now_ms)
}

/// Whether a version numbered `seq` with keyed hash `hash` may be taken over `known`.
pub fn check_rollback(
    known: Option<&KnownVersion>,
    seq: u64,
    hash: &ContentHash,
) -> Result<(), Rollback> {
    match known {
        None => Ok(()),
        Some(k) if seq > k.seq => Ok(()),
        Some(k) if seq == k.seq && *hash == k.hash => Ok(()),
        Some(k) if seq == k.seq => Err(Rollback::Fork { seq }),
        Some(k) => Err(Rollback::Older {
            known: k.seq,
            incoming: seq,
        }),
    }
}
