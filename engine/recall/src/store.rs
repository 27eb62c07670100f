//! SQLite files of the recall index: the indexed documents (`docs.sqlite`, a copy of what the
//! vault gave us, so the lexical index can be rebuilt without the vault) and the vector cache
//! (`vectors.sqlite`, keyed by (content hash, model id), shareable between homes so evaluations
//! and CI reuse vectors).
//!
//! Both run in WAL mode with a busy timeout, so several processes can share one home.

use std::path::Path;
use std::time::Duration;

use memoria_shared::{ContentHash, Trust};
use rusqlite::{Connection, OptionalExtension, params};

use super::embed::DIM;
use super::{Error, RecallDoc};

/// The per-document facts that ranking needs, kept in memory (bodies stay on disk).
#[derive(Debug, Clone)]
pub struct DocMeta {
    pub key: String,
    pub scope: String,
    pub id: String,
    pub hash: String,
    pub note_type: Option<String>,
    pub updated_at_ms: Option<i64>,
    pub trust: Option<Trust>,
    pub importance: Option<f64>,
    pub evergreen: bool,
    pub standing: Standing,
    pub secret: bool,
    /// Recalls and openings on this machine.
    pub access_count: i64,
    /// The last of them (milliseconds since the epoch).
    pub last_access_ms: Option<i64>,
}

impl DocMeta {
    /// The facts outside the content hash that ranking and visibility read.
    pub fn facts(&self) -> RankFacts {
        RankFacts {
            updated_at_ms: self.updated_at_ms,
            trust: self.trust,
            importance: self.importance,
            evergreen: self.evergreen,
            standing: self.standing,
        }
    }
}

pub use crate::index::{RankFacts, Standing};

/// The columns [`meta_row`] reads, in its order.
const META_COLUMNS: &str = "key, scope, id, hash, note_type, updated_at, trust, importance, \
     evergreen, access_count, tags, last_access, consolidated, superseded";

fn meta_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DocMeta> {
    let tags: String = r.get(10)?;
    let tags: Vec<String> = serde_json::from_str(&tags).unwrap_or_default();
    Ok(DocMeta {
        key: r.get(0)?,
        scope: r.get(1)?,
        id: r.get(2)?,
        hash: r.get(3)?,
        note_type: r.get(4)?,
        updated_at_ms: r.get(5)?,
        trust: r.get::<_, Option<String>>(6)?.and_then(|s| trust_from(&s)),
        importance: r.get(7)?,
        evergreen: r.get(8)?,
        standing: Standing {
            consolidated: r.get(12)?,
            superseded: r.get(13)?,
        },
        access_count: r.get(9)?,
        last_access_ms: r.get(11)?,
        secret: tags.iter().any(|t| t == super::SECRETS_TAG),
    })
}

fn open(path: &Path) -> Result<Connection, Error> {
    let conn = Connection::open(path)?;
    // Private to the user; the WAL and shared-memory files SQLite creates take this mode.
    for suffix in ["", "-wal", "-shm"] {
        crate::fsx::private_file(Path::new(&format!("{}{suffix}", path.display())))
            .map_err(|e| Error::Io(std::io::Error::other(e.to_string())))?;
    }
    conn.busy_timeout(Duration::from_secs(10))?;
    // Deleted rows are overwritten, not left in free pages.
    conn.pragma_update(None, "secure_delete", "ON")?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

/// Opens an SQLite file with `schema`; a file that is not a database, fails its schema or
/// fails SQLite's integrity check is removed and recreated (it holds nothing that cannot be
/// derived again), so a corrupt cache never stops recall.
///
/// The integrity check reads the whole file, seconds for a long conversation log, so it runs
/// only when there is a reason to doubt the file ([`needs_check`]); a damaged page met
/// between checks fails its query with SQLite's own error, and that error makes the next
/// open check ([`Error`]'s conversion from SQLite's).
fn open_or_recreate(path: &Path, schema: &str) -> Result<(Connection, bool), Error> {
    let attempt = |p: &Path| -> Result<Connection, Error> {
        let c = open(p)?;
        c.execute_batch(schema)?;
        if needs_check(p) {
            check(&c, p)?;
        }
        Ok(c)
    };
    let opened = attempt(path);
    remember_opened(path);
    match opened {
        Ok(c) => Ok((c, false)),
        Err(_) => {
            for suffix in ["", "-wal", "-shm", CHECKED] {
                let p = format!("{}{suffix}", path.display());
                let _ = std::fs::remove_file(p);
            }
            Ok((attempt(path)?, true))
        }
    }
}

/// Beside each file, the record of its last clean integrity check: the file's identity then
/// (device and inode) and when, in seconds since the epoch.
const CHECKED: &str = ".checked";

/// How long a clean integrity check is trusted.
pub const CHECK_EVERY: Duration = Duration::from_secs(24 * 60 * 60);

#[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Checked {
    dev: u64,
    ino: u64,
    at: u64,
}

fn checked_path(path: &Path) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("{}{CHECKED}", path.display()))
}

/// The file's identity: another file put in its place (a restore, a copy) is checked again.
fn identity(path: &Path) -> Option<(u64, u64)> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        None
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Whether `path` is to be checked when opened: no clean check recorded, the file is not
/// the one checked, the check is older than [`CHECK_EVERY`] (or in the future), or a damaged
/// page was met since. A process killed mid-write is no reason: SQLite's write-ahead log
/// leaves the file as the last commit left it.
fn needs_check(path: &Path) -> bool {
    let Some((dev, ino)) = identity(path) else {
        return true;
    };
    let record: Option<Checked> = std::fs::read(checked_path(path))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let now = now_secs();
    !record.is_some_and(|r| {
        r.dev == dev && r.ino == ino && r.at <= now && now - r.at < CHECK_EVERY.as_secs()
    })
}

/// Runs SQLite's integrity check on `conn` (the file `path`) and records a clean one.
fn check(conn: &Connection, path: &Path) -> Result<(), Error> {
    let ok: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    if ok != "ok" {
        let _ = std::fs::remove_file(checked_path(path));
        return Err(Error::Corrupt(format!("{}: {ok}", path.display())));
    }
    if let Some((dev, ino)) = identity(path) {
        let record = Checked {
            dev,
            ino,
            at: now_secs(),
        };
        if let Ok(bytes) = serde_json::to_vec(&record) {
            // Without the record the next open checks again: only time is lost.
            let _ = crate::fsx::write_atomic(&checked_path(path), &bytes);
        }
    }
    Ok(())
}

/// The files this process opened, so a damaged page met in any of them has each checked on
/// its next open.
static OPENED: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

fn remember_opened(path: &Path) {
    let mut opened = OPENED.lock().unwrap_or_else(|p| p.into_inner());
    if !opened.iter().any(|p| p == path) {
        opened.push(path.to_path_buf());
    }
}

/// SQLite said a file is damaged: every file this process opened is checked on its next open
/// (the error does not say which one), and the damaged one recreated then.
pub(crate) fn distrust_opened() {
    let opened = OPENED.lock().unwrap_or_else(|p| p.into_inner());
    for p in opened.iter() {
        let _ = std::fs::remove_file(checked_path(p));
    }
}

/// Whether SQLite found a file damaged, or not a database at all.
pub(crate) fn is_damage(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
    )
}

/// Runs SQLite's integrity check on the recall index's files in `dir` now, whatever their
/// records say, and records the clean ones (`doctor`). Returns each file and `ok` or what the
/// check found; a file that is missing is not listed.
pub fn check_files(dir: &Path) -> Result<Vec<(String, String)>, Error> {
    let mut out = Vec::new();
    for name in ["docs.sqlite", "vectors.sqlite"] {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        let found = match open(&path).and_then(|c| check(&c, &path)) {
            Ok(()) => "ok".to_owned(),
            Err(Error::Corrupt(found)) => found,
            Err(e) => e.to_string(),
        };
        out.push((name.to_owned(), found));
    }
    Ok(out)
}

const DOCS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS docs (
  key TEXT PRIMARY KEY,
  scope TEXT NOT NULL,
  id TEXT NOT NULL,
  hash TEXT NOT NULL,
  summary TEXT NOT NULL,
  tags TEXT NOT NULL,
  body TEXT NOT NULL,
  note_type TEXT,
  updated_at INTEGER,
  trust TEXT,
  importance REAL,
  evergreen INTEGER NOT NULL,
  access_count INTEGER NOT NULL DEFAULT 0
);
-- The newest messages are found without reading every document.
CREATE INDEX IF NOT EXISTS docs_type_time ON docs (note_type, updated_at);
-- Documents typed as messages that are not the log's (a note may name its type so) are found
-- without reading the messages.
CREATE INDEX IF NOT EXISTS docs_type_id ON docs (note_type, id);";

/// A rowid table: a row of one vector (1.5 KB) fits in its page. Kept `WITHOUT ROWID`, as
/// earlier versions did, every such row spilled into an overflow page of its own, three times
/// the vector's size on disk ([`rows_in_pages`] moves such a table over).
const VECTORS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS vectors (
  hash TEXT NOT NULL,
  model TEXT NOT NULL,
  vecs BLOB NOT NULL
);";

/// Moves a vector cache of the earlier layout (`WITHOUT ROWID`) into the rowid table, once,
/// and keys the table by (content hash, model).
fn rows_in_pages(conn: &Connection) -> Result<(), Error> {
    let earlier = |c: &Connection| -> Result<bool, Error> {
        let sql: String = c.query_row(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'vectors'",
            [],
            |r| r.get(0),
        )?;
        Ok(sql.contains("WITHOUT ROWID"))
    };
    if earlier(conn)? {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let moved = (|| -> Result<(), Error> {
            // Another process may have moved it meanwhile.
            if earlier(conn)? {
                conn.execute_batch(
                    "ALTER TABLE vectors RENAME TO vectors_earlier;
                     CREATE TABLE vectors (hash TEXT NOT NULL, model TEXT NOT NULL,
                                           vecs BLOB NOT NULL);
                     INSERT INTO vectors (hash, model, vecs)
                       SELECT hash, model, vecs FROM vectors_earlier;
                     DROP TABLE vectors_earlier;",
                )?;
            }
            Ok(())
        })();
        match moved {
            Ok(()) => conn.execute_batch("COMMIT")?,
            Err(e) => {
                let _ = conn.execute_batch("ROLLBACK");
                return Err(e);
            }
        }
        compact(conn)?;
    }
    conn.execute_batch("CREATE UNIQUE INDEX IF NOT EXISTS vectors_key ON vectors (hash, model)")?;
    Ok(())
}

/// The ids of the log's messages, as a range: every id starting with the message prefix.
fn message_id_range() -> (String, String) {
    let prefix = memoria_store::log::MESSAGE_PREFIX;
    let mut end = prefix.to_owned();
    let last = end.pop().expect("the prefix is not empty");
    end.push(char::from_u32(last as u32 + 1).expect("the prefix ends in ASCII"));
    (prefix.to_owned(), end)
}

/// The key of a document: scope and id, which together are unique.
pub fn doc_key(scope: &str, id: &str) -> String {
    format!("{scope}\u{1f}{id}")
}

fn trust_name(t: Trust) -> &'static str {
    match t {
        Trust::Owner => "owner",
        Trust::Derived => "derived",
        Trust::Peer => "peer",
        Trust::Ingested => "ingested",
        Trust::Quarantined => "quarantined",
    }
}

fn trust_from(s: &str) -> Option<Trust> {
    Some(match s {
        "owner" => Trust::Owner,
        "derived" => Trust::Derived,
        "peer" => Trust::Peer,
        "ingested" => Trust::Ingested,
        "quarantined" => Trust::Quarantined,
        _ => return None,
    })
}

/// Rebuilds the file without free pages and empties the WAL, so deleted rows leave no copy
/// in either file.
fn compact(conn: &Connection) -> Result<(), Error> {
    conn.execute_batch("VACUUM")?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    Ok(())
}

/// The documents table.
pub struct DocStore {
    conn: Connection,
}

impl DocStore {
    /// Opens (or recreates, when corrupt) `path`. The flag says it was recreated empty.
    pub fn open(path: &Path) -> Result<(Self, bool), Error> {
        let (conn, recreated) = open_or_recreate(path, DOCS_SCHEMA)?;
        // A store made before recalls were dated, or before standings were kept, gains the
        // column; its rows start undated and standing as nothing replaced them (the vault's
        // next comparison of ranking facts corrects them). Another process may add a column at
        // the same moment: then the column is there either way.
        let has = |c: &Connection, name: &str| -> Result<bool, Error> {
            Ok(c.query_row(
                "SELECT count(*) > 0 FROM pragma_table_info('docs') WHERE name = ?1",
                [name],
                |r| r.get(0),
            )?)
        };
        for (name, decl) in [
            ("last_access", "INTEGER"),
            ("consolidated", "INTEGER NOT NULL DEFAULT 0"),
            ("superseded", "INTEGER NOT NULL DEFAULT 0"),
        ] {
            if !has(&conn, name)?
                && let Err(e) =
                    conn.execute_batch(&format!("ALTER TABLE docs ADD COLUMN {name} {decl}"))
                && !has(&conn, name)?
            {
                return Err(e.into());
            }
        }
        Ok((Self { conn }, recreated))
    }

    /// Changes whenever another connection commits: the cue to reload in-memory state.
    pub fn data_version(&self) -> Result<i64, Error> {
        Ok(self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    /// Adds or updates documents. A document this machine sees for the first time counts as
    /// used at `now_ms`: a note imported with an old date starts its decay here, not at its
    /// date.
    pub fn upsert(&mut self, docs: &[RecallDoc], now_ms: i64) -> Result<(), Error> {
        let tx = self.conn.transaction()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT INTO docs (key, scope, id, hash, summary, tags, body, note_type,
                   updated_at, trust, importance, evergreen, last_access, consolidated, superseded)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
                 ON CONFLICT(key) DO UPDATE SET hash = excluded.hash,
                   summary = excluded.summary, tags = excluded.tags, body = excluded.body,
                   note_type = excluded.note_type, updated_at = excluded.updated_at,
                   trust = excluded.trust, importance = excluded.importance,
                   evergreen = excluded.evergreen, consolidated = excluded.consolidated,
                   superseded = excluded.superseded",
            )?;
            for d in docs {
                st.execute(params![
                    doc_key(&d.scope, &d.id),
                    d.scope,
                    d.id,
                    d.hash.as_str(),
                    d.summary,
                    serde_json::to_string(&d.tags).unwrap_or_else(|_| "[]".into()),
                    d.body,
                    d.note_type,
                    d.updated_at_ms,
                    d.trust.map(trust_name),
                    d.importance,
                    d.evergreen,
                    now_ms,
                    d.standing.consolidated,
                    d.standing.superseded,
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Deletes the rows of `keys` in one transaction; returns how many there were.
    pub fn remove_many(&mut self, keys: &[String]) -> Result<usize, Error> {
        let tx = self.conn.transaction()?;
        let mut n = 0;
        {
            let mut st = tx.prepare_cached("DELETE FROM docs WHERE key = ?1")?;
            for k in keys {
                n += st.execute([k])?;
            }
        }
        tx.commit()?;
        Ok(n)
    }

    /// See [`compact`].
    pub fn compact(&self) -> Result<(), Error> {
        compact(&self.conn)
    }

    /// Counts one recall of each document at `now_ms`.
    pub fn record_access(&mut self, keys: &[String], now_ms: i64) -> Result<(), Error> {
        let tx = self.conn.transaction()?;
        for k in keys {
            tx.execute(
                "UPDATE docs SET access_count = access_count + 1, last_access = ?2 WHERE key = ?1",
                params![k, now_ms],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Counts one use of each document at `now_ms` in the store at `path`, when there is one,
    /// without opening it for recall (no schema check): for a process that has not opened
    /// the recall index. A store that does not exist yet, or lacks a document, counts nothing.
    pub fn record_access_at(path: &Path, keys: &[String], now_ms: i64) -> Result<(), Error> {
        if !path.exists() {
            return Ok(());
        }
        let mut store = Self { conn: open(path)? };
        store.record_access(keys, now_ms)
    }

    /// `(scope, id, last recall)` of every document recalled at least once.
    pub fn last_recalls(&self) -> Result<Vec<(String, String, i64)>, Error> {
        let mut st = self
            .conn
            .prepare("SELECT scope, id, last_access FROM docs WHERE last_access IS NOT NULL")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every document's ranking facts.
    pub fn all_meta(&self) -> Result<Vec<DocMeta>, Error> {
        let mut st = self
            .conn
            .prepare(&format!("SELECT {META_COLUMNS} FROM docs"))?;
        let rows = st.query_map([], meta_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The ranking facts of every document but messages, and of the `messages` newest
    /// messages (by the time they were said): what a process keeps in memory.
    pub fn resident_meta(&self, messages: usize) -> Result<Vec<DocMeta>, Error> {
        let mut out = {
            let mut st = self.conn.prepare(&format!(
                "SELECT {META_COLUMNS} FROM docs \
                 WHERE note_type IS NULL OR note_type < ?1 OR note_type > ?1"
            ))?;
            st.query_map([super::MESSAGE_TYPE], meta_row)?
                .collect::<Result<Vec<_>, _>>()?
        };
        let mut st = self.conn.prepare(&format!(
            "SELECT {META_COLUMNS} FROM docs WHERE note_type = ?1 \
             ORDER BY updated_at DESC LIMIT ?2"
        ))?;
        let limit = i64::try_from(messages).unwrap_or(i64::MAX);
        for row in st.query_map(params![super::MESSAGE_TYPE, limit], meta_row)? {
            out.push(row?);
        }
        Ok(out)
    }

    /// The ranking facts of these documents, those that exist.
    pub fn metas_of(&self, keys: &[&str]) -> Result<Vec<DocMeta>, Error> {
        let mut st = self
            .conn
            .prepare_cached(&format!("SELECT {META_COLUMNS} FROM docs WHERE key = ?1"))?;
        let mut out = Vec::new();
        for k in keys {
            if let Some(m) = st.query_row([k], meta_row).optional()? {
                out.push(m);
            }
        }
        Ok(out)
    }

    /// How many documents there are.
    pub fn count(&self) -> Result<usize, Error> {
        let n: i64 = self
            .conn
            .query_row("SELECT count(*) FROM docs", [], |r| r.get(0))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// `(scope, id, content hash, ranking facts)` of every document.
    pub fn all_states(&self) -> Result<Vec<(String, String, String, RankFacts)>, Error> {
        let mut st = self
            .conn
            .prepare(&format!("SELECT {META_COLUMNS} FROM docs"))?;
        let rows = st.query_map([], |r| {
            let m = meta_row(r)?;
            let facts = m.facts();
            Ok((m.scope, m.id, m.hash, facts))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The ranking facts of every document typed as a message (the type the log's messages
    /// are indexed under) whose id is not a log message's (`msg:…`): notes that name their
    /// type so. Reads only those, however many messages there are.
    pub fn odd_messages(&self) -> Result<Vec<DocMeta>, Error> {
        let (from, to) = message_id_range();
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {META_COLUMNS} FROM docs WHERE note_type = ?1 AND (id < ?2 OR id >= ?3)"
        ))?;
        let rows = st.query_map(params![super::MESSAGE_TYPE, from, to], meta_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// `(scope, id)` of every log message (`msg:…` ids) stored under the message type, by id.
    pub fn message_ids(&self) -> Result<Vec<(String, String)>, Error> {
        let (from, to) = message_id_range();
        let mut st = self.conn.prepare_cached(
            "SELECT scope, id FROM docs WHERE note_type = ?1 AND id >= ?2 AND id < ?3 ORDER BY id",
        )?;
        let rows = st.query_map(params![super::MESSAGE_TYPE, from, to], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// `(key, scope, id)` of every document.
    pub fn all_keys(&self) -> Result<Vec<(String, String, String)>, Error> {
        let mut st = self.conn.prepare("SELECT key, scope, id FROM docs")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The full document for a key.
    pub fn get(&self, key: &str) -> Result<Option<RecallDoc>, Error> {
        type Row = (
            String,
            String,
            String,
            String,
            String,
            String,
            Option<String>,
            Option<i64>,
            Option<String>,
            Option<f64>,
            bool,
            Standing,
        );
        let row: Option<Row> = self
            .conn
            .prepare_cached(
                "SELECT scope, id, hash, summary, tags, body, note_type, updated_at, trust,
                        importance, evergreen, consolidated, superseded FROM docs WHERE key = ?1",
            )?
            .query_row([key], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                    r.get(10)?,
                    Standing {
                        consolidated: r.get(11)?,
                        superseded: r.get(12)?,
                    },
                ))
            })
            .optional()?;
        let Some((
            scope,
            id,
            hash,
            summary,
            tags,
            body,
            note_type,
            updated,
            trust,
            imp,
            ever,
            standing,
        )) = row
        else {
            return Ok(None);
        };
        let hash = ContentHash::parse(&hash)
            .ok_or_else(|| Error::Corrupt(format!("stored hash {hash:?} of {key:?}")))?;
        Ok(Some(RecallDoc {
            scope,
            id,
            summary,
            tags: serde_json::from_str(&tags).unwrap_or_default(),
            body,
            note_type,
            updated_at_ms: updated,
            trust: trust.and_then(|t| trust_from(&t)),
            importance: imp,
            evergreen: ever,
            standing,
            hash,
        }))
    }

    /// Every document, for rebuilding the lexical index.
    pub fn all_docs(&self) -> Result<Vec<RecallDoc>, Error> {
        let keys: Vec<String> = {
            let mut st = self.conn.prepare("SELECT key FROM docs")?;
            st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?
        };
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            if let Some(d) = self.get(&k)? {
                out.push(d);
            }
        }
        Ok(out)
    }
}

/// The vector cache: all chunk vectors of one (content hash, model id) in one row.
pub struct VectorStore {
    conn: Connection,
}

impl VectorStore {
    pub fn open(path: &Path) -> Result<Self, Error> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let conn = open_or_recreate(path, VECTORS_SCHEMA)?.0;
        rows_in_pages(&conn)?;
        Ok(Self { conn })
    }

    pub fn get(&self, hash: &str, model: &str) -> Result<Option<Vec<Vec<f32>>>, Error> {
        let blob: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT vecs FROM vectors WHERE hash = ?1 AND model = ?2")?
            .query_row([hash, model], |r| r.get(0))
            .optional()?;
        Ok(blob.and_then(|b| decode(&b)))
    }

    /// The first passage's vector of each of these content hashes, for every model that has
    /// one: `(hash, model id, vector)`.
    pub fn first_vectors(
        &self,
        hashes: &[String],
    ) -> Result<Vec<(String, String, Vec<f32>)>, Error> {
        let mut st = self
            .conn
            .prepare_cached("SELECT model, substr(vecs, 1, ?2) FROM vectors WHERE hash = ?1")?;
        let mut out = Vec::new();
        for h in hashes {
            let rows = st.query_map(params![h, (DIM * 4) as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
            })?;
            for row in rows {
                let (model, blob) = row?;
                if let Some(v) = decode(&blob).and_then(|v| v.into_iter().next()) {
                    out.push((h.clone(), model, v));
                }
            }
        }
        Ok(out)
    }

    /// Removes the vectors of these content hashes (every model), leaving no copy behind.
    pub fn purge(&self, hashes: &[String]) -> Result<(), Error> {
        for h in hashes {
            self.conn
                .execute("DELETE FROM vectors WHERE hash = ?1", [h])?;
        }
        compact(&self.conn)
    }

    pub fn put_many(
        &mut self,
        model: &str,
        items: &[(String, Vec<Vec<f32>>)],
    ) -> Result<(), Error> {
        let tx = self.conn.transaction()?;
        {
            let mut st = tx.prepare_cached(
                "INSERT OR REPLACE INTO vectors (hash, model, vecs) VALUES (?1, ?2, ?3)",
            )?;
            for (hash, vecs) in items {
                st.execute(params![hash, model, encode(vecs)])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

fn encode(vecs: &[Vec<f32>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(vecs.len() * DIM * 4);
    for v in vecs {
        for x in v {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    out
}

/// Decodes a blob of little-endian f32 rows; a blob of the wrong size reads as missing.
fn decode(b: &[u8]) -> Option<Vec<Vec<f32>>> {
    if b.is_empty() || !b.len().is_multiple_of(DIM * 4) {
        return None;
    }
    Some(
        b.chunks_exact(DIM * 4)
            .map(|row| {
                row.chunks_exact(4)
                    .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                    .collect()
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(i: usize) -> Vec<f32> {
        (0..DIM)
            .map(|j| ((i * 31 + j) % 97) as f32 / 97.0)
            .collect()
    }

    #[test]
    fn a_cache_of_the_earlier_layout_is_moved_and_a_vector_costs_little_more_than_itself() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("vectors.sqlite");
        {
            let c = Connection::open(&p).unwrap();
            c.execute_batch(
                "CREATE TABLE vectors (hash TEXT NOT NULL, model TEXT NOT NULL,
                   vecs BLOB NOT NULL, PRIMARY KEY (hash, model)) WITHOUT ROWID;",
            )
            .unwrap();
            c.execute(
                "INSERT INTO vectors (hash, model, vecs) VALUES ('h0', 'm', ?1)",
                [encode(&[vector(0)])],
            )
            .unwrap();
        }
        let mut store = VectorStore::open(&p).unwrap();
        assert_eq!(store.get("h0", "m").unwrap(), Some(vec![vector(0)]));
        let sql: String = store
            .conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'vectors'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(!sql.contains("WITHOUT ROWID"), "{sql}");
        // Keyed by (hash, model): a vector put again replaces the one there.
        store
            .put_many("m", &[("h0".into(), vec![vector(1)])])
            .unwrap();
        assert_eq!(store.get("h0", "m").unwrap(), Some(vec![vector(1)]));
        // Opened again, nothing is moved twice.
        drop(store);
        let mut store = VectorStore::open(&p).unwrap();
        let items: Vec<(String, Vec<Vec<f32>>)> = (1..=2_000)
            .map(|i| (format!("{:064x}", i), vec![vector(i)]))
            .collect();
        store
            .put_many("onnx-0123456789abcdef-c200o40l1", &items)
            .unwrap();
        store
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        let per_vector = std::fs::metadata(&p).unwrap().len() as f64 / 2_000.0;
        // The vector is 1,536 bytes, two rows share a page of 4 KiB, and the key is indexed;
        // the earlier layout took about 4,700.
        assert!(per_vector < 2_400.0, "{per_vector} bytes a vector");
        assert_eq!(store.get("h0", "m").unwrap(), Some(vec![vector(1)]));
    }

    #[test]
    fn a_store_without_dated_recalls_gains_them_and_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("docs.sqlite");
        {
            let c = Connection::open(&p).unwrap();
            // The layout before recalls were dated.
            c.execute_batch(DOCS_SCHEMA).unwrap();
            c.execute(
                "INSERT INTO docs (key, scope, id, hash, summary, tags, body, evergreen)
                 VALUES (?1, 'user', 'a', 'h', 's', '[]', 'b', 0)",
                [doc_key("user", "a")],
            )
            .unwrap();
        }
        let (mut store, recreated) = DocStore::open(&p).unwrap();
        assert!(!recreated);
        assert!(store.last_recalls().unwrap().is_empty());
        store.record_access(&[doc_key("user", "a")], 42).unwrap();
        assert_eq!(
            store.last_recalls().unwrap(),
            [("user".to_owned(), "a".to_owned(), 42)]
        );
        assert_eq!(store.all_meta().unwrap()[0].access_count, 1);
    }

    #[test]
    fn corrupt_files_are_recreated() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("docs.sqlite");
        std::fs::write(&p, b"this is not a database, just garbage bytes ........").unwrap();
        let (store, recreated) = DocStore::open(&p).unwrap();
        assert!(recreated);
        assert!(store.all_meta().unwrap().is_empty());
        let v = dir.path().join("vectors.sqlite");
        std::fs::write(&v, vec![7u8; 5000]).unwrap();
        let mut vs = VectorStore::open(&v).unwrap();
        vs.put_many("m", &[("h".into(), vec![vec![0.5; DIM]])])
            .unwrap();
        assert_eq!(vs.get("h", "m").unwrap().unwrap()[0][3], 0.5);
        assert!(vs.get("h", "other").unwrap().is_none());
    }
}
