//! The encrypted forms: round trips, every refusal, and the test vectors of `docs/PROTOCOL.md`.

use base64ct::{Base64, Encoding};
use chacha20poly1305::XNonce;
use chacha20poly1305::aead::{Aead, Payload};
use proptest::prelude::*;
use rand_core::OsRng;

use super::envelope::{
    ENVELOPE_VERSION, Envelope, NONCE_BYTES, TAG_BYTES, cipher, envelope_len, note_aad, padded_len,
    seal_note_with_nonce,
};
use super::wrap::{RewrapError, WrapKind};
use super::*;
use crate::hash::{ContentHash, sha256_hex};
use crate::id::NoteId;
use crate::note::{FileContext, Note};
use crate::protocol::{ProjectId, Scope, verify_note_file};

fn key(byte: u8) -> AccountKeys {
    AccountKey::from_bytes([byte; 32]).derive()
}

fn id(s: &str) -> NoteId {
    NoteId::new(s).unwrap()
}

fn project(s: &str) -> Scope {
    Scope::Project(ProjectId::new(s).unwrap())
}

const USER: Scope = Scope::User;

fn ctx<'a>(user_id: &'a str, scope: &'a Scope) -> NoteContext<'a> {
    NoteContext { user_id, scope }
}

fn file(note_id: &str, body: &str) -> String {
    Note::new(id(note_id), format!("Summary of {note_id}"), body).serialize()
}

fn sealed(keys: &AccountKeys, scope: &Scope, note_id: &str, body: &str) -> SealedNote {
    seal_note(
        keys,
        ctx("alice", scope),
        &id(note_id),
        &file(note_id, body),
        7,
        &mut OsRng,
    )
    .unwrap()
}

fn open(keys: &AccountKeys, scope: &Scope, s: &SealedNote) -> Result<OpenedNote, OpenError> {
    open_note(keys, ctx("alice", scope), &s.opaque_id, &s.hash, &s.body)
}

/// The body's sealed bytes, changed by `edit`, written back with a checksum that matches them:
/// what someone who can write the store and wants to pass the server's check would do.
fn resealed(body: &str, edit: impl FnOnce(&mut Vec<u8>)) -> String {
    let (head, b64) = body.rsplit_once("\n---\n").unwrap();
    let mut bytes = Base64::decode_vec(b64).unwrap();
    let old_sum = sha256_hex(&bytes);
    edit(&mut bytes);
    let head = head.replace(&old_sum, &sha256_hex(&bytes));
    format!("{head}\n---\n{}", Base64::encode_string(&bytes))
}

/// The body's sealed bytes changed by `edit`, the checksum left alone: damage in storage.
fn damaged(body: &str, edit: impl FnOnce(&mut Vec<u8>)) -> String {
    let (head, b64) = body.rsplit_once("\n---\n").unwrap();
    let mut bytes = Base64::decode_vec(b64).unwrap();
    edit(&mut bytes);
    format!("{head}\n---\n{}", Base64::encode_string(&bytes))
}

/// The header's `field` set to `value`.
fn with_header(body: &str, field: &str, value: &str) -> String {
    let (head, b64) = body.rsplit_once("\n---\n").unwrap();
    let json = head.strip_prefix("---\n").unwrap();
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    v[field] = serde_json::from_str(value).unwrap();
    format!("---\n{}\n---\n{b64}", serde_json::to_string(&v).unwrap())
}

// ---------------------------------------------------------------------------------------------
// Keys

#[test]
fn subkeys_are_distinct_and_the_debug_form_hides_them() {
    let k = key(1);
    let all = [&k.note, &k.id, &k.hash];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a.as_ref(), b.as_ref());
        }
        assert_ne!(a.as_ref(), &[1u8; 32]);
    }
    assert_eq!(k.key_id(), key(1).key_id(), "derivation is deterministic");
    assert_ne!(k.key_id(), key(2).key_id());
    assert!(KeyId::parse(k.key_id().as_str()).is_some());
    let shown = format!("{:?} {:?}", AccountKey::from_bytes([1; 32]), k);
    assert!(shown.contains(k.key_id().as_str()), "{shown}");
    assert!(!shown.contains("1, 1"), "{shown}");
    let fresh = AccountKey::generate(&mut OsRng).unwrap();
    assert_ne!(
        fresh.derive().key_id(),
        AccountKey::generate(&mut OsRng).unwrap().derive().key_id()
    );
}

#[test]
fn key_ids_are_checked_for_shape() {
    assert!(KeyId::parse("0123456789abcdef").is_some());
    for bad in [
        "",
        "0123456789abcde",
        "0123456789abcdefg",
        "0123456789ABCDEF",
        "0123456789abcdeu",
    ] {
        assert!(KeyId::parse(bad).is_none(), "{bad}");
    }
}

#[test]
fn a_failing_generator_is_a_typed_error() {
    struct Broken;
    impl rand_core::TryRngCore for Broken {
        type Error = std::io::Error;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            Err(std::io::Error::other("no entropy"))
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Err(std::io::Error::other("no entropy"))
        }
        fn try_fill_bytes(&mut self, _: &mut [u8]) -> Result<(), Self::Error> {
            Err(std::io::Error::other("no entropy"))
        }
    }
    impl rand_core::TryCryptoRng for Broken {}
    assert!(
        matches!(AccountKey::generate(&mut Broken), Err(RandomnessError(m)) if m.contains("no entropy"))
    );
    assert!(RecoveryKey::generate(&mut Broken).is_err());
    let k = key(1);
    assert!(matches!(
        seal_note(
            &k,
            ctx("alice", &USER),
            &id("a"),
            &file("a", "x"),
            1,
            &mut Broken
        ),
        Err(SealError::Randomness(_))
    ));
    assert!(matches!(
        WrappedKey::with_passphrase(
            &AccountKey::from_bytes([1; 32]),
            "pw",
            KdfParams::MIN,
            &mut Broken
        ),
        Err(WrapError::Randomness(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// Opaque ids and keyed hashes

/// The sync server's rule for a segment of an object key (`check_key` in the server's store).
fn valid_key_segment(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[test]
fn opaque_ids_are_valid_stable_and_unlinkable() {
    let k = key(1);
    let a = opaque_note_id(&k, &USER, &id("pricing-borderless-3fa"));
    assert_eq!(a.as_str().len(), 32);
    assert!(NoteId::new(a.as_str()).is_ok());
    assert!(valid_key_segment(a.as_str()));
    assert_eq!(
        a,
        opaque_note_id(&key(1), &USER, &id("pricing-borderless-3fa")),
        "stable"
    );
    let others = [
        opaque_note_id(&k, &USER, &id("pricing-borderless-3fb")),
        opaque_note_id(&k, &project("p1"), &id("pricing-borderless-3fa")),
        opaque_note_id(&key(2), &USER, &id("pricing-borderless-3fa")),
    ];
    for o in &others {
        assert_ne!(&a, o);
    }
    let p = opaque_project_id(&k, &ProjectId::new("memoria").unwrap());
    assert_eq!(p.as_str().len(), 32);
    assert!(valid_key_segment(p.as_str()));
    let wire = opaque_scope(&k, &project("memoria"));
    assert_eq!(Scope::parse(&wire.to_string()).unwrap(), wire);
    assert_eq!(opaque_scope(&k, &USER), USER);
    assert!(!wire.to_string().contains("memoria"));
}

#[test]
fn keyed_hashes_have_the_content_hash_shape_and_hide_it() {
    let k = key(1);
    let plain = ContentHash::of_parts("a", "b", None, &[], "");
    let keyed = keyed_hash(&k, &USER, &plain);
    assert_eq!(ContentHash::parse(keyed.as_str()), Some(keyed.clone()));
    assert_ne!(keyed, plain);
    assert_eq!(
        keyed,
        keyed_hash(&key(1), &USER, &plain),
        "stable across machines"
    );
    assert_ne!(keyed, keyed_hash(&k, &project("p"), &plain));
    assert_ne!(keyed, keyed_hash(&key(2), &USER, &plain));
}

// ---------------------------------------------------------------------------------------------
// Wrapping

#[test]
fn passphrase_wrap_round_trip_wrong_passphrase_and_rewrap() {
    let ak = AccountKey::from_bytes([9; 32]);
    let blob =
        WrappedKey::with_passphrase(&ak, "correct horse", KdfParams::MIN, &mut OsRng).unwrap();
    assert_eq!(blob.kind(), WrapKind::Passphrase);
    assert_eq!(blob.kdf_params(), Some(KdfParams::MIN));
    assert_eq!(blob.key_id().as_ref(), Some(ak.derive().key_id()));
    let stored = WrappedKey::from_json(&blob.to_json()).unwrap();
    assert_eq!(stored, blob);
    let back = stored.unwrap_with_passphrase("correct horse").unwrap();
    assert_eq!(back.as_bytes(), ak.as_bytes());
    assert_eq!(
        stored.unwrap_with_passphrase("correct horsE").unwrap_err(),
        UnwrapError::WrongPassphrase
    );
    assert_eq!(
        stored.unwrap_with_passphrase("").unwrap_err(),
        UnwrapError::WrongPassphrase
    );
    // A new passphrase: the same account key, the old passphrase no longer opens it.
    let new = blob
        .rewrap(
            "correct horse",
            "battery staple",
            KdfParams::MIN,
            &mut OsRng,
        )
        .unwrap();
    assert_eq!(new.key_id(), blob.key_id());
    assert_eq!(
        new.unwrap_with_passphrase("battery staple")
            .unwrap()
            .as_bytes(),
        ak.as_bytes()
    );
    assert_eq!(
        new.unwrap_with_passphrase("correct horse").unwrap_err(),
        UnwrapError::WrongPassphrase
    );
    assert!(matches!(
        blob.rewrap("wrong", "battery staple", KdfParams::MIN, &mut OsRng),
        Err(RewrapError::Unwrap(UnwrapError::WrongPassphrase))
    ));
    assert!(matches!(
        blob.rewrap("correct horse", "", KdfParams::MIN, &mut OsRng),
        Err(RewrapError::Wrap(WrapError::EmptyPassphrase))
    ));
    // Fresh salt and nonce every time.
    let again =
        WrappedKey::with_passphrase(&ak, "correct horse", KdfParams::MIN, &mut OsRng).unwrap();
    assert_ne!(again.to_json(), blob.to_json());
}

#[test]
fn passphrases_are_compared_in_one_unicode_form() {
    let ak = AccountKey::from_bytes([3; 32]);
    let composed = "caf\u{e9} 定价";
    let decomposed = "cafe\u{301} 定价";
    let blob = WrappedKey::with_passphrase(&ak, composed, KdfParams::MIN, &mut OsRng).unwrap();
    assert_eq!(
        blob.unwrap_with_passphrase(decomposed).unwrap().as_bytes(),
        ak.as_bytes()
    );
}

#[test]
fn wrap_refuses_bad_inputs() {
    let ak = AccountKey::from_bytes([3; 32]);
    assert_eq!(
        WrappedKey::with_passphrase(&ak, "", KdfParams::MIN, &mut OsRng).unwrap_err(),
        WrapError::EmptyPassphrase
    );
    for params in [
        KdfParams {
            m_kib: 1024,
            ..KdfParams::MIN
        },
        KdfParams {
            t: 0,
            ..KdfParams::MIN
        },
        KdfParams {
            t: 17,
            ..KdfParams::MIN
        },
        KdfParams {
            p: 0,
            ..KdfParams::MIN
        },
        KdfParams {
            m_kib: 2 * 1024 * 1024,
            ..KdfParams::MIN
        },
    ] {
        assert!(
            matches!(
                WrappedKey::with_passphrase(&ak, "pw", params, &mut OsRng),
                Err(WrapError::Params { .. })
            ),
            "{params:?}"
        );
    }
    assert!(
        KdfParams::DEFAULT.accepted() && KdfParams::MIN.accepted() && KdfParams::MAX.accepted()
    );
}

#[test]
fn damaged_or_foreign_blobs_are_typed_errors() {
    let ak = AccountKey::from_bytes([4; 32]);
    let blob = WrappedKey::with_passphrase(&ak, "pw", KdfParams::MIN, &mut OsRng).unwrap();
    let json: serde_json::Value = serde_json::from_str(&blob.to_json()).unwrap();
    let edit = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = json.clone();
        f(&mut v);
        WrappedKey::from_json(&v.to_string()).and_then(|b| b.unwrap_with_passphrase("pw"))
    };
    assert_eq!(
        edit(&|v| v["v"] = 2.into()).unwrap_err(),
        UnwrapError::UnsupportedVersion(2)
    );
    assert!(matches!(
        edit(&|v| v["extra"] = 1.into()).unwrap_err(),
        UnwrapError::Malformed(_)
    ));
    assert!(matches!(
        edit(&|v| v["nonce"] = "!!".into()).unwrap_err(),
        UnwrapError::Malformed(_)
    ));
    assert!(matches!(
        edit(&|v| v["salt"] = "AAAA".into()).unwrap_err(),
        UnwrapError::Malformed(_)
    ));
    assert!(matches!(
        edit(&|v| v["kid"] = "x".into()).unwrap_err(),
        UnwrapError::Malformed(_)
    ));
    assert!(matches!(
        edit(&|v| v["kdf"]["alg"] = "scrypt".into()).unwrap_err(),
        UnwrapError::UnsupportedKdf(_)
    ));
    assert_eq!(
        edit(&|v| v["kdf"]["m"] = (4u32 << 20).into()).unwrap_err(),
        UnwrapError::ParamsOutOfRange {
            m: 4 << 20,
            t: 1,
            p: 1
        }
    );
    // Costs changed within the range, another key id, a changed ciphertext: none opens.
    assert_eq!(
        edit(&|v| v["kdf"]["t"] = 2.into()).unwrap_err(),
        UnwrapError::WrongPassphrase
    );
    let other_kid = AccountKey::from_bytes([5; 32])
        .derive()
        .key_id()
        .to_string();
    assert_eq!(
        edit(&|v| v["kid"] = other_kid.clone().into()).unwrap_err(),
        UnwrapError::WrongPassphrase
    );
    let mut ct = Base64::decode_vec(json["ct"].as_str().unwrap()).unwrap();
    ct[0] ^= 1;
    let ct = Base64::encode_string(&ct);
    assert_eq!(
        edit(&|v| v["ct"] = ct.clone().into()).unwrap_err(),
        UnwrapError::WrongPassphrase
    );
    assert!(matches!(
        WrappedKey::from_json("not json"),
        Err(UnwrapError::Malformed(_))
    ));
}

#[test]
fn recovery_key_round_trip_typos_and_wrong_keys() {
    let ak = AccountKey::from_bytes([6; 32]);
    let rk = RecoveryKey::generate(&mut OsRng).unwrap();
    let text = rk.to_text();
    let groups: Vec<&str> = text.split('-').collect();
    assert_eq!(groups.len(), 14);
    assert!(groups.iter().all(|g| {
        g.len() == 4
            && g.chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
    }));
    assert!(!format!("{rk:?}").contains(groups[0]));
    // Read back as a person may type it.
    assert_eq!(RecoveryKey::parse(&text).unwrap(), rk);
    let sloppy = format!(
        "  {}  ",
        text.to_lowercase()
            .replace('-', " ")
            .replace('0', "o")
            .replace('1', "l")
    );
    assert_eq!(RecoveryKey::parse(&sloppy).unwrap(), rk);
    assert_eq!(RecoveryKey::parse(&text.replace('-', "")).unwrap(), rk);
    // Every single-symbol typo is caught before anything is tried.
    let bare: Vec<char> = text.chars().filter(|&c| c != '-').collect();
    for i in 0..bare.len() {
        let mut typo = bare.clone();
        typo[i] = if typo[i] == 'X' { 'Y' } else { 'X' };
        let typo: String = typo.into_iter().collect();
        assert_eq!(
            RecoveryKey::parse(&typo).unwrap_err(),
            RecoveryKeyError::Checksum,
            "at {i}"
        );
    }
    // Two neighbours swapped.
    let mut swapped = bare.clone();
    let j = (0..bare.len() - 1)
        .find(|&j| bare[j] != bare[j + 1])
        .unwrap();
    swapped.swap(j, j + 1);
    assert_eq!(
        RecoveryKey::parse(&swapped.into_iter().collect::<String>()).unwrap_err(),
        RecoveryKeyError::Checksum
    );
    assert_eq!(
        RecoveryKey::parse(&text[..text.len() - 5]).unwrap_err(),
        RecoveryKeyError::WrongLength { got: 52 }
    );
    assert_eq!(
        RecoveryKey::parse(&format!("{}-ABCD", text.as_str())).unwrap_err(),
        RecoveryKeyError::WrongLength { got: 60 }
    );
    assert_eq!(
        RecoveryKey::parse(&format!("U{}", &text[1..])).unwrap_err(),
        RecoveryKeyError::BadCharacter {
            position: 1,
            character: 'U'
        }
    );
    assert_eq!(
        RecoveryKey::parse("ABCD-EFGH-?").unwrap_err(),
        RecoveryKeyError::BadCharacter {
            position: 11,
            character: '?'
        }
    );
    // It unwraps the same account key as the passphrase; another recovery key does not.
    let blob = WrappedKey::with_recovery_key(&ak, &rk, &mut OsRng).unwrap();
    let stored = WrappedKey::from_json(&blob.to_json()).unwrap();
    assert_eq!(stored.kind(), WrapKind::Recovery);
    assert_eq!(
        stored.unwrap_with_recovery_key(&rk).unwrap().as_bytes(),
        ak.as_bytes()
    );
    let other = RecoveryKey::generate(&mut OsRng).unwrap();
    assert_eq!(
        stored.unwrap_with_recovery_key(&other).unwrap_err(),
        UnwrapError::WrongRecoveryKey
    );
    assert!(matches!(
        stored.unwrap_with_passphrase("pw").unwrap_err(),
        UnwrapError::WrongKind { .. }
    ));
    let pass = WrappedKey::with_passphrase(&ak, "pw", KdfParams::MIN, &mut OsRng).unwrap();
    assert!(matches!(
        pass.unwrap_with_recovery_key(&rk).unwrap_err(),
        UnwrapError::WrongKind { .. }
    ));
}

// ---------------------------------------------------------------------------------------------
// Envelopes

#[test]
fn notes_round_trip_through_their_envelope() {
    let k = key(1);
    for scope in [USER, project("p1")] {
        for body in ["", "one line\n", "línea\r\n第二行\n", &"x".repeat(100_000)] {
            let s = sealed(&k, &scope, "pricing-borderless-3fa", body);
            let opened = open(&k, &scope, &s).unwrap();
            assert_eq!(opened.id, id("pricing-borderless-3fa"));
            assert_eq!(opened.text, file("pricing-borderless-3fa", body));
            assert_eq!(opened.note.body, body);
            assert_eq!(opened.seq, 7);
            assert_eq!(opened.plain_hash, s.plain_hash);
            assert_eq!(s.plain_hash, ContentHash::of_synced_note(&opened.note));
            assert_eq!(s.hash, keyed_hash(&k, &scope, &s.plain_hash));
            assert_eq!(s.opaque_id, opaque_note_id(&k, &scope, &opened.id));
            assert!(s.body.len() <= envelope_len(opened.id.as_str().len(), opened.text.len()));
        }
    }
}

/// A note sealed from the file its caller serialized, with the hash the caller computed, is
/// the envelope [`seal_note`] makes after parsing that file again.
#[test]
fn a_note_sealed_from_its_serialized_file_opens_like_one_parsed_again() {
    let k = key(1);
    let scope = project("p1");
    let note = Note::new(
        id("standup-notes-2c4"),
        "Summary of standup-notes-2c4",
        "at 9:30\r\nshort\n",
    );
    let text = note.serialize();
    let plain = ContentHash::of_synced_note(&note);
    let s = seal_serialized(
        &k,
        ctx("alice", &scope),
        &note.id,
        &text,
        &plain,
        7,
        &mut OsRng,
    )
    .unwrap();
    let parsed = sealed(&k, &scope, "standup-notes-2c4", "at 9:30\r\nshort\n");
    assert_eq!(
        (&s.opaque_id, &s.hash, &s.plain_hash),
        (&parsed.opaque_id, &parsed.hash, &parsed.plain_hash)
    );
    let opened = open(&k, &scope, &s).unwrap();
    assert_eq!(
        (opened.text, opened.plain_hash, opened.seq),
        (text, plain, 7)
    );
}

/// A hash that is not the file's is the caller's bug: caught where debug assertions are on.
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "is not the note whose hash is given")]
fn a_file_sealed_with_another_notes_hash_is_caught_in_debug_builds() {
    let k = key(1);
    let other = ContentHash::of_synced_note(&Note::new(id("a"), "A", "other\n"));
    let _ = seal_serialized(
        &k,
        ctx("alice", &USER),
        &id("a"),
        &file("a", "alpha\n"),
        &other,
        7,
        &mut OsRng,
    );
}

/// Seals note `note_id` in envelope version `version`, with a fresh nonce.
fn sealed_as(
    keys: &AccountKeys,
    scope: &Scope,
    note_id: &str,
    body: &str,
    version: u32,
) -> SealedNote {
    let mut nonce = [0u8; NONCE_BYTES];
    rand_core::TryRngCore::try_fill_bytes(&mut OsRng, &mut nonce).unwrap();
    seal_note_with_nonce(
        keys,
        ctx("alice", scope),
        &id(note_id),
        &file(note_id, body),
        7,
        nonce,
        version,
    )
    .unwrap()
}

#[test]
fn version_2_compresses_before_padding_and_version_1_still_opens() {
    let k = key(1);
    let prose = "A remembered fact, a line of text that comes back. ".repeat(80);
    // Nothing to gain: a short note is stored as it is, at the longest length.
    let short = sealed(&k, &USER, "a", "x\n");
    assert_eq!(short.body.len(), envelope_len(1, file("a", "x\n").len()));
    let v2 = sealed(&k, &USER, "a", &prose);
    let v1 = sealed_as(&k, &USER, "a", &prose, 1);
    assert!(v2.body.contains("\"e2ee\":2") && v1.body.contains("\"e2ee\":1"));
    assert!(
        v2.body.len() * 4 < v1.body.len(),
        "{} vs {}",
        v2.body.len(),
        v1.body.len()
    );
    // Both open to the same note, with the same opaque id and keyed hash.
    for s in [&v1, &v2] {
        let o = open(&k, &USER, s).unwrap();
        assert_eq!(o.text, file("a", &prose));
        assert_eq!((&s.opaque_id, &s.hash), (&v2.opaque_id, &v2.hash));
    }
    // The padded payload: compressed first, so its size class is the compressed size's.
    let (_, b64) = v2.body.rsplit_once("\n---\n").unwrap();
    let sealed_len = Base64::decode_vec(b64).unwrap().len();
    let stored = lz4_flex::block::compress(file("a", &prose).as_bytes()).len();
    assert_eq!(
        sealed_len,
        NONCE_BYTES + padded_len(9 + 1 + 9 + stored) + TAG_BYTES
    );
}

/// A version-2 payload: `codec` and `stored` as given, `file_len` declared.
fn payload_v2(note_id: &str, file_len: usize, codec: u8, stored: &[u8], pad: usize) -> Vec<u8> {
    let mut p = 3u64.to_be_bytes().to_vec();
    p.push(note_id.len() as u8);
    p.extend_from_slice(note_id.as_bytes());
    p.extend_from_slice(&(file_len as u32).to_be_bytes());
    p.push(codec);
    p.extend_from_slice(&(stored.len() as u32).to_be_bytes());
    p.extend_from_slice(stored);
    p.resize(pad, 0);
    p
}

#[test]
fn a_faulty_version_2_payload_is_refused_after_it_authenticates() {
    let k = key(1);
    let f = file("a", &"alpha ".repeat(50));
    let lz = lz4_flex::block::compress(f.as_bytes());
    let pad = |stored: usize| padded_len(19 + stored);
    // Well formed, stored or compressed: it opens up to the hash check (the helper's hash is
    // not a's).
    for ok in [
        payload_v2("a", f.len(), 0, f.as_bytes(), pad(f.len())),
        payload_v2("a", f.len(), 1, &lz, pad(lz.len())),
    ] {
        assert_eq!(
            open(&k, &USER, &seal_payload_as(&k, "a", &ok, 2)).unwrap_err(),
            OpenError::HashMismatch
        );
    }
    let mut garbled = lz.clone();
    garbled[0] = 0xff;
    for bad in [
        // An unknown codec.
        payload_v2("a", f.len(), 2, f.as_bytes(), pad(f.len())),
        // Stored, but the two lengths differ.
        payload_v2("a", f.len() + 1, 0, f.as_bytes(), pad(f.len())),
        // An LZ4 block that decodes to more, or less, than the declared length, or not at all.
        payload_v2("a", f.len() - 1, 1, &lz, pad(lz.len())),
        payload_v2("a", f.len() + 1, 1, &lz, pad(lz.len())),
        payload_v2("a", f.len(), 1, &garbled, pad(lz.len())),
        // A declared length no LZ4 block of that size can hold: refused before decoding.
        payload_v2("a", u32::MAX as usize, 1, &lz, pad(lz.len())),
        // Padding too short or not zero.
        payload_v2("a", f.len(), 1, &lz, 19 + lz.len()),
        {
            let mut p = payload_v2("a", f.len(), 1, &lz, pad(lz.len()));
            *p.last_mut().unwrap() = 1;
            p
        },
        // Cut before the codec or the stored length.
        payload_v2("a", f.len(), 1, &[], 19)[..15].to_vec(),
    ] {
        assert!(
            matches!(
                open(&k, &USER, &seal_payload_as(&k, "a", &bad, 2)).unwrap_err(),
                OpenError::Payload(_)
            ),
            "{bad:?}"
        );
    }
    // A version-1 payload sealed as version 2 is not one.
    let v1 = payload(3, "a", &f, padded_len(14 + f.len()));
    assert!(matches!(
        open(&k, &USER, &seal_payload_as(&k, "a", &v1, 2)).unwrap_err(),
        OpenError::Payload(_)
    ));
}

#[test]
fn an_envelope_reveals_no_plaintext_and_is_a_note_file_for_the_server() {
    let k = key(1);
    let s = sealed(&k, &USER, "secret-diagnosis", "the secret body words\n");
    for leak in [
        "secret",
        "diagnosis",
        "Summary",
        "body words",
        s.plain_hash.as_str(),
    ] {
        assert!(!s.body.contains(leak), "{leak} in {}", s.body);
    }
    // A note file whose id is the opaque id: the store's layout and the server's id check
    // hold; only the content hash check gives way to the envelope's.
    let note = Note::parse(
        &s.body,
        FileContext {
            relative_path: "x.md",
        },
    )
    .unwrap();
    assert_eq!(note.id, s.opaque_id);
    assert!(verify_note_file(&s.opaque_id, &s.hash, &s.body).is_err());
    let env = verify_envelope_file(&s.opaque_id, &s.hash, &s.body).unwrap();
    assert_eq!(env.to_file(), s.body);
    // Same note, same seq, fresh nonce: another ciphertext, the same id and hash.
    let again = sealed(&k, &USER, "secret-diagnosis", "the secret body words\n");
    assert_ne!(again.body, s.body);
    assert_eq!((again.opaque_id, again.hash), (s.opaque_id, s.hash));
}

#[test]
fn the_server_check_refuses_what_is_not_the_listed_envelope() {
    let k = key(1);
    let a = sealed(&k, &USER, "a", "alpha\n");
    let b = sealed(&k, &USER, "b", "beta\n");
    assert_eq!(
        verify_envelope_file(&b.opaque_id, &b.hash, &a.body).unwrap_err(),
        EnvelopeError::OtherId {
            found: a.opaque_id.clone()
        }
    );
    assert_eq!(
        verify_envelope_file(&a.opaque_id, &b.hash, &a.body).unwrap_err(),
        EnvelopeError::HashMismatch
    );
    let plain = file("a", "alpha\n");
    assert!(matches!(
        verify_envelope_file(&a.opaque_id, &a.hash, &plain).unwrap_err(),
        EnvelopeError::NotAnEnvelope(_)
    ));
    for bad in [
        String::new(),
        "no frontmatter".to_owned(),
        a.body.replace("\n---\n", "\n"),
        format!("{}\n", a.body),
        a.body.replace("\"summary\":\"\"", "\"summary\":\"x\""),
        with_header(&a.body, "extra", "1"),
        with_header(&a.body, "kid", "\"short\""),
        with_header(&a.body, "hash", "\"nothex\""),
        a.body.replace("\n---\n", "\n---\n!"),
    ] {
        assert!(
            matches!(Envelope::parse(&bad), Err(EnvelopeError::NotAnEnvelope(_))),
            "{bad:?}"
        );
    }
    assert_eq!(
        Envelope::parse(&with_header(&a.body, "e2ee", "3")).unwrap_err(),
        EnvelopeError::UnsupportedVersion(3)
    );
}

#[test]
fn only_the_one_spelling_of_an_envelope_is_taken() {
    let k = key(1);
    // A sealed length that is not a multiple of 3 leaves bits of the last symbol unused.
    let s = (0..)
        .map(|n| sealed(&k, &USER, "a", &"x".repeat(n)))
        .find(|s| s.body.ends_with('='))
        .unwrap();
    let (head, b64) = s.body.rsplit_once("\n---\n").unwrap();
    let at = b64.trim_end_matches('=').len() - 1;
    let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let i = alphabet.find(char::from(b64.as_bytes()[at])).unwrap();
    // The lowest bit of the last symbol is unused: the same bytes, spelt another way.
    let mut respelt = b64.to_owned();
    respelt.replace_range(at..=at, &alphabet[i ^ 1..=i ^ 1]);
    assert_eq!(
        base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            b64.trim_end_matches('=')
        )
        .ok()
        .map(|v| v.len()),
        None,
        "the decoder wants its padding"
    );
    let mid = b64.len() / 2;
    for bad in [
        format!("{head}\n---\n{respelt}"),
        format!("{head}\n---\n{b64}\n"),
        format!("{head}\n---\n{} {}", &b64[..mid], &b64[mid..]),
        format!("{head}\n---\n{}\n{}", &b64[..mid], &b64[mid..]),
        format!("{head}\n---\n{}", b64.trim_end_matches('=')),
        format!("{head} \n---\n{b64}"),
    ] {
        assert!(
            matches!(
                verify_envelope_file(&s.opaque_id, &s.hash, &bad).unwrap_err(),
                EnvelopeError::NotAnEnvelope(_)
            ),
            "{bad}"
        );
    }
    assert!(verify_envelope_file(&s.opaque_id, &s.hash, &s.body).is_ok());
}

#[test]
fn every_tampering_is_refused_with_its_reason() {
    let k = key(1);
    let scope_p = project("p1");
    let a = sealed(&k, &USER, "a", "alpha\n");
    let b = sealed(&k, &USER, "b", "beta\n");
    let open_as = |listed: &SealedNote, body: &str, scope: &Scope, user: &str| {
        open_note(&k, ctx(user, scope), &listed.opaque_id, &listed.hash, body)
    };

    // Swapped into another note: as it is, then with its header rewritten to pass the server.
    assert_eq!(
        open_as(&b, &a.body, &USER, "alice").unwrap_err(),
        OpenError::Envelope(EnvelopeError::OtherId {
            found: a.opaque_id.clone()
        })
    );
    let disguised = with_header(
        &with_header(&a.body, "id", &format!("{:?}", b.opaque_id.as_str())),
        "hash",
        &format!("{:?}", b.hash.as_str()),
    );
    assert!(verify_envelope_file(&b.opaque_id, &b.hash, &disguised).is_ok());
    assert_eq!(
        open_as(&b, &disguised, &USER, "alice").unwrap_err(),
        OpenError::Forged
    );

    // Moved to another scope under the same id, or to another account.
    assert_eq!(
        open_as(&a, &a.body, &scope_p, "alice").unwrap_err(),
        OpenError::Forged
    );
    assert_eq!(
        open_as(&a, &a.body, &USER, "bob").unwrap_err(),
        OpenError::Forged
    );
    assert!(matches!(
        open_note(&key(2), ctx("alice", &USER), &a.opaque_id, &a.hash, &a.body).unwrap_err(),
        OpenError::OtherKey { .. }
    ));
    // Another key id written into the header: refused, and not opened under either key.
    let kid2 = format!("{:?}", key(2).key_id().as_str());
    assert!(matches!(
        open_as(&a, &with_header(&a.body, "kid", &kid2), &USER, "alice").unwrap_err(),
        OpenError::OtherKey { .. }
    ));
    assert_eq!(
        open_note(
            &key(2),
            ctx("alice", &USER),
            &a.opaque_id,
            &a.hash,
            &with_header(&a.body, "kid", &kid2)
        )
        .unwrap_err(),
        OpenError::Forged
    );

    // A bit flipped in the nonce, the ciphertext or the tag; bytes cut off the end.
    let n = Base64::decode_vec(a.body.rsplit_once("\n---\n").unwrap().1)
        .unwrap()
        .len();
    for (what, at) in [
        ("nonce", 0),
        ("nonce", NONCE_BYTES - 1),
        ("ciphertext", NONCE_BYTES),
        ("ciphertext", n - TAG_BYTES - 1),
        ("tag", n - TAG_BYTES),
        ("tag", n - 1),
    ] {
        let flip = |b: &mut Vec<u8>| b[at] ^= 0x01;
        assert_eq!(
            open_as(&a, &damaged(&a.body, flip), &USER, "alice").unwrap_err(),
            OpenError::Envelope(EnvelopeError::Checksum),
            "{what} at {at}, checksum left"
        );
        assert_eq!(
            open_as(&a, &resealed(&a.body, flip), &USER, "alice").unwrap_err(),
            OpenError::Forged,
            "{what} at {at}, checksum redone"
        );
    }
    for keep in [n - 1, n - TAG_BYTES, NONCE_BYTES + 30] {
        let cut = |b: &mut Vec<u8>| b.truncate(keep);
        assert_eq!(
            open_as(&a, &damaged(&a.body, cut), &USER, "alice").unwrap_err(),
            OpenError::Envelope(EnvelopeError::Checksum)
        );
        assert_eq!(
            open_as(&a, &resealed(&a.body, cut), &USER, "alice").unwrap_err(),
            OpenError::Forged
        );
    }
    let cut = |b: &mut Vec<u8>| b.truncate(NONCE_BYTES + TAG_BYTES);
    assert_eq!(
        open_as(&a, &resealed(&a.body, cut), &USER, "alice").unwrap_err(),
        OpenError::Envelope(EnvelopeError::Truncated {
            len: NONCE_BYTES + TAG_BYTES
        })
    );
    // A version that does not exist.
    assert_eq!(
        open_as(&a, &with_header(&a.body, "e2ee", "3"), &USER, "alice").unwrap_err(),
        OpenError::Envelope(EnvelopeError::UnsupportedVersion(3))
    );
    // The other version written in the header over the same sealed bytes passes the server's
    // check, but the version is in the associated data: it does not open.
    let v1 = sealed_as(&k, &USER, "a", "alpha\n", 1);
    for (s, other) in [(&a, "1"), (&v1, "2")] {
        let relabelled = with_header(&s.body, "e2ee", other);
        assert!(verify_envelope_file(&s.opaque_id, &s.hash, &relabelled).is_ok());
        assert_eq!(
            open_as(s, &relabelled, &USER, "alice").unwrap_err(),
            OpenError::Forged
        );
    }
    // The keyed hash changed in the header and the listing together (it is checked against
    // the plaintext, not bound by the AEAD).
    let other = keyed_hash(&k, &USER, &ContentHash::of_parts("a", "x", None, &[], ""));
    let rehashed = with_header(&a.body, "hash", &format!("{:?}", other.as_str()));
    assert_eq!(
        open_note(&k, ctx("alice", &USER), &a.opaque_id, &other, &rehashed).unwrap_err(),
        OpenError::HashMismatch
    );
}

/// Seals an arbitrary version-1 payload for note `note_id`'s opaque id: what a faulty client
/// could send.
fn seal_payload(k: &AccountKeys, note_id: &str, payload: &[u8]) -> SealedNote {
    seal_payload_as(k, note_id, payload, 1)
}

/// [`seal_payload`] in envelope version `version`.
fn seal_payload_as(k: &AccountKeys, note_id: &str, payload: &[u8], version: u32) -> SealedNote {
    let opaque = opaque_note_id(k, &USER, &id(note_id));
    let aad = note_aad(version, k.key_id(), &ctx("alice", &USER), &opaque);
    let nonce = [5u8; NONCE_BYTES];
    let ct = cipher(k)
        .encrypt(
            &XNonce::from(nonce),
            Payload {
                msg: payload,
                aad: &aad,
            },
        )
        .unwrap();
    let mut sealed = nonce.to_vec();
    sealed.extend_from_slice(&ct);
    let hash = keyed_hash(k, &USER, &ContentHash::of_parts("x", "", None, &[], ""));
    let body = format!(
        "---\n{{\"id\":\"{opaque}\",\"summary\":\"\",\"tags\":[],\"e2ee\":{version},\"kid\":\"{}\",\"hash\":\"{hash}\",\"sum\":\"{}\"}}\n---\n{}",
        k.key_id(),
        sha256_hex(&sealed),
        Base64::encode_string(&sealed)
    );
    SealedNote {
        opaque_id: opaque,
        hash: hash.clone(),
        plain_hash: hash,
        body,
    }
}

fn payload(seq: u64, note_id: &str, file: &str, pad: usize) -> Vec<u8> {
    let mut p = seq.to_be_bytes().to_vec();
    p.push(note_id.len() as u8);
    p.extend_from_slice(note_id.as_bytes());
    p.extend_from_slice(&(file.len() as u32).to_be_bytes());
    p.extend_from_slice(file.as_bytes());
    p.resize(pad, 0);
    p
}

#[test]
fn a_faulty_writers_payload_is_refused_after_it_authenticates() {
    let k = key(1);
    let f = file("a", "alpha\n");
    let used = 9 + 1 + 4 + f.len();
    let ok = payload(3, "a", &f, padded_len(used));
    // The payload this module writes opens up to the hash check (the helper's hash is not a).
    assert_eq!(
        open(&k, &USER, &seal_payload(&k, "a", &ok)).unwrap_err(),
        OpenError::HashMismatch
    );
    // The note inside is another note than the id stands for.
    assert!(matches!(
        open(&k, &USER, &seal_payload(&k, "b", &ok)).unwrap_err(),
        OpenError::InnerId { found } if found == id("a")
    ));
    let other_file = file("c", "gamma\n");
    assert!(matches!(
        open(&k, &USER, &seal_payload(&k, "a", &payload(3, "a", &other_file, padded_len(14 + other_file.len())))).unwrap_err(),
        OpenError::InnerId { found } if found == id("c")
    ));
    // Padding that is not zero, too short or too long; lengths that overrun; bad UTF-8.
    let mut nonzero = ok.clone();
    *nonzero.last_mut().unwrap() = 1;
    let mut overrun = ok.clone();
    overrun[10..14].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut bad_utf8 = payload(3, "a", "xx", padded_len(16));
    bad_utf8[14] = 0xff;
    for bad in [
        nonzero,
        payload(3, "a", &f, used),
        payload(3, "a", &f, padded_len(used) + 64),
        overrun,
        bad_utf8,
        payload(3, "A", "", 64),
        vec![0; 14],
    ] {
        assert!(
            matches!(
                open(&k, &USER, &seal_payload(&k, "a", &bad)).unwrap_err(),
                OpenError::Payload(_)
            ),
            "{bad:?}"
        );
    }
    // Not a note file inside.
    let unclosed = "---\n{\"id\":\"a\"}\nno end";
    assert!(matches!(
        open(
            &k,
            &USER,
            &seal_payload(
                &k,
                "a",
                &payload(3, "a", unclosed, padded_len(14 + unclosed.len()))
            )
        )
        .unwrap_err(),
        OpenError::NotANote(_)
    ));
}

#[test]
fn sealing_refuses_what_it_cannot_bind() {
    let k = key(1);
    assert!(matches!(
        seal_note(
            &k,
            ctx("alice", &USER),
            &id("a"),
            &file("b", "x"),
            1,
            &mut OsRng
        ),
        Err(SealError::OtherId { .. })
    ));
    assert!(matches!(
        seal_note(
            &k,
            ctx("alice", &USER),
            &id("a"),
            "---\nunclosed",
            1,
            &mut OsRng
        ),
        Err(SealError::NotANote { .. })
    ));
    for user in ["", "a\0b"] {
        assert!(matches!(
            seal_note(
                &k,
                ctx(user, &USER),
                &id("a"),
                &file("a", "x"),
                1,
                &mut OsRng
            ),
            Err(SealError::UserId(_))
        ));
    }
}

#[test]
fn padding_leaves_size_classes_of_at_most_twelve_percent() {
    assert_eq!(
        [12, 13, 14, 100, 1000, 1025, 131_084].map(padded_len),
        [12, 14, 14, 104, 1024, 1088, 135_168]
    );
    let mut last = 0;
    for len in 14..200_000 {
        let p = padded_len(len);
        assert!(
            p >= len && p >= last && (p - len) * 100 <= len * 12,
            "{len} → {p}"
        );
        last = p;
    }
}

#[test]
fn rollback_is_detected_against_the_highest_known_version() {
    let h1 = ContentHash::of_parts("a", "1", None, &[], "");
    let h2 = ContentHash::of_parts("a", "2", None, &[], "");
    let known = KnownVersion {
        seq: 10,
        hash: h1.clone(),
    };
    assert_eq!(check_rollback(None, 1, &h1), Ok(()));
    assert_eq!(check_rollback(Some(&known), 11, &h2), Ok(()));
    assert_eq!(check_rollback(Some(&known), 10, &h1), Ok(()));
    assert_eq!(
        check_rollback(Some(&known), 10, &h2),
        Err(Rollback::Fork { seq: 10 })
    );
    assert_eq!(
        check_rollback(Some(&known), 9, &h2),
        Err(Rollback::Older {
            known: 10,
            incoming: 9
        })
    );
    assert_eq!(next_seq(None, 0), 1);
    assert_eq!(next_seq(None, 1_789_000_000_000), 1_789_000_000_000);
    assert_eq!(
        next_seq(Some(1_789_000_000_500), 1_789_000_000_000),
        1_789_000_000_501
    );
    assert_eq!(next_seq(Some(u64::MAX), 5), u64::MAX);

    // An older envelope of the same note replayed: it authenticates, and the number gives it
    // away.
    let k = key(1);
    let f = |body| file("a", body);
    let old = seal_note(&k, ctx("alice", &USER), &id("a"), &f("v1\n"), 5, &mut OsRng).unwrap();
    let new = seal_note(&k, ctx("alice", &USER), &id("a"), &f("v2\n"), 6, &mut OsRng).unwrap();
    let seen = open(&k, &USER, &new).unwrap();
    let replayed = open(&k, &USER, &old).unwrap();
    let known = KnownVersion {
        seq: seen.seq,
        hash: new.hash.clone(),
    };
    assert_eq!(
        check_rollback(Some(&known), replayed.seq, &old.hash),
        Err(Rollback::Older {
            known: 6,
            incoming: 5
        })
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_note_round_trips(
        note_id in "[a-z0-9][a-z0-9_-]{0,40}",
        body in any::<String>(),
        seq in any::<u64>(),
        project_scope in any::<bool>(),
    ) {
        prop_assume!(NoteId::new(&note_id).is_ok());
        let k = key(7);
        let scope = if project_scope { project("p") } else { USER };
        let text = file(&note_id, &body);
        let s = seal_note(&k, ctx("u-1", &scope), &id(&note_id), &text, seq, &mut OsRng).unwrap();
        prop_assert!(s.body.len() <= envelope_len(note_id.len(), text.len()));
        let version = format!("\"e2ee\":{ENVELOPE_VERSION},");
        prop_assert!(s.body.contains(&version));
        let o = open_note(&k, ctx("u-1", &scope), &s.opaque_id, &s.hash, &s.body).unwrap();
        prop_assert_eq!(o.text, text);
        prop_assert_eq!(o.seq, seq);
        prop_assert!(NoteId::new(s.opaque_id.as_str()).is_ok());
    }

    #[test]
    fn any_changed_bit_of_the_sealed_bytes_is_refused(at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let k = key(7);
        let a = sealed(&k, &USER, "a", "alpha\n");
        let flip = |b: &mut Vec<u8>| {
            let i = at.index(b.len());
            b[i] ^= 1 << bit;
        };
        let left = SealedNote { body: damaged(&a.body, flip), ..a.clone() };
        prop_assert_eq!(
            open(&k, &USER, &left).unwrap_err(),
            OpenError::Envelope(EnvelopeError::Checksum)
        );
        let redone = SealedNote { body: resealed(&a.body, flip), ..a.clone() };
        prop_assert_eq!(open(&k, &USER, &redone).unwrap_err(), OpenError::Forged);
    }

    #[test]
    fn any_changed_character_of_the_envelope_is_refused(at in any::<prop::sample::Index>(), c in 0x20u8..0x7f) {
        let k = key(7);
        let a = sealed(&k, &USER, "a", "alpha\n");
        let mut body = a.body.clone().into_bytes();
        let i = at.index(body.len());
        prop_assume!(body[i] != c);
        body[i] = c;
        let body = String::from_utf8(body).unwrap();
        let listed = SealedNote { body, ..a.clone() };
        prop_assert!(open(&k, &USER, &listed).is_err());
    }

    #[test]
    fn any_recovery_key_reads_back(bytes in any::<[u8; 32]>()) {
        let rk = RecoveryKey::from_bytes(bytes);
        prop_assert_eq!(RecoveryKey::parse(&rk.to_text()).unwrap(), rk);
    }
}

// ---------------------------------------------------------------------------------------------
// Test vectors: the `e2ee …` rows of docs/PROTOCOL.md, `| e2ee <kind> | `<input>` | `<output>` |`
// with both cells JSON.

fn vectors(kind: &str) -> Vec<(serde_json::Value, serde_json::Value)> {
    let doc = include_str!("../../../docs/PROTOCOL.md");
    let prefix = format!("| e2ee {kind} | `");
    doc.lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|rest| {
            let (input, output) = rest.split_once("` | `").expect("row: `input` | `output`");
            let output = output.strip_suffix("` |").expect("row ends with ` |");
            (
                serde_json::from_str(input).expect("input is JSON"),
                serde_json::from_str(output).expect("output is JSON"),
            )
        })
        .collect()
}

fn hex32(v: &serde_json::Value) -> [u8; 32] {
    hex(v).try_into().unwrap()
}

fn hex(v: &serde_json::Value) -> Vec<u8> {
    let s = v.as_str().unwrap();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn s(v: &serde_json::Value) -> &str {
    v.as_str().unwrap()
}

#[test]
fn protocol_doc_vectors_match() {
    let mut rows = 0;
    for (input, out) in vectors("subkeys") {
        let k = AccountKey::from_bytes(hex32(&input[0])).derive();
        assert_eq!(k.key_id().as_str(), s(&out[0]), "kid {input}");
        assert_eq!(hex_of(k.note.as_ref()), s(&out[1]), "note key {input}");
        assert_eq!(hex_of(k.id.as_ref()), s(&out[2]), "id key {input}");
        assert_eq!(hex_of(k.hash.as_ref()), s(&out[3]), "hash key {input}");
        rows += 1;
    }
    for (input, out) in vectors("opaque id") {
        let k = AccountKey::from_bytes(hex32(&input[0])).derive();
        let scope = Scope::parse(s(&input[1])).unwrap();
        assert_eq!(
            opaque_note_id(&k, &scope, &id(s(&input[2]))).as_str(),
            s(&out),
            "{input}"
        );
        rows += 1;
    }
    for (input, out) in vectors("opaque project") {
        let k = AccountKey::from_bytes(hex32(&input[0])).derive();
        let p = ProjectId::new(s(&input[1])).unwrap();
        assert_eq!(opaque_project_id(&k, &p).as_str(), s(&out), "{input}");
        rows += 1;
    }
    for (input, out) in vectors("keyed hash") {
        let k = AccountKey::from_bytes(hex32(&input[0])).derive();
        let scope = Scope::parse(s(&input[1])).unwrap();
        let h = ContentHash::parse(s(&input[2])).unwrap();
        assert_eq!(keyed_hash(&k, &scope, &h).as_str(), s(&out), "{input}");
        rows += 1;
    }
    for (input, out) in vectors("recovery key") {
        let rk = RecoveryKey::from_bytes(hex32(&input[0]));
        assert_eq!(rk.to_text().as_str(), s(&out), "{input}");
        assert_eq!(RecoveryKey::parse(s(&out)).unwrap(), rk);
        rows += 1;
    }
    for (input, out) in vectors("recovery wrap") {
        let ak = AccountKey::from_bytes(hex32(&input[0]));
        let rk = RecoveryKey::from_bytes(hex32(&input[1]));
        let nonce: [u8; 24] = hex(&input[2]).try_into().unwrap();
        let blob = WrappedKey::with_recovery_key_parts(&ak, &rk, nonce);
        assert_eq!(blob.to_json(), out.to_string(), "{input}");
        let back = WrappedKey::from_json(&out.to_string()).unwrap();
        assert_eq!(
            back.unwrap_with_recovery_key(&rk).unwrap().as_bytes(),
            ak.as_bytes()
        );
        rows += 1;
    }
    for (input, out) in vectors("passphrase wrap") {
        let ak = AccountKey::from_bytes(hex32(&input[0]));
        let params = KdfParams {
            m_kib: input[2].as_u64().unwrap() as u32,
            t: input[3].as_u64().unwrap() as u32,
            p: input[4].as_u64().unwrap() as u32,
        };
        let salt: [u8; 16] = hex(&input[5]).try_into().unwrap();
        let nonce: [u8; 24] = hex(&input[6]).try_into().unwrap();
        let blob =
            WrappedKey::with_passphrase_parts(&ak, s(&input[1]), params, salt, nonce).unwrap();
        assert_eq!(blob.to_json(), out.to_string(), "{input}");
        let back = WrappedKey::from_json(&out.to_string()).unwrap();
        let back = back.unwrap_with_passphrase(s(&input[1])).unwrap();
        assert_eq!(back.as_bytes(), ak.as_bytes());
        rows += 1;
    }
    for (version, kind) in [(1, "envelope"), (2, "envelope v2")] {
        for (input, out) in vectors(kind) {
            let k = AccountKey::from_bytes(hex32(&input[0])).derive();
            let scope = Scope::parse(s(&input[2])).unwrap();
            let nonce: [u8; 24] = hex(&input[6]).try_into().unwrap();
            let c = ctx(s(&input[1]), &scope);
            let note_id = id(s(&input[3]));
            let sealed = seal_note_with_nonce(
                &k,
                c,
                &note_id,
                s(&input[4]),
                input[5].as_u64().unwrap(),
                nonce,
                version,
            )
            .unwrap();
            assert_eq!(sealed.opaque_id.as_str(), s(&out[0]), "{input}");
            assert_eq!(sealed.hash.as_str(), s(&out[1]), "{input}");
            assert_eq!(sealed.body, s(&out[2]), "{input}");
            let opened = open_note(&k, c, &sealed.opaque_id, &sealed.hash, s(&out[2])).unwrap();
            assert_eq!(opened.text, s(&input[4]));
            rows += 1;
        }
    }
    assert!(
        rows >= 18,
        "docs/PROTOCOL.md lost its e2ee test vectors ({rows} rows)"
    );
}
