//! An OpenAI-compatible chat endpoint on loopback for tests: it gives the answers a real model
//! never gives on purpose (prose, an injection, a credential, ids it was not shown) and keeps
//! every request, so a test can check what was sent. Only tests depend on this crate; the
//! end-to-end tests that need a model talk to a real llama.cpp server instead.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One request the endpoint got.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line, e.g. `POST /v1/chat/completions HTTP/1.1`.
    pub line: String,
    /// The body as sent.
    pub body: String,
}

/// A chat endpoint serving on `127.0.0.1` until the test process ends.
pub struct ChatEndpoint {
    url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl ChatEndpoint {
    /// Answers each request with `{"choices": [{"message": {"role": "assistant", "content":
    /// answer(request)}}]}`, `request` being the request's JSON (`null` if it is not JSON).
    pub fn serve(mut answer: impl FnMut(&Value) -> String + Send + 'static) -> ChatEndpoint {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the chat endpoint");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let kept = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let Some(request) = read_request(&stream) else {
                    continue;
                };
                let json = serde_json::from_str(&request.body).unwrap_or(Value::Null);
                let content = answer(&json);
                // Kept before the answer goes out: once a client has its answer, the request
                // is among `requests()`.
                kept.lock().unwrap().push(request);
                let reply = serde_json::json!({
                    "choices": [{"message": {"role": "assistant", "content": content}}]
                })
                .to_string();
                let mut out = stream;
                let _ = write!(
                    out,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            }
        });
        ChatEndpoint { url, requests }
    }

    /// Answers the requests with `answers` in order, and every request after them with
    /// `otherwise`.
    pub fn answering(answers: Vec<&'static str>, otherwise: &'static str) -> ChatEndpoint {
        let mut answers = answers.into_iter();
        ChatEndpoint::serve(move |_| answers.next().unwrap_or(otherwise).to_owned())
    }

    /// Answers every request with `content`.
    pub fn always(content: &'static str) -> ChatEndpoint {
        ChatEndpoint::answering(Vec::new(), content)
    }

    /// `http://127.0.0.1:PORT`, the base URL a client is configured with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The requests answered so far, in the order they came.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// The bodies of [`requests`](Self::requests).
    pub fn bodies(&self) -> Vec<String> {
        self.requests().into_iter().map(|r| r.body).collect()
    }
}

/// Reads one HTTP request from `stream`: its request line and its `Content-Length` body
/// (`None` if the client closed early or sent something else). A relay in front of a real
/// model reads its requests with it too.
pub fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut length = 0;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        if h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let body = String::from_utf8(body).ok()?;
    Some(Request { line, body })
}
