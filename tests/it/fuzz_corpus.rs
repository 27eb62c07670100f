//! Replays the fuzz corpus (fuzz/corpus/<target>/) through the fuzz targets' own checks on the
//! stable toolchain, so every input fuzzing kept, and every crash it found and we fixed, is
//! checked with the normal suite. docs/fuzzing.md says how to run the fuzzers themselves.

use std::path::PathBuf;

#[path = "../../fuzz/src/shared.rs"]
mod shared_checks;

#[path = "../../fuzz/src/engine.rs"]
mod engine_checks;

/// Runs `check` on every file of one target's corpus and fails naming each file it panics on.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read the corpus {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the corpus {} is empty", dir.display());
    let failed: Vec<String> = files
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).unwrap();
            std::panic::catch_unwind(|| check(&data)).is_err()
        })
        .map(|path| path.display().to_string())
        .collect();
    assert!(
        failed.is_empty(),
        "{target}: the check fails on {failed:#?}"
    );
}

#[test]
fn note_roundtrip_corpus() {
    replay("note_roundtrip", shared_checks::note_roundtrip);
}

#[test]
fn merge_corpus() {
    replay("merge", shared_checks::merge);
}

#[test]
fn protocol_json_corpus() {
    replay("protocol_json", shared_checks::protocol_json);
}

#[test]
fn tokenize_corpus() {
    replay("tokenize", engine_checks::tokenize);
}

#[test]
fn analyzer_corpus() {
    replay("analyzer", engine_checks::analyzer);
}
