//! Agent hosts' per-message hooks: the recall block in the host's reply format.

use serde_json::Value;

use super::Location;
use crate::error::{Error, Result};
use crate::hook::{ClaudeCodeInput, HookRequest, claude_code_output};
use crate::vault::{Engine, OpenOptions};

/// Claude Code's hooks: reads the hook's JSON input and returns the JSON to print, or `None`
/// for an event that gets no context. `UserPromptSubmit` and `SessionStart` get the recall
/// block; `Stop`, `PreCompact` and `SessionEnd` capture the transcript into the project's
/// conversations (the user's outside a project). The project is the location's explicit one,
/// else the hook's working folder.
pub fn claude_code(loc: &Location, input: &str) -> Result<Option<Value>> {
    let input = ClaudeCodeInput::parse(input).map_err(Error::Invalid)?;
    let Some(request) = input.request() else {
        return Ok(None);
    };
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
