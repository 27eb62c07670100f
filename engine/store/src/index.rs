//! The SQLite index: note metadata, tags, links, full text, per-machine usage counts, backups
//! and known projects. It is derived from the files (except usage counts, which never go into
//! note files): delete it and the next start rebuilds it. Several processes share it (WAL mode,
//! busy timeout); every write is one short transaction.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};

const SCHEMA_VERSION: i64 = 5;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notes(
    path TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    rel_path TEXT NOT NULL,
    id TEXT NOT NULL,
    summary TEXT NOT NULL,
    type TEXT,
    tags TEXT NOT NULL,
    created_at INTEGER,
    updated_at INTEGER,
    hash TEXT,
    trust TEXT,
    source TEXT,
    importance REAL,
    status TEXT,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    error TEXT,
    body TEXT NOT NULL,
    aliases TEXT NOT NULL DEFAULT '[]'
);
-- What a scan and a sync pass list of a scope's files, read from the index alone: the rows
-- themselves hold each note's whole text.
DROP INDEX IF EXISTS notes_scope_id;
CREATE INDEX IF NOT EXISTS notes_scope_files ON notes(scope, id, path, rel_path, mtime_ns, size, error);
CREATE TABLE IF NOT EXISTS tags(path TEXT NOT NULL, tag TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS tags_path ON tags(path);
CREATE INDEX IF NOT EXISTS tags_tag ON tags(tag);
CREATE TABLE IF NOT EXISTS links(path TEXT NOT NULL, target TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS links_path ON links(path);
CREATE INDEX IF NOT EXISTS links_target ON links(target);
CREATE TABLE IF NOT EXISTS relations(path TEXT NOT NULL, kind TEXT NOT NULL, target TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS relations_path ON relations(path);
CREATE INDEX IF NOT EXISTS relations_target ON relations(target);
CREATE TABLE IF NOT EXISTS usage(
    scope TEXT NOT NULL, id TEXT NOT NULL, access_count INTEGER NOT NULL, last_access INTEGER NOT NULL,
    PRIMARY KEY(scope, id)
);
CREATE TABLE IF NOT EXISTS backups(
    backup_id TEXT PRIMARY KEY, scope TEXT NOT NULL, note_id TEXT NOT NULL, reason TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS projects(
    id TEXT PRIMARY KEY, root TEXT NOT NULL, project_type TEXT, last_seen INTEGER NOT NULL
);
";

/// What the recall index is kept in step with, per indexed file (no body).
#[derive(Debug, Clone, PartialEq)]
pub struct NoteState {
    pub scope: String,
    pub id: String,
    /// What recall keys the note by ([`recall_hash`]); `None` for a file that failed to parse.
    pub hash: Option<String>,
    pub path: String,
    /// Whether an agent may see the note.
    pub recallable: bool,
    /// Ranking facts outside the content hash.
    pub facts: RankFacts,
}

/// The hash recall keys a note's document and vectors by: its content hash, or, for a note
/// with aliases (searched with it, but no part of the content hash), a hash of both, so that a
/// change of aliases alone brings its document up to date.
pub fn recall_hash(content_hash: &str, aliases: &[String]) -> String {
    if aliases.is_empty() {
        return content_hash.to_owned();
    }
    let mut text = content_hash.to_owned();
    for a in aliases {
        text.push('\n');
        text.push_str(a);
    }
    memoria_shared::hash::sha256_hex(text.as_bytes())
}

/// Tags that exempt a note from recency decay.
pub const EVERGREEN_TAGS: [&str; 2] = ["evergreen", "pinned"];

/// Whether something else now stands for a note: it was folded into a consolidated note
/// (`status: consolidated`), or another note of its scope names it in a `supersedes` relation.
/// Ranking puts such a note below what replaced it. The second depends on other notes, so it
/// can change while the note's own text and hash stay the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Standing {
    pub consolidated: bool,
    pub superseded: bool,
}

/// What ranking reads about a note beyond its content hash: a change to any of them must reach
/// the index even when the text is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RankFacts {
    pub updated_at_ms: Option<i64>,
    pub trust: Option<memoria_shared::Trust>,
    pub importance: Option<f64>,
    pub evergreen: bool,
    pub standing: Standing,
}

/// Whether an agent may see a note at all: a file that does not parse, a quarantined note and a
/// note marked `contains-secrets` are never shown, searched, recalled or changed by an agent.
/// [`Index::note_states`] applies the same rule in SQL.
pub fn recallable<B>(row: &IndexedNote<B>) -> bool {
    row.error.is_none()
        && row.trust.as_deref() != Some("quarantined")
        && !row.tags.iter().any(|t| t == crate::guard::SECRETS_TAG)
}

/// A stored trust name as recall reads it; `None` for a name Memoria does not know.
pub fn trust_of(name: &str) -> Option<memoria_shared::Trust> {
    serde_json::from_value(name.into()).ok()
}

/// One indexed file: a note, or a file that failed to parse (then `error` is set and `body`
/// holds the whole file so it stays searchable). `B` is what the row carries of the body: the
/// text itself, or nothing for a [`ListedNote`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexedNote<B = String> {
    pub path: String,
    pub scope: String,
    pub rel_path: String,
    pub id: String,
    pub summary: String,
    #[serde(rename = "type")]
    pub note_type: Option<String>,
    pub tags: Vec<String>,
    pub created_at: Option<i64>,
    pub updated_at: Option<i64>,
    pub hash: Option<String>,
    pub trust: Option<String>,
    pub source: Option<String>,
    pub importance: Option<f64>,
    /// The life-cycle state (`working`, `consolidated`, `archived`), as written.
    pub status: Option<String>,
    #[serde(skip)]
    pub mtime_ns: i64,
    #[serde(skip)]
    pub size: i64,
    pub error: Option<String>,
    #[serde(skip)]
    pub body: B,
    /// The other names the note answers to (`aliases` in its frontmatter), as written.
    #[serde(skip)]
    pub aliases: Vec<String>,
    /// Link targets as written, for backlinks.
    #[serde(skip)]
    pub links: Vec<String>,
    /// Typed relations `(kind, target)`, targets slugged as link targets are; written to the
    /// index, not read back with a row ([`Index::relations`] reads them).
    #[serde(skip)]
    pub relations: Vec<(String, String)>,
}

impl<B> IndexedNote<B> {
    /// What recall keys the note's document and vectors by ([`recall_hash`]).
    pub fn recall_hash(&self) -> Option<String> {
        self.hash.as_deref().map(|h| recall_hash(h, &self.aliases))
    }
}

/// A row of [`Index::list`]: everything but the body, which a listing does not read (bodies
/// are most of the table's bytes). A note's text comes from [`Index::find`] or
/// [`Index::by_path`].
pub type ListedNote = IndexedNote<()>;

/// An indexed file as [`Index::files`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRow {
    pub path: String,
    pub rel_path: String,
    pub id: String,
    /// [`UNREADABLE_SIZE`](crate::scan::UNREADABLE_SIZE) when the file could not be read.
    pub size: i64,
    pub mtime_ns: i64,
    pub error: Option<String>,
}

impl FileRow {
    /// The row `note` is stored as.
    pub fn of(note: &IndexedNote) -> FileRow {
        FileRow {
            path: note.path.clone(),
            rel_path: note.rel_path.clone(),
            id: note.id.clone(),
            size: note.size,
            mtime_ns: note.mtime_ns,
            error: note.error.clone(),
        }
    }
}

/// Filters for [`Index::list`].
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub scopes: Vec<String>,
    pub note_type: Option<String>,
    pub tag: Option<String>,
}

/// A row of the backups table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BackupRow {
    pub backup_id: String,
    pub scope: String,
    pub note_id: String,
    pub reason: String,
    pub created_at: i64,
}

/// A connection to the index database.
#[derive(Debug)]
pub struct Index {
    /// Behind a lock so one index can serve reads from several threads; each call holds it for
    /// one statement or transaction.
    conn: Mutex<Connection>,
}

impl Index {
    /// Opens (creating if needed) the index at `path`. A file that is not a usable database is
    /// moved aside and rebuilt: the index holds nothing that cannot be derived again.
    pub fn open(path: &Path) -> Result<Index> {
        match Self::try_open(path) {
            Ok(ix) => Ok(ix),
            Err(Error::Index(e)) if path.exists() => {
                let aside = path.with_extension(format!("corrupt-{}", crate::fsx::random_hex(3)));
                std::fs::rename(path, &aside)
                    .map_err(Error::io("move aside corrupt index", path))?;
                for ext in ["sqlite-wal", "sqlite-shm"] {
                    let _ = std::fs::remove_file(path.with_extension(ext));
                }
                eprintln!(
                    "memoria: the index was unreadable ({e}); moved it to {} and rebuilding",
                    aside.display()
                );
                Self::try_open(path)
            }
            Err(e) => Err(e),
        }
    }

    fn try_open(path: &Path) -> Result<Index> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(Error::io("create folder", dir))?;
        }
        let conn = Connection::open(path)?;
        // Private to the user; the WAL and shared-memory files SQLite creates take this mode.
        for ext in ["sqlite", "sqlite-wal", "sqlite-shm"] {
            crate::fsx::private_file(&path.with_extension(ext))?;
        }
        conn.busy_timeout(Duration::from_secs(15))?;
        // Deleted rows are overwritten, not left in free pages.
        conn.pragma_update(None, "secure_delete", "ON")?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version != SCHEMA_VERSION {
            // Derived data: an older or newer layout is simply rebuilt.
            conn.execute_batch(
                "DROP TABLE IF EXISTS notes; DROP TABLE IF EXISTS tags; DROP TABLE IF EXISTS links;
                 DROP TABLE IF EXISTS relations; DROP TABLE IF EXISTS notes_fts; DROP TABLE IF EXISTS backups;",
            )?;
        }
        conn.execute_batch(SCHEMA)?;
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        Ok(Index {
            conn: Mutex::new(conn),
        })
    }

    /// Rebuilds the database without free pages and empties its WAL, so deleted rows leave no
    /// copy in either file (`forget --purge`).
    pub fn compact(&self) -> Result<()> {
        self.conn().execute_batch("VACUUM")?;
        self.conn()
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }

    /// Drops this machine's usage counts of a note.
    pub fn remove_usage(&self, scope: &str, id: &str) -> Result<()> {
        self.conn().execute(
            "DELETE FROM usage WHERE scope = ?1 AND id = ?2",
            params![scope, id],
        )?;
        Ok(())
    }

    /// `ok` or what SQLite's integrity check found.
    pub fn integrity(&self) -> Result<String> {
        Ok(self
            .conn()
            .query_row("PRAGMA quick_check", [], |r| r.get(0))?)
    }

    /// `(path, mtime_ns, size)` of every indexed file of a scope.
    pub fn file_states(&self, scope: &str) -> Result<Vec<(String, i64, i64)>> {
        let conn = self.conn();
        let mut st =
            conn.prepare_cached("SELECT path, mtime_ns, size FROM notes WHERE scope = ?1")?;
        let rows = st.query_map([scope], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every indexed file of a scope, without its text or metadata: by id, then path.
    pub fn files(&self, scope: &str) -> Result<Vec<FileRow>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT path, rel_path, id, size, mtime_ns, error FROM notes WHERE scope = ?1 ORDER BY id, path",
        )?;
        let rows = st.query_map([scope], |r| {
            Ok(FileRow {
                path: r.get(0)?,
                rel_path: r.get(1)?,
                id: r.get(2)?,
                size: r.get(3)?,
                mtime_ns: r.get(4)?,
                error: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Applies a batch of upserts and removals in one transaction.
    pub fn apply(&mut self, upserts: &[IndexedNote], removals: &[String]) -> Result<()> {
        let conn = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
        let tx = conn.transaction()?;
        for path in removals.iter().chain(upserts.iter().map(|n| &n.path)) {
            tx.execute("DELETE FROM notes WHERE path = ?1", [path])?;
            tx.execute("DELETE FROM tags WHERE path = ?1", [path])?;
            tx.execute("DELETE FROM links WHERE path = ?1", [path])?;
            tx.execute("DELETE FROM relations WHERE path = ?1", [path])?;
        }
        for n in upserts {
            tx.execute(
                "INSERT INTO notes(path, scope, rel_path, id, summary, type, tags, created_at, updated_at, hash, trust, source, importance, mtime_ns, size, error, body, status, aliases)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
                params![
                    n.path,
                    n.scope,
                    n.rel_path,
                    n.id,
                    n.summary,
                    n.note_type,
                    serde_json::to_string(&n.tags).unwrap_or_default(),
                    n.created_at,
                    n.updated_at,
                    n.hash,
                    n.trust,
                    n.source,
                    n.importance,
                    n.mtime_ns,
                    n.size,
                    n.error,
                    n.body,
                    n.status,
                    serde_json::to_string(&n.aliases).unwrap_or_default()
                ],
            )?;
            for t in &n.tags {
                tx.execute(
                    "INSERT INTO tags(path, tag) VALUES (?1, ?2)",
                    params![n.path, t],
                )?;
            }
            for l in &n.links {
                tx.execute(
                    "INSERT INTO links(path, target) VALUES (?1, ?2)",
                    params![n.path, l],
                )?;
            }
            for (kind, target) in &n.relations {
                tx.execute(
                    "INSERT INTO relations(path, kind, target) VALUES (?1, ?2, ?3)",
                    params![n.path, kind, target],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Notes of the given scopes with this id (several when two files claim one id).
    pub fn find(&self, scope: &str, id: &str) -> Result<Vec<IndexedNote>> {
        self.select(
            "WHERE scope = ?1 AND id = ?2 ORDER BY error IS NOT NULL, path",
            params![scope, id],
        )
    }

    /// Notes in `scope` whose id equals `id` ignoring case.
    pub fn find_ignoring_case(&self, scope: &str, id: &str) -> Result<Vec<IndexedNote>> {
        self.select(
            "WHERE scope = ?1 AND lower(id) = lower(?2) ORDER BY path",
            params![scope, id],
        )
    }

    pub fn by_path(&self, path: &str) -> Result<Option<IndexedNote>> {
        Ok(self
            .select("WHERE path = ?1", params![path])?
            .into_iter()
            .next())
    }

    pub fn count(&self, scope: &str) -> Result<usize> {
        let n: i64 = self.conn().query_row(
            "SELECT count(*) FROM notes WHERE scope = ?1",
            [scope],
            |r| r.get(0),
        )?;
        Ok(n as usize)
    }

    /// Notes matching the filter, by scope then id, without their bodies.
    pub fn list(&self, f: &ListFilter) -> Result<Vec<ListedNote>> {
        let scopes = serde_json::to_string(&f.scopes).unwrap_or_default();
        self.rows(
            "NULL",
            |_| Ok(()),
            "WHERE scope IN (SELECT value FROM json_each(?1))
               AND (?2 IS NULL OR type = ?2)
               AND (?3 IS NULL OR path IN (SELECT path FROM tags WHERE tag = ?3))
             ORDER BY scope, id, path",
            params![scopes, f.note_type, f.tag],
        )
    }

    /// Notes in `scopes` that link to `id`.
    pub fn backlinks(&self, scopes: &[String], id: &str) -> Result<Vec<(String, String)>> {
        let scopes = serde_json::to_string(scopes).unwrap_or_default();
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT DISTINCT n.scope, n.id FROM links l JOIN notes n ON n.path = l.path
             WHERE n.scope IN (SELECT value FROM json_each(?1)) AND l.target = ?2 ORDER BY n.scope, n.id",
        )?;
        let rows = st.query_map(params![scopes, id], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every typed relation of the parsable notes of `scopes`: `(scope, id, kind, target)`, by
    /// scope, id, kind and target.
    pub fn relations(&self, scopes: &[String]) -> Result<Vec<(String, String, String, String)>> {
        let scopes = serde_json::to_string(scopes).unwrap_or_default();
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT n.scope, n.id, r.kind, r.target FROM relations r JOIN notes n ON n.path = r.path
             WHERE n.scope IN (SELECT value FROM json_each(?1)) AND n.error IS NULL
             ORDER BY n.scope, n.id, r.kind, r.target",
        )?;
        let rows = st.query_map([scopes], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every indexed file's [`NoteState`], without reading bodies: what the recall index is
    /// compared against before each search. For an id claimed twice, the parsable file comes
    /// first. Whether an agent may see the note is the rule of [`recallable`]
    /// (not broken, not quarantined, not tagged `contains-secrets`), evaluated in SQL so a
    /// search need not load every row.
    pub fn note_states(&self) -> Result<Vec<NoteState>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT scope, id, hash, path,
                    error IS NULL AND coalesce(trust, '') != 'quarantined'
                    AND NOT EXISTS (SELECT 1 FROM tags t WHERE t.path = notes.path AND t.tag = ?1),
                    coalesce(updated_at, created_at), trust, importance,
                    EXISTS (SELECT 1 FROM tags t WHERE t.path = notes.path
                            AND t.tag IN (SELECT value FROM json_each(?2))),
                    coalesce(status, '') = 'consolidated',
                    EXISTS (SELECT 1 FROM relations r JOIN notes o ON o.path = r.path
                            WHERE r.kind = 'supersedes' AND r.target = notes.id
                              AND o.scope = notes.scope AND o.error IS NULL AND o.id != notes.id),
                    aliases
             FROM notes ORDER BY scope, id, error IS NOT NULL, path",
        )?;
        let evergreen = serde_json::to_string(&EVERGREEN_TAGS).unwrap_or_default();
        let rows = st.query_map(params![crate::guard::SECRETS_TAG, evergreen], |r| {
            let aliases: Vec<String> =
                serde_json::from_str(&r.get::<_, String>(11)?).unwrap_or_default();
            Ok(NoteState {
                scope: r.get(0)?,
                id: r.get(1)?,
                hash: r
                    .get::<_, Option<String>>(2)?
                    .map(|h| recall_hash(&h, &aliases)),
                path: r.get(3)?,
                recallable: r.get(4)?,
                facts: RankFacts {
                    updated_at_ms: r.get(5)?,
                    trust: r.get::<_, Option<String>>(6)?.as_deref().and_then(trust_of),
                    importance: r.get(7)?,
                    evergreen: r.get(8)?,
                    standing: Standing {
                        consolidated: r.get(9)?,
                        superseded: r.get(10)?,
                    },
                },
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Counts one access of a note on this machine.
    pub fn record_access(&self, scope: &str, id: &str, now_ms: i64) -> Result<()> {
        self.conn().execute(
            "INSERT INTO usage(scope, id, access_count, last_access) VALUES (?1, ?2, 1, ?3)
             ON CONFLICT(scope, id) DO UPDATE SET access_count = access_count + 1, last_access = ?3",
            params![scope, id, now_ms],
        )?;
        Ok(())
    }

    /// `(access_count, last_access)` for a note on this machine.
    pub fn usage(&self, scope: &str, id: &str) -> Result<Option<(i64, i64)>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT access_count, last_access FROM usage WHERE scope = ?1 AND id = ?2",
                params![scope, id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    /// Every note of `scopes` with its body, by scope then id (the review reads them all).
    pub fn notes_with_bodies(&self, scopes: &[String]) -> Result<Vec<IndexedNote>> {
        let scopes = serde_json::to_string(scopes).unwrap_or_default();
        self.select(
            "WHERE scope IN (SELECT value FROM json_each(?1)) ORDER BY scope, id, path",
            params![scopes],
        )
    }

    /// `(scope, id, last_access)` of every note of `scopes` opened on this machine.
    pub fn last_accesses(&self, scopes: &[String]) -> Result<Vec<(String, String, i64)>> {
        let scopes = serde_json::to_string(scopes).unwrap_or_default();
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT scope, id, last_access FROM usage WHERE scope IN (SELECT value FROM json_each(?1))",
        )?;
        let rows = st.query_map([scopes], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn backup_ids(&self) -> Result<Vec<String>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached("SELECT backup_id FROM backups")?;
        let rows = st.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn put_backup(&self, b: &BackupRow) -> Result<()> {
        self.conn().execute(
            "INSERT OR REPLACE INTO backups(backup_id, scope, note_id, reason, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![b.backup_id, b.scope, b.note_id, b.reason, b.created_at],
        )?;
        Ok(())
    }

    pub fn remove_backups(&self, ids: &[String]) -> Result<()> {
        for id in ids {
            self.conn()
                .execute("DELETE FROM backups WHERE backup_id = ?1", [id])?;
        }
        Ok(())
    }

    /// Backups, newest first.
    pub fn backups(&self, limit: usize) -> Result<Vec<BackupRow>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT backup_id, scope, note_id, reason, created_at FROM backups
             ORDER BY created_at DESC, backup_id DESC LIMIT ?1",
        )?;
        let rows = st.query_map([limit as i64], |r| {
            Ok(BackupRow {
                backup_id: r.get(0)?,
                scope: r.get(1)?,
                note_id: r.get(2)?,
                reason: r.get(3)?,
                created_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// `(id, root, project_type, last_seen)` of every project an older layout recorded here;
    /// the project registry (`project.rs`) starts from it.
    #[allow(clippy::type_complexity)]
    pub fn projects(&self) -> Result<Vec<(String, String, Option<String>, i64)>> {
        let conn = self.conn();
        let mut st = conn.prepare_cached(
            "SELECT id, root, project_type, last_seen FROM projects ORDER BY root",
        )?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn select(&self, tail: &str, p: impl rusqlite::Params) -> Result<Vec<IndexedNote>> {
        self.rows("body", |r| r.get(16), tail, p)
    }

    /// Rows of `notes` matching `tail`; the 17th selected column is `body_column`, which
    /// `body` turns into what a row carries of the body.
    fn rows<B>(
        &self,
        body_column: &str,
        body: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<B>,
        tail: &str,
        p: impl rusqlite::Params,
    ) -> Result<Vec<IndexedNote<B>>> {
        let sql = format!(
            "SELECT path, scope, rel_path, id, summary, type, tags, created_at, updated_at, hash, trust, source, importance, mtime_ns, size, error, {body_column}, status, aliases
             FROM notes {tail}"
        );
        let conn = self.conn();
        let mut st = conn.prepare_cached(&sql)?;
        let rows = st.query_map(p, |r| {
            let tags: String = r.get(6)?;
            Ok(IndexedNote {
                path: r.get(0)?,
                scope: r.get(1)?,
                rel_path: r.get(2)?,
                id: r.get(3)?,
                summary: r.get(4)?,
                note_type: r.get(5)?,
                tags: serde_json::from_str(&tags).unwrap_or_default(),
                created_at: r.get(7)?,
                updated_at: r.get(8)?,
                hash: r.get(9)?,
                trust: r.get(10)?,
                source: r.get(11)?,
                importance: r.get(12)?,
                mtime_ns: r.get(13)?,
                size: r.get(14)?,
                error: r.get(15)?,
                body: body(r)?,
                status: r.get(17)?,
                aliases: serde_json::from_str(&r.get::<_, String>(18)?).unwrap_or_default(),
                links: Vec::new(),
                relations: Vec::new(),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(id: &str) -> IndexedNote {
        IndexedNote {
            path: format!("/vault/{id}.md"),
            scope: "user".into(),
            rel_path: format!("{id}.md"),
            id: id.into(),
            summary: format!("about {id}"),
            note_type: Some("fact".into()),
            tags: vec!["kept".into()],
            created_at: Some(1),
            updated_at: Some(2),
            hash: None,
            trust: None,
            source: None,
            importance: Some(0.5),
            mtime_ns: 3,
            size: 4,
            error: None,
            body: format!("the text of {id}\n"),
            status: None,
            aliases: vec!["an alias".into()],
            links: Vec::new(),
            relations: Vec::new(),
        }
    }

    #[test]
    fn a_listing_reads_every_column_but_the_body() {
        let tmp = tempfile::tempdir().unwrap();
        let mut ix = Index::open(&tmp.path().join("index.sqlite")).unwrap();
        ix.apply(&[note("a"), note("b")], &[]).unwrap();
        // A body that cannot be read back as text: a listing that read bodies would fail.
        ix.conn()
            .execute("UPDATE notes SET body = X'FF00FE' WHERE id = 'b'", [])
            .unwrap();
        let listed = ix
            .list(&ListFilter {
                scopes: vec!["user".into()],
                ..Default::default()
            })
            .unwrap();
        let ids: Vec<&str> = listed.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        let full = ix.by_path("/vault/a.md").unwrap().unwrap();
        let a = &listed[0];
        assert_eq!(
            (&a.path, &a.rel_path, &a.summary, &a.note_type, &a.tags),
            (
                &full.path,
                &full.rel_path,
                &full.summary,
                &full.note_type,
                &full.tags
            )
        );
        assert_eq!(full.aliases, ["an alias"]);
        assert_eq!(a.aliases, full.aliases);
        assert_eq!(
            (a.created_at, a.updated_at, a.importance, a.mtime_ns, a.size),
            (Some(1), Some(2), Some(0.5), 3, 4)
        );
        // The note's text is still there for whoever asks for the note itself.
        assert_eq!(ix.find("user", "a").unwrap()[0].body, "the text of a\n");
    }
}
