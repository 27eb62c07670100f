//! Hybrid search over the vault: the bridge between the vault's SQLite index (which files
//! exist, their hashes) and the recall index (BM25 + vectors). Before every search the recall
//! index is brought in step with the vault — only notes whose content hash changed are
//! re-indexed — so edits from other processes, the watcher or an editor are always seen.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use memoria_shared::ContentHash;
use memoria_store::log::TableState;

use crate::error::{Error, Result};
use crate::index::IndexedNote;
use crate::recall::{
    self, RecallBlock, RecallConfig, RecallDoc, RecallIndex, RecallOptions, SearchOptions,
};
use crate::vault::Engine;

pub use crate::index::EVERGREEN_TAGS;

pub(crate) fn recall_err(e: recall::Error) -> Error {
    Error::from(e)
}

/// The recall document of an index row. A note's aliases are searched with its tags: they
/// name the note as a title does; the document is keyed by [`IndexedNote::recall_hash`], which
/// covers them.
pub fn recall_doc(row: &IndexedNote) -> RecallDoc {
    let hash = row
        .recall_hash()
        .as_deref()
        .and_then(ContentHash::parse)
        .unwrap_or_else(|| ContentHash::of_parts(&row.id, &row.summary, None, &[], &row.body));
    RecallDoc {
        scope: row.scope.clone(),
        id: row.id.clone(),
        summary: row.summary.clone(),
        tags: row.tags.iter().chain(&row.aliases).cloned().collect(),
        body: row.body.clone(),
        note_type: row.note_type.clone(),
        updated_at_ms: row.updated_at.or(row.created_at),
        trust: row.trust.as_deref().and_then(crate::index::trust_of),
        importance: row.importance,
        evergreen: row
            .tags
            .iter()
            .any(|t| EVERGREEN_TAGS.contains(&t.as_str())),
        standing: recall::Standing {
            consolidated: row.status.as_deref() == Some("consolidated"),
            // Read from the other notes' relations: the caller sets it (see `sync_recall`).
            superseded: false,
        },
        hash,
    }
}

/// The recall index of a process, shared by its engines (a Session reads
/// on one and writes on another, and the model is loaded once), with the lock that keeps two
/// of them from bringing it in step at the same time. Searches never take that lock.
pub struct SharedRecall {
    pub index: RecallIndex,
    in_step: Mutex<()>,
    /// The conversation log's state when its messages were last brought in (`said.rs`).
    log_seen: Mutex<Option<crate::said::LogState>>,
    /// What the last bringing in step read of the log.
    last_in_step: Mutex<Option<InStepReport>>,
}

impl SharedRecall {
    pub fn new(index: RecallIndex) -> Arc<SharedRecall> {
        Arc::new(SharedRecall {
            index,
            in_step: Mutex::new(()),
            log_seen: Mutex::new(None),
            last_in_step: Mutex::new(None),
        })
    }
}

impl std::fmt::Debug for SharedRecall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.index.fmt(f)
    }
}

/// When notes that changed get their vectors while the recall index is brought in step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vectors {
    /// Before the call returns (a search a person waits for, the session's indexer).
    Now,
    /// On a background thread; the notes are found by their words meanwhile.
    Later,
}

/// Progress of bringing the recall index in step: (documents embedded, documents to embed).
pub type RecallProgress<'a> = &'a mut dyn FnMut(usize, usize);

impl Engine {
    /// The recall index, opened on first use (loading the embedding model takes a moment) and,
    /// unless this engine leaves that to its session, brought in step with the vault.
    pub fn recall(&self) -> Result<&RecallIndex> {
        self.recall_with(Vectors::Now)
    }

    /// [`Self::recall`], bringing the index in step with `vectors` for the notes that changed.
    fn recall_with(&self, vectors: Vectors) -> Result<&RecallIndex> {
        let shared = self.shared_recall()?;
        // The settings are read at every use, so a change applies to the next search.
        shared
            .index
            .set_decay_rule(crate::config::decay_rule(self.home())?);
        if self.recall_follows_reads {
            self.sync_recall_with(&mut |_, _| {}, vectors)?;
        }
        Ok(&shared.index)
    }

    /// The shared recall index, opened on first use.
    pub fn shared_recall(&self) -> Result<&Arc<SharedRecall>> {
        if let Some(r) = self.recall_index.get() {
            return Ok(r);
        }
        let mut config = RecallConfig::new(recall::default_dir(self.home().root()));
        config.model_dir =
            recall::embed::resolve_model_dir(self.model_dir(), Some(self.home().root()));
        let index = RecallIndex::open(&config, self.clock()).map_err(recall_err)?;
        // Two threads opening at once: one index wins, the other is dropped.
        let _ = self.recall_index.set(SharedRecall::new(index));
        Ok(self.recall_index.get().expect("set above"))
    }

    /// Re-indexes notes whose content changed since the recall index last saw them and drops
    /// notes that are gone or that no agent may see (broken, quarantined, holding secrets): the
    /// recall index only ever holds recallable notes, so no search, recall block or hook can
    /// return another. A note whose text is unchanged but whose trust, importance, dates or
    /// pinning changed gets its ranking facts updated (no re-embedding). Cheap when nothing
    /// changed: a comparison of hash and facts per note, no body read. The conversation log's
    /// messages, which can be millions, are not compared one by one: only those the log gained
    /// since recall was last brought in step with it are read ([`InStepReport`] counts them),
    /// unless something else changed there. Returns how many documents were re-indexed or
    /// dropped.
    pub fn sync_recall(&self, progress: RecallProgress<'_>) -> Result<usize> {
        self.sync_recall_with(progress, Vectors::Now)
    }

    /// [`Self::sync_recall`] with the changed documents searchable by their words at once and
    /// their vectors embedded in the background. Nothing when this engine has not opened the
    /// recall index: whoever opens it next brings it in step.
    pub fn sync_recall_later(&self) -> Result<usize> {
        self.sync_recall_with(&mut |_, _| {}, Vectors::Later)
    }

    fn sync_recall_with(&self, progress: RecallProgress<'_>, vectors: Vectors) -> Result<usize> {
        let Some(shared) = self.recall_index.get() else {
            return Ok(0);
        };
        let _in_step = shared.in_step.lock().unwrap_or_else(|p| p.into_inner());
        let recall = &shared.index;
        let states = self.index().note_states()?;
        // Everything recall holds but the log's messages, which can be far more: those are
        // compared by what the log gained since the last time (`log_docs`).
        let known: Known = recall
            .states_but_messages()
            .map_err(recall_err)?
            .into_iter()
            .map(|(scope, id, hash, facts)| ((scope, id), (hash, facts)))
            .collect();
        let mut keep = HashSet::new();
        let mut changed = Vec::new();
        let mut claimed = HashSet::new();
        for state in states {
            let key = (state.scope, state.id);
            if !claimed.insert(key.clone()) {
                continue; // a second file claiming the same id: the first one wins
            }
            if !state.recallable {
                continue;
            }
            keep.insert(key.clone());
            let current = known.get(&key);
            if state.hash.is_some()
                && current.is_some_and(|(h, f)| Some(h) == state.hash.as_ref() && *f == state.facts)
            {
                continue;
            }
            // Changed or new: its text, or only what ranking reads of it.
            if let Some(row) = self.index().by_path(&state.path)? {
                let mut doc = recall_doc(&row);
                doc.standing.superseded = state.facts.standing.superseded;
                if current.is_none_or(|(h, f)| *h != doc.hash.to_string() || *f != doc.facts()) {
                    changed.push(doc);
                }
            }
        }
        let mut gone: Vec<(String, String)> = known
            .keys()
            .filter(|k| !crate::said::is_said_key(&k.1) && !keep.contains(*k))
            .cloned()
            .collect();
        // The conversation log's messages, derived from the log as notes are from files.
        let log = self.log_docs(shared, &known)?;
        changed.extend(log.docs);
        gone.extend(log.gone);
        let mut touched = changed.len();
        if !changed.is_empty() {
            match vectors {
                Vectors::Now => recall.upsert_with_progress(&changed, progress),
                Vectors::Later => recall.upsert_later(&changed),
            }
            .map_err(recall_err)?;
        }
        if !gone.is_empty() {
            touched += recall.remove_all(&gone).map_err(recall_err)?;
        }
        // Only now, with recall's files committed, does the log's watermark move: a process
        // stopped before this point reads the same rows again next time.
        if let Some(state) = log.state {
            self.log_seen_now(shared, state);
            // What recall applied of the journal of changed messages is no longer needed. Only
            // housekeeping: a journal left longer is trimmed by the next pass.
            if let Some(applied) = state.journal {
                let _ = self.log()?.trim_journal(applied);
            }
        }
        *shared
            .last_in_step
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(log.report);
        Ok(touched)
    }

    /// What the last bringing in step of this process's recall index read of the log.
    pub fn last_recall_sync(&self) -> Option<InStepReport> {
        *self
            .recall_index
            .get()?
            .last_in_step
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The log's state when its rows were last brought into recall, by this process or, from
    /// the file beside the recall index, by the last one.
    fn log_seen(&self, shared: &SharedRecall) -> Option<crate::said::LogState> {
        let mut seen = shared.log_seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.is_none() {
            *seen = std::fs::read(self.log_seen_file())
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
        }
        *seen
    }

    /// Records that recall holds the log as it was in `state`.
    fn log_seen_now(&self, shared: &SharedRecall, state: crate::said::LogState) {
        let mut seen = shared.log_seen.lock().unwrap_or_else(|p| p.into_inner());
        if *seen != Some(state) {
            *seen = Some(state);
            if let Ok(bytes) = serde_json::to_vec(&state) {
                // Only a hint: without it the next process compares the whole log once.
                let _ = crate::fsx::write_atomic(&self.log_seen_file(), &bytes);
            }
        }
    }

    fn log_seen_file(&self) -> std::path::PathBuf {
        recall::default_dir(self.home().root()).join("log-state.json")
    }

    /// The log's recallable messages and derived items (facts, summaries) and working memory
    /// that recall lacks (or holds with other text or facts), and what recall holds that the
    /// log no longer has. Reads only what the log gained since the last time (its watermark,
    /// [`crate::said::LogState`]) while the counts show nothing else changed; else every row
    /// of the table that changed otherwise, compared with everything recall holds of it.
    fn log_docs(&self, shared: &SharedRecall, known: &Known) -> Result<LogChanges> {
        let recall = &shared.index;
        let mut out = LogChanges::default();
        if !memoria_store::log::log_path(self.home().root()).exists() {
            // No log: any document of it goes.
            out.gone = known
                .keys()
                .filter(|k| crate::said::is_said_key(&k.1))
                .cloned()
                .collect();
            if recall.message_count().map_err(recall_err)? > 0 {
                out.gone.extend(recall.message_ids().map_err(recall_err)?);
            }
            return Ok(out);
        }
        let mut log = self.log()?;
        // Working memory past its time goes first, from the log and so from recall.
        log.expire_working(self.now_ms())?;
        let state = crate::said::LogState::of(&log)?;
        let seen = self.log_seen(shared);

        // Messages: what recall holds of them is read only for the rows read.
        let mut held: Known = HashMap::new();
        let in_recall = recall.message_count().map_err(recall_err)? as i64;
        // Messages removed or changed since the watermark: the journal names them, while it
        // still holds every change since. Recall may have lost some of them already (a forget
        // takes a conversation out of it at once): the journal names those too, and the
        // counts are checked once it is applied.
        let journal = match seen {
            Some(s) if s.messages.changes != state.messages.changes => match s.journal {
                Some(after) => log.journal_after(after)?,
                None => None,
            },
            _ => None,
        };
        if let (Some(s), Some(journal)) = (seen, journal) {
            let applied = by_journal(
                &log, recall, s.messages, state, in_recall, &journal, &mut out,
            )?;
            out.report = match applied {
                Some(report) => report,
                None => every_message(&log, recall, &mut out)?,
            };
            return self.log_tables(known, &log, seen, state, out);
        }
        let read = since(
            seen.map(|s| s.messages),
            state.messages,
            in_recall,
            |after| log.recallable_after(after),
            // Every message is then walked one at a time (`every_message`), never held.
            || Ok(Vec::new()),
            |rows| {
                let keys: Vec<(String, String)> = rows
                    .iter()
                    .map(|m| (m.scope.clone(), m.key.clone()))
                    .collect();
                held = states_map(recall.states_of(&keys).map_err(recall_err)?);
                Ok(held.len())
            },
        )?;
        let (messages, all) = read.rows();
        if all {
            out.report = every_message(&log, recall, &mut out)?;
        } else {
            message_docs(&log, &messages, &held, &mut out)?;
            out.report = InStepReport {
                log_messages: messages.len(),
                message_states: held.len(),
                ..InStepReport::default()
            };
        }
        self.log_tables(known, &log, seen, state, out)
    }

    /// [`Self::log_docs`] for the derived items and working memory, which recall holds every
    /// one of in memory; `out` has the messages' changes.
    fn log_tables(
        &self,
        known: &Known,
        log: &memoria_store::log::Log,
        seen: Option<crate::said::LogState>,
        state: crate::said::LogState,
        mut out: LogChanges,
    ) -> Result<LogChanges> {
        let held = held_of(known, memoria_store::log::is_derived_key);
        let read = since(
            seen.map(|s| s.derived),
            state.derived,
            held.len() as i64,
            |after| log.recallable_derived_after(after),
            || log.recallable_derived_after(0),
            |rows| Ok(count_held(&held, rows.iter().map(|d| (&d.scope, &d.key)))),
        )?;
        let (items, all) = read.rows();
        if all {
            out.drop_missing(
                items.iter().map(|d| (d.scope.as_str(), d.key.as_str())),
                &held,
            );
        }
        for d in &items {
            out.take(crate::said::derived_doc(d), &held);
        }

        let held = held_of(known, memoria_store::log::is_working_key);
        let read = since(
            seen.map(|s| s.working),
            state.working,
            held.len() as i64,
            |after| log.working_after(after),
            || log.working_after(0),
            |rows| Ok(count_held(&held, rows.iter().map(|b| (&b.scope, &b.key)))),
        )?;
        let (blocks, all) = read.rows();
        if all {
            out.drop_missing(
                blocks.iter().map(|b| (b.scope.as_str(), b.key.as_str())),
                &held,
            );
        }
        for b in &blocks {
            out.take(crate::said::working_doc(b), &held);
        }
        out.state = Some(state);
        Ok(out)
    }

    /// Counts an opening of a note in the recall index's usage (this machine's, never
    /// synced): it reinforces the note's importance and brings it back from the archive. The
    /// recall index's own file is updated when this engine has not opened it.
    pub fn record_recall_use(&self, scope: &str, id: &str) -> Result<()> {
        let key = (scope.to_owned(), id.to_owned());
        match self.recall_index.get() {
            Some(shared) => shared.index.record_access(&[key]),
            None => recall::store::DocStore::record_access_at(
                &recall::default_dir(self.home().root()).join("docs.sqlite"),
                &[recall::store::doc_key(scope, id)],
                self.now_ms(),
            ),
        }
        .map_err(recall_err)
    }

    /// Hybrid search over the visible scopes.
    pub fn hybrid_search(&self, query: &str, mut opts: SearchOptions) -> Result<Vec<recall::Hit>> {
        if query.trim().is_empty() {
            return Err(Error::Invalid(
                "the search query is empty: give some words to look for".into(),
            ));
        }
        opts.visible_scopes = Some(self.visible_scopes().iter().map(|s| s.key()).collect());
        let mut hits = match self.recall()?.search(query, &opts) {
            Ok(hits) => hits,
            Err(recall::Error::EmptyQuery) => return Ok(Vec::new()),
            Err(e) => return Err(recall_err(e)),
        };
        if hits.iter().any(|h| crate::said::is_said_key(&h.id)) {
            crate::said::rank_messages(&*self.log()?, query, self.now_ms(), &mut hits)?;
        }
        Ok(hits)
    }

    /// The recall block for one agent turn. It never waits for the model to embed notes that
    /// changed: they take part by their words until their vectors are done in the background.
    pub fn recall_block(
        &self,
        message: &str,
        budget_chars: Option<usize>,
        window_tokens: Option<usize>,
    ) -> Result<RecallBlock> {
        self.recall_block_with(message, budget_chars, window_tokens, false)
    }

    /// [`Self::recall_block`], with archived notes recalled too when `include_archived` (a
    /// note recalled that way is used, so it leaves the archive).
    pub fn recall_block_with(
        &self,
        message: &str,
        budget_chars: Option<usize>,
        window_tokens: Option<usize>,
        include_archived: bool,
    ) -> Result<RecallBlock> {
        let opts = RecallOptions {
            visible_scopes: Some(self.visible_scopes().iter().map(|s| s.key()).collect()),
            budget_chars,
            window_tokens,
            include_archived,
        };
        self.recall_with(Vectors::Later)?
            .recall_block(message, &opts)
            .map_err(recall_err)
    }
}

/// Makes the documents of `messages` that recall lacks or holds otherwise (`held`), each
/// message read with the one before it: from `messages`, else from the log.
fn message_docs(
    log: &memoria_store::log::Log,
    messages: &[memoria_store::log::LogMessage],
    held: &Known,
    out: &mut LogChanges,
) -> Result<()> {
    let by_place: HashMap<(&str, &str, i64), &memoria_store::log::LogMessage> = messages
        .iter()
        .map(|m| ((m.scope.as_str(), m.conversation.as_str(), m.seq), m))
        .collect();
    for m in messages {
        let before = log.before(&m.scope, &m.conversation, m.seq)?;
        let previous = before.as_ref().map(|b| {
            by_place
                .get(&(b.scope.as_str(), b.conversation.as_str(), b.seq))
                .copied()
                .unwrap_or(b)
        });
        out.take(crate::said::message_doc(m, previous), held);
    }
    Ok(())
}

/// Brings recall's messages in step by the journal of changed messages (`journal`, every
/// row since the watermark `seen`) and the messages added since: each message the journal
/// names is made again from the log as it is now, or goes from recall when the log no
/// longer has it recallable. Recall is only changed otherwise by the in-step passes and by
/// what the log removed (journaled too), so recall is in step once these are applied; `None`
/// when recall's count, so changed, would not be the log's (`now`): then something else
/// changed and every message must be compared.
fn by_journal(
    log: &memoria_store::log::Log,
    recall: &RecallIndex,
    seen: TableState,
    now: crate::said::LogState,
    in_recall: i64,
    journal: &[memoria_store::log::MessageChange],
    out: &mut LogChanges,
) -> Result<Option<InStepReport>> {
    let mut named: HashSet<(String, String)> = HashSet::new();
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut present = Vec::new();
    let mut absent = Vec::new();
    for change in journal {
        let key = (change.scope.clone(), change.key.clone());
        if !named.insert(key.clone()) {
            continue;
        }
        match log.get(&change.key)? {
            Some(m) if m.scope == change.scope && !m.held_back() => present.push(m),
            _ => absent.push(key.clone()),
        }
        keys.push(key);
    }
    let journal_messages = keys.len();
    for m in log.recallable_after(seen.last)? {
        let key = (m.scope.clone(), m.key.clone());
        if named.insert(key.clone()) {
            keys.push(key);
            present.push(m);
        }
    }
    let held = states_map(recall.states_of(&keys).map_err(recall_err)?);
    if in_recall - held.len() as i64 + present.len() as i64 != now.messages.count {
        return Ok(None);
    }
    out.gone
        .extend(absent.into_iter().filter(|k| held.contains_key(k)));
    message_docs(log, &present, &held, out)?;
    Ok(Some(InStepReport {
        log_messages: present.len(),
        message_states: held.len(),
        journal_messages,
        all_messages: false,
    }))
}

/// Messages whose states are looked up in recall at a time while every message is compared.
const COMPARED_AT_ONCE: usize = 1_000;

/// Compares every recallable message of the log with recall without holding either side:
/// each message's document is made with the message before it in its conversation, as the
/// log is walked in conversation order, and compared with recall's state of it, looked up a
/// batch at a time; what recall holds that the log no longer has is found by walking both
/// sides' keys in order.
fn every_message(
    log: &memoria_store::log::Log,
    recall: &RecallIndex,
    out: &mut LogChanges,
) -> Result<InStepReport> {
    let ids = recall.message_ids().map_err(recall_err)?;
    let mut next = 0;
    log.for_each_recallable_key(|scope, key| {
        while next < ids.len() && ids[next].1.as_str() < key {
            out.gone.push(ids[next].clone());
            next += 1;
        }
        while next < ids.len() && ids[next].1 == key {
            if ids[next].0 != scope {
                out.gone.push(ids[next].clone());
            }
            next += 1;
        }
    })?;
    out.gone.extend(ids[next..].iter().cloned());

    let mut read = 0;
    let mut batch: Vec<RecallDoc> = Vec::with_capacity(COMPARED_AT_ONCE);
    let compare = |batch: &mut Vec<RecallDoc>, out: &mut LogChanges| -> Result<()> {
        let keys: Vec<(String, String)> = batch
            .iter()
            .map(|d| (d.scope.clone(), d.id.clone()))
            .collect();
        let held = states_map(recall.states_of(&keys).map_err(recall_err)?);
        for doc in batch.drain(..) {
            out.take(doc, &held);
        }
        Ok(())
    };
    // The message before each one: the last of its conversation at an earlier place.
    let mut last: Option<memoria_store::log::LogMessage> = None;
    let mut before: Option<memoria_store::log::LogMessage> = None;
    log.for_each_message(|m| {
        let same = last
            .as_ref()
            .is_some_and(|l| l.scope == m.scope && l.conversation == m.conversation);
        if !same {
            before = None;
        } else if last.as_ref().is_some_and(|l| l.seq != m.seq) {
            before = last.take();
        }
        if !m.held_back() {
            read += 1;
            batch.push(crate::said::message_doc(&m, before.as_ref()));
            if batch.len() >= COMPARED_AT_ONCE {
                compare(&mut batch, out)?;
            }
        }
        last = Some(m);
        Ok(())
    })?;
    compare(&mut batch, out)?;
    Ok(InStepReport {
        log_messages: read,
        message_states: ids.len(),
        journal_messages: 0,
        all_messages: true,
    })
}

/// What recall holds of some documents: (`scope`, `id`) → (content hash, ranking facts).
type Known = HashMap<(String, String), (String, recall::RankFacts)>;

fn states_map(states: Vec<recall::DocState>) -> Known {
    states
        .into_iter()
        .map(|(scope, id, hash, facts)| ((scope, id), (hash, facts)))
        .collect()
}

/// What `known` holds of the documents whose ids `is` names.
fn held_of(known: &Known, is: fn(&str) -> bool) -> Known {
    known
        .iter()
        .filter(|(k, _)| is(&k.1))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// How many of `keys` (`scope`, `id`) `held` holds.
fn count_held<'a>(held: &Known, keys: impl Iterator<Item = (&'a String, &'a String)>) -> usize {
    keys.filter(|(s, id)| held.contains_key(&((*s).clone(), (*id).clone())))
        .count()
}

/// What bringing the recall index in step read of the conversation log: counters that show
/// the work follows what changed, not how long the log is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InStepReport {
    /// Messages read from the log.
    pub log_messages: usize,
    /// Indexed messages whose state was compared with the log's.
    pub message_states: usize,
    /// Messages the journal of removed or changed messages named (each made again from the
    /// log, or dropped).
    pub journal_messages: usize,
    /// Every message was compared: no watermark to go by (the first time in a home, or the
    /// journal of changed messages no longer reaching back to it, or recall's count not the
    /// log's).
    pub all_messages: bool,
}

/// What the log changed in recall: documents to (re)index, documents to drop, and the log's
/// state they bring recall to.
#[derive(Default)]
struct LogChanges {
    docs: Vec<RecallDoc>,
    gone: Vec<(String, String)>,
    state: Option<crate::said::LogState>,
    report: InStepReport,
}

impl LogChanges {
    /// Takes `doc` when recall lacks it or holds it with other text or facts (`held`: what
    /// recall holds of its table, or of the rows read).
    fn take(&mut self, doc: RecallDoc, held: &Known) {
        let current = held.get(&(doc.scope.clone(), doc.id.clone()));
        if current.is_none_or(|(h, f)| *h != doc.hash.to_string() || *f != doc.facts()) {
            self.docs.push(doc);
        }
    }

    /// Every row of a table was read (`rows`, their scope and key): what recall holds of it
    /// (`held`) that no row has any more goes.
    fn drop_missing<'a>(&mut self, rows: impl Iterator<Item = (&'a str, &'a str)>, held: &Known) {
        let rows: HashSet<(&str, &str)> = rows.collect();
        self.gone.extend(
            held.keys()
                .filter(|(s, id)| !rows.contains(&(s.as_str(), id.as_str())))
                .cloned(),
        );
    }
}

/// The rows of one table of the log to read again.
enum Since<T> {
    /// Nothing changed.
    Unchanged,
    /// The rows added since the last time account for every change.
    Added(Vec<T>),
    /// Every row: what changed is not known.
    All(Vec<T>),
}

impl<T> Since<T> {
    /// The rows, and whether they are all of them.
    fn rows(self) -> (Vec<T>, bool) {
        match self {
            Since::Unchanged => (Vec::new(), false),
            Since::Added(rows) => (rows, false),
            Since::All(rows) => (rows, true),
        }
    }
}

/// What of one table of the log recall must read again, given the table's state when last
/// brought in (`seen`) and now (`now`) and how many of its rows recall holds (`in_recall`):
/// nothing when nothing changed; the rows added since when no row was removed or changed and
/// the count accounts for them (`held` says how many of them recall already holds); else
/// every row.
fn since<T>(
    seen: Option<TableState>,
    now: TableState,
    in_recall: i64,
    after: impl FnOnce(i64) -> Result<Vec<T>>,
    all: impl FnOnce() -> Result<Vec<T>>,
    held: impl FnOnce(&[T]) -> Result<usize>,
) -> Result<Since<T>> {
    match seen {
        Some(s) if s == now && in_recall == now.count => Ok(Since::Unchanged),
        Some(s) if s.changes == now.changes && now.last > s.last && in_recall == s.count => {
            let added = after(s.last)?;
            let new = added.len() as i64 - held(&added)? as i64;
            if s.count + new == now.count {
                Ok(Since::Added(added))
            } else {
                Ok(Since::All(all()?))
            }
        }
        _ => Ok(Since::All(all()?)),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use memoria_shared::FixedClock;
    use memoria_store::log::{NewMessage, Role};

    use super::*;
    use crate::vault::OpenOptions;

    const T0: i64 = 1_789_000_000_000;

    /// Messages a test's process keeps in memory: the others are on disk, as in a long log.
    const RESIDENT: usize = 40;

    fn engine(root: &Path) -> Engine {
        let clock = Arc::new(FixedClock::new(T0));
        let e = Engine::open(OpenOptions {
            clock: clock.clone(),
            ..OpenOptions::without_model(root.join("home"))
        })
        .unwrap();
        let mut config = RecallConfig::new(recall::default_dir(e.home().root()));
        config.model_dir = e.model_dir().map(Path::to_path_buf);
        config.resident_messages = RESIDENT;
        let index = RecallIndex::open(&config, clock).unwrap();
        e.recall_index.set(SharedRecall::new(index)).unwrap();
        e
    }

    fn said(conversation: &str, n: usize, text: &str) -> NewMessage {
        NewMessage {
            scope: "user".into(),
            conversation: conversation.into(),
            message_id: format!("m{n}"),
            seq: n as i64,
            at: Some(T0 - 86_400_000 + n as i64 * 1_000),
            role: if n.is_multiple_of(2) {
                Role::User
            } else {
                Role::Assistant
            },
            speaker: None,
            host: None,
            model: None,
            text: text.into(),
            secret: None,
            quarantined: None,
        }
    }

    /// `n` messages in conversations of 50, each with a word of its own.
    fn log_of(e: &Engine, n: usize) {
        let messages: Vec<NewMessage> = (0..n)
            .map(|i| {
                said(
                    &format!("c{}", i / 50),
                    i,
                    &format!("talk number{i} of the day"),
                )
            })
            .collect();
        e.log().unwrap().append(&messages, T0).unwrap();
    }

    fn add(e: &Engine, conversation: &str, n: usize, text: &str) {
        e.log()
            .unwrap()
            .append(&[said(conversation, n, text)], T0)
            .unwrap();
    }

    /// A fresh home with `n` messages logged ([`log_of`]) and recall brought in step with them.
    fn home_in_step(n: usize) -> (tempfile::TempDir, Engine) {
        let tmp = tempfile::tempdir().unwrap();
        let e = engine(tmp.path());
        log_of(&e, n);
        in_step(&e);
        (tmp, e)
    }

    fn in_step(e: &Engine) -> InStepReport {
        e.sync_recall(&mut |_, _| {}).unwrap();
        e.last_recall_sync().unwrap()
    }

    /// The log's message keys recall finds by `word`.
    fn found(e: &Engine, word: &str) -> Vec<String> {
        let opts = SearchOptions {
            mode: recall::Mode::Bm25,
            ..SearchOptions::default()
        };
        let hits = e.recall().unwrap().search(word, &opts).unwrap();
        hits.into_iter()
            .filter(|h| crate::said::is_message_key(&h.id))
            .map(|h| h.id)
            .collect()
    }

    fn messages_in_recall(e: &Engine) -> usize {
        e.shared_recall().unwrap().index.message_count().unwrap()
    }

    #[test]
    fn since_reads_what_was_added_only_while_nothing_else_changed() {
        let at = |count, last, changes| TableState {
            count,
            last,
            changes,
        };
        let read = |seen, now, in_recall, held: usize| {
            since(
                seen,
                now,
                in_recall,
                |after| Ok(vec![after; 3]),
                || Ok(vec![-1]),
                |_| Ok(held),
            )
            .unwrap()
            .rows()
        };
        let seen = Some(at(10, 10, 4));
        // Nothing changed.
        assert_eq!(read(seen, at(10, 10, 4), 10, 0), (vec![], false));
        // Three added after row 10, none of them held: those three only.
        assert_eq!(read(seen, at(13, 13, 4), 10, 0), (vec![10; 3], false));
        // Three rows after 10 but the count grew by two: one is not recallable.
        assert_eq!(read(seen, at(12, 13, 4), 10, 0), (vec![-1], true));
        // One of the three was already held: the count grew by two.
        assert_eq!(read(seen, at(12, 13, 4), 10, 1), (vec![10; 3], false));
        // A row removed or changed, even with the count and the highest row as they were
        // (the newest row removed and its number given to a new one): everything.
        assert_eq!(read(seen, at(10, 10, 5), 10, 0), (vec![-1], true));
        assert_eq!(read(seen, at(11, 11, 5), 10, 0), (vec![-1], true));
        // Recall lost one, or holds one more than the watermark says: everything.
        assert_eq!(read(seen, at(13, 13, 4), 9, 0), (vec![-1], true));
        assert_eq!(read(seen, at(10, 10, 4), 11, 0), (vec![-1], true));
        // No watermark, or one ahead of the log: everything.
        assert_eq!(read(None, at(10, 10, 4), 10, 0), (vec![-1], true));
        assert_eq!(
            read(Some(at(12, 12, 4)), at(10, 10, 4), 10, 0),
            (vec![-1], true)
        );
    }

    #[test]
    fn a_message_added_to_a_long_log_is_the_only_one_read() {
        let tmp = tempfile::tempdir().unwrap();
        let e = engine(tmp.path());
        log_of(&e, 2_000);
        let first = in_step(&e);
        assert!(first.all_messages, "{first:?}");
        assert_eq!(first.log_messages, 2_000);
        assert_eq!(messages_in_recall(&e), 2_000);

        add(&e, "c0", 2_000, "the harbour meeting moved to Friday");
        let one = in_step(&e);
        assert_eq!(
            one,
            InStepReport {
                log_messages: 1,
                message_states: 0,
                journal_messages: 0,
                all_messages: false
            }
        );
        assert_eq!(found(&e, "harbour").len(), 1);
        assert_eq!(messages_in_recall(&e), 2_001);

        // Nothing new: nothing read.
        assert_eq!(in_step(&e), InStepReport::default());

        // Another process goes by the watermark the last one left beside the index.
        drop(e);
        let e = engine(tmp.path());
        add(&e, "c1", 2_001, "the lighthouse keeper called");
        let next = in_step(&e);
        assert_eq!(
            (next.log_messages, next.all_messages),
            (1, false),
            "{next:?}"
        );
        assert_eq!(found(&e, "lighthouse").len(), 1);
        assert_eq!(messages_in_recall(&e), 2_002);
    }

    #[test]
    fn the_watermark_moves_only_once_recall_has_what_it_marks() {
        let (tmp, e) = home_in_step(100);
        let watermark = recall::default_dir(&tmp.path().join("home")).join("log-state.json");
        let before = std::fs::read(&watermark).unwrap();
        add(&e, "c0", 100, "the orchard needs water");
        // Another process holds the lexical index's writer: the sync waits to commit.
        let writer = crate::fsx::FileLock::try_acquire(
            &recall::default_dir(&tmp.path().join("home")).join("lexical/.tantivy-writer.lock"),
        )
        .unwrap()
        .unwrap();
        std::thread::scope(|s| {
            let sync = s.spawn(|| in_step(&e));
            std::thread::sleep(std::time::Duration::from_millis(400));
            assert!(!sync.is_finished());
            // Recall does not hold the message yet, so the watermark has not moved.
            assert_eq!(std::fs::read(&watermark).unwrap(), before);
            drop(writer);
            let report = sync.join().unwrap();
            assert_eq!(report.log_messages, 1);
        });
        assert_ne!(std::fs::read(&watermark).unwrap(), before);
        assert_eq!(found(&e, "orchard").len(), 1);
    }

    #[test]
    fn what_the_log_loses_leaves_recall_and_a_lost_watermark_compares_everything() {
        let tmp = tempfile::tempdir().unwrap();
        let e = engine(tmp.path());
        log_of(&e, 200);
        add(&e, "gone", 1_000, "the secret recipe for plum jam");
        in_step(&e);
        assert_eq!(found(&e, "plum").len(), 1);

        // Purged from the log alone (recall not told): the journal names what went.
        e.log().unwrap().purge_conversation("user", "gone").unwrap();
        add(&e, "c0", 1_001, "the quince tree flowered");
        let report = in_step(&e);
        assert!(!report.all_messages, "{report:?}");
        // The new message took the removed one's row number: the journal names it too.
        assert_eq!((report.journal_messages, report.log_messages), (2, 1));
        assert!(found(&e, "plum").is_empty());
        assert_eq!(found(&e, "quince").len(), 1);
        assert_eq!(messages_in_recall(&e), 201);

        // Retention removes old messages: they go from recall too.
        let policy = memoria_store::log::LogPolicy {
            max_age_days: 1,
            max_total_mb: 0,
        };
        let removed = e.log().unwrap().apply(&policy, T0 + 86_400_000).unwrap();
        assert!(!removed.is_empty());
        let report = in_step(&e);
        assert!(!report.all_messages, "{report:?}");
        let left = e.log().unwrap().state().unwrap().count as usize;
        assert_eq!(messages_in_recall(&e), left);

        // Without the watermark a new process compares every message, and changes nothing.
        drop(e);
        std::fs::remove_file(recall::default_dir(&tmp.path().join("home")).join("log-state.json"))
            .unwrap();
        let e = engine(tmp.path());
        assert_eq!(e.sync_recall(&mut |_, _| {}).unwrap(), 0);
        let report = e.last_recall_sync().unwrap();
        assert!(report.all_messages);
        assert_eq!(report.message_states, left);
        assert_eq!(messages_in_recall(&e), left);
    }

    /// Compares every message with recall, as a process without a watermark does: nothing
    /// must change when the journal brought recall in step.
    fn nothing_left_to_compare(tmp: &Path) -> Engine {
        std::fs::remove_file(recall::default_dir(&tmp.join("home")).join("log-state.json"))
            .unwrap();
        let e = engine(tmp);
        assert_eq!(e.sync_recall(&mut |_, _| {}).unwrap(), 0);
        assert!(e.last_recall_sync().unwrap().all_messages);
        e
    }

    #[test]
    fn a_forgotten_conversation_leaves_recall_by_the_journal() {
        let tmp = tempfile::tempdir().unwrap();
        let e = engine(tmp.path());
        log_of(&e, 2_000);
        in_step(&e);
        assert_eq!(
            found(&e, "number170").len(),
            2,
            "its own, and the next one's context"
        );
        // As a forget does: from the log, then from recall at once.
        let gone = e.log().unwrap().purge_conversation("user", "c3").unwrap();
        assert_eq!(gone.len(), 50);
        e.forget_messages("user", &gone).unwrap();
        assert_eq!(messages_in_recall(&e), 1_950);
        let report = in_step(&e);
        assert_eq!(
            report,
            InStepReport {
                log_messages: 0,
                message_states: 0,
                journal_messages: 50,
                all_messages: false
            }
        );
        assert!(found(&e, "number170").is_empty());
        assert_eq!(found(&e, "number200").len(), 2);
        assert_eq!(messages_in_recall(&e), 1_950);
        // Applied, the journal is trimmed: nothing is read again.
        assert_eq!(e.log().unwrap().journal_after(0).unwrap(), None);
        assert_eq!(in_step(&e), InStepReport::default());
        drop(e);
        nothing_left_to_compare(tmp.path());
    }

    #[test]
    fn a_retention_removal_within_a_conversation_makes_the_next_message_again() {
        let (tmp, e) = home_in_step(300);
        // Messages 0 to 124 are older than a day: two conversations and half of the third.
        let policy = memoria_store::log::LogPolicy {
            max_age_days: 1,
            max_total_mb: 0,
        };
        let removed = e.log().unwrap().apply(&policy, T0 + 125_000).unwrap();
        assert_eq!(removed.len(), 125);
        let report = in_step(&e);
        assert!(!report.all_messages, "{report:?}");
        // Each removed message, and the one after each as the context of the next place.
        assert_eq!(report.journal_messages, 126, "{report:?}");
        // The first message left had the removed one before it: its document is made again.
        assert_eq!(report.log_messages, 1, "{report:?}");
        assert_eq!(messages_in_recall(&e), 175);
        assert!(found(&e, "number124").is_empty());
        assert_eq!(found(&e, "number125").len(), 1);
        drop(e);
        nothing_left_to_compare(tmp.path());
    }

    #[test]
    fn a_quarantine_and_its_release_are_applied_by_the_journal() {
        let (tmp, e) = home_in_step(500);
        let key = |n: usize| {
            memoria_store::log::message_key("user", &format!("c{}", n / 50), &format!("m{n}"))
        };
        let record = memoria_store::log::QuarantineRecord {
            id: "q1".into(),
            created_at: T0,
            released_at: None,
            selection: serde_json::json!({}),
            counts: serde_json::json!({}),
            notes: serde_json::json!([]),
            released: None,
        };
        e.log()
            .unwrap()
            .quarantine(&record, &[key(210)], &[])
            .unwrap();
        let report = in_step(&e);
        assert_eq!(
            (
                report.all_messages,
                report.journal_messages,
                report.log_messages
            ),
            (false, 2, 1),
            "the message marked, and the one after it, made without it: {report:?}"
        );
        assert!(found(&e, "number210").is_empty());
        assert_eq!(messages_in_recall(&e), 499);
        e.log()
            .unwrap()
            .release_quarantine("q1", T0, &serde_json::json!({}))
            .unwrap();
        let report = in_step(&e);
        assert_eq!(
            (
                report.all_messages,
                report.journal_messages,
                report.log_messages
            ),
            (false, 2, 2),
            "{report:?}"
        );
        assert_eq!(found(&e, "number210").len(), 2);
        assert_eq!(messages_in_recall(&e), 500);
        drop(e);
        nothing_left_to_compare(tmp.path());
    }

    #[test]
    fn a_journal_trimmed_past_the_watermark_compares_every_message() {
        let (_tmp, e) = home_in_step(300);
        e.log().unwrap().purge_conversation("user", "c2").unwrap();
        // Trimmed before recall applied it, as a cap on its length would.
        {
            let log = e.log().unwrap();
            let last = log.journal_last().unwrap();
            log.trim_journal(last).unwrap();
            assert_eq!(log.journal_after(last - 1).unwrap(), None);
        }
        let report = in_step(&e);
        assert!(report.all_messages, "{report:?}");
        assert!(found(&e, "number120").is_empty());
        assert_eq!(messages_in_recall(&e), 250);
        // A new change after it is applied by the journal again.
        e.log().unwrap().purge_conversation("user", "c3").unwrap();
        let report = in_step(&e);
        assert_eq!((report.all_messages, report.journal_messages), (false, 50));
        assert_eq!(messages_in_recall(&e), 200);
    }

    #[test]
    fn a_log_that_is_gone_takes_its_messages_out_of_recall() {
        let (tmp, e) = home_in_step(100);
        assert_eq!(messages_in_recall(&e), 100);
        drop(e);
        let log = memoria_store::log::log_path(&tmp.path().join("home"));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", log.display()));
        }
        let e = engine(tmp.path());
        assert_eq!(e.sync_recall(&mut |_, _| {}).unwrap(), 100);
        assert_eq!(messages_in_recall(&e), 0);
    }

    #[test]
    fn every_message_compared_makes_the_documents_reading_them_as_added_made() {
        let (tmp, e) = home_in_step(120);
        // Added a few at a time: each read with the one before it from the log, one held
        // back among them (the message after it is read without it).
        for n in 120..130 {
            let mut m = said("c2", n, &format!("later word{n}"));
            if n == 124 {
                m.quarantined = Some("override".into());
            }
            e.log().unwrap().append(&[m], T0).unwrap();
            assert!(!in_step(&e).all_messages);
        }
        // Compared all at once, walking the log: every document is the same.
        drop(e);
        std::fs::remove_file(recall::default_dir(&tmp.path().join("home")).join("log-state.json"))
            .unwrap();
        let e = engine(tmp.path());
        assert_eq!(e.sync_recall(&mut |_, _| {}).unwrap(), 0);
        let report = e.last_recall_sync().unwrap();
        assert_eq!((report.log_messages, report.all_messages), (129, true));
        assert_eq!(messages_in_recall(&e), 129);
    }

    #[test]
    fn a_note_typed_as_a_message_is_kept_apart_from_the_log_s_messages() {
        let tmp = tempfile::tempdir().unwrap();
        let mut e = engine(tmp.path());
        log_of(&e, 200);
        std::fs::create_dir_all(tmp.path().join("home/memory/user")).unwrap();
        std::fs::write(
            tmp.path().join("home/memory/user/postcard.md"),
            "---\nid: postcard\nsummary: A postcard from Porto\ntype: message\n---\nGreetings from Porto.\n",
        )
        .unwrap();
        e.rescan_scope(&crate::project::Scope::User).unwrap();
        in_step(&e);
        assert_eq!(messages_in_recall(&e), 200);
        // Newer than every message: the note is evicted from memory with the older messages.
        add(&e, "c0", 200, "the ferry leaves at noon");
        let report = in_step(&e);
        assert_eq!((report.log_messages, report.all_messages), (1, false));
        assert_eq!(messages_in_recall(&e), 201);
        // Still a note: it stays while the log changes, and goes with its file.
        assert!(
            e.recall()
                .unwrap()
                .get("user", "postcard")
                .unwrap()
                .is_some()
        );
        std::fs::remove_file(tmp.path().join("home/memory/user/postcard.md")).unwrap();
        e.rescan_scope(&crate::project::Scope::User).unwrap();
        let report = in_step(&e);
        assert!(!report.all_messages);
        assert!(
            e.recall()
                .unwrap()
                .get("user", "postcard")
                .unwrap()
                .is_none()
        );
        assert_eq!(messages_in_recall(&e), 201);
    }
}
