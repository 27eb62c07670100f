//! Agent hosts' per-message hooks: the recall block in the host's reply format.

use serde_json::Value;

use super::Location;
use crate::error::{Error, Result};
use crate::hook::{ClaudeCodeInput, HookRequest, claude_code_output};
use crate::vault::{Engine, OpenOptions};

/// Claude Code's `UserPromptSubmit` and `SessionStart` hooks: reads the hook's JSON input and
/// returns the JSON to print, or `None` for an event that gets no context. The project is the
/// location's explicit one, else the hook's working folder.
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
    };
    let block = engine.recall_block(message, None, None)?;
    Ok(Some(claude_code_output(
        &input.hook_event_name,
        &block.text,
    )))
}
