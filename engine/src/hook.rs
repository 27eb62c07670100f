//! Agent hosts that run a command on their events. Today: Claude Code's hooks. On
//! `UserPromptSubmit` and `SessionStart` the hook answers with the recall block as additional
//! context; on `Stop`, `PreCompact` and `SessionEnd` it captures the conversation's transcript
//! (`transcript_path`) from where the last capture stopped, and answers nothing. It must never
//! block the user: every failure becomes "no context" plus a note on stderr, never exit code 2.

use serde::Deserialize;
use serde_json::{Value, json};

/// The fields of Claude Code's hook input that Memoria uses.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ClaudeCodeInput {
    pub hook_event_name: String,
    /// The user's message (`UserPromptSubmit`).
    #[serde(default)]
    pub prompt: Option<String>,
    /// The session's working directory: the project is found from it.
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    /// The conversation's transcript (JSON Lines).
    #[serde(default)]
    pub transcript_path: Option<String>,
}

/// What to recall for one hook event: `None` for events Memoria does not answer.
#[derive(Debug, Clone, PartialEq)]
pub enum HookRequest {
    /// Recall for this message.
    Message(String),
    /// Start of a session: the durable-notes index only.
    SessionStart,
    /// The conversation moved on (a turn ended, a compaction, the session's end): capture its
    /// transcript.
    Capture(String),
}

impl ClaudeCodeInput {
    pub fn parse(stdin: &str) -> Result<Self, String> {
        serde_json::from_str(stdin)
            .map_err(|e| format!("the hook input is not Claude Code hook JSON: {e}"))
    }

    pub fn request(&self) -> Option<HookRequest> {
        match self.hook_event_name.as_str() {
            "UserPromptSubmit" => Some(HookRequest::Message(
                self.prompt.clone().unwrap_or_default(),
            )),
            "SessionStart" => Some(HookRequest::SessionStart),
            "Stop" | "PreCompact" | "SessionEnd" => self
                .transcript_path
                .clone()
                .filter(|p| !p.is_empty())
                .map(HookRequest::Capture),
            _ => None,
        }
    }
}

/// Claude Code's answer shape: the block goes in `additionalContext` for the event.
pub fn claude_code_output(event: &str, context: &str) -> Value {
    json!({
        "hookSpecificOutput": {
            "hookEventName": event,
            "additionalContext": context,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Recorded from Claude Code's hook documentation's input shapes.
    const PROMPT: &str = r#"{"session_id":"abc123","transcript_path":"/home/u/.claude/projects/x/abc123.jsonl","cwd":"/home/u/code/app","permission_mode":"default","hook_event_name":"UserPromptSubmit","prompt":"How do we deploy on Fridays?"}"#;
    const START: &str = r#"{"session_id":"abc123","transcript_path":"/t.jsonl","cwd":"/home/u/code/app","hook_event_name":"SessionStart","source":"startup"}"#;
    const OTHER: &str = r#"{"session_id":"abc123","transcript_path":"/t.jsonl","cwd":"/x","hook_event_name":"Stop","stop_hook_active":false}"#;

    #[test]
    fn parses_recorded_inputs() {
        let p = ClaudeCodeInput::parse(PROMPT).unwrap();
        assert_eq!(p.cwd.as_deref(), Some("/home/u/code/app"));
        assert_eq!(
            p.request(),
            Some(HookRequest::Message("How do we deploy on Fridays?".into()))
        );
        assert_eq!(
            ClaudeCodeInput::parse(START).unwrap().request(),
            Some(HookRequest::SessionStart)
        );
        assert_eq!(
            ClaudeCodeInput::parse(OTHER).unwrap().request(),
            Some(HookRequest::Capture("/t.jsonl".into()))
        );
        let notification = r#"{"session_id":"a","transcript_path":"/t.jsonl","hook_event_name":"Notification","message":"x"}"#;
        assert_eq!(
            ClaudeCodeInput::parse(notification).unwrap().request(),
            None
        );
        assert!(
            ClaudeCodeInput::parse("not json")
                .unwrap_err()
                .contains("hook JSON")
        );
    }

    #[test]
    fn output_shape() {
        let v = claude_code_output("UserPromptSubmit", "<memoria-recall>…</memoria-recall>");
        assert_eq!(v["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
        assert_eq!(
            v["hookSpecificOutput"]["additionalContext"],
            "<memoria-recall>…</memoria-recall>"
        );
    }
}
