//! Import and export of plain Markdown folders: an Obsidian vault, OpenClaw's `MEMORY.md` +
//! `memory/*.md`, or a folder `memoria export` wrote. Re-importing the same folder changes
//! nothing; a changed source file replaces its note after a backup. Sources are never modified.

use std::collections::HashMap;
use std::path::Path;

use memoria_shared::note::{FileContext, Note};
use memoria_shared::{ContentHash, NoteId, slugify};
use serde_json::Value;

use crate::backup::{BackupReason, date_to_ms};
use crate::error::{Error, Result};
use crate::fsx;
use crate::guard;
use crate::project::Scope;
use crate::scan;
use crate::vault::{Engine, ScopeChoice};

/// Tag given to imported notes that contain something that looks like a credential. They are
/// kept (nothing is lost) but never recalled.
pub const SECRETS_TAG: &str = "contains-secrets";

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
}

/// Notes written together: a batch's files are fsynced in parallel and indexed in one go.
const BATCH: usize = 256;

/// Notes decided but not yet written: `(file name in the scope, note)`.
#[derive(Default)]
struct Pending {
    notes: Vec<(String, Note)>,
    new_ids: std::collections::HashSet<String>,
}

/// Progress callback: `(done, total, current relative path)`.
pub type Progress<'a> = &'a mut dyn FnMut(usize, usize, &str);

struct Candidate {
    rel: String,
    note: Note,
    explicit_id: bool,
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
    let total = candidates.len();
    let mut pending = Pending::default();
    for (i, c) in candidates.into_iter().enumerate() {
        progress(i, total, &c.rel);
        let rel = c.rel.clone();
        if let Err(e) = import_one(engine, &scope, &dir_out, c, &mut report, &mut pending) {
            if matches!(
                e,
                Error::ScopeFull { .. } | Error::Io { .. } | Error::Index(_)
            ) {
                engine.put_notes(&scope, &pending.notes)?;
                return Err(e);
            }
            report.skipped.push(Skipped {
                path: rel,
                reason: e.to_string(),
            });
        }
        if pending.notes.len() >= BATCH {
            engine.put_notes(&scope, &pending.notes)?;
            pending = Pending::default();
        }
    }
    engine.put_notes(&scope, &pending.notes)?;
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
    let bytes = std::fs::read(&f.abs).map_err(|e| format!("cannot read: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    let mut note = Note::parse(
        &text,
        FileContext {
            relative_path: &f.rel,
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
    note.created_at = note.created_at.or(stem_date).or(Some(mtime_ms));
    note.updated_at = note.updated_at.or(Some(mtime_ms));
    if let Some(tag) = adapter(&f.rel, &text, obsidian)
        && !note.tags.iter().any(|t| t == tag)
    {
        note.tags.push(tag.to_owned());
    }
    let text_to_check = format!("{}\n{}", note.summary, note.body);
    if guard::scan(&text_to_check).is_some() && !note.tags.iter().any(|t| t == SECRETS_TAG) {
        note.tags.push(SECRETS_TAG.to_owned());
    }
    Ok(Candidate {
        rel: f.rel.clone(),
        note,
        explicit_id,
    })
}

fn import_one(
    engine: &mut Engine,
    scope: &Scope,
    dir_out: &Path,
    c: Candidate,
    report: &mut ImportReport,
    pending: &mut Pending,
) -> Result<()> {
    let Candidate { rel, mut note, .. } = c;
    let source_hash = import_hash(&note);
    note.extra
        .insert("importedFrom".into(), Value::String(rel.clone()));
    note.extra
        .insert("importHash".into(), Value::String(source_hash.clone()));
    let flagged = note.tags.iter().any(|t| t == SECRETS_TAG);

    let ids = [
        note.id.clone(),
        slugify(&format!(
            "{}-{}",
            note.id,
            &memoria_shared::hash::sha256_hex(rel.as_bytes())[..6]
        )),
    ];
    for id in ids {
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
                if old.extra.get("importedFrom").and_then(Value::as_str) != Some(rel.as_str()) {
                    continue; // another note owns this id: try the next one
                }
                if old.extra.get("importHash").and_then(Value::as_str) == Some(source_hash.as_str())
                {
                    report.unchanged += 1;
                    return Ok(());
                }
                engine.backup(scope, &row, BackupReason::ImportReplace)?;
                note.id = id;
                pending.notes.push((row.rel_path.clone(), note));
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

/// Identifies a source version: its content hash plus its timestamps.
fn import_hash(note: &Note) -> String {
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
}

/// Copies every visible note file, byte for byte, into `dir/<scope>/…` (`user`,
/// `project-<id>`, `domain-<type>`). Files already there are replaced; nothing is deleted.
pub fn export(engine: &Engine, dir: &Path) -> Result<ExportReport> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Invalid(format!(
            "{} exists and is not a folder",
            dir.display()
        )));
    }
    let mut files = 0;
    for scope in engine.visible_scopes() {
        let folder = scope.key().replace(':', "-");
        for row in engine.list(Some(&scope), None, None)? {
            let bytes = crate::scan::read_note_bytes(row.path.as_ref())
                .map_err(Error::io("read", &row.path))?;
            fsx::write_atomic(&dir.join(&folder).join(&row.rel_path), &bytes)?;
            files += 1;
        }
    }
    Ok(ExportReport {
        dir: dir.to_string_lossy().into_owned(),
        files,
    })
}
