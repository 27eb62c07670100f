//! Probes a `memoria-sync serve` process with stalled clients and prints what it holds: the
//! figures behind the sync server's limits rows in `docs/BENCHMARKS.md`.
//!
//! ```sh
//! cargo build --release -p memoria-sync-server --bins --examples
//! $CARGO_TARGET_DIR/release/examples/limits_probe [CLIENTS]      # default 100
//! $CARGO_TARGET_DIR/release/examples/limits_probe storage        # disk, memory, latency
//! $CARGO_TARGET_DIR/release/examples/limits_probe rounds         # memory over repeated bursts
//! ```
//!
//! `rounds` sends four rounds of eight 10 MiB commits at once from one account allowed two
//! requests in flight, and prints the server's peak and current RSS after each: whether memory
//! a request freed is kept as other requests come.
//!
//! `storage` instead probes what one account can make the server hold: the files after many
//! edits of one note and after rounds of deleting and re-creating 250 notes (the grace period
//! shortened to 4 s by `request_timeout_secs = 2`; the rate limit raised throughout); the server's peak RSS under four
//! largest-possible commits at once and a snapshot listing the most `have` hashes allowed;
//! and commit and snapshot latency in a scope of 5,000 notes.
//!
//! Three phases, each on a fresh server over a fresh store, with the default limits except
//! where said: CLIENTS connections that send half a request header (how many the server holds
//! and for how long; whether a normal request is served meanwhile); the same with
//! `max_connections` at half of CLIENTS (how many are refused, how fast); and SIGTERM with
//! one stalled client held, its header timeout longer than the grace (how long the process
//! takes to exit). Linux only: the server's open
//! descriptors are counted in `/proc`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const HALF_A_HEADER: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: probe\r\nx-wait: ";

struct Server {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Server {
    fn start(limits: &str) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("sync.toml");
        let store = dir.path().join("data");
        std::fs::write(
            &config,
            format!("store = \"fs:{}\"\n[limits]\n{limits}\n", store.display()),
        )
        .expect("write the config");
        let mut child = Command::new(sync_binary())
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .env("MEMORIA_SYNC_LOG", "error")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start memoria-sync serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the listening line");
        let addr = line
            .trim()
            .trim_start_matches("listening on http://")
            .parse()
            .expect("an address");
        Server { child, addr, dir }
    }

    /// Open file descriptors of the server process (sockets, the listener, the runtime's own).
    fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    fn healthz_ms(&self) -> Option<f64> {
        let started = Instant::now();
        let mut s = TcpStream::connect(self.addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: probe\r\nconnection: close\r\n\r\n")
            .ok()?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).ok()?;
        reply
            .starts_with("HTTP/1.1 200")
            .then(|| started.elapsed().as_secs_f64() * 1000.0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sync_binary() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("MEMORIA_SYNC_BIN") {
        return p.into();
    }
    // target/<profile>/examples/limits_probe → target/<profile>/memoria-sync
    let exe = std::env::current_exe().expect("own path");
    exe.parent()
        .and_then(|d| d.parent())
        .expect("target folder")
        .join("memoria-sync")
}

/// What happened to one stalled client.
enum Fate {
    /// The server closed it without answering, after this long.
    Closed(Duration),
    /// The server answered 503 and closed it, after this long.
    Refused(Duration),
    /// Still open when the probe stopped waiting.
    Open,
}

/// Opens `n` connections that each send half a header, and waits up to `wait` for each to end.
fn stall(addr: SocketAddr, n: usize, wait: Duration) -> Vec<std::thread::JoinHandle<Fate>> {
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(addr).expect("connect");
            let opened = Instant::now();
            std::thread::spawn(move || {
                let _ = s.write_all(HALF_A_HEADER);
                let _ = s.set_read_timeout(Some(wait));
                let mut got = Vec::new();
                match s.read_to_end(&mut got) {
                    Ok(_) if got.starts_with(b"HTTP/1.1 503") => Fate::Refused(opened.elapsed()),
                    Ok(_) => Fate::Closed(opened.elapsed()),
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                        Fate::Closed(opened.elapsed())
                    }
                    Err(_) => Fate::Open,
                }
            })
        })
        .collect()
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("storage") {
        storage();
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("rounds") {
        rounds();
        return;
    }
    let clients: usize = std::env::args()
        .nth(1)
        .map_or(100, |a| a.parse().expect("CLIENTS is a number"));

    println!("## {clients} clients send half a header (defaults: header timeout 10 s)");
    let server = Server::start("");
    let idle_fds = server.fds();
    let held = stall(server.addr, clients, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "server fds: {idle_fds} idle, {} while held; /healthz meanwhile: {}",
        server.fds(),
        server
            .healthz_ms()
            .map_or("failed".into(), |ms| format!("200 in {ms:.1} ms"))
    );
    let fates: Vec<Fate> = held
        .into_iter()
        .map(|h| h.join().expect("client"))
        .collect();
    let closed: Vec<Duration> = fates
        .iter()
        .filter_map(|f| match f {
            Fate::Closed(d) => Some(*d),
            _ => None,
        })
        .collect();
    let open = fates.iter().filter(|f| matches!(f, Fate::Open)).count();
    println!(
        "closed by the server: {} (after {} to {}), still open after 20 s: {open}, server fds after: {}",
        closed.len(),
        closed.iter().min().map_or("-".into(), |d| secs(*d)),
        closed.iter().max().map_or("-".into(), |d| secs(*d)),
        server.fds()
    );
    drop(server);

    let cap = (clients / 2).max(1);
    println!("\n## {clients} clients send half a header, max_connections = {cap}");
    let server = Server::start(&format!("max_connections = {cap}\nheader_timeout_secs = 2"));
    let fates: Vec<Fate> = stall(server.addr, clients, Duration::from_secs(10))
        .into_iter()
        .map(|h| h.join().expect("client"))
        .collect();
    let refused: Vec<Duration> = fates
        .iter()
        .filter_map(|f| match f {
            Fate::Refused(d) => Some(*d),
            _ => None,
        })
        .collect();
    println!(
        "answered 503 and closed: {} (slowest after {}); held until the header timeout: {}",
        refused.len(),
        refused.iter().max().map_or("-".into(), |d| format!(
            "{:.1} ms",
            d.as_secs_f64() * 1000.0
        )),
        fates
            .iter()
            .filter(|f| matches!(f, Fate::Closed(_)))
            .count()
    );
    drop(server);

    for grace in [10, 2] {
        println!(
            "\n## SIGTERM with one stalled client held (shutdown grace {grace} s, header timeout 60 s)"
        );
        let mut server = Server::start(&format!(
            "shutdown_grace_secs = {grace}\nheader_timeout_secs = 60"
        ));
        let _stalled = stall(server.addr, 1, Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(300));
        let started = Instant::now();
        let sent = Command::new("kill")
            .args(["-TERM", &server.child.id().to_string()])
            .status();
        assert!(sent.is_ok_and(|s| s.success()), "could not send SIGTERM");
        let status = server.child.wait().expect("wait for the server");
        println!(
            "exited ({status}) {} after SIGTERM",
            secs(started.elapsed())
        );
    }
    println!("\n## SIGTERM with no client");
    let mut server = Server::start("");
    let started = Instant::now();
    let _ = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status();
    let status = server.child.wait().expect("wait for the server");
    println!(
        "exited ({status}) {} after SIGTERM",
        secs(started.elapsed())
    );
}

impl Server {
    fn store(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    fn token(&self, user: &str) -> String {
        let out = Command::new(sync_binary())
            .args(["token", "create", "--user", user, "--store"])
            .arg(format!("fs:{}", self.store().display()))
            .output()
            .expect("token create");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .lines()
            .last()
            .expect("a token")
            .trim()
            .to_owned()
    }

    /// Peak and current resident memory of the server process, in MiB (`/proc`).
    fn rss_mib(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let kib = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (kib("VmHWM:") / 1024.0, kib("VmRSS:") / 1024.0)
    }

    /// Files and bytes under `rel` in the store.
    fn disk(&self, rel: &str) -> (usize, u64) {
        let mut stack = vec![self.store().join(rel)];
        let (mut files, mut bytes) = (0, 0);
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                // A file the server's collection removed while this walk ran is not counted.
                let Ok(meta) = e.metadata() else {
                    continue;
                };
                if meta.is_dir() {
                    stack.push(e.path());
                } else {
                    files += 1;
                    bytes += meta.len();
                }
            }
        }
        (files, bytes)
    }

    /// One request on its own connection: status, body, time to the whole answer.
    fn call(&self, path: &str, token: &str, body: &[u8]) -> (u16, Vec<u8>, Duration) {
        let started = Instant::now();
        let mut s = TcpStream::connect(self.addr).expect("connect");
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: probe\r\nauthorization: Bearer {token}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body);
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        let took = started.elapsed();
        let status = std::str::from_utf8(reply.get(9..12).unwrap_or(b"000"))
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let at = reply
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(reply.len(), |i| i + 4);
        (status, reply[at..].to_vec(), took)
    }

    /// A commit that must apply; each change's revision.
    fn commit(
        &self,
        token: &str,
        scope: &str,
        changes: &[serde_json::Value],
    ) -> (Vec<String>, Duration) {
        let body = serde_json::json!({"scope": scope, "changes": changes}).to_string();
        let (status, reply, took) = self.call("/v1/memory/commit", token, body.as_bytes());
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&reply));
        let v: serde_json::Value = serde_json::from_slice(&reply).expect("json");
        let revs = v["applied"]
            .as_array()
            .expect("applied")
            .iter()
            .map(|a| a["revision"].as_str().expect("revision").to_owned())
            .collect();
        (revs, took)
    }
}

fn put(id: &str, base: Option<&str>, body: &str) -> serde_json::Value {
    let note = memoria_shared::Note::new(memoria_shared::NoteId::new(id).expect("id"), id, body);
    serde_json::json!({"id": id, "op": "put", "baseRevision": base,
        "body": note.serialize(), "hash": memoria_shared::ContentHash::of_synced_note(&note)})
}

fn delete(id: &str, base: &str) -> serde_json::Value {
    serde_json::json!({"id": id, "op": "delete", "baseRevision": base})
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median and largest of `times`, in ms.
fn spread(mut times: Vec<Duration>) -> String {
    times.sort();
    format!(
        "median {:.1} ms, max {:.1} ms",
        ms(times[times.len() / 2]),
        ms(*times.last().expect("times"))
    )
}

/// The probes send more requests than an account's default rate limit allows.
const UNLIMITED_RATE: &str = "\n[rate_limit]\nburst = 1000000\nper_minute = 1000000";

fn storage() {
    let grace = Duration::from_millis(4300);
    println!("## one note edited 200 times (request_timeout_secs = 2: grace 4 s)");
    let server = Server::start(&format!("request_timeout_secs = 2{UNLIMITED_RATE}"));
    let token = server.token("probe");
    let mut rev = server
        .commit(&token, "user", &[put("n", None, "0\n")])
        .0
        .remove(0);
    for i in 1..=200 {
        rev = server
            .commit(
                &token,
                "user",
                &[put("n", Some(&rev), &format!("edit {i}\n"))],
            )
            .0
            .remove(0);
    }
    let within = server.disk("users/probe/memory/objects/n").0;
    std::thread::sleep(grace);
    server.commit(&token, "user", &[put("n", Some(&rev), "last\n")]);
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "revision files of the note: {within} right after the 200 edits (inside the grace), {} after one more edit past it",
        server.disk("users/probe/memory/objects/n").0
    );

    println!("\n## 31 rounds of deleting 250 notes and creating 250 new ones");
    let mut live: Vec<(String, String)> = Vec::new();
    let first: Vec<serde_json::Value> = (0..250)
        .map(|i| put(&format!("r0-{i}"), None, "x\n"))
        .collect();
    let revs = server.commit(&token, "project:churn", &first).0;
    live.extend((0..250).map(|i| format!("r0-{i}")).zip(revs));
    for round in 1..=31 {
        let mut changes: Vec<serde_json::Value> =
            live.iter().map(|(id, rev)| delete(id, rev)).collect();
        let ids: Vec<String> = (0..250).map(|i| format!("r{round}-{i}")).collect();
        changes.extend(ids.iter().map(|id| put(id, None, "x\n")));
        let revs = server.commit(&token, "project:churn", &changes).0;
        live = ids.into_iter().zip(revs[250..].iter().cloned()).collect();
    }
    let manifest = server
        .store()
        .join("users/probe/projects/churn/memory/manifest.json");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let (files, bytes) = server.disk("users/probe/projects/churn/memory/objects");
    println!(
        "tombstones in the manifest: {} (7,750 deleted), manifest {} bytes; revision files {files} ({bytes} bytes)",
        text.matches("\"deleted\":true").count(),
        text.len()
    );
    std::thread::sleep(grace);
    let collected = Instant::now();
    server.commit(&token, "project:churn", &[put("after", None, "x\n")]);
    let objects = || server.disk("users/probe/projects/churn/memory/objects").0;
    let mut left = objects();
    while left > 251 && collected.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
        left = objects();
    }
    println!(
        "revision files after one more commit past the grace: {left} (251 live notes), {} after that commit",
        secs(collected.elapsed())
    );
    let (all_files, all_bytes) = server.disk("");
    println!("whole store: {all_files} files, {}", mib(all_bytes));
    drop(server);

    println!("\n## memory: four largest commits at once, one account (500 notes of 127 KiB each)");
    let server = Server::start(UNLIMITED_RATE);
    let token = server.token("probe");
    let (peak0, rss0) = server.rss_mib();
    let line = "y".repeat(127) + "\n";
    let body = line.repeat(127 * 1024 / 128 - 8);
    let requests: Vec<Vec<u8>> = (0..4)
        .map(|p| {
            let changes: Vec<serde_json::Value> = (0..500)
                .map(|i| put(&format!("big-{i}"), None, &body))
                .collect();
            serde_json::json!({"scope": format!("project:p{p}"), "changes": changes})
                .to_string()
                .into_bytes()
        })
        .collect();
    let size = requests[0].len();
    let started = Instant::now();
    let answers: Vec<(u16, Duration)> = std::thread::scope(|s| {
        let handles: Vec<_> = requests
            .iter()
            .map(|r| {
                let (server, token) = (&server, &token);
                s.spawn(move || {
                    let (status, _, took) = server.call("/v1/memory/commit", token, r);
                    (status, took)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let health = server.healthz_ms();
        println!(
            "/healthz while they are parsed and checked: {}",
            health.map_or("failed".into(), |ms| format!("200 in {ms:.1} ms"))
        );
        handles
            .into_iter()
            .map(|h| h.join().expect("client"))
            .collect()
    });
    let (peak, rss) = server.rss_mib();
    println!(
        "each request {}; answers {:?} in {:.1} s; server RSS idle {rss0:.1} MiB (peak {peak0:.1}), peak under the commits {peak:.1} MiB, after {rss:.1} MiB",
        mib(size as u64),
        answers.iter().map(|a| a.0).collect::<Vec<_>>(),
        started.elapsed().as_secs_f64()
    );
    println!("disk after: {}", mib(server.disk("").1));
    let have: Vec<String> = (0..100_000u32).map(|i| format!("{:064x}", i)).collect();
    let snap = serde_json::json!({"scope": "project:p0", "have": have}).to_string();
    let (status, _, took) = server.call("/v1/memory/snapshot", &token, snap.as_bytes());
    println!(
        "snapshot with 100,000 `have` hashes ({}): {status} in {:.0} ms; peak RSS now {:.1} MiB",
        mib(snap.len() as u64),
        ms(took),
        server.rss_mib().0
    );
    drop(server);

    println!("\n## latency in a scope of 5,000 notes (defaults)");
    let server = Server::start(UNLIMITED_RATE);
    let token = server.token("probe");
    let mut revs = Vec::new();
    for batch in 0..10 {
        let changes: Vec<serde_json::Value> = (0..500)
            .map(|i| {
                put(
                    &format!("note-{}", batch * 500 + i),
                    None,
                    &format!("body of note {i}\nwith a second line\n"),
                )
            })
            .collect();
        revs.extend(server.commit(&token, "user", &changes).0);
    }
    let mut commits = Vec::new();
    for i in 0..30 {
        let (r, took) = server.commit(
            &token,
            "user",
            &[put("note-7", Some(&revs[7]), &format!("edit {i}\n"))],
        );
        revs[7] = r[0].clone();
        commits.push(took);
    }
    let mut full = Vec::new();
    let mut version = String::new();
    let mut generation = 0;
    for _ in 0..5 {
        let (status, reply, took) =
            server.call("/v1/memory/snapshot", &token, br#"{"scope":"user"}"#);
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_slice(&reply).expect("json");
        version = v["manifestVersion"].as_str().expect("version").to_owned();
        generation = v["generation"].as_u64().expect("generation");
        full.push(took);
    }
    let poll = serde_json::json!({"scope": "user", "knownManifest": version}).to_string();
    let polls: Vec<Duration> = (0..30)
        .map(|_| {
            server
                .call("/v1/memory/snapshot", &token, poll.as_bytes())
                .2
        })
        .collect();
    server.commit(
        &token,
        "user",
        &[put("note-8", Some(&revs[8]), "changed\n")],
    );
    let since = serde_json::json!({"scope": "user", "since": generation}).to_string();
    let deltas: Vec<Duration> = (0..30)
        .map(|_| {
            server
                .call("/v1/memory/snapshot", &token, since.as_bytes())
                .2
        })
        .collect();
    println!("one-note commit: {}", spread(commits));
    println!(
        "full snapshot (5,000 entries, first page of bodies): {}",
        spread(full)
    );
    println!("poll with nothing new (knownManifest): {}", spread(polls));
    println!(
        "changes since a generation (one note changed): {}",
        spread(deltas)
    );
    println!("server peak RSS: {:.1} MiB", server.rss_mib().0);
}

/// Rounds of eight 10 MiB commits at once from one account allowed two in flight: the peak and
/// current RSS after each round.
fn rounds() {
    let server = Server::start(&format!(
        "requests_per_account = 2\n[quotas]\nchanges_per_commit = 20\nbody_bytes = 524288{UNLIMITED_RATE}"
    ));
    let token = server.token("probe");
    println!("idle: {:?}", server.rss_mib());
    let text = |seed: u64| -> String {
        let mut x = seed * 2_654_435_761 + 1;
        (0..500 * 1024)
            .map(|i| {
                if i % 80 == 79 {
                    return '\n';
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (b'a' + (x % 26) as u8) as char
            })
            .collect()
    };
    for round in 0..4u64 {
        let requests: Vec<Vec<u8>> = (0..8u64)
            .map(|n| {
                let changes: Vec<serde_json::Value> = (0..20u64)
                    .map(|i| {
                        put(
                            &format!("r{round}-c{n}-n{i}"),
                            None,
                            &text(round * 1000 + n * 100 + i),
                        )
                    })
                    .collect();
                serde_json::json!({"scope": "user", "changes": changes})
                    .to_string()
                    .into_bytes()
            })
            .collect();
        let answers: Vec<u16> = std::thread::scope(|s| {
            let hs: Vec<_> = requests
                .iter()
                .map(|r| {
                    let (server, token) = (&server, &token);
                    s.spawn(move || server.call("/v1/memory/commit", token, r).0)
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        println!(
            "round {round} ({} MiB each): {answers:?} peak/now {:?}",
            requests[0].len() >> 20,
            server.rss_mib()
        );
    }
}
