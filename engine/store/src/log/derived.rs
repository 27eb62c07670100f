//! What the log derives from its messages: facts (a subject's value, valid from when it was
//! said until a newer value replaces it), one summary per conversation, and the entities a
//! conversation names. Each item names the messages it came from; it lives and dies with
//! them (a purged conversation takes its items along; the items of a conversation are
//! derived again whenever its messages change). The rules that derive them are
//! `memoria-capture`'s; this module keeps them.

use rusqlite::{OptionalExtension, params};

use super::{Log, db_err};
use crate::error::{Error, Result};

/// The prefix of a fact's key.
pub const FACT_PREFIX: &str = "fact:";
/// The prefix of a summary's key.
pub const SUMMARY_PREFIX: &str = "sum:";

/// Whether `id` names a fact or a summary derived from the log.
pub fn is_derived_key(id: &str) -> bool {
    id.starts_with(FACT_PREFIX) || id.starts_with(SUMMARY_PREFIX)
}

/// What a derived item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DerivedKind {
    Fact,
    Summary,
}

impl DerivedKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DerivedKind::Fact => "fact",
            DerivedKind::Summary => "summary",
        }
    }

    pub(super) fn parse(s: &str) -> DerivedKind {
        if s == "summary" {
            DerivedKind::Summary
        } else {
            DerivedKind::Fact
        }
    }
}

/// A fact or a summary derived from a conversation's messages.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DerivedItem {
    pub key: String,
    pub kind: DerivedKind,
    pub scope: String,
    pub conversation: String,
    /// A fact's subject (who or what it is about).
    pub subject: Option<String>,
    /// A fact's attribute (`lives in`, `favorite book`, …).
    pub attribute: Option<String>,
    /// A fact's value.
    pub value: Option<String>,
    /// What recall reads and a person sees.
    pub text: String,
    /// When it was said (a fact: valid from; a summary: its conversation's last time).
    pub at: Option<i64>,
    /// When a newer value replaced a fact (`None`: still current).
    pub valid_to: Option<i64>,
    /// The messages it came from, in conversation order.
    pub sources: Vec<String>,
    /// Its trust as the derive path labelled it (`None`: the person's own words).
    pub trust: Option<String>,
    /// A source held a secret: kept, never recalled.
    pub secret: bool,
    /// A source was an agent's, not a person's.
    pub inferred: bool,
}

impl DerivedItem {
    /// Whether it is kept but never recalled, promoted nor shown to an agent: a source held a
    /// secret, or it is quarantined (a quarantine hides a source). The same rule as the SQL
    /// filters of this module.
    pub fn held_back(&self) -> bool {
        self.secret || self.trust.as_deref() == Some("quarantined")
    }
}

/// A name a conversation mentions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entity {
    pub name: String,
    /// `person`, `place`, `date`, `identifier` or `name` (a name of unknown kind).
    pub kind: String,
    /// How many times it was mentioned.
    pub count: usize,
    /// The first messages that mention it (a few).
    pub sources: Vec<String>,
}

/// Why an automatic promotion left a fact proposed: the model asked, a stable code (the
/// capture crate's `LeftCode`), the reason in words, and when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeftByModel {
    pub model: String,
    pub code: String,
    pub reason: String,
    pub at: i64,
}

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS derived (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    scope TEXT NOT NULL,
    conversation TEXT NOT NULL,
    subject TEXT,
    attribute TEXT,
    value TEXT,
    text TEXT NOT NULL,
    at INTEGER,
    valid_to INTEGER,
    sources TEXT NOT NULL,
    trust TEXT,
    secret INTEGER NOT NULL DEFAULT 0,
    inferred INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS derived_by_conversation ON derived(scope, conversation);
CREATE INDEX IF NOT EXISTS derived_by_subject ON derived(scope, subject, attribute);
CREATE TABLE IF NOT EXISTS promoted (
    scope TEXT NOT NULL,
    subject TEXT NOT NULL,
    attribute TEXT NOT NULL,
    value TEXT NOT NULL,
    note TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (scope, subject, attribute, value)
);
CREATE TABLE IF NOT EXISTS promotion_left (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    code TEXT NOT NULL,
    reason TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS promotion_left_goes_with_its_fact AFTER DELETE ON derived
BEGIN
    DELETE FROM promotion_left WHERE key = old.key;
END;
CREATE TABLE IF NOT EXISTS entities (
    scope TEXT NOT NULL,
    conversation TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    count INTEGER NOT NULL,
    sources TEXT NOT NULL,
    PRIMARY KEY (scope, conversation, name)
);
";

/// The one rule for which derived items may be recalled, promoted or listed: none holding a
/// secret, none quarantined (derived from a message a quarantine hides, or labelled so).
const RECALLABLE: &str = "secret = 0 AND COALESCE(trust, '') != 'quarantined'";

const SELECT: &str = "SELECT key, kind, scope, conversation, subject, attribute, value, text, at, \
     valid_to, sources, trust, secret, inferred FROM derived";

fn row_item(r: &rusqlite::Row<'_>) -> rusqlite::Result<DerivedItem> {
    let kind: String = r.get(1)?;
    let sources: String = r.get(10)?;
    Ok(DerivedItem {
        key: r.get(0)?,
        kind: DerivedKind::parse(&kind),
        scope: r.get(2)?,
        conversation: r.get(3)?,
        subject: r.get(4)?,
        attribute: r.get(5)?,
        value: r.get(6)?,
        text: r.get(7)?,
        at: r.get(8)?,
        valid_to: r.get(9)?,
        sources: serde_json::from_str(&sources).unwrap_or_default(),
        trust: r.get(11)?,
        secret: r.get(12)?,
        inferred: r.get(13)?,
    })
}

fn json(list: &[String]) -> Result<String> {
    serde_json::to_string(list).map_err(|e| Error::Internal(format!("encoding sources: {e}")))
}

impl Log {
    /// Replaces what is derived from one conversation: its items become `items` and its
    /// entities `entities`. An item that did not change keeps its row, so recall reads only
    /// what did (see [`Log::derived_state`]).
    pub fn replace_derived(
        &mut self,
        scope: &str,
        conversation: &str,
        items: &[DerivedItem],
        entities: &[Entity],
    ) -> Result<()> {
        let tx = self.conn.transaction().map_err(db_err)?;
        {
            let old: Vec<DerivedItem> = {
                let mut st = tx
                    .prepare_cached(&format!("{SELECT} WHERE scope = ?1 AND conversation = ?2"))
                    .map_err(db_err)?;
                let rows = st
                    .query_map(params![scope, conversation], row_item)
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<_>>().map_err(db_err)?
            };
            let new: std::collections::HashMap<&str, &DerivedItem> =
                items.iter().map(|i| (i.key.as_str(), i)).collect();
            let old: std::collections::HashMap<&str, &DerivedItem> =
                old.iter().map(|o| (o.key.as_str(), o)).collect();
            let mut del = tx
                .prepare_cached("DELETE FROM derived WHERE key = ?1")
                .map_err(db_err)?;
            for (key, o) in &old {
                if new.get(key) != Some(o) {
                    del.execute(params![key]).map_err(db_err)?;
                }
            }
            let mut put = tx
                .prepare_cached(
                    "INSERT INTO derived (key, kind, scope, conversation, subject, attribute, \
                     value, text, at, valid_to, sources, trust, secret, inferred) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
                )
                .map_err(db_err)?;
            for i in items {
                if old.get(i.key.as_str()) == Some(&i) {
                    continue;
                }
                if i.scope != scope || i.conversation != conversation {
                    return Err(Error::Internal(format!(
                        "derived item {} is not of conversation {conversation}",
                        i.key
                    )));
                }
                // A key taken by another conversation's item (the same words said there) is
                // left to that one.
                let taken: Option<String> = tx
                    .query_row(
                        "SELECT conversation FROM derived WHERE key = ?1",
                        params![i.key],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(db_err)?;
                if taken.is_some() {
                    continue;
                }
                put.execute(params![
                    i.key,
                    i.kind.as_str(),
                    i.scope,
                    i.conversation,
                    i.subject,
                    i.attribute,
                    i.value,
                    i.text,
                    i.at,
                    i.valid_to,
                    json(&i.sources)?,
                    i.trust,
                    i.secret,
                    i.inferred
                ])
                .map_err(db_err)?;
            }
            tx.execute(
                "DELETE FROM entities WHERE scope = ?1 AND conversation = ?2",
                params![scope, conversation],
            )
            .map_err(db_err)?;
            let mut ent = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO entities (scope, conversation, name, kind, count, \
                     sources) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(db_err)?;
            for e in entities {
                ent.execute(params![
                    scope,
                    conversation,
                    e.name,
                    e.kind,
                    e.count as i64,
                    json(&e.sources)?
                ])
                .map_err(db_err)?;
            }
        }
        tx.commit().map_err(db_err)
    }

    /// Sets when a fact stopped being current (`None`: it is again). A change gives the fact a
    /// new row, so recall reads it again.
    pub fn set_valid_to(&mut self, key: &str, valid_to: Option<i64>) -> Result<()> {
        let Some(mut item) = self.derived_item(key)? else {
            return Ok(());
        };
        if item.valid_to == valid_to {
            return Ok(());
        }
        item.valid_to = valid_to;
        let tx = self.conn.transaction().map_err(db_err)?;
        tx.execute("DELETE FROM derived WHERE key = ?1", params![key])
            .map_err(db_err)?;
        tx.execute(
            "INSERT INTO derived (key, kind, scope, conversation, subject, attribute, value, \
             text, at, valid_to, sources, trust, secret, inferred) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                item.key,
                item.kind.as_str(),
                item.scope,
                item.conversation,
                item.subject,
                item.attribute,
                item.value,
                item.text,
                item.at,
                item.valid_to,
                json(&item.sources)?,
                item.trust,
                item.secret,
                item.inferred
            ],
        )
        .map_err(db_err)?;
        tx.commit().map_err(db_err)
    }

    /// The item with this key.
    pub fn derived_item(&self, key: &str) -> Result<Option<DerivedItem>> {
        self.conn
            .query_row(&format!("{SELECT} WHERE key = ?1"), params![key], row_item)
            .optional()
            .map_err(db_err)
    }

    /// The items derived from one conversation: its summary first, then its facts as said.
    pub fn derived_of(&self, scope: &str, conversation: &str) -> Result<Vec<DerivedItem>> {
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "{SELECT} WHERE scope = ?1 AND conversation = ?2 \
                 ORDER BY kind DESC, COALESCE(at, 0), key"
            ))
            .map_err(db_err)?;
        let rows = st
            .query_map(params![scope, conversation], row_item)
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    /// Every fact of a scope about `subject`'s `attribute`, the earliest said first.
    pub fn facts_about(
        &self,
        scope: &str,
        subject: &str,
        attribute: &str,
    ) -> Result<Vec<DerivedItem>> {
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "{SELECT} WHERE scope = ?1 AND subject = ?2 AND attribute = ?3 AND kind = 'fact' \
                 ORDER BY COALESCE(at, 0), key"
            ))
            .map_err(db_err)?;
        let rows = st
            .query_map(params![scope, subject, attribute], row_item)
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    /// The entities a conversation names, the most mentioned first.
    pub fn entities_of(&self, scope: &str, conversation: &str) -> Result<Vec<Entity>> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT name, kind, count, sources FROM entities \
                 WHERE scope = ?1 AND conversation = ?2 ORDER BY count DESC, name",
            )
            .map_err(db_err)?;
        let rows = st
            .query_map(params![scope, conversation], |r| {
                let sources: String = r.get(3)?;
                Ok(Entity {
                    name: r.get(0)?,
                    kind: r.get(1)?,
                    count: r.get::<_, i64>(2)? as usize,
                    sources: serde_json::from_str(&sources).unwrap_or_default(),
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    /// A fingerprint of the recallable items ([`DerivedItem::held_back`] not;
    /// [`TableState`](super::TableState)).
    pub fn derived_state(&self) -> Result<super::TableState> {
        self.table_state("derived", &format!("FROM derived WHERE {RECALLABLE}"))
    }

    /// The recallable items stored after row `rowid` (every one for 0).
    pub fn recallable_derived_after(&self, rowid: i64) -> Result<Vec<DerivedItem>> {
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "{SELECT} WHERE {RECALLABLE} AND rowid > ?1 ORDER BY rowid"
            ))
            .map_err(db_err)?;
        let rows = st.query_map(params![rowid], row_item).map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    /// Every current fact (not replaced, not held back), the earliest said first.
    pub fn current_facts(&self) -> Result<Vec<DerivedItem>> {
        self.facts(false)
    }

    /// Every fact not held back, the earliest said first: the current ones, and with
    /// `replaced` also those a newer value replaced.
    pub fn facts(&self, replaced: bool) -> Result<Vec<DerivedItem>> {
        let current = if replaced { "" } else { "AND valid_to IS NULL" };
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "{SELECT} WHERE kind = 'fact' {current} AND {RECALLABLE} \
                 ORDER BY COALESCE(at, 0), key"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([], row_item).map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    /// Records that a fact (its scope, subject, attribute and value, lowercased) became the
    /// note `note`.
    pub fn mark_promoted(
        &mut self,
        scope: &str,
        (subject, attribute, value): (&str, &str, &str),
        note: &str,
        at: i64,
    ) -> Result<()> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO promoted (scope, subject, attribute, value, note, at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![scope, subject, attribute, value, note, at],
            )
            .map_err(db_err)?;
        Ok(())
    }

    /// The note a fact was promoted to, if it was.
    pub fn promoted_to(
        &self,
        scope: &str,
        (subject, attribute, value): (&str, &str, &str),
    ) -> Result<Option<String>> {
        self.conn
            .query_row(
                "SELECT note FROM promoted WHERE scope = ?1 AND subject = ?2 AND attribute = ?3 \
                 AND value = ?4",
                params![scope, subject, attribute, value],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)
    }

    /// Records why an automatic promotion left the fact `key` proposed (the latest run's
    /// reason replaces an earlier one). It goes when the fact's row does, however it goes.
    pub fn mark_left(&mut self, key: &str, left: &LeftByModel) -> Result<()> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO promotion_left (key, model, code, reason, at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![key, left.model, left.code, left.reason, left.at],
            )
            .map_err(db_err)?;
        Ok(())
    }

    /// Why an automatic promotion last left the fact `key` proposed, if one did.
    pub fn left_by_model(&self, key: &str) -> Result<Option<LeftByModel>> {
        self.conn
            .query_row(
                "SELECT model, code, reason, at FROM promotion_left WHERE key = ?1",
                params![key],
                |r| {
                    Ok(LeftByModel {
                        model: r.get(0)?,
                        code: r.get(1)?,
                        reason: r.get(2)?,
                        at: r.get(3)?,
                    })
                },
            )
            .optional()
            .map_err(db_err)
    }

    /// Removes what was derived from a conversation; returns the removed items' keys.
    pub(super) fn drop_derived(
        tx: &rusqlite::Transaction<'_>,
        scope: &str,
        conversation: &str,
    ) -> Result<Vec<String>> {
        let keys: Vec<String> = {
            let mut st = tx
                .prepare("SELECT key FROM derived WHERE scope = ?1 AND conversation = ?2")
                .map_err(db_err)?;
            let rows = st
                .query_map(params![scope, conversation], |r| r.get(0))
                .map_err(db_err)?;
            rows.collect::<rusqlite::Result<_>>().map_err(db_err)?
        };
        tx.execute(
            "DELETE FROM derived WHERE scope = ?1 AND conversation = ?2",
            params![scope, conversation],
        )
        .map_err(db_err)?;
        tx.execute(
            "DELETE FROM entities WHERE scope = ?1 AND conversation = ?2",
            params![scope, conversation],
        )
        .map_err(db_err)?;
        Ok(keys)
    }
}
