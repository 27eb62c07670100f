//! Crash-safe file writes. Every note, backup and config file goes through [`write_atomic`]:
//! a reader (or a machine that lost power) sees the old file or the new one, never a torn one.
//! [`replace`] and [`create_new`] also never overwrite what another program (an editor's
//! autosave) wrote between our read and our write; [`remove_checked`] never deletes it.
//!
//! Modes: a rewritten file keeps its mode; a new file is as private as its folder (the folder's
//! read and write bits, always read-write for the owner): 0600 inside the 0700 home, the
//! repository's usual 0644 in a project's `MEMORY/`.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Prefix of temporary files; scans skip them (they start with a dot).
pub const TEMP_MARK: &str = ".tmp-";

/// Test helper: moves `path`'s modification time 5 s ahead, so a rewrite of the same size within
/// one clock tick still looks changed to a check of size and time.
#[cfg(any(test, feature = "test-hooks"))]
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
/// one after another. Each folder is synced once at the end, also on several threads. On error,
/// files written so far stay (each complete) and the first error is returned.
pub fn write_many_atomic(files: &[(std::path::PathBuf, Vec<u8>)]) -> Result<()> {
    let written = on_threads(files, |(path, bytes)| write_atomic_inner(path, bytes));
    let mut dirs: Vec<&Path> = files.iter().filter_map(|(p, _)| p.parent()).collect();
    dirs.sort();
    dirs.dedup();
    let _ = on_threads(&dirs, |d| {
        sync_dir(d);
        Ok(())
    });
    written
}

/// Runs `f` on every item, on a few threads; a thread stops at its first error. Returns the
/// first error once every thread has stopped.
fn on_threads<T: Sync>(items: &[T], f: impl Fn(&T) -> Result<()> + Sync) -> Result<()> {
    const THREADS: usize = 8;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let first_error: std::sync::Mutex<Option<Error>> = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..THREADS.min(items.len()) {
            s.spawn(|| {
                while let Some(item) =
                    items.get(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                {
                    if let Err(e) = f(item) {
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
    match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn write_atomic_inner(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = write_temp(path, bytes)?;
    fs::rename(&tmp, path).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        Error::io("rename into place", path)(e)
    })
}

/// Writes `bytes` to a new temp file beside `path` (fsynced, with the mode `path` has or, for a
/// new file, the mode its folder implies) and returns the temp file's path.
fn write_temp(path: &Path, bytes: &[u8]) -> Result<PathBuf> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::Internal(format!("{} has no parent folder", path.display())))?;
    if !dir.is_dir() {
        create_dirs(dir).map_err(Error::io("create folder", dir))?;
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dir.join(format!(".{name}{TEMP_MARK}{}", random_hex(6)));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(Error::io("create", &tmp))?;
        set_mode(&f, mode_for(path, dir)).map_err(Error::io("set permissions", &tmp))?;
        f.write_all(bytes).map_err(Error::io("write", &tmp))?;
        f.sync_all().map_err(Error::io("sync", &tmp))?;
        Ok(())
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Creates `dir` and its missing parents as private as the nearest folder that exists.
fn create_dirs(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let mode = dir
            .ancestors()
            .skip(1)
            .find_map(|a| fs::metadata(a).ok())
            .map_or(0o700, |m| m.permissions().mode() & 0o777);
        fs::DirBuilder::new().recursive(true).mode(mode).create(dir)
    }
    #[cfg(not(unix))]
    fs::create_dir_all(dir)
}

/// The mode of the file at `path`, or for a new file the folder's read and write bits plus
/// read-write for the owner.
#[cfg(unix)]
fn mode_for(path: &Path, dir: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = fs::metadata(path) {
        return m.permissions().mode() & 0o7777;
    }
    let folder = fs::metadata(dir).map_or(0o700, |m| m.permissions().mode());
    (folder & 0o666) | 0o600
}

#[cfg(not(unix))]
fn mode_for(_path: &Path, _dir: &Path) -> u32 {
    0
}

#[cfg(unix)]
fn set_mode(f: &File, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(_f: &File, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// Makes a folder private to the user (0700), creating it if needed.
pub fn private_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(Error::io("create folder", dir))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .map_err(Error::io("set permissions", dir))?;
    }
    Ok(())
}

/// Makes an existing file private to the user (0600); a missing file is fine.
pub fn private_file(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        match fs::set_permissions(path, fs::Permissions::from_mode(0o600)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io("set permissions", path)(e));
            }
            _ => {}
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Marks the copy [`replace`] and [`remove_checked`] move a file to while they check it.
pub const ASIDE_MARK: &str = ".aside-";

/// Points in [`replace`] and [`remove_checked`] where a test can act as another program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The current file is about to be moved aside.
    BeforeMoveAside,
    /// The current file was just moved aside.
    MovedAside,
    /// The old version is kept; the new file is about to be put in place.
    BeforeInstall,
}

/// A test's stand-in for another program writing at a [`Step`].
#[cfg(any(test, feature = "test-hooks"))]
pub type Hook = Box<dyn FnMut(Step, &Path)>;

#[cfg(any(test, feature = "test-hooks"))]
thread_local! {
    static HOOK: std::cell::RefCell<Option<Hook>> = const { std::cell::RefCell::new(None) };
}

/// Runs `hook` at each [`Step`] of replacements on this thread (tests only).
#[cfg(any(test, feature = "test-hooks"))]
pub fn set_hook(hook: Option<Hook>) {
    HOOK.with(|h| *h.borrow_mut() = hook);
}

fn step(s: Step, path: &Path) {
    #[cfg(any(test, feature = "test-hooks"))]
    HOOK.with(|h| {
        if let Some(f) = h.borrow_mut().as_mut() {
            f(s, path)
        }
    });
    #[cfg(not(any(test, feature = "test-hooks")))]
    let _ = (s, path);
}

/// Moves `path` aside atomically: the rename captures whatever is there at this instant.
fn move_aside(path: &Path) -> Result<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let aside = dir.join(format!(".{name}{ASIDE_MARK}{}", random_hex(6)));
    match fs::rename(path, &aside) {
        Ok(()) => Ok(aside),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::ChangedMeanwhile {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(Error::io("move aside", path)(e)),
    }
}

/// Puts an aside copy back at `path` unless something new is there; then the copy is no
/// longer needed only if it went back, so otherwise it is handed to `keep`.
fn put_back(aside: &Path, path: &Path, keep: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
    match fs::hard_link(aside, path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            // Something newer took the name: the version we moved aside is kept as a backup.
            let bytes = fs::read(aside).map_err(Error::io("read", aside))?;
            keep(&bytes)?;
        }
        Err(e) => return Err(Error::io("put back", path)(e)),
    }
    remove(aside)
}

/// Replaces the file at `path` with `bytes`, only if it still holds `expected`, without a gap
/// another program's write can fall into: the current file is moved aside (the rename captures
/// whatever is there now), compared with `expected`, handed to `keep_old` (which makes the
/// backup), and the new file is then linked into place, which fails rather than replace a file
/// that appeared meanwhile. Anything another program wrote is left in place or kept through
/// `keep_old`; then the error is [`Error::ChangedMeanwhile`].
pub fn replace(
    path: &Path,
    expected: &[u8],
    bytes: &[u8],
    keep_old: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let tmp = write_temp(path, bytes)?;
    let result = (|| {
        let aside = take_aside(path, expected, keep_old)?;
        step(Step::BeforeInstall, path);
        let installed = fs::hard_link(&tmp, path);
        // The old version is kept (or was not wanted); what another program wrote is in place.
        remove(&aside)?;
        match installed {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(Error::ChangedMeanwhile {
                    path: path.to_path_buf(),
                })
            }
            Err(e) => Err(Error::io("put into place", path)(e)),
        }
    })();
    let _ = fs::remove_file(&tmp);
    if let Some(dir) = path.parent() {
        sync_dir(dir);
    }
    result
}

/// Moves the file at `path` aside (the rename captures whatever is there at that instant),
/// checks it still holds `expected` and hands it to `keep_old`. Returns the aside path, whose
/// file the caller removes once the new state is in place. A different file, or a failing
/// `keep_old`, puts the file back: [`Error::ChangedMeanwhile`] or `keep_old`'s error.
fn take_aside(
    path: &Path,
    expected: &[u8],
    keep_old: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<PathBuf> {
    step(Step::BeforeMoveAside, path);
    let aside = move_aside(path)?;
    step(Step::MovedAside, path);
    let captured = fs::read(&aside).map_err(Error::io("read", &aside))?;
    if captured != expected {
        put_back(&aside, path, keep_old)?;
        return Err(Error::ChangedMeanwhile {
            path: path.to_path_buf(),
        });
    }
    if let Err(e) = keep_old(&captured) {
        put_back(&aside, path, &mut |_| Ok(()))?;
        return Err(e);
    }
    Ok(aside)
}

/// Writes a new file at `path`, refusing (with `AlreadyExists`) if any file is there already,
/// even one created a moment ago.
pub fn create_new(path: &Path, bytes: &[u8]) -> Result<bool> {
    let tmp = write_temp(path, bytes)?;
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    if let Some(dir) = path.parent() {
        sync_dir(dir);
    }
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Error::io("create", path)(e)),
    }
}

/// Removes `path` only if it still holds `expected`, handing the removed bytes to `keep_old`
/// (the backup) before they are gone. A different file is left in place:
/// [`Error::ChangedMeanwhile`].
pub fn remove_checked(
    path: &Path,
    expected: &[u8],
    keep_old: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<()> {
    let aside = take_aside(path, expected, keep_old)?;
    remove(&aside)?;
    if fs::symlink_metadata(path).is_ok() {
        // Another program saved the note again meanwhile: that version stays.
        return Err(Error::ChangedMeanwhile {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Puts back a copy a crash left aside in `dir` (its note file missing), or drops it when its
/// note file is back. Runs before a folder is scanned.
pub fn recover_aside(dir: &Path, aside: &Path) {
    let Some(name) = aside.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let Some((original, _)) = name
        .strip_prefix('.')
        .and_then(|stem| stem.rsplit_once(ASIDE_MARK))
    else {
        return;
    };
    let target = dir.join(original);
    if fs::hard_link(aside, &target).is_ok() || target.exists() {
        let _ = fs::remove_file(aside);
    }
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
    let mut options = OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map_err(Error::io("open lock", path))
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
