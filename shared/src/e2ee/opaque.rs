//! What the server sees in place of names and content hashes.
//!
//! - An opaque note id is `HMAC-SHA-256(id key, "note" 0x00 scope 0x00 note id)`, its first
//!   20 bytes as 32 lowercase Crockford base32 characters: a valid note id and store path
//!   segment, the same on every machine of the account (so compare-and-swap, tombstones and
//!   receipts work on it unchanged), different in every scope, and unlinkable to the name.
//! - An opaque project id is `HMAC-SHA-256(id key, "project" 0x00 project id)`, shaped the same:
//!   the server's path `projects/<id>/` no longer names the project.
//! - A keyed hash is `HMAC-SHA-256(hash key, "hash" 0x00 scope 0x00 content hash)` as 64
//!   lowercase hex characters: the shape of a [`ContentHash`], so `have` and `hash` keep their
//!   validation, stable across machines (a machine that holds a note says so without
//!   downloading it), and no plaintext hash leaves the machine.
//!
//! `scope` is always the scope's real name (`user`, `project:<project id>`), never its opaque
//! form. No part of these inputs can contain a 0x00 byte, so the joins are unambiguous.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::base32;
use super::keys::AccountKeys;
use crate::hash::ContentHash;
use crate::id::NoteId;
use crate::protocol::{ProjectId, Scope};

/// Bytes of the HMAC kept in an opaque id (160 bits: 32 symbols).
const OPAQUE_ID_BYTES: usize = 20;

fn hmac(key: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            mac.update(&[0]);
        }
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// The id the server knows note `id` of `scope` by.
pub fn opaque_note_id(keys: &AccountKeys, scope: &Scope, id: &NoteId) -> NoteId {
    let scope = scope.to_string();
    let mac = hmac(
        &keys.id,
        &[b"note", scope.as_bytes(), id.as_str().as_bytes()],
    );
    NoteId::new(&base32::encode_lower(&mac[..OPAQUE_ID_BYTES]))
        .expect("32 Crockford symbols are a valid note id")
}

/// The id the server knows project `project` by.
pub fn opaque_project_id(keys: &AccountKeys, project: &ProjectId) -> ProjectId {
    let mac = hmac(&keys.id, &[b"project", project.as_str().as_bytes()]);
    ProjectId::new(&base32::encode_lower(&mac[..OPAQUE_ID_BYTES]))
        .expect("32 Crockford symbols are a valid project id")
}

/// The scope as the server names it: `user` stays `user`, a project gets its opaque id.
pub fn opaque_scope(keys: &AccountKeys, scope: &Scope) -> Scope {
    match scope {
        Scope::User => Scope::User,
        Scope::Project(pid) => Scope::Project(opaque_project_id(keys, pid)),
    }
}

/// The keyed form of `hash` (a note's sync-form content hash) in `scope`: what the protocol's
/// `hash` and `have` carry for an encrypted scope.
pub fn keyed_hash(keys: &AccountKeys, scope: &Scope, hash: &ContentHash) -> ContentHash {
    let scope = scope.to_string();
    let mac = hmac(
        &keys.hash,
        &[b"hash", scope.as_bytes(), hash.as_str().as_bytes()],
    );
    ContentHash::parse(&crate::hash::hex(&mac))
        .expect("64 lowercase hex characters are a content hash")
}
