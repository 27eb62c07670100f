//! The account key wrapped for storage on the server: under a passphrase (Argon2id) or under
//! the recovery key. A new machine downloads a blob and needs only the passphrase; changing
//! the passphrase makes a new blob around the same account key, so no note is re-encrypted.
//!
//! A blob is one JSON object (keys in this order, base64 with padding):
//!
//! ```json
//! {"v":1,"kind":"passphrase","kid":"<key id>",
//!  "kdf":{"alg":"argon2id","version":19,"m":65536,"t":3,"p":1},
//!  "salt":"<16 bytes>","nonce":"<24 bytes>","ct":"<48 bytes>"}
//! {"v":1,"kind":"recovery","kid":"<key id>","nonce":"<24 bytes>","ct":"<48 bytes>"}
//! ```
//!
//! `ct` is XChaCha20-Poly1305 of the 32-byte account key under the wrapping key, with the
//! associated data `"memoria e2ee v1 wrap" 0x00 kind 0x00 kid 0x00 kdf`, where `kdf` is
//! `argon2id v=19 m=<m> t=<t> p=<p>` for a passphrase and empty for the recovery key: a blob
//! whose kind, key id or parameters were changed does not open. The wrapping key is Argon2id
//! of the passphrase (NFC-normalized, UTF-8) and the salt for a passphrase, and HKDF-SHA-256 of
//! the recovery key with the label `memoria e2ee v1 recovery wrap` for the recovery key.

use argon2::{Algorithm, Argon2, Params, Version};
use base64ct::{Base64, Encoding};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use unicode_normalization::UnicodeNormalization;
use zeroize::Zeroizing;

use super::keys::{AccountKey, KeyId};
use super::recovery::RecoveryKey;
use super::{RandomnessError, fill};

/// Version of the blob's shape.
pub const WRAP_VERSION: u32 = 1;
/// HKDF label of the key the recovery key wraps with.
pub const RECOVERY_WRAP_LABEL: &str = "memoria e2ee v1 recovery wrap";
/// Label that opens the associated data of a wrap.
const WRAP_AAD_LABEL: &str = "memoria e2ee v1 wrap";
/// Bytes of a passphrase blob's salt.
pub const SALT_BYTES: usize = 16;

/// Argon2id's costs. Memory in KiB, passes over it, lanes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdfParams {
    pub m_kib: u32,
    pub t: u32,
    pub p: u32,
}

impl KdfParams {
    /// What a new passphrase blob is made with: 64 MiB, 3 passes, one lane (RFC 9106's second
    /// recommendation with one lane, since the machines it runs on may have two cores shared
    /// with the rest of the app, and an attacker's hardware gains nothing from lanes).
    pub const DEFAULT: KdfParams = KdfParams {
        m_kib: 64 * 1024,
        t: 3,
        p: 1,
    };
    /// The least accepted: OWASP's floor for Argon2id (19 MiB, 2 passes) with one pass less,
    /// for the test vectors and tests only; the product always makes [`Self::DEFAULT`].
    pub const MIN: KdfParams = KdfParams {
        m_kib: 19 * 1024,
        t: 1,
        p: 1,
    };
    /// The most accepted, so a blob from elsewhere cannot make a machine allocate without
    /// bound: 1 GiB, 16 passes, 8 lanes.
    pub const MAX: KdfParams = KdfParams {
        m_kib: 1024 * 1024,
        t: 16,
        p: 8,
    };

    /// Whether these costs are within [`Self::MIN`]..=[`Self::MAX`], the range accepted.
    pub fn accepted(&self) -> bool {
        (Self::MIN.m_kib..=Self::MAX.m_kib).contains(&self.m_kib)
            && (Self::MIN.t..=Self::MAX.t).contains(&self.t)
            && (Self::MIN.p..=Self::MAX.p).contains(&self.p)
            && self.m_kib >= 8 * self.p
    }

    /// The text the associated data carries for these costs.
    fn aad_text(&self) -> String {
        format!("argon2id v=19 m={} t={} p={}", self.m_kib, self.t, self.p)
    }
}

/// Why a key could not be wrapped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WrapError {
    /// The passphrase is empty.
    #[error("the passphrase is empty: choose one")]
    EmptyPassphrase,
    /// Argon2id costs outside [`KdfParams::MIN`]..=[`KdfParams::MAX`].
    #[error("Argon2id costs m={m} KiB, t={t}, p={p} are outside the accepted range")]
    Params { m: u32, t: u32, p: u32 },
    #[error(transparent)]
    Randomness(#[from] RandomnessError),
}

/// Why a blob did not give the account key back. Nothing is changed by a failed unwrap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnwrapError {
    /// The passphrase does not open this blob.
    #[error("wrong passphrase: it does not unlock this account's key")]
    WrongPassphrase,
    /// The recovery key does not open this blob.
    #[error("wrong recovery key: it does not unlock this account's key")]
    WrongRecoveryKey,
    /// A passphrase was given for a recovery blob, or the other way round.
    #[error("this key blob is unlocked by the {found}, not the {expected}")]
    WrongKind {
        expected: &'static str,
        found: &'static str,
    },
    /// A blob version this program does not know.
    #[error("this key blob is of version {0}, newer than this program knows: update Memoria")]
    UnsupportedVersion(u32),
    /// A key-derivation function other than Argon2id (version 19).
    #[error("this key blob uses the key derivation {0:?}, which this program does not know")]
    UnsupportedKdf(String),
    /// Argon2id costs outside the accepted range.
    #[error(
        "this key blob asks for Argon2id costs m={m} KiB, t={t}, p={p}, outside the accepted range"
    )]
    ParamsOutOfRange { m: u32, t: u32, p: u32 },
    /// The blob is not a key blob (bad JSON, a missing field, bad base64, wrong lengths).
    #[error("the key blob is damaged: {0}")]
    Malformed(String),
}

/// What unlocks a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WrapKind {
    Passphrase,
    Recovery,
}

impl WrapKind {
    fn name(self) -> &'static str {
        match self {
            WrapKind::Passphrase => "passphrase",
            WrapKind::Recovery => "recovery key",
        }
    }
    fn tag(self) -> &'static str {
        match self {
            WrapKind::Passphrase => "passphrase",
            WrapKind::Recovery => "recovery",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KdfJson {
    alg: String,
    version: u32,
    m: u32,
    t: u32,
    p: u32,
}

/// An account key wrapped under a passphrase or the recovery key, as stored on the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WrappedKey {
    v: u32,
    kind: WrapKind,
    kid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kdf: Option<KdfJson>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    salt: Option<String>,
    nonce: String,
    ct: String,
}

impl WrappedKey {
    /// `key` wrapped under `passphrase` with Argon2id at `params`, a fresh salt and nonce.
    pub fn with_passphrase<R: rand_core::TryCryptoRng + ?Sized>(
        key: &AccountKey,
        passphrase: &str,
        params: KdfParams,
        rng: &mut R,
    ) -> Result<Self, WrapError> {
        let mut salt = [0u8; SALT_BYTES];
        let mut nonce = [0u8; 24];
        fill(rng, &mut salt)?;
        fill(rng, &mut nonce)?;
        Self::with_passphrase_parts(key, passphrase, params, salt, nonce)
    }

    /// [`Self::with_passphrase`] with the salt and nonce given: for test vectors only, since a
    /// salt or nonce used twice weakens the wrap.
    pub fn with_passphrase_parts(
        key: &AccountKey,
        passphrase: &str,
        params: KdfParams,
        salt: [u8; SALT_BYTES],
        nonce: [u8; 24],
    ) -> Result<Self, WrapError> {
        if passphrase.is_empty() {
            return Err(WrapError::EmptyPassphrase);
        }
        if !params.accepted() {
            return Err(WrapError::Params {
                m: params.m_kib,
                t: params.t,
                p: params.p,
            });
        }
        let kek = passphrase_kek(passphrase, &params, &salt).map_err(|_| WrapError::Params {
            m: params.m_kib,
            t: params.t,
            p: params.p,
        })?;
        let kid = key.derive().kid;
        let aad = wrap_aad(WrapKind::Passphrase, &kid, &params.aad_text());
        Ok(WrappedKey {
            v: WRAP_VERSION,
            kind: WrapKind::Passphrase,
            kid: kid.0,
            kdf: Some(KdfJson {
                alg: "argon2id".into(),
                version: 19,
                m: params.m_kib,
                t: params.t,
                p: params.p,
            }),
            salt: Some(Base64::encode_string(&salt)),
            nonce: Base64::encode_string(&nonce),
            ct: Base64::encode_string(&seal_key(&kek, &nonce, &aad, key)),
        })
    }

    /// `key` wrapped under the recovery key, with a fresh nonce.
    pub fn with_recovery_key<R: rand_core::TryCryptoRng + ?Sized>(
        key: &AccountKey,
        recovery: &RecoveryKey,
        rng: &mut R,
    ) -> Result<Self, RandomnessError> {
        let mut nonce = [0u8; 24];
        fill(rng, &mut nonce)?;
        Ok(Self::with_recovery_key_parts(key, recovery, nonce))
    }

    /// [`Self::with_recovery_key`] with the nonce given: for test vectors only.
    pub fn with_recovery_key_parts(
        key: &AccountKey,
        recovery: &RecoveryKey,
        nonce: [u8; 24],
    ) -> Self {
        let kek = recovery_kek(recovery);
        let kid = key.derive().kid;
        let aad = wrap_aad(WrapKind::Recovery, &kid, "");
        WrappedKey {
            v: WRAP_VERSION,
            kind: WrapKind::Recovery,
            kid: kid.0,
            kdf: None,
            salt: None,
            nonce: Base64::encode_string(&nonce),
            ct: Base64::encode_string(&seal_key(&kek, &nonce, &aad, key)),
        }
    }

    /// The account key, if `passphrase` opens this blob.
    pub fn unwrap_with_passphrase(&self, passphrase: &str) -> Result<AccountKey, UnwrapError> {
        let (kid, nonce, ct) = self.common(WrapKind::Passphrase)?;
        let kdf = self
            .kdf
            .as_ref()
            .ok_or_else(|| UnwrapError::Malformed("`kdf` is missing".into()))?;
        if kdf.alg != "argon2id" || kdf.version != 19 {
            return Err(UnwrapError::UnsupportedKdf(format!(
                "{} version {}",
                kdf.alg, kdf.version
            )));
        }
        let params = KdfParams {
            m_kib: kdf.m,
            t: kdf.t,
            p: kdf.p,
        };
        if !params.accepted() {
            return Err(UnwrapError::ParamsOutOfRange {
                m: kdf.m,
                t: kdf.t,
                p: kdf.p,
            });
        }
        let salt = decode(self.salt.as_deref(), "salt", SALT_BYTES)?;
        let kek = passphrase_kek(passphrase, &params, &salt)
            .map_err(|e| UnwrapError::Malformed(format!("Argon2id refused its inputs: {e}")))?;
        let aad = wrap_aad(WrapKind::Passphrase, &kid, &params.aad_text());
        open_key(&kek, &nonce, &aad, &ct, &kid).ok_or(UnwrapError::WrongPassphrase)
    }

    /// The account key, if `recovery` opens this blob.
    pub fn unwrap_with_recovery_key(
        &self,
        recovery: &RecoveryKey,
    ) -> Result<AccountKey, UnwrapError> {
        let (kid, nonce, ct) = self.common(WrapKind::Recovery)?;
        if self.kdf.is_some() || self.salt.is_some() {
            return Err(UnwrapError::Malformed(
                "a recovery blob has no `kdf` or `salt`".into(),
            ));
        }
        let aad = wrap_aad(WrapKind::Recovery, &kid, "");
        open_key(&recovery_kek(recovery), &nonce, &aad, &ct, &kid)
            .ok_or(UnwrapError::WrongRecoveryKey)
    }

    /// A new passphrase blob around the same account key: the old passphrase must open this
    /// blob. Notes and the recovery blob stay as they are.
    pub fn rewrap<R: rand_core::TryCryptoRng + ?Sized>(
        &self,
        old_passphrase: &str,
        new_passphrase: &str,
        params: KdfParams,
        rng: &mut R,
    ) -> Result<WrappedKey, RewrapError> {
        let key = self.unwrap_with_passphrase(old_passphrase)?;
        Ok(WrappedKey::with_passphrase(
            &key,
            new_passphrase,
            params,
            rng,
        )?)
    }

    /// Which account key this blob holds.
    pub fn key_id(&self) -> Option<KeyId> {
        KeyId::parse(&self.kid)
    }

    /// What unlocks this blob.
    pub fn kind(&self) -> WrapKind {
        self.kind
    }

    /// The Argon2id costs of a passphrase blob.
    pub fn kdf_params(&self) -> Option<KdfParams> {
        self.kdf.as_ref().map(|k| KdfParams {
            m_kib: k.m,
            t: k.t,
            p: k.p,
        })
    }

    /// The blob as stored: one line of JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a key blob serializes")
    }

    /// Reads a stored blob.
    pub fn from_json(s: &str) -> Result<Self, UnwrapError> {
        let blob: WrappedKey =
            serde_json::from_str(s).map_err(|e| UnwrapError::Malformed(e.to_string()))?;
        if blob.v != WRAP_VERSION {
            return Err(UnwrapError::UnsupportedVersion(blob.v));
        }
        Ok(blob)
    }

    /// The parts every blob has, checked: the version, the kind, the key id, nonce and ct.
    fn common(&self, expected: WrapKind) -> Result<(KeyId, Vec<u8>, Vec<u8>), UnwrapError> {
        if self.v != WRAP_VERSION {
            return Err(UnwrapError::UnsupportedVersion(self.v));
        }
        if self.kind != expected {
            return Err(UnwrapError::WrongKind {
                expected: expected.name(),
                found: self.kind.name(),
            });
        }
        let kid = KeyId::parse(&self.kid).ok_or_else(|| {
            UnwrapError::Malformed(format!("`kid` {:?} is not a key id", self.kid))
        })?;
        let nonce = decode(Some(&self.nonce), "nonce", 24)?;
        let ct = decode(Some(&self.ct), "ct", 32 + 16)?;
        Ok((kid, nonce, ct))
    }
}

/// Why a passphrase could not be changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewrapError {
    #[error(transparent)]
    Unwrap(#[from] UnwrapError),
    #[error(transparent)]
    Wrap(#[from] WrapError),
}

fn decode(b64: Option<&str>, field: &str, len: usize) -> Result<Vec<u8>, UnwrapError> {
    let b64 = b64.ok_or_else(|| UnwrapError::Malformed(format!("`{field}` is missing")))?;
    let bytes = Base64::decode_vec(b64)
        .map_err(|_| UnwrapError::Malformed(format!("`{field}` is not base64")))?;
    if bytes.len() != len {
        return Err(UnwrapError::Malformed(format!(
            "`{field}` is {} bytes, not {len}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

fn wrap_aad(kind: WrapKind, kid: &KeyId, kdf: &str) -> Vec<u8> {
    [WRAP_AAD_LABEL, kind.tag(), kid.as_str(), kdf]
        .join("\0")
        .into_bytes()
}

fn passphrase_kek(
    passphrase: &str,
    params: &KdfParams,
    salt: &[u8],
) -> Result<Zeroizing<[u8; 32]>, argon2::Error> {
    let normalized: Zeroizing<String> = Zeroizing::new(passphrase.nfc().collect());
    let argon = Argon2::new(
        Algorithm::Argon2id,
        Version::V0x13,
        Params::new(params.m_kib, params.t, params.p, Some(32))?,
    );
    let mut kek = Zeroizing::new([0u8; 32]);
    argon.hash_password_into(normalized.as_bytes(), salt, kek.as_mut())?;
    Ok(kek)
}

fn recovery_kek(recovery: &RecoveryKey) -> Zeroizing<[u8; 32]> {
    let mut kek = Zeroizing::new([0u8; 32]);
    Hkdf::<Sha256>::new(None, recovery.as_bytes())
        .expand(RECOVERY_WRAP_LABEL.as_bytes(), kek.as_mut())
        .expect("32 bytes is a valid HKDF-SHA-256 length");
    kek
}

fn seal_key(kek: &[u8; 32], nonce: &[u8; 24], aad: &[u8], key: &AccountKey) -> Vec<u8> {
    let cipher = XChaCha20Poly1305::new_from_slice(kek).expect("32-byte key");
    cipher
        .encrypt(
            &XNonce::from(*nonce),
            Payload {
                msg: key.as_bytes(),
                aad,
            },
        )
        .expect("a 32-byte message encrypts")
}

/// The account key in `ct`, when the wrapping key opens it and it is the key `kid` names.
fn open_key(
    kek: &[u8; 32],
    nonce: &[u8],
    aad: &[u8],
    ct: &[u8],
    kid: &KeyId,
) -> Option<AccountKey> {
    let cipher = XChaCha20Poly1305::new_from_slice(kek).expect("32-byte key");
    let nonce = XNonce::try_from(nonce).ok()?;
    let plain = Zeroizing::new(cipher.decrypt(&nonce, Payload { msg: ct, aad }).ok()?);
    let bytes: [u8; 32] = plain.as_slice().try_into().ok()?;
    let key = AccountKey::from_bytes(bytes);
    // The key id is bound by the associated data, so this holds for every blob this module
    // made; a blob made elsewhere with a mismatched id is refused rather than trusted.
    (key.derive().kid == *kid).then_some(key)
}
