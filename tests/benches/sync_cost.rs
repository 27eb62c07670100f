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
//! The engine runs in this process, as a long-running process (`memoria watch`, `memoria mcp`)
//! runs it: one engine and one syncer kept across passes. Each row is one pass; the poll row is
//! the median of five.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use memoria_engine::project::Scope;
use memoria_engine::sync::{PassReport, Settings, Syncer, sync_dir};
use memoria_engine::vault::{Engine, OpenOptions};
use memoria_shared::{Note, NoteId, SystemClock};
use memoria_tests::moto::{self, MotoServer};
use memoria_tests::proxy::Proxy;
use memoria_tests::sync_server::{ServerProcess, create_token};

struct Machine {
    home: PathBuf,
    engine: Engine,
    syncer: Syncer,
}

impl Machine {
    fn new(home: PathBuf, url: &str, token: &str) -> Machine {
        std::fs::create_dir_all(home.join("memory/user")).unwrap();
        Settings::update(&sync_dir(&home), |s| {
            s.enabled = Some(true);
            s.server = Some(url.to_owned());
        })
        .unwrap();
        let engine = Engine::open(OpenOptions {
            home: Some(home.clone()),
            ..Default::default()
        })
        .unwrap();
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
        }
    }

    fn dir(&self) -> PathBuf {
        self.home.join("memory/user")
    }

    fn pass(&mut self) -> PassReport {
        self.syncer
            .sync_scope(&mut self.engine, &Scope::User)
            .unwrap()
    }
}

fn note_text(id: &str, i: usize, salt: &str) -> String {
    // About 4 KB: 20 MB at 5,000 notes.
    let body: String = (0..60)
        .map(|l| format!("{salt}Line {l} of note {i}: a sentence of ordinary length.\n"))
        .collect();
    Note::new(NoteId::new(id).unwrap(), format!("Note {i}"), body).serialize()
}

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

fn measure(proxy: &Proxy, f: impl FnOnce() -> PassReport) -> Row {
    let (r0, u0, d0) = proxy.traffic();
    let t = Instant::now();
    let report = f();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let (r1, u1, d1) = proxy.traffic();
    Row {
        requests: r1 - r0,
        up: u1 - u0,
        down: d1 - d0,
        ms,
        read: report.files_read,
    }
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
    let first = measure(&proxy, || a.pass());
    print(
        store_name,
        notes,
        &format!("first upload ({})", bytes(total)),
        first,
    );
    settle();
    a.pass();
    let mut polls: Vec<Row> = (0..5).map(|_| measure(&proxy, || a.pass())).collect();
    polls.sort_by(|x, y| x.ms.total_cmp(&y.ms));
    print(store_name, notes, "poll, nothing new", polls[2]);

    let path = a.dir().join("note-00007.md");
    std::fs::write(&path, note_text("note-00007", 7, "Edited. ")).unwrap();
    let local = measure(&proxy, || a.pass());
    print(store_name, notes, "one change here", local);

    // Another machine, downloading everything once, then changing one note.
    let mut b = Machine::new(root.join("b"), &server.url(""), &token);
    b.pass();
    settle();
    b.pass();
    a.pass();
    std::fs::write(
        b.dir().join("note-00042.md"),
        note_text("note-00042", 42, "From B. "),
    )
    .unwrap();
    b.pass();
    let remote = measure(&proxy, || a.pass());
    print(store_name, notes, "one change elsewhere", remote);
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
    let moto = MotoServer::start();
    let env: Vec<(&str, &str)> = moto::CREDENTIALS.to_vec();
    println!("| store | notes | pass | requests | bytes up | bytes down | time | files read |");
    println!("|---|---|---|---|---|---|---|---|");
    for &n in &sizes {
        let fs = format!("fs:{}", root.join(format!("fs-store-{n}")).display());
        run("fs", &fs, &[], &root, n);
        run("S3 (moto)", &moto.store_url(), &env, &root, n);
        rclone(&moto, &root, n);
    }
}
