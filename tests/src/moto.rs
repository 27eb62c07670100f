//! A real S3 server for tests: moto (`scripts/install-moto.sh` installs it). [`MotoServer`]
//! starts `moto_server` on a free port, waits until it answers, creates a bucket, and kills the
//! server when dropped. A missing moto is a test failure that says how to install it — never a
//! silent skip.
//!
//! Moto's threaded server checks `If-Match` / `If-None-Match` and then stores the object without
//! a lock (`moto/s3/responses.py`, `put_object`), so under a race two writers can both win: our
//! conformance suite saw it at round 141 of 200. Real S3 and R2 evaluate the condition
//! atomically. To test our client against those semantics, the fixture runs moto's own server
//! entry point (through the Python interpreter named in `moto_server`'s shebang) with every
//! request handled under one lock. Requests still arrive concurrently over separate connections.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Bucket every [`MotoServer`] creates.
pub const BUCKET: &str = "memoria-test";

/// Credentials for moto (it accepts any), as environment variables for `memoria-sync`.
pub const CREDENTIALS: [(&str, &str); 2] = [
    ("AWS_ACCESS_KEY_ID", "test"),
    ("AWS_SECRET_ACCESS_KEY", "test"),
];

/// A running moto S3 server; killed on drop.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    pub port: u16,
}

/// Where `moto_server` is expected: `MEMORIA_MOTO_SERVER`, else the venv the install script makes.
pub fn moto_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMORIA_MOTO_SERVER") {
        return PathBuf::from(p);
    }
    let tools = std::env::var_os("MEMORIA_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home =
                std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
            home.join(".cache/memoria/tools")
        });
    tools.join("moto-venv/bin/moto_server")
}

/// Runs `moto.server.main` with each request handled under one lock, so conditional writes are
/// atomic as on real S3 (see the module docs).
const SERIALIZED_MOTO: &str = "
import sys, threading
from moto import server
from moto.moto_server import werkzeug_app
lock = threading.Lock()
handle = werkzeug_app.DomainDispatcherApplication.__call__
def serialized(self, environ, start_response):
    with lock:
        return handle(self, environ, start_response)
werkzeug_app.DomainDispatcherApplication.__call__ = serialized
sys.argv[0] = 'moto_server'
server.main(sys.argv[1:])
";

/// The interpreter of a Python console script (its `#!` line), if `bin` is one.
fn python_of(bin: &std::path::Path) -> Option<PathBuf> {
    let text = std::fs::read(bin).ok()?;
    let first = text.split(|b| *b == b'\n').next()?;
    let interp = std::str::from_utf8(first).ok()?.strip_prefix("#!")?.trim();
    (interp.contains("python") && !interp.contains(' ')).then(|| PathBuf::from(interp))
}

/// One raw HTTP/1.1 request to 127.0.0.1:`port`; returns the status code.
fn http(port: u16, method: &str, path: &str) -> std::io::Result<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let head = String::from_utf8_lossy(&buf);
    head.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad HTTP answer: {head:.80}")))
}

impl MotoServer {
    /// Starts moto and creates [`BUCKET`]. Panics with install instructions when moto is missing.
    pub fn start() -> MotoServer {
        let bin = moto_binary();
        assert!(
            bin.exists(),
            "moto_server not found at {}: run scripts/install-moto.sh (or set MEMORIA_MOTO_SERVER \
             to a moto_server binary); the S3 tests need a real S3 server",
            bin.display()
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut cmd = match python_of(&bin) {
            Some(python) => {
                let mut c = Command::new(python);
                c.args(["-c", SERIALIZED_MOTO]);
                c
            }
            None => Command::new(&bin),
        };
        let child = cmd
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let mut server = MotoServer { child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("moto_server exited at start ({status}): run scripts/install-moto.sh again");
            }
            if http(port, "GET", "/moto-api/").is_ok_and(|s| s == 200) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "moto_server did not answer within 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let status = http(port, "PUT", &format!("/{BUCKET}")).expect("create bucket");
        assert_eq!(status, 200, "moto refused to create the test bucket");
        server
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The `--store` value for the test bucket.
    pub fn store_url(&self) -> String {
        format!(
            "s3://{BUCKET}?endpoint={}&region=us-east-1",
            self.endpoint()
        )
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
