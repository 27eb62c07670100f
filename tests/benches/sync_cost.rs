//! What sync costs: requests, bytes each way (through a counting proxy, HTTP heads included)
//! and time for a first upload, a poll with nothing new, one local change and one change from
//! another machine, at 500 and 5,000 notes of about 4 KB, on the filesystem store and on S3
//! (moto) — beside `rclone sync` of the same folder to the same moto in the same run.
//!
//! ```text
//! cargo build --release -p memoria-sync-server --bin memoria-sync
//! cargo bench -p memoria-tests --bench sync_cost            # MEMORIA_BENCH_NOTES=500,5000
//! ```
//!
//! `MEMORIA_BENCH_STORES=fs` leaves out S3 (moto) and rclone; `MEMORIA_BENCH_ROUNDS=N` (odd,
//! default 5) takes each poll and change row as the median of N passes.
//!
//! The engine runs in this process, as a long-running process (`memoria watch`, `memoria mcp`)
//! runs it: one engine and one syncer kept across passes. Each row is one pass (the round: one
//! pass of each scope); the poll and change rows are the median of several (each change pass
//! finds a different note changed).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use memoria_engine::project::{Project, Scope};
use memoria_engine::sync::{PassReport, Settings, Syncer, sync_dir};
use memoria_engine::vault::{Engine, OpenOptions};
use memoria_shared::{Note, NoteId, SystemClock};
use memoria_tests::moto::{self, MotoServer};
use memoria_tests::proxy::Proxy;
use memoria_tests::sync_server::{ServerProcess, create_token};

/// A process on a home: its engine and syncer, and the scope it syncs.
struct Machine {
    home: PathBuf,
    engine: Engine,
    syncer: Syncer,
    scope: Scope,
}

impl Machine {
    /// A home signed in to `url`, syncing the user scope.
    fn new(home: PathBuf, url: &str, token: &str) -> Machine {
        Self::open(home, None, url, token)
    }

    /// A process in the project at `root` (made a project if it is not one) on `home`,
    /// syncing the project's scope.
    fn project(home: PathBuf, root: &Path, url: &str, token: &str) -> Machine {
        Project::init(root, None).unwrap();
        Self::open(home, Some(root), url, token)
    }

    fn open(home: PathBuf, project: Option<&Path>, url: &str, token: &str) -> Machine {
        std::fs::create_dir_all(home.join("memory/user")).unwrap();
        Settings::update(&sync_dir(&home), |s| {
            s.enabled = Some(true);
            s.server = Some(url.to_owned());
        })
        .unwrap();
        let engine = Engine::open(OpenOptions {
            home: Some(home.clone()),
            project_dir: project.map(Path::to_path_buf),
            ..Default::default()
        })
        .unwrap();
        let scope = engine.project().map_or(Scope::User, Project::scope);
        let syncer = Syncer::from_settings(
            &home,
            Some(token.to_owned()),
            Arc::new(SystemClock),
            Arc::new(AtomicBool::new(false)),
        )
        .unwrap();
        Machine {
            home,
            engine,
            syncer,
            scope,
        }
    }

    /// The folder of the scope's notes.
    fn dir(&self) -> PathBuf {
        match self.engine.project() {
            Some(p) => p.memory_dir(),
            None => self.home.join("memory/user"),
        }
    }

    fn pass(&mut self) -> PassReport {
        self.syncer
            .sync_scope(&mut self.engine, &self.scope)
            .unwrap()
    }
}

/// Every note file's size: 5,000 notes make 20 MB (20,480,000 bytes).
const NOTE_BYTES: usize = 4096;

/// A note file of exactly [`NOTE_BYTES`]: whole lines of ordinary sentences, the last one cut
/// to fill.
fn note_text(id: &str, i: usize, salt: &str) -> String {
    let note =
        |body: &str| Note::new(NoteId::new(id).unwrap(), format!("Note {i}"), body).serialize();
    let line = |l: usize| format!("{salt}Line {l} of note {i}: a sentence of ordinary length.\n");
    let head = note(&line(0)).len() - line(0).len();
    let mut body = String::new();
    for l in 0.. {
        let room = NOTE_BYTES - head - body.len();
        let next = line(l);
        if next.len() <= room {
            body.push_str(&next);
        } else {
            if room > 0 {
                body.push_str(&next[..room - 1]);
                body.push('\n');
            }
            break;
        }
    }
    let text = note(&body);
    assert_eq!(text.len(), NOTE_BYTES, "the bench's note size");
    text
}

/// Writes `n` notes into `dir`; returns their total size in bytes.
fn write_notes(dir: &Path, n: usize) -> u64 {
    let mut bytes = 0;
    for i in 0..n {
        let id = format!("note-{i:05}");
        let text = note_text(&id, i, "");
        bytes += text.len() as u64;
        std::fs::write(dir.join(format!("{id}.md")), text).unwrap();
    }
    bytes
}

#[derive(Debug, Clone, Copy)]
struct Row {
    requests: usize,
    up: u64,
    down: u64,
    ms: f64,
    read: usize,
}

/// What `passes` cost through `proxy`: their requests, bytes each way, time, and the files
/// they read.
fn measure(proxy: &Proxy, passes: impl FnOnce() -> Vec<PassReport>) -> Row {
    let (r0, u0, d0) = proxy.traffic();
    let t = Instant::now();
    let reports = passes();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let (r1, u1, d1) = proxy.traffic();
    Row {
        requests: r1 - r0,
        up: u1 - u0,
        down: d1 - d0,
        ms,
        read: reports.iter().map(|r| r.files_read).sum(),
    }
}

/// How many rounds a median is taken of (`MEMORIA_BENCH_ROUNDS`, default 5).
fn rounds() -> usize {
    std::env::var("MEMORIA_BENCH_ROUNDS")
        .ok()
        .map_or(5, |s| {
            s.trim().parse().expect("MEMORIA_BENCH_ROUNDS: a number")
        })
        .max(1)
}

/// The median of [`rounds`] rows of `passes`, by time.
fn median(proxy: &Proxy, mut passes: impl FnMut() -> Vec<PassReport>) -> Row {
    median_after(proxy, |_| {}, |_| passes())
}

/// The median of [`rounds`] rows of `passes`, by time, each after `before` (not measured);
/// both are given the round's number.
fn median_after(
    proxy: &Proxy,
    mut before: impl FnMut(usize),
    mut passes: impl FnMut(usize) -> Vec<PassReport>,
) -> Row {
    let mut rows: Vec<Row> = (0..rounds())
        .map(|k| {
            before(k);
            measure(proxy, || passes(k))
        })
        .collect();
    rows.sort_by(|x, y| x.ms.total_cmp(&y.ms));
    rows[rows.len() / 2]
}

fn bytes(n: u64) -> String {
    match n {
        n if n >= 10 << 20 => format!("{:.1} MB", n as f64 / 1048576.0),
        n if n >= 10 << 10 => format!("{:.0} KB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

fn print(store: &str, notes: usize, what: &str, r: Row) {
    println!(
        "| {store} | {notes} | {what} | {} | {} | {} | {:.0} ms | {} |",
        r.requests,
        bytes(r.up),
        bytes(r.down),
        r.ms,
        r.read
    );
}

/// File times are coarse: a fingerprint stands for a file's content once the file is older
/// than that (see `engine/src/sync/local.rs`).
fn settle() {
    std::thread::sleep(Duration::from_millis(2_100));
}

fn run(store_name: &str, store: &str, env: &[(&str, &str)], root: &Path, notes: usize) {
    let root = root.join(format!(
        "{}-{notes}",
        store_name.split(' ').next().unwrap_or("x")
    ));
    let server = ServerProcess::start(store, env);
    let user = format!("bench{notes}");
    let token = create_token(store, &user, env);
    let proxy = Proxy::start(&server.url(""));
    let mut a = Machine::new(root.join("a"), &proxy.url, &token);
    let total = write_notes(&a.dir(), notes);
    let first = measure(&proxy, || vec![a.pass()]);
    print(
        store_name,
        notes,
        &format!("first upload ({total} bytes)"),
        first,
    );
    settle();
    a.pass();
    let poll = median(&proxy, || vec![a.pass()]);
    print(store_name, notes, "poll, nothing new", poll);

    // Each of five passes finds one note edited here, a different note each time; the notes
    // edited before it are old enough to be known by their file times.
    let edit = |dir: &Path, n: usize, salt: &str| {
        let id = format!("note-{n:05}");
        std::fs::write(dir.join(format!("{id}.md")), note_text(&id, n, salt)).unwrap();
    };
    let here = a.dir();
    let local = median_after(
        &proxy,
        |k| {
            settle();
            edit(&here, 7 + 10 * k, "Edited. ");
        },
        |_| vec![a.pass()],
    );
    print(store_name, notes, "one change here", local);

    // Another machine, downloading everything once, then changing one note.
    let mut b = Machine::new(root.join("b"), &server.url(""), &token);
    b.pass();
    settle();
    b.pass();
    a.pass();
    // Each of five passes here finds one note the other machine edited and sent.
    let remote = median_after(
        &proxy,
        |k| {
            settle();
            edit(&b.dir(), 42 + 10 * k, "From B. ");
            b.pass();
        },
        |_| vec![a.pass()],
    );
    print(store_name, notes, "one change elsewhere", remote);
    server.stop();
}

/// Project scopes in the twenty-projects round, beside the user scope.
const PROJECTS: usize = 20;
/// Notes in each scope of the twenty-projects round.
const PROJECT_NOTES: usize = 100;

/// Twenty projects in use on one home: the user scope and twenty project scopes, each synced by
/// a process of its own (an agent session in each project), all uploaded and settled; then the
/// round of polls that finds nothing new, one pass of each scope.
fn twenty_projects(store_name: &str, store: &str, env: &[(&str, &str)], root: &Path) {
    let root = root.join(format!(
        "projects-{}",
        store_name.split(' ').next().unwrap_or("x")
    ));
    // Rounds back to back send more than a server's default rate limit lets one account send
    // in a minute; a round is measured, not the limit.
    let mut env = env.to_vec();
    env.extend([
        ("MEMORIA_SYNC_RATE_LIMIT__BURST", "100000"),
        ("MEMORIA_SYNC_RATE_LIMIT__PER_MINUTE", "100000"),
    ]);
    let server = ServerProcess::start(store, &env);
    let token = create_token(store, "bench-projects", &env);
    let proxy = Proxy::start(&server.url(""));
    let home = root.join("home");
    let mut machines = vec![Machine::new(home.clone(), &proxy.url, &token)];
    for p in 0..PROJECTS {
        let dir = root.join(format!("p{p:02}"));
        machines.push(Machine::project(home.clone(), &dir, &proxy.url, &token));
    }
    let mut total = 0;
    for m in &machines {
        total += write_notes(&m.dir(), PROJECT_NOTES);
    }
    let mut round = || machines.iter_mut().map(Machine::pass).collect::<Vec<_>>();
    let scopes = PROJECTS + 1;
    let first = measure(&proxy, &mut round);
    print(
        store_name,
        scopes * PROJECT_NOTES,
        &format!("{scopes} scopes: first upload ({total} bytes)"),
        first,
    );
    settle();
    round();
    let poll = median(&proxy, &mut round);
    print(
        store_name,
        scopes * PROJECT_NOTES,
        &format!("{scopes} scopes: poll round, nothing new"),
        poll,
    );
    server.stop();
}

/// `rclone sync` of a fresh copy of the same notes to the same moto: first upload, no change,
/// one change.
fn rclone(moto: &MotoServer, root: &Path, notes: usize) {
    let src = root.join(format!("rclone-{notes}"));
    std::fs::create_dir_all(&src).unwrap();
    write_notes(&src, notes);
    let dest = format!(":s3:{}/rclone-{notes}", moto::BUCKET);
    let sync = || {
        let t = Instant::now();
        let out = Command::new("rclone")
            .args(["sync", &src.to_string_lossy(), &dest])
            .args(["--s3-provider", "Other", "--s3-endpoint", &moto.endpoint()])
            .args([
                "--s3-access-key-id",
                "test",
                "--s3-secret-access-key",
                "test",
            ])
            .args(["--s3-region", "us-east-1"])
            .env_remove("AWS_CA_BUNDLE")
            .output()
            .expect("rclone (apt-get install rclone)");
        assert!(
            out.status.success(),
            "rclone: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        t.elapsed().as_secs_f64() * 1000.0
    };
    let row =
        |what: &str, ms: f64| println!("| rclone → moto | {notes} | {what} | | | | {ms:.0} ms | |");
    row("first upload", sync());
    row("no change", sync());
    std::fs::write(
        src.join("note-00007.md"),
        note_text("note-00007", 7, "Edited. "),
    )
    .unwrap();
    row("one change", sync());
}

fn main() {
    // `cargo bench` passes `--bench`; this harness takes no arguments.
    let sizes: Vec<usize> = std::env::var("MEMORIA_BENCH_NOTES")
        .unwrap_or_else(|_| "500,5000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("MEMORIA_BENCH_NOTES: numbers"))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let s3 = std::env::var("MEMORIA_BENCH_STORES")
        .map_or(true, |s| s.split(',').any(|s| s.trim() == "s3"));
    let moto = s3.then(MotoServer::start);
    let env: Vec<(&str, &str)> = moto::CREDENTIALS.to_vec();
    println!("| store | notes | pass | requests | bytes up | bytes down | time | files read |");
    println!("|---|---|---|---|---|---|---|---|");
    for &n in &sizes {
        let fs = format!("fs:{}", root.join(format!("fs-store-{n}")).display());
        run("fs", &fs, &[], &root, n);
        if let Some(moto) = &moto {
            run("S3 (moto)", &moto.store_url(), &env, &root, n);
            rclone(moto, &root, n);
        }
    }
    let fs = format!("fs:{}", root.join("fs-store-projects").display());
    twenty_projects("fs", &fs, &[], &root);
    if let Some(moto) = &moto {
        twenty_projects("S3 (moto)", &moto.store_url(), &env, &root);
    }
}
