//! Agent hosts' per-message hooks: the recall block in the host's reply format.

use serde_json::Value;

use super::Location;
use crate::error::{Error, Result};
use crate::hook::{ClaudeCodeInput, HookRequest, claude_code_output};
use crate::vault::{Engine, OpenOptions};

/// Claude Code's hooks: reads the hook's JSON input and returns the JSON to print, or `None`
/// for an event that gets no context. `UserPromptSubmit` and `SessionStart` get the recall
/// block; `Stop`, `PreCompact` and `SessionEnd` capture the transcript into the project's
/// conversations (the user's outside a project), unless capture is turned off on this machine
/// (`conversations.capture`): then they capture nothing and answer nothing, as the person
/// chose. The project is the location's explicit one, else the hook's working folder.
pub fn claude_code(loc: &Location, input: &str) -> Result<Option<Value>> {
    let input = ClaudeCodeInput::parse(input).map_err(Error::Invalid)?;
    let Some(request) = input.request() else {
        return Ok(None);
    };
    // Asked before the engine opens: a hook that captures nothing costs nothing. The
    // transcript is marked read all the same, so what was said while capture was off is never
    // captured once it is turned on again.
    if let HookRequest::Capture(path) = &request {
        let home = loc.home()?;
        if !crate::config::capture_on(&home)? {
            crate::capture::pass_over(home.root(), std::path::Path::new(path))?;
            return Ok(None);
        }
    }
    let engine = Engine::open(OpenOptions {
        home: loc.home.clone(),
        project_dir: loc
            .project
            .clone()
            .or_else(|| input.cwd.as_ref().map(Into::into)),
        model_dir: loc.model_dir.clone(),
        ..Default::default()
    })?;
    let message = match &request {
        HookRequest::Message(m) => m.as_str(),
        HookRequest::SessionStart => "",
        HookRequest::Capture(path) => {
            let req = super::conversations::CaptureRequest {
                format: Some(crate::capture::Format::ClaudeCode),
                conversation: input.session_id.clone(),
                automatic: true,
                entry: super::conversations::Entry::Hook,
                ..Default::default()
            };
            super::conversations::capture_file(&engine, std::path::Path::new(path), &req)?;
            return Ok(None);
        }
    };
    let block = engine.recall_block(message, None, None)?;
    Ok(Some(claude_code_output(
        &input.hook_event_name,
        &block.text,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::tests::here;

    const TRANSCRIPT: &str = r#"{"type":"user","uuid":"u1","sessionId":"s1","timestamp":"2025-06-01T10:00:00.000Z","message":{"role":"user","content":"We deploy on Tuesdays"}}
{"type":"assistant","uuid":"a1","sessionId":"s1","timestamp":"2025-06-01T10:00:05.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Got it."}]}}
"#;

    fn stop(transcript: &std::path::Path, cwd: &std::path::Path) -> String {
        serde_json::json!({
            "session_id": "s1",
            "transcript_path": transcript,
            "cwd": cwd,
            "hook_event_name": "Stop",
            "stop_hook_active": false,
        })
        .to_string()
    }

    fn captured(loc: &Location) -> usize {
        let engine = loc.open().unwrap();
        crate::api::conversations::stats(&engine).unwrap().messages
    }

    #[test]
    fn the_prompt_hooks_index_says_which_notes_were_consolidated_or_superseded() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let loc = here(&tmp);
        drop(loc.open().unwrap());
        let user = home.join("memory/user");
        let note = |id: &str, summary: &str, extra: &str| {
            std::fs::write(
                user.join(format!("{id}.md")),
                format!(
                    "---\nid: {id}\nsummary: {summary}\ntype: project\n{extra}---\n{summary}.\n"
                ),
            )
            .unwrap();
        };
        note("deploy-days", "Deploys run on Tuesdays", "");
        note(
            "deploy-mondays",
            "Deploys ran on Mondays",
            "status: consolidated\n",
        );
        note("freeze-old", "Code freeze on Thursdays", "");
        note(
            "freeze-new",
            "Code freeze on Fridays",
            "relations:\n  - kind: supersedes\n    target: freeze-old\n",
        );
        let prompt = serde_json::json!({
            "session_id": "s1", "cwd": tmp.path(), "hook_event_name": "UserPromptSubmit",
            "prompt": "anything new?",
        });
        let out = claude_code(&loc, &prompt.to_string()).unwrap().unwrap();
        let text = out.to_string();
        let line = |id: &str| {
            let at = text
                .find(&format!("vt:user/{id}:"))
                .unwrap_or_else(|| panic!("{id} is not in the index: {text}"));
            text[at..].split("\\n").next().unwrap().to_owned()
        };
        assert!(
            line("deploy-mondays").contains(": (consolidated) Deploys ran"),
            "{text}"
        );
        assert!(
            line("freeze-old").contains(": (superseded) Code freeze on Thursdays"),
            "{text}"
        );
        for current in ["deploy-days", "freeze-new"] {
            assert!(!line(current).contains("(consolidated)"), "{text}");
            assert!(!line(current).contains("(superseded)"), "{text}");
        }
    }

    #[test]
    fn the_stop_hook_captures_nothing_while_capture_is_off_nor_later_and_what_follows_once_on() {
        let tmp = tempfile::tempdir().unwrap();
        let loc = here(&tmp);
        let transcript = tmp.path().join("s1.jsonl");
        std::fs::write(&transcript, TRANSCRIPT).unwrap();
        let input = stop(&transcript, tmp.path());

        crate::api::config::set(&loc, crate::config::CAPTURE_KEY, Some("false")).unwrap();
        assert_eq!(claude_code(&loc, &input).unwrap(), None);
        assert_eq!(captured(&loc), 0, "nothing is kept while capture is off");
        // The recall block is not capture: it still answers.
        let prompt = serde_json::json!({
            "session_id": "s1", "cwd": tmp.path(), "hook_event_name": "UserPromptSubmit",
            "prompt": "when do we deploy?",
        });
        assert!(claude_code(&loc, &prompt.to_string()).unwrap().is_some());

        crate::api::config::set(&loc, crate::config::CAPTURE_KEY, Some("true")).unwrap();
        assert_eq!(claude_code(&loc, &input).unwrap(), None);
        assert_eq!(
            captured(&loc),
            0,
            "what was said while capture was off is never captured"
        );
        let more = r#"{"type":"user","uuid":"u2","sessionId":"s1","timestamp":"2025-06-01T10:01:00.000Z","message":{"role":"user","content":"And freeze on Fridays"}}"#;
        std::fs::write(&transcript, format!("{TRANSCRIPT}{more}\n")).unwrap();
        assert_eq!(claude_code(&loc, &input).unwrap(), None);
        assert_eq!(captured(&loc), 1, "what is said once it is on");
    }
}
