//! Reading scope folders into index rows, and the start-up repair scan that brings the index in
//! step with whatever happened to the files while no watcher ran (an editor, Obsidian, git pull).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use memoria_shared::note::{FileContext, Note};
use memoria_shared::slugify;

use crate::error::{Error, Result};
use crate::fsx::{ASIDE_MARK, TEMP_MARK};
use crate::guard::{self, SECRETS_TAG};
use crate::index::{FileRow, Index, IndexedNote};

/// A file found in a scope folder, with what its `lstat` said when it was listed.
#[derive(Debug, Clone)]
pub struct FoundFile {
    pub abs: PathBuf,
    /// Relative to the scope folder, `/`-separated.
    pub rel: String,
    pub mtime_ns: i64,
    pub size: i64,
    /// Change time (ns), 0 where the system has none.
    pub ctime_ns: i64,
    /// Inode, 0 where the system has none.
    pub ino: u64,
}

impl FoundFile {
    /// The file at `abs` (`rel` in its scope folder) as it is now.
    pub fn stat(abs: &Path, rel: &str) -> Result<FoundFile> {
        let meta = fs::symlink_metadata(abs).map_err(Error::io("stat", abs))?;
        Ok(found_file(abs.to_path_buf(), rel.to_owned(), &meta))
    }
}

fn found_file(abs: PathBuf, rel: String, meta: &fs::Metadata) -> FoundFile {
    let (ctime_ns, ino) = change_time_and_inode(meta);
    FoundFile {
        abs,
        rel,
        mtime_ns: mtime_ns(meta),
        size: meta.len() as i64,
        ctime_ns,
        ino,
    }
}

/// A scope folder as one walk found it: its note files, by relative path, and the hidden
/// leftovers of writes a crash interrupted.
#[derive(Debug, Default)]
struct Listing {
    files: Vec<FoundFile>,
    /// Copies [`fsx::replace`](crate::fsx::replace) moved aside, with the folder they are in.
    asides: Vec<(PathBuf, PathBuf)>,
    /// Temp files of atomic writes.
    temps: Vec<PathBuf>,
}

/// What a scan changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanStats {
    pub added: usize,
    pub updated: usize,
    pub removed: usize,
}

impl ScanStats {
    pub fn changed(&self) -> bool {
        self.added + self.updated + self.removed > 0
    }
    pub fn add(&mut self, o: ScanStats) {
        self.added += o.added;
        self.updated += o.updated;
        self.removed += o.removed;
    }
}

/// Whether a path is a Markdown note file (not hidden, not a temp file).
pub fn is_note_file(name: &str) -> bool {
    !name.starts_with('.') && (name.ends_with(".md") || name.ends_with(".markdown"))
}

/// Every note file under `dir`, recursively, skipping hidden folders (`.obsidian`, `.git`).
pub fn list_files(dir: &Path) -> Result<Vec<FoundFile>> {
    Ok(walk_folder(dir)?.files)
}

/// Lists `dir` for a scan, in one walk when nothing was left over: copies a crash left aside
/// are put back first (then the folder is listed again), and old temp files are removed.
pub fn list_for_scan(dir: &Path) -> Result<Vec<FoundFile>> {
    let mut listing = walk_folder(dir)?;
    if !listing.asides.is_empty() {
        for (folder, aside) in &listing.asides {
            crate::fsx::recover_aside(folder, aside);
        }
        listing = walk_folder(dir)?;
    }
    remove_old_temp_files(&listing.temps);
    Ok(listing.files)
}

/// Walks `dir` once: note files (each `lstat`ed, never followed), and the hidden files of
/// interrupted writes in the folders it lists.
fn walk_folder(dir: &Path) -> Result<Listing> {
    let mut out = Listing::default();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, prefix)) = stack.pop() {
        let entries = match fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(Error::Io {
                    op: "read folder",
                    path: d,
                    source: e,
                });
            }
        };
        // This folder's note files, stat'ed once it is listed (and closed with them).
        let mut notes = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("read folder", &d)(e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "node_modules" {
                continue;
            }
            let ft = entry
                .file_type()
                .map_err(|e| Error::io("stat", entry.path())(e))?;
            if let Some(stem) = name.strip_prefix('.') {
                if ft.is_file() {
                    if stem.contains(ASIDE_MARK) {
                        out.asides.push((d.clone(), entry.path()));
                    } else if name.contains(TEMP_MARK) {
                        out.temps.push(entry.path());
                    }
                }
                continue;
            }
            let rel = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            if ft.is_dir() {
                stack.push((entry.path(), rel));
            } else if is_note_file(&name) {
                // Regular files, and anything else with a note's name (a symbolic link, a
                // pipe): those are listed so they are reported and never read as "no note".
                notes.push((entry, rel));
            }
        }
        out.files.extend(stat_all(notes)?);
    }
    out.files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// Fewest note files of one folder that are stat'ed on more than one thread: below it, starting
/// the threads costs more than they save.
const PARALLEL_STAT_MIN: usize = 256;

/// `lstat`s the note files one folder listed, on up to four threads when there are many: in a
/// folder of thousands of notes those calls are most of a walk, and each is independent.
fn stat_all(notes: Vec<(fs::DirEntry, String)>) -> Result<Vec<FoundFile>> {
    let stat = |(entry, rel): (fs::DirEntry, String)| -> Result<FoundFile> {
        let meta = entry
            .metadata()
            .map_err(|e| Error::io("stat", entry.path())(e))?;
        Ok(found_file(entry.path(), rel, &meta))
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    if threads < 2 || notes.len() < PARALLEL_STAT_MIN {
        return notes.into_iter().map(stat).collect();
    }
    let per = notes.len().div_ceil(threads);
    let mut rest = notes.into_iter();
    let chunks: Vec<Vec<_>> = std::iter::from_fn(|| {
        let chunk: Vec<_> = rest.by_ref().take(per).collect();
        (!chunk.is_empty()).then_some(chunk)
    })
    .collect();
    std::thread::scope(|s| {
        let running: Vec<_> = chunks
            .into_iter()
            .map(|chunk| s.spawn(move || chunk.into_iter().map(stat).collect::<Result<Vec<_>>>()))
            .collect();
        let mut files = Vec::new();
        for r in running {
            files.extend(r.join().expect("a stat thread does not panic")?);
        }
        Ok(files)
    })
}

#[cfg(unix)]
fn change_time_and_inode(meta: &fs::Metadata) -> (i64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.ctime() * 1_000_000_000 + meta.ctime_nsec(), meta.ino())
}

#[cfg(not(unix))]
fn change_time_and_inode(_meta: &fs::Metadata) -> (i64, u64) {
    (0, 0)
}

pub fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Largest note file that is read. A bigger file is listed with an error and never read whole:
/// a note is a page of text, and reading a file of any size would let one stray export or log
/// file hold the whole index hostage.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The size recorded for a file that could not be read: never a real size, so every scan
/// tries it again.
pub const UNREADABLE_SIZE: i64 = -1;

/// Reads at most [`MAX_FILE_BYTES`] + 1 bytes of a file, so an oversized file is known as such
/// without reading it all.
pub fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    fs::File::open(path)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The bytes of the note file at `path`, which must be a regular file: a symbolic link is
/// not followed (it could lead out of the notes folder) and a pipe is never opened (reading it
/// would block). A file over [`MAX_FILE_BYTES`] is an error of kind `FileTooLarge`, never a
/// truncated text.
pub fn read_note_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    if !fs::symlink_metadata(path)?.is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a symbolic link, a pipe or a device): Memoria reads only regular files in a notes folder",
        ));
    }
    let bytes = read_capped(path)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!(
                "the file is larger than {} MiB and is not read: split it into smaller notes",
                MAX_FILE_BYTES >> 20
            ),
        ));
    }
    Ok(bytes)
}

/// Reads one file into an index row. A file that does not parse still gets a row: its error,
/// an id from its name, and its text as body; such rows are listed but never recalled. A file
/// that cannot be read (not a regular file, since symbolic links in a notes folder are not
/// followed; permissions; a cloud drive's placeholder; a lock) gets a row with the reason and no
/// text, so it is reported and held back from sync, never taken for a deleted note. A file
/// whose text trips the credential guard is marked [`SECRETS_TAG`] in its row (the file itself
/// is not changed), which keeps it from every agent.
pub fn read_file(scope: &str, f: &FoundFile) -> Result<IndexedNote> {
    let bytes = match read_note_bytes(&f.abs) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
            return Ok(error_row(scope, f, String::new(), e.to_string()));
        }
        Err(e) => {
            let unread = FoundFile {
                size: UNREADABLE_SIZE,
                ..f.clone()
            };
            return Ok(error_row(
                scope,
                &unread,
                String::new(),
                format!("cannot be read: {e}"),
            ));
        }
    };
    let ctx = FileContext {
        relative_path: &f.rel,
    };
    let path = f.abs.to_string_lossy().into_owned();
    let (text, utf8_error) = match String::from_utf8(bytes) {
        Ok(t) => (t, None),
        Err(e) => (
            String::from_utf8_lossy(e.as_bytes()).into_owned(),
            Some("the file is not UTF-8 text".to_owned()),
        ),
    };
    let parsed = match utf8_error {
        Some(e) => Err(e),
        None => Note::parse(&text, ctx).map_err(|e| e.to_string()),
    };
    Ok(match parsed {
        Ok(note) => {
            let mut tags = note.tags.clone();
            if !tags.iter().any(|t| t == SECRETS_TAG) && guard::scan(&text).is_some() {
                tags.push(SECRETS_TAG.to_owned());
            }
            IndexedNote {
                path,
                scope: scope.to_owned(),
                rel_path: f.rel.clone(),
                id: note.id.to_string(),
                summary: shown_summary(&note.summary),
                note_type: note.note_type.as_ref().map(|t| t.as_str().to_owned()),
                tags,
                created_at: note.created_at,
                updated_at: note.updated_at,
                hash: Some(note.content_hash().to_string()),
                trust: note.trust.map(|t| enum_name(&t)),
                source: note.source.map(|s| enum_name(&s)),
                importance: note.importance,
                status: note.status.map(|s| enum_name(&s)),
                mtime_ns: f.mtime_ns,
                size: f.size,
                error: None,
                aliases: note.aliases(),
                links: note
                    .links()
                    .iter()
                    .map(|l| slugify(l).to_string())
                    .collect(),
                relations: note
                    .relations
                    .iter()
                    .map(|r| (enum_name(&r.kind), slugify(&r.target).to_string()))
                    .collect(),
                body: note.body,
            }
        }
        Err(error) => error_row(scope, f, text, error),
    })
}

/// A summary as lists show it: one the credential guard matches (often a note's first line,
/// made its summary by an import) is named by the rule instead, so no list, index or hook
/// prints the secret. The file keeps it until the person changes it.
pub fn shown_summary(summary: &str) -> String {
    match guard::scan(summary) {
        Some(f) => format!(
            "[held back: the summary looks like a credential ({})]",
            f.rule
        ),
        None => summary.to_owned(),
    }
}

/// The row of a file that does not parse (or cannot be read): its error, an id from its name,
/// and [`SECRETS_TAG`] when its text trips the credential guard.
fn error_row(scope: &str, f: &FoundFile, text: String, error: String) -> IndexedNote {
    let ctx = FileContext {
        relative_path: &f.rel,
    };
    let tags = if guard::scan(&text).is_some() {
        vec![SECRETS_TAG.to_owned()]
    } else {
        Vec::new()
    };
    let summary = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && *l != "---")
        .unwrap_or("");
    IndexedNote {
        path: f.abs.to_string_lossy().into_owned(),
        scope: scope.to_owned(),
        rel_path: f.rel.clone(),
        id: ctx.derived_id().to_string(),
        summary: summary.chars().take(280).collect(),
        note_type: None,
        tags,
        created_at: None,
        updated_at: None,
        hash: None,
        trust: None,
        source: None,
        importance: None,
        status: None,
        mtime_ns: f.mtime_ns,
        size: f.size,
        error: Some(error),
        aliases: Vec::new(),
        links: Vec::new(),
        relations: Vec::new(),
        body: text,
    }
}

/// The serde name of a unit enum variant (`Trust::Owner` → `owner`).
fn enum_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// Brings the index rows of one scope in step with its folder, in one walk of it. Only changed
/// files are read. Copies moved aside are left alone: a watcher rescans while its own process
/// replaces a file, and must not put the old version back in the middle.
pub fn rescan(index: &mut Index, scope: &str, dir: &Path) -> Result<ScanStats> {
    let listing = walk_folder(dir)?;
    let stats = rescan_listed(index, scope, &listing.files)?;
    remove_old_temp_files(&listing.temps);
    Ok(stats)
}

/// [`rescan`] against `files`, the folder as listed by [`list_for_scan`] (or [`list_files`]).
pub fn rescan_listed(index: &mut Index, scope: &str, files: &[FoundFile]) -> Result<ScanStats> {
    rescan_listed_rows(index, scope, files).map(|(stats, _)| stats)
}

/// [`rescan_listed`], also giving the scope's files as [`Index::files`] gives them once the
/// rescan is done, without asking the index again.
pub fn rescan_listed_rows(
    index: &mut Index,
    scope: &str,
    files: &[FoundFile],
) -> Result<(ScanStats, Vec<FileRow>)> {
    let mut rows = index.files(scope)?;
    // What is left of it once every listed file is taken out is gone from the folder.
    let mut unlisted = vec![true; rows.len()];
    let mut stats = ScanStats::default();
    let mut upserts = Vec::new();
    {
        let known: HashMap<&str, usize> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| (r.path.as_str(), i))
            .collect();
        for f in files {
            match known.get(&*f.abs.to_string_lossy()) {
                Some(&i) => {
                    unlisted[i] = false;
                    if rows[i].mtime_ns == f.mtime_ns && rows[i].size == f.size {
                        continue;
                    }
                    stats.updated += 1;
                }
                None => stats.added += 1,
            }
            upserts.push(read_file(scope, f)?);
        }
    }
    let removals: Vec<String> = rows
        .iter()
        .zip(&unlisted)
        .filter(|(_, gone)| **gone)
        .map(|(r, _)| r.path.clone())
        .collect();
    stats.removed = removals.len();
    if stats.changed() {
        index.apply(&upserts, &removals)?;
        let replaced: HashSet<&str> = upserts.iter().map(|n| n.path.as_str()).collect();
        let mut gone = unlisted.into_iter();
        rows.retain(|r| !gone.next().unwrap_or(true) && !replaced.contains(r.path.as_str()));
        rows.extend(upserts.iter().map(FileRow::of));
        // As the index orders them: by id, then path, byte by byte.
        rows.sort_by(|a, b| (&a.id, &a.path).cmp(&(&b.id, &b.path)));
    }
    Ok((stats, rows))
}

/// Temp files of writes that were interrupted (a crash, kill -9). They are never the only copy
/// of anything: the rename is the commit. Old ones are removed by a scan.
pub fn stale_temp_files(dir: &Path) -> Vec<PathBuf> {
    walk_folder(dir).map(|l| l.temps).unwrap_or_default()
}

fn remove_old_temp_files(temps: &[PathBuf]) {
    for p in temps {
        let old = fs::metadata(p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(600));
        if old {
            let _ = fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(dir: &Path, rel: &str, text: &[u8]) -> FoundFile {
        let abs = dir.join(rel);
        fs::write(&abs, text).unwrap();
        FoundFile::stat(&abs, rel).unwrap()
    }

    #[test]
    fn an_oversized_file_is_listed_with_an_error_and_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let big = vec![b'a'; (MAX_FILE_BYTES as usize) * 2];
        let row = read_file("user", &found(tmp.path(), "huge.md", &big)).unwrap();
        assert!(
            row.error.as_deref().unwrap().contains("larger than"),
            "{row:?}"
        );
        assert!(row.body.is_empty());
        assert_eq!(row.size, big.len() as i64);
        let ok = vec![b'a'; MAX_FILE_BYTES as usize];
        let row = read_file("user", &found(tmp.path(), "edge.md", &ok)).unwrap();
        assert_eq!(row.error, None);
    }

    #[test]
    fn a_summary_made_of_a_secret_is_listed_by_its_rule() {
        let tmp = tempfile::tempdir().unwrap();
        let text = "Prod DB: postgres://admin:s3cretPass@db.example.com/prod\n\nThe prod notes.\n";
        let row = read_file("user", &found(tmp.path(), "prod.md", text.as_bytes())).unwrap();
        assert!(!row.summary.contains("s3cretPass"), "{}", row.summary);
        assert!(row.summary.contains("held back"), "{}", row.summary);
        let plain = read_file("user", &found(tmp.path(), "db.md", b"The prod notes.\n")).unwrap();
        assert_eq!(plain.summary, "The prod notes.");
    }

    #[test]
    fn a_file_that_trips_the_guard_is_marked_in_its_row_only() {
        let tmp = tempfile::tempdir().unwrap();
        let text = "# VPN\nvpn password: Xk7-quokka-93\n";
        let row = read_file("user", &found(tmp.path(), "vpn.md", text.as_bytes())).unwrap();
        assert_eq!(row.tags, vec![SECRETS_TAG]);
        // The file is not changed, and its hash is the file's own.
        assert_eq!(fs::read_to_string(tmp.path().join("vpn.md")).unwrap(), text);
        let note = Note::parse(
            text,
            FileContext {
                relative_path: "vpn.md",
            },
        )
        .unwrap();
        assert_eq!(row.hash, Some(note.content_hash().to_string()));
        // A broken file that holds a secret is marked too.
        let broken = "---\nid: [x\n---\npassword: hunter22xyz\n";
        let row = read_file("user", &found(tmp.path(), "b.md", broken.as_bytes())).unwrap();
        assert!(
            row.error.is_some() && row.tags == vec![SECRETS_TAG],
            "{row:?}"
        );
        let plain = read_file("user", &found(tmp.path(), "p.md", b"just text\n")).unwrap();
        assert!(plain.tags.is_empty());
    }

    #[test]
    fn a_rescan_gives_the_rows_the_index_then_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("notes");
        fs::create_dir_all(dir.join("sub")).unwrap();
        let mut index = Index::open(&tmp.path().join("index.db")).unwrap();
        for i in 0..5 {
            fs::write(
                dir.join(format!("n{i}.md")),
                format!("---\nid: n{i}\n---\nbody {i}\n"),
            )
            .unwrap();
        }
        let check = |index: &mut Index| {
            let files = list_for_scan(&dir).unwrap();
            let (_, rows) = rescan_listed_rows(index, "user", &files).unwrap();
            assert_eq!(rows, index.files("user").unwrap());
            rows
        };
        assert_eq!(check(&mut index).len(), 5);
        // Unchanged: the same rows.
        assert_eq!(check(&mut index).len(), 5);
        // One edited (a new size), one removed, one added, one file claiming another's id, and
        // one broken: each row as the index stores it, in its order.
        fs::write(dir.join("n1.md"), "---\nid: n1\n---\na longer body now\n").unwrap();
        fs::remove_file(dir.join("n2.md")).unwrap();
        fs::write(dir.join("sub/new.md"), "---\nid: a-new\n---\nnew\n").unwrap();
        fs::write(dir.join("sub/twin.md"), "---\nid: n3\n---\ntwin\n").unwrap();
        fs::write(dir.join("broken.md"), "---\nid: [x\n---\nbroken\n").unwrap();
        let rows = check(&mut index);
        assert_eq!(rows.len(), 7, "{rows:?}");
        assert!(rows.iter().any(|r| r.error.is_some()));
    }

    #[test]
    fn a_folder_of_many_notes_is_listed_whole_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let n = PARALLEL_STAT_MIN * 3 + 7;
        for i in 0..n {
            fs::write(tmp.path().join(format!("{i:05}.md")), "x".repeat(i % 13)).unwrap();
        }
        let files = list_files(tmp.path()).unwrap();
        assert_eq!(files.len(), n);
        for (i, f) in files.iter().enumerate() {
            assert_eq!(f.rel, format!("{i:05}.md"));
            assert_eq!(f.size, (i % 13) as i64);
        }
    }
}
