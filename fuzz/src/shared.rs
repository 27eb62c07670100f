//! Checks on `memoria-shared`: the note format, the three-way merge and the protocol's JSON.
//! Each function takes arbitrary bytes, returns quietly when they are not the kind of input it
//! checks, and panics when a property fails.

use memoria_shared::merge::{self, MergeOutcome, merge_lines};
use memoria_shared::note::FileContext;
use memoria_shared::protocol::{
    Applied, Change, CommitRequest, CommitResponse, DamagedNote, EraseRequest, EraseResponse,
    ErrorBody, IdentityResponse, ManifestEntry, NoteBody, Quotas, Scope, SnapshotRequest,
    SnapshotResponse, StaleNote, verify_note_file,
};
use memoria_shared::{Note, NoteId};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Where every fuzzed note file lives: a typed folder, so the folder's type is read too.
const PATH: &str = "decisions/fuzz-note.md";

/// The body limit the merge checks pass: larger than any input libFuzzer makes by default.
const MAX_BODY: usize = 1 << 20;

fn ctx() -> FileContext<'static> {
    FileContext {
        relative_path: PATH,
    }
}

/// A file that parses as a note is written back in canonical form, and that form parses to
/// the same note and is written identically again (with the same content hash).
pub fn note_roundtrip(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(note) = Note::parse(text, ctx()) else {
        return;
    };
    let written = note.serialize();
    let back = Note::parse(&written, ctx())
        .unwrap_or_else(|e| panic!("the canonical form does not parse ({e}):\n{written}"));
    assert_eq!(
        back, note,
        "the canonical form reads as another note:\n{written}"
    );
    assert_eq!(back.serialize(), written, "writing is not stable");
    assert_eq!(back.content_hash(), note.content_hash());
}

/// Splits the input into up to three texts at NUL bytes and reads each as a version of one
/// note (a text that is not a note file becomes a body). The merge must never panic, must
/// keep a one-sided change exactly, must be symmetric, and a body merge must keep a
/// one-sided change of the body exactly.
pub fn merge(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '\0');
    let mut next = || parts.next().map(version);
    let (Some(b), Some(x)) = (next(), next()) else {
        return;
    };
    let y = next().unwrap_or_else(|| b.clone());

    let clean = |n: &Note| MergeOutcome::Clean(Some(n.clone()));
    assert_eq!(
        merge::merge(Some(&b), Some(&x), Some(&b), MAX_BODY),
        clean(&x)
    );
    assert_eq!(
        merge::merge(Some(&b), Some(&b), Some(&x), MAX_BODY),
        clean(&x)
    );
    assert_eq!(merge::merge(None, Some(&x), None, MAX_BODY), clean(&x));
    assert_eq!(
        merge::merge(Some(&b), None, None, MAX_BODY),
        MergeOutcome::Clean(None)
    );
    assert_eq!(
        merge::merge(Some(&b), Some(&x), Some(&y), MAX_BODY),
        merge::merge(Some(&b), Some(&y), Some(&x), MAX_BODY),
        "the merge is not symmetric"
    );
    assert_eq!(
        merge::merge(Some(&b), Some(&x), None, MAX_BODY),
        merge::merge(Some(&b), None, Some(&x), MAX_BODY)
    );

    let (bb, xb, yb) = (&b.body, &x.body, &y.body);
    assert_eq!(merge_lines(bb, xb, bb).as_ref(), Some(xb));
    assert_eq!(merge_lines(bb, bb, xb).as_ref(), Some(xb));
    assert_eq!(merge_lines(bb, xb, xb).as_ref(), Some(xb));
    assert_eq!(
        merge_lines(bb, xb, yb),
        merge_lines(bb, yb, xb),
        "the body merge is not symmetric"
    );
}

/// One version of the fuzzed note: the text read as a note file, or as a body when it is not
/// one; always under the same id, as the versions sync merges are.
fn version(text: &str) -> Note {
    let id = NoteId::new("fuzz-note").expect("a valid id");
    let mut note = Note::parse(text, ctx()).unwrap_or_else(|_| Note::new(id.clone(), "s", text));
    note.id = id;
    note
}

/// Every protocol body decodes without panicking; what decodes encodes and decodes back to the
/// same value; a note body that decodes is checked against its id and hash without panicking.
pub fn protocol_json(data: &[u8]) {
    round_trip::<IdentityResponse>(data);
    round_trip::<Quotas>(data);
    round_trip::<Scope>(data);
    round_trip::<ManifestEntry>(data);
    round_trip::<SnapshotRequest>(data);
    round_trip::<SnapshotResponse>(data);
    round_trip::<DamagedNote>(data);
    round_trip::<CommitRequest>(data);
    round_trip::<CommitResponse>(data);
    round_trip::<Applied>(data);
    round_trip::<StaleNote>(data);
    round_trip::<EraseRequest>(data);
    round_trip::<EraseResponse>(data);
    round_trip::<ErrorBody>(data);
    if let Some(n) = round_trip::<NoteBody>(data) {
        let _ = verify_note_file(&n.id, &n.hash, &n.body);
    }
    if let Some(c) = round_trip::<Change>(data)
        && let (Some(body), Some(hash)) = (&c.body, &c.hash)
    {
        let _ = verify_note_file(&c.id, hash, body);
    }
}

fn round_trip<T>(data: &[u8]) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let value: T = serde_json::from_slice(data).ok()?;
    let json = serde_json::to_string(&value).expect("a decoded value encodes");
    let back: T = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("{json} does not decode as it encoded ({e})"));
    assert_eq!(back, value, "{json}");
    Some(value)
}
