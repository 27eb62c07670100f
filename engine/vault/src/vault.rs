//! The vault: notes as Markdown files in scope folders, and [`Engine`], the one entry point the
//! CLI, the MCP server and the desktop app call. It owns the write path (validate → guard →
//! lock the scope → write atomically → index), backups before unchosen replacements, and the
//! visibility rule. It never decides what the user meant: bad input is refused with a message.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use memoria_shared::note::{FileContext, Note, NoteType, Relation, Source};
use memoria_shared::{Clock, NoteId, SystemClock, slugify};

use crate::backup::{BackupMeta, BackupPolicy, BackupReason, BackupRequest, Backups, PruneReport};
use crate::error::{Error, Result};
use crate::fsx::{self, FileLock};
use crate::guard;
use crate::home::Home;
use crate::index::{BackupRow, Index, IndexedNote, ListFilter, ListedNote};
use crate::project::{Project, Scope};
use crate::scan::{self, FoundFile, ScanStats};

/// Configurable limits (PRODUCT §3).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub notes_per_scope: usize,
    pub body_bytes: usize,
    pub summary_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            notes_per_scope: 5_000,
            body_bytes: 128 * 1024,
            summary_chars: 500,
        }
    }
}

/// How to open an [`Engine`].
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// `--home`; else `MEMORIA_HOME`; else the platform data folder.
    pub home: Option<PathBuf>,
    /// Folder to look for a project in (walking up); `None` means no project.
    pub project_dir: Option<PathBuf>,
    pub clock: Arc<dyn Clock>,
    pub limits: Limits,
    /// The embedding model folder (`--model-dir`); else `MEMORIA_MODEL_DIR`, else
    /// `$MEMORIA_HOME/models/default`; without a model, recall uses the hash embedder.
    pub model_dir: Option<PathBuf>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            home: None,
            project_dir: None,
            clock: Arc::new(SystemClock),
            limits: Limits::default(),
            model_dir: None,
        }
    }
}

impl OpenOptions {
    /// Options for the home at `home` without an embedding model: the model folder named is
    /// `home/no-model`, which nothing creates, so recall uses its deterministic hash embedder
    /// whatever `MEMORIA_MODEL_DIR` says. What tests and benchmarks open, so that none of them
    /// depends on a model being installed or is slowed by one.
    pub fn without_model(home: impl Into<PathBuf>) -> OpenOptions {
        let home = home.into();
        OpenOptions {
            model_dir: Some(home.join("no-model")),
            home: Some(home),
            ..OpenOptions::default()
        }
    }
}

/// Which scope a new note goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeChoice {
    User,
    Project,
    Domain,
}

impl std::str::FromStr for ScopeChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "user" => Ok(ScopeChoice::User),
            "project" => Ok(ScopeChoice::Project),
            "domain" => Ok(ScopeChoice::Domain),
            _ => Err(Error::Invalid(format!(
                "unknown scope {s:?}: use user, project or domain"
            ))),
        }
    }
}

/// A note to create.
#[derive(Debug, Clone, Default)]
pub struct NewNote {
    pub summary: String,
    pub body: String,
    pub note_type: Option<NoteType>,
    pub tags: Vec<String>,
    pub scope: Option<ScopeChoice>,
    pub id: Option<String>,
    pub importance: Option<f64>,
    pub source: Option<Source>,
    pub relations: Vec<Relation>,
}

/// Changes to an existing note; `None` leaves a part as it is.
#[derive(Debug, Clone, Default)]
pub struct NoteEdit {
    pub summary: Option<String>,
    pub body: Option<String>,
    pub tags: Option<Vec<String>>,
    pub note_type: Option<NoteType>,
    pub importance: Option<f64>,
    pub source: Option<Source>,
    pub relations: Option<Vec<Relation>>,
}

/// A note as shown to a user: the file's parsed content (absent when it does not parse), its
/// index row, and the notes that link to it.
#[derive(Debug, Clone)]
pub struct NoteView {
    pub scope: Scope,
    pub indexed: IndexedNote,
    pub note: Option<Note>,
    pub backlinks: Vec<(String, String)>,
}

/// Where a written note went.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    pub scope: String,
    pub id: String,
    pub path: String,
}

/// The outcome of a restore.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Restored {
    pub scope: String,
    pub id: String,
    pub path: String,
    /// The backup of the version the restore replaced, if it replaced one.
    pub replaced_backup: Option<String>,
    pub unchanged: bool,
}

/// The outcome of [`Engine::forget_purge`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Purged {
    pub scope: String,
    pub id: String,
    pub backups_removed: usize,
}

/// The memory engine over one `MEMORIA_HOME` and (optionally) one project.
#[derive(Debug)]
pub struct Engine {
    home: Home,
    project: Option<Project>,
    index: Index,
    clock: Arc<dyn Clock>,
    limits: Limits,
    backups: Backups,
    model_dir: Option<PathBuf>,
    /// Opened on first search (loading the model takes a moment), or shared by the session
    /// that opened this engine; see `search.rs`.
    pub recall_index: std::sync::OnceLock<Arc<crate::search::SharedRecall>>,
    /// Whether a search first brings the recall index in step with the vault. A session's
    /// read engine leaves that to the session, so a read never waits for embedding.
    pub recall_follows_reads: bool,
    /// The conversation log, opened on first use (`said.rs`).
    pub(crate) log: std::sync::OnceLock<std::sync::Mutex<memoria_store::log::Log>>,
}

impl Engine {
    /// Opens the home (creating its folders), finds the project, and runs the repair scan over
    /// every visible scope that no watcher is keeping fresh.
    pub fn open(opts: OpenOptions) -> Result<Engine> {
        let home = Home::resolve(opts.home.as_deref())?;
        home.ensure()?;
        let project = match &opts.project_dir {
            Some(dir) => Project::open(&home, dir)?,
            None => None,
        };
        let index = Index::open(&home.index_db())?;
        let backups = Backups::new(home.backups_dir(), BackupPolicy::load(home.root())?);
        let mut engine = Engine {
            home,
            project,
            index,
            clock: opts.clock,
            limits: opts.limits,
            backups,
            model_dir: opts.model_dir,
            recall_index: std::sync::OnceLock::new(),
            recall_follows_reads: true,
            log: std::sync::OnceLock::new(),
        };
        engine.rescan(false)?;
        engine.backups.repair_index(&engine.index)?;
        Ok(engine)
    }

    pub fn home(&self) -> &Home {
        &self.home
    }
    pub fn project(&self) -> Option<&Project> {
        self.project.as_ref()
    }
    pub fn limits(&self) -> Limits {
        self.limits
    }
    pub fn index(&self) -> &Index {
        &self.index
    }
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock.clone()
    }
    pub fn model_dir(&self) -> Option<&Path> {
        self.model_dir.as_deref()
    }

    /// The scopes this process may see, most specific first: project, its domain, user.
    pub fn visible_scopes(&self) -> Vec<Scope> {
        crate::project::visible_scopes(self.project.as_ref())
    }

    fn visible_keys(&self) -> Vec<String> {
        self.visible_scopes().iter().map(Scope::key).collect()
    }

    /// The folder of a visible scope.
    pub fn scope_dir(&self, scope: &Scope) -> Result<PathBuf> {
        Project::scope_dir(&self.home, self.project.as_ref(), scope)
    }

    /// The lock file a watcher holds while it keeps `scope` fresh.
    pub fn watch_lock_path(&self, scope: &Scope) -> PathBuf {
        self.home
            .locks_dir()
            .join(format!("watch-{}.lock", scope.key().replace(':', "_")))
    }

    fn write_lock(&self, scope: &Scope) -> Result<FileLock> {
        FileLock::acquire(
            &self
                .home
                .locks_dir()
                .join(format!("write-{}.lock", scope.key().replace(':', "_"))),
        )
    }

    /// Repairs the index from the files of every visible scope. With `force`, scopes kept fresh
    /// by a running watcher are scanned too.
    pub fn rescan(&mut self, force: bool) -> Result<ScanStats> {
        let mut total = ScanStats::default();
        for scope in self.visible_scopes() {
            if !force && FileLock::is_held(&self.watch_lock_path(&scope)) {
                continue;
            }
            total.add(self.rescan_scope(&scope)?);
        }
        Ok(total)
    }

    pub fn rescan_scope(&mut self, scope: &Scope) -> Result<ScanStats> {
        let dir = self.scope_dir(scope)?;
        let files = scan::list_for_scan(&dir)?;
        scan::rescan_listed(&mut self.index, &scope.key(), &files)
    }

    fn resolve_scope(
        &self,
        choice: Option<ScopeChoice>,
        note_type: Option<&NoteType>,
    ) -> Result<Scope> {
        let choice = choice.unwrap_or(match note_type {
            Some(NoteType::User) => ScopeChoice::User,
            Some(NoteType::Domain)
                if self
                    .project
                    .as_ref()
                    .is_some_and(|p| p.project_type.is_some()) =>
            {
                ScopeChoice::Domain
            }
            _ if self.project.is_some() => ScopeChoice::Project,
            _ => ScopeChoice::User,
        });
        self.scope_of(choice)
    }

    /// The visible scope a `--scope user|project|domain` choice names.
    pub fn scope_of(&self, choice: ScopeChoice) -> Result<Scope> {
        match choice {
            ScopeChoice::User => Ok(Scope::User),
            ScopeChoice::Project => self
                .project
                .as_ref()
                .map(Project::scope)
                .ok_or(Error::NoProject),
            ScopeChoice::Domain => {
                let p = self.project.as_ref().ok_or(Error::NoProject)?;
                p.project_type
                    .clone()
                    .map(Scope::Domain)
                    .ok_or(Error::NoProjectType)
            }
        }
    }

    pub fn check_text(
        &self,
        summary: &str,
        body: &str,
        tags: &[String],
        relations: &[Relation],
    ) -> Result<()> {
        let summary_t = summary.trim();
        if summary_t.is_empty() {
            return Err(Error::Invalid(
                "summary is empty: give a one-line summary".into(),
            ));
        }
        if summary.contains('\n') {
            return Err(Error::Invalid(
                "summary must be one line: put the details in the body".into(),
            ));
        }
        let chars = summary.chars().count();
        if chars > self.limits.summary_chars {
            return Err(Error::TooLong {
                field: "summary",
                len: chars,
                limit: self.limits.summary_chars,
                unit: "characters",
                fix: "shorten it and put the details in the body",
            });
        }
        if body.len() > self.limits.body_bytes {
            return Err(Error::BodyTooLarge {
                size: body.len(),
                limit: self.limits.body_bytes,
            });
        }
        for t in tags {
            if t.is_empty()
                || t.chars().count() > 64
                || t.contains(|c: char| c.is_whitespace() || c == ',')
            {
                return Err(Error::Invalid(format!(
                    "tag {t:?} is invalid: tags are 1-64 characters without spaces or commas"
                )));
            }
        }
        for (field, text) in [("summary", summary), ("body", body)] {
            if let Some(f) = guard::scan(text) {
                return Err(Error::Secret {
                    field,
                    rule: f.rule,
                    line: f.line,
                });
            }
        }
        if let Some(f) = guard::scan(&tags.join("\n")) {
            return Err(Error::Secret {
                field: "tags",
                rule: f.rule,
                line: f.line,
            });
        }
        let targets: Vec<&str> = relations.iter().map(|r| r.target.as_str()).collect();
        if let Some(f) = guard::scan(&targets.join("\n")) {
            return Err(Error::Secret {
                field: "relations",
                rule: f.rule,
                line: f.line,
            });
        }
        Ok(())
    }

    /// Refuses `id` if the scope already has it, or a file whose name differs only in case.
    fn check_free(&self, scope: &Scope, dir: &Path, id: &NoteId) -> Result<()> {
        let key = scope.key();
        if !self.index.find(&key, id.as_str())?.is_empty() || dir.join(id.file_name()).exists() {
            return Err(Error::Exists(id.to_string()));
        }
        if let Some(other) = self
            .index
            .find_ignoring_case(&key, id.as_str())?
            .into_iter()
            .next()
        {
            return Err(Error::CaseCollision {
                id: id.to_string(),
                existing: other.id,
            });
        }
        let wanted = id.file_name();
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.to_lowercase() == wanted && name != wanted {
                    return Err(Error::CaseCollision {
                        id: id.to_string(),
                        existing: name,
                    });
                }
            }
        }
        Ok(())
    }

    fn check_room(&self, scope: &Scope) -> Result<()> {
        if self.index.count(&scope.key())? >= self.limits.notes_per_scope {
            return Err(Error::ScopeFull {
                scope: scope.key(),
                limit: self.limits.notes_per_scope,
            });
        }
        Ok(())
    }

    fn generate_id(&self, scope: &Scope, dir: &Path, summary: &str) -> Result<NoteId> {
        let words: Vec<&str> = summary.split_whitespace().take(6).collect();
        let base = slugify(&words.join(" "));
        let base: String = base.as_str().chars().take(48).collect();
        let base = base.trim_end_matches(['-', '.', '_']);
        for _ in 0..64 {
            let candidate = if base.is_empty() {
                format!("note-{}", &fsx::random_hex(3)[..5])
            } else {
                format!("{base}-{}", &fsx::random_hex(2)[..3])
            };
            let id = NoteId::new(&candidate)?;
            if self.check_free(scope, dir, &id).is_ok() {
                return Ok(id);
            }
        }
        Err(Error::Invalid(
            "could not find a free id for this summary: give the note an id".into(),
        ))
    }

    /// Creates a note. Refuses secrets, oversize bodies, taken ids and full scopes.
    pub fn add(&mut self, new: NewNote) -> Result<Written> {
        self.check_text(&new.summary, &new.body, &new.tags, &new.relations)?;
        check_importance(new.importance)?;
        let scope = self.resolve_scope(new.scope, new.note_type.as_ref())?;
        let dir = self.scope_dir(&scope)?;
        let _lock = self.write_lock(&scope)?;
        self.rescan_scope(&scope)?;
        self.check_room(&scope)?;
        let id = match &new.id {
            Some(s) => {
                let id = NoteId::new(s)?;
                self.check_free(&scope, &dir, &id)?;
                id
            }
            None => self.generate_id(&scope, &dir, &new.summary)?,
        };
        let now = self.clock.now_ms();
        let mut note = Note::new(id, new.summary.trim(), with_final_newline(new.body));
        note.note_type = new.note_type;
        note.tags = new.tags;
        note.importance = new.importance;
        note.source = new.source;
        note.relations = new.relations;
        note.created_at = Some(now);
        note.updated_at = Some(now);
        let rel = note.id.file_name();
        let abs = dir.join(&rel);
        if !fsx::create_new(&abs, note.serialize().as_bytes())? {
            return Err(Error::Exists(note.id.to_string()));
        }
        self.index_file(&scope, &abs, &rel)?;
        Ok(Written {
            scope: scope.key(),
            id: note.id.to_string(),
            path: abs.to_string_lossy().into_owned(),
        })
    }

    /// Writes a note file atomically and indexes it.
    fn write_note(&mut self, scope: &Scope, dir: &Path, rel: &str, note: &Note) -> Result<Written> {
        let abs = dir.join(rel);
        fsx::write_atomic(&abs, note.serialize().as_bytes())?;
        self.index_file(scope, &abs, rel)?;
        Ok(Written {
            scope: scope.key(),
            id: note.id.to_string(),
            path: abs.to_string_lossy().into_owned(),
        })
    }

    pub fn index_file(&mut self, scope: &Scope, abs: &Path, rel: &str) -> Result<()> {
        let row = scan::read_file(&scope.key(), &FoundFile::stat(abs, rel)?)?;
        self.index.apply(&[row], &[])
    }

    /// Finds a visible note by id: project first, then domain, then user (or only `scope`).
    /// Accepts a plain id, `vt:<id>` or `vt:<user|project|domain>/<id>` (the recall ids).
    pub fn resolve(&self, reference: &str, scope: Option<&Scope>) -> Result<(Scope, IndexedNote)> {
        let bare = reference.strip_prefix("vt:").unwrap_or(reference);
        let (kind, id) = match bare.split_once('/') {
            Some((kind @ ("user" | "project" | "domain"), id)) => (Some(kind), id),
            _ => (None, bare),
        };
        NoteId::new(id)?;
        for s in self.visible_scopes() {
            if scope.is_some_and(|want| want != &s) || kind.is_some_and(|k| k != s.kind()) {
                continue;
            }
            if let Some(row) = self.index.find(&s.key(), id)?.into_iter().next() {
                return Ok((s, row));
            }
        }
        Err(Error::NotFound(id.to_owned()))
    }

    /// The recall id of a note: `vt:<scope kind>/<id>`.
    pub fn reference(scope: &Scope, id: &str) -> String {
        format!("vt:{}/{id}", scope.kind())
    }

    /// A note with its parsed content and backlinks; counts one access on this machine.
    pub fn show(&self, id: &str, scope: Option<&Scope>) -> Result<NoteView> {
        let (scope, indexed) = self.resolve(id, scope)?;
        let note = match indexed.error {
            Some(_) => None,
            None => {
                let text = std::fs::read_to_string(&indexed.path)
                    .map_err(Error::io("read", &indexed.path))?;
                let ctx = FileContext {
                    relative_path: &indexed.rel_path,
                };
                Note::parse(&text, ctx).ok()
            }
        };
        let backlinks = self.index.backlinks(&self.visible_keys(), &indexed.id)?;
        self.index
            .record_access(&scope.key(), &indexed.id, self.clock.now_ms())?;
        // Ranking's count of uses only re-ranks: an opening is not refused when the recall
        // index's file cannot take it (the index above has counted it).
        let _ = self.record_recall_use(&scope.key(), &indexed.id);
        Ok(NoteView {
            scope,
            indexed,
            note,
            backlinks,
        })
    }

    /// Changes parts of a note the user chose to change. Broken files are never rewritten.
    pub fn edit(&mut self, id: &str, scope: Option<&Scope>, edit: NoteEdit) -> Result<Written> {
        self.edit_with_backup(id, scope, edit, None).map(|(w, _)| w)
    }

    /// Like [`Engine::edit`], backing the current version up first when `backup` is given (an
    /// agent's update, which nobody chose version by version); returns that backup too.
    pub fn edit_with_backup(
        &mut self,
        id: &str,
        scope: Option<&Scope>,
        edit: NoteEdit,
        backup: Option<BackupReason>,
    ) -> Result<(Written, Option<BackupMeta>)> {
        let (scope, _) = self.resolve(id, scope)?;
        let _lock = self.write_lock(&scope)?;
        self.rescan_scope(&scope)?;
        let (_, row) = self.resolve(id, Some(&scope))?;
        let (mut note, expected) = self.load_writable(&row)?;
        if let Some(s) = edit.summary {
            note.summary = s.trim().to_owned();
        }
        if let Some(b) = edit.body {
            note.body = with_final_newline(b);
        }
        if let Some(t) = edit.tags {
            note.tags = t;
        }
        if let Some(t) = edit.note_type {
            note.note_type = Some(t);
        }
        if edit.importance.is_some() {
            note.importance = edit.importance;
        }
        if edit.source.is_some() {
            note.source = edit.source;
        }
        if let Some(r) = edit.relations {
            note.relations = r;
        }
        self.check_text(&note.summary, &note.body, &note.tags, &note.relations)?;
        check_importance(note.importance)?;
        note.updated_at = Some(self.clock.now_ms());
        let abs = PathBuf::from(&row.path);
        let taken = self.replace_file(&scope, &row, &expected, note.serialize().as_bytes(), backup);
        // Whatever is in the folder now (ours, or another program's newer file) is indexed.
        self.index_file(&scope, &abs, &row.rel_path)?;
        let taken = taken?;
        Ok((
            Written {
                scope: scope.key(),
                id: note.id.to_string(),
                path: row.path.clone(),
            },
            taken,
        ))
    }

    /// Replaces a note's file, which must still hold `expected`, with `bytes` (see
    /// [`fsx::replace`]); the old version is backed up under `backup` first. A version another
    /// program wrote meanwhile is never overwritten: it stays in place, or when it was itself
    /// displaced, it is backed up.
    pub fn replace_file(
        &self,
        scope: &Scope,
        row: &IndexedNote,
        expected: &[u8],
        bytes: &[u8],
        backup: Option<BackupReason>,
    ) -> Result<Option<BackupMeta>> {
        let mut taken = None;
        fsx::replace(Path::new(&row.path), expected, bytes, &mut |old| {
            self.keep_displaced(
                scope,
                &row.id,
                &row.rel_path,
                expected,
                old,
                backup,
                &mut taken,
            )
        })?;
        Ok(taken)
    }

    /// Backs up `old`, a version a write displaced: always when it is not the version the
    /// caller read (another program wrote it), else under `backup` if given.
    #[allow(clippy::too_many_arguments)]
    fn keep_displaced(
        &self,
        scope: &Scope,
        id: &str,
        rel_path: &str,
        expected: &[u8],
        old: &[u8],
        backup: Option<BackupReason>,
        taken: &mut Option<BackupMeta>,
    ) -> Result<()> {
        let reason = match backup {
            Some(r) => r,
            None if old != expected => BackupReason::ConflictSetAside,
            None => return Ok(()),
        };
        *taken = Some(self.backup_bytes(scope, id, rel_path, old, reason)?);
        Ok(())
    }

    pub fn load_writable(&self, row: &IndexedNote) -> Result<(Note, Vec<u8>)> {
        let broken = |reason: String| Error::Broken {
            id: row.id.clone(),
            path: row.path.clone().into(),
            reason,
        };
        if let Some(e) = &row.error {
            return Err(broken(e.clone()));
        }
        let bytes = std::fs::read(&row.path).map_err(Error::io("read", &row.path))?;
        let text =
            std::str::from_utf8(&bytes).map_err(|_| broken("the file is not UTF-8 text".into()))?;
        let note = Note::parse(
            text,
            FileContext {
                relative_path: &row.rel_path,
            },
        )
        .map_err(|e| broken(e.to_string()))?;
        Ok((note, bytes))
    }

    /// Backs up a note's current file under `reason`.
    pub fn backup(
        &self,
        scope: &Scope,
        row: &IndexedNote,
        reason: BackupReason,
    ) -> Result<BackupMeta> {
        let bytes =
            scan::read_note_bytes(row.path.as_ref()).map_err(Error::io("read", &row.path))?;
        let project_root = match scope {
            Scope::Project(_) => self.project.as_ref().map(|p| p.root.as_path()),
            _ => None,
        };
        self.backups.write(
            &self.index,
            BackupRequest {
                scope: &scope.key(),
                note_id: &row.id,
                rel_path: &row.rel_path,
                project_root,
                bytes: &bytes,
                reason,
                now_ms: self.clock.now_ms(),
            },
        )
    }

    /// Backs a note up, then removes it.
    pub fn forget(&mut self, id: &str, scope: Option<&Scope>) -> Result<BackupMeta> {
        let (scope, _) = self.resolve(id, scope)?;
        let _lock = self.write_lock(&scope)?;
        self.rescan_scope(&scope)?;
        let (_, row) = self.resolve(id, Some(&scope))?;
        self.remove_checked(&scope, &row, Some(BackupReason::Forget))?
            .ok_or_else(|| Error::ChangedMeanwhile {
                path: PathBuf::from(&row.path),
            })
    }

    /// Removes a resolved note's file if it still holds what it held when read (under the
    /// caller's scope lock), backing it up under `backup`; a version another program wrote
    /// meanwhile stays, or is backed up when it was displaced. Returns the backup taken.
    pub fn remove_checked(
        &mut self,
        scope: &Scope,
        row: &IndexedNote,
        backup: Option<BackupReason>,
    ) -> Result<Option<BackupMeta>> {
        let path = PathBuf::from(&row.path);
        let expected = std::fs::read(&path).map_err(Error::io("read", &path))?;
        let mut taken = None;
        let removed = fsx::remove_checked(&path, &expected, &mut |old| {
            self.keep_displaced(
                scope,
                &row.id,
                &row.rel_path,
                &expected,
                old,
                backup,
                &mut taken,
            )
        });
        self.rescan_scope(scope)?;
        removed?;
        Ok(taken)
    }

    /// Forgets a note and everything Memoria kept of it: the file, every backup of it, its
    /// usage counts, and every copy in the index files (the SQLite files are vacuumed, the
    /// search index is merged without it). Nothing can bring it back afterwards.
    pub fn forget_purge(&mut self, id: &str, scope: Option<&Scope>) -> Result<Purged> {
        let (scope, _) = self.resolve(id, scope)?;
        let _lock = self.write_lock(&scope)?;
        self.rescan_scope(&scope)?;
        let (_, row) = self.resolve(id, Some(&scope))?;
        self.remove_checked(&scope, &row, None)?;
        let key = scope.key();
        let backups_removed = self.backups.purge_note(&self.index, &key, &row.id)?;
        self.index.remove_usage(&key, &row.id)?;
        self.index.compact()?;
        let hashes: Vec<String> = row.hash.iter().cloned().collect();
        let recall = self.recall()?;
        recall.purge(&hashes).map_err(Error::from)?;
        Ok(Purged {
            scope: key,
            id: row.id,
            backups_removed,
        })
    }

    /// Applies the backup policy now (it also runs whenever a backup is written).
    pub fn prune_backups(&self) -> Result<PruneReport> {
        self.backups.prune(&self.index, self.clock.now_ms(), None)
    }

    /// How long backups stay.
    pub fn backup_policy(&self) -> BackupPolicy {
        self.backups.policy()
    }

    /// Notes of the visible scopes (or one of them), with parse errors shown, without their
    /// bodies ([`Engine::show`] gives a note's text).
    pub fn list(
        &self,
        scope: Option<&Scope>,
        note_type: Option<&str>,
        tag: Option<&str>,
    ) -> Result<Vec<ListedNote>> {
        let scopes = match scope {
            Some(s) if self.visible_scopes().contains(s) => vec![s.key()],
            Some(s) => {
                return Err(Error::ScopeNotVisible {
                    scope: s.key(),
                    reason: format!("scope {s} is not visible from here"),
                });
            }
            None => self.visible_keys(),
        };
        self.index.list(&ListFilter {
            scopes,
            note_type: note_type.map(String::from),
            tag: tag.map(String::from),
        })
    }

    /// Backups, newest first.
    pub fn backups(&self, limit: usize) -> Result<Vec<BackupRow>> {
        self.index.backups(limit)
    }

    /// Puts a backup back into the scope it came from. A different current version is backed
    /// up first; a restore onto an identical file changes nothing.
    pub fn restore(&mut self, backup_id: &str) -> Result<Restored> {
        let (meta, bytes) = self.backups.read(backup_id)?;
        let scope = Scope::from_key(&meta.scope)?;
        let dir = match &scope {
            Scope::Project(pid) if self.project.as_ref().is_none_or(|p| p.scope() != scope) => {
                let root = meta.project_root.as_deref().ok_or(Error::NoProject)?;
                let p = Project::load(Path::new(root)).map_err(|_| {
                    Error::ScopeNotVisible {
                        scope: meta.scope.clone(),
                        reason: format!("the backup belongs to project {pid} at {root}, which is gone: restore it from inside that project"),
                    }
                })?;
                let bound = crate::project::registered_scope(&self.home, &p.root)?;
                if bound.as_deref() != Some(pid.as_str())
                    || scope.project_id() != Some(p.id.as_str())
                {
                    return Err(Error::ScopeNotVisible {
                        scope: meta.scope.clone(),
                        reason: format!("{root} is no longer project {pid}: nothing was restored"),
                    });
                }
                p.memory_dir()
            }
            _ => self.scope_dir(&scope)?,
        };
        let _lock = self.write_lock(&scope)?;
        scan::rescan(&mut self.index, &scope.key(), &dir)?;
        // The note may live at its old path, or (renamed by hand) elsewhere in the scope.
        let current = match self
            .index
            .by_path(&dir.join(&meta.rel_path).to_string_lossy())?
        {
            Some(row) => Some(row),
            None => self
                .index
                .find(&scope.key(), &meta.note_id)?
                .into_iter()
                .next(),
        };
        let (target_abs, target_rel) = match &current {
            Some(row) => (PathBuf::from(&row.path), row.rel_path.clone()),
            None => (dir.join(&meta.rel_path), meta.rel_path.clone()),
        };
        let mut replaced_backup = None;
        if let Some(row) = &current {
            let now =
                scan::read_note_bytes(row.path.as_ref()).map_err(Error::io("read", &row.path))?;
            if now == bytes {
                return Ok(Restored {
                    scope: scope.key(),
                    id: meta.note_id,
                    path: row.path.clone(),
                    replaced_backup: None,
                    unchanged: true,
                });
            }
            let project_root = meta.project_root.as_deref().map(Path::new);
            let mut taken = None;
            fsx::replace(&target_abs, &now, &bytes, &mut |old| {
                let b = self.backups.write(
                    &self.index,
                    BackupRequest {
                        scope: &scope.key(),
                        note_id: &row.id,
                        rel_path: &row.rel_path,
                        project_root,
                        bytes: old,
                        reason: BackupReason::RestoreOver,
                        now_ms: self.clock.now_ms(),
                    },
                )?;
                taken = Some(b.backup_id);
                Ok(())
            })?;
            replaced_backup = taken;
        } else if self.index.count(&scope.key())? >= self.limits.notes_per_scope {
            return Err(Error::ScopeFull {
                scope: scope.key(),
                limit: self.limits.notes_per_scope,
            });
        } else if !fsx::create_new(&target_abs, &bytes)? {
            return Err(Error::ChangedMeanwhile { path: target_abs });
        }
        if self.visible_scopes().contains(&scope) {
            self.index_file(&scope, &target_abs, &target_rel)?;
        } else {
            let found = FoundFile::stat(&target_abs, &target_rel)?;
            let row = scan::read_file(&scope.key(), &found)?;
            self.index.apply(&[row], &[])?;
        }
        Ok(Restored {
            scope: scope.key(),
            id: meta.note_id,
            path: target_abs.to_string_lossy().into_owned(),
            replaced_backup,
            unchanged: false,
        })
    }

    /// Takes the scope write lock, for bulk writers (import) in this crate.
    pub fn lock_scope(&self, scope: &Scope) -> Result<FileLock> {
        self.write_lock(scope)
    }

    /// Writes one prepared note at `rel` inside `scope` (sync; checks are the caller's).
    pub fn put_note(&mut self, scope: &Scope, rel: &str, note: &Note) -> Result<Written> {
        let dir = self.scope_dir(scope)?;
        self.write_note(scope, &dir, rel, note)
    }

    /// Writes many prepared notes of one scope: the files in parallel (each atomic), then one
    /// index transaction. Crate-private: its one caller, import, has run every note through
    /// the credential guard (a note that trips it is tagged and kept from agents).
    pub fn put_notes(&mut self, scope: &Scope, notes: &[(String, Note)]) -> Result<Vec<Written>> {
        let dir = self.scope_dir(scope)?;
        let files: Vec<(PathBuf, Vec<u8>)> = notes
            .iter()
            .map(|(rel, n)| (dir.join(rel), n.serialize().into_bytes()))
            .collect();
        if let Err(e) = fsx::write_many_atomic(&files) {
            // Whatever did land is complete; let the index see it before reporting the error.
            self.rescan_scope(scope)?;
            return Err(e);
        }
        let mut rows = Vec::with_capacity(notes.len());
        for ((rel, _), (abs, _)) in notes.iter().zip(&files) {
            rows.push(scan::read_file(&scope.key(), &FoundFile::stat(abs, rel)?)?);
        }
        self.index.apply(&rows, &[])?;
        Ok(notes
            .iter()
            .zip(&files)
            .map(|((_, n), (abs, _))| Written {
                scope: scope.key(),
                id: n.id.to_string(),
                path: abs.to_string_lossy().into_owned(),
            })
            .collect())
    }

    /// Rescans one scope's files into the index (sync reads the scope fresh before a pass).
    pub fn refresh_scope(&mut self, scope: &Scope) -> Result<ScanStats> {
        self.rescan_scope(scope)
    }

    /// [`Engine::refresh_scope`] against `files`, the scope's folder as
    /// [`scan::list_for_scan`] listed it; gives the scope's files as [`Index::files`] then
    /// would.
    pub fn refresh_scope_listed(
        &mut self,
        scope: &Scope,
        files: &[scan::FoundFile],
    ) -> Result<Vec<crate::index::FileRow>> {
        scan::rescan_listed_rows(&mut self.index, &scope.key(), files).map(|(_, rows)| rows)
    }

    /// Puts `new` (or, with `None`, nothing) at `rel` in `scope`, only if the file there still
    /// holds `expected` (`None`: no file there yet). The displaced version is backed up under
    /// `reason` first, and a version another program wrote meanwhile is never overwritten nor
    /// lost (see [`fsx::replace`]). Returns false when the file changed meanwhile: what is there
    /// stays, and is indexed. For sync downloads and merges; checks are the caller's.
    pub fn swap_note_file(
        &mut self,
        scope: &Scope,
        id: &str,
        rel: &str,
        expected: Option<&[u8]>,
        new: Option<&Note>,
        reason: Option<BackupReason>,
    ) -> Result<bool> {
        let abs = self.scope_dir(scope)?.join(rel);
        let result = match (expected, new) {
            (None, None) => Ok(()),
            (None, Some(n)) => match fsx::create_new(&abs, n.serialize().as_bytes()) {
                Ok(true) => Ok(()),
                Ok(false) => Err(Error::ChangedMeanwhile { path: abs.clone() }),
                Err(e) => Err(e),
            },
            (Some(expected), new) => {
                let mut taken = None;
                let mut keep = |old: &[u8]| {
                    self.keep_displaced(scope, id, rel, expected, old, reason, &mut taken)
                };
                match new {
                    Some(n) => fsx::replace(&abs, expected, n.serialize().as_bytes(), &mut keep),
                    None => fsx::remove_checked(&abs, expected, &mut keep),
                }
            }
        };
        // Whatever is in the folder now (ours, or another program's newer file) is indexed.
        if std::fs::symlink_metadata(&abs).is_ok() {
            self.index_file(scope, &abs, rel)?;
        } else {
            self.index
                .apply(&[], &[abs.to_string_lossy().into_owned()])?;
        }
        match result {
            Ok(()) => Ok(true),
            Err(Error::ChangedMeanwhile { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Backs up bytes that are not (or no longer) a file in the vault, e.g. the cloud's version
    /// of a note set aside by a merge or a conflict resolution.
    pub fn backup_bytes(
        &self,
        scope: &Scope,
        id: &str,
        rel_path: &str,
        bytes: &[u8],
        reason: BackupReason,
    ) -> Result<BackupMeta> {
        let project_root = match scope {
            Scope::Project(_) => self.project.as_ref().map(|p| p.root.as_path()),
            _ => None,
        };
        self.backups.write(
            &self.index,
            BackupRequest {
                scope: &scope.key(),
                note_id: id,
                rel_path,
                project_root,
                bytes,
                reason,
                now_ms: self.clock.now_ms(),
            },
        )
    }
}

fn check_importance(importance: Option<f64>) -> Result<()> {
    match importance {
        Some(i) if !(0.0..=1.0).contains(&i) => Err(Error::Invalid(format!(
            "importance {i} is outside 0..1: use a value between 0 and 1"
        ))),
        _ => Ok(()),
    }
}

/// Bodies written by Memoria end with a newline, as editors expect; an empty body stays empty.
pub fn with_final_newline(mut body: String) -> String {
    if !body.is_empty() && !body.ends_with('\n') {
        body.push('\n');
    }
    body
}

#[cfg(test)]
mod tests;
