//! Crash-safe file writes. Every note, backup and config file goes through [`write_atomic`]:
//! a reader (or a machine that lost power) sees the old file or the new one, never a torn one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Prefix of temporary files; scans skip them (they start with a dot).
pub const TEMP_MARK: &str = ".tmp-";

/// Test helper: moves `path`'s modification time 5 s ahead, so a rewrite of the same size within
/// one clock tick still looks changed to a check of size and time.
#[cfg(test)]
pub fn touch_later(path: &Path) {
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(later)
        .unwrap();
}

/// Writes `bytes` to `path` atomically: temp file in the same folder, fsync, rename, fsync folder.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_inner(path, bytes)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir);
    }
    Ok(())
}

/// Writes many files, each atomically as [`write_atomic`] does, on several threads: the
/// file-system journal then commits their fsyncs together, which is several times faster than
/// one after another. Each folder is synced once at the end. On error, files written so far stay
/// (each complete) and the first error is returned.
pub fn write_many_atomic(files: &[(std::path::PathBuf, Vec<u8>)]) -> Result<()> {
    const THREADS: usize = 8;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let first_error: std::sync::Mutex<Option<Error>> = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..THREADS.min(files.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some((path, bytes)) = files.get(i) else {
                        break;
                    };
                    if let Err(e) = write_atomic_inner(path, bytes) {
                        first_error
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(e);
                        break;
                    }
                }
            });
        }
    });
    let mut dirs: Vec<&Path> = files.iter().filter_map(|(p, _)| p.parent()).collect();
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        sync_dir(d);
    }
    match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn write_atomic_inner(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::Invalid(format!("{} has no parent folder", path.display())))?;
    fs::create_dir_all(dir).map_err(Error::io("create folder", dir))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}{TEMP_MARK}{}", random_hex(6)));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(Error::io("create", &tmp))?;
        f.write_all(bytes).map_err(Error::io("write", &tmp))?;
        f.sync_all().map_err(Error::io("sync", &tmp))?;
        drop(f);
        fs::rename(&tmp, path).map_err(Error::io("rename into place", path))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Removes a file and makes the removal durable.
pub fn remove(path: &Path) -> Result<()> {
    fs::remove_file(path).map_err(Error::io("remove", path))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir);
    }
    Ok(())
}

fn sync_dir(dir: &Path) {
    // Durability of the rename; not supported on every platform, so best effort.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// `n` random bytes as lowercase hex.
pub fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).expect("the OS random source is unavailable");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Holds an exclusive advisory lock on a file until dropped (works across processes).
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

impl FileLock {
    /// Blocks until the lock is held.
    pub fn acquire(path: &Path) -> Result<FileLock> {
        let f = open_lock_file(path)?;
        f.lock().map_err(Error::io("lock", path))?;
        Ok(FileLock { _file: f })
    }

    /// Takes the lock if nobody holds it.
    pub fn try_acquire(path: &Path) -> Result<Option<FileLock>> {
        let f = open_lock_file(path)?;
        match f.try_lock() {
            Ok(()) => Ok(Some(FileLock { _file: f })),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(Error::Io {
                op: "lock",
                path: path.into(),
                source: e,
            }),
        }
    }

    /// Whether another holder has the lock right now.
    pub fn is_held(path: &Path) -> bool {
        if !path.exists() {
            return false;
        }
        matches!(Self::try_acquire(path), Ok(None))
    }
}

fn open_lock_file(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(Error::io("create folder", dir))?;
    }
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(Error::io("open lock", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/a.md");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn write_many_writes_everything() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<_> = (0..50)
            .map(|i| {
                (
                    dir.path().join(format!("d{}/f{i}.md", i % 3)),
                    vec![b'x'; i],
                )
            })
            .collect();
        write_many_atomic(&files).unwrap();
        for (p, b) in &files {
            assert_eq!(&fs::read(p).unwrap(), b);
        }
        let blocked = vec![(dir.path().join("f0.md/inside"), vec![1u8])];
        std::fs::write(dir.path().join("f0.md"), "a file, not a folder").unwrap();
        assert!(write_many_atomic(&blocked).is_err());
    }

    #[test]
    fn lock_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let held = FileLock::acquire(&p).unwrap();
        assert!(FileLock::try_acquire(&p).unwrap().is_none());
        assert!(FileLock::is_held(&p));
        drop(held);
        assert!(FileLock::try_acquire(&p).unwrap().is_some());
    }
}
