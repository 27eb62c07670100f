//! A loopback HTTP/1.1 proxy in front of a test server that can hold requests whose request
//! line contains a pattern: keep them back from the server ([`Hold::Request`]), or forward them
//! and keep back the reply ([`Hold::Reply`]). It catches a client in the middle of a request
//! and records what reached the server and which held requests the client abandoned (closed its
//! connection). It can also lose replies: forward a matching request, let the server answer,
//! and close the client's connection instead of passing the answer on ([`Proxy::drop_replies`]),
//! which is what a client sees when a network fails after the server acted. It understands only
//! `Content-Length` bodies, which is what our client and the S3 SDK send. Stopped on drop.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Which requests to hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    Nothing,
    /// Keep matching requests back from the server until released.
    Request(String),
    /// Forward matching requests, and keep their replies back until released.
    Reply(String),
    /// Keep the first matching request back until released; forward the others.
    First(String),
}

#[derive(Debug)]
struct Shared {
    upstream: SocketAddr,
    hold: Mutex<Hold>,
    forwarded: Mutex<Vec<String>>,
    held: AtomicUsize,
    /// Whether the request a [`Hold::First`] holds has come.
    first_taken: AtomicBool,
    abandoned: AtomicUsize,
    /// The pattern whose replies are lost, and how many more to lose.
    drop_reply: Mutex<Option<(String, usize)>>,
    dropped: AtomicUsize,
    /// Bytes of requests forwarded (head and body) and of replies passed back.
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
    stop: AtomicBool,
}

/// A running proxy; stopped on drop.
#[derive(Debug)]
pub struct Proxy {
    pub url: String,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

const POLL: Duration = Duration::from_millis(20);

impl Proxy {
    /// A proxy on 127.0.0.1 in front of `upstream_url` (`http://host:port`).
    pub fn start(upstream_url: &str) -> Proxy {
        let upstream: SocketAddr = upstream_url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .expect("an http://ip:port upstream");
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            upstream,
            hold: Mutex::new(Hold::Nothing),
            forwarded: Mutex::default(),
            held: AtomicUsize::new(0),
            first_taken: AtomicBool::new(false),
            abandoned: AtomicUsize::new(0),
            drop_reply: Mutex::new(None),
            dropped: AtomicUsize::new(0),
            bytes_up: AtomicU64::new(0),
            bytes_down: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(conn) = conn {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        let _ = serve(conn, &s);
                    });
                }
            }
        });
        Proxy {
            url: format!("http://{addr}"),
            shared,
            accept: Some(accept),
            addr,
        }
    }

    /// Holds from now on (or releases with [`Hold::Nothing`]).
    pub fn hold(&self, h: Hold) {
        self.shared.first_taken.store(false, Ordering::SeqCst);
        *self.shared.hold.lock().unwrap() = h;
    }

    /// Request lines forwarded to the server so far.
    pub fn forwarded(&self) -> Vec<String> {
        self.shared.forwarded.lock().unwrap().clone()
    }

    /// Requests (or replies) being held or ever held.
    pub fn held(&self) -> usize {
        self.shared.held.load(Ordering::SeqCst)
    }

    /// Held requests whose client closed the connection while waiting.
    pub fn abandoned(&self) -> usize {
        self.shared.abandoned.load(Ordering::SeqCst)
    }

    /// Loses the replies of the next `count` requests whose request line contains `pattern`:
    /// each is forwarded, the server answers, and the client's connection is closed instead.
    pub fn drop_replies(&self, pattern: &str, count: usize) {
        *self.shared.drop_reply.lock().unwrap() = Some((pattern.to_owned(), count));
    }

    /// Requests forwarded, bytes sent to the server and bytes passed back, so far (HTTP
    /// heads included: what crossed the wire).
    pub fn traffic(&self) -> (usize, u64, u64) {
        (
            self.shared.forwarded.lock().unwrap().len(),
            self.shared.bytes_up.load(Ordering::SeqCst),
            self.shared.bytes_down.load(Ordering::SeqCst),
        )
    }

    /// Replies lost so far.
    pub fn dropped(&self) -> usize {
        self.shared.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.hold(Hold::Nothing);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

impl Shared {
    fn holds(&self, line: &str) -> Hold {
        match &*self.hold.lock().unwrap() {
            Hold::Request(p) if line.contains(p.as_str()) => Hold::Request(p.clone()),
            Hold::Reply(p) if line.contains(p.as_str()) => Hold::Reply(p.clone()),
            _ => Hold::Nothing,
        }
    }

    /// How a request arriving now is held: a [`Hold::First`] takes the first matching one.
    fn holds_new(&self, line: &str) -> Hold {
        let first = match &*self.hold.lock().unwrap() {
            Hold::First(p) => Some(p.clone()),
            _ => None,
        };
        match first {
            Some(p)
                if line.contains(p.as_str()) && !self.first_taken.swap(true, Ordering::SeqCst) =>
            {
                Hold::First(p)
            }
            Some(_) => Hold::Nothing,
            None => self.holds(line),
        }
    }

    /// Whether a request held as `hold` is still held.
    fn still_holds(&self, line: &str, hold: &Hold) -> bool {
        match hold {
            Hold::First(_) => *self.hold.lock().unwrap() == *hold,
            _ => self.holds(line) != Hold::Nothing,
        }
    }

    /// Whether the reply to `line` is to be lost (counting it when so).
    fn drops_reply(&self, line: &str) -> bool {
        let mut d = self.drop_reply.lock().unwrap();
        match &mut *d {
            Some((p, n)) if *n > 0 && line.contains(p.as_str()) => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// Waits while `line`, held as `hold`, is held; false when the client went away meanwhile.
    fn wait_while_held(&self, line: &str, hold: &Hold, client: &TcpStream) -> bool {
        client.set_read_timeout(Some(POLL)).ok();
        let mut byte = [0u8; 1];
        while self.still_holds(line, hold) && !self.stop.load(Ordering::SeqCst) {
            match client.peek(&mut byte) {
                Ok(0) => {
                    self.abandoned.fetch_add(1, Ordering::SeqCst);
                    return false;
                }
                Ok(_) => std::thread::sleep(POLL),
                Err(_) => {} // timed out: still there
            }
        }
        client.set_read_timeout(None).ok();
        true
    }
}

/// Reads one request (head and `Content-Length` body) from `client`, keeping what follows in
/// `pending`; `None` at the end of the connection.
fn read_request(client: &mut TcpStream, pending: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let mut chunk = [0u8; 64 * 1024];
    let head_end = loop {
        if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = client.read(&mut chunk).ok().filter(|n| *n > 0)?;
        pending.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&pending[..head_end]).into_owned();
    let line = head.lines().next().unwrap_or_default().to_owned();
    let len: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    while pending.len() < head_end + len {
        let n = client.read(&mut chunk).ok().filter(|n| *n > 0)?;
        pending.extend_from_slice(&chunk[..n]);
    }
    let request: Vec<u8> = pending.drain(..head_end + len).collect();
    Some((line, request))
}

fn serve(mut client: TcpStream, shared: &Arc<Shared>) -> std::io::Result<()> {
    let mut upstream = TcpStream::connect(shared.upstream)?;
    // Replies flow back on their own thread, unless held.
    let reply_held = Arc::new(AtomicBool::new(false));
    let client_gone = Arc::new(AtomicBool::new(false));
    let lose_reply = Arc::new(AtomicBool::new(false));
    let back = {
        let mut from = upstream.try_clone()?;
        let mut to = client.try_clone()?;
        let (held, gone, lose) = (reply_held.clone(), client_gone.clone(), lose_reply.clone());
        let shared = shared.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64 * 1024];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if lose.load(Ordering::SeqCst) {
                    // The server has answered: the request took effect. The client never hears.
                    shared.dropped.fetch_add(1, Ordering::SeqCst);
                    gone.store(true, Ordering::SeqCst);
                    let _ = to.shutdown(Shutdown::Both);
                    let _ = from.shutdown(Shutdown::Both);
                    break;
                }
                while held.load(Ordering::SeqCst) && !gone.load(Ordering::SeqCst) {
                    std::thread::sleep(POLL);
                }
                if gone.load(Ordering::SeqCst) {
                    break;
                }
                // Counted before the client can read it: a client that has its reply also
                // finds it in `traffic()`.
                shared.bytes_down.fetch_add(n as u64, Ordering::SeqCst);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        })
    };
    let mut pending = Vec::new();
    while let Some((line, request)) = read_request(&mut client, &mut pending) {
        if client_gone.load(Ordering::SeqCst) {
            break;
        }
        let hold = shared.holds_new(&line);
        if matches!(hold, Hold::Request(_) | Hold::First(_)) {
            shared.held.fetch_add(1, Ordering::SeqCst);
            if !shared.wait_while_held(&line, &hold, &client) {
                client_gone.store(true, Ordering::SeqCst);
                break;
            }
        }
        if shared.drops_reply(&line) {
            lose_reply.store(true, Ordering::SeqCst);
        }
        // Counted before the server can answer it, so a client that has its reply also finds
        // its request in `traffic()`.
        shared
            .bytes_up
            .fetch_add(request.len() as u64, Ordering::SeqCst);
        shared.forwarded.lock().unwrap().push(line.clone());
        upstream.write_all(&request)?;
        if matches!(hold, Hold::Reply(_)) {
            reply_held.store(true, Ordering::SeqCst);
            shared.held.fetch_add(1, Ordering::SeqCst);
            let stayed = shared.wait_while_held(&line, &hold, &client);
            reply_held.store(false, Ordering::SeqCst);
            if !stayed {
                client_gone.store(true, Ordering::SeqCst);
                break;
            }
        }
    }
    let _ = upstream.shutdown(Shutdown::Both);
    let _ = back.join();
    Ok(())
}
