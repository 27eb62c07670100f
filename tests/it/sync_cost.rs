//! What a sync pass costs on the wire and on disk, counted by a proxy in front of the real
//! `memoria-sync` (requests, and bytes each way with their HTTP heads): a poll that finds
//! nothing new on either side is one small request and reads no note file; one change costs
//! a few requests and about its own size; and no change is ever missed for it — a note
//! edited on another machine, one edited here that keeps its size and modification time (so
//! the index's scan does not see it either), a new note and a deleted one. Twenty projects in
//! use on one home, each with a process of its own, keep to the scheduler's limits.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use memoria_engine::project::{Project, Scope};
use memoria_engine::sync::coordinator::{Driver, EngineRunner, Step};
use memoria_engine::sync::schedule::{POLL_MIN_MS, PROJECT_IDLE_MS, REQUESTS_PER_MINUTE};
use memoria_engine::sync::{PassReport, Syncer};
use memoria_engine::vault::{Engine, OpenOptions};
use memoria_shared::{Clock, FixedClock, Note, NoteId, SystemClock};
use memoria_sync_server::config::RateLimit;
use memoria_tests::proxy::Proxy;
use memoria_tests::sync_fixture::{Backend, Device};

use crate::sync_e2e::{World, world};

/// Notes in the scope: enough that a cost growing with the vault shows.
const NOTES: usize = 400;

/// A home driven in this process (an engine and a syncer kept across passes, as a
/// long-running process keeps them), signed in through `url`.
struct Machine {
    device: Device,
    engine: Engine,
    syncer: Syncer,
}

impl Machine {
    fn new(w: &World, name: &str, token: &str, url: &str) -> Machine {
        let device = w.device_via(name, token, url);
        let engine = Engine::open(OpenOptions {
            home: Some(device.home.clone()),
            ..Default::default()
        })
        .unwrap();
        let syncer = Syncer::from_settings(
            &device.home,
            Some(token.to_owned()),
            Arc::new(SystemClock),
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
        Machine {
            device,
            engine,
            syncer,
        }
    }

    fn pass(&mut self) -> PassReport {
        self.syncer
            .sync_scope(&mut self.engine, &Scope::User)
            .unwrap()
    }

    fn dir(&self) -> std::path::PathBuf {
        self.device.home.join("memory/user")
    }
}

fn note_text(id: &str, body: &str) -> String {
    Note::new(NoteId::new(id).unwrap(), format!("Note {id}"), body).serialize()
}

fn write_notes(dir: &Path, n: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..n {
        let id = format!("note-{i:04}");
        let body = format!("Body of note {i}, long enough to look like a note.\n").repeat(20);
        std::fs::write(dir.join(format!("{id}.md")), note_text(&id, &body)).unwrap();
    }
}

/// What one pass sent and received through the proxy.
#[derive(Debug, Clone)]
struct Cost {
    requests: usize,
    up: u64,
    down: u64,
}

fn measure(proxy: &Proxy, f: impl FnOnce() -> PassReport) -> (PassReport, Cost) {
    let (r0, u0, d0) = proxy.traffic();
    let report = f();
    let (r1, u1, d1) = proxy.traffic();
    (
        report,
        Cost {
            requests: r1 - r0,
            up: u1 - u0,
            down: d1 - d0,
        },
    )
}

/// A fingerprint stands for a file's content only once the file is older than the file
/// system's time granularity allows to tell apart; until then every pass reads it again.
fn let_files_settle() {
    std::thread::sleep(Duration::from_millis(2_100));
}

/// Two machines on one server, A with `NOTES` notes synced to both; A is measured through a
/// proxy, B talks to the server directly.
fn synced_pair() -> (World, Proxy, Machine, Machine) {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let proxy = Proxy::start(&w.server.url);
    let mut a = Machine::new(&w, "a", &token, &proxy.url);
    write_notes(&a.dir(), NOTES);
    let first = a.pass();
    assert_eq!(first.uploaded, NOTES);
    let mut b = Machine::new(&w, "b", &token, &w.server.url);
    assert_eq!(b.pass().download.added, NOTES);
    let_files_settle();
    // The pass after an upload learns the manifest it made; the one after that is quiet.
    a.pass();
    a.pass();
    b.pass();
    b.pass();
    (w, proxy, a, b)
}

#[test]
fn sync_a_poll_with_nothing_new_is_one_small_request_and_reads_no_note() {
    let (_w, proxy, mut a, _b) = synced_pair();
    for _ in 0..3 {
        let (report, cost) = measure(&proxy, || a.pass());
        assert!(report.unchanged && !report.changed(), "{report:?}");
        assert_eq!(cost.requests, 1, "{cost:?}");
        assert!(cost.up <= 1024 && cost.down <= 1024, "{cost:?}");
        assert_eq!(report.files_read, 0, "{report:?}");
    }
}

#[test]
fn sync_one_change_costs_its_own_size_and_is_never_missed() {
    let (_w, proxy, mut a, mut b) = synced_pair();
    let body_len = |m: &Machine, id: &str| {
        std::fs::metadata(m.dir().join(format!("{id}.md")))
            .unwrap()
            .len()
    };

    // Edited on another machine: A's next poll brings it, and only it.
    let edited = note_text("note-0007", "Changed on machine B.\n");
    std::fs::write(b.dir().join("note-0007.md"), &edited).unwrap();
    assert_eq!(b.pass().uploaded, 1);
    let (report, cost) = measure(&proxy, || a.pass());
    assert_eq!(report.download.changed, 1, "{report:?}");
    assert_eq!(
        std::fs::read_to_string(a.dir().join("note-0007.md")).unwrap(),
        edited
    );
    assert!(cost.requests <= 3, "{cost:?}");
    assert!(
        cost.up + cost.down <= edited.len() as u64 + 4096,
        "{cost:?} for a {} byte note",
        edited.len()
    );

    // Edited here with its size and modification time kept: neither the index's scan (which
    // goes by both) nor a size check sees it, the pass still does.
    let path = a.dir().join("note-0042.md");
    let old = std::fs::read_to_string(&path).unwrap();
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let same_size = old.replacen("Body of note 42", "BODY OF NOTE 42", 1);
    assert_eq!(same_size.len(), old.len());
    std::fs::write(&path, &same_size).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (report, cost) = measure(&proxy, || a.pass());
    assert_eq!(report.uploaded, 1, "{report:?}");
    assert!(cost.requests <= 3, "{cost:?}");
    assert!(
        cost.up + cost.down <= body_len(&a, "note-0042") + 4096,
        "{cost:?}"
    );
    b.pass();
    assert_eq!(
        std::fs::read_to_string(b.dir().join("note-0042.md")).unwrap(),
        same_size
    );

    // A new note and a deleted one, with no index refresh in between (no watcher runs).
    std::fs::write(
        a.dir().join("fresh.md"),
        note_text("fresh", "A new note.\n"),
    )
    .unwrap();
    std::fs::remove_file(a.dir().join("note-0100.md")).unwrap();
    let report = a.pass();
    assert_eq!(report.uploaded, 2, "{report:?}");
    let report = b.pass();
    assert_eq!(report.download.added, 1, "{report:?}");
    assert_eq!(report.download.deleted, 1, "{report:?}");
    assert!(b.device.note("fresh").is_some() && b.device.note("note-0100").is_none());

    // And once everything has settled, polling is back to one small request.
    let_files_settle();
    a.pass();
    let (report, cost) = measure(&proxy, || a.pass());
    assert!(report.unchanged, "{report:?}");
    assert_eq!((cost.requests, report.files_read), (1, 0), "{cost:?}");
    assert!(cost.up <= 1024 && cost.down <= 1024, "{cost:?}");
}

/// `memoria --json watch` on a home, its pass reports arriving on a channel; killed on drop.
struct Watcher {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<serde_json::Value>,
}

impl Watcher {
    fn start(d: &Device) -> Watcher {
        use std::io::BufRead;
        let mut child = d
            .command(&["--json", "watch"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("starting memoria watch");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                    && v.get("sync").is_some()
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        Watcher { child, lines }
    }

    /// The next pass report, within `timeout`.
    fn report(&self, timeout: Duration) -> serde_json::Value {
        let v = self
            .lines
            .recv_timeout(timeout)
            .unwrap_or_else(|e| panic!("no sync pass within {timeout:?}: {e}"));
        assert!(v["error"].is_null(), "{v}");
        v["report"].clone()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn sync_several_processes_on_one_home_poll_as_one_and_a_write_still_goes_up() {
    let w = world(Backend::Fs, &[]);
    let token = w.server.token("alice");
    let proxy = Proxy::start(&w.server.url);
    let a = w.device_via("a", &token, &proxy.url);
    write_notes(&a.home.join("memory/user"), 50);
    a.ok(&["sync", "now"]);
    let_files_settle();
    a.ok(&["sync", "now"]);

    // The first watcher polls; the ones started after it defer to it and send nothing.
    let first = Watcher::start(&a);
    let r = first.report(Duration::from_secs(60));
    assert_eq!(r["deferred"], false, "{r}");
    let (before, _, _) = proxy.traffic();
    let others: Vec<Watcher> = (0..2).map(|_| Watcher::start(&a)).collect();
    for o in &others {
        let r = o.report(Duration::from_secs(60));
        assert_eq!(r["deferred"], true, "{r}");
    }
    let (after, _, _) = proxy.traffic();
    assert_eq!(after - before, 0, "{:?}", &proxy.forwarded()[before..]);

    // An editor's write reaches the cloud about 3 s later, through one of them.
    let text = note_text("written", "Written while three watchers run.\n");
    let started = std::time::Instant::now();
    std::fs::write(a.home.join("memory/user/written.md"), &text).unwrap();
    let watchers: Vec<&Watcher> = std::iter::once(&first).chain(&others).collect();
    let mut uploaded = 0;
    for wt in &watchers {
        let r = wt.report(Duration::from_secs(30));
        uploaded += r["uploaded"].as_u64().unwrap();
    }
    assert_eq!(uploaded, 1, "one upload among the watchers");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let b = w.device("b", &token);
    b.ok(&["sync", "now"]);
    assert_eq!(b.note("written").as_deref(), Some(text.as_str()));
    let (done, _, _) = proxy.traffic();
    eprintln!("requests for one write: {:?}", &proxy.forwarded()[after..]);
    // The upload (the identity of a process that had deferred until then, a snapshot and a
    // commit) and the poller's own pass after the write, a cheap poll: not a round per process.
    assert!(
        done - after <= 4,
        "{} requests for one write: {:?}",
        done - after,
        &proxy.forwarded()[after..]
    );
}

/// Project scopes in use on one home in the twenty-projects test, beside the user scope.
const PROJECTS: usize = 20;

/// One pass a process's coordinator ran, with what it sent.
#[derive(Debug, Clone)]
struct Pass {
    process: usize,
    scope: String,
    at: i64,
    deferred: bool,
    files_read: usize,
    cost: Cost,
}

/// The largest number of `passes`' requests inside any one minute.
fn busiest_minute<'a>(passes: impl IntoIterator<Item = &'a Pass>) -> usize {
    let passes: Vec<&Pass> = passes.into_iter().collect();
    passes
        .iter()
        .map(|p| {
            passes
                .iter()
                .filter(|q| q.at >= p.at && q.at < p.at + POLL_MIN_MS)
                .map(|q| q.cost.requests)
                .sum()
        })
        .max()
        .unwrap_or(0)
}

/// Twenty projects in use on one home, each with an agent session (a long-running process with
/// its coordinator, polling its project and the user scope), run over simulated time against the
/// real server through a counting proxy. The scheduler's limits hold: each scope is polled by
/// one process, at most once a minute and backing off to every five minutes while nothing
/// changes; no process sends more than its requests-per-minute budget; the home as a whole sends
/// at most one request per scope a minute once the processes have started (each asks the server
/// who it is once); and an unchanged poll is one small request per scope that reads no note.
#[test]
fn sync_twenty_projects_in_use_poll_within_the_schedulers_limits() {
    // Setting up uploads twenty-one scopes back to back, faster than a server's default rate
    // limit allows; the polls measured below are held to that limit by assertion instead.
    let w = world(
        Backend::Fs,
        &[
            ("MEMORIA_SYNC_RATE_LIMIT__BURST", "100000"),
            ("MEMORIA_SYNC_RATE_LIMIT__PER_MINUTE", "100000"),
        ],
    );
    let token = w.server.token("alice");
    let proxy = Proxy::start(&w.server.url);
    let home = w.device_via("a", &token, &proxy.url).home;
    write_notes(&home.join("memory/user"), 20);
    let roots: Vec<std::path::PathBuf> = (0..PROJECTS)
        .map(|p| {
            let root = w.root.join(format!("projects/p{p:02}"));
            Project::init(&root, None).unwrap();
            write_notes(&root.join("MEMORY"), 10);
            root
        })
        .collect();
    let open = |project_dir: Option<&Path>| OpenOptions {
        home: Some(home.clone()),
        project_dir: project_dir.map(Path::to_path_buf),
        ..Default::default()
    };

    // Every scope uploaded and settled, by `memoria sync now` in each project.
    let mut scopes = Vec::new();
    for root in &roots {
        let mut engine = Engine::open(open(Some(root))).unwrap();
        let scope = engine.project().unwrap().scope();
        let mut syncer = Syncer::from_settings(
            &home,
            Some(token.clone()),
            Arc::new(SystemClock),
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
        assert_eq!(syncer.sync_scope(&mut engine, &scope).unwrap().uploaded, 10);
        if scopes.is_empty() {
            let user = syncer.sync_scope(&mut engine, &Scope::User).unwrap();
            assert_eq!(user.uploaded, 20);
        }
        scopes.push(scope);
    }
    let_files_settle();
    for (root, scope) in roots.iter().zip(&scopes) {
        let mut engine = Engine::open(open(Some(root))).unwrap();
        let mut syncer = Syncer::from_settings(
            &home,
            Some(token.clone()),
            Arc::new(SystemClock),
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
        for s in [scope, &Scope::User] {
            syncer.sync_scope(&mut engine, s).unwrap();
            syncer.sync_scope(&mut engine, s).unwrap();
        }
    }

    // Twenty processes, each a coordinator's driver for its project and the user scope (as
    // `Coordinator::for_process` makes it) with the real pass runner, on one clock.
    let clock = Arc::new(FixedClock::new(SystemClock.now_ms()));
    let start = clock.now_ms();
    let reports: Arc<Mutex<Vec<Result<PassReport, String>>>> = Arc::default();
    let mut drivers: Vec<Driver<EngineRunner>> = roots
        .iter()
        .zip(&scopes)
        .map(|(root, scope)| {
            let opts = OpenOptions {
                clock: clock.clone(),
                ..open(Some(root))
            };
            let runner = EngineRunner::new(&home, opts, Some(token.clone()));
            let reports = reports.clone();
            Driver::new(
                &home,
                vec![scope.clone(), Scope::User],
                runner,
                clock.clone(),
                Box::new(move |_, r| {
                    let r = r.as_ref().map_err(|e| e.to_string()).cloned();
                    reports.lock().unwrap().push(r);
                }),
            )
        })
        .collect();

    // The half hour a project stays in use after its last use, every process stepped at
    // every wake-up any of them asks for.
    let mut passes: Vec<Pass> = Vec::new();
    loop {
        let mut wake = i64::MAX;
        for (process, d) in drivers.iter_mut().enumerate() {
            loop {
                let (r0, u0, d0) = proxy.traffic();
                match d.step() {
                    Step::Ran => {
                        let (r1, u1, d1) = proxy.traffic();
                        let report = reports.lock().unwrap().pop().expect("a pass report");
                        let report = report.unwrap_or_else(|e| panic!("a pass failed: {e}"));
                        passes.push(Pass {
                            process,
                            scope: report.scope.clone(),
                            at: clock.now_ms() - start,
                            deferred: report.deferred,
                            files_read: report.files_read,
                            cost: Cost {
                                requests: r1 - r0,
                                up: u1 - u0,
                                down: d1 - d0,
                            },
                        });
                        assert!(report.unchanged && !report.changed(), "{report:?}");
                    }
                    Step::Idle { until } => {
                        wake = wake.min(until);
                        break;
                    }
                }
            }
        }
        let next = wake.max(clock.now_ms() + 1);
        if next - start >= PROJECT_IDLE_MS {
            break;
        }
        clock.set(next);
    }

    let all_scopes: Vec<String> = std::iter::once("user".to_owned())
        .chain(scopes.iter().map(Scope::key))
        .collect();
    let polls = |key: &str| -> Vec<&Pass> {
        passes
            .iter()
            .filter(|p| p.scope == key && !p.deferred)
            .collect()
    };
    for key in &all_scopes {
        // One process polls the scope for the home; the others defer and send nothing.
        let pollers: std::collections::BTreeSet<usize> =
            polls(key).iter().map(|p| p.process).collect();
        assert_eq!(pollers.len(), 1, "{key} polled by processes {pollers:?}");
        // Once a minute at most, backing off to every five minutes while nothing changes.
        let gaps: Vec<i64> = polls(key).windows(2).map(|w| w[1].at - w[0].at).collect();
        assert_eq!(
            gaps,
            [1, 2, 4, 5, 5, 5, 5].map(|m| m * POLL_MIN_MS),
            "{key}: gaps between polls (ms)"
        );
    }
    for p in passes.iter().filter(|p| p.deferred) {
        assert_eq!(p.cost.requests, 0, "{p:?}");
    }
    // Each process within its own budget.
    for process in 0..PROJECTS {
        let mine = passes.iter().filter(|p| p.process == process);
        let busiest = busiest_minute(mine);
        assert!(
            busiest <= REQUESTS_PER_MINUTE,
            "process {process}: {busiest}"
        );
    }
    // A process's first pass also asks the server who it is; every later unchanged poll is
    // one small request, reading no note, so a round of all scopes is one request per scope.
    let mut started = std::collections::BTreeSet::new();
    let mut later = Vec::new();
    for p in passes.iter().filter(|p| !p.deferred) {
        let first = started.insert(p.process);
        assert_eq!(p.cost.requests, if first { 2 } else { 1 }, "{p:?}");
        // The first pass's two replies each announce every quota, header and body.
        let down = if first { 1536 } else { 1024 };
        assert!(p.cost.up <= 1024 && p.cost.down <= down, "{p:?}");
        assert_eq!(p.files_read, 0, "{p:?}");
        if !first {
            later.push(p);
        }
    }
    // The home as a whole: within a default server's rate limit for one account even as
    // twenty processes start at once, and after start-up at most one request per scope in any
    // minute.
    let server_limit = RateLimit::default();
    let at_start = busiest_minute(&passes);
    assert!(
        at_start as u32 <= server_limit.burst.min(server_limit.per_minute),
        "{at_start} requests in a minute"
    );
    let after_start = passes.iter().filter(|p| p.at >= POLL_MIN_MS);
    let busiest = busiest_minute(after_start);
    assert!(
        busiest <= all_scopes.len(),
        "{busiest} requests in a minute"
    );
    let requests: usize = passes.iter().map(|p| p.cost.requests).sum();
    let (up, down): (u64, u64) = passes
        .iter()
        .fold((0, 0), |(u, d), p| (u + p.cost.up, d + p.cost.down));
    let poll_up = later.iter().map(|p| p.cost.up).max().unwrap();
    let poll_down = later.iter().map(|p| p.cost.down).max().unwrap();
    eprintln!(
        "{} scopes, {} processes, {} minutes: {requests} requests ({} polls, {} deferred \
         passes), {up} B up, {down} B down; busiest minute {at_start} requests, after start-up {busiest}; \
         an unchanged poll at most {poll_up} B up, {poll_down} B down",
        all_scopes.len(),
        PROJECTS,
        PROJECT_IDLE_MS / POLL_MIN_MS,
        passes.iter().filter(|p| !p.deferred).count(),
        passes.iter().filter(|p| p.deferred).count(),
    );
}
