//! The model draft of a merge: one question to the configured chat model through the one
//! model client (`memoria_derive::model`, which masks what goes to a remote endpoint), made
//! only when `model.url` is set. Notes holding secrets are never sent.

use std::time::Duration;

use memoria_derive::model::{self, Ask, ModelSettings};
use serde_json::Value;

use crate::error::{Error, Result};

/// How long a draft may take before it is given up.
const TIMEOUT: Duration = Duration::from_secs(120);

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
    let answer = model::ask(
        settings,
        &Ask {
            system: INSTRUCTIONS,
            user: &text,
            json: false,
            max_tokens: None,
            timeout: TIMEOUT,
        },
    )?;
    parse_draft(&answer.content).ok_or_else(|| Error::ModelEndpoint {
        url: model::endpoint(&settings.url),
        reason: "the reply is not the JSON object with a summary and a body that was asked for"
            .into(),
    })
}

/// The `{summary, body}` object of a reply, also when the model wrapped it in a code fence.
fn parse_draft(content: &str) -> Option<(String, String)> {
    let v = model::json_object(content)?;
    let summary = v.get("summary")?.as_str()?.trim();
    let body = v.get("body").and_then(Value::as_str)?;
    let summary = summary.lines().next().unwrap_or("").trim().to_owned();
    (!summary.is_empty() && !body.trim().is_empty()).then(|| (summary, body.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_reply_is_read_and_a_reply_without_a_body_is_not() {
        let r = parse_draft("```json\n{\"summary\": \"S\", \"body\": \"B\"}\n```").unwrap();
        assert_eq!(r, ("S".into(), "B".into()));
        assert!(parse_draft("{\"summary\": \"S\"}").is_none());
        assert!(parse_draft("I merged them for you!").is_none());
    }
}
