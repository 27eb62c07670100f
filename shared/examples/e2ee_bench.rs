//! What end-to-end encryption costs on this machine: Argon2id at the costs a new passphrase
//! blob is made with (the wait to unlock a machine), and sealing and opening notes (the cost a
//! sync pass adds per note uploaded or downloaded).
//!
//! `cargo run --release -p memoria-shared --example e2ee_bench [NOTES]` (default 5,000 notes
//! of about 1 KiB, then 50 of 128 KiB).

use std::time::{Duration, Instant};

use memoria_shared::e2ee::{
    AccountKey, KdfParams, NoteContext, WrappedKey, keyed_hash, open_note, seal_note,
    seal_serialized,
};
use memoria_shared::protocol::Scope;
use memoria_shared::{ContentHash, Note, NoteId};
use rand_core::OsRng;

fn main() {
    let notes: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("NOTES is a count"))
        .unwrap_or(5_000);
    let key = AccountKey::generate(&mut OsRng).expect("random bytes");

    let blob = WrappedKey::with_passphrase(&key, "a passphrase", KdfParams::DEFAULT, &mut OsRng)
        .expect("wrap");
    let mut unwraps = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        blob.unwrap_with_passphrase("a passphrase").expect("unwrap");
        unwraps.push(t.elapsed());
    }
    unwraps.sort();
    let p = KdfParams::DEFAULT;
    println!(
        "argon2id m={} KiB t={} p={}: unwrap median {:.0} ms (min {:.0}, max {:.0}) over {}",
        p.m_kib,
        p.t,
        p.p,
        ms(unwraps[unwraps.len() / 2]),
        ms(unwraps[0]),
        ms(unwraps[unwraps.len() - 1]),
        unwraps.len()
    );

    let keys = key.derive();
    let scope = Scope::User;
    let ctx = NoteContext {
        user_id: "alice",
        scope: &scope,
    };
    for (count, body_len) in [(notes, 1024), (50, 128 * 1024)] {
        let files: Vec<(NoteId, String)> = (0..count)
            .map(|i| {
                let id = NoteId::new(&format!("note-{i}")).unwrap();
                let body = prose(i, body_len);
                let file = Note::new(id.clone(), format!("Note {i}"), body).serialize();
                (id, file)
            })
            .collect();
        let plain_bytes: usize = files.iter().map(|(_, f)| f.len()).sum();

        let t = Instant::now();
        let hashes: Vec<ContentHash> = files
            .iter()
            .map(|(id, f)| {
                let note = Note::parse(
                    f,
                    memoria_shared::note::FileContext {
                        relative_path: &id.file_name(),
                    },
                )
                .unwrap();
                keyed_hash(&keys, &scope, &ContentHash::of_synced_note(&note))
            })
            .collect();
        let hash_only = t.elapsed();

        let t = Instant::now();
        let sealed: Vec<_> = files
            .iter()
            .map(|(id, f)| seal_note(&keys, ctx, id, f, 1, &mut OsRng).unwrap())
            .collect();
        let seal = t.elapsed();

        // As a sync pass seals: the file it serialized, with the hash it has already.
        let plain: Vec<ContentHash> = sealed.iter().map(|s| s.plain_hash.clone()).collect();
        let t = Instant::now();
        for ((id, f), h) in files.iter().zip(&plain) {
            seal_serialized(&keys, ctx, id, f, h, 1, &mut OsRng).unwrap();
        }
        let seal_serialized_took = t.elapsed();
        let envelope_bytes: usize = sealed.iter().map(|s| s.body.len()).sum();

        let t = Instant::now();
        for s in &sealed {
            open_note(&keys, ctx, &s.opaque_id, &s.hash, &s.body).unwrap();
        }
        let open = t.elapsed();
        assert_eq!(hashes.len(), sealed.len());

        let mib = plain_bytes as f64 / (1024.0 * 1024.0);
        println!(
            "{count} notes of {} KiB ({:.1} MiB of files): parse + keyed hash {:.0} ms; seal {:.0} ms ({:.0} MiB/s, {:.1} µs a note), from the serialized file and its hash (as a sync pass) {:.0} ms ({:.0} MiB/s, {:.1} µs a note); open and verify {:.0} ms ({:.0} MiB/s, {:.1} µs a note); envelopes {:.2}× the files",
            body_len / 1024,
            mib,
            ms(hash_only),
            ms(seal),
            mib / seal.as_secs_f64(),
            seal.as_secs_f64() * 1e6 / count as f64,
            ms(seal_serialized_took),
            mib / seal_serialized_took.as_secs_f64(),
            seal_serialized_took.as_secs_f64() * 1e6 / count as f64,
            ms(open),
            mib / open.as_secs_f64(),
            open.as_secs_f64() * 1e6 / count as f64,
            envelope_bytes as f64 / plain_bytes as f64,
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `len` bytes of prose for note `i`: this repository's architecture document (repeated to
/// length) from an offset of the note's own. Compression makes an envelope's size depend on
/// its text, and one line repeated would compress to almost nothing.
fn prose(i: usize, len: usize) -> String {
    const TEXT: &str = include_str!("../../docs/ARCHITECTURE.md");
    let mut out = String::with_capacity(len + 4);
    let mut at = (i * 7919) % TEXT.len();
    while out.len() < len {
        while !TEXT.is_char_boundary(at) {
            at += 1;
        }
        let end = (at + len - out.len()).min(TEXT.len());
        let end = (end..=TEXT.len())
            .find(|&e| TEXT.is_char_boundary(e))
            .unwrap();
        out.push_str(&TEXT[at..end]);
        at = 0;
    }
    out
}
