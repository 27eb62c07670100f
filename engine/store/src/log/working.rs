//! Working memory: short-lived blocks of text a person or an agent keeps at hand for the work
//! of the day (what is being tried, the state of a task), recalled beside notes until they
//! expire ([`WORKING_TTL_HOURS`] by default) and then gone for good. Kept in the log's file,
//! on this machine only, per scope.

use rusqlite::{OptionalExtension, params};

use super::{Log, Role, db_err};
use crate::error::Result;

/// The prefix of a working block's key; no note id can start with it.
pub const WORKING_PREFIX: &str = "wm:";

/// How long a working block lasts unless told otherwise.
pub const WORKING_TTL_HOURS: u32 = 24;

/// Longest a working block may be asked to last.
pub const WORKING_MAX_TTL_HOURS: u32 = 24 * 30;

/// Whether `id` names a working block.
pub fn is_working_key(id: &str) -> bool {
    id.starts_with(WORKING_PREFIX)
}

/// A block of working memory.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkingBlock {
    pub key: String,
    pub scope: String,
    pub text: String,
    /// Who wrote it: the person (`user`) or an agent (`assistant`).
    pub role: Role,
    pub created_at: i64,
    pub expires_at: i64,
    /// How many times it was opened or recalled.
    pub uses: i64,
}

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS working (
    key TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    text TEXT NOT NULL,
    role TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    uses INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS working_by_expiry ON working(expires_at);
";

const SELECT: &str = "SELECT key, scope, text, role, created_at, expires_at, uses FROM working";

fn row_block(r: &rusqlite::Row<'_>) -> rusqlite::Result<WorkingBlock> {
    let role: String = r.get(3)?;
    Ok(WorkingBlock {
        key: r.get(0)?,
        scope: r.get(1)?,
        text: r.get(2)?,
        role: Role::parse(&role),
        created_at: r.get(4)?,
        expires_at: r.get(5)?,
        uses: r.get(6)?,
    })
}

impl Log {
    /// Keeps a block of working memory in `scope` until `expires_at`.
    pub fn add_working(
        &mut self,
        scope: &str,
        text: &str,
        role: Role,
        now_ms: i64,
        expires_at: i64,
    ) -> Result<WorkingBlock> {
        let digest =
            memoria_shared::hash::sha256_hex(format!("{scope}\u{0}{now_ms}\u{0}{text}").as_bytes());
        let block = WorkingBlock {
            key: format!("{WORKING_PREFIX}{}", &digest[..20]),
            scope: scope.to_owned(),
            text: text.to_owned(),
            role,
            created_at: now_ms,
            expires_at,
            uses: 0,
        };
        self.conn
            .execute(
                "INSERT OR REPLACE INTO working (key, scope, text, role, created_at, expires_at, uses) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)",
                params![
                    block.key,
                    block.scope,
                    block.text,
                    block.role.as_str(),
                    block.created_at,
                    block.expires_at
                ],
            )
            .map_err(db_err)?;
        Ok(block)
    }

    /// The blocks not expired at `now_ms`, the newest first.
    pub fn working(&self, now_ms: i64) -> Result<Vec<WorkingBlock>> {
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "{SELECT} WHERE expires_at > ?1 ORDER BY created_at DESC, key"
            ))
            .map_err(db_err)?;
        let rows = st.query_map(params![now_ms], row_block).map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    /// The block with this key, expired or not.
    pub fn working_block(&self, key: &str) -> Result<Option<WorkingBlock>> {
        self.conn
            .query_row(&format!("{SELECT} WHERE key = ?1"), params![key], row_block)
            .optional()
            .map_err(db_err)
    }

    /// Counts a use of a block (an opening, a recall).
    pub fn use_working(&mut self, key: &str) -> Result<()> {
        self.conn
            .execute(
                "UPDATE working SET uses = uses + 1 WHERE key = ?1",
                params![key],
            )
            .map_err(db_err)?;
        Ok(())
    }

    /// Removes a block; `false` when there was none.
    pub fn remove_working(&mut self, key: &str) -> Result<bool> {
        let n = self
            .conn
            .execute("DELETE FROM working WHERE key = ?1", params![key])
            .map_err(db_err)?;
        if n > 0 {
            self.checkpoint()?;
        }
        Ok(n > 0)
    }

    /// Removes the blocks expired at `now_ms`, leaving no copy of their text in the file;
    /// returns their scopes and keys.
    pub fn expire_working(&mut self, now_ms: i64) -> Result<Vec<(String, String)>> {
        let gone: Vec<(String, String)> = {
            let mut st = self
                .conn
                .prepare_cached("SELECT scope, key FROM working WHERE expires_at <= ?1")
                .map_err(db_err)?;
            let rows = st
                .query_map(params![now_ms], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(db_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(db_err)?
        };
        if !gone.is_empty() {
            self.conn
                .execute(
                    "DELETE FROM working WHERE expires_at <= ?1",
                    params![now_ms],
                )
                .map_err(db_err)?;
            self.checkpoint()?;
        }
        Ok(gone)
    }

    /// A fingerprint of the blocks ([`super::TableState`]).
    pub fn working_state(&self) -> Result<super::TableState> {
        self.table_state("working", "FROM working")
    }

    /// The blocks stored after row `rowid` (every one for 0).
    pub fn working_after(&self, rowid: i64) -> Result<Vec<WorkingBlock>> {
        let mut st = self
            .conn
            .prepare_cached(&format!("{SELECT} WHERE rowid > ?1 ORDER BY rowid"))
            .map_err(db_err)?;
        let rows = st.query_map(params![rowid], row_block).map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }
}
