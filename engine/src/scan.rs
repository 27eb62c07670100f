//! Reading scope folders into index rows, and the start-up repair scan that brings the index in
//! step with whatever happened to the files while no watcher ran (an editor, Obsidian, git pull).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use memoria_shared::note::{FileContext, Note};
use memoria_shared::slugify;

use crate::error::{Error, Result};
use crate::fsx::TEMP_MARK;
use crate::index::{Index, IndexedNote};

/// A file found in a scope folder.
#[derive(Debug, Clone)]
pub struct FoundFile {
    pub abs: PathBuf,
    /// Relative to the scope folder, `/`-separated.
    pub rel: String,
    pub mtime_ns: i64,
    pub size: i64,
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
    let mut out = Vec::new();
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
        for entry in entries {
            let entry = entry.map_err(Error::io("read folder", &d))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "node_modules" {
                continue;
            }
            let ft = entry.file_type().map_err(Error::io("stat", entry.path()))?;
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
                let meta = entry.metadata().map_err(Error::io("stat", entry.path()))?;
                out.push(FoundFile {
                    abs: entry.path(),
                    rel,
                    mtime_ns: mtime_ns(&meta),
                    size: meta.len() as i64,
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

pub fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// The size recorded for a file that could not be read: never a real size, so every scan
/// tries it again.
pub const UNREADABLE_SIZE: i64 = -1;

/// Whether an index row stands for a file that could not be read.
pub fn is_unreadable(row: &IndexedNote) -> bool {
    row.size == UNREADABLE_SIZE
}

/// The bytes of the note file at `path`, which must be a regular file: a symbolic link is
/// not followed (it could lead out of the notes folder) and a pipe is never opened (reading it
/// would block).
pub fn read_note_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    if fs::symlink_metadata(path)?.is_file() {
        fs::read(path)
    } else {
        Err(std::io::Error::other(
            "not a regular file (a symbolic link, a pipe or a device): Memoria reads only regular files in a notes folder",
        ))
    }
}

/// Reads one file into an index row. A file that does not parse still gets a row: its error,
/// an id from its name, and its whole text as body so it stays searchable. A file that cannot
/// be read (not a regular file, since symbolic links in a notes folder are not followed;
/// permissions; a cloud drive's placeholder; a lock) gets a row with the reason and no text,
/// so it is reported and held back from sync, never taken for a deleted note.
pub fn read_file(scope: &str, f: &FoundFile) -> Result<IndexedNote> {
    let bytes = match read_note_bytes(&f.abs) {
        Ok(bytes) => bytes,
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
    let (text, utf8_error) = match String::from_utf8(bytes) {
        Ok(t) => (t, None),
        Err(e) => (
            String::from_utf8_lossy(e.as_bytes()).into_owned(),
            Some("the file is not UTF-8 text".to_owned()),
        ),
    };
    let ctx = FileContext {
        relative_path: &f.rel,
    };
    let parsed = match utf8_error {
        Some(e) => Err(e),
        None => Note::parse(&text, ctx).map_err(|e| e.to_string()),
    };
    let path = f.abs.to_string_lossy().into_owned();
    Ok(match parsed {
        Ok(note) => IndexedNote {
            path,
            scope: scope.to_owned(),
            rel_path: f.rel.clone(),
            id: note.id.to_string(),
            summary: note.summary.clone(),
            note_type: note.note_type.as_ref().map(|t| t.as_str().to_owned()),
            tags: note.tags.clone(),
            created_at: note.created_at,
            updated_at: note.updated_at,
            hash: Some(note.content_hash().to_string()),
            trust: note.trust.map(|t| enum_name(&t)),
            source: note.source.map(|s| enum_name(&s)),
            importance: note.importance,
            mtime_ns: f.mtime_ns,
            size: f.size,
            error: None,
            links: note
                .links()
                .iter()
                .map(|l| slugify(l).to_string())
                .collect(),
            body: note.body,
        },
        Err(error) => error_row(scope, f, text, error),
    })
}

/// The row of a file that does not parse (or cannot be read): its error, an id from its name.
fn error_row(scope: &str, f: &FoundFile, text: String, error: String) -> IndexedNote {
    let ctx = FileContext {
        relative_path: &f.rel,
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
        tags: Vec::new(),
        created_at: None,
        updated_at: None,
        hash: None,
        trust: None,
        source: None,
        importance: None,
        mtime_ns: f.mtime_ns,
        size: f.size,
        error: Some(error),
        links: Vec::new(),
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

/// Brings the index rows of one scope in step with its folder. Only changed files are read.
pub fn rescan(index: &mut Index, scope: &str, dir: &Path) -> Result<ScanStats> {
    let files = list_files(dir)?;
    let known: std::collections::HashMap<String, (i64, i64)> = index
        .file_states(scope)?
        .into_iter()
        .map(|(p, m, s)| (p, (m, s)))
        .collect();
    let mut stats = ScanStats::default();
    let mut upserts = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for f in &files {
        let key = f.abs.to_string_lossy().into_owned();
        match known.get(&key) {
            Some(&(m, s)) if m == f.mtime_ns && s == f.size => {}
            Some(_) => {
                stats.updated += 1;
                upserts.push(read_file(scope, f)?);
            }
            None => {
                stats.added += 1;
                upserts.push(read_file(scope, f)?);
            }
        }
        seen.insert(key);
    }
    let removals: Vec<String> = known
        .keys()
        .filter(|p| !seen.contains(*p))
        .cloned()
        .collect();
    stats.removed = removals.len();
    if stats.changed() {
        index.apply(&upserts, &removals)?;
    }
    clean_stale_temp_files(dir);
    Ok(stats)
}

/// Temp files of writes that were interrupted (a crash, kill -9). They are never the only copy
/// of anything: the rename is the commit. Old ones are removed.
pub fn stale_temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() && !name.starts_with('.') {
                stack.push(e.path());
            } else if ft.is_file() && name.starts_with('.') && name.contains(TEMP_MARK) {
                out.push(e.path());
            }
        }
    }
    out
}

fn clean_stale_temp_files(dir: &Path) {
    for p in stale_temp_files(dir) {
        let old = fs::metadata(&p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(600));
        if old {
            let _ = fs::remove_file(&p);
        }
    }
}
