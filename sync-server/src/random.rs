//! Randomness is passed in, so revision ids and tokens are reproducible in tests.

use std::sync::atomic::{AtomicU64, Ordering};

/// A source of random bytes.
pub trait Randomness: Send + Sync + std::fmt::Debug {
    fn fill(&self, buf: &mut [u8]);
}

/// The operating system's random source.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsRandom;

impl Randomness for OsRandom {
    fn fill(&self, buf: &mut [u8]) {
        // Without OS randomness tokens would be guessable: refusing to run is the only safe answer.
        getrandom::fill(buf).expect("the operating system's random source failed");
    }
}

/// Deterministic bytes for tests (splitmix64 from a seed). Never use it for real tokens.
#[derive(Debug, Default)]
pub struct SeededRandom(AtomicU64);

impl SeededRandom {
    pub fn new(seed: u64) -> Self {
        SeededRandom(AtomicU64::new(seed))
    }
}

impl Randomness for SeededRandom {
    fn fill(&self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let mut z = self
                .0
                .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
                .wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
        }
    }
}

/// `n` random bytes as lowercase hex.
pub fn random_hex(rng: &dyn Randomness, n: usize) -> String {
    let mut buf = vec![0u8; n];
    rng.fill(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new revision id: the server time it was made (ms, 13 digits), `-`, and 16 random bytes in
/// hex. Clients treat revision ids as opaque; the time lets a sweep tell how old an
/// unreferenced revision file is without asking the store.
pub fn revision_id(rng: &dyn Randomness, now_ms: i64) -> String {
    format!("{:013}-{}", now_ms.max(0), random_hex(rng, 16))
}

/// When the revision `id` was made, for ids [`revision_id`] makes; `None` for any other id
/// (older servers made 32 hex characters), whose age is unknown.
pub fn revision_time(id: &str) -> Option<i64> {
    let (ms, rest) = id.split_once('-')?;
    (ms.len() >= 13 && ms.bytes().all(|b| b.is_ascii_digit()) && rest.len() == 32)
        .then(|| ms.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_is_deterministic_and_ids_differ() {
        let (a, b) = (SeededRandom::new(7), SeededRandom::new(7));
        let x = revision_id(&a, 1_789_000_000_123);
        assert_eq!(x, revision_id(&b, 1_789_000_000_123));
        assert_ne!(x, revision_id(&a, 1_789_000_000_123));
        assert_eq!(x.len(), 13 + 1 + 32);
        assert_eq!(revision_time(&x), Some(1_789_000_000_123));
        assert_eq!(revision_time(&revision_id(&a, 5)), Some(5));
        assert_ne!(revision_id(&OsRandom, 0), revision_id(&OsRandom, 0));
        // Ids of older servers, or anything else, have no known age.
        for other in [random_hex(&a, 16).as_str(), "r1-0", "12-34", ""] {
            assert_eq!(revision_time(other), None, "{other}");
        }
    }
}
