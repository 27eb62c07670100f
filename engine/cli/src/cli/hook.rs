//! `hook`: per-message recall for agent hosts.

use std::io::Read;

use anyhow::{Context, Result};
use clap::Subcommand;
use memoria_engine::api;

use super::{Globals, outln};

#[derive(Subcommand, Debug)]
pub enum HookHost {
    /// Claude Code's UserPromptSubmit and SessionStart hooks.
    ClaudeCode,
}

/// Never blocks the user's prompt: a failure is told on standard error, nothing is printed on
/// standard output, and the exit code is 0.
pub fn run(g: &Globals, host: &HookHost) -> Result<()> {
    if let Err(e) = answer(g, host) {
        eprintln!("memoria hook: {e:#}");
    }
    Ok(())
}

fn answer(g: &Globals, host: &HookHost) -> Result<()> {
    let mut stdin = String::new();
    std::io::stdin()
        .read_to_string(&mut stdin)
        .context("reading the hook input")?;
    let reply = match host {
        HookHost::ClaudeCode => api::hook::claude_code(&g.location, &stdin)?,
    };
    if let Some(reply) = reply {
        outln!("{reply}");
    }
    Ok(())
}
