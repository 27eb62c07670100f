//! Hybrid search over the vault: the bridge between the vault's SQLite index (which files
//! exist, their hashes) and the recall index (BM25 + vectors). Before every search the recall
//! index is brought in step with the vault — only notes whose content hash changed are
//! re-indexed — so edits from other processes, the watcher or an editor are always seen.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use memoria_shared::ContentHash;

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
}

impl SharedRecall {
    pub fn new(index: RecallIndex) -> Arc<SharedRecall> {
        Arc::new(SharedRecall {
            index,
            in_step: Mutex::new(()),
            log_seen: Mutex::new(None),
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
    /// changed: a comparison of hash and facts per note, no body read. Returns how
    /// many documents were re-indexed or dropped.
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
        let known: std::collections::HashMap<(String, String), (String, recall::RankFacts)> =
            recall
                .indexed_states()
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
        // The conversation log's messages, derived from the log as notes are from files.
        changed.extend(self.log_docs(shared, &known, &mut keep)?);
        let mut touched = changed.len();
        if !changed.is_empty() {
            match vectors {
                Vectors::Now => recall.upsert_with_progress(&changed, progress),
                Vectors::Later => recall.upsert_later(&changed),
            }
            .map_err(recall_err)?;
        }
        if known.keys().any(|k| !keep.contains(k)) {
            touched += recall.retain(&keep).map_err(recall_err)?;
        }
        Ok(touched)
    }

    /// The log's recallable messages and derived items (facts, summaries) recall lacks (or
    /// holds with other text or facts), and every such key to keep in `keep`. Reads only what
    /// the log gained since the last call, unless something was removed or the recall index
    /// lost some.
    fn log_docs(
        &self,
        shared: &SharedRecall,
        known: &std::collections::HashMap<(String, String), (String, recall::RankFacts)>,
        keep: &mut HashSet<(String, String)>,
    ) -> Result<Vec<RecallDoc>> {
        if !memoria_store::log::log_path(self.home().root()).exists() {
            return Ok(Vec::new()); // no log: any message document goes
        }
        let mut log = self.log()?;
        // Working memory past its time goes first, from the log and so from recall.
        log.expire_working(self.now_ms())?;
        let state = crate::said::LogState {
            messages: log.state()?,
            derived: log.derived_state()?,
            working: log.working_state()?,
        };
        let mut seen = shared.log_seen.lock().unwrap_or_else(|p| p.into_inner());
        // What the last process to bring the log in saw, so a new process (each CLI command)
        // reads only what is new.
        let seen_file = recall::default_dir(self.home().root()).join("log-state.json");
        if seen.is_none() {
            *seen = std::fs::read(&seen_file)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
        }
        let in_recall = |is: fn(&str) -> bool| -> Vec<&(String, String)> {
            known.keys().filter(|(_, id)| is(id)).collect()
        };
        let mut docs = Vec::new();
        let mut push = |doc: RecallDoc, keep: &mut HashSet<(String, String)>| {
            keep.insert((doc.scope.clone(), doc.id.clone()));
            let current = known.get(&(doc.scope.clone(), doc.id.clone()));
            if current.is_none_or(|(h, f)| *h != doc.hash.to_string() || *f != doc.facts()) {
                docs.push(doc);
            }
        };

        let held = in_recall(crate::said::is_message_key);
        let messages = since(
            seen.map(|s| s.messages),
            state.messages,
            &held,
            |after| log.recallable_after(after),
            || log.recallable(),
            |m| m.key.as_str(),
        )?;
        if messages.len() as i64 != state.messages.0 {
            keep.extend(held.into_iter().cloned());
        }
        // Each message is read with the one before it: from this batch, else from the log.
        let by_place: std::collections::HashMap<
            (&str, &str, i64),
            &memoria_store::log::LogMessage,
        > = messages
            .iter()
            .map(|m| ((m.scope.as_str(), m.conversation.as_str(), m.seq), m))
            .collect();
        for m in &messages {
            let before = log.before(&m.scope, &m.conversation, m.seq)?;
            let previous = before.as_ref().map(|b| {
                by_place
                    .get(&(b.scope.as_str(), b.conversation.as_str(), b.seq))
                    .copied()
                    .unwrap_or(b)
            });
            push(crate::said::message_doc(m, previous), keep);
        }

        let held = in_recall(memoria_store::log::is_derived_key);
        let items = since(
            seen.map(|s| s.derived),
            state.derived,
            &held,
            |after| log.recallable_derived_after(after),
            || log.recallable_derived_after(0),
            |d| d.key.as_str(),
        )?;
        if items.len() as i64 != state.derived.0 {
            keep.extend(held.into_iter().cloned());
        }
        for d in &items {
            push(crate::said::derived_doc(d), keep);
        }

        let held = in_recall(memoria_store::log::is_working_key);
        let blocks = since(
            seen.map(|s| s.working),
            state.working,
            &held,
            |after| log.working_after(after),
            || log.working_after(0),
            |b| b.key.as_str(),
        )?;
        if blocks.len() as i64 != state.working.0 {
            keep.extend(held.into_iter().cloned());
        }
        for b in &blocks {
            push(crate::said::working_doc(b), keep);
        }

        if *seen != Some(state) {
            *seen = Some(state);
            if let Ok(bytes) = serde_json::to_vec(&state) {
                // Only a hint: without it the next process reads the whole log once.
                let _ = crate::fsx::write_atomic(&seen_file, &bytes);
            }
        }
        Ok(docs)
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

/// What of one table of the log recall must read again, given the table's state when last
/// read (`seen`) and now (`now`, each a count and the highest row number) and the keys recall
/// holds of it: nothing when nothing changed; the rows added since when that accounts for
/// every change (a row rewritten under a key recall holds adds nothing to the count); else
/// every row.
fn since<T>(
    seen: Option<(i64, i64)>,
    now: (i64, i64),
    held: &[&(String, String)],
    after: impl FnOnce(i64) -> Result<Vec<T>>,
    all: impl FnOnce() -> Result<Vec<T>>,
    key: impl Fn(&T) -> &str,
) -> Result<Vec<T>> {
    let in_recall = held.len() as i64;
    match seen {
        Some(s) if s == now && in_recall == now.0 => Ok(Vec::new()),
        Some((count, max)) if now.1 > max && in_recall == count => {
            let added = after(max)?;
            let held: HashSet<&str> = held.iter().map(|(_, id)| id.as_str()).collect();
            let new = added.iter().filter(|t| !held.contains(key(t))).count() as i64;
            if count + new == now.0 {
                Ok(added)
            } else {
                all()
            }
        }
        _ => all(),
    }
}
