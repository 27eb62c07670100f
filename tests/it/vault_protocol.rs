//! The engine's files and the shared protocol agree: what the vault writes parses with
//! `memoria-shared`, and the index stores exactly the content hash the sync protocol defines.

use memoria_engine::{Engine, NewNote, OpenOptions};
use memoria_shared::ContentHash;
use memoria_shared::note::{FileContext, Note, NoteType};

#[test]
fn engine_files_hash_as_the_protocol_says() {
    let tmp = tempfile::tempdir().unwrap();
    let mut engine = Engine::open(OpenOptions {
        home: Some(tmp.path().to_path_buf()),
        ..Default::default()
    })
    .unwrap();
    let written = engine
        .add(NewNote {
            summary: "Tags are a set".into(),
            body: "body".into(),
            note_type: Some(NoteType::Reference),
            tags: vec!["zeta".into(), "alpha".into()],
            id: Some("tags-order".into()),
            ..Default::default()
        })
        .unwrap();
    let text = std::fs::read_to_string(&written.path).unwrap();
    let note = Note::parse(
        &text,
        FileContext {
            relative_path: "tags-order.md",
        },
    )
    .unwrap();
    let (_, row) = engine.resolve("tags-order", None).unwrap();
    let expected = ContentHash::of_parts(
        "tags-order",
        "Tags are a set",
        Some("reference"),
        &["alpha".into(), "zeta".into()],
        "body\n",
    );
    assert_eq!(row.hash.as_deref(), Some(expected.as_str()));
    assert_eq!(note.content_hash(), expected);
}
