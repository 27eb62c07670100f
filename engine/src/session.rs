//! A long-running session: what `memoria watch`, `memoria mcp` and the desktop shell each start
//! once. It owns the engine that writes, the file watcher, the sync coordinator and the
//! recall index, and publishes [`Event`]s to any number of subscribers.
//!
//! Reads never wait behind a write. The session keeps two engines over the same home: the
//! writer, behind a mutex ([`Session::write`], [`Session::writer`]), and a read engine shared
//! by [`Reads`] handles, whose methods take `&self` and hold its SQLite connection for one
//! statement at a time. SQLite runs in WAL mode, so the reader's connection never waits for the
//! writer's transactions, and an import holding the writer for minutes does not touch it. Both
//! engines share one recall index (the model is loaded once): tantivy readers are concurrent,
//! and the read engine never brings the recall index in step itself, so a search never embeds;
//! the session's indexer thread does that after every change the watcher sees or the writer
//! makes. The model loads on a thread of its own; searches are lexical until it is in.
//!
//! A subscriber that does not keep up loses events, never blocks the session: each has a
//! bounded queue, and an event that finds it full is dropped for that subscriber alone.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::import::{self, ImportReport};
use crate::index::ListedNote;
use crate::project::Scope;
use crate::recall::{self, Hit, RecallConfig, RecallIndex, SearchOptions};
use crate::search::SharedRecall;
use crate::sync::coordinator::Coordinator;
use crate::sync::{PassReport, SyncNotifier};
use crate::vault::{Engine, NoteView, OpenOptions, ScopeChoice};
use crate::watch::{self, NoteChange, WatchEvent, WatchHandle};

/// Events a subscriber keeps queued before newer ones are dropped for it.
pub const SUBSCRIBER_QUEUE: usize = 4096;

/// How to start a [`Session`].
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The home, project and model the session's engines open.
    pub open: OpenOptions,
    /// Watch the visible scopes' folders, so edits by any program arrive as events.
    pub watch: bool,
    /// Run the sync coordinator (it sends nothing while sync is not configured or is off).
    pub sync: bool,
    /// A sync token given by the environment, used instead of the keychain's.
    pub sync_token: Option<String>,
    /// Run the daily consolidation pass ([`crate::api::hygiene::consolidate_if_due`]) on a
    /// thread of its own: after start, then again whenever the next falls due while the
    /// session stays up, at most once a day on this machine, never in the way of start-up or
    /// of the session's reads and writes. A pass that changed notes is published as
    /// [`Event::Consolidated`]. Off unless the front end turns it on: the pass rewrites notes
    /// (their status) and adds consolidated ones. With a chat model configured the same pass
    /// promotes the facts ready for it (`memoria_capture::promote::promote_auto`).
    /// [`Session::set_consolidation`] turns it on or off while the session runs.
    pub consolidate: bool,
}

impl SessionOptions {
    /// A session over `open` that watches and syncs.
    pub fn new(open: OpenOptions) -> SessionOptions {
        SessionOptions {
            open,
            watch: true,
            sync: true,
            sync_token: None,
            consolidate: false,
        }
    }
}

/// What a progress event counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum IndexTask {
    /// Files read by an import.
    Import,
    /// Files read by an index rebuild.
    Rebuild,
    /// Notes given vectors (new or changed notes, or every note after a model change).
    Embedding,
}

/// What a session tells its subscribers. Serialized as `{"kind": "noteAdded", ...}`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Event {
    /// A note file appeared in a watched scope (written here or by any other program).
    NoteAdded { scope: String, id: String },
    /// A note file of a watched scope changed.
    NoteChanged { scope: String, id: String },
    /// A note file of a watched scope went away.
    NoteRemoved { scope: String, id: String },
    /// The index of `scope` was brought in step with its folder, which differed by this many
    /// files (one event per watcher batch; the notes' own events come before it).
    Rescanned {
        scope: String,
        added: usize,
        updated: usize,
        removed: usize,
    },
    /// Work with a known size advanced: `done` of `total`.
    IndexProgress {
        task: IndexTask,
        done: usize,
        total: usize,
    },
    /// The embedding model is loaded; hybrid search uses it from now on.
    ModelLoaded { model_id: String },
    /// No model could be loaded: recall runs on the hash embedder, and this says why.
    ModelFallback { reason: String },
    /// A sync pass over `scope` started.
    SyncStarted { scope: String },
    /// A sync pass over `scope` ended: its report, or the error that stopped it.
    SyncFinished {
        scope: String,
        report: Option<PassReport>,
        error: Option<String>,
    },
    /// A sync pass found a note both sides changed in ways that do not merge.
    ConflictAppeared { scope: String, id: String },
    /// A consolidation pass folded notes: `folded` consolidated notes written or rewritten,
    /// `notes` originals marked `consolidated` (each backed up, none deleted). What it did is
    /// in [`crate::api::hygiene::last_consolidation`].
    Consolidated {
        at: i64,
        folded: usize,
        notes: usize,
    },
    /// Something other than a sync pass failed in the background (the session goes on).
    Error {
        scope: Option<String>,
        message: String,
    },
}

/// The subscribers' queues, and the model's state, which every subscriber is told first (it
/// is usually settled before anyone could subscribe).
#[derive(Debug, Default)]
struct Bus {
    state: Mutex<BusState>,
}

#[derive(Debug, Default)]
struct BusState {
    subscribers: Vec<SyncSender<Event>>,
    model: Option<Event>,
}

impl Bus {
    fn subscribe(&self) -> Receiver<Event> {
        let (tx, rx) = std::sync::mpsc::sync_channel(SUBSCRIBER_QUEUE);
        let mut st = lock(&self.state);
        if let Some(model) = &st.model {
            let _ = tx.try_send(model.clone());
        }
        st.subscribers.push(tx);
        rx
    }

    fn publish(&self, event: Event) {
        let mut st = lock(&self.state);
        if matches!(
            event,
            Event::ModelLoaded { .. } | Event::ModelFallback { .. }
        ) {
            st.model = Some(event.clone());
        }
        st.subscribers.retain(|s| match s.try_send(event.clone()) {
            Ok(()) | Err(TrySendError::Full(_)) => true,
            Err(TrySendError::Disconnected(_)) => false,
        });
    }
}

/// Publishes events to a session's subscribers, for work done outside the session's own
/// calls (an API function reporting a rebuild's progress, say). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Publisher(Arc<Bus>);

impl Publisher {
    pub fn publish(&self, event: Event) {
        self.0.publish(event);
    }

    /// A progress callback for `task` that publishes at most about a hundred events for the
    /// whole run, and always the last one.
    pub fn progress(&self, task: IndexTask) -> impl FnMut(usize, usize) + Send + 'static {
        let bus = self.0.clone();
        let mut last = None;
        move |done, total| {
            let step = (total / 100).max(1);
            let bucket = done / step;
            if done == total || last != Some(bucket) {
                last = Some(bucket);
                bus.publish(Event::IndexProgress { task, done, total });
            }
        }
    }
}

/// A cheap handle for reads from any thread: list, show and search never wait for the
/// session's writes, its model load or its indexing.
#[derive(Debug, Clone)]
pub struct Reads {
    engine: Arc<Engine>,
}

impl Reads {
    /// Notes of the visible scopes (or one of them); see [`Engine::list`].
    pub fn list(
        &self,
        scope: Option<&Scope>,
        note_type: Option<&str>,
        tag: Option<&str>,
    ) -> Result<Vec<ListedNote>> {
        self.engine.list(scope, note_type, tag)
    }

    /// One note with its content and backlinks; see [`Engine::show`].
    pub fn show(&self, id: &str, scope: Option<&Scope>) -> Result<NoteView> {
        self.engine.show(id, scope)
    }

    /// Hybrid (or BM25-only, by `opts.mode`) search of the visible scopes. While the model
    /// loads, hybrid search is lexical.
    pub fn search(&self, query: &str, opts: SearchOptions) -> Result<Vec<Hit>> {
        self.engine.hybrid_search(query, opts)
    }

    /// The read engine itself, for other `&self` reads.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
}

/// Wakes the indexer thread.
#[derive(Debug, Default)]
struct Kick {
    state: Mutex<(bool, bool)>, // (work waiting, stop)
    wake: Condvar,
}

impl Kick {
    fn kick(&self) {
        lock(&self.state).0 = true;
        self.wake.notify_all();
    }

    fn stop(&self) {
        lock(&self.state).1 = true;
        self.wake.notify_all();
    }

    /// Waits for a kick or for `timeout`: `Some(true)` when kicked, `Some(false)` when the
    /// time ran out, `None` once stopping.
    fn wait_or_time_out(&self, timeout: std::time::Duration) -> Option<bool> {
        let st = lock(&self.state);
        let (mut st, _) = self
            .wake
            .wait_timeout_while(st, timeout, |st| !st.0 && !st.1)
            .unwrap_or_else(|p| p.into_inner());
        let kicked = std::mem::take(&mut st.0);
        (!st.1).then_some(kicked)
    }

    /// Waits for a kick or for `timeout`, whichever comes first; false once stopping.
    fn wait_for(&self, timeout: std::time::Duration) -> bool {
        let st = lock(&self.state);
        let (mut st, _) = self
            .wake
            .wait_timeout_while(st, timeout, |st| !st.0 && !st.1)
            .unwrap_or_else(|p| p.into_inner());
        st.0 = false;
        !st.1
    }
}

/// How often the indexer looks at the conversation log for what other programs captured.
const LOG_POLL: std::time::Duration = std::time::Duration::from_secs(3);

/// The longest the consolidation thread sleeps before it reads the clock again: a machine
/// that was suspended past the due time catches up within this long of waking.
const CONSOLIDATION_RECHECK: std::time::Duration = std::time::Duration::from_secs(600);

/// A running session; dropping it (or [`Session::shutdown`]) stops its threads.
pub struct Session {
    // Dropped in this order: sync first (it cancels a request in flight), then the watcher,
    // then the threads of the session itself.
    sync: Option<Coordinator>,
    watch: Option<WatchHandle>,
    notifier: SyncNotifier,
    writer: Arc<Mutex<Engine>>,
    reads: Reads,
    recall: Arc<SharedRecall>,
    bus: Arc<Bus>,
    kick: Arc<Kick>,
    indexer: Option<JoinHandle<()>>,
    model: Option<JoinHandle<()>>,
    /// Stops the model-capture thread (see [`model_capture_loop`]).
    model_capture: Arc<Kick>,
    /// What the consolidation thread opens its engine with.
    open: OpenOptions,
    /// The daily consolidation while it is on.
    consolidation: Mutex<Option<Consolidation>>,
}

/// The daily consolidation's thread and what wakes or stops it.
struct Consolidation {
    thread: JoinHandle<()>,
    kick: Arc<Kick>,
}

impl Consolidation {
    // An engine of its own, so the pass holds neither the writer nor the readers; what it
    // writes reaches the session as the watcher's events. The thread runs a pass when it
    // starts, then sleeps until the next one falls due (waking to read the clock again now
    // and then, and at once when it is stopped).
    fn start(open: &OpenOptions, bus: &Arc<Bus>) -> Result<Consolidation> {
        let kick = Arc::new(Kick::default());
        let (open, bus, stop) = (open.clone(), bus.clone(), kick.clone());
        let thread = std::thread::Builder::new()
            .name("memoria-consolidate".into())
            .spawn(move || consolidation_loop(&open, &bus, &stop))
            .map_err(|e| Error::Invalid(format!("cannot start the consolidation thread: {e}")))?;
        Ok(Consolidation { thread, kick })
    }

    /// Stops the thread; a pass in progress finishes first.
    fn stop(self) {
        self.kick.stop();
        let _ = self.thread.join();
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("watched", &self.watched())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Opens the engines, starts the watcher and the sync coordinator (as asked), the indexer
    /// and the model load; returns once reads can be served.
    pub fn start(options: SessionOptions) -> Result<Session> {
        Self::start_on(options, Arc::new(Bus::default()))
    }

    /// [`Session::start`], with a subscriber that sees every event from the start (the first
    /// sync pass, the model load), which one subscribed after `start` returns may miss.
    pub fn start_subscribed(options: SessionOptions) -> Result<(Session, Receiver<Event>)> {
        let bus = Arc::new(Bus::default());
        let events = bus.subscribe();
        Ok((Self::start_on(options, bus)?, events))
    }

    fn start_on(options: SessionOptions, bus: Arc<Bus>) -> Result<Session> {
        let mut writer = Engine::open(options.open.clone())?;
        let mut config = RecallConfig::new(recall::default_dir(writer.home().root()));
        config.model_dir =
            recall::embed::resolve_model_dir(writer.model_dir(), Some(writer.home().root()));
        let index = RecallIndex::open_without_model(&config, writer.clock())
            .map_err(|e| Error::Invalid(format!("opening the search index failed: {e}")))?;
        let shared = SharedRecall::new(index);
        writer.recall_index = shared_slot(&shared);
        let kick = Arc::new(Kick::default());

        let sync = if options.sync {
            let (started, finished) = (bus.clone(), bus.clone());
            Some(Coordinator::for_process_with(
                options.open.clone(),
                options.sync_token.clone(),
                Box::new(move |scope| {
                    started.publish(Event::SyncStarted { scope: scope.key() });
                }),
                Box::new(move |scope, result| publish_pass(&finished, scope, result)),
            )?)
        } else {
            None
        };
        let notifier = sync.as_ref().map(Coordinator::notifier).unwrap_or_default();

        let watch = if options.watch {
            let (bus, kick, notify) = (bus.clone(), kick.clone(), notifier.clone());
            Some(watch::start_with_events(
                &writer,
                move |event| match event {
                    WatchEvent::Note { scope, id, change } => {
                        notify.local_write(&scope);
                        kick.kick();
                        let scope = scope.key();
                        bus.publish(match change {
                            NoteChange::Added => Event::NoteAdded { scope, id },
                            NoteChange::Changed => Event::NoteChanged { scope, id },
                            NoteChange::Removed => Event::NoteRemoved { scope, id },
                        });
                    }
                    WatchEvent::Rescanned { scope, stats } => {
                        kick.kick();
                        bus.publish(Event::Rescanned {
                            scope: scope.key(),
                            added: stats.added,
                            updated: stats.updated,
                            removed: stats.removed,
                        });
                    }
                    WatchEvent::Failed { scope, message } => bus.publish(Event::Error {
                        scope: Some(scope.key()),
                        message,
                    }),
                },
            )?)
        } else {
            None
        };

        // Opened after the watcher took its locks, so it skips the start-up scan the writer ran.
        let mut reader = Engine::open(options.open.clone())?;
        reader.recall_index = shared_slot(&shared);
        reader.recall_follows_reads = false;
        let reads = Reads {
            engine: Arc::new(reader),
        };

        let progress = Publisher(bus.clone()).progress(IndexTask::Embedding);
        shared.index.on_reembed_progress(Box::new(progress));
        let indexer = {
            let (reads, bus, kick) = (reads.clone(), bus.clone(), kick.clone());
            std::thread::Builder::new()
                .name("memoria-index".into())
                .spawn(move || {
                    let mut progress = Publisher(bus.clone()).progress(IndexTask::Embedding);
                    loop {
                        let log_seen = reads.engine.log_state().ok().flatten();
                        if let Err(e) = reads.engine.sync_recall(&mut progress) {
                            bus.publish(Event::Error {
                                scope: None,
                                message: e.to_string(),
                            });
                        }
                        // Conversations another program captured (a hook, the CLI) come in
                        // within a poll: no watcher sees the log.
                        loop {
                            match kick.wait_or_time_out(LOG_POLL) {
                                None => return,
                                Some(true) => break,
                                Some(false) => {
                                    if reads.engine.log_state().ok().flatten() != log_seen {
                                        break;
                                    }
                                }
                            }
                        }
                    }
                })
                .map_err(|e| Error::Invalid(format!("cannot start the indexing thread: {e}")))?
        };
        let model = {
            let (shared, bus, kick) = (shared.clone(), bus.clone(), kick.clone());
            let (dir, threads) = (config.model_dir.clone(), config.threads);
            std::thread::Builder::new()
                .name("memoria-model".into())
                .spawn(move || {
                    let (embedder, choice) = recall::embed::load(dir.as_deref(), threads);
                    let event = match (choice.kind, &choice.fallback_reason) {
                        ("hash", reason) => Event::ModelFallback {
                            reason: reason.clone().unwrap_or_else(|| "no model".into()),
                        },
                        _ => Event::ModelLoaded {
                            model_id: choice.model_id.clone(),
                        },
                    };
                    match shared.index.install_embedder(embedder, choice) {
                        Ok(()) => bus.publish(event),
                        Err(e) => bus.publish(Event::Error {
                            scope: None,
                            message: format!("loading the embedding model failed: {e}"),
                        }),
                    }
                    kick.kick();
                })
                .map_err(|e| Error::Invalid(format!("cannot start the model thread: {e}")))?
        };

        let consolidation = if options.consolidate {
            Some(Consolidation::start(&options.open, &bus)?)
        } else {
            None
        };
        let model_capture = Arc::new(Kick::default());
        {
            let (open, bus, stop) = (options.open.clone(), bus.clone(), model_capture.clone());
            std::thread::Builder::new()
                .name("memoria-model-capture".into())
                .spawn(move || model_capture_loop(&open, &bus, &stop))
                .map_err(|e| {
                    Error::Invalid(format!("cannot start the model-capture thread: {e}"))
                })?;
        }

        Ok(Session {
            sync,
            watch,
            notifier,
            writer: Arc::new(Mutex::new(writer)),
            reads,
            recall: shared,
            bus,
            kick,
            indexer: Some(indexer),
            model: Some(model),
            model_capture,
            open: options.open,
            consolidation: Mutex::new(consolidation),
        })
    }

    /// Has the daily consolidation (when the session runs it) read the clock again now, so a
    /// pass that fell due runs without waiting for the thread's next look: for a host that
    /// knows the time jumped (the machine resumed from sleep), and for tests that move their
    /// clock.
    pub fn check_consolidation(&self) {
        if let Some(c) = lock(&self.consolidation).as_ref() {
            c.kick.kick();
        }
    }

    /// Turns the daily consolidation on or off (a session starts as
    /// [`SessionOptions::consolidate`] says). Turned on, it runs a pass at once if one is due;
    /// turned off, it returns once a pass in progress has finished, and none starts after.
    pub fn set_consolidation(&self, on: bool) -> Result<()> {
        let mut slot = lock(&self.consolidation);
        match (on, slot.is_some()) {
            (true, false) => *slot = Some(Consolidation::start(&self.open, &self.bus)?),
            (false, true) => slot.take().into_iter().for_each(Consolidation::stop),
            _ => {}
        }
        Ok(())
    }

    /// Whether the daily consolidation is on.
    pub fn consolidates(&self) -> bool {
        lock(&self.consolidation).is_some()
    }

    /// A new subscriber: the model's state if it is settled (loaded or fallen back), then every
    /// event from now on, until the receiver is dropped. A receiver that falls
    /// [`SUBSCRIBER_QUEUE`] events behind misses the newest ones.
    pub fn subscribe(&self) -> Receiver<Event> {
        self.bus.subscribe()
    }

    /// Publishes events to this session's subscribers.
    pub fn publisher(&self) -> Publisher {
        Publisher(self.bus.clone())
    }

    /// The handle for reads (cheap to clone, usable from any thread).
    pub fn reads(&self) -> Reads {
        self.reads.clone()
    }

    /// The engine that writes, shared with hosts that serve calls of their own (the MCP
    /// server). Prefer [`Session::write`], which also brings search in step.
    pub fn writer(&self) -> Arc<Mutex<Engine>> {
        self.writer.clone()
    }

    /// Runs `f` on the writing engine; when it returns, searches on [`Reads`] see what it
    /// wrote (the recall index is brought in step on the caller's thread).
    pub fn write<T>(&self, f: impl FnOnce(&mut Engine) -> Result<T>) -> Result<T> {
        let result = f(&mut lock(&self.writer));
        let mut progress = self.publisher().progress(IndexTask::Embedding);
        self.reads.engine.sync_recall(&mut progress)?;
        self.kick.kick();
        result
    }

    /// Imports a folder of Markdown files into one scope, publishing its progress.
    pub fn import(&self, dir: &Path, scope: Option<ScopeChoice>) -> Result<ImportReport> {
        let mut progress = self.publisher().progress(IndexTask::Import);
        self.write(|e| import::import(e, dir, scope, &mut |done, total, _| progress(done, total)))
    }

    /// Tells the sync coordinator about local activity (a no-op when the session does not
    /// sync).
    pub fn sync_notifier(&self) -> SyncNotifier {
        self.notifier.clone()
    }

    /// The scopes and folders being watched (none when the session does not watch).
    pub fn watched(&self) -> &[(Scope, PathBuf)] {
        self.watch.as_ref().map_or(&[], |w| w.scopes())
    }

    /// Blocks until the model load has finished and the vectors it needs are computed (for
    /// tests and benchmarks that measure with the model in).
    pub fn wait_for_model(&mut self) {
        if let Some(t) = self.model.take() {
            let _ = t.join();
        }
        self.recall.index.wait_for_vectors();
    }

    /// Stops the session: sync (a request in flight is abandoned), the watcher, the indexer
    /// and the model load end before this returns.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        drop(self.sync.take());
        drop(self.watch.take());
        self.kick.stop();
        // Not waited for: a question to the model may take long; a turn it leaves running is
        // taken up again by the next process (`log::STALE_MS`).
        self.model_capture.stop();
        let consolidation = lock(&self.consolidation).take();
        if let Some(c) = &consolidation {
            c.kick.stop();
        }
        for t in [self.indexer.take(), self.model.take()]
            .into_iter()
            .flatten()
        {
            let _ = t.join();
        }
        consolidation.into_iter().for_each(Consolidation::stop);
    }
}

/// Model capture in the background: the turns any door queued (MCP's `memory_log`, the app,
/// a hook whose own run has not taken them yet) are asked about here, on an engine of its own,
/// so neither the writer nor the readers wait for the model. The ledger is looked at every
/// poll; a failure is published as an [`Event::Error`] and the rows it could not settle stay
/// pending.
fn model_capture_loop(open: &OpenOptions, bus: &Bus, stop: &Kick) {
    let root = match crate::home::Home::resolve(open.home.as_deref()) {
        Ok(h) => h.root().to_path_buf(),
        Err(_) => return,
    };
    while stop.wait_for(LOG_POLL) {
        if !crate::api::conversations::model_captures_waiting(&root, open.project_dir.as_deref())
            .unwrap_or(false)
        {
            continue;
        }
        let run = || -> Result<()> {
            let mut engine = Engine::open(open.clone())?;
            crate::api::conversations::run_model_captures(&mut engine)?;
            Ok(())
        };
        if let Err(e) = run() {
            bus.publish(Event::Error {
                scope: None,
                message: format!("model capture failed: {e}"),
            });
        }
    }
}

/// The daily consolidation: a pass when one is due, then a sleep until the next is, until
/// `kick` stops. A pass that changed notes is published as [`Event::Consolidated`]; one that
/// failed, as an [`Event::Error`] (and is tried again when the next falls due).
fn consolidation_loop(open: &OpenOptions, bus: &Bus, kick: &Kick) {
    use crate::api::hygiene;
    loop {
        let pass = || -> Result<i64> {
            let mut engine = Engine::open(open.clone())?;
            if hygiene::consolidate_if_due(&mut engine, &Default::default())?.is_some() {
                if let Some(last) = hygiene::last_consolidation(&engine)?
                    && last.changed_anything()
                {
                    bus.publish(Event::Consolidated {
                        at: last.at,
                        folded: last.folded.len(),
                        notes: last.folded.iter().map(|f| f.sources.len()).sum(),
                    });
                }
                promote_daily(&mut engine, bus);
            }
            hygiene::consolidation_due_at(&engine)
        };
        let due = match pass() {
            Ok(due) => due,
            Err(e) => {
                bus.publish(Event::Error {
                    scope: None,
                    message: format!("the daily consolidation failed: {e}"),
                });
                open.clock.now_ms() + crate::hygiene::consolidate::INTERVAL_MS
            }
        };
        loop {
            let left = due - open.clock.now_ms();
            if left <= 0 {
                break;
            }
            let wait = CONSOLIDATION_RECHECK.min(std::time::Duration::from_millis(left as u64));
            if !kick.wait_for(wait) {
                return;
            }
        }
    }
}

/// The daily pass's promotion: with a chat model configured, the facts ready for promotion
/// are phrased by it and written ([`crate::api::conversations::promote_auto`]), each
/// published as [`Event::NoteAdded`]; without one nothing happens. A fact whose answer was
/// refused stays proposed (its reason is logged there); a failure is an [`Event::Error`] and
/// does not stop the consolidation's schedule.
fn promote_daily(engine: &mut Engine, bus: &Bus) {
    match crate::api::conversations::promote_auto(engine, None) {
        Ok(run) => {
            for p in run.promoted {
                bus.publish(Event::NoteAdded {
                    scope: p.scope,
                    id: p.id,
                });
            }
        }
        Err(e) => bus.publish(Event::Error {
            scope: None,
            message: format!("the daily promotion of facts failed: {e}"),
        }),
    }
}

/// A recall slot holding `shared`, for one of the session's engines.
fn shared_slot(shared: &Arc<SharedRecall>) -> std::sync::OnceLock<Arc<SharedRecall>> {
    let slot = std::sync::OnceLock::new();
    let _ = slot.set(shared.clone());
    slot
}

fn publish_pass(bus: &Bus, scope: &Scope, result: &crate::sync::SyncResult<PassReport>) {
    let key = scope.key();
    match result {
        Ok(report) => {
            for id in &report.new_conflicts {
                bus.publish(Event::ConflictAppeared {
                    scope: key.clone(),
                    id: id.clone(),
                });
            }
            bus.publish(Event::SyncFinished {
                scope: key,
                report: Some(report.clone()),
                error: None,
            });
        }
        // The pass's error is in its own event, not repeated as an `Error`.
        Err(e) => bus.publish(Event::SyncFinished {
            scope: key,
            report: None,
            error: Some(e.to_string()),
        }),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_serialize_with_their_kind_and_camel_case_fields() {
        let e = Event::ModelLoaded {
            model_id: "e5".into(),
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"kind": "modelLoaded", "modelId": "e5"})
        );
        let e = Event::IndexProgress {
            task: IndexTask::Import,
            done: 1,
            total: 2,
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"kind": "indexProgress", "task": "import", "done": 1, "total": 2})
        );
    }

    #[test]
    fn a_full_or_dropped_subscriber_never_blocks_the_others() {
        let bus = Bus::default();
        let slow = bus.subscribe();
        let gone = bus.subscribe();
        drop(gone);
        let live = bus.subscribe();
        for i in 0..SUBSCRIBER_QUEUE + 10 {
            bus.publish(Event::NoteAdded {
                scope: "user".into(),
                id: format!("n{i}"),
            });
            // The live subscriber keeps up.
            assert!(live.try_recv().is_ok());
        }
        assert_eq!(
            lock(&bus.state).subscribers.len(),
            2,
            "the dropped one is gone"
        );
        assert_eq!(slow.try_iter().count(), SUBSCRIBER_QUEUE);
    }

    #[test]
    fn progress_is_published_in_about_a_hundred_steps_and_always_at_the_end() {
        let bus = Arc::new(Bus::default());
        let rx = bus.subscribe();
        let mut p = Publisher(bus).progress(IndexTask::Embedding);
        for done in 0..=5000 {
            p(done, 5000);
        }
        let events: Vec<Event> = rx.try_iter().collect();
        assert!(events.len() <= 102, "{}", events.len());
        assert_eq!(
            events.last(),
            Some(&Event::IndexProgress {
                task: IndexTask::Embedding,
                done: 5000,
                total: 5000
            })
        );
    }
}
