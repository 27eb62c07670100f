//! Note hashes: how every client and the sync server decide whether two notes are the same.
//!
//! Two forms, both specified in `docs/PROTOCOL.md` ("Content hash") with test vectors that the
//! tests below read from that very file, so the code and the document cannot drift apart:
//! - the *text form* ([`ContentHash::of_note`], tag `memoria-note-v1`): id, summary, type, tags
//!   and body — what a note says. The index and recall key on it (an embedding depends on the
//!   text only).
//! - the *sync form* ([`ContentHash::of_synced_note`], tag `memoria-note-v2`): the text form's
//!   fields plus the metadata that syncs (trust, importance, source, status, relations). The
//!   protocol's `hash` is this form, so a metadata-only change is a change to sync.
//!
//! Hashes written before the sync form existed are text-form hashes of the same bodies;
//! [`ContentHash::names`] accepts both, so such bases and manifest entries stay valid.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::note::Note;

/// Version tag that opens the text form.
pub const HASH_FORM: &str = "memoria-note-v1";

/// Version tag that opens the sync form.
pub const SYNC_HASH_FORM: &str = "memoria-note-v2";

/// A note's content hash: lowercase hex SHA-256 of its canonical form (64 characters).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct ContentHash(String);

impl ContentHash {
    /// Hashes the parts of a note that sync compares: id, summary, type (when present), the
    /// sorted set of tags and the body (CRLF normalised to LF). Timestamps, trust, importance
    /// and unknown keys are metadata and do not change the hash.
    pub fn of_parts(
        id: &str,
        summary: &str,
        note_type: Option<&str>,
        tags: &[String],
        body: &str,
    ) -> Self {
        Self(sha256_hex(&canonical_form(
            id, summary, note_type, tags, body,
        )))
    }

    /// The text form of `note`: what it says (see the module docs).
    pub fn of_note(note: &Note) -> Self {
        let ty = note.note_type.as_ref().map(|t| t.as_str());
        Self::of_parts(note.id.as_str(), &note.summary, ty, &note.tags, &note.body)
    }

    /// The sync form of `note`: what it says and the metadata that syncs. The protocol's hash.
    pub fn of_synced_note(note: &Note) -> Self {
        Self(sha256_hex(&synced_form(note)))
    }

    /// Whether `self` is `note`'s hash in the sync form, or in the text form that was the
    /// protocol's hash before metadata synced.
    pub fn names(&self, note: &Note) -> bool {
        *self == Self::of_synced_note(note) || *self == Self::of_note(note)
    }

    /// Accepts a hash received from elsewhere (64 lowercase hex characters).
    pub fn parse(s: &str) -> Option<Self> {
        let ok = s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn field(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(format!("{name} {}\n", value.len()).as_bytes());
    out.extend_from_slice(value.as_bytes());
    out.push(b'\n');
}

/// The text fields both forms share after their tag line, up to (not including) the body.
fn text_fields(
    out: &mut Vec<u8>,
    id: &str,
    summary: &str,
    note_type: Option<&str>,
    tags: &[String],
) {
    field(out, "id", id);
    field(out, "summary", summary);
    if let Some(ty) = note_type {
        field(out, "type", ty);
    }
    let mut sorted: Vec<&str> = tags.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    for tag in sorted {
        field(out, "tag", tag);
    }
}

/// The exact bytes the text form hashes. See `docs/PROTOCOL.md`.
pub fn canonical_form(
    id: &str,
    summary: &str,
    note_type: Option<&str>,
    tags: &[String],
    body: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + summary.len() + body.len());
    out.extend_from_slice(HASH_FORM.as_bytes());
    out.push(b'\n');
    text_fields(&mut out, id, summary, note_type, tags);
    field(&mut out, "body", &body.replace("\r\n", "\n"));
    out
}

/// The metadata of the sync form, as the note file spells it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncedMeta {
    pub trust: Option<String>,
    pub importance: Option<f64>,
    pub source: Option<String>,
    pub status: Option<String>,
    /// `(kind, target)` in the note's order.
    pub relations: Vec<(String, String)>,
}

impl SyncedMeta {
    pub fn of_note(note: &Note) -> Self {
        // The names the note file uses (snake_case), which serde gives as a JSON string.
        fn name<T: serde::Serialize>(v: &T) -> String {
            match serde_json::to_value(v) {
                Ok(serde_json::Value::String(s)) => s,
                _ => unreachable!("metadata enums serialize as strings"),
            }
        }
        SyncedMeta {
            trust: note.trust.as_ref().map(name),
            importance: note.importance,
            source: note.source.as_ref().map(name),
            status: note.status.as_ref().map(name),
            relations: note
                .relations
                .iter()
                .map(|r| (name(&r.kind), r.target.clone()))
                .collect(),
        }
    }
}

/// The exact bytes the sync form hashes. See `docs/PROTOCOL.md`.
pub fn synced_form_of_parts(
    id: &str,
    summary: &str,
    note_type: Option<&str>,
    tags: &[String],
    meta: &SyncedMeta,
    body: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + summary.len() + body.len());
    out.extend_from_slice(SYNC_HASH_FORM.as_bytes());
    out.push(b'\n');
    text_fields(&mut out, id, summary, note_type, tags);
    if let Some(t) = &meta.trust {
        field(&mut out, "trust", t);
    }
    if let Some(i) = meta.importance {
        // Rust's `Display` for f64: the shortest decimal that reads back as the same number,
        // never an exponent, no `.0` on whole numbers.
        field(&mut out, "importance", &i.to_string());
    }
    if let Some(s) = &meta.source {
        field(&mut out, "source", s);
    }
    if let Some(s) = &meta.status {
        field(&mut out, "status", s);
    }
    for (kind, target) in &meta.relations {
        field(&mut out, "relation", &format!("{kind} {target}"));
    }
    field(&mut out, "body", &body.replace("\r\n", "\n"));
    out
}

fn synced_form(note: &Note) -> Vec<u8> {
    let ty = note.note_type.as_ref().map(|t| t.as_str());
    synced_form_of_parts(
        note.id.as_str(),
        &note.summary,
        ty,
        &note.tags,
        &SyncedMeta::of_note(note),
        &note.body,
    )
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex SHA-256 of the files' bytes one after the other, read in pieces (a model file
/// need not sit in memory twice).
pub fn sha256_hex_of_files(paths: &[&std::path::Path]) -> std::io::Result<String> {
    use std::io::Read;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    for path in paths {
        let mut file = std::fs::File::open(path)?;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
    }
    Ok(hex(&hasher.finalize()))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * bytes.len());
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_hash_matches_the_in_memory_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(sha256_hex_of_files(&[&path]).unwrap(), sha256_hex(&bytes));
        assert!(sha256_hex_of_files(&[&dir.path().join("missing")]).is_err());
        let other = dir.path().join("other");
        std::fs::write(&other, b"tail").unwrap();
        let mut both = bytes.clone();
        both.extend_from_slice(b"tail");
        assert_eq!(
            sha256_hex_of_files(&[&path, &other]).unwrap(),
            sha256_hex(&both)
        );
    }

    /// Reads test vectors out of docs/PROTOCOL.md: the rows `| <kind> | `<json>` | `<hash>` |`.
    /// The text form's rows (`vector`) hold `[id, summary, type|null, [tags], body]`; the sync
    /// form's (`sync vector`) `[id, summary, type|null, [tags], {trust, importance, source,
    /// status, relations: [[kind, target]]}, body]`.
    fn vectors_from_protocol_doc(kind: &str) -> Vec<(serde_json::Value, String)> {
        let doc = include_str!("../../docs/PROTOCOL.md");
        let prefix = format!("| {kind} | `");
        doc.lines()
            .filter_map(|l| l.strip_prefix(prefix.as_str()))
            .map(|rest| {
                let (json, tail) = rest
                    .split_once("` | `")
                    .expect("vector row: `json` | `hash`");
                let hash = tail.trim_end_matches(" |").trim_end_matches('`');
                (
                    serde_json::from_str(json).expect("vector json"),
                    hash.to_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn protocol_doc_vectors_match() {
        let vectors = vectors_from_protocol_doc("vector");
        assert!(
            vectors.len() >= 5,
            "docs/PROTOCOL.md lost its hash test vectors"
        );
        for (v, expected) in vectors {
            let tags: Vec<String> = v[3]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_owned())
                .collect();
            let got = ContentHash::of_parts(
                v[0].as_str().unwrap(),
                v[1].as_str().unwrap(),
                v[2].as_str(),
                &tags,
                v[4].as_str().unwrap(),
            );
            assert_eq!(got.as_str(), expected, "vector {v}");
        }
    }

    #[test]
    fn protocol_doc_sync_vectors_match() {
        let vectors = vectors_from_protocol_doc("sync vector");
        assert!(
            vectors.len() >= 3,
            "docs/PROTOCOL.md lost its sync-form test vectors"
        );
        let s = |v: &serde_json::Value| v.as_str().map(str::to_owned);
        for (v, expected) in vectors {
            let tags: Vec<String> = v[3]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_owned())
                .collect();
            let m = &v[4];
            let meta = SyncedMeta {
                trust: s(&m["trust"]),
                importance: m["importance"].as_f64(),
                source: s(&m["source"]),
                status: s(&m["status"]),
                relations: m["relations"]
                    .as_array()
                    .map(|rs| {
                        rs.iter()
                            .map(|r| (s(&r[0]).unwrap(), s(&r[1]).unwrap()))
                            .collect()
                    })
                    .unwrap_or_default(),
            };
            let form = synced_form_of_parts(
                v[0].as_str().unwrap(),
                v[1].as_str().unwrap(),
                v[2].as_str(),
                &tags,
                &meta,
                v[5].as_str().unwrap(),
            );
            assert_eq!(sha256_hex(&form), expected, "sync vector {v}");
        }
    }

    #[test]
    fn the_sync_form_covers_synced_metadata_and_accepts_the_text_form() {
        use crate::note::{Relation, RelationKind, Status, Trust};
        let mut n = Note::new(crate::NoteId::new("m").unwrap(), "S", "body\n");
        let plain = ContentHash::of_synced_note(&n);
        assert_ne!(
            plain,
            ContentHash::of_note(&n),
            "the two forms have their own tags"
        );
        let mut seen = vec![plain.clone()];
        n.trust = Some(Trust::Quarantined);
        seen.push(ContentHash::of_synced_note(&n));
        n.importance = Some(0.25);
        seen.push(ContentHash::of_synced_note(&n));
        n.source = Some(crate::note::Source::UserConfirmed);
        seen.push(ContentHash::of_synced_note(&n));
        n.status = Some(Status::Archived);
        seen.push(ContentHash::of_synced_note(&n));
        n.relations.push(Relation {
            target: "other".into(),
            kind: RelationKind::Supersedes,
        });
        seen.push(ContentHash::of_synced_note(&n));
        let distinct: std::collections::BTreeSet<_> = seen.iter().collect();
        assert_eq!(
            distinct.len(),
            seen.len(),
            "every metadata change changes the hash"
        );
        // The text form ignores all of it, and `names` accepts either form.
        let text = ContentHash::of_note(&n);
        assert_eq!(
            text,
            ContentHash::of_note(&Note::new(crate::NoteId::new("m").unwrap(), "S", "body\n"))
        );
        assert!(text.names(&n));
        assert!(ContentHash::of_synced_note(&n).names(&n));
        assert!(!plain.names(&n));
        // Timestamps are in neither form.
        let mut later = n.clone();
        later.updated_at = Some(5);
        assert_eq!(
            ContentHash::of_synced_note(&later),
            ContentHash::of_synced_note(&n)
        );
    }

    #[test]
    fn canonical_form_is_unambiguous() {
        let a = canonical_form("a", "b\nsummary 1", None, &[], "");
        let b = canonical_form("a", "b", None, &[], "");
        assert_ne!(a, b);
        // Tag order and duplicates do not matter; CRLF does not matter.
        let t1 = ContentHash::of_parts(
            "x",
            "s",
            Some("user"),
            &["b".into(), "a".into(), "a".into()],
            "l1\r\nl2",
        );
        let t2 = ContentHash::of_parts("x", "s", Some("user"), &["a".into(), "b".into()], "l1\nl2");
        assert_eq!(t1, t2);
        // A present type differs from an absent one.
        assert_ne!(
            ContentHash::of_parts("x", "s", None, &[], ""),
            ContentHash::of_parts("x", "s", Some(""), &[], "")
        );
    }

    #[test]
    fn parse_accepts_only_hex() {
        let h = ContentHash::of_parts("x", "s", None, &[], "");
        assert_eq!(ContentHash::parse(h.as_str()), Some(h));
        assert_eq!(ContentHash::parse("XYZ"), None);
        assert_eq!(ContentHash::parse(&"A".repeat(64)), None);
    }
}
