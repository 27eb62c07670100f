//! Probes a `memoria-sync serve` process with stalled clients and prints what it holds: the
//! figures behind the sync server's limits rows in `docs/BENCHMARKS.md`.
//!
//! ```sh
//! cargo build --release -p memoria-sync-server --bins --examples
//! $CARGO_TARGET_DIR/release/examples/limits_probe [CLIENTS]      # default 100
//! ```
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
    _dir: tempfile::TempDir,
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
        Server {
            child,
            addr,
            _dir: dir,
        }
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
