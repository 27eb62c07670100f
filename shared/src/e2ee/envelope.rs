//! An encrypted note as the server stores it: the *envelope*, itself a minimal note file.
//!
//! ```text
//! ---
//! {"id":"<opaque id>","summary":"","tags":[],"e2ee":2,"kid":"<key id>","hash":"<keyed hash>","sum":"<sha-256 of the sealed bytes>"}
//! ---
//! <base64 of nonce (24) || ciphertext || tag (16)>
//! ```
//!
//! The server checks an envelope without any key ([`verify_envelope_file`]): its shape, that
//! its `id` is the change's id, that its `hash` is the change's `hash`, and that `sum` is the
//! SHA-256 of the sealed bytes (its integrity check, as the content hash is for a plaintext
//! note). A client opens it ([`open_note`]): XChaCha20-Poly1305 under the note key, with the
//! associated data
//!
//! ```text
//! "memoria e2ee v<version> note" 0x00 kid 0x00 user id 0x00 scope 0x00 opaque id
//! ```
//!
//! so a ciphertext moved to another note, scope or account, relabelled with the other
//! version, or altered in any byte, does not open. The plaintext is the payload; version 2,
//! which this module writes:
//!
//! ```text
//! seq (u64, big-endian) || id length (u8) || note id || file length (u32, big-endian)
//!   || codec (u8) || stored length (u32, big-endian) || stored
//!   || zero bytes up to padme(18 + id length + stored length)
//! ```
//!
//! where `stored` is the note file (codec 0) or an LZ4 block of it (codec 1, written when it
//! is shorter). Version 1, still read: `seq || id length || note id || file length || note
//! file || zero bytes up to padme(13 + id length + file length)`.
//!
//! `seq` is the note's sequence number ([`super::rollback`]); the note file is the file the
//! protocol would carry in the clear. The padding (Padmé: at most 12% and usually less) leaves
//! the server a size class instead of each note's exact size, and is applied after
//! compression, so what the size says of the text is its compressed size class
//! (`docs/privacy.md`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};

use super::keys::{AccountKeys, KeyId};
use super::opaque::{keyed_hash, opaque_note_id};
use super::{RandomnessError, fill};
use crate::hash::{ContentHash, sha256_hex};
use crate::id::NoteId;
use crate::note::{FileContext, Note};
use crate::protocol::Scope;

/// Version of the envelope and its payload (`e2ee` in the header) that [`seal_note`] writes.
pub const ENVELOPE_VERSION: u32 = 2;
/// The envelope versions [`open_note`] and the server's check read.
pub const ENVELOPE_VERSIONS: [u32; 2] = [1, 2];
/// Bytes of the nonce.
pub const NONCE_BYTES: usize = 24;
/// Bytes of the authentication tag.
pub const TAG_BYTES: usize = 16;
/// Bytes of the payload before the note id: `seq` and the id length.
const PAYLOAD_HEAD: usize = 9;
/// Bytes of the payload's fixed fields after the note id: the file length, and in version 2
/// the codec and the stored length.
const fn payload_tail(version: u32) -> usize {
    if version == 1 { 4 } else { 4 + 1 + 4 }
}
/// The shortest sealed form: a payload of the fixed fields of version 1 and a one-byte id,
/// no file.
const MIN_SEALED: usize = NONCE_BYTES + PAYLOAD_HEAD + 1 + payload_tail(1) + TAG_BYTES;
/// Codecs of a version-2 payload's `stored` bytes.
const CODEC_STORED: u8 = 0;
const CODEC_LZ4: u8 = 1;
/// An LZ4 block expands its input at most 255 times (a match's length is coded 255 bytes a
/// byte): a larger declared file length is a faulty writer's, refused before any allocation.
const LZ4_MAX_RATIO: usize = 255;

/// The account and scope a note is sealed for. `scope` is the real scope, never its opaque
/// form.
#[derive(Debug, Clone, Copy)]
pub struct NoteContext<'a> {
    /// The account's user id, as the server's identity names it.
    pub user_id: &'a str,
    pub scope: &'a Scope,
}

/// A note sealed for upload: what a commit's change carries for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedNote {
    /// The change's `id`.
    pub opaque_id: NoteId,
    /// The change's `hash`: the keyed hash.
    pub hash: ContentHash,
    /// The note's own sync-form content hash, which stays on this machine.
    pub plain_hash: ContentHash,
    /// The change's `body`: the envelope.
    pub body: String,
}

/// A note taken out of its envelope and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenedNote {
    pub id: NoteId,
    /// The note file, exactly as its writer sealed it.
    pub text: String,
    pub note: Note,
    /// Its sequence number, for [`super::check_rollback`].
    pub seq: u64,
    /// Its sync-form content hash.
    pub plain_hash: ContentHash,
}

/// Why a note could not be sealed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The text does not parse as a note file.
    #[error("note {id} cannot be encrypted: it is not a note file ({reason})")]
    NotANote { id: NoteId, reason: String },
    /// The file names another id in its frontmatter.
    #[error("note {id} cannot be encrypted: its file names the id {found}")]
    OtherId { id: NoteId, found: NoteId },
    /// The user id is empty or holds a 0x00 byte.
    #[error("the account's user id {0:?} cannot be bound into a ciphertext")]
    UserId(String),
    /// A note file of 4 GiB or more.
    #[error("note {0} is too large to encrypt")]
    TooLarge(NoteId),
    #[error(transparent)]
    Randomness(#[from] RandomnessError),
}

/// Why a body is not the envelope a change or manifest entry says it is. The server's check
/// and the first step of a client's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// Not an envelope at all: no frontmatter, a header that is not exactly the envelope's,
    /// a body that is not base64.
    #[error("the body is not an encrypted note envelope: {0}")]
    NotAnEnvelope(String),
    /// An envelope version this program does not know.
    #[error("the envelope is of version {0}, newer than this program knows")]
    UnsupportedVersion(u32),
    /// The envelope is another note's.
    #[error("the envelope belongs to note {found}, not to this one")]
    OtherId { found: NoteId },
    /// The envelope's keyed hash is not the one listed for it.
    #[error("the envelope's hash is not the hash listed for it")]
    HashMismatch,
    /// Shorter than the smallest sealed note.
    #[error("the envelope's ciphertext is truncated ({len} bytes)")]
    Truncated { len: usize },
    /// The sealed bytes do not match their checksum: damaged in storage or in transit.
    #[error("the envelope's ciphertext does not match its checksum: it was damaged")]
    Checksum,
}

/// Why a client refused an encrypted note. Nothing of a refused note is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// Sealed under another account key: one being rotated in, or another account's.
    #[error("the note is encrypted under another key ({found}); this machine has key {have}")]
    OtherKey { found: KeyId, have: KeyId },
    /// The AEAD refused it: altered, or made for another note, scope or account.
    #[error(
        "the note's ciphertext does not authenticate: it was altered, or made for another note, scope or account"
    )]
    Forged,
    /// It authenticated, but its payload breaks the format: a faulty writer.
    #[error("the note's decrypted payload is malformed: {0}")]
    Payload(String),
    /// The plaintext is not a note file.
    #[error("the decrypted note is not a note file: {0}")]
    NotANote(String),
    /// The note inside is not the note the opaque id stands for.
    #[error("the decrypted note is {found}, which is not the note this id stands for")]
    InnerId { found: NoteId },
    /// The note inside does not hash to the keyed hash listed for it.
    #[error("the decrypted note does not match its listed hash")]
    HashMismatch,
}

/// The envelope's header, in its one key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    id: String,
    summary: String,
    tags: Vec<String>,
    e2ee: u32,
    kid: String,
    hash: String,
    sum: String,
}

/// An envelope read from a body, its fields checked for shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub id: NoteId,
    pub kid: KeyId,
    /// The keyed hash it claims.
    pub hash: ContentHash,
    /// Its version: which payload format and associated data the sealed bytes use.
    pub version: u32,
    /// The SHA-256 of the sealed bytes it claims.
    sum: String,
    sealed: Vec<u8>,
}

impl Envelope {
    /// Reads an envelope. Only the exact bytes [`Envelope::to_file`] writes are accepted.
    pub fn parse(body: &str) -> Result<Self, EnvelopeError> {
        let bad = |why: &str| EnvelopeError::NotAnEnvelope(why.to_owned());
        let rest = body
            .strip_prefix("---\n")
            .ok_or_else(|| bad("no frontmatter"))?;
        let (line, b64) = rest
            .split_once("\n---\n")
            .ok_or_else(|| bad("the frontmatter is not closed"))?;
        let header: Header = serde_json::from_str(line)
            .map_err(|e| EnvelopeError::NotAnEnvelope(format!("header: {e}")))?;
        if !ENVELOPE_VERSIONS.contains(&header.e2ee) {
            return Err(EnvelopeError::UnsupportedVersion(header.e2ee));
        }
        let id = NoteId::new(&header.id).map_err(|e| bad(&e.to_string()))?;
        let kid = KeyId::parse(&header.kid).ok_or_else(|| bad("`kid` is not a key id"))?;
        let hash = ContentHash::parse(&header.hash).ok_or_else(|| bad("`hash` is not a hash"))?;
        if ContentHash::parse(&header.sum).is_none() {
            return Err(bad("`sum` is not a SHA-256"));
        }
        let sealed = BASE64
            .decode(b64)
            .map_err(|_| bad("the ciphertext is not base64"))?;
        let env = Envelope {
            id,
            kid,
            hash,
            version: header.e2ee,
            sum: header.sum,
            sealed,
        };
        // The base64 decoder is strict (one encoding per byte string: no whitespace, canonical
        // padding and trailing bits), so a header in its one form makes the whole body the
        // one [`Envelope::to_file`] writes. The sealed bytes are public (the server stores
        // them), so their encoding need not be constant-time, unlike the key blobs'.
        if env.header_line() != line {
            return Err(bad("not in the envelope's canonical form"));
        }
        if env.sealed.len() < MIN_SEALED {
            return Err(EnvelopeError::Truncated {
                len: env.sealed.len(),
            });
        }
        if sha256_hex(&env.sealed) != env.sum {
            return Err(EnvelopeError::Checksum);
        }
        Ok(env)
    }

    /// The header's JSON line, as `serde_json` writes [`Header`]: every value is made of
    /// characters JSON writes as they are (a note id's, a key id's, lowercase hex), so the
    /// line is written directly.
    fn header_line(&self) -> String {
        format!(
            r#"{{"id":"{}","summary":"","tags":[],"e2ee":{},"kid":"{}","hash":"{}","sum":"{}"}}"#,
            self.id, self.version, self.kid, self.hash, self.sum
        )
    }

    /// The envelope as a note file.
    pub fn to_file(&self) -> String {
        let line = self.header_line();
        let start = 4 + line.len() + 5;
        let mut out = String::with_capacity(start + self.sealed.len().div_ceil(3) * 4);
        out.push_str("---\n");
        out.push_str(&line);
        out.push_str("\n---\n");
        BASE64.encode_string(&self.sealed, &mut out);
        out
    }
}

/// The server's check of a put to an encrypted scope, in place of the note parse and content
/// hash it cannot do: `body` is an envelope of note `id` claiming `hash`, intact.
pub fn verify_envelope_file(
    id: &NoteId,
    hash: &ContentHash,
    body: &str,
) -> Result<Envelope, EnvelopeError> {
    let env = Envelope::parse(body)?;
    if env.id != *id {
        return Err(EnvelopeError::OtherId { found: env.id });
    }
    if env.hash != *hash {
        return Err(EnvelopeError::HashMismatch);
    }
    Ok(env)
}

/// Padmé (Nikitin et al., PETS 2019): `len` rounded up so that only its top bits vary.
pub fn padded_len(len: usize) -> usize {
    if len < 2 {
        return len;
    }
    let e = usize::BITS - 1 - len.leading_zeros(); // floor(log2 len)
    let s = u32::BITS - e.leading_zeros(); // floor(log2 e) + 1
    let mask = (1usize << (e - s)) - 1;
    (len + mask) & !mask
}

/// The length of the longest envelope [`seal_note`] writes for a note whose id is `id_len`
/// bytes and file `file_len` bytes (that of a file stored without compression; a file that
/// compresses makes a shorter one): what a server's body limit must allow for an encrypted
/// scope.
pub fn envelope_len(id_len: usize, file_len: usize) -> usize {
    // The header's fields have fixed lengths: a 32-symbol opaque id, a 16-symbol key id and
    // two 64-character hashes.
    const HEADER: usize = "---\n{\"id\":\"\",\"summary\":\"\",\"tags\":[],\"e2ee\":2,\"kid\":\"\",\"hash\":\"\",\"sum\":\"\"}\n---\n".len()
        + 32
        + 16
        + 64
        + 64;
    let payload = PAYLOAD_HEAD + id_len + payload_tail(ENVELOPE_VERSION) + file_len;
    let sealed = NONCE_BYTES + padded_len(payload) + TAG_BYTES;
    HEADER + sealed.div_ceil(3) * 4
}

/// The label that opens a note's associated data in envelope version `version`.
pub fn note_aad_label(version: u32) -> String {
    format!("memoria e2ee v{version} note")
}

pub(super) fn note_aad(
    version: u32,
    kid: &KeyId,
    ctx: &NoteContext<'_>,
    opaque: &NoteId,
) -> Vec<u8> {
    let scope = ctx.scope.to_string();
    [
        note_aad_label(version).as_str(),
        kid.as_str(),
        ctx.user_id,
        &scope,
        opaque.as_str(),
    ]
    .join("\0")
    .into_bytes()
}

pub(super) fn cipher(keys: &AccountKeys) -> XChaCha20Poly1305 {
    XChaCha20Poly1305::new_from_slice(keys.note.as_ref()).expect("32-byte key")
}

/// Seals note `id` (the note file `file`, numbered `seq`) for upload, with a fresh nonce.
pub fn seal_note<R: rand_core::TryCryptoRng + ?Sized>(
    keys: &AccountKeys,
    ctx: NoteContext<'_>,
    id: &NoteId,
    file: &str,
    seq: u64,
    rng: &mut R,
) -> Result<SealedNote, SealError> {
    let mut nonce = [0u8; NONCE_BYTES];
    fill(rng, &mut nonce)?;
    seal_note_with_nonce(keys, ctx, id, file, seq, nonce, ENVELOPE_VERSION)
}

/// [`seal_note`] for the file `file` the caller serialized from a note it holds, whose
/// sync-form content hash (`ContentHash::of_synced_note`) is `plain_hash`: the file is not
/// parsed again. The caller vouches for the two agreeing; a machine opening the envelope checks
/// the note inside against its keyed hash and refuses it if they do not.
pub fn seal_serialized<R: rand_core::TryCryptoRng + ?Sized>(
    keys: &AccountKeys,
    ctx: NoteContext<'_>,
    id: &NoteId,
    file: &str,
    plain_hash: &ContentHash,
    seq: u64,
    rng: &mut R,
) -> Result<SealedNote, SealError> {
    debug_assert!(
        parse_note(id, file)
            .is_ok_and(|n| n.id == *id && ContentHash::of_synced_note(&n) == *plain_hash),
        "note {id}: the file sealed is not the note whose hash is given"
    );
    let mut nonce = [0u8; NONCE_BYTES];
    fill(rng, &mut nonce)?;
    seal_parts(
        keys,
        ctx,
        id,
        file,
        plain_hash.clone(),
        seq,
        nonce,
        ENVELOPE_VERSION,
    )
}

/// [`seal_note`] with the nonce and the envelope version given: for test vectors only, since
/// a nonce used twice under one key reveals the two plaintexts' difference.
pub fn seal_note_with_nonce(
    keys: &AccountKeys,
    ctx: NoteContext<'_>,
    id: &NoteId,
    file: &str,
    seq: u64,
    nonce: [u8; NONCE_BYTES],
    version: u32,
) -> Result<SealedNote, SealError> {
    let note = parse_note(id, file).map_err(|reason| SealError::NotANote {
        id: id.clone(),
        reason,
    })?;
    if note.id != *id {
        return Err(SealError::OtherId {
            id: id.clone(),
            found: note.id,
        });
    }
    let plain_hash = ContentHash::of_synced_note(&note);
    seal_parts(keys, ctx, id, file, plain_hash, seq, nonce, version)
}

/// Seals note `id`'s file `file`, whose sync-form content hash is `plain_hash`.
#[allow(clippy::too_many_arguments)]
fn seal_parts(
    keys: &AccountKeys,
    ctx: NoteContext<'_>,
    id: &NoteId,
    file: &str,
    plain_hash: ContentHash,
    seq: u64,
    nonce: [u8; NONCE_BYTES],
    version: u32,
) -> Result<SealedNote, SealError> {
    assert!(
        ENVELOPE_VERSIONS.contains(&version),
        "envelope version {version} is not one this module writes"
    );
    if ctx.user_id.is_empty() || ctx.user_id.contains('\0') {
        return Err(SealError::UserId(ctx.user_id.to_owned()));
    }
    let file_len = u32::try_from(file.len()).map_err(|_| SealError::TooLarge(id.clone()))?;
    let hash = keyed_hash(keys, ctx.scope, &plain_hash);
    let opaque_id = opaque_note_id(keys, ctx.scope, id);

    let id_bytes = id.as_str().as_bytes();
    // The sealed bytes are built in one buffer: the nonce, the payload (compressed into place),
    // then encrypted in place and the tag appended.
    let head = PAYLOAD_HEAD + id_bytes.len() + payload_tail(version);
    let room = match version {
        1 => file.len(),
        _ => lz4_flex::block::get_maximum_output_size(file.len()).max(file.len()),
    };
    let mut sealed = Vec::with_capacity(NONCE_BYTES + padded_len(head + room) + TAG_BYTES);
    sealed.extend_from_slice(&nonce);
    sealed.extend_from_slice(&seq.to_be_bytes());
    sealed.push(id_bytes.len() as u8); // ids are at most 128 bytes
    sealed.extend_from_slice(id_bytes);
    sealed.extend_from_slice(&file_len.to_be_bytes());
    if version == 1 {
        sealed.extend_from_slice(file.as_bytes());
    } else {
        // Version 2 stores the file LZ4-compressed when that is shorter. Padding comes after,
        // so the size class is the compressed size's.
        let at = NONCE_BYTES + head;
        sealed.resize(at + room, 0);
        let stored = match lz4_flex::block::compress_into(file.as_bytes(), &mut sealed[at..]) {
            Ok(n) if n < file.len() => n,
            _ => {
                sealed[at..at + file.len()].copy_from_slice(file.as_bytes());
                file.len()
            }
        };
        sealed.truncate(at + stored);
        let codec = if stored < file.len() {
            CODEC_LZ4
        } else {
            CODEC_STORED
        };
        sealed[at - 5] = codec;
        // Never longer than the file, whose length fits a u32.
        sealed[at - 4..at].copy_from_slice(&(stored as u32).to_be_bytes());
    }
    let used = sealed.len() - NONCE_BYTES;
    sealed.resize(NONCE_BYTES + padded_len(used), 0);

    let aad = note_aad(version, &keys.kid, &ctx, &opaque_id);
    let tag = cipher(keys)
        .encrypt_inout_detached(
            &XNonce::from(nonce),
            &aad,
            (&mut sealed[NONCE_BYTES..]).into(),
        )
        .map_err(|_| SealError::TooLarge(id.clone()))?;
    sealed.extend_from_slice(&tag);
    let body = Envelope {
        id: opaque_id.clone(),
        kid: keys.kid.clone(),
        hash: hash.clone(),
        version,
        sum: sha256_hex(&sealed),
        sealed,
    }
    .to_file();
    Ok(SealedNote {
        opaque_id,
        hash,
        plain_hash,
        body,
    })
}

fn parse_note(id: &NoteId, file: &str) -> Result<Note, String> {
    let name = id.file_name();
    Note::parse(
        file,
        FileContext {
            relative_path: &name,
        },
    )
    .map_err(|e| e.to_string())
}

/// Opens the envelope `body` listed as note `listed_id` with keyed hash `listed_hash`, and
/// checks everything a client checks before it writes a note: the envelope, the key, the
/// binding to this account, scope and note, the payload, the note file, its id and its hash.
pub fn open_note(
    keys: &AccountKeys,
    ctx: NoteContext<'_>,
    listed_id: &NoteId,
    listed_hash: &ContentHash,
    body: &str,
) -> Result<OpenedNote, OpenError> {
    let env = verify_envelope_file(listed_id, listed_hash, body)?;
    if env.kid != keys.kid {
        return Err(OpenError::OtherKey {
            found: env.kid,
            have: keys.kid.clone(),
        });
    }
    let aad = note_aad(env.version, &keys.kid, &ctx, &env.id);
    let mut sealed = env.sealed;
    // Parsing checked there is a whole nonce and tag.
    let (nonce, rest) = sealed.split_at_mut(NONCE_BYTES);
    let (payload, tag) = rest.split_at_mut(rest.len() - TAG_BYTES);
    let nonce = XNonce::try_from(&*nonce).expect("a whole nonce");
    let tag = Tag::try_from(&*tag).expect("a whole tag");
    cipher(keys)
        .decrypt_inout_detached(&nonce, &aad, payload.into(), &tag)
        .map_err(|_| OpenError::Forged)?;
    let payload = &sealed[NONCE_BYTES..sealed.len() - TAG_BYTES];

    let (seq, id, text) = read_payload(env.version, payload).map_err(OpenError::Payload)?;
    if opaque_note_id(keys, ctx.scope, &id) != env.id {
        return Err(OpenError::InnerId { found: id });
    }
    let note = parse_note(&id, &text).map_err(OpenError::NotANote)?;
    if note.id != id {
        return Err(OpenError::InnerId { found: note.id });
    }
    let plain_hash = ContentHash::of_synced_note(&note);
    if keyed_hash(keys, ctx.scope, &plain_hash) != env.hash {
        return Err(OpenError::HashMismatch);
    }
    Ok(OpenedNote {
        id,
        text,
        note,
        seq,
        plain_hash,
    })
}

fn read_payload(version: u32, p: &[u8]) -> Result<(u64, NoteId, String), String> {
    let seq = u64::from_be_bytes(p.get(..8).ok_or("no sequence number")?.try_into().unwrap());
    let id_len = usize::from(*p.get(8).ok_or("no id length")?);
    let id = p.get(9..9 + id_len).ok_or("the id is cut short")?;
    let id = std::str::from_utf8(id)
        .ok()
        .and_then(|s| NoteId::new(s).ok())
        .ok_or("the id is not a note id")?;
    let at = 9 + id_len;
    let u32_at = |at: usize, what: &str| -> Result<usize, String> {
        let b = p.get(at..at + 4).ok_or_else(|| format!("no {what}"))?;
        Ok(u32::from_be_bytes(b.try_into().unwrap()) as usize)
    };
    let file_len = u32_at(at, "file length")?;
    let (codec, stored_at, stored_len) = if version == 1 {
        (CODEC_STORED, at + 4, file_len)
    } else {
        let codec = *p.get(at + 4).ok_or("no codec")?;
        (codec, at + 9, u32_at(at + 5, "stored length")?)
    };
    let end = stored_at
        .checked_add(stored_len)
        .ok_or("the stored length overflows")?;
    let stored = p.get(stored_at..end).ok_or("the file is cut short")?;
    if p.len() != padded_len(end) || p[end..].iter().any(|&b| b != 0) {
        return Err("the padding is not the format's".into());
    }
    let file = match codec {
        CODEC_STORED if stored_len == file_len => stored.to_vec(),
        CODEC_STORED => return Err("a stored file's two lengths differ".into()),
        CODEC_LZ4 => {
            if file_len > stored_len.saturating_mul(LZ4_MAX_RATIO) {
                return Err("the file length is more than the LZ4 block can hold".into());
            }
            let file = lz4_flex::block::decompress(stored, file_len)
                .map_err(|e| format!("the LZ4 block does not decode: {e}"))?;
            if file.len() != file_len {
                return Err("the LZ4 block decodes to another length than the file's".into());
            }
            file
        }
        other => return Err(format!("unknown codec {other}")),
    };
    let text = String::from_utf8(file).map_err(|_| "the file is not UTF-8")?;
    Ok((seq, id, text))
}
