//! What was said: the conversation log's messages in recall, beside notes.
//!
//! The recall index holds each recallable message of the raw log (`memoria_store::log`) as a
//! document keyed by its message key (`msg:…`, which no note id can be), derived from the log
//! as note documents are derived from files: `Engine::sync_recall` adds what the log gained
//! and drops what it lost. A message the guard marked is never a document. A message is
//! ranked as a note is (its own time for recency; its author for trust) and shown as the
//! passage around the match with its date, speaker and conversation.
//!
//! Three rules shape how a message is found. A reply is read with what it answers: its document
//! is the speaker's name and text led by the end of the message before it
//! ([`CONTEXT_WORDS`] words), since "yes, every Tuesday" means nothing alone. A question
//! that names a speaker is most likely about what that person said: among the hits, their
//! messages count double, as do the messages said within a time the question names
//! ([`rank_messages`]). And a conversation whose other messages match the question too lifts
//! its messages together ([`CONVERSATION_SUPPORT`]).

use std::collections::HashMap;
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
/// age no longer counting against them; then each message rises with the support of its
/// conversation among the hits ([`conversation_support`]), and the hits are in score order
/// again. The work is over the hits alone, never the whole log.
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
    // The conversation of each message hit, for the support its conversation gives it.
    let mut conversation_of: Vec<Option<(String, String)>> = vec![None; hits.len()];
    for (i, h) in hits
        .iter_mut()
        .enumerate()
        .filter(|(_, h)| is_said_key(&h.id))
    {
        // Who said it and when. A fact or summary is ranked by its time only: a fact's text
        // already names its subject, so its words meet a question that names them.
        let (speaker, at, kind) = if is_message_key(&h.id) {
            let Some(m) = log.get(&h.id)? else { continue };
            conversation_of[i] = Some((m.scope, m.conversation));
            (m.speaker, m.at, MESSAGE_TYPE)
        } else {
            let Some(d) = log.derived_item(&h.id)? else {
                continue;
            };
            (None, d.at, d.kind.as_str())
        };
        if let (Some((start, end)), Some(at)) = (window, at)
            && (start..end).contains(&at)
        {
            // Said when the question asks about: its age, as its kind decays, no longer counts
            // against it.
            let age = crate::recall::rank::age_decay(
                crate::recall::rank::type_half_life_days(Some(kind)),
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
    changed |= conversation_support(hits, &conversation_of);
    if changed {
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    }
    Ok(())
}

/// How much a message's conversation among the hits lifts it: its score is multiplied by
/// `1 + CONVERSATION_SUPPORT × support / best`, where `support` is the mean of the two best
/// scores of the other messages of its conversation among the hits (a missing one counts 0)
/// and `best` the best score of all the hits.
pub const CONVERSATION_SUPPORT: f64 = 0.6;

/// A conversation is about a few things. When several of its messages match a question, the
/// question is likely about what that conversation was about, and the messages there rise
/// together, including the one that holds the answer but matches less well on its own; a
/// stray match in a conversation about something else gets no such lift. A message's own score
/// never counts towards its support, so one strong hit alone lifts nothing. `conversation_of`
/// gives each hit's (scope, conversation) when it is a message; other hits neither give nor
/// get support. The scores are changed in place, not re-sorted; returns whether any changed.
fn conversation_support(
    hits: &mut [crate::recall::Hit],
    conversation_of: &[Option<(String, String)>],
) -> bool {
    let best = hits.iter().map(|h| h.score).fold(0.0, f64::max);
    if best <= 0.0 {
        return false;
    }
    // The three best message hits of each conversation: enough for any hit's two best others.
    let mut tops: HashMap<&(String, String), Vec<(f64, usize)>> = HashMap::new();
    for (i, c) in conversation_of.iter().enumerate() {
        if let Some(c) = c {
            let top = tops.entry(c).or_default();
            top.push((hits[i].score, i));
            top.sort_by(|a, b| b.0.total_cmp(&a.0));
            top.truncate(3);
        }
    }
    let lift: Vec<f64> = conversation_of
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let Some(c) = c else { return 1.0 };
            let others: f64 = tops[c]
                .iter()
                .filter(|(_, j)| *j != i)
                .take(2)
                .map(|(s, _)| s)
                .sum();
            1.0 + CONVERSATION_SUPPORT * (others / 2.0) / best
        })
        .collect();
    let mut changed = false;
    for (h, lift) in hits.iter_mut().zip(lift) {
        if lift != 1.0 {
            h.score *= lift;
            changed = true;
        }
    }
    changed
}

/// A fingerprint of the log's recallable messages, derived items and working memory, which
/// changes whenever one is added, changed or removed ([`TableState`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogState {
    pub messages: TableState,
    pub derived: TableState,
    pub working: TableState,
    /// The highest number of the journal of changed messages ([`Log::journal_after`]);
    /// absent from a watermark written before the log kept one (then, at the first removal
    /// or change, every message is compared).
    #[serde(default)]
    pub journal: Option<i64>,
}

impl LogState {
    /// The state of `log` now.
    pub fn of(log: &Log) -> Result<LogState> {
        Ok(LogState {
            messages: log.state()?,
            derived: log.derived_state()?,
            working: log.working_state()?,
            journal: Some(log.journal_last()?),
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

#[cfg(test)]
mod tests {
    use super::*;
    use memoria_store::home::Home;
    use memoria_store::log::NewMessage;

    fn said(conversation: &str, seq: i64, text: &str) -> NewMessage {
        NewMessage {
            scope: "user".into(),
            conversation: conversation.into(),
            message_id: format!("{conversation}-{seq}"),
            seq,
            at: Some(1_000 + seq),
            role: Role::User,
            speaker: Some("Ana".into()),
            host: None,
            model: None,
            text: text.into(),
            secret: None,
            quarantined: None,
        }
    }

    fn hit(id: &str, score: f64) -> crate::recall::Hit {
        crate::recall::Hit {
            scope: "user".into(),
            id: id.into(),
            summary: String::new(),
            note_type: None,
            score,
            relevance: None,
            cosine: None,
            bm25_rank: None,
            archived: false,
            explain: None,
        }
    }

    fn order(hits: &[crate::recall::Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.id.as_str()).collect()
    }

    #[test]
    fn messages_of_a_conversation_that_matches_rise_together_past_a_stray_match() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = Log::open(&Home::resolve(Some(dir.path())).unwrap()).unwrap();
        let keys = log
            .append(
                &[
                    said("trip", 1, "we booked the cabin by the lake"),
                    said("trip", 2, "the kids want to fish there"),
                    said("trip", 3, "and a canoe for the afternoons"),
                    said("work", 1, "the lake view office is free"),
                    said("alone", 1, "a note of its own"),
                ],
                10,
            )
            .unwrap();
        let (cabin, fish, canoe, office, lone) = (&keys[0], &keys[1], &keys[2], &keys[3], &keys[4]);
        // The stray match and a note lead on their own scores; the trip's messages trail.
        let mut hits = vec![
            hit("a-note", 1.02),
            hit(office, 1.0),
            hit(cabin, 0.9),
            hit(fish, 0.8),
            hit(canoe, 0.7),
        ];
        rank_messages(&log, "what about the holiday", 0, &mut hits).unwrap();
        // Each trip message is backed by the two others: all three rise past the stray
        // match, in their own order; the note and the stray match keep their scores.
        assert_eq!(
            order(&hits),
            [cabin.as_str(), fish, canoe, "a-note", office]
        );
        let score = |id: &str| hits.iter().find(|h| h.id == id).unwrap().score;
        assert_eq!(score("a-note"), 1.02);
        assert_eq!(score(office), 1.0);
        let best = 1.02;
        let lift = |others: f64| 1.0 + CONVERSATION_SUPPORT * (others / 2.0) / best;
        assert!((score(cabin) - 0.9 * lift(0.8 + 0.7)).abs() < 1e-12);
        assert!((score(canoe) - 0.7 * lift(0.9 + 0.8)).abs() < 1e-12);

        // One message alone in its conversation is not lifted by its own score, and a note
        // gives no support to anything.
        let mut hits = vec![hit(lone, 0.5), hit("a-note", 2.0)];
        rank_messages(&log, "what about the holiday", 0, &mut hits).unwrap();
        assert_eq!(order(&hits), [lone.as_str(), "a-note"]);
        assert_eq!(hits[0].score, 0.5);

        // Two messages of one conversation back each other with half of the other's score.
        let mut hits = vec![hit(office, 1.0), hit(cabin, 0.6), hit(fish, 0.5)];
        rank_messages(&log, "what about the holiday", 0, &mut hits).unwrap();
        let score = |id: &str| hits.iter().find(|h| h.id == id).unwrap().score;
        assert!((score(cabin) - 0.6 * (1.0 + CONVERSATION_SUPPORT * 0.25)).abs() < 1e-12);
        assert!((score(fish) - 0.5 * (1.0 + CONVERSATION_SUPPORT * 0.3)).abs() < 1e-12);
    }
}
