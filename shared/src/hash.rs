//! The content hash: how every client and the sync server decide whether two notes are the same.
//!
//! The canonical form is specified in `docs/PROTOCOL.md` ("Content hash") with test vectors that
//! the tests below read from that very file, so the code and the document cannot drift apart.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::note::Note;

/// Version tag that opens the canonical form; a new form gets a new tag.
pub const HASH_FORM: &str = "memoria-note-v1";

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

    pub fn of_note(note: &Note) -> Self {
        let ty = note.note_type.as_ref().map(|t| t.as_str());
        Self::of_parts(note.id.as_str(), &note.summary, ty, &note.tags, &note.body)
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

/// The exact bytes that are hashed. See `docs/PROTOCOL.md`.
pub fn canonical_form(
    id: &str,
    summary: &str,
    note_type: Option<&str>,
    tags: &[String],
    body: &str,
) -> Vec<u8> {
    fn field(out: &mut Vec<u8>, name: &str, value: &str) {
        out.extend_from_slice(format!("{name} {}\n", value.len()).as_bytes());
        out.extend_from_slice(value.as_bytes());
        out.push(b'\n');
    }
    let mut out = Vec::with_capacity(64 + summary.len() + body.len());
    out.extend_from_slice(HASH_FORM.as_bytes());
    out.push(b'\n');
    field(&mut out, "id", id);
    field(&mut out, "summary", summary);
    if let Some(ty) = note_type {
        field(&mut out, "type", ty);
    }
    let mut sorted: Vec<&str> = tags.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    for tag in sorted {
        field(&mut out, "tag", tag);
    }
    field(&mut out, "body", &body.replace("\r\n", "\n"));
    out
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

fn hex(digest: &[u8]) -> String {
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
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

    /// Reads the test vectors out of docs/PROTOCOL.md: lines of the form
    /// `| vector | <json of [id, summary, type|null, [tags], body]> | <hash> |`.
    fn vectors_from_protocol_doc() -> Vec<(serde_json::Value, String)> {
        let doc = include_str!("../../docs/PROTOCOL.md");
        doc.lines()
            .filter_map(|l| l.strip_prefix("| vector | `"))
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
        let vectors = vectors_from_protocol_doc();
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
