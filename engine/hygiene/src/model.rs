//! The model draft of a merge: one request to an OpenAI-compatible chat endpoint
//! (`POST …/v1/chat/completions`), made only when `model.url` is set. The notes' text goes to
//! that endpoint and nowhere else; notes holding secrets are never sent.

use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// How long a draft may take before it is given up.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Where and how to ask. The key, when there is one, comes from `MEMORIA_MODEL__API_KEY`.
pub struct ModelSettings {
    pub url: String,
    pub name: String,
    pub api_key: Option<String>,
}

impl std::fmt::Debug for ModelSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSettings")
            .field("url", &self.url)
            .field("name", &self.name)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The chat-completions address for a configured URL: as given when it already names the
/// path, else with `/v1/chat/completions` (or `/chat/completions` after a `/v1`) appended.
pub fn endpoint(url: &str) -> String {
    let base = url.trim_end_matches('/');
    if base.ends_with("/chat/completions") {
        base.to_owned()
    } else if base.ends_with("/v1") {
        format!("{base}/chat/completions")
    } else {
        format!("{base}/v1/chat/completions")
    }
}

const INSTRUCTIONS: &str = "You merge several notes of a person's long-term memory into one \
note. Keep every fact, decision and [[link]] that any of them holds; drop repetition; keep the \
notes' language. Reply with a JSON object only: {\"summary\": \"one line, under 200 \
characters\", \"body\": \"the merged note in Markdown\"}.";

/// Asks the model for a merged summary and body of `notes` (summary, body).
pub fn draft(settings: &ModelSettings, notes: &[(String, String)]) -> Result<(String, String)> {
    let mut text = String::new();
    for (i, (summary, body)) in notes.iter().enumerate() {
        text.push_str(&format!(
            "## Note {}: {summary}\n\n{}\n\n",
            i + 1,
            body.trim()
        ));
    }
    let request = json!({
        "model": settings.name,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": text},
        ],
    });
    let url = endpoint(&settings.url);
    let fail = |reason: String| Error::ModelEndpoint {
        url: url.clone(),
        reason,
    };
    let reply = post(&url, settings.api_key.as_deref(), &request).map_err(fail)?;
    let content = reply
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| fail("the reply has no choices[0].message.content".into()))?;
    parse_draft(content).ok_or_else(|| {
        fail("the reply is not the JSON object with a summary and a body that was asked for".into())
    })
}

/// The `{summary, body}` object of a reply, also when the model wrapped it in a code fence.
fn parse_draft(content: &str) -> Option<(String, String)> {
    let t = content.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .map(|r| r.trim_end().trim_end_matches("```"))
        .unwrap_or(t);
    let v: Value = serde_json::from_str(t.trim()).ok()?;
    let summary = v.get("summary")?.as_str()?.trim();
    let body = v.get("body")?.as_str()?;
    let summary = summary.lines().next().unwrap_or("").trim().to_owned();
    (!summary.is_empty() && !body.trim().is_empty()).then(|| (summary, body.to_owned()))
}

/// Sends the request on a thread of its own (with its own runtime, so this works from any
/// caller, inside an async runtime or not) and returns the reply's JSON.
fn post(url: &str, api_key: Option<&str>, body: &Value) -> std::result::Result<Value, String> {
    let (url, api_key, body) = (url.to_owned(), api_key.map(String::from), body.clone());
    let worker = std::thread::spawn(move || -> std::result::Result<Value, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async move {
            let client = reqwest::Client::builder()
                .timeout(TIMEOUT)
                .build()
                .map_err(|e| e.to_string())?;
            let mut req = client.post(&url).json(&body);
            if let Some(k) = api_key {
                req = req.bearer_auth(k);
            }
            let resp = req.send().await.map_err(|e| {
                if e.is_timeout() {
                    "no answer in time".to_owned()
                } else {
                    format!("cannot reach it ({e})")
                }
            })?;
            let status = resp.status();
            let text = resp.text().await.map_err(|e| e.to_string())?;
            if !status.is_success() {
                let head: String = text.chars().take(200).collect();
                return Err(format!("it answered {status}: {head}"));
            }
            serde_json::from_str(&text).map_err(|_| "the reply is not JSON".to_owned())
        })
    });
    worker
        .join()
        .unwrap_or_else(|_| Err("the request thread failed".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_path_is_added_once() {
        assert_eq!(endpoint("http://h:1"), "http://h:1/v1/chat/completions");
        assert_eq!(endpoint("http://h:1/v1/"), "http://h:1/v1/chat/completions");
        assert_eq!(
            endpoint("http://h:1/api/chat/completions"),
            "http://h:1/api/chat/completions"
        );
    }

    #[test]
    fn a_fenced_reply_is_read_and_a_reply_without_a_body_is_not() {
        let r = parse_draft("```json\n{\"summary\": \"S\", \"body\": \"B\"}\n```").unwrap();
        assert_eq!(r, ("S".into(), "B".into()));
        assert!(parse_draft("{\"summary\": \"S\"}").is_none());
        assert!(parse_draft("I merged them for you!").is_none());
    }
}
