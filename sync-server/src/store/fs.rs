//! The filesystem store: a directory, the embedded default for self-hosting.
//!
//! Each key is a file under the root. Writes go to a temporary file in the same directory and
//! are renamed into place, so readers never see half a value and need no lock. Conditional
//! writes hold an exclusive `flock` on one of [`LOCK_STRIPES`] lock files (chosen by the key)
//! for the whole check-and-write; `flock` excludes other threads and other processes alike, so
//! two servers may share one directory. ETags are derived from the content.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use memoria_shared::hash::sha256_hex;

use super::{ETag, Fetched, Object, ObjectStore, StoreError, check_key};

/// Number of lock files; keys hash onto them, so writes to different keys rarely wait.
pub const LOCK_STRIPES: u64 = 64;

const LOCK_DIR: &str = ".locks";

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A store in a local directory.
#[derive(Debug, Clone)]
pub struct FsStore {
    root: Arc<PathBuf>,
}

impl FsStore {
    /// Opens (creating if needed) the store at `root`.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        private_dirs(&root.join(LOCK_DIR)).map_err(|e| {
            StoreError::Other(format!(
                "cannot create the store directory {}: {e}",
                root.display()
            ))
        })?;
        Ok(FsStore {
            root: Arc::new(root.to_path_buf()),
        })
    }

    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        check_key(key)?;
        Ok(self.root.join(key))
    }

    /// Runs `f` while holding the exclusive lock for `key`, on a blocking thread.
    async fn locked<T: Send + 'static>(
        &self,
        key: &str,
        f: impl FnOnce(&Path) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let path = self.path(key)?;
        let lock_path = self
            .root
            .join(LOCK_DIR)
            .join(format!("{}.lock", stripe(key)));
        blocking(move || {
            let lock = private_file()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)
                .map_err(StoreError::other)?;
            fs4::fs_std::FileExt::lock_exclusive(&lock).map_err(StoreError::other)?;
            let out = f(&path);
            drop(lock); // closing the file releases the flock
            out
        })
        .await
    }
}

fn stripe(key: &str) -> u64 {
    // FNV-1a: stable across processes and versions, which a std hasher is not.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h % LOCK_STRIPES
}

fn etag_of(bytes: &[u8]) -> ETag {
    ETag(format!("\"{}\"", &sha256_hex(bytes)[..32]))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Other(format!("store task failed: {e}")))?
}

fn read(path: &Path) -> Result<Vec<u8>, StoreError> {
    match fs::read(path) {
        Ok(b) => Ok(b),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(StoreError::NotFound),
        Err(e) if e.kind() == io::ErrorKind::IsADirectory => Err(StoreError::NotFound),
        Err(e) => Err(StoreError::other(e)),
    }
}

/// Creates `dir` and its missing parents readable by the server's user only (0700), whatever the
/// umask: the store holds every account's notes.
fn private_dirs(dir: &Path) -> io::Result<()> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir)
}

/// Options for a new file readable by the server's user only (0600).
fn private_file() -> OpenOptions {
    let mut o = OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    o
}

/// Writes `bytes` to `path` atomically: temp file, fsync, rename, fsync the directory.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path
        .parent()
        .ok_or_else(|| StoreError::Other("key has no parent directory".into()))?;
    private_dirs(dir).map_err(StoreError::other)?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("object");
    let tmp = dir.join(format!(
        ".tmp-{}-{}-{name}",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| -> io::Result<()> {
        let mut f = private_file()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(StoreError::other)
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') {
            continue; // temp files and the lock directory are never keys
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            walk(root, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(root) {
            let key: Vec<&str> = rel.iter().filter_map(|c| c.to_str()).collect();
            out.push(key.join("/"));
        }
    }
    Ok(())
}

#[async_trait::async_trait]
impl ObjectStore for FsStore {
    async fn get(&self, key: &str, if_none_match: Option<&ETag>) -> Result<Fetched, StoreError> {
        let path = self.path(key)?;
        let validator = if_none_match.cloned();
        blocking(move || {
            let bytes = read(&path)?;
            let etag = etag_of(&bytes);
            if validator.as_ref() == Some(&etag) {
                return Ok(Fetched::NotModified);
            }
            Ok(Fetched::Object(Object { bytes, etag }))
        })
        .await
    }

    async fn put_if_match(
        &self,
        key: &str,
        bytes: Vec<u8>,
        etag: &ETag,
    ) -> Result<ETag, StoreError> {
        let expected = etag.clone();
        self.locked(key, move |path| {
            let current = match read(path) {
                Ok(b) => etag_of(&b),
                Err(StoreError::NotFound) => return Err(StoreError::PreconditionFailed),
                Err(e) => return Err(e),
            };
            if current != expected {
                return Err(StoreError::PreconditionFailed);
            }
            write_atomic(path, &bytes)?;
            Ok(etag_of(&bytes))
        })
        .await
    }

    async fn put_if_absent(&self, key: &str, bytes: Vec<u8>) -> Result<ETag, StoreError> {
        self.locked(key, move |path| {
            if path.exists() {
                return Err(StoreError::PreconditionFailed);
            }
            write_atomic(path, &bytes)?;
            Ok(etag_of(&bytes))
        })
        .await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        let root = self.root.clone();
        let prefix = prefix.to_owned();
        blocking(move || {
            // Walk only the deepest directory the prefix names in full.
            let dir = match prefix.rfind('/') {
                Some(i) => {
                    check_key(&prefix[..i])?;
                    root.join(&prefix[..i])
                }
                None => root.to_path_buf(),
            };
            let mut out = Vec::new();
            walk(&root, &dir, &mut out).map_err(StoreError::other)?;
            out.retain(|k| k.starts_with(&prefix));
            out.sort();
            Ok(out)
        })
        .await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.locked(key, |path| match fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::other(e)),
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every folder and file the store makes is its user's alone, whatever the umask allows.
    #[cfg(unix)]
    #[tokio::test]
    async fn the_store_is_private_to_its_user() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let store = FsStore::open(&root).unwrap();
        store
            .put_if_absent("users/alice/memory/manifest.json", b"{}".to_vec())
            .await
            .unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        for d in ["", "users", "users/alice", "users/alice/memory", LOCK_DIR] {
            assert_eq!(mode(&root.join(d)), 0o700, "{d}");
        }
        assert_eq!(mode(&root.join("users/alice/memory/manifest.json")), 0o600);
        for lock in fs::read_dir(root.join(LOCK_DIR)).unwrap() {
            assert_eq!(mode(&lock.unwrap().path()), 0o600);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn fs_store_passes_the_conformance_suite() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ObjectStore> = Arc::new(FsStore::open(dir.path()).unwrap());
        super::super::conformance::run_all(store, 200).await;
    }

    /// Two stores on one directory stand in for two server processes: each has its own lock
    /// file handles, so only `flock` keeps them apart.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_handles_on_one_directory_race_safely() {
        let dir = tempfile::tempdir().unwrap();
        let a: Arc<dyn ObjectStore> = Arc::new(FsStore::open(dir.path()).unwrap());
        let b: Arc<dyn ObjectStore> = Arc::new(FsStore::open(dir.path()).unwrap());
        super::super::conformance::race_put_if_match(&[a, b], 50).await;
    }

    #[tokio::test]
    async fn keys_cannot_escape_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::open(&dir.path().join("store")).unwrap();
        for key in ["../x", "a/../../x", "/etc/passwd", ".locks/0.lock"] {
            assert!(
                matches!(
                    store.put_if_absent(key, b"x".to_vec()).await,
                    Err(StoreError::Other(_))
                ),
                "{key}"
            );
        }
        assert!(!dir.path().join("x").exists());
    }

    #[tokio::test]
    async fn temp_files_are_not_listed() {
        let dir = tempfile::tempdir().unwrap();
        let store = FsStore::open(dir.path()).unwrap();
        store.put_if_absent("a/b", b"1".to_vec()).await.unwrap();
        fs::write(dir.path().join("a/.tmp-1-b"), b"junk").unwrap();
        assert_eq!(store.list("a/").await.unwrap(), vec!["a/b".to_owned()]);
    }
}
