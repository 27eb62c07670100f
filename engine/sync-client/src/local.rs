//! What a pass knows about a scope folder's note files without reading them: each file's
//! fingerprint (size, modification time and, on Unix, change time and inode) with the note id
//! and sync hash it had when it was last read. A file whose fingerprint is unchanged is the
//! file that was read, so its hash is known; only changed files are read again.
//!
//! The change time cannot be set by a program (unlike the modification time, which editors,
//! `touch`, `rsync -t` and archive tools restore), and a file replaced by a rename has a new
//! inode: an edit that keeps the modification time and the size is still seen. Fingerprints
//! are taken before a file is read, so an edit that lands between the two is seen by the next
//! pass rather than recorded as read.
//!
//! The cache also remembers the manifest version of the last pass that left nothing to do on
//! either side (`clean`): while every fingerprint is unchanged and the server still has that
//! version, a pass has nothing to read and nothing to decide.
//!
//! Stored in `scopes/<scope>/local.json`. It is a cache: lost or unreadable, the pass reads
//! every file, as on its first run.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::error::SyncResult;
use super::settings::ParsedFiles;
use crate::scan;

/// The caches this process last read or wrote (see [`ParsedFiles`]).
static CACHES: ParsedFiles<LocalCache> = ParsedFiles::new();

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub size: i64,
    pub mtime_ns: i64,
    /// Change time (ns), 0 where the system has none.
    #[serde(default)]
    pub ctime_ns: i64,
    /// Inode, 0 where the system has none.
    #[serde(default)]
    pub ino: u64,
}

/// One file as last read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedFile {
    pub fp: Fingerprint,
    pub id: String,
    pub hash: String,
}

/// The scope folder's files as last read, by path relative to the folder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalCache {
    /// The manifest version of the last pass that left nothing to do on either side, with
    /// every file of the folder in `files` as that pass found it.
    #[serde(default)]
    pub clean: Option<String>,
    #[serde(default)]
    pub files: BTreeMap<String, CachedFile>,
}

impl LocalCache {
    fn path(dir: &Path) -> std::path::PathBuf {
        dir.join("local.json")
    }

    /// The cache of the scope state folder `dir`; empty when missing or unreadable.
    pub fn load(dir: &Path) -> Arc<LocalCache> {
        CACHES
            .read(&Self::path(dir))
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    pub fn save(self, dir: &Path) -> SyncResult<()> {
        CACHES.write(&Self::path(dir), self).map(drop)
    }

    /// Whether the folder is exactly as the last clean pass left it, and that pass saw the
    /// manifest version `manifest`.
    pub fn is_clean(&self, walk: &Walk, manifest: Option<&str>) -> bool {
        manifest.is_some()
            && self.clean.as_deref() == manifest
            && self.files.len() == walk.len()
            && walk
                .iter()
                .all(|(rel, fp)| self.files.get(rel).is_some_and(|c| c.fp == *fp))
    }

    /// [`LocalCache::is_clean`], except that a file the last pass could not cache (it changed
    /// within the file-time window, [`SETTLE_NS`], so its fingerprint alone could not stand
    /// for its content) is read: it counts as unchanged when `read` gives the note id and
    /// sync hash it has now, `synced` gives that id the same hash (the pass sent or received
    /// it), and no cached file is that note. Reads only those files.
    pub fn is_clean_reading<'s>(
        &self,
        walk: &Walk,
        manifest: Option<&str>,
        mut read: impl FnMut(&str) -> Option<(String, String)>,
        synced: impl Fn(&str) -> Option<&'s str>,
    ) -> bool {
        if manifest.is_none() || self.clean.as_deref() != manifest {
            return false;
        }
        if self.files.keys().any(|rel| !walk.contains_key(rel)) {
            return false;
        }
        walk.iter().all(|(rel, fp)| match self.files.get(rel) {
            Some(c) => c.fp == *fp,
            None => read(rel).is_some_and(|(id, hash)| {
                synced(&id) == Some(hash.as_str()) && self.files.values().all(|c| c.id != id)
            }),
        })
    }

    /// The known hash of the file at `rel`, if it is unchanged and was the note `id`.
    pub fn hash_of(&self, walk: &Walk, rel: &str, id: &str) -> Option<&str> {
        let c = self.files.get(rel)?;
        (walk.get(rel) == Some(&c.fp) && c.id == id).then_some(c.hash.as_str())
    }
}

/// How recently changed a file may be and still be cached: file times are coarse (a few ms on
/// Linux, more elsewhere), so a second write within the same tick as the read, of the same
/// size, could leave the fingerprint as read. A file that changed this recently is read again
/// by the next pass instead.
const SETTLE_NS: i64 = 2_000_000_000;

impl Fingerprint {
    /// Whether the file last changed long enough before `now_ns` for its fingerprint to stand
    /// for its content.
    pub fn settled(&self, now_ns: i64) -> bool {
        now_ns - self.mtime_ns.max(self.ctime_ns) > SETTLE_NS
    }
}

/// The time now in the file system's terms (ns since the epoch).
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Every note file of a folder with its fingerprint, by relative path.
pub type Walk = BTreeMap<String, Fingerprint>;

/// Fingerprints every note file under `folder` (the files a scan lists), reading none.
pub fn walk(folder: &Path) -> SyncResult<Walk> {
    Ok(walk_of(&scan::list_files(folder)?))
}

/// The fingerprints of `files`, as a listing of the folder found them.
pub fn walk_of(files: &[scan::FoundFile]) -> Walk {
    files
        .iter()
        .map(|f| {
            let fp = Fingerprint {
                size: f.size,
                mtime_ns: f.mtime_ns,
                ctime_ns: f.ctime_ns,
                ino: f.ino,
            };
            (f.rel.clone(), fp)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_that_keeps_size_and_mtime_changes_the_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.md");
        std::fs::write(&f, "one\n").unwrap();
        let before = walk(dir.path()).unwrap();
        let mtime = std::fs::metadata(&f).unwrap().modified().unwrap();
        // Same size, and the modification time put back, as `touch -r` or `rsync -t` would.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&f, "two\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&f)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let after = walk(dir.path()).unwrap();
        assert_eq!(before["a.md"].size, after["a.md"].size);
        assert_eq!(before["a.md"].mtime_ns, after["a.md"].mtime_ns);
        assert_ne!(before["a.md"], after["a.md"]);

        let mut cache = LocalCache {
            clean: Some("v1".into()),
            ..Default::default()
        };
        cache.files.insert(
            "a.md".into(),
            CachedFile {
                fp: before["a.md"],
                id: "a".into(),
                hash: "h".into(),
            },
        );
        assert!(cache.is_clean(&before, Some("v1")));
        assert!(!cache.is_clean(&before, Some("v2")));
        assert!(!cache.is_clean(&before, None));
        assert!(!cache.is_clean(&after, Some("v1")));
        assert_eq!(cache.hash_of(&before, "a.md", "a"), Some("h"));
        assert_eq!(cache.hash_of(&after, "a.md", "a"), None);
        assert_eq!(cache.hash_of(&before, "a.md", "b"), None);
    }

    #[test]
    fn a_file_too_recent_to_cache_is_clean_when_it_reads_as_synced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.md"), "one\n").unwrap();
        std::fs::write(dir.path().join("b.md"), "two\n").unwrap();
        let w = walk(dir.path()).unwrap();
        // The last pass cached a.md; b.md had just changed.
        let mut cache = LocalCache {
            clean: Some("v1".into()),
            ..Default::default()
        };
        cache.files.insert(
            "a.md".into(),
            CachedFile {
                fp: w["a.md"],
                id: "a".into(),
                hash: "ha".into(),
            },
        );
        assert!(!cache.is_clean(&w, Some("v1")));
        let synced = |id: &str| -> Option<&'static str> {
            match id {
                "a" => Some("ha"),
                "b" => Some("hb"),
                _ => None,
            }
        };
        let mut reads = Vec::new();
        let read = |rel: &str| {
            reads.push(rel.to_owned());
            Some(("b".to_owned(), "hb".to_owned()))
        };
        assert!(cache.is_clean_reading(&w, Some("v1"), read, synced));
        assert_eq!(reads, ["b.md"], "only the file not cached is read");
        // Changed since it was sent, a note never synced, or a second file of a cached note.
        assert!(!cache.is_clean_reading(
            &w,
            Some("v1"),
            |_| Some(("b".into(), "hx".into())),
            synced
        ));
        assert!(!cache.is_clean_reading(
            &w,
            Some("v1"),
            |_| Some(("c".into(), "hc".into())),
            synced
        ));
        assert!(!cache.is_clean_reading(
            &w,
            Some("v1"),
            |_| Some(("a".into(), "ha".into())),
            synced
        ));
        assert!(!cache.is_clean_reading(&w, Some("v1"), |_| None, synced));
        assert!(!cache.is_clean_reading(
            &w,
            Some("v2"),
            |_| Some(("b".into(), "hb".into())),
            synced
        ));
        // A cached file gone is a change.
        std::fs::remove_file(dir.path().join("a.md")).unwrap();
        let gone = walk(dir.path()).unwrap();
        assert!(!cache.is_clean_reading(
            &gone,
            Some("v1"),
            |_| Some(("b".into(), "hb".into())),
            synced
        ));
    }
}
