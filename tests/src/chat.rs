//! An OpenAI-compatible chat endpoint on loopback, for the tests that ask a model for a draft:
//! each request is answered with the assistant's content a function makes of the request's JSON.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::JoinHandle;

use serde_json::Value;

/// Reads one request: its request line and its `Content-Length` body.
pub fn read_request(stream: &TcpStream) -> Option<(String, String)> {
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
    Some((line, String::from_utf8(body).ok()?))
}

/// Serves `count` requests (`None`: until the test ends), each answered with
/// `{"choices": [{"message": {"content": answer(request)}}]}`. Returns the address and a handle
/// that gives back each request's line and body once `count` were served.
pub fn serve(
    count: Option<usize>,
    answer: impl Fn(&Value) -> String + Send + 'static,
) -> (String, JoinHandle<Vec<(String, String)>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the chat endpoint");
    let url = format!("http://{}", listener.local_addr().unwrap());
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for stream in listener.incoming().flatten() {
            let Some((line, body)) = read_request(&stream) else {
                continue;
            };
            let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let reply = serde_json::json!({
                "choices": [{"message": {"role": "assistant", "content": answer(&request)}}]
            })
            .to_string();
            let mut out = stream;
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
            seen.push((line, body));
            if count.is_some_and(|n| seen.len() >= n) {
                break;
            }
        }
        seen
    });
    (url, handle)
}
