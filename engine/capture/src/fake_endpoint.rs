//! A chat endpoint on loopback for this crate's unit tests: the answers the real test model
//! never gives on purpose (prose, an injection, a credential, ids it was not shown). The
//! end-to-end tests talk to a real llama.cpp server instead.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::json;

/// Answers each request with the next of `answers` as the assistant's content (`otherwise`
/// once they run out), and keeps the request bodies. Returns its URL and the bodies.
pub(crate) fn endpoint(
    answers: Vec<&'static str>,
    otherwise: &'static str,
) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    std::thread::spawn(move || {
        let mut answers = answers.into_iter();
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                if h == "\r\n" || h.is_empty() {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            kept.lock().unwrap().push(String::from_utf8(body).unwrap());
            let content = answers.next().unwrap_or(otherwise);
            let reply =
                json!({"choices": [{"message": {"role": "assistant", "content": content}}]})
                    .to_string();
            let mut out = stream;
            write!(
                out,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            )
            .unwrap();
        }
    });
    (url, seen)
}
