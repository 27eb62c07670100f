//! The capture ledger: one row per turn that reached model capture, with its outcome — notes
//! written (with their kinds), or skipped with a reason — and where it came from (the entry
//! path, the agent's host, the model asked). It holds no text of the conversation: ids, names
//! and reasons only. Kept in the log's file beside the messages, on this machine only, and
//! purged with its conversation.
//!
//! A row is written `pending` when a turn is queued for the model and settled once the model
//! answered (or failed); a row a killed process left `running` is taken up again after
//! [`STALE_MS`].

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{Log, db_err};
use crate::error::Result;

/// How long a row may stay `running` before another process takes it up again.
pub const STALE_MS: i64 = 10 * 60 * 1000;

/// Where a row stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Queued for the model.
    Pending,
    /// A process is asking the model.
    Running,
    /// The model answered: the notes it gave that stood were written or reinforced (none,
    /// when the turn held nothing to keep); a reason beside them says what was refused.
    Written,
    /// Nothing was written, for [`CaptureRun::reason`].
    Skipped,
}

impl RunState {
    fn as_str(self) -> &'static str {
        match self {
            RunState::Pending => "pending",
            RunState::Running => "running",
            RunState::Written => "written",
            RunState::Skipped => "skipped",
        }
    }

    fn parse(s: &str) -> RunState {
        match s {
            "pending" => RunState::Pending,
            "running" => RunState::Running,
            "written" => RunState::Written,
            _ => RunState::Skipped,
        }
    }
}

/// Why a turn wrote nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The user's message is shorter than `conversations.minUserChars`: no call.
    TooShort,
    /// The conversation spent `conversations.maxModelCaptures` calls already: no call.
    CapReached,
    /// The model's answer is not a JSON object.
    Unparsable,
    /// The answer is JSON but not the shape asked for (or every note in it was refused).
    RejectedShape,
    /// A note of the answer reads as instructions to an assistant: refused.
    PoisonGate,
    /// No model is configured (`model.url`): no call.
    NoEligibleModel,
    /// The call failed (no answer in time, an error status) or a note could not be written.
    Error,
}

impl SkipReason {
    pub const ALL: [SkipReason; 7] = [
        SkipReason::TooShort,
        SkipReason::CapReached,
        SkipReason::Unparsable,
        SkipReason::RejectedShape,
        SkipReason::PoisonGate,
        SkipReason::NoEligibleModel,
        SkipReason::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::TooShort => "too_short",
            SkipReason::CapReached => "cap_reached",
            SkipReason::Unparsable => "unparsable",
            SkipReason::RejectedShape => "rejected_shape",
            SkipReason::PoisonGate => "poison_gate",
            SkipReason::NoEligibleModel => "no_eligible_model",
            SkipReason::Error => "error",
        }
    }

    fn parse(s: &str) -> Option<SkipReason> {
        SkipReason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether a model was called for it (what the per-conversation cap counts).
    pub fn called_model(self) -> bool {
        !matches!(
            self,
            SkipReason::TooShort | SkipReason::CapReached | SkipReason::NoEligibleModel
        )
    }
}

/// A note a capture wrote or reinforced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunNote {
    pub id: String,
    /// Its type (`user`, `feedback`, `project`, `reference`).
    pub kind: String,
    /// An existing note that got a dated line under `## History`, not a new note.
    pub reinforced: bool,
}

/// A row of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaptureRun {
    pub id: i64,
    /// When the turn reached the gate, in ms since the epoch.
    pub at: i64,
    /// When its outcome was settled.
    pub done_at: Option<i64>,
    pub scope: String,
    pub conversation: String,
    /// The key of the user message the turn starts with.
    pub turn: String,
    /// The keys of the turn's messages (the user's and the replies), in order.
    pub messages: Vec<String>,
    /// How the turn was captured: `hook`, `cli`, `mcp` or `api`.
    pub entry: String,
    /// The agent's host the conversation came from (`claude-code`), when known.
    pub host: Option<String>,
    /// The model asked (`model.name`); `None` when none was called.
    pub model: Option<String>,
    pub state: RunState,
    pub reason: Option<SkipReason>,
    /// The notes written or reinforced.
    pub notes: Vec<RunNote>,
    /// What went wrong, without the conversation's text: the poison gate's detector, an
    /// error's message, the shape that was refused.
    pub detail: Option<String>,
}

impl CaptureRun {
    /// The kinds of the notes written, each once, in order.
    pub fn kinds(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for n in &self.notes {
            if !out.contains(&n.kind) {
                out.push(n.kind.clone());
            }
        }
        out
    }
}

/// A turn reaching the gate.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    pub scope: String,
    pub conversation: String,
    pub turn: String,
    pub messages: Vec<String>,
    pub entry: String,
    pub host: Option<String>,
    /// `Pending`, or `Skipped` with a reason decided without a model.
    pub state: RunState,
    pub reason: Option<SkipReason>,
}

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS capture_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    done_at INTEGER,
    claimed_at INTEGER,
    scope TEXT NOT NULL,
    conversation TEXT NOT NULL,
    turn TEXT NOT NULL,
    messages TEXT NOT NULL,
    entry TEXT NOT NULL,
    host TEXT,
    model TEXT,
    state TEXT NOT NULL,
    reason TEXT,
    notes TEXT NOT NULL DEFAULT '[]',
    detail TEXT,
    UNIQUE (scope, conversation, turn)
);
CREATE INDEX IF NOT EXISTS capture_runs_by_state ON capture_runs(state);
CREATE INDEX IF NOT EXISTS capture_runs_by_conversation ON capture_runs(scope, conversation);
";

const SELECT: &str = "SELECT id, at, done_at, scope, conversation, turn, messages, entry, host, \
                      model, state, reason, notes, detail FROM capture_runs";

fn row_run(r: &rusqlite::Row<'_>) -> rusqlite::Result<CaptureRun> {
    let messages: String = r.get(6)?;
    let state: String = r.get(10)?;
    let reason: Option<String> = r.get(11)?;
    let notes: String = r.get(12)?;
    Ok(CaptureRun {
        id: r.get(0)?,
        at: r.get(1)?,
        done_at: r.get(2)?,
        scope: r.get(3)?,
        conversation: r.get(4)?,
        turn: r.get(5)?,
        messages: serde_json::from_str(&messages).unwrap_or_default(),
        entry: r.get(7)?,
        host: r.get(8)?,
        model: r.get(9)?,
        state: RunState::parse(&state),
        reason: reason.as_deref().and_then(SkipReason::parse),
        notes: serde_json::from_str(&notes).unwrap_or_default(),
        detail: r.get(13)?,
    })
}

impl Log {
    /// Records a turn reaching the gate; a turn already recorded (captured again) is left as it
    /// is and gives `None`.
    pub fn add_run(&mut self, run: &NewRun, now_ms: i64) -> Result<Option<i64>> {
        let done = (run.state == RunState::Skipped).then_some(now_ms);
        let n = self
            .conn
            .execute(
                "INSERT OR IGNORE INTO capture_runs (at, done_at, scope, conversation, turn, \
                 messages, entry, host, state, reason) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    now_ms,
                    done,
                    run.scope,
                    run.conversation,
                    run.turn,
                    serde_json::to_string(&run.messages).unwrap_or_else(|_| "[]".into()),
                    run.entry,
                    run.host,
                    run.state.as_str(),
                    run.reason.map(SkipReason::as_str),
                ],
            )
            .map_err(db_err)?;
        Ok((n == 1).then(|| self.conn.last_insert_rowid()))
    }

    /// How many model calls a conversation has spent or has queued: every row but those
    /// skipped before a call.
    pub fn runs_spent(&self, scope: &str, conversation: &str) -> Result<usize> {
        self.conn
            .query_row(
                "SELECT COUNT(*) FROM capture_runs WHERE scope = ?1 AND conversation = ?2 \
                 AND (reason IS NULL OR reason NOT IN ('too_short', 'cap_reached', 'no_eligible_model'))",
                params![scope, conversation],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as usize)
            .map_err(db_err)
    }

    /// Takes the oldest pending row of `scopes` (or one left running for longer than
    /// [`STALE_MS`]) for this process: it is marked running, so no other process takes it too.
    pub fn claim_run(&mut self, now_ms: i64, scopes: &[String]) -> Result<Option<CaptureRun>> {
        let scopes = serde_json::to_string(scopes).unwrap_or_else(|_| "[]".into());
        let tx = self.conn.transaction().map_err(db_err)?;
        let id: Option<i64> = tx
            .query_row(
                "SELECT id FROM capture_runs WHERE (state = 'pending' \
                 OR (state = 'running' AND claimed_at < ?1)) \
                 AND scope IN (SELECT value FROM json_each(?2)) ORDER BY id LIMIT 1",
                params![now_ms - STALE_MS, scopes],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        let Some(id) = id else {
            return Ok(None);
        };
        tx.execute(
            "UPDATE capture_runs SET state = 'running', claimed_at = ?2 WHERE id = ?1",
            params![id, now_ms],
        )
        .map_err(db_err)?;
        let run = tx
            .query_row(&format!("{SELECT} WHERE id = ?1"), params![id], row_run)
            .map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        Ok(Some(run))
    }

    /// Settles a row: written with its notes, or skipped with a reason (written when notes
    /// stood beside a refusal); `model` is the model asked, `None` when none was called.
    pub fn settle_run(
        &mut self,
        id: i64,
        model: Option<&str>,
        reason: Option<SkipReason>,
        notes: &[RunNote],
        detail: Option<&str>,
        now_ms: i64,
    ) -> Result<()> {
        // A poison gate's refusal beside notes of the same answer that stood is written, and
        // says what was refused.
        let state = if reason.is_some() && notes.is_empty() {
            RunState::Skipped
        } else {
            RunState::Written
        };
        self.conn
            .execute(
                "UPDATE capture_runs SET state = ?2, reason = ?3, model = ?4, notes = ?5, \
                 detail = ?6, done_at = ?7 WHERE id = ?1",
                params![
                    id,
                    state.as_str(),
                    reason.map(SkipReason::as_str),
                    model,
                    serde_json::to_string(notes).unwrap_or_else(|_| "[]".into()),
                    detail,
                    now_ms
                ],
            )
            .map_err(db_err)?;
        Ok(())
    }

    /// Whether a row of `scopes` waits for a process to ask the model: pending, or left
    /// running by a process that stopped ([`STALE_MS`]). The rows [`Log::claim_run`] would
    /// take for the same scopes, no others.
    pub fn runs_waiting(&self, now_ms: i64, scopes: &[String]) -> Result<bool> {
        let scopes = serde_json::to_string(scopes).unwrap_or_else(|_| "[]".into());
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM capture_runs WHERE (state = 'pending' \
                 OR (state = 'running' AND claimed_at < ?1)) \
                 AND scope IN (SELECT value FROM json_each(?2)))",
                params![now_ms - STALE_MS, scopes],
                |r| r.get(0),
            )
            .map_err(db_err)
    }

    /// The latest `limit` rows of `scopes`, the newest first.
    pub fn runs(&self, scopes: &[String], limit: usize) -> Result<Vec<CaptureRun>> {
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "{SELECT} WHERE scope IN (SELECT value FROM json_each(?1)) ORDER BY id DESC LIMIT ?2"
            ))
            .map_err(db_err)?;
        let scopes = serde_json::to_string(scopes).unwrap_or_else(|_| "[]".into());
        let rows = st
            .query_map(params![scopes, limit as i64], row_run)
            .map_err(db_err)?;
        rows.map(|r| r.map_err(db_err)).collect()
    }

    /// Removes a conversation's rows (it was forgotten).
    pub(super) fn purge_runs(&self, scope: &str, conversation: &str) -> Result<()> {
        self.conn
            .execute(
                "DELETE FROM capture_runs WHERE scope = ?1 AND conversation = ?2",
                params![scope, conversation],
            )
            .map_err(db_err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::home::Home;

    fn run(turn: &str, state: RunState, reason: Option<SkipReason>) -> NewRun {
        NewRun {
            scope: "user".into(),
            conversation: "c1".into(),
            turn: turn.into(),
            messages: vec![turn.into()],
            entry: "cli".into(),
            host: Some("claude-code".into()),
            state,
            reason,
        }
    }

    #[test]
    fn rows_are_queued_claimed_once_settled_and_counted_against_the_cap() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Log::open(&Home::resolve(Some(tmp.path())).unwrap()).unwrap();
        assert!(
            log.add_run(&run("m1", RunState::Pending, None), 1)
                .unwrap()
                .is_some()
        );
        assert_eq!(
            log.add_run(&run("m1", RunState::Pending, None), 2).unwrap(),
            None,
            "a turn is recorded once"
        );
        log.add_run(&run("m2", RunState::Skipped, Some(SkipReason::TooShort)), 3)
            .unwrap();
        assert_eq!(log.runs_spent("user", "c1").unwrap(), 1);
        let user = ["user".to_owned()];
        assert!(log.runs_waiting(3, &user).unwrap());
        // Another scope's process has nothing waiting.
        assert!(!log.runs_waiting(3, &["project:x".into()]).unwrap());
        assert!(log.claim_run(10, &["project:x".into()]).unwrap().is_none());
        let claimed = log.claim_run(10, &user).unwrap().unwrap();
        assert_eq!(
            (claimed.turn.as_str(), claimed.state),
            ("m1", RunState::Running)
        );
        assert!(log.claim_run(11, &user).unwrap().is_none(), "claimed once");
        // A process that died with it: taken up again once stale.
        assert!(log.claim_run(10 + STALE_MS + 1, &user).unwrap().is_some());
        let note = RunNote {
            id: "n".into(),
            kind: "user".into(),
            reinforced: false,
        };
        log.settle_run(claimed.id, Some("smol"), None, &[note], None, 20)
            .unwrap();
        assert!(!log.runs_waiting(21, &user).unwrap());
        let rows = log.runs(&["user".into()], 10).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].reason, Some(SkipReason::TooShort));
        assert_eq!(rows[1].state, RunState::Written);
        assert_eq!(rows[1].kinds(), vec!["user".to_owned()]);
        assert_eq!(rows[1].model.as_deref(), Some("smol"));
        assert!(log.runs(&["project:x".into()], 10).unwrap().is_empty());
        log.purge_runs("user", "c1").unwrap();
        assert!(log.runs(&["user".into()], 10).unwrap().is_empty());
    }
}
