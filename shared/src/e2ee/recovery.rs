//! The recovery key: 32 random bytes that unwrap the account key when the passphrase is lost,
//! shown once to the person as text they can print, save or type back.
//!
//! Text form: the 32 bytes followed by a 3-byte checksum (the first 3 bytes of
//! `SHA-256("memoria recovery key v1" 0x00 key)`), 35 bytes as 56 upper-case Crockford base32
//! symbols in 14 groups of 4 joined by `-`. Reading it back ignores case, spaces and `-`, reads
//! `O` as `0` and `I`/`L` as `1`, and checks the checksum, so a typo is caught before any
//! unwrapping is tried (a wrong symbol passes with odds of one in 16.7 million).

use std::fmt;

use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::{RandomnessError, base32, fill};

/// Label hashed before the key into its checksum.
const CHECKSUM_LABEL: &str = "memoria recovery key v1";
/// Symbols in the text form, separators left out.
pub const RECOVERY_KEY_SYMBOLS: usize = 56;

/// Why a text is not a recovery key. Each message says what to check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryKeyError {
    /// A character that is not a symbol of the key, a space or `-`.
    #[error(
        "the recovery key has {character:?} at character {position}, which no recovery key holds: check it against the saved copy"
    )]
    BadCharacter { position: usize, character: char },
    /// Too many or too few symbols.
    #[error(
        "the recovery key has {got} letters and digits; a recovery key has 56 (14 groups of 4): check for a missing or doubled group"
    )]
    WrongLength { got: usize },
    /// Every symbol is valid but the checksum does not match: a typo.
    #[error(
        "the recovery key does not check out: a letter or digit is mistyped; compare it group by group with the saved copy"
    )]
    Checksum,
}

/// A recovery key. Zeroed when dropped; its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct RecoveryKey(Zeroizing<[u8; 32]>);

impl RecoveryKey {
    /// A fresh recovery key from `rng`.
    pub fn generate<R: rand_core::TryCryptoRng + ?Sized>(
        rng: &mut R,
    ) -> Result<Self, RandomnessError> {
        let mut bytes = Zeroizing::new([0u8; 32]);
        fill(rng, bytes.as_mut())?;
        Ok(Self(bytes))
    }

    /// The recovery key made of `bytes` (a test vector).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    pub(crate) fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The text form shown to the person: 14 groups of 4 symbols joined by `-`.
    pub fn to_text(&self) -> Zeroizing<String> {
        let mut data = Zeroizing::new([0u8; 35]);
        data[..32].copy_from_slice(self.0.as_ref());
        data[32..].copy_from_slice(&checksum(&self.0));
        let symbols = Zeroizing::new(base32::encode_upper(data.as_ref()));
        let mut out = Zeroizing::new(String::with_capacity(RECOVERY_KEY_SYMBOLS + 13));
        for (i, c) in symbols.chars().enumerate() {
            if i > 0 && i % 4 == 0 {
                out.push('-');
            }
            out.push(c);
        }
        out
    }

    /// Reads a recovery key as a person typed it.
    pub fn parse(text: &str) -> Result<Self, RecoveryKeyError> {
        let mut values = Zeroizing::new(Vec::with_capacity(RECOVERY_KEY_SYMBOLS));
        for (i, c) in text.trim().chars().enumerate() {
            if c == '-' || c.is_whitespace() {
                continue;
            }
            match base32::symbol_value(c) {
                Some(v) => values.push(v),
                None => {
                    return Err(RecoveryKeyError::BadCharacter {
                        position: i + 1,
                        character: c,
                    });
                }
            }
        }
        if values.len() != RECOVERY_KEY_SYMBOLS {
            return Err(RecoveryKeyError::WrongLength { got: values.len() });
        }
        let data = Zeroizing::new(base32::decode_values(&values));
        let mut key = Zeroizing::new([0u8; 32]);
        key.copy_from_slice(&data[..32]);
        if checksum(&key) != data[32..] {
            return Err(RecoveryKeyError::Checksum);
        }
        Ok(Self(key))
    }
}

impl fmt::Debug for RecoveryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RecoveryKey(…)")
    }
}

fn checksum(key: &[u8; 32]) -> [u8; 3] {
    let mut h = Sha256::new();
    h.update(CHECKSUM_LABEL.as_bytes());
    h.update([0]);
    h.update(key);
    let d = h.finalize();
    [d[0], d[1], d[2]]
}
