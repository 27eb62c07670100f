//! The coordinator: one per long-running process (`memoria watch`, `memoria mcp`, the desktop
//! app), for all of its synced scopes. A thread drives the pure [`Schedule`] with the injected
//! clock: it takes signals (a local write, a project scope in use, "sync now"), runs the passes
//! that are due one at a time, and sleeps until the next one is due.
//!
//! It sends nothing while sync is not configured or is off: it re-reads the settings at every
//! wake (at least every [`SETTINGS_CHECK_MS`]), so `memoria sync on` or a sign-in in another
//! process resumes it within seconds. A pass's failure never reaches the host process: it goes
//! to the scope's status (`memoria sync status`, naming the scope) and to the `on_pass`
//! callback. Passes run on an engine of the coordinator's own, so a slow server never holds up
//! the host's calls.
//!
//! [`Driver`] is the loop's body over injected time (tested deterministically below);
//! [`Coordinator`] is the thread around it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use memoria_shared::Clock;

use super::base::{ScopeDir, running_lock};
use super::error::{SyncError, SyncResult};
use super::reconcile::{PassReport, Syncer};
use super::schedule::{PassOutcome, Schedule};
use super::settings::{Settings, sync_dir};
use crate::home::Home;
use crate::project::Scope;
use crate::vault::{Engine, OpenOptions};
use memoria_store::error::{Error, ErrorCode, Result};

/// The longest an idle coordinator goes without re-reading the settings.
pub const SETTINGS_CHECK_MS: i64 = 2_000;

/// How long past its next poll a process holds a scope's poll lease: its poll may start a
/// little late (a pass of another scope, a slow server), and another process takes over only
/// once it is clearly not coming.
pub const LEASE_GRACE_MS: i64 = 30_000;

/// How long a process's recorded next pass of a scope holds without being renewed; a running
/// process renews it when half of it is left, so one that was killed drops out of `sync status`
/// within this time.
pub const NEXT_PASS_HOLD_MS: i64 = 10 * 60_000;

/// What the host tells the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Signal {
    Write(String),
    Used(String),
    Now,
}

#[derive(Debug, Default)]
struct InboxState {
    signals: Vec<Signal>,
    stop: bool,
}

/// Signals waiting for the coordinator's thread.
#[derive(Debug, Default)]
struct Inbox {
    state: Mutex<InboxState>,
    wake: Condvar,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, s: Signal) {
        self.lock().signals.push(s);
        self.wake.notify_all();
    }

    fn stop(&self) {
        self.lock().stop = true;
        self.wake.notify_all();
    }

    /// The signals so far, and whether to stop.
    fn take(&self) -> (Vec<Signal>, bool) {
        let mut st = self.lock();
        (std::mem::take(&mut st.signals), st.stop)
    }

    /// Sleeps up to `timeout`, or until a signal arrives.
    fn wait(&self, timeout: Duration) {
        let st = self.lock();
        if st.signals.is_empty() && !st.stop {
            let _ = self.wake.wait_timeout(st, timeout);
        }
    }
}

/// What the host holds to tell the coordinator about local activity; a no-op without one
/// (`SyncNotifier::default()`), so hosts never branch on whether sync runs.
#[derive(Debug, Clone, Default)]
pub struct SyncNotifier(Option<Arc<Inbox>>);

impl SyncNotifier {
    fn send(&self, s: Signal) {
        if let Some(inbox) = &self.0 {
            inbox.push(s);
        }
    }

    /// A note of `scope` was written or removed here: upload it in ~3 s (bursts coalesce).
    pub fn local_write(&self, scope: &Scope) {
        self.send(Signal::Write(scope.key()));
    }

    /// `scope` is in use (a search, an agent session): project scopes sync while in use.
    pub fn scope_used(&self, scope: &Scope) {
        self.send(Signal::Used(scope.key()));
    }

    /// Sync every active scope at once.
    pub fn sync_now(&self) {
        self.send(Signal::Now);
    }
}

/// Runs one pass. The real one ([`EngineRunner`]) syncs a scope of its own engine; tests
/// count passes and make them fail.
pub trait PassRunner: Send {
    /// One pass over `scope`: its result and the requests it sent.
    fn run(&mut self, scope: &Scope) -> (SyncResult<PassReport>, u64);
    /// A pass while another process on the home polls `scope`: only what changed here needs
    /// sending (nothing at all when nothing did).
    fn run_deferred(&mut self, scope: &Scope) -> (SyncResult<PassReport>, u64) {
        self.run(scope)
    }
    /// The settings changed (signed in again, another server): drop cached connections.
    fn reset(&mut self) {}
    /// A flag that, once set, makes the pass in flight stop at its next check (the process is
    /// stopping).
    fn cancel_flag(&self) -> Option<Arc<AtomicBool>> {
        None
    }
}

/// How a pass ended, as the schedule sees it.
pub fn outcome_of(result: &SyncResult<PassReport>) -> PassOutcome {
    match result {
        Ok(r) if r.changed() => PassOutcome::Changed,
        Ok(_) => PassOutcome::Unchanged,
        Err(e) => match e.retry_after_s() {
            Some(seconds) => PassOutcome::RetryAfter { seconds },
            None if e.is_permanent() => PassOutcome::Permanent,
            None => PassOutcome::Transient,
        },
    }
}

/// The part of the settings that decides whether the coordinator may send anything.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Gate {
    on: bool,
    server: Option<String>,
    /// Scopes turned off on this machine: never passed; turning one on again syncs at once.
    off_scopes: std::collections::BTreeSet<String>,
}

impl Gate {
    fn read(dir: &Path) -> Gate {
        // An unreadable settings file counts as "off": nothing is sent until it is fixed.
        let s = Settings::load(dir).unwrap_or_default();
        Gate {
            on: s.is_on(),
            server: s.server,
            off_scopes: s.off_scopes,
        }
    }

    fn open(&self) -> bool {
        self.on && self.server.is_some()
    }
}

/// What [`Driver::step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Ran a pass; step again.
    Ran,
    /// Nothing due: step again at this time (ms), or when a signal arrives.
    Idle { until: i64 },
}

/// Called after every pass (from the coordinator's thread).
pub type OnPass = Box<dyn FnMut(&Scope, &SyncResult<PassReport>) + Send>;

/// Called as every pass starts (from the coordinator's thread).
pub type OnStart = Box<dyn FnMut(&Scope) + Send>;

/// The coordinator's loop body over injected time: signals in, one due pass per step.
pub struct Driver<R> {
    schedule: Schedule,
    runner: R,
    scopes: BTreeMap<String, Scope>,
    dir: PathBuf,
    gate: Option<Gate>,
    clock: Arc<dyn Clock>,
    on_start: Option<OnStart>,
    on_pass: OnPass,
    /// This driver's name in poll leases.
    lease_id: String,
    /// Each scope's next pass as last recorded for `sync status`, and when that record lapses.
    recorded: BTreeMap<String, (Option<i64>, i64)>,
    /// Held while this driver exists: what tells `sync status` that its records are alive.
    running: Option<crate::fsx::FileLock>,
}

impl<R> std::fmt::Debug for Driver<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("schedule", &self.schedule)
            .field("scopes", &self.scopes.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<R: PassRunner> Driver<R> {
    /// A driver for `scopes` (domain scopes are left out: they never sync) of the home at
    /// `home_root`; every scope's first pass is due at once.
    pub fn new(
        home_root: &Path,
        scopes: Vec<Scope>,
        runner: R,
        clock: Arc<dyn Clock>,
        on_pass: OnPass,
    ) -> Driver<R> {
        let now = clock.now_ms();
        let mut schedule = Schedule::new();
        let mut by_key = BTreeMap::new();
        for s in scopes {
            if matches!(s, Scope::Domain(_)) {
                continue;
            }
            schedule.add_scope(&s.key(), matches!(s, Scope::Project(_)), now);
            by_key.insert(s.key(), s);
        }
        let dir = sync_dir(home_root);
        let lease_id = format!("{}-{}", std::process::id(), crate::fsx::random_hex(4));
        // Without the lock, `sync status` takes this process for stopped: nothing else fails.
        let running = crate::fsx::FileLock::try_acquire(&running_lock(&dir, &lease_id))
            .ok()
            .flatten();
        Driver {
            schedule,
            runner,
            scopes: by_key,
            dir,
            gate: None,
            clock,
            on_start: None,
            on_pass,
            lease_id,
            recorded: BTreeMap::new(),
            running,
        }
    }

    /// Gives up every poll lease this driver holds and removes its next passes from the
    /// record (the process is stopping).
    fn release_leases(&self) {
        let now = self.clock.now_ms();
        for key in self.scopes.keys() {
            let sd = ScopeDir::new(&self.dir, key);
            sd.poll_lease().release(&self.lease_id);
            let _ = sd.next_passes().record(&self.lease_id, None, now);
        }
    }

    /// Records when each scope is tried next, for `sync status`: a scope whose next pass
    /// changed, or whose record would lapse soon while this process runs. Nothing is recorded
    /// while sync is off or not signed in (no pass is coming).
    fn record_next_passes(&mut self, now: i64, open: bool) {
        for key in self.scopes.keys() {
            let at = match open {
                true => self.schedule.next_attempt(key, now),
                false => None,
            };
            let fresh = self
                .recorded
                .get(key)
                .is_some_and(|&(was, lapses)| was == at && lapses - now > NEXT_PASS_HOLD_MS / 2);
            if fresh || (!open && !self.recorded.contains_key(key)) {
                continue;
            }
            let sd = ScopeDir::new(&self.dir, key);
            let entry = open.then_some(super::base::ScheduledPass {
                at_ms: at,
                alive_until_ms: now + NEXT_PASS_HOLD_MS,
            });
            if sd.next_passes().record(&self.lease_id, entry, now).is_ok() {
                match open {
                    true => self
                        .recorded
                        .insert(key.clone(), (at, now + NEXT_PASS_HOLD_MS)),
                    false => self.recorded.remove(key),
                };
            }
        }
    }

    /// Tells `on_start` about every pass as it starts.
    pub fn with_on_start(mut self, on_start: OnStart) -> Driver<R> {
        self.on_start = Some(on_start);
        self
    }

    fn signal(&mut self, s: Signal) {
        let now = self.clock.now_ms();
        match s {
            Signal::Write(key) => self.schedule.local_write(&key, now),
            Signal::Used(key) => self.schedule.project_used(&key, now),
            Signal::Now => self.schedule.sync_now(now),
        }
    }

    /// Runs the next due pass, if sync is on and one is due; else says when to look again.
    pub fn step(&mut self) -> Step {
        let now = self.clock.now_ms();
        let gate = Gate::read(&self.dir);
        if self.gate.as_ref() != Some(&gate) {
            if self.gate.is_some() && gate.open() {
                // Turned on, or signed in (again): sync at once.
                self.schedule.sync_now(now);
            }
            self.runner.reset();
            self.gate = Some(gate.clone());
        }
        let recheck = now + SETTINGS_CHECK_MS;
        self.record_next_passes(now, gate.open());
        if !gate.open() {
            return Step::Idle { until: recheck };
        }
        let Some(key) = self.schedule.due(now).into_iter().next() else {
            let until = self
                .schedule
                .next_wake(now)
                .map_or(recheck, |t| t.min(recheck));
            return Step::Idle { until };
        };
        let scope = self.scopes[&key].clone();
        if gate.off_scopes.contains(&key) {
            // No pass, no event: the scope waits until it is turned on (a gate change).
            self.schedule.done(&key, PassOutcome::Permanent, now);
            return Step::Ran;
        }
        if let Some(f) = self.on_start.as_mut() {
            f(&scope);
        }
        let lease = ScopeDir::new(&self.dir, &key).poll_lease();
        let polled_elsewhere = lease.holder(now).is_some_and(|l| l.holder != self.lease_id);
        let (result, requests) = self.run_guarded(&scope, polled_elsewhere);
        let after = self.clock.now_ms();
        self.schedule.record_requests(requests, after);
        self.schedule.done(&key, outcome_of(&result), after);
        if !polled_elsewhere {
            // This process polls the scope for the home until a little after its next poll.
            match self.schedule.next_poll(&key, after) {
                Some(next) if result.is_ok() => {
                    let _ = lease.hold(&self.lease_id, next + LEASE_GRACE_MS);
                }
                _ => lease.release(&self.lease_id),
            }
        }
        (self.on_pass)(&scope, &result);
        Step::Ran
    }

    /// Runs a pass; a panic in it (a bug) becomes an error in the scope's status, and the
    /// coordinator — and its host — go on.
    fn run_guarded(&mut self, scope: &Scope, deferred: bool) -> (SyncResult<PassReport>, u64) {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match deferred {
            true => self.runner.run_deferred(scope),
            false => self.runner.run(scope),
        }));
        run.unwrap_or_else(|panic| {
            self.runner.reset();
            let why = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic")
                .to_owned();
            let e = SyncError::Internal(why);
            let _ = ScopeDir::new(&self.dir, &scope.key())
                .update_status(|st| st.last_error = Some(format!("{}: {e}", scope.key())));
            (Err(e), 0)
        })
    }
}

impl<R> Drop for Driver<R> {
    fn drop(&mut self) {
        if self.running.take().is_some() {
            let _ = std::fs::remove_file(running_lock(&self.dir, &self.lease_id));
        }
    }
}

/// A running coordinator; dropping it stops its thread (cancelling a request in flight).
pub struct Coordinator {
    inbox: Arc<Inbox>,
    cancel: Option<Arc<AtomicBool>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator").finish_non_exhaustive()
    }
}

impl Coordinator {
    /// Runs `driver` on a thread of its own.
    pub fn start<R: PassRunner + 'static>(mut driver: Driver<R>) -> Result<Coordinator> {
        let inbox = Arc::new(Inbox::default());
        let cancel = driver.runner.cancel_flag();
        let thread_inbox = inbox.clone();
        let thread = std::thread::Builder::new()
            .name("memoria-sync".into())
            .spawn(move || {
                loop {
                    let (signals, stop) = thread_inbox.take();
                    if stop {
                        driver.release_leases();
                        return;
                    }
                    for s in signals {
                        driver.signal(s);
                    }
                    if let Step::Idle { until } = driver.step() {
                        let ms = (until - driver.clock.now_ms()).max(0) as u64;
                        thread_inbox.wait(Duration::from_millis(ms));
                    }
                }
            })
            .map_err(|e| Error::System {
                op: "start the sync thread".into(),
                reason: e.to_string(),
            })?;
        Ok(Coordinator {
            inbox,
            cancel,
            thread: Some(thread),
        })
    }

    /// The coordinator of a long-running process: every synced scope of the engine `opts`
    /// opens (the user scope, and the project's), synced by an [`EngineRunner`].
    pub fn for_process(
        opts: OpenOptions,
        env_token: Option<String>,
        on_pass: OnPass,
    ) -> Result<Coordinator> {
        Self::for_process_with(opts, env_token, Box::new(|_| {}), on_pass)
    }

    /// [`Self::for_process`], also telling `on_start` as each pass starts.
    pub fn for_process_with(
        opts: OpenOptions,
        env_token: Option<String>,
        on_start: OnStart,
        on_pass: OnPass,
    ) -> Result<Coordinator> {
        let home = Home::resolve(opts.home.as_deref())?;
        let mut scopes = vec![Scope::User];
        if let Some(dir) = &opts.project_dir
            && let Some(p) = crate::project::Project::open(&home, dir)?
        {
            scopes.insert(0, p.scope());
        }
        let clock = opts.clock.clone();
        let runner = EngineRunner::new(home.root(), opts, env_token);
        Coordinator::start(
            Driver::new(home.root(), scopes, runner, clock, on_pass).with_on_start(on_start),
        )
    }

    /// Tells this coordinator about local activity.
    pub fn notifier(&self) -> SyncNotifier {
        SyncNotifier(Some(self.inbox.clone()))
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        if let Some(c) = &self.cancel {
            c.store(true, Ordering::SeqCst);
        }
        self.inbox.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The real pass runner: an engine and a syncer of its own, both made on first use (nothing is
/// opened while sync is not configured), the syncer again after the settings change.
#[derive(Debug)]
pub struct EngineRunner {
    root: PathBuf,
    opts: OpenOptions,
    env_token: Option<String>,
    engine: Option<Engine>,
    syncer: Option<Syncer>,
    cancel: Arc<AtomicBool>,
}

impl EngineRunner {
    pub fn new(home_root: &Path, opts: OpenOptions, env_token: Option<String>) -> EngineRunner {
        EngineRunner {
            root: home_root.to_path_buf(),
            opts,
            env_token,
            engine: None,
            syncer: None,
            cancel: Arc::default(),
        }
    }

    fn prepare(&mut self) -> SyncResult<(&mut Engine, &mut Syncer)> {
        if self.engine.is_none() {
            self.engine = Some(Engine::open(self.opts.clone())?);
        }
        if self.syncer.is_none() {
            self.syncer = Some(Syncer::from_settings(
                &self.root,
                self.env_token.clone(),
                self.opts.clock.clone(),
                self.cancel.clone(),
            )?);
        }
        match (self.engine.as_mut(), self.syncer.as_mut()) {
            (Some(e), Some(s)) => Ok((e, s)),
            _ => unreachable!("both were just made"),
        }
    }
}

impl EngineRunner {
    /// Runs `pass` with the syncer, once more with a syncer made afresh when the server says
    /// the scope is encrypted and this one was made before the account key came to this
    /// machine (`sync encrypt` or `sync unlock` while this runner lives): a long-running
    /// syncer picks the key up at its next pass instead of failing until a restart.
    fn with_fresh_key(
        &mut self,
        scope: &Scope,
        pass: fn(&mut Self, &Scope) -> (SyncResult<PassReport>, u64),
    ) -> (SyncResult<PassReport>, u64) {
        let keyless = self.syncer.as_ref().is_some_and(|s| !s.holds_key());
        let (result, requests) = pass(self, scope);
        let locked = matches!(&result, Err(e) if e.code() == ErrorCode::E2eeLocked);
        if !(keyless && locked) {
            return (result, requests);
        }
        self.syncer = None;
        if !self.prepare().is_ok_and(|(_, s)| s.holds_key()) {
            return (result, requests);
        }
        let (again, more) = pass(self, scope);
        (again, requests + more)
    }
}

impl PassRunner for EngineRunner {
    fn run(&mut self, scope: &Scope) -> (SyncResult<PassReport>, u64) {
        self.with_fresh_key(scope, Self::run_pass)
    }

    fn run_deferred(&mut self, scope: &Scope) -> (SyncResult<PassReport>, u64) {
        self.with_fresh_key(scope, Self::run_deferred_pass)
    }

    fn reset(&mut self) {
        self.syncer = None;
    }

    fn cancel_flag(&self) -> Option<Arc<AtomicBool>> {
        Some(self.cancel.clone())
    }
}

impl EngineRunner {
    fn run_pass(&mut self, scope: &Scope) -> (SyncResult<PassReport>, u64) {
        let root = self.root.clone();
        let (engine, syncer) = match self.prepare() {
            Ok(both) => both,
            Err(e) => {
                // No pass ran to record it (no token, no keychain): record it here.
                if !matches!(
                    e,
                    SyncError::Off | SyncError::ScopeOff(_) | SyncError::NotSignedIn
                ) {
                    let _ = ScopeDir::new(&sync_dir(&root), &scope.key())
                        .update_status(|st| st.last_error = Some(format!("{}: {e}", scope.key())));
                }
                return (Err(e), 0);
            }
        };
        let before = syncer.client().traffic.snapshot().0;
        let result = syncer.sync_scope(engine, scope);
        let requests = syncer.client().traffic.snapshot().0 - before;
        (result, requests)
    }

    fn run_deferred_pass(&mut self, scope: &Scope) -> (SyncResult<PassReport>, u64) {
        let Ok((engine, syncer)) = self.prepare() else {
            return self.run_pass(scope);
        };
        let before = syncer.client().traffic.snapshot().0;
        let result = syncer.sync_scope_if_changed(engine, scope);
        let requests = syncer.client().traffic.snapshot().0 - before;
        let result = result.map(|r| {
            r.unwrap_or_else(|| PassReport {
                scope: scope.key(),
                unchanged: true,
                deferred: true,
                ..PassReport::default()
            })
        });
        (result, requests)
    }
}

#[cfg(test)]
mod tests;
