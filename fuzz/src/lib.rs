//! The checks behind each fuzz target, one function per target that panics when a property
//! fails. Plain Rust with no libFuzzer in it: the stable test suite runs every corpus file
//! through the same functions (tests/it/fuzz_corpus.rs includes these files).

pub mod shared;

#[cfg(feature = "engine")]
pub mod engine;
