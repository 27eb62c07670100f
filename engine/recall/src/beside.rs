//! Values derived from large files (the model's digest, the parsed tokenizer) kept in a small
//! file beside them, so a one-shot command does not derive them again. A kept value is used
//! while the sources' sizes and modification times match the ones it was derived from (as git
//! trusts its index); one that is stale, damaged or cannot be written only costs the work.

use std::path::Path;

/// `cache`'s value when it was derived from `sources` as they are now (`decode` gets the bytes
/// and the sources' stamp and says whether they hold a value for it); else `derive`'s, kept in
/// `cache` as `encode` writes it unless the sources changed meanwhile. `cannot_read` turns a
/// source that cannot be read into the caller's error.
pub(crate) fn remembered<T, E>(
    cache: &Path,
    sources: &[&Path],
    cannot_read: impl Fn(std::io::Error) -> E,
    decode: impl FnOnce(&[u8], &str) -> Option<T>,
    derive: impl FnOnce() -> Result<T, E>,
    encode: impl FnOnce(&T, &str) -> Vec<u8>,
) -> Result<T, E> {
    let before = stamp(sources).map_err(&cannot_read)?;
    if let Some(value) = std::fs::read(cache).ok().and_then(|b| decode(&b, &before)) {
        return Ok(value);
    }
    let value = derive()?;
    if stamp(sources).is_ok_and(|after| after == before) {
        let _ = crate::fsx::write_atomic(cache, &encode(&value, &before));
    }
    Ok(value)
}

/// Each file's size and modification time (nanoseconds), `len:mtime` joined by `,`.
pub(crate) fn stamp(files: &[&Path]) -> std::io::Result<String> {
    let mut parts = Vec::with_capacity(files.len());
    for f in files {
        let meta = std::fs::metadata(f)?;
        parts.push(format!("{}:{}", meta.len(), crate::scan::mtime_ns(&meta)));
    }
    Ok(parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_value_is_used_until_its_source_changes() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("source");
        let cache = dir.path().join("cache");
        std::fs::write(&source, b"abc").unwrap();
        let get = |derived: &str| {
            remembered(
                &cache,
                &[&source],
                |e| e.to_string(),
                |b, s| {
                    String::from_utf8(b.to_vec())
                        .ok()?
                        .strip_prefix(&format!("{s} "))
                        .map(str::to_owned)
                },
                || Ok(derived.to_owned()),
                |v, s| format!("{s} {v}").into_bytes(),
            )
        };
        assert_eq!(get("first").unwrap(), "first");
        assert_eq!(get("second").unwrap(), "first", "kept");
        std::fs::write(&source, b"abcd").unwrap();
        assert_eq!(get("third").unwrap(), "third", "a new size");
        std::fs::write(&source, b"ABCD").unwrap();
        crate::fsx::touch_later(&source);
        assert_eq!(get("fourth").unwrap(), "fourth", "a new time");
        std::fs::write(&cache, b"garbage").unwrap();
        assert_eq!(get("fifth").unwrap(), "fifth");
        std::fs::remove_file(&source).unwrap();
        assert!(get("sixth").is_err());
    }
}
