//! `hook`: per-message recall for agent hosts.

use std::io::Read;

use anyhow::{Context, Result};
use clap::Subcommand;
use memoria_engine::api;
use memoria_engine::hook::HookRequest;

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
    let input = memoria_engine::hook::ClaudeCodeInput::parse(&stdin).ok();
    // The project the capture went to, as the hook's API found it: the one named, else the
    // session's folder.
    if let Some(input) = input
        && matches!(input.request(), Some(HookRequest::Capture(_)))
        && api::conversations::model_captures_waiting(
            g.location.home()?.root(),
            g.location
                .project
                .as_deref()
                .or_else(|| input.cwd.as_deref().map(std::path::Path::new))
                .filter(|d| d.is_dir()),
        )?
    {
        run_model_in_background(g, input.cwd.as_deref())?;
    }
    Ok(())
}

/// Model capture waits for a model, which the agent must not: a turn the capture queued is
/// asked about by `memoria capture run` in a process of its own, started here and not waited
/// for, in the hook's project.
fn run_model_in_background(g: &Globals, cwd: Option<&str>) -> Result<()> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().context("finding the memoria binary")?;
    let mut cmd = Command::new(exe);
    if let Some(home) = &g.location.home {
        cmd.arg("--home").arg(home);
    }
    if let Some(project) = &g.location.project {
        cmd.arg("--project").arg(project);
    }
    if let Some(dir) = cwd.filter(|d| std::path::Path::new(d).is_dir()) {
        cmd.current_dir(dir);
    }
    cmd.args(["capture", "run"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group: the host ending the hook's group does not end it.
        .process_group(0)
        .spawn()
        .context("starting the model capture in the background")?;
    Ok(())
}
