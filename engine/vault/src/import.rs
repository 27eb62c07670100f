//! Import and export of plain Markdown folders: an Obsidian vault, OpenClaw's `MEMORY.md` +
//! `memory/*.md`, or a folder `memoria export` wrote. Re-importing the same folder changes
//! nothing. Re-import is a three-way decision, with the note as the last import wrote it as the
//! base: a changed source file replaces a note nobody changed here since (after a backup); a
//! note changed here since is never replaced — the source's new text goes into a note beside
//! it (`<id>-imported`, itself updated by later imports while nobody edits it), and the report
//! names both. Sources are never modified.
//!
//! A source file is identified by its folder, its path in that folder and its bytes: two folders'
//! `MEMORY.md` are two sources, and a file whose modification time alone changed is unchanged.
//! Every imported file passes the credential guard over its whole text, frontmatter included.
//!
//! A folder's meaning beyond each file's text is kept ([`obsidian`]): links resolved as
//! Obsidian resolves them are rewritten to the ids of the notes they name, attachments they
//! embed are copied into the scope folder's `attachments/`, inline tags become tags,
//! frontmatter dates become the note's times, and a note's folder is kept in its `folder` key
//! (never read as its type). What the import read beyond the file's own text is part of the
//! source version it records, so a link that comes to name another note re-imports its note.

mod obsidian;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use memoria_shared::note::{FileContext, Note};
use memoria_shared::{ContentHash, NoteId, slugify};
use serde_json::Value;

use crate::backup::{BackupReason, date_to_ms};
use crate::error::{Error, Result};
use crate::fsx;
use crate::guard::{self, SECRETS_TAG};
use crate::project::Scope;
use crate::scan;
use crate::vault::{Engine, ScopeChoice};
use obsidian::Rewrite;

/// One file that was not imported, and why.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

/// What an import did.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    pub scope: String,
    pub files: usize,
    pub added: usize,
    pub updated: usize,
    pub unchanged: usize,
    pub flagged_secrets: usize,
    pub skipped: Vec<Skipped>,
    /// Notes changed here since they were imported whose source changed too: each kept as it
    /// is, with the source's new text in a note beside it.
    pub kept_edited: Vec<KeptEdited>,
    /// Attachments notes embed or link, copied into the scope folder by this import.
    pub attachments: usize,
}

/// A note changed here since its import, kept as it is, and the note beside it that holds its
/// source's new text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeptEdited {
    /// The source file, relative to the imported folder.
    pub path: String,
    /// The note kept as it was edited here.
    pub id: String,
    /// The note holding the source's new text.
    pub beside: String,
}

/// Frontmatter key: the content hash of the note as the last import wrote it, the base that
/// tells an edit made here since from the import's own text.
const IMPORTED_AS: &str = "importedAs";

/// Notes written together: a batch's files are fsynced in parallel and indexed in one go.
const BATCH: usize = 256;

/// Frontmatter key: the folder a note was in, in the imported folder (`Work/Meetings`).
const FOLDER: &str = "folder";

/// The folder in a scope folder where attachments notes embed or link are copied, under
/// their path in the imported folder.
pub const ATTACHMENTS: &str = "attachments";

/// Largest attachment copied; a bigger one is reported and its links left as written.
const MAX_ATTACHMENT_BYTES: u64 = 64 << 20;

/// Notes decided but not yet written: new notes `(file name in the scope, note)`, and
/// replacements of imported notes with the bytes their file held when the import read it.
#[derive(Default)]
struct Pending {
    notes: Vec<(String, Note)>,
    new_ids: std::collections::HashSet<String>,
    updates: Vec<Update>,
}

struct Update {
    rel: String,
    read: Vec<u8>,
    note: Note,
    source_path: String,
    /// Counted as an updated note (else only the source version a kept note was offered).
    counted: bool,
}

impl Pending {
    fn len(&self) -> usize {
        self.notes.len() + self.updates.len()
    }

    /// Writes what is pending: new notes together, replacements one by one, each only over
    /// the version the import read (the displaced version is backed up first). A note an
    /// editor changed meanwhile keeps the editor's text and is reported as skipped.
    fn flush(self, engine: &mut Engine, scope: &Scope, report: &mut ImportReport) -> Result<()> {
        engine.put_notes(scope, &self.notes)?;
        for u in self.updates {
            let id = u.note.id.to_string();
            let written = engine.swap_note_file(
                scope,
                &id,
                &u.rel,
                Some(&u.read),
                Some(&u.note),
                Some(BackupReason::ImportReplace),
            )?;
            if !written && u.counted {
                report.updated -= 1;
                report.skipped.push(Skipped {
                    path: u.source_path,
                    reason: format!(
                        "note `{id}` changed while importing; its new text was kept: import again to update it"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Progress callback: `(done, total, current relative path)`.
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &str);

struct Candidate {
    rel: String,
    note: Note,
    explicit_id: bool,
    /// The source file's text.
    text: String,
    /// What the import read from the file beyond its own text (inline tags, dates, folder,
    /// links rewritten to ids), by name; `None` for a note Memoria wrote (an export), which is
    /// taken as it is.
    reading: Option<serde_json::Map<String, Value>>,
    /// The names links may use for it: its frontmatter's aliases.
    aliases: Vec<String>,
    /// What the source file held: a hash of its bytes and of what the import read from it.
    source_hash: String,
}

/// Imports every Markdown file under `dir` into one scope.
pub fn import(
    engine: &mut Engine,
    dir: &Path,
    scope: Option<ScopeChoice>,
    progress: Progress<'_>,
) -> Result<ImportReport> {
    if !dir.is_dir() {
        return Err(Error::Invalid(format!(
            "{} is not a folder: give the folder to import",
            dir.display()
        )));
    }
    let scope = engine.scope_of(scope.unwrap_or(ScopeChoice::User))?;
    let files = scan::list_files(dir)?;
    let obsidian = dir.join(".obsidian").is_dir();
    let mut report = ImportReport {
        scope: scope.key(),
        files: files.len(),
        ..Default::default()
    };
    let source = source_id(dir);
    let mut candidates = Vec::new();
    for f in &files {
        match read_candidate(engine, f, obsidian) {
            Ok(c) => candidates.push(c),
            Err(reason) => report.skipped.push(Skipped {
                path: f.rel.clone(),
                reason,
            }),
        }
    }
    // Two files with the same name in different folders: both get ids from their full paths.
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for c in candidates.iter().filter(|c| !c.explicit_id) {
        *by_id.entry(c.note.id.to_string()).or_default() += 1;
    }
    for c in candidates.iter_mut().filter(|c| !c.explicit_id) {
        if by_id[c.note.id.as_str()] > 1 {
            c.note.id = slugify(c.rel.trim_end_matches(".markdown").trim_end_matches(".md"));
        }
    }

    let dir_out = engine.scope_dir(&scope)?;
    let _lock = engine.lock_scope(&scope)?;
    engine.rescan_scope(&scope)?;
    let planned = planned_ids(engine, &scope, &dir_out, &source, &candidates)?;
    for (c, id) in candidates.iter_mut().zip(planned) {
        if let Some(id) = id {
            c.note.id = id;
        }
    }
    resolve_links(dir, &dir_out, &mut candidates, &mut report)?;
    for c in &mut candidates {
        c.source_hash = source_hash(&c.text, c.reading.as_ref());
    }
    let total = candidates.len();
    let mut pending = Pending::default();
    for (i, c) in candidates.into_iter().enumerate() {
        progress(i, total, &c.rel);
        let rel = c.rel.clone();
        if let Err(e) = import_one(
            engine,
            &scope,
            &dir_out,
            &source,
            c,
            &mut report,
            &mut pending,
        ) {
            if matches!(
                e,
                Error::ScopeFull { .. } | Error::Io { .. } | Error::Index(_)
            ) {
                pending.flush(engine, &scope, &mut report)?;
                return Err(e);
            }
            report.skipped.push(Skipped {
                path: rel,
                reason: e.to_string(),
            });
        }
        if pending.len() >= BATCH {
            std::mem::take(&mut pending).flush(engine, &scope, &mut report)?;
        }
    }
    pending.flush(engine, &scope, &mut report)?;
    progress(total, total, "");
    Ok(report)
}

/// The tool a file came from, tagged `source:<adapter>` on import so agents and the user can
/// tell imported memory apart. Memoria's own notes (an export) get no tag.
fn adapter(rel: &str, text: &str, obsidian: bool) -> Option<&'static str> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if text.starts_with("---\n{") {
        None
    } else if rel == "MEMORY.md" || rel.starts_with("memory/") {
        Some("source:openclaw")
    } else if name == "CLAUDE.md" || name == "CLAUDE.local.md" {
        Some("source:claude-code")
    } else if obsidian {
        Some("source:obsidian")
    } else {
        Some("source:markdown")
    }
}

fn read_candidate(
    engine: &Engine,
    f: &scan::FoundFile,
    obsidian: bool,
) -> std::result::Result<Candidate, String> {
    let bytes = scan::read_capped(&f.abs).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > scan::MAX_FILE_BYTES {
        return Err(format!(
            "the file is larger than {} MiB and is not read: split it into smaller notes",
            scan::MAX_FILE_BYTES >> 20
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    // Read by its name alone: a folder is where a note was kept, never what kind it is.
    let (folder, name) = f.rel.rsplit_once('/').unwrap_or(("", &f.rel));
    let mut note = Note::parse(
        &text,
        FileContext {
            relative_path: name,
        },
    )
    .map_err(|e| format!("{e} (the source file is left as it is)"))?;
    let limit = engine.limits().body_bytes;
    if note.body.len() > limit {
        return Err(format!(
            "body is {} bytes; the limit is {limit}: split the file",
            note.body.len()
        ));
    }
    let explicit_id = text.starts_with("---")
        && note.id
            != (FileContext {
                relative_path: &f.rel,
            })
            .derived_id();
    let stem_date = f
        .rel
        .rsplit('/')
        .next()
        .and_then(|n| n.get(..10))
        .and_then(date_to_ms);
    let mtime_ms = f.mtime_ns / 1_000_000;
    let adapter = adapter(&f.rel, &text, obsidian);
    let mut reading = adapter.map(|_| serde_json::Map::new());
    if let Some(reading) = &mut reading {
        let (created, updated) = obsidian::frontmatter_times(&note.extra);
        if note.created_at.is_none()
            && let Some(t) = created
        {
            note.created_at = Some(t);
            reading.insert("createdAt".into(), t.into());
        }
        if note.updated_at.is_none()
            && let Some(t) = updated
        {
            note.updated_at = Some(t);
            reading.insert("updatedAt".into(), t.into());
        }
        let mut added = Vec::new();
        for tag in obsidian::inline_tags(&note.body) {
            if !note
                .tags
                .iter()
                .any(|t| t.to_lowercase() == tag.to_lowercase())
            {
                note.tags.push(tag.clone());
                added.push(Value::String(tag));
            }
        }
        if !added.is_empty() {
            reading.insert("tags".into(), Value::Array(added));
        }
        if !folder.is_empty() && !note.extra.contains_key(FOLDER) {
            note.extra
                .insert(FOLDER.into(), Value::String(folder.to_owned()));
            reading.insert(FOLDER.into(), Value::String(folder.to_owned()));
        }
    }
    note.created_at = note.created_at.or(stem_date).or(Some(mtime_ms));
    note.updated_at = note.updated_at.or(Some(mtime_ms));
    if let Some(tag) = adapter
        && !note.tags.iter().any(|t| t == tag)
    {
        note.tags.push(tag.to_owned());
    }
    // The whole file: a secret in a frontmatter value is kept verbatim like the rest of it.
    if guard::scan(&text).is_some() && !note.tags.iter().any(|t| t == SECRETS_TAG) {
        note.tags.push(SECRETS_TAG.to_owned());
    }
    let aliases = note.aliases();
    Ok(Candidate {
        rel: f.rel.clone(),
        note,
        explicit_id,
        text,
        reading,
        aliases,
        source_hash: String::new(),
    })
}

/// The source version an import records: a hash of the file's text and, when the import read
/// more from it than its text says on its own, of that reading too.
fn source_hash(text: &str, reading: Option<&serde_json::Map<String, Value>>) -> String {
    let mut bytes = text.as_bytes().to_vec();
    if let Some(r) = reading.filter(|r| !r.is_empty()) {
        bytes.push(0);
        bytes.extend(Value::Object(r.clone()).to_string().into_bytes());
    }
    memoria_shared::hash::sha256_hex(&bytes)[..16].to_owned()
}

/// The id each candidate gets, decided before any is written so links can name it: the first
/// of its ids (its own, then one with a hash of its path) that is free or that an earlier
/// import of the same source holds, as [`import_one`] decides. `None`: no free id.
fn planned_ids(
    engine: &Engine,
    scope: &Scope,
    dir_out: &Path,
    source: &str,
    candidates: &[Candidate],
) -> Result<Vec<Option<NoteId>>> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(candidates.len());
    for c in candidates {
        let mut chosen = None;
        for id in candidate_ids(&c.note.id, &c.rel) {
            match engine
                .index()
                .find(&scope.key(), id.as_str())?
                .into_iter()
                .next()
            {
                Some(row) => {
                    let same = std::fs::read_to_string(&row.path).ok().and_then(|text| {
                        let old = Note::parse(
                            &text,
                            FileContext {
                                relative_path: &row.rel_path,
                            },
                        )
                        .ok()?;
                        Some(same_source(&old, &c.rel, source))
                    });
                    if same == Some(true) {
                        chosen = Some(id);
                        break;
                    }
                }
                None if taken.contains(id.as_str()) => {}
                None if case_taken(engine, scope, dir_out, &id)? => {}
                None => {
                    taken.insert(id.to_string());
                    chosen = Some(id);
                    break;
                }
            }
        }
        out.push(chosen);
    }
    Ok(out)
}

/// The ids a note imported from `rel` may take, in order: its own, then one with a hash of its
/// path.
fn candidate_ids(id: &NoteId, rel: &str) -> [NoteId; 2] {
    [
        id.clone(),
        slugify(&format!(
            "{id}-{}",
            &memoria_shared::hash::sha256_hex(rel.as_bytes())[..6]
        )),
    ]
}

/// Whether `old` was imported from the file at `rel` of the folder `source`.
fn same_source(old: &Note, rel: &str, source: &str) -> bool {
    old.extra.get("importedFrom").and_then(Value::as_str) == Some(rel)
        && old
            .extra
            .get("importSource")
            .and_then(Value::as_str)
            // A note imported without a recorded folder matches any folder.
            .is_none_or(|s| s == source)
}

/// Rewrites each candidate's links to what they name: another candidate's (planned) id, or an
/// attachment's copy in the scope folder, copied now. Notes Memoria wrote are left as they are.
fn resolve_links(
    dir: &Path,
    dir_out: &Path,
    candidates: &mut [Candidate],
    report: &mut ImportReport,
) -> Result<()> {
    let mut names = obsidian::Names::default();
    let mut ids: HashMap<String, String> = HashMap::new();
    for c in candidates.iter() {
        names.add_note(&c.rel, &c.aliases);
        ids.insert(c.rel.clone(), c.note.id.to_string());
    }
    for rel in attachment_files(dir)? {
        names.add_file(&rel);
    }
    // Each attachment's place in the scope folder, decided once; `None`: not copied.
    let mut copies: HashMap<String, Option<String>> = HashMap::new();
    for c in candidates.iter_mut() {
        let Some(reading) = c.reading.as_mut() else {
            continue;
        };
        let from = c.rel.clone();
        let mut failed: Vec<Skipped> = Vec::new();
        let mut copied = 0;
        let body = obsidian::rewrite_links(&c.note.body, |link, markdown| {
            match names.resolve(link, &from, markdown)? {
                obsidian::Target::Note(rel) => ids.get(&rel).cloned().map(Rewrite::Note),
                obsidian::Target::File(rel) => {
                    let place = copies
                        .entry(rel.clone())
                        .or_insert_with(|| match copy_attachment(dir, dir_out, &rel) {
                            Ok((place, new)) => {
                                copied += usize::from(new);
                                Some(place)
                            }
                            Err(reason) => {
                                failed.push(Skipped {
                                    path: rel.clone(),
                                    reason,
                                });
                                None
                            }
                        });
                    place.clone().map(Rewrite::File)
                }
            }
        });
        report.attachments += copied;
        report.skipped.extend(failed);
        if body != c.note.body {
            reading.insert("body".into(), Value::String(body.clone()));
            c.note.body = body;
        }
    }
    Ok(())
}

/// Every file under `dir` that is not a note: what links may name as attachments. Hidden
/// files and folders are left out, as the notes' listing leaves them out; links are not
/// followed.
fn attachment_files(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, prefix)) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(Error::io("read folder", &d))?;
        for entry in entries {
            let entry = entry.map_err(Error::io("read folder", &d))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "node_modules" {
                continue;
            }
            let rel = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            let ft = entry.file_type().map_err(Error::io("stat", entry.path()))?;
            if ft.is_dir() {
                stack.push((entry.path(), rel));
            } else if ft.is_file() && !scan::is_note_file(&name) {
                out.push(rel);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Copies the attachment at `rel` of `dir` into the scope folder, under [`ATTACHMENTS`] and its
/// path, and says where it is from a note (notes lie at the scope folder's root) and whether it
/// was copied now. A file already there with the same bytes is the copy; one with other bytes is
/// never replaced: the attachment goes beside it, named with a hash of its bytes. A text file
/// the credential guard matches is not copied, nor is one above the size limit.
fn copy_attachment(
    dir: &Path,
    dir_out: &Path,
    rel: &str,
) -> std::result::Result<(String, bool), String> {
    use std::io::Read;
    let src = dir.join(rel);
    let mut bytes = Vec::new();
    std::fs::File::open(&src)
        .and_then(|f| f.take(MAX_ATTACHMENT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("attachment not copied, cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_ATTACHMENT_BYTES {
        return Err(format!(
            "attachment not copied: it is larger than {} MiB; its links are left as written",
            MAX_ATTACHMENT_BYTES >> 20
        ));
    }
    if let Ok(text) = std::str::from_utf8(&bytes)
        && let Some(f) = guard::scan(text)
    {
        return Err(format!(
            "attachment not copied: it looks like it holds a credential ({}); its links are left as written",
            f.rule
        ));
    }
    let hash = &memoria_shared::hash::sha256_hex(&bytes)[..8];
    let beside = match rel.rsplit_once('.') {
        Some((stem, ext)) if !stem.ends_with('/') && !ext.contains('/') => {
            format!("{stem}-{hash}.{ext}")
        }
        _ => format!("{rel}-{hash}"),
    };
    for place in [
        format!("{ATTACHMENTS}/{rel}"),
        format!("{ATTACHMENTS}/{beside}"),
    ] {
        let path = dir_out.join(&place);
        match std::fs::read(&path) {
            Ok(there) if there == bytes => return Ok((place, false)),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("attachment not copied, cannot read {place}: {e}")),
        }
        let written = path
            .parent()
            .map_or(Ok(()), |p| {
                std::fs::create_dir_all(p).map_err(|e| e.to_string())
            })
            .and_then(|()| fsx::create_new(&path, &bytes).map_err(|e| e.to_string()))
            .map_err(|e| format!("attachment not copied to {place}: {e}"))?;
        if written {
            return Ok((place, true));
        }
    }
    Err(format!(
        "attachment not copied: {ATTACHMENTS}/{rel} and {ATTACHMENTS}/{beside} hold other files"
    ))
}

fn import_one(
    engine: &mut Engine,
    scope: &Scope,
    dir_out: &Path,
    source: &str,
    c: Candidate,
    report: &mut ImportReport,
    pending: &mut Pending,
) -> Result<()> {
    let Candidate {
        rel,
        mut note,
        source_hash,
        ..
    } = c;
    let earlier_hash = legacy_import_hash(&note);
    let source_note = note.clone();
    note.extra
        .insert("importedFrom".into(), Value::String(rel.clone()));
    note.extra
        .insert("importSource".into(), Value::String(source.to_owned()));
    note.extra
        .insert("importHash".into(), Value::String(source_hash.clone()));
    let flagged = note.tags.iter().any(|t| t == SECRETS_TAG);

    for id in candidate_ids(&note.id, &rel) {
        let existing = engine
            .index()
            .find(&scope.key(), id.as_str())?
            .into_iter()
            .next();
        match existing {
            Some(row) => {
                let Ok(text) = std::fs::read_to_string(&row.path) else {
                    continue;
                };
                let Ok(old) = Note::parse(
                    &text,
                    FileContext {
                        relative_path: &row.rel_path,
                    },
                ) else {
                    continue;
                };
                if !same_source(&old, &rel, source) {
                    continue; // another note owns this id: try the next one
                }
                let old_hash = old.extra.get("importHash").and_then(Value::as_str);
                if old_hash == Some(source_hash.as_str()) || old_hash == Some(earlier_hash.as_str())
                {
                    report.unchanged += 1;
                    return Ok(());
                }
                if edited_here(&old) {
                    let kept = Update {
                        rel: row.rel_path.clone(),
                        read: text.into_bytes(),
                        note: old,
                        source_path: rel.clone(),
                        counted: false,
                    };
                    let at = Beside {
                        source,
                        rel: &rel,
                        source_hash: &source_hash,
                    };
                    return import_beside(
                        engine,
                        scope,
                        dir_out,
                        at,
                        kept,
                        source_note,
                        report,
                        pending,
                    );
                }
                note.id = id;
                stamp_imported_as(&mut note);
                pending.updates.push(Update {
                    rel: row.rel_path.clone(),
                    read: text.into_bytes(),
                    note,
                    source_path: rel.clone(),
                    counted: true,
                });
                report.updated += 1;
                report.flagged_secrets += usize::from(flagged);
                return Ok(());
            }
            None if pending.new_ids.contains(id.as_str()) => continue,
            None => {
                if engine.index().count(&scope.key())? + pending.new_ids.len()
                    >= engine.limits().notes_per_scope
                {
                    return Err(Error::ScopeFull {
                        scope: scope.key(),
                        limit: engine.limits().notes_per_scope,
                    });
                }
                if case_taken(engine, scope, dir_out, &id)? {
                    continue;
                }
                note.id = id;
                stamp_imported_as(&mut note);
                pending.new_ids.insert(note.id.to_string());
                pending.notes.push((note.id.file_name(), note));
                report.added += 1;
                report.flagged_secrets += usize::from(flagged);
                return Ok(());
            }
        }
    }
    Err(Error::Invalid(format!(
        "no free id for {rel}: rename the file or give it an \"id\""
    )))
}

/// Records, in the note about to be written, its content hash as this import writes it.
fn stamp_imported_as(note: &mut Note) {
    let hash = ContentHash::of_note(note).as_str().to_owned();
    note.extra.insert(IMPORTED_AS.into(), Value::String(hash));
}

/// Whether a note was changed here since an import wrote it: its text is not what the import
/// wrote. A note imported before the import recorded that cannot tell, and counts as changed:
/// keeping it loses nothing.
fn edited_here(note: &Note) -> bool {
    note.extra.get(IMPORTED_AS).and_then(Value::as_str) != Some(ContentHash::of_note(note).as_str())
}

/// The source file a text came from: its folder's id, its path in that folder, its hash.
struct Beside<'a> {
    source: &'a str,
    rel: &'a str,
    source_hash: &'a str,
}

/// The source of `kept` (a note changed here since its import) changed too: its text stays as
/// it is, and the source's new text goes into the note beside it, which a later import keeps
/// up to date while nobody edits it there either. `kept` records the source version it has now
/// been offered (its text untouched), so the same source does not offer it again.
#[allow(clippy::too_many_arguments)]
fn import_beside(
    engine: &mut Engine,
    scope: &Scope,
    dir_out: &Path,
    at: Beside<'_>,
    mut kept_update: Update,
    mut note: Note,
    report: &mut ImportReport,
    pending: &mut Pending,
) -> Result<()> {
    let Beside {
        source,
        rel,
        source_hash,
    } = at;
    let kept = kept_update.note.clone();
    let beside = slugify(&format!("{}-imported", kept.id));
    let done = |report: &mut ImportReport| {
        report.kept_edited.push(KeptEdited {
            path: rel.to_owned(),
            id: kept.id.to_string(),
            beside: beside.to_string(),
        });
    };
    note.id = beside.clone();
    note.extra
        .insert("importedFrom".into(), Value::String(rel.to_owned()));
    note.extra
        .insert("importSource".into(), Value::String(source.to_owned()));
    note.extra
        .insert("importHash".into(), Value::String(source_hash.to_owned()));
    note.extra
        .insert("importedBeside".into(), Value::String(kept.id.to_string()));
    stamp_imported_as(&mut note);
    let flagged = note.tags.iter().any(|t| t == SECRETS_TAG);
    match engine
        .index()
        .find(&scope.key(), beside.as_str())?
        .into_iter()
        .next()
    {
        None => {
            if engine.index().count(&scope.key())? + pending.new_ids.len()
                >= engine.limits().notes_per_scope
            {
                return Err(Error::ScopeFull {
                    scope: scope.key(),
                    limit: engine.limits().notes_per_scope,
                });
            }
            if pending.new_ids.contains(beside.as_str())
                || case_taken(engine, scope, dir_out, &beside)?
            {
                return Err(Error::Invalid(format!(
                    "note `{}` was changed here and its source too, and `{beside}` is taken: rename one of them, then import again",
                    kept.id
                )));
            }
            pending.new_ids.insert(beside.to_string());
            pending.notes.push((beside.file_name(), note));
            report.added += 1;
        }
        Some(row) => {
            let text = std::fs::read_to_string(&row.path).map_err(Error::io("read", &row.path))?;
            let old = Note::parse(
                &text,
                FileContext {
                    relative_path: &row.rel_path,
                },
            )
            .ok();
            let ours = old.as_ref().is_some_and(|o| {
                o.extra.get("importedBeside").and_then(Value::as_str) == Some(kept.id.as_str())
            });
            if !ours {
                return Err(Error::Invalid(format!(
                    "note `{}` was changed here and its source too, and `{beside}` is another note: rename it, then import again",
                    kept.id
                )));
            }
            let old = old.expect("parsed above");
            if edited_here(&old) {
                return Err(Error::Invalid(format!(
                    "note `{}` and the note beside it, `{beside}`, were both changed here since the last import, and the source changed again: nothing was replaced; merge them, then import again",
                    kept.id
                )));
            }
            pending.updates.push(Update {
                rel: row.rel_path.clone(),
                read: text.into_bytes(),
                note,
                source_path: rel.to_owned(),
                counted: true,
            });
            report.updated += 1;
        }
    }
    report.flagged_secrets += usize::from(flagged);
    done(report);
    kept_update
        .note
        .extra
        .insert("importHash".into(), Value::String(source_hash.to_owned()));
    pending.updates.push(kept_update);
    Ok(())
}

fn case_taken(engine: &Engine, scope: &Scope, dir: &Path, id: &NoteId) -> Result<bool> {
    if !engine
        .index()
        .find_ignoring_case(&scope.key(), id.as_str())?
        .is_empty()
    {
        return Ok(true);
    }
    Ok(dir.join(id.file_name()).exists())
}

/// Identifies a source folder without writing its path into notes: a hash of its canonical path.
fn source_id(dir: &Path) -> String {
    let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    memoria_shared::hash::sha256_hex(canonical.to_string_lossy().as_bytes())[..16].to_owned()
}

/// The other source version identity found in imported notes (content hash plus timestamps,
/// which come from the file's mtime when it has none): accepted as unchanged so that such notes
/// are not replaced by an import of the same content.
fn legacy_import_hash(note: &Note) -> String {
    let h = ContentHash::of_note(note);
    memoria_shared::hash::sha256_hex(
        format!("{h}:{:?}:{:?}", note.created_at, note.updated_at).as_bytes(),
    )[..16]
        .to_owned()
}

/// What an export wrote.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportReport {
    pub dir: String,
    pub files: usize,
    /// Notes left out because they are private: quarantined, holding secrets, or not parseable.
    pub private_left_out: usize,
}

/// Copies every visible note file an agent may see, byte for byte, into `dir/<scope>/…` (`user`,
/// `project-<id>`, `domain-<type>`). Files already there are replaced; nothing is deleted. An
/// export is meant to leave Memoria, so private notes stay behind (they are counted).
pub fn export(engine: &Engine, dir: &Path) -> Result<ExportReport> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Invalid(format!(
            "{} exists and is not a folder",
            dir.display()
        )));
    }
    let mut files = 0;
    let mut private_left_out = 0;
    for scope in engine.visible_scopes() {
        let folder = scope.key().replace(':', "-");
        for row in engine.list(Some(&scope), None, None)? {
            if !crate::agent::recallable(&row) {
                private_left_out += 1;
                continue;
            }
            let bytes = crate::scan::read_note_bytes(row.path.as_ref())
                .map_err(Error::io("read", &row.path))?;
            fsx::write_atomic(&dir.join(&folder).join(&row.rel_path), &bytes)?;
            files += 1;
        }
    }
    Ok(ExportReport {
        dir: dir.to_string_lossy().into_owned(),
        files,
        private_left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OpenOptions;
    use crate::vault::NoteEdit;

    fn engine_in(root: &Path) -> Engine {
        Engine::open(OpenOptions::without_model(root.join("home"))).unwrap()
    }

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn run(e: &mut Engine, dir: &Path) -> ImportReport {
        import(e, dir, None, &mut |_, _, _| {}).unwrap()
    }

    #[test]
    fn two_folders_with_the_same_file_name_are_two_sources() {
        let tmp = tempfile::tempdir().unwrap();
        let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
        write(&a, "MEMORY.md", "# Folder A\n- likes tea\n");
        write(&b, "MEMORY.md", "# Folder B\n- likes coffee\n");
        let mut e = engine_in(tmp.path());
        assert_eq!(run(&mut e, &a).added, 1);
        let r = run(&mut e, &b);
        assert_eq!((r.added, r.updated), (1, 0), "{r:?}");
        let bodies: Vec<String> = e
            .list(None, None, None)
            .unwrap()
            .into_iter()
            .map(|row| e.show(&row.id, None).unwrap().indexed.body)
            .collect();
        assert!(bodies.iter().any(|t| t.contains("tea")), "{bodies:?}");
        assert!(bodies.iter().any(|t| t.contains("coffee")), "{bodies:?}");
        assert!(e.backups(10).unwrap().is_empty());
        // Each folder again: nothing changes.
        assert_eq!(run(&mut e, &a).unchanged, 1);
        assert_eq!(run(&mut e, &b).unchanged, 1);
    }

    #[test]
    fn a_source_whose_mtime_alone_changed_leaves_the_edited_note_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write(&src, "notes/deploys.md", "Deploys go out on Tuesdays.\n");
        let mut e = engine_in(tmp.path());
        assert_eq!(run(&mut e, &src).added, 1);
        let id = e.list(None, None, None).unwrap()[0].id.clone();
        e.edit(
            &id,
            None,
            NoteEdit {
                body: Some("Deploys go out on Tuesdays and Thursdays.".into()),
                ..Default::default()
            },
        )
        .unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(src.join("notes/deploys.md"))
            .unwrap();
        f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(3600))
            .unwrap();
        drop(f);
        let r = run(&mut e, &src);
        assert_eq!((r.updated, r.unchanged), (0, 1), "{r:?}");
        assert!(
            e.show(&id, None)
                .unwrap()
                .note
                .unwrap()
                .body
                .contains("Thursdays")
        );
    }

    /// Re-import as a three-way decision: a note nobody changed here follows its source; a note
    /// changed here keeps its text, the source's new text goes beside it, and later imports
    /// keep that note up to date without offering the same source version twice.
    #[test]
    fn a_reimport_keeps_a_note_edited_here_and_puts_the_sources_text_beside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write(&src, "deploys.md", "Deploys go out on Tuesdays.\n");
        write(&src, "rollbacks.md", "Roll back with the previous tag.\n");
        let mut e = engine_in(tmp.path());
        assert_eq!(run(&mut e, &src).added, 2);
        let body = |e: &Engine, id: &str| e.show(id, None).unwrap().note.unwrap().body;
        e.edit(
            "deploys",
            None,
            NoteEdit {
                body: Some("Deploys go out on Tuesdays and Thursdays.".into()),
                ..Default::default()
            },
        )
        .unwrap();
        write(&src, "deploys.md", "Deploys go out on Wednesdays.\n");
        write(&src, "rollbacks.md", "Roll back with the last green tag.\n");
        let r = run(&mut e, &src);
        // The unedited note follows its source; the edited one keeps its text.
        assert_eq!((r.added, r.updated, r.unchanged), (1, 1, 0), "{r:?}");
        assert_eq!(
            body(&e, "rollbacks"),
            "Roll back with the last green tag.\n"
        );
        assert_eq!(
            body(&e, "deploys"),
            "Deploys go out on Tuesdays and Thursdays.\n"
        );
        assert_eq!(
            r.kept_edited,
            [KeptEdited {
                path: "deploys.md".into(),
                id: "deploys".into(),
                beside: "deploys-imported".into()
            }]
        );
        assert_eq!(
            body(&e, "deploys-imported"),
            "Deploys go out on Wednesdays.\n"
        );
        // The same source again: nothing changes, nothing is offered twice.
        let r = run(&mut e, &src);
        assert_eq!((r.added, r.updated, r.unchanged), (0, 0, 2), "{r:?}");
        assert!(r.kept_edited.is_empty(), "{r:?}");
        assert_eq!(
            body(&e, "deploys"),
            "Deploys go out on Tuesdays and Thursdays.\n"
        );
        // Deleting the note beside it does not bring it back while the source stays as it is.
        e.forget("deploys-imported", None).unwrap();
        assert_eq!(run(&mut e, &src).added, 0);
        // The source changes again: a new note beside it, the edit still kept.
        write(&src, "deploys.md", "Deploys go out on Fridays.\n");
        let r = run(&mut e, &src);
        assert_eq!(r.kept_edited.len(), 1, "{r:?}");
        assert_eq!(body(&e, "deploys-imported"), "Deploys go out on Fridays.\n");
        // While nobody edits the note beside it, it follows the source.
        write(&src, "deploys.md", "Deploys go out on Mondays.\n");
        run(&mut e, &src);
        assert_eq!(body(&e, "deploys-imported"), "Deploys go out on Mondays.\n");
        assert_eq!(
            body(&e, "deploys"),
            "Deploys go out on Tuesdays and Thursdays.\n"
        );
        // Both edited here and the source changed again: nothing is replaced, and it says so.
        e.edit(
            "deploys-imported",
            None,
            NoteEdit {
                body: Some("Mondays, but not in August.".into()),
                ..Default::default()
            },
        )
        .unwrap();
        write(&src, "deploys.md", "Deploys go out on Sundays.\n");
        let r = run(&mut e, &src);
        assert!(
            r.skipped[0].reason.contains("were both changed here"),
            "{r:?}"
        );
        assert_eq!(
            body(&e, "deploys-imported"),
            "Mondays, but not in August.\n"
        );
        assert_eq!(
            body(&e, "deploys"),
            "Deploys go out on Tuesdays and Thursdays.\n"
        );
    }

    /// An editor saving the note while a re-import replaces it: the editor's text stays, the
    /// import reports the note as skipped, and the version the import read is backed up.
    #[test]
    fn an_editor_saving_during_a_reimport_keeps_its_text() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write(&src, "deploys.md", "Deploys go out on Tuesdays.\n");
        let mut e = engine_in(tmp.path());
        assert_eq!(run(&mut e, &src).added, 1);
        let row = e.list(None, None, None).unwrap().remove(0);
        write(&src, "deploys.md", "Deploys go out on Wednesdays.\n");
        let target = std::path::PathBuf::from(&row.path);
        fsx::set_hook(Some(Box::new(move |step, p| {
            if step == fsx::Step::MovedAside && p == target {
                std::fs::write(p, "editor autosave\n").unwrap();
            }
        })));
        let r = run(&mut e, &src);
        fsx::set_hook(None);
        assert_eq!(r.updated, 0, "{r:?}");
        assert_eq!(r.skipped.len(), 1, "{r:?}");
        assert!(
            r.skipped[0].reason.contains("changed while importing"),
            "{r:?}"
        );
        assert_eq!(
            std::fs::read_to_string(&row.path).unwrap(),
            "editor autosave\n"
        );
        let mut stack = vec![tmp.path().join("home/backups")];
        let mut backed_up = false;
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let p = entry.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if std::fs::read_to_string(&p).is_ok_and(|t| t.contains("Tuesdays")) {
                    backed_up = true;
                }
            }
        }
        assert!(backed_up, "the version the import read is backed up");
        // The editor's file no longer carries the import's marks: a later import never
        // replaces it (the source comes in beside it).
        run(&mut e, &src);
        assert_eq!(
            std::fs::read_to_string(&row.path).unwrap(),
            "editor autosave\n"
        );
    }

    /// Links are rewritten to the ids of the notes they name; what the import read from a file
    /// beyond its text is part of its source version, so a link that comes to name another
    /// note updates its note on the next import, and nothing else changes.
    #[test]
    fn a_link_that_comes_to_name_a_note_reimports_its_note() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write(&src, "Hub.md", "See [[Sub/Later]] and [[Other]].\n");
        write(&src, "Other.md", "The other note.\n");
        let mut e = engine_in(tmp.path());
        assert_eq!(run(&mut e, &src).added, 2);
        let body = |e: &Engine, id: &str| e.show(id, None).unwrap().note.unwrap().body;
        assert_eq!(body(&e, "hub"), "See [[Sub/Later]] and [[Other]].\n");
        write(&src, "Sub/Later.md", "Written later.\n");
        let r = run(&mut e, &src);
        assert_eq!((r.added, r.updated, r.unchanged), (1, 1, 1), "{r:?}");
        assert_eq!(body(&e, "hub"), "See [[later|Sub/Later]] and [[Other]].\n");
        let r = run(&mut e, &src);
        assert_eq!((r.added, r.updated, r.unchanged), (0, 0, 3), "{r:?}");
    }

    /// An attachment is copied once; a source attachment whose bytes changed is copied beside
    /// the first copy, which is never replaced, and the note's embed names the new copy.
    #[test]
    fn a_changed_attachment_is_copied_beside_the_first_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write(&src, "Note.md", "![[pic.png]]\n");
        write(&src, "img/pic.png", "first");
        let mut e = engine_in(tmp.path());
        let r = run(&mut e, &src);
        assert_eq!((r.added, r.attachments), (1, 1), "{r:?}");
        let scope = e
            .scope_dir(&e.scope_of(ScopeChoice::User).unwrap())
            .unwrap();
        let body = |e: &Engine| e.show("note", None).unwrap().note.unwrap().body;
        assert_eq!(body(&e), "![[attachments/img/pic.png]]\n");
        assert_eq!(
            std::fs::read(scope.join("attachments/img/pic.png")).unwrap(),
            b"first"
        );
        write(&src, "img/pic.png", "second");
        let r = run(&mut e, &src);
        assert_eq!((r.updated, r.attachments), (1, 1), "{r:?}");
        assert_eq!(
            std::fs::read(scope.join("attachments/img/pic.png")).unwrap(),
            b"first"
        );
        let hash = &memoria_shared::hash::sha256_hex(b"second")[..8];
        assert_eq!(body(&e), format!("![[attachments/img/pic-{hash}.png]]\n"));
        assert_eq!(
            std::fs::read(scope.join(format!("attachments/img/pic-{hash}.png"))).unwrap(),
            b"second"
        );
        // A text attachment holding a credential is not copied, and says so.
        write(&src, "Keys.md", "[[keys.txt]]\n");
        write(&src, "keys.txt", "db password: hunter22xyz\n");
        let r = run(&mut e, &src);
        assert!(
            r.skipped
                .iter()
                .any(|s| s.path == "keys.txt" && s.reason.contains("credential")),
            "{r:?}"
        );
        assert!(!scope.join("attachments/keys.txt").exists());
        assert_eq!(
            e.show("keys", None).unwrap().note.unwrap().body,
            "[[keys.txt]]\n"
        );
    }

    /// A folder is kept, never read as a type; what a file says of itself wins over what the
    /// import reads; a note Memoria wrote (an export) is taken as it is.
    #[test]
    fn a_files_own_properties_win_and_an_export_is_taken_as_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write(&src, "Projects/Apollo.md", "Apollo #moon\n");
        write(
            &src,
            "Projects/Typed.md",
            "---\ntype: project\nfolder: Elsewhere\ncreatedAt: 1000\ncreated: 2024-01-02\n---\nTyped.\n",
        );
        write(
            &src,
            "user/exported.md",
            "---\n{\"id\":\"exported\",\"summary\":\"x\",\"tags\":[]}\n---\nSee [[Projects/Apollo]] #not-read\n",
        );
        let mut e = engine_in(tmp.path());
        assert_eq!(run(&mut e, &src).added, 3);
        let note = |id: &str| e.show(id, None).unwrap().note.unwrap();
        let apollo = note("apollo");
        assert_eq!(apollo.note_type, None);
        assert_eq!(apollo.extra["folder"], "Projects");
        assert_eq!(apollo.tags, ["moon", "source:markdown"]);
        let typed = note("typed");
        assert_eq!(typed.note_type, Some(memoria_shared::NoteType::Project));
        assert_eq!(typed.extra["folder"], "Elsewhere");
        assert_eq!(typed.created_at, Some(1000));
        let exported = note("exported");
        assert_eq!(exported.body, "See [[Projects/Apollo]] #not-read\n");
        assert!(exported.tags.is_empty(), "{:?}", exported.tags);
        assert!(!exported.extra.contains_key("folder"));
    }

    #[test]
    fn an_oversized_source_file_is_skipped_unread() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write(&src, "small.md", "A small note.\n");
        let huge = "a".repeat(scan::MAX_FILE_BYTES as usize + 10);
        write(&src, "huge.md", &huge);
        let mut e = engine_in(tmp.path());
        let r = run(&mut e, &src);
        assert_eq!(r.added, 1, "{r:?}");
        assert_eq!(r.skipped.len(), 1);
        assert!(r.skipped[0].reason.contains("larger than"), "{r:?}");
    }

    #[test]
    fn a_secret_in_a_frontmatter_value_flags_the_note() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        write(
            &src,
            "service.md",
            "---\nsummary: The billing service\napi_key: Zq81-secret-value\n---\nIt answers on port 80.\n",
        );
        let mut e = engine_in(tmp.path());
        let r = run(&mut e, &src);
        assert_eq!((r.added, r.flagged_secrets), (1, 1), "{r:?}");
        let row = &e.list(None, None, None).unwrap()[0];
        assert!(row.tags.iter().any(|t| t == SECRETS_TAG), "{:?}", row.tags);
        assert!(!crate::agent::recallable(row));
    }
}
