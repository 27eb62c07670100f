//! The account key and what is derived from it.
//!
//! The account key is 32 random bytes, made once per account and never sent anywhere in the
//! clear. Each use gets a subkey of its own through HKDF-SHA-256 (RFC 5869: no salt, the
//! account key as input keying material, a distinct label as `info`), so a weakness in one use
//! can never be turned against another:
//!
//! | label | length | use |
//! |---|---|---|
//! | `memoria e2ee v1 note key` | 32 | XChaCha20-Poly1305 key of the note envelopes |
//! | `memoria e2ee v1 id key` | 32 | HMAC-SHA-256 key of the opaque ids |
//! | `memoria e2ee v1 hash key` | 32 | HMAC-SHA-256 key of the keyed content hashes |
//! | `memoria e2ee v1 key id` | 10 | the key id: which account key a blob or envelope is under |
//! | `memoria e2ee v1 key wrap` | 32 | wraps another account key (a rotation's old and new keys) |

use std::fmt;

use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::{Zeroize, Zeroizing};

use super::{RandomnessError, RecoveryKey, base32, fill};

/// HKDF label of the note-encryption key.
pub const NOTE_KEY_LABEL: &str = "memoria e2ee v1 note key";
/// HKDF label of the opaque-id key.
pub const ID_KEY_LABEL: &str = "memoria e2ee v1 id key";
/// HKDF label of the keyed-hash key.
pub const HASH_KEY_LABEL: &str = "memoria e2ee v1 hash key";
/// HKDF label of the key id.
pub const KEY_ID_LABEL: &str = "memoria e2ee v1 key id";
/// HKDF label of the key that wraps another account key.
pub const KEY_WRAP_LABEL: &str = "memoria e2ee v1 key wrap";

/// Bytes of the key id before its text form.
const KEY_ID_BYTES: usize = 10;

/// The account key: 32 random bytes that encrypt an account's notes. Zeroed when dropped;
/// its `Debug` shows only the key id.
#[derive(Clone)]
pub struct AccountKey(Zeroizing<[u8; 32]>);

impl AccountKey {
    /// A fresh account key from `rng`.
    pub fn generate<R: rand_core::TryCryptoRng + ?Sized>(
        rng: &mut R,
    ) -> Result<Self, RandomnessError> {
        let mut bytes = Zeroizing::new([0u8; 32]);
        fill(rng, bytes.as_mut())?;
        Ok(Self(bytes))
    }

    /// The account key made of `bytes` (an unwrapped key, a test vector).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// The raw key: for wrapping, and for keeping it in this machine's own key store.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key that wraps another account key under this one (a rotation keeps the old key
    /// under the new one, and the new one under the old): used as a recovery key is, so the
    /// blob is a recovery blob (`docs/PROTOCOL.md`, "Rotating the account key").
    pub fn wrapping_key(&self) -> RecoveryKey {
        let hk = Hkdf::<Sha256>::new(None, self.0.as_ref());
        let mut out = [0u8; 32];
        hk.expand(KEY_WRAP_LABEL.as_bytes(), &mut out)
            .expect("32 bytes is a valid HKDF-SHA-256 length");
        let key = RecoveryKey::from_bytes(out);
        out.zeroize();
        key
    }

    /// The subkeys and key id derived from this key.
    pub fn derive(&self) -> AccountKeys {
        let hk = Hkdf::<Sha256>::new(None, self.0.as_ref());
        let expand = |label: &str| {
            let mut out = Zeroizing::new([0u8; 32]);
            hk.expand(label.as_bytes(), out.as_mut())
                .expect("32 bytes is a valid HKDF-SHA-256 length");
            out
        };
        let mut kid = [0u8; KEY_ID_BYTES];
        hk.expand(KEY_ID_LABEL.as_bytes(), &mut kid)
            .expect("10 bytes is a valid HKDF-SHA-256 length");
        AccountKeys {
            note: expand(NOTE_KEY_LABEL),
            id: expand(ID_KEY_LABEL),
            hash: expand(HASH_KEY_LABEL),
            kid: KeyId(base32::encode_lower(&kid)),
        }
    }
}

impl fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AccountKey({})", self.derive().kid)
    }
}

/// The subkeys of one account key. Zeroed when dropped; `Debug` shows only the key id.
#[derive(Clone)]
pub struct AccountKeys {
    pub(crate) note: Zeroizing<[u8; 32]>,
    pub(crate) id: Zeroizing<[u8; 32]>,
    pub(crate) hash: Zeroizing<[u8; 32]>,
    pub(crate) kid: KeyId,
}

impl AccountKeys {
    /// Which account key these subkeys come from.
    pub fn key_id(&self) -> &KeyId {
        &self.kid
    }
}

impl fmt::Debug for AccountKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AccountKeys({})", self.kid)
    }
}

/// A public name of an account key: 16 lowercase Crockford base32 characters of an HKDF output,
/// so a blob or an envelope says which key it is under (while a rotation re-encrypts, a scope
/// holds both) without revealing anything of the key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(pub(crate) String);

impl KeyId {
    /// Accepts a key id read from a blob or an envelope: exactly 16 symbols of the lowercase
    /// Crockford alphabet.
    pub fn parse(s: &str) -> Option<Self> {
        let ok = s.len() == KEY_ID_BYTES * 8 / 5
            && s.chars().all(|c| {
                (c.is_ascii_digit() || c.is_ascii_lowercase())
                    && !matches!(c, 'i' | 'l' | 'o' | 'u')
            });
        ok.then(|| Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
