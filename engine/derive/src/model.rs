//! The one way Memoria asks a chat model anything: one request to an OpenAI-compatible
//! endpoint (`POST …/v1/chat/completions`), made only when `model.url` is set. Merge drafts
//! (the hygiene crate) and model capture (the capture crate) both ask through [`ask`].
//!
//! **Invariant:** text leaves this machine masked. A model on loopback (`localhost`,
//! `127.0.0.0/8`, `::1`) or on a host the person lists in `model.localHosts` gets the text as
//! it is; any other host gets every message with the values of the masking classes replaced
//! (`memoria_store::mask`: IBANs, card numbers, phone numbers, emails; dates kept). When the
//! masking fails, nothing is sent. Text holding a secret is never handed to [`ask`] at all:
//! its callers leave such notes and messages out.

use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use memoria_store::config;
use memoria_store::home::Home;
use memoria_store::mask::{self, MaskFailed};

/// Where and how to ask. The key, when there is one, comes from `MEMORIA_MODEL__API_KEY`.
#[derive(Clone)]
pub struct ModelSettings {
    pub url: String,
    pub name: String,
    pub api_key: Option<String>,
    /// Hosts besides loopback that count as this machine's own (`model.localHosts`).
    pub local_hosts: Vec<String>,
}

impl std::fmt::Debug for ModelSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSettings")
            .field("url", &self.url)
            .field("name", &self.name)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("local_hosts", &self.local_hosts)
            .finish()
    }
}

impl ModelSettings {
    /// The settings in force in `home`; `None` when no `model.url` is set.
    pub fn load(home: &Home) -> Result<Option<ModelSettings>> {
        let Some(url) = config::get(home, "model.url")?.value else {
            return Ok(None);
        };
        let name = config::get(home, "model.name")?
            .value
            .unwrap_or_else(|| "default".into());
        let api_key = std::env::var("MEMORIA_MODEL__API_KEY")
            .ok()
            .filter(|k| !k.is_empty());
        let local_hosts = config::get(home, config::LOCAL_HOSTS_KEY)?
            .value
            .map(|v| {
                v.split(',')
                    .map(|h| h.trim().trim_matches(['[', ']']).to_ascii_lowercase())
                    .filter(|h| !h.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Some(ModelSettings {
            url,
            name,
            api_key,
            local_hosts,
        }))
    }

    /// Whether the endpoint is this machine's own: loopback, or a host listed in
    /// `model.localHosts`. Anything else, an address that does not parse included, is remote.
    pub fn is_local(&self) -> bool {
        let Some(host) = reqwest::Url::parse(&self.url).ok().and_then(|u| {
            u.host_str()
                .map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase())
        }) else {
            return false;
        };
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
            || self.local_hosts.contains(&host)
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

/// One question to the model: a system instruction and a user message.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    pub system: &'a str,
    pub user: &'a str,
    /// Ask for a JSON object (`response_format: json_object`).
    pub json: bool,
    pub max_tokens: Option<u32>,
    /// How long the answer may take before it is given up.
    pub timeout: Duration,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The assistant's content (`choices[0].message.content`).
    pub content: String,
    /// Whether the text sent was masked (the endpoint is remote).
    pub masked: bool,
}

/// Asks the model; the text is masked first unless the endpoint is local (see the module
/// docs). A failure (no answer in time, an error status, no content, masking that failed) is
/// `model`, naming the endpoint.
pub fn ask(settings: &ModelSettings, q: &Ask<'_>) -> Result<Answer> {
    ask_masked_by(settings, q, mask::mask)
}

fn ask_masked_by(
    settings: &ModelSettings,
    q: &Ask<'_>,
    masker: fn(&str) -> std::result::Result<String, MaskFailed>,
) -> Result<Answer> {
    let url = endpoint(&settings.url);
    let fail = |reason: String| Error::ModelEndpoint {
        url: url.clone(),
        reason,
    };
    let remote = !settings.is_local();
    let (system, user) = if remote {
        let failed = |e: MaskFailed| fail(format!("masking failed, so nothing was sent ({e})"));
        (
            masker(q.system).map_err(failed)?,
            masker(q.user).map_err(failed)?,
        )
    } else {
        (q.system.to_owned(), q.user.to_owned())
    };
    let mut request = json!({
        "model": settings.name,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ],
    });
    if q.json {
        request["response_format"] = json!({"type": "json_object"});
    }
    if let Some(n) = q.max_tokens {
        request["max_tokens"] = json!(n);
    }
    let reply = post(&url, settings.api_key.as_deref(), &request, q.timeout).map_err(fail)?;
    let content = reply
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| fail("the reply has no choices[0].message.content".into()))?;
    Ok(Answer {
        content: content.to_owned(),
        masked: remote,
    })
}

/// The JSON object of a model's reply, also when the model wrapped it in a code fence.
pub fn json_object(content: &str) -> Option<serde_json::Map<String, Value>> {
    let t = content.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .map(|r| r.trim_end().trim_end_matches("```"))
        .unwrap_or(t);
    match serde_json::from_str(t.trim()).ok()? {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// Sends the request on a thread of its own (with its own runtime, so this works from any
/// caller, inside an async runtime or not) and returns the reply's JSON.
fn post(
    url: &str,
    api_key: Option<&str>,
    body: &Value,
    timeout: Duration,
) -> std::result::Result<Value, String> {
    let (url, api_key, body) = (url.to_owned(), api_key.map(String::from), body.clone());
    let worker = std::thread::spawn(move || -> std::result::Result<Value, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async move {
            let client = reqwest::Client::builder()
                .timeout(timeout)
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
            let text = resp.text().await.map_err(|e| {
                if e.is_timeout() {
                    "no answer in time".to_owned()
                } else {
                    e.to_string()
                }
            })?;
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
    use memoria_fake_chat::ChatEndpoint;

    fn settings(url: &str, local: &[&str]) -> ModelSettings {
        ModelSettings {
            url: url.into(),
            name: "m".into(),
            api_key: None,
            local_hosts: local.iter().map(|h| h.to_string()).collect(),
        }
    }

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
    fn loopback_and_listed_hosts_are_local_and_every_other_host_is_remote() {
        for url in [
            "http://127.0.0.1:8080",
            "http://127.3.2.1/v1",
            "http://localhost:11434",
            "http://[::1]:9/",
        ] {
            assert!(settings(url, &[]).is_local(), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://192.0.2.2:8080",
            "http://[fd00::2]:1",
            "not a url",
        ] {
            assert!(!settings(url, &[]).is_local(), "{url}");
        }
        assert!(settings("http://gpu-box.lan:8080", &["gpu-box.lan"]).is_local());
        assert!(settings("http://[fd00::2]:1", &["fd00::2"]).is_local());
    }

    #[test]
    fn a_fenced_reply_is_read_and_prose_is_not() {
        let m = json_object("```json\n{\"summary\": \"S\"}\n```").unwrap();
        assert_eq!(m["summary"], "S");
        assert!(json_object("I merged them for you!").is_none());
        assert!(json_object("[1, 2]").is_none());
    }

    /// An endpoint that keeps the requests it got: masking that fails sends nothing, so it
    /// gets none.
    #[test]
    fn when_masking_fails_nothing_is_sent() {
        let chat = ChatEndpoint::always("{}");
        let s = settings(chat.url(), &[]);
        let q = Ask {
            system: "sys",
            user: "mail ana@example.com",
            json: true,
            max_tokens: None,
            timeout: Duration::from_secs(5),
        };
        let failing = |_: &str| Err(MaskFailed { class: "email" });
        // Loopback is local: the masker is not even asked, and the request arrives.
        let a = ask_masked_by(&s, &q, failing).unwrap();
        assert!(!a.masked);
        // A remote endpoint (a documentation address, never reached): refused before sending.
        let remote = settings("http://192.0.2.1:9", &[]);
        let e = ask_masked_by(&remote, &q, failing).unwrap_err();
        assert_eq!(e.code(), memoria_store::ErrorCode::Model);
        assert!(e.to_string().contains("nothing was sent"), "{e}");
        let got = chat.bodies();
        assert_eq!(got.len(), 1, "only the local request was sent: {got:?}");
        assert!(
            got[0].contains("ana@example.com"),
            "local gets the text as is"
        );
    }
}
