//! End-to-end encryption of synced notes: the keys, the wrapped-key blobs, opaque ids, keyed
//! hashes and the encrypted note envelope, specified byte for byte in `docs/PROTOCOL.md`
//! ("End-to-end encryption"), whose test vectors the tests below read from that very file.
//!
//! Everything here is a pure function of its inputs: randomness comes in as a
//! [`rand_core::TryCryptoRng`] the caller owns (the operating system's generator in the
//! engine, fixed bytes in the vectors), and nothing reads a file, a clock or the network.
//! The primitives are RustCrypto's (XChaCha20-Poly1305, Argon2id, HMAC-SHA-256, HKDF-SHA-256);
//! this module only frames their inputs and outputs and never implements a primitive itself.
//!
//! - [`keys`]: the account key and the subkeys derived from it.
//! - [`wrap`]: the account key wrapped under a passphrase (Argon2id) or a recovery key.
//! - [`recovery`]: the recovery key's human-typable text form.
//! - [`opaque`]: opaque note and project ids, and keyed content hashes.
//! - [`envelope`]: an encrypted note as a note file the server stores and checks.
//! - [`rollback`]: the per-note sequence number that makes a replayed older version visible.

mod base32;
pub mod envelope;
pub mod keys;
pub mod opaque;
pub mod recovery;
pub mod rollback;
pub mod wrap;

pub use envelope::{
    EnvelopeError, NoteContext, OpenError, OpenedNote, SealError, SealedNote, open_note, seal_note,
    seal_serialized, verify_envelope_file,
};
pub use keys::{AccountKey, AccountKeys, KeyId};
pub use opaque::{keyed_hash, opaque_note_id, opaque_project_id, opaque_scope};
pub use recovery::{RecoveryKey, RecoveryKeyError};
pub use rollback::{KnownVersion, Rollback, check_rollback, next_seq};
pub use wrap::{KdfParams, RewrapError, UnwrapError, WrapError, WrapKind, WrappedKey};

/// The operating system (or whatever the caller passed) could not give random bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no random bytes could be had from the system's generator: {0}")]
pub struct RandomnessError(pub String);

/// Fills `out` from `rng`, turning its failure into a typed error.
fn fill<R: rand_core::TryCryptoRng + ?Sized>(
    rng: &mut R,
    out: &mut [u8],
) -> Result<(), RandomnessError> {
    rng.try_fill_bytes(out)
        .map_err(|e| RandomnessError(e.to_string()))
}

#[cfg(test)]
mod tests;
