//! Quarantines of a provider's memory: what a host's or model's messages said, hidden from
//! every door and brought back exactly as it was.
//!
//! A quarantine marks messages through the one label every door already honours (the
//! message's `quarantined` mark, here `quarantine:<id>`) and lowers what was derived from them
//! to trust `quarantined` (never recalled), so no reader needs a rule of its own. It records
//! each item's label before the change, so a release puts back exactly that label; an item
//! already marked (by the poison gate, or by an earlier quarantine) is left to what marked it.
//! Which messages a quarantine takes is decided above this module; the records and the marks
//! are kept here, in one transaction each.

use rusqlite::{OptionalExtension, params};

use super::{Log, Role, db_err};
use crate::error::{Error, Result};

/// How a quarantine's mark on a message begins; the rest is the quarantine's id.
pub const QUARANTINE_MARK: &str = "quarantine:";

/// The trust a derived item gets while a quarantine hides its sources.
const QUARANTINED: &str = "quarantined";

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS quarantines (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    released_at INTEGER,
    selection TEXT NOT NULL,
    counts TEXT NOT NULL,
    notes TEXT NOT NULL DEFAULT '[]',
    released TEXT
);
CREATE TABLE IF NOT EXISTS quarantined_items (
    quarantine TEXT NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    prior TEXT,
    PRIMARY KEY (quarantine, key)
);
";

/// A message's labels without its text: what a quarantine selects messages by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageMark {
    pub key: String,
    pub scope: String,
    pub conversation: String,
    pub role: Role,
    /// Its host, else its conversation's (a message captured without one).
    pub host: Option<String>,
    /// Its model, else its conversation's.
    pub model: Option<String>,
    /// When it was said, else when it was captured.
    pub at: i64,
    /// The gate's detector or a quarantine's mark already on it.
    pub quarantined: Option<String>,
}

/// A derived item's sources and trust, without its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedLink {
    pub key: String,
    pub kind: super::DerivedKind,
    pub scope: String,
    pub conversation: String,
    pub sources: Vec<String>,
    pub trust: Option<String>,
}

/// One quarantine as the log keeps it. `selection`, `counts`, `notes` and `released` are the
/// caller's own JSON, kept as given.
#[derive(Debug, Clone, PartialEq)]
pub struct QuarantineRecord {
    pub id: String,
    pub created_at: i64,
    pub released_at: Option<i64>,
    pub selection: serde_json::Value,
    pub counts: serde_json::Value,
    pub notes: serde_json::Value,
    pub released: Option<serde_json::Value>,
}

/// What a release put back in the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRelease {
    /// Messages whose mark was taken off.
    pub messages: usize,
    /// Facts and summaries given back their trust.
    pub derived: usize,
    /// The conversations of derived items no longer there (derived again since): they are the
    /// caller's to derive again now that their messages are unmarked.
    pub rederive: Vec<(String, String)>,
}

/// The mark a quarantine puts on a message.
pub fn quarantine_mark(id: &str) -> String {
    format!("{QUARANTINE_MARK}{id}")
}

fn to_json(v: &serde_json::Value) -> String {
    v.to_string()
}

fn from_json(s: Option<String>) -> serde_json::Value {
    s.and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(serde_json::Value::Null)
}

fn row_record(r: &rusqlite::Row<'_>) -> rusqlite::Result<QuarantineRecord> {
    Ok(QuarantineRecord {
        id: r.get(0)?,
        created_at: r.get(1)?,
        released_at: r.get(2)?,
        selection: from_json(r.get(3)?),
        counts: from_json(r.get(4)?),
        notes: from_json(r.get(5)?),
        released: r.get::<_, Option<String>>(6)?.map(|s| from_json(Some(s))),
    })
}

const SELECT_RECORD: &str =
    "SELECT id, created_at, released_at, selection, counts, notes, released FROM quarantines";

impl Log {
    /// Every message's labels, the host and model of a message without them taken from its
    /// conversation.
    pub fn message_marks(&self) -> Result<Vec<MessageMark>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT m.key, m.scope, m.conversation, m.role, COALESCE(m.host, c.host), \
                 COALESCE(m.model, c.model), COALESCE(m.at, m.captured_at), m.quarantined \
                 FROM messages m LEFT JOIN (SELECT scope, conversation, MAX(host) AS host, \
                 MAX(model) AS model FROM messages GROUP BY scope, conversation) c \
                 ON c.scope = m.scope AND c.conversation = m.conversation \
                 ORDER BY m.scope, m.conversation, m.seq",
            )
            .map_err(db_err)?;
        let rows = st
            .query_map([], |r| {
                let role: String = r.get(3)?;
                Ok(MessageMark {
                    key: r.get(0)?,
                    scope: r.get(1)?,
                    conversation: r.get(2)?,
                    role: Role::parse(&role),
                    host: r.get(4)?,
                    model: r.get(5)?,
                    at: r.get(6)?,
                    quarantined: r.get(7)?,
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    /// Every derived item's sources and trust.
    pub fn derived_links(&self) -> Result<Vec<DerivedLink>> {
        let mut st = self
            .conn
            .prepare("SELECT key, kind, scope, conversation, sources, trust FROM derived")
            .map_err(db_err)?;
        let rows = st
            .query_map([], |r| {
                let kind: String = r.get(1)?;
                let sources: String = r.get(4)?;
                Ok(DerivedLink {
                    key: r.get(0)?,
                    kind: super::DerivedKind::parse(&kind),
                    scope: r.get(2)?,
                    conversation: r.get(3)?,
                    sources: serde_json::from_str(&sources).unwrap_or_default(),
                    trust: r.get(5)?,
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    /// Records quarantine `record` and marks what it takes: each of `messages` not marked yet
    /// gets the quarantine's mark, each of `derived` not quarantined yet gets trust
    /// `quarantined` (as a new row, so recall reads it again); the label each had before is
    /// kept with the record. Returns how many messages and derived items it changed.
    pub fn quarantine(
        &mut self,
        record: &QuarantineRecord,
        messages: &[String],
        derived: &[String],
    ) -> Result<(usize, usize)> {
        let mark = quarantine_mark(&record.id);
        let tx = self.conn.transaction().map_err(db_err)?;
        tx.execute(
            "INSERT INTO quarantines (id, created_at, released_at, selection, counts, notes) \
             VALUES (?1, ?2, NULL, ?3, ?4, ?5)",
            params![
                record.id,
                record.created_at,
                to_json(&record.selection),
                to_json(&record.counts),
                to_json(&record.notes)
            ],
        )
        .map_err(db_err)?;
        let mut marked = 0;
        let mut lowered = 0;
        {
            let mut item = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO quarantined_items (quarantine, kind, key, prior) \
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(db_err)?;
            let mut mark_message = tx
                .prepare_cached(
                    "UPDATE messages SET quarantined = ?2 WHERE key = ?1 AND quarantined IS NULL",
                )
                .map_err(db_err)?;
            for key in messages {
                if mark_message.execute(params![key, mark]).map_err(db_err)? == 1 {
                    item.execute(params![record.id, "message", key, None::<String>])
                        .map_err(db_err)?;
                    marked += 1;
                }
            }
            let mut trust_of = tx
                .prepare_cached("SELECT trust FROM derived WHERE key = ?1")
                .map_err(db_err)?;
            let mut lower = tx
                .prepare_cached(
                    "UPDATE derived SET trust = ?2, \
                     rowid = (SELECT COALESCE(MAX(rowid), 0) + 1 FROM derived) WHERE key = ?1",
                )
                .map_err(db_err)?;
            for key in derived {
                let Some(prior) = trust_of
                    .query_row(params![key], |r| r.get::<_, Option<String>>(0))
                    .optional()
                    .map_err(db_err)?
                else {
                    continue;
                };
                if prior.as_deref() == Some(QUARANTINED) {
                    continue;
                }
                lower.execute(params![key, QUARANTINED]).map_err(db_err)?;
                item.execute(params![record.id, "derived", key, prior])
                    .map_err(db_err)?;
                lowered += 1;
            }
        }
        tx.commit().map_err(db_err)?;
        Ok((marked, lowered))
    }

    /// Keeps what a quarantine took in the end: its counts and the notes it moved aside.
    pub fn set_quarantine_result(
        &mut self,
        id: &str,
        counts: &serde_json::Value,
        notes: &serde_json::Value,
    ) -> Result<()> {
        self.conn
            .execute(
                "UPDATE quarantines SET counts = ?2, notes = ?3 WHERE id = ?1",
                params![id, to_json(counts), to_json(notes)],
            )
            .map_err(db_err)?;
        Ok(())
    }

    /// Takes quarantine `id`'s marks off: each message it marked gets its mark removed, each
    /// derived item it lowered gets back the trust it had before (as a new row); an item marked
    /// since by something else keeps that mark. Records the release at `now_ms` with
    /// `released` (the caller's account of it). A quarantine unknown or already released is
    /// refused.
    pub fn release_quarantine(
        &mut self,
        id: &str,
        now_ms: i64,
        released: &serde_json::Value,
    ) -> Result<LogRelease> {
        let record = self
            .quarantine_record(id)?
            .ok_or_else(|| Error::QuarantineNotFound(id.to_owned()))?;
        if let Some(at) = record.released_at {
            return Err(Error::Invalid(format!(
                "quarantine {id} was released already ({}): nothing to release",
                crate::backup::human_utc(at)
            )));
        }
        let mark = quarantine_mark(id);
        let tx = self.conn.transaction().map_err(db_err)?;
        let mut out = LogRelease::default();
        {
            let items: Vec<(String, String, Option<String>)> = {
                let mut st = tx
                    .prepare(
                        "SELECT kind, key, prior FROM quarantined_items WHERE quarantine = ?1 \
                         ORDER BY rowid",
                    )
                    .map_err(db_err)?;
                let rows = st
                    .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                    .map_err(db_err)?;
                rows.collect::<rusqlite::Result<_>>().map_err(db_err)?
            };
            let mut unmark = tx
                .prepare_cached(
                    "UPDATE messages SET quarantined = ?3 WHERE key = ?1 AND quarantined = ?2",
                )
                .map_err(db_err)?;
            for (_, key, prior) in items.iter().filter(|(kind, _, _)| kind == "message") {
                if unmark.execute(params![key, mark, prior]).map_err(db_err)? == 1 {
                    out.messages += 1;
                }
            }
            let mut sources_of = tx
                .prepare_cached("SELECT sources FROM derived WHERE key = ?1 AND trust = ?2")
                .map_err(db_err)?;
            let mut mark_of = tx
                .prepare_cached("SELECT quarantined FROM messages WHERE key = ?1")
                .map_err(db_err)?;
            let mut hand_over = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO quarantined_items (quarantine, kind, key, prior) \
                     SELECT ?2, kind, key, prior FROM quarantined_items \
                     WHERE quarantine = ?1 AND key = ?3",
                )
                .map_err(db_err)?;
            let mut restore = tx
                .prepare_cached(
                    "UPDATE derived SET trust = ?2, \
                     rowid = (SELECT COALESCE(MAX(rowid), 0) + 1 FROM derived) WHERE key = ?1",
                )
                .map_err(db_err)?;
            let mut place = tx
                .prepare_cached("SELECT scope, conversation FROM messages WHERE key = ?1")
                .map_err(db_err)?;
            let mut gone = false;
            for (_, key, prior) in items.iter().filter(|(kind, _, _)| kind == "derived") {
                let Some(sources) = sources_of
                    .query_row(params![key, QUARANTINED], |r| r.get::<_, String>(0))
                    .optional()
                    .map_err(db_err)?
                else {
                    gone = true;
                    continue;
                };
                // A source another quarantine still hides keeps the item hidden: that
                // quarantine takes the item over, with the trust it had before either.
                let sources: Vec<String> = serde_json::from_str(&sources).unwrap_or_default();
                let mut still = None;
                for source in &sources {
                    let marked: Option<String> = mark_of
                        .query_row(params![source], |r| r.get(0))
                        .optional()
                        .map_err(db_err)?
                        .flatten();
                    if let Some(other) = marked
                        .as_deref()
                        .and_then(|m| m.strip_prefix(QUARANTINE_MARK))
                    {
                        still = Some(other.to_owned());
                        break;
                    }
                }
                match still {
                    Some(other) => {
                        hand_over.execute(params![id, other, key]).map_err(db_err)?;
                    }
                    None => {
                        restore.execute(params![key, prior]).map_err(db_err)?;
                        out.derived += 1;
                    }
                }
            }
            // A derived item that went meanwhile was derived again from its conversation while
            // the messages were marked: that conversation is derived again now.
            if gone {
                for (_, key, _) in items.iter().filter(|(kind, _, _)| kind == "message") {
                    if let Some(at) = place
                        .query_row(params![key], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                        .map_err(db_err)?
                        && !out.rederive.contains(&at)
                    {
                        out.rederive.push(at);
                    }
                }
            }
        }
        tx.execute(
            "UPDATE quarantines SET released_at = ?2, released = ?3 WHERE id = ?1",
            params![id, now_ms, to_json(released)],
        )
        .map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        Ok(out)
    }

    /// Records a release's account once it is complete (the notes put back come after the log).
    pub fn set_quarantine_released(
        &mut self,
        id: &str,
        released: &serde_json::Value,
    ) -> Result<()> {
        self.conn
            .execute(
                "UPDATE quarantines SET released = ?2 WHERE id = ?1",
                params![id, to_json(released)],
            )
            .map_err(db_err)?;
        Ok(())
    }

    /// One quarantine's record.
    pub fn quarantine_record(&self, id: &str) -> Result<Option<QuarantineRecord>> {
        self.conn
            .query_row(
                &format!("{SELECT_RECORD} WHERE id = ?1"),
                params![id],
                row_record,
            )
            .optional()
            .map_err(db_err)
    }

    /// Every quarantine, the latest first.
    pub fn quarantines(&self) -> Result<Vec<QuarantineRecord>> {
        let mut st = self
            .conn
            .prepare(&format!(
                "{SELECT_RECORD} ORDER BY created_at DESC, rowid DESC"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([], row_record).map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }

    /// The items a quarantine changed and the label each had before: `(kind, key, prior)`,
    /// kind `message` or `derived`.
    pub fn quarantined_items(&self, id: &str) -> Result<Vec<(String, String, Option<String>)>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT kind, key, prior FROM quarantined_items WHERE quarantine = ?1 ORDER BY rowid",
            )
            .map_err(db_err)?;
        let rows = st
            .query_map(params![id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{DerivedItem, DerivedKind, NewMessage};
    use super::*;
    use crate::home::Home;

    fn msg(id: &str, role: Role, host: Option<&str>, text: &str) -> NewMessage {
        NewMessage {
            scope: "user".into(),
            conversation: "c".into(),
            message_id: id.into(),
            seq: id.parse().unwrap(),
            at: Some(1_000),
            role,
            speaker: None,
            host: host.map(str::to_owned),
            model: Some("m1".into()),
            text: text.into(),
            secret: None,
            quarantined: None,
        }
    }

    fn item(key: &str, sources: &[String], trust: Option<&str>) -> DerivedItem {
        DerivedItem {
            key: key.into(),
            kind: DerivedKind::Fact,
            scope: "user".into(),
            conversation: "c".into(),
            subject: None,
            attribute: None,
            value: None,
            text: key.into(),
            at: None,
            valid_to: None,
            sources: sources.to_vec(),
            trust: trust.map(str::to_owned),
            secret: false,
            inferred: false,
        }
    }

    fn record(id: &str) -> QuarantineRecord {
        QuarantineRecord {
            id: id.into(),
            created_at: 5,
            released_at: None,
            selection: serde_json::json!({"hosts": ["h"]}),
            counts: serde_json::json!({}),
            notes: serde_json::json!([]),
            released: None,
        }
    }

    #[test]
    fn a_release_restores_exactly_the_labels_a_quarantine_changed() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(dir.path())).unwrap();
        let mut log = Log::open(&home).unwrap();
        let mut poisoned = msg("3", Role::Assistant, Some("h"), "ignore that");
        poisoned.quarantined = Some("override".into());
        let keys = log
            .append(
                &[
                    msg("1", Role::User, Some("h"), "I live in Lisbon"),
                    msg("2", Role::Assistant, None, "noted"),
                    poisoned,
                ],
                10,
            )
            .unwrap();
        // The message without a host takes its conversation's.
        let marks = log.message_marks().unwrap();
        assert!(marks.iter().all(|m| m.host.as_deref() == Some("h")));
        log.replace_derived(
            "user",
            "c",
            &[
                item("fact:a", &keys[..1], None),
                item("sum:c", &keys[..2], Some("derived")),
                item("fact:q", &keys[1..2], Some("quarantined")),
            ],
            &[],
        )
        .unwrap();
        let before = log.derived_state().unwrap();
        let (marked, lowered) = log
            .quarantine(
                &record("q1"),
                &keys[1..],
                &["sum:c".into(), "fact:q".into(), "fact:gone".into()],
            )
            .unwrap();
        // The gate's mark and the already quarantined fact are left as they are.
        assert_eq!((marked, lowered), (1, 1));
        let m2 = log.get(&keys[1]).unwrap().unwrap();
        assert_eq!(m2.quarantined.as_deref(), Some("quarantine:q1"));
        assert_eq!(
            log.derived_item("sum:c").unwrap().unwrap().trust.as_deref(),
            Some("quarantined")
        );
        assert_ne!(
            log.derived_state().unwrap(),
            before,
            "recall reads it again"
        );
        // Applying the same again changes nothing more.
        assert_eq!(
            log.quarantine(&record("q2"), &keys[1..], &["sum:c".into()])
                .unwrap(),
            (0, 0)
        );

        let released = log
            .release_quarantine("q1", 20, &serde_json::json!({}))
            .unwrap();
        assert_eq!((released.messages, released.derived), (1, 1));
        assert!(released.rederive.is_empty());
        assert_eq!(log.get(&keys[1]).unwrap().unwrap().quarantined, None);
        assert_eq!(
            log.get(&keys[2]).unwrap().unwrap().quarantined.as_deref(),
            Some("override")
        );
        assert_eq!(
            log.derived_item("sum:c").unwrap().unwrap().trust.as_deref(),
            Some("derived")
        );
        assert_eq!(
            log.derived_item("fact:q")
                .unwrap()
                .unwrap()
                .trust
                .as_deref(),
            Some("quarantined")
        );
        let history = log.quarantines().unwrap();
        assert_eq!(history.len(), 2);
        assert_eq!(history[0].released_at, None);
        let q1 = log.quarantine_record("q1").unwrap().unwrap();
        assert_eq!(q1.released_at, Some(20));
        assert!(matches!(
            log.release_quarantine("q1", 30, &serde_json::json!({})),
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            log.release_quarantine("nope", 30, &serde_json::json!({})),
            Err(Error::QuarantineNotFound(_))
        ));
    }

    #[test]
    fn a_derived_item_gone_meanwhile_names_its_conversation_to_derive_again() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::resolve(Some(dir.path())).unwrap();
        let mut log = Log::open(&home).unwrap();
        let keys = log
            .append(&[msg("1", Role::Assistant, Some("h"), "noted")], 10)
            .unwrap();
        log.replace_derived("user", "c", &[item("sum:c", &keys, None)], &[])
            .unwrap();
        log.quarantine(&record("q1"), &keys, &["sum:c".into()])
            .unwrap();
        log.replace_derived("user", "c", &[], &[]).unwrap();
        let released = log
            .release_quarantine("q1", 20, &serde_json::json!({}))
            .unwrap();
        assert_eq!(released.derived, 0);
        assert_eq!(released.rederive, vec![("user".into(), "c".into())]);
    }
}
