//! The driver over a fixed clock and a runner that records its passes: every timing rule as the
//! running coordinator applies it, with the real settings file deciding on/off.

use std::collections::VecDeque;
use std::sync::Mutex;

use memoria_shared::FixedClock;

use super::*;
use crate::base::DownloadCounts;

const T0: i64 = 1_800_000_000_000;
const S: i64 = 1_000;
const M: i64 = 60 * S;

/// Records `(scope, time)` of every pass and answers from a script (then "unchanged").
#[derive(Clone)]
struct Recorder {
    clock: Arc<FixedClock>,
    passes: Arc<Mutex<Vec<(String, i64)>>>,
    /// Passes deferred to another process's poll.
    deferred: Arc<Mutex<Vec<(String, i64)>>>,
    script: Arc<Mutex<VecDeque<SyncResult<PassReport>>>>,
}

impl Recorder {
    fn new(clock: Arc<FixedClock>) -> Recorder {
        Recorder {
            clock,
            passes: Arc::default(),
            deferred: Arc::default(),
            script: Arc::default(),
        }
    }
}

/// A home signed in to a server (that is never reached).
fn signed_in_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    Settings::update(&sync_dir(home.path()), |s| {
        s.enabled = Some(true);
        s.server = Some("http://sync.invalid".into());
    })
    .unwrap();
    home
}

impl PassRunner for Recorder {
    fn run(&mut self, scope: &Scope) -> (SyncResult<PassReport>, u64) {
        if matches!(
            self.script.lock().unwrap().front(),
            Some(Err(SyncError::Internal(_)))
        ) {
            self.script.lock().unwrap().pop_front();
            panic!("a bug in a pass");
        }
        self.passes
            .lock()
            .unwrap()
            .push((scope.key(), self.clock.now_ms() - T0));
        let r = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| Ok(PassReport::default()));
        (r, 1)
    }

    fn run_deferred(&mut self, scope: &Scope) -> (SyncResult<PassReport>, u64) {
        self.deferred
            .lock()
            .unwrap()
            .push((scope.key(), self.clock.now_ms() - T0));
        let report = PassReport {
            deferred: true,
            ..PassReport::default()
        };
        (Ok(report), 0)
    }
}

struct Rig {
    _home: tempfile::TempDir,
    dir: PathBuf,
    clock: Arc<FixedClock>,
    rec: Recorder,
    driver: Driver<Recorder>,
}

impl Rig {
    fn new(scopes: Vec<Scope>, signed_in: bool) -> Rig {
        let home = match signed_in {
            true => signed_in_home(),
            false => tempfile::tempdir().unwrap(),
        };
        let dir = sync_dir(home.path());
        let clock = Arc::new(FixedClock::new(T0));
        let rec = Recorder::new(clock.clone());
        let driver = Driver::new(
            home.path(),
            scopes,
            rec.clone(),
            clock.clone(),
            Box::new(|_, _| {}),
        );
        Rig {
            _home: home,
            dir,
            clock,
            rec,
            driver,
        }
    }

    /// Steps the driver, moving the clock to each wake-up, until `t` (ms after T0).
    fn run_until(&mut self, t: i64) {
        loop {
            if let Step::Idle { until } = self.driver.step() {
                let now = self.clock.now_ms();
                let next = until.max(now + 1);
                if next > T0 + t {
                    self.clock.set(T0 + t);
                    return;
                }
                self.clock.set(next);
            }
        }
    }

    fn at(&mut self, t: i64, s: Signal) {
        self.run_until(t);
        self.driver.signal(s);
    }

    /// The passes so far, and forgets them.
    fn passes(&self) -> Vec<(String, i64)> {
        std::mem::take(&mut self.rec.passes.lock().unwrap())
    }

    fn then(&self, r: SyncResult<PassReport>) {
        self.rec.script.lock().unwrap().push_back(r);
    }

    fn set_on(&self, on: bool) {
        Settings::update(&self.dir, |s| s.enabled = Some(on)).unwrap();
    }
}

fn changed() -> SyncResult<PassReport> {
    Ok(PassReport {
        uploaded: 1,
        ..PassReport::default()
    })
}

fn user(t: i64) -> (String, i64) {
    ("user".into(), t)
}

#[test]
fn nothing_runs_until_signed_in_and_on_then_at_once() {
    let mut r = Rig::new(vec![Scope::User], false);
    r.at(10 * S, Signal::Write("user".into()));
    r.at(20 * S, Signal::Now);
    r.run_until(10 * M);
    assert!(r.passes().is_empty(), "not signed in: nothing runs");

    Settings::update(&r.dir, |s| {
        s.server = Some("http://sync.invalid".into());
        s.enabled = Some(false);
    })
    .unwrap();
    r.at(11 * M, Signal::Now);
    r.run_until(20 * M);
    assert!(
        r.passes().is_empty(),
        "off: nothing runs, not even sync now"
    );

    r.set_on(true);
    r.run_until(20 * M + 30 * S);
    let p = r.passes();
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].1 - 20 * M <= SETTINGS_CHECK_MS,
        "turning on syncs at once: {p:?}"
    );
}

#[test]
fn a_local_write_is_uploaded_three_seconds_later_and_a_burst_is_one_pass() {
    let mut r = Rig::new(vec![Scope::User], true);
    r.run_until(S);
    assert_eq!(r.passes(), vec![user(0)], "the first pass runs at start");
    r.at(10 * S, Signal::Write("user".into()));
    r.at(11 * S, Signal::Write("user".into()));
    r.at(12 * S, Signal::Write("user".into()));
    r.run_until(12_999);
    assert!(r.passes().is_empty());
    r.run_until(30 * S);
    assert_eq!(r.passes(), vec![user(13 * S)]);
}

#[test]
fn sync_now_runs_at_once_and_polls_back_off_to_five_minutes() {
    let mut r = Rig::new(vec![Scope::User], true);
    r.run_until(18 * M);
    let times: Vec<i64> = r.passes().into_iter().map(|(_, t)| t / M).collect();
    assert_eq!(times, vec![0, 1, 3, 7, 12, 17]);
    r.at(18 * M + 7 * S, Signal::Now);
    r.run_until(18 * M + 8 * S);
    assert_eq!(r.passes(), vec![user(18 * M + 7 * S)]);
    // Something changed: back to polling every minute.
    r.then(changed());
    r.at(19 * M, Signal::Now);
    r.run_until(21 * M + S);
    assert_eq!(r.passes(), vec![user(19 * M), user(20 * M), user(21 * M)]);
}

#[test]
fn a_429_pauses_every_scope_until_retry_after_and_failures_retry_after_a_minute() {
    let project = Scope::Project("p1".into());
    let mut r = Rig::new(vec![project.clone(), Scope::User], true);
    r.then(Err(SyncError::RateLimited { retry_after_s: 90 }));
    r.run_until(S);
    assert_eq!(
        r.passes(),
        vec![("project:p1".into(), 0)],
        "the 429 held the user scope back too"
    );
    r.at(10 * S, Signal::Now);
    r.run_until(89 * S);
    assert!(r.passes().is_empty(), "sync now waits for Retry-After too");
    r.run_until(91 * S);
    assert_eq!(
        r.passes(),
        vec![("project:p1".into(), 90 * S), user(90 * S)]
    );
    r.then(Err(SyncError::Transport("connection refused".into())));
    r.run_until(151 * S);
    assert_eq!(
        r.passes(),
        vec![("project:p1".into(), 150 * S), user(150 * S)]
    );
    r.run_until(209 * S);
    assert!(r.passes().is_empty());
    r.run_until(211 * S);
    assert_eq!(
        r.passes(),
        vec![("project:p1".into(), 210 * S)],
        "the failed scope retries after a minute; the other polls on"
    );
}

#[test]
fn project_scopes_sync_only_while_in_use_and_domains_never() {
    let project = Scope::Project("p1".into());
    let mut r = Rig::new(
        vec![project.clone(), Scope::Domain("rust".into()), Scope::User],
        true,
    );
    r.run_until(45 * M);
    let project_passes: Vec<i64> = r
        .passes()
        .into_iter()
        .filter(|(k, _)| k == "project:p1")
        .map(|(_, t)| t)
        .collect();
    assert!(
        project_passes.iter().all(|t| *t < 30 * M),
        "idle after 30 minutes: {project_passes:?}"
    );
    r.at(46 * M, Signal::Used("project:p1".into()));
    r.run_until(46 * M + S);
    assert_eq!(r.passes(), vec![("project:p1".into(), 46 * M)]);
}

#[test]
fn turning_off_stops_it_and_a_permanent_error_waits_for_the_next_write() {
    let mut r = Rig::new(vec![Scope::User], true);
    r.run_until(S);
    r.passes();
    r.set_on(false);
    r.at(10 * S, Signal::Write("user".into()));
    r.run_until(20 * M);
    assert!(r.passes().is_empty(), "off: no pass");
    r.set_on(true);
    r.run_until(20 * M + 3 * S);
    assert_eq!(r.passes().len(), 1, "on again: a pass at once");

    // A permanent error (say, the scope is pinned to another account) stops polling...
    r.then(Err(SyncError::NoToken));
    r.at(20 * M + 30 * S, Signal::Now);
    r.run_until(40 * M);
    assert_eq!(r.passes(), vec![user(20 * M + 30 * S)]);
    // ...until something asks again.
    r.at(41 * M, Signal::Write("user".into()));
    r.run_until(42 * M);
    assert_eq!(r.passes(), vec![user(41 * M + 3 * S)]);
}

#[test]
fn a_panicking_pass_is_an_error_in_the_status_and_the_coordinator_goes_on() {
    let mut r = Rig::new(vec![Scope::User], true);
    r.then(Err(SyncError::Internal("scripted".into())));
    r.run_until(S);
    assert!(r.passes().is_empty(), "the pass panicked before recording");
    let st = ScopeDir::new(&r.dir, "user").load_status().unwrap();
    let e = st.last_error.unwrap();
    assert!(
        e.starts_with("user: sync stopped on an internal error (a bug in a pass)"),
        "{e}"
    );
    // Retried a minute later, like any transient failure.
    r.run_until(61 * S);
    assert_eq!(r.passes(), vec![user(60 * S)]);
}

#[test]
fn the_thread_runs_passes_on_signals_and_stops_when_dropped() {
    let home = signed_in_home();
    let rec = Recorder::new(Arc::new(FixedClock::new(T0)));
    let (tx, rx) = std::sync::mpsc::channel();
    let driver = Driver::new(
        home.path(),
        vec![Scope::User],
        rec.clone(),
        Arc::new(memoria_shared::SystemClock),
        Box::new(move |scope, r| {
            let _ = tx.send((scope.key(), r.is_ok()));
        }),
    );
    let c = Coordinator::start(driver).unwrap();
    let wait = Duration::from_secs(10);
    assert_eq!(rx.recv_timeout(wait).unwrap(), ("user".into(), true));
    c.notifier().sync_now();
    assert_eq!(rx.recv_timeout(wait).unwrap(), ("user".into(), true));
    let t = std::time::Instant::now();
    drop(c);
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(rec.passes.lock().unwrap().len(), 2);
    // A notifier without a coordinator does nothing.
    SyncNotifier::default().local_write(&Scope::User);
}

#[test]
fn the_engine_runner_reports_a_missing_token_in_the_scope_status() {
    let home = tempfile::tempdir().unwrap();
    let dir = sync_dir(home.path());
    Settings::update(&dir, |s| {
        s.enabled = Some(true);
        s.server = Some("http://127.0.0.1:9".into());
    })
    .unwrap();
    let opts = OpenOptions::without_model(home.path());
    let mut runner = EngineRunner::new(home.path(), opts, None);
    let (r, requests) = runner.run(&Scope::User);
    assert!(r.is_err());
    assert_eq!(requests, 0);
    let st = ScopeDir::new(&dir, "user").load_status().unwrap();
    let e = st.last_error.unwrap();
    assert!(e.starts_with("user: "), "{e}");
    assert!(e.contains("MEMORIA_SYNC_TOKEN"), "{e}");
    assert_eq!(st.last_download, DownloadCounts::default());
}

/// Steps `d` until it is idle.
fn settle(d: &mut Driver<Recorder>) {
    while d.step() == Step::Ran {}
}

#[test]
fn one_process_polls_for_the_home_and_another_takes_over_once_it_stops() {
    let home = signed_in_home();
    let clock = Arc::new(FixedClock::new(T0));
    let driver = |rec: &Recorder| {
        Driver::new(
            home.path(),
            vec![Scope::User],
            rec.clone(),
            clock.clone(),
            Box::new(|_, _| {}),
        )
    };
    let (ra, rb) = (Recorder::new(clock.clone()), Recorder::new(clock.clone()));
    let (mut a, mut b) = (driver(&ra), driver(&rb));
    // A polls first and takes the lease; B, started after it, defers to it.
    settle(&mut a);
    settle(&mut b);
    assert_eq!(ra.passes.lock().unwrap().len(), 1);
    assert!(rb.passes.lock().unwrap().is_empty());
    assert_eq!(rb.deferred.lock().unwrap().len(), 1);
    let lease = ScopeDir::new(&sync_dir(home.path()), "user").poll_lease();
    assert_eq!(lease.holder(T0).unwrap().holder, a.lease_id);

    // An hour of both running: every poll is A's, as often as one process alone polls.
    for _ in 0..3_600 {
        clock.advance(S);
        settle(&mut a);
        settle(&mut b);
    }
    let polls = ra.passes.lock().unwrap().len();
    assert!((12..=20).contains(&polls), "{polls} polls in an hour");
    assert!(rb.passes.lock().unwrap().is_empty());

    // A is killed (it never gives the lease up): the lease lapses, and B polls from then on.
    let held_until = lease.holder(clock.now_ms()).unwrap().until_ms;
    assert!(held_until <= clock.now_ms() + crate::schedule::POLL_MAX_MS + LEASE_GRACE_MS);
    drop(a);
    for _ in 0..3_600 {
        clock.advance(S);
        settle(&mut b);
    }
    let took_over = rb.passes.lock().unwrap().clone();
    assert!(!took_over.is_empty());
    assert!(took_over[0].1 <= held_until - T0 + crate::schedule::POLL_MAX_MS);
    assert_eq!(
        lease.holder(clock.now_ms()).unwrap().holder,
        b.lease_id,
        "B holds the lease now"
    );

    // A process that stops as it should gives its lease up at once.
    b.release_leases();
    assert!(lease.holder(clock.now_ms()).is_none());
}

/// The next pass of `user` as the home's record tells it to `sync status`, at `now`.
fn recorded_next(dir: &Path, now: i64) -> Vec<Option<i64>> {
    ScopeDir::new(dir, "user")
        .next_passes()
        .running(now)
        .into_iter()
        .map(|p| p.at_ms.map(|t| t - T0))
        .collect()
}

#[test]
fn the_next_pass_is_recorded_for_sync_status_while_the_driver_runs() {
    let mut r = Rig::new(vec![Scope::User], true);
    r.then(Err(SyncError::Transport("connection refused".into())));
    r.run_until(S);
    assert_eq!(r.passes(), vec![user(0)]);
    // A failure that may pass: retried a minute later, and the record says when.
    assert_eq!(recorded_next(&r.dir, r.clock.now_ms()), vec![Some(M)]);
    r.run_until(M + S);
    assert_eq!(r.passes(), vec![user(M)]);
    assert_eq!(recorded_next(&r.dir, r.clock.now_ms()), vec![Some(2 * M)]);
    // One that needs the user: no pass is planned until a write or "sync now".
    r.then(Err(SyncError::NotSignedIn));
    r.run_until(2 * M + S);
    assert_eq!(recorded_next(&r.dir, r.clock.now_ms()), vec![None]);
    // Renewed while the driver runs, long past the first record's hold.
    r.run_until(2 * M + 3 * NEXT_PASS_HOLD_MS);
    assert_eq!(
        recorded_next(&r.dir, r.clock.now_ms()),
        vec![None],
        "renewed while running"
    );
    // Sync turned off: no pass is coming from this process.
    r.set_on(false);
    r.run_until(2 * M + 3 * NEXT_PASS_HOLD_MS + 5 * S);
    assert!(recorded_next(&r.dir, r.clock.now_ms()).is_empty());
    r.set_on(true);
    r.run_until(2 * M + 3 * NEXT_PASS_HOLD_MS + 10 * S);
    assert_eq!(recorded_next(&r.dir, r.clock.now_ms()).len(), 1);
    // A driver that is gone (its process stopped or was killed) counts for nothing, even
    // before its entry would lapse: its lock is gone with it.
    let Rig {
        driver,
        dir,
        clock,
        _home,
        ..
    } = r;
    drop(driver);
    assert!(recorded_next(&dir, clock.now_ms()).is_empty());
}
