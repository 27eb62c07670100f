//! What was said: the conversation log's messages in recall, beside notes.
//!
//! The recall index holds each recallable message of the raw log (`memoria_store::log`) as a
//! document keyed by its message key (`msg:…`, which no note id can be), derived from the log
//! as note documents are derived from files: `Engine::sync_recall` adds what the log gained
//! and drops what it lost. A message the guard marked is never a document. A message is
//! ranked as a note is (its own time for recency; its author for trust) and shown as the
//! passage around the match with its date, speaker and conversation.
//!
//! Two rules shape how a message is found. A reply is read with what it answers: its document
//! is the speaker's name and text led by the end of the message before it
//! ([`CONTEXT_WORDS`] words), since "yes, every Tuesday" means nothing alone. And a question
//! that names a speaker is most likely about what that person said: among the hits, their
//! messages count double, as do the messages said within a time the question names
//! ([`rank_messages`]).

use std::sync::{Mutex, MutexGuard};

use memoria_shared::Trust;
use memoria_store::log::{Log, LogMessage, Role, TableState};

use crate::error::{Error, Result};
use crate::recall::RecallDoc;
use crate::vault::Engine;

pub use memoria_store::log::{
    DerivedItem, WorkingBlock, is_derived_key, is_message_key, is_working_key, message_key,
};

/// Whether `id` names something of the conversation log recall holds: a message, a fact or
/// summary derived from messages, or a block of working memory.
pub fn is_said_key(id: &str) -> bool {
    is_message_key(id) || is_derived_key(id) || is_working_key(id)
}

/// The line a block of working memory is listed under: who wrote it and until when.
pub fn working_heading(b: &WorkingBlock) -> String {
    format!(
        "working · {} · until {}",
        if b.role == Role::User {
            "you"
        } else {
            "an agent"
        },
        crate::backup::human_utc(b.expires_at)
    )
}

/// A block of working memory as recall indexes it, trusted as its author is.
pub fn working_doc(b: &WorkingBlock) -> RecallDoc {
    let mut doc = RecallDoc::new(&b.scope, &b.key, &working_heading(b), &b.text);
    doc.note_type = Some(crate::recall::WORKING_TYPE.to_owned());
    doc.updated_at_ms = Some(b.created_at);
    doc.trust = Some(trust_of_role(b.role));
    doc.rehash()
}

/// The type recall gives a message's document.
pub use crate::recall::MESSAGE_TYPE;

/// How far to trust what someone said, by who said it: the person's own words are `owner`, an
/// agent's `derived`, a tool's output `ingested`, anyone else's `peer`.
pub fn trust_of_role(role: Role) -> Trust {
    match role {
        Role::User => Trust::Owner,
        Role::Assistant => Trust::Derived,
        Role::Tool | Role::System => Trust::Ingested,
        Role::Other => Trust::Peer,
    }
}

/// How far to trust a captured message: as its author is ([`trust_of_role`]), or not at all
/// when the poison gate marked it.
pub fn trust_of_message(m: &LogMessage) -> Trust {
    if m.quarantined.is_some() {
        Trust::Quarantined
    } else {
        trust_of_role(m.role)
    }
}

/// Who said it, as a reader names them: the speaker's name, else the role.
pub fn who(m: &LogMessage) -> String {
    m.speaker
        .clone()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| m.role.as_str().to_owned())
}

/// The line a message is listed under: who said it and when.
pub fn heading(m: &LogMessage) -> String {
    match m.at {
        Some(at) => format!("{} · {}", who(m), crate::backup::human_date(at)),
        None => who(m),
    }
}

/// Words of the message before a message that lead its document.
pub const CONTEXT_WORDS: usize = 25;

/// A message as recall indexes it: the end of the message before it (`previous`, in the same
/// conversation, unless that one holds a secret or came from a less trusted author), then who
/// said it and what. Its summary is its heading, shown and not
/// searched (`RecallDoc::searched_summary`).
pub fn message_doc(m: &LogMessage, previous: Option<&LogMessage>) -> RecallDoc {
    let mut body = String::new();
    // A message is never a way around another's labels: the words of one the guard or the
    // poison gate marked, or of a less trusted author, never lead a document that carries this
    // message's trust.
    let previous =
        previous.filter(|p| !p.held_back() && trust_of_message(p) >= trust_of_message(m));
    if let Some(p) = previous {
        let words: Vec<&str> = p.text.split_whitespace().collect();
        let tail = words[words.len().saturating_sub(CONTEXT_WORDS)..].join(" ");
        body.push_str(&format!("{}: {tail}\n", who(p)));
    }
    body.push_str(&format!("{}: {}", who(m), m.text));
    let mut doc = RecallDoc::new(&m.scope, &m.key, &heading(m), &body);
    doc.note_type = Some(MESSAGE_TYPE.to_owned());
    doc.updated_at_ms = m.at;
    doc.trust = Some(trust_of_message(m));
    doc.rehash()
}

/// The line a fact or summary is listed under: what it is, whose, and when.
pub fn derived_heading(d: &DerivedItem) -> String {
    let mut h = match &d.subject {
        Some(s) => format!("{} · {s}", d.kind.as_str()),
        None => format!("{} · {}", d.kind.as_str(), d.conversation),
    };
    if let Some(at) = d.at {
        h.push_str(&format!(" · {}", crate::backup::human_date(at)));
    }
    if let Some(to) = d.valid_to {
        h.push_str(&format!(" (until {})", crate::backup::human_date(to)));
    }
    h
}

/// A fact or summary as recall indexes it: its text, with the labels the derive path gave it;
/// a fact a newer value replaced ranks below the current one.
pub fn derived_doc(d: &DerivedItem) -> RecallDoc {
    let mut doc = RecallDoc::new(&d.scope, &d.key, &derived_heading(d), &d.text);
    doc.note_type = Some(d.kind.as_str().to_owned());
    doc.updated_at_ms = d.at;
    doc.trust = Some(
        d.trust
            .as_deref()
            .map(|t| crate::index::trust_of(t).unwrap_or(Trust::Quarantined))
            .unwrap_or(Trust::Owner),
    );
    doc.standing.superseded = d.valid_to.is_some();
    doc.rehash()
}

/// Among `hits`, the messages of a speaker `query` names count double, and so do the messages
/// said within the time the query names ("last May", "hace un mes": `recall::when`), their
/// age no longer counting against them; the hits are then in score order again.
pub fn rank_messages(
    log: &Log,
    query: &str,
    now_ms: i64,
    hits: &mut [crate::recall::Hit],
) -> Result<()> {
    let window = crate::recall::when::window(query, now_ms);
    let words: Vec<String> = query
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    let mut changed = false;
    for h in hits.iter_mut().filter(|h| is_said_key(&h.id)) {
        // Who said it and when. A fact or summary is ranked by its time only: a fact's text
        // already names its subject, so its words meet a question that names them.
        let (speaker, at) = if is_message_key(&h.id) {
            let Some(m) = log.get(&h.id)? else { continue };
            (m.speaker, m.at)
        } else {
            let Some(d) = log.derived_item(&h.id)? else {
                continue;
            };
            (None, d.at)
        };
        if let (Some((start, end)), Some(at)) = (window, at)
            && (start..end).contains(&at)
        {
            // Said when the question asks about: its age no longer counts against it.
            let age = crate::recall::rank::age_decay(
                crate::recall::rank::type_half_life_days(Some(MESSAGE_TYPE)),
                Some(at),
                now_ms,
            );
            h.score *= 2.0 / age;
            changed = true;
        }
        let Some(speaker) = speaker.as_deref() else {
            continue;
        };
        let name: Vec<String> = speaker
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect();
        if !name.is_empty() && name.iter().all(|n| words.contains(n)) {
            h.score *= 2.0;
            changed = true;
        }
    }
    if changed {
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    }
    Ok(())
}

/// A fingerprint of the log's recallable messages, derived items and working memory, which
/// changes whenever one is added, changed or removed ([`TableState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogState {
    pub messages: TableState,
    pub derived: TableState,
    pub working: TableState,
}

impl LogState {
    /// The state of `log` now.
    pub fn of(log: &Log) -> Result<LogState> {
        Ok(LogState {
            messages: log.state()?,
            derived: log.derived_state()?,
            working: log.working_state()?,
        })
    }
}

impl Engine {
    /// The raw log of this home, opened on first use.
    pub fn log(&self) -> Result<MutexGuard<'_, Log>> {
        if self.log.get().is_none() {
            let log = Log::open(self.home())?;
            let _ = self.log.set(Mutex::new(log));
        }
        Ok(self
            .log
            .get()
            .expect("set above")
            .lock()
            .unwrap_or_else(|p| p.into_inner()))
    }

    /// Removes messages already purged from the log from recall, leaving no copy of their text
    /// or vectors in its files.
    pub fn forget_messages(&self, scope: &str, keys: &[String]) -> Result<()> {
        let shared = self.shared_recall()?;
        let recall = &shared.index;
        let mut hashes = Vec::new();
        for key in keys {
            if let Some(doc) = recall.get(scope, key).map_err(crate::search::recall_err)? {
                hashes.push(doc.hash.to_string());
            }
            recall
                .remove(scope, key)
                .map_err(crate::search::recall_err)?;
        }
        recall.purge(&hashes).map_err(crate::search::recall_err)
    }

    /// The log's state ([`LogState`]); `None` while nothing was ever captured in this home.
    pub fn log_state(&self) -> Result<Option<LogState>> {
        if !memoria_store::log::log_path(self.home().root()).exists() {
            return Ok(None);
        }
        let log = self.log()?;
        Ok(Some(LogState::of(&log)?))
    }

    /// A fact or summary this engine's scopes may see, not held back (a secret, a quarantine).
    pub fn visible_derived(&self, key: &str) -> Result<DerivedItem> {
        let visible: Vec<String> = self.visible_scopes().iter().map(|s| s.key()).collect();
        match self.log()?.derived_item(key)? {
            Some(d) if visible.contains(&d.scope) && !d.held_back() => Ok(d),
            _ => Err(Error::NotFound(format!(
                "no fact or summary {key} in the conversations visible here"
            ))),
        }
    }

    /// A block of working memory this engine's scopes may see, not expired.
    pub fn visible_working(&self, key: &str) -> Result<WorkingBlock> {
        let visible: Vec<String> = self.visible_scopes().iter().map(|s| s.key()).collect();
        match self.log()?.working_block(key)? {
            Some(b) if visible.contains(&b.scope) && b.expires_at > self.now_ms() => Ok(b),
            _ => Err(Error::NotFound(format!(
                "no working memory {key} here (it may have expired)"
            ))),
        }
    }

    /// A message this engine's scopes may see, not held back (the guard, the poison gate or a
    /// quarantine marked it).
    pub fn visible_message(&self, key: &str) -> Result<LogMessage> {
        let visible: Vec<String> = self.visible_scopes().iter().map(|s| s.key()).collect();
        match self.log()?.get(key)? {
            Some(m) if visible.contains(&m.scope) && !m.held_back() => Ok(m),
            _ => Err(Error::NotFound(format!(
                "no message {key} in the conversations visible here"
            ))),
        }
    }
}
