//! `capture`, `conversations` and `forget --conversation`: what was said with agents.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use memoria_engine::api::conversations::{self, CaptureRequest, CaptureRun, Entry, RunState};
use memoria_engine::backup::human_utc;
use memoria_engine::capture::{CaptureReport, Format};
use memoria_engine::counted;

use serde::Serialize;

use super::{Globals, outln, print_json};

/// A transcript's format.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// One JSON object per line: conversation, id, role, speaker, time, text, captions.
    Jsonl,
    /// Claude Code's transcript (~/.claude/projects/…/<session>.jsonl).
    ClaudeCode,
    /// OpenClaw's session log (~/.openclaw/agents/…/sessions/<id>.jsonl).
    Openclaw,
    /// OpenClaw's daily log (…/memory/YYYY-MM-DD.md): each entry one of the agent's messages.
    OpenclawDaily,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Jsonl => Format::Jsonl,
            FormatArg::ClaudeCode => Format::ClaudeCode,
            FormatArg::Openclaw => Format::Openclaw,
            FormatArg::OpenclawDaily => Format::OpenclawDaily,
        }
    }
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct CaptureArgs {
    #[command(subcommand)]
    command: Option<CaptureCommand>,
    /// The transcript file, or `-` for standard input. A file captured before is read from
    /// where its last capture stopped. (A file named `log` or `run`: write `./log`.)
    #[arg(required = true)]
    file: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "jsonl")]
    format: FormatArg,
    /// The conversation of messages that name none (default: the file's name).
    #[arg(long, value_name = "ID")]
    conversation: Option<String>,
    /// Keep the conversation in this scope: user, project or domain (default: the project's,
    /// else the user's).
    #[arg(long)]
    scope: Option<String>,
    /// Keep tool output and system prompts too (left out by default).
    #[arg(long)]
    keep_tools: bool,
}

#[derive(Subcommand, Debug)]
pub enum CaptureCommand {
    /// The capture ledger: each turn that reached model capture, with what it wrote or why it
    /// was skipped, the newest first.
    Log {
        /// How many rows.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Ask the model (`model.url`) for the turns waiting in the ledger, now.
    Run,
}

/// What `capture --json` prints: the capture's report and the model captures run after it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CaptureOutput<'a> {
    #[serde(flatten)]
    report: &'a CaptureReport,
    model_captures: &'a [CaptureRun],
}

pub fn capture(g: &Globals, a: &CaptureArgs) -> Result<()> {
    match &a.command {
        Some(CaptureCommand::Log { limit }) => return capture_log(g, *limit),
        Some(CaptureCommand::Run) => return capture_run(g),
        None => {}
    }
    let file = a
        .file
        .as_ref()
        .context("name the transcript file, or - for standard input")?;
    let mut engine = g.location.open()?;
    let req = CaptureRequest {
        scope: a.scope.clone(),
        conversation: a.conversation.clone(),
        format: Some(a.format.into()),
        keep_tools: a.keep_tools,
        // Asked for by name: read even what the hook passed over while capture was off.
        automatic: false,
        entry: Entry::Cli,
    };
    let report = if file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the transcript from standard input")?;
        conversations::capture_text(&engine, &text, &req)?
    } else {
        conversations::capture_file(&engine, file, &req)?
    };
    // The person waits for this command: the model is asked now, not in the background.
    let runs = if report.model_pending {
        conversations::run_model_captures(&mut engine)?
    } else {
        Vec::new()
    };
    if g.json {
        return print_json(&CaptureOutput {
            report: &report,
            model_captures: &runs,
        });
    }
    print_report(&report)?;
    for r in &runs {
        print_run(r)?;
    }
    Ok(())
}

fn capture_run(g: &Globals) -> Result<()> {
    let mut engine = g.location.open()?;
    let runs = conversations::run_model_captures(&mut engine)?;
    if g.json {
        return print_json(&runs);
    }
    if runs.is_empty() {
        outln!("no turn waits for the model");
    }
    for r in &runs {
        print_run(r)?;
    }
    Ok(())
}

fn capture_log(g: &Globals, limit: usize) -> Result<()> {
    let engine = g.location.open()?;
    let runs = conversations::capture_log(&engine, limit)?;
    if g.json {
        return print_json(&runs);
    }
    if runs.is_empty() {
        outln!(
            "no turn has reached model capture yet: it runs after a captured turn (docs/conversations.md)"
        );
    }
    for r in &runs {
        print_run(r)?;
    }
    Ok(())
}

/// One ledger row on one line: when, where from, the outcome, then what it wrote or why not.
fn print_run(r: &CaptureRun) -> Result<()> {
    let outcome = match (r.state, r.reason) {
        (_, Some(reason)) => format!("skipped: {}", reason.as_str()),
        (RunState::Written, None) if r.notes.is_empty() => "written: no note".to_owned(),
        (RunState::Written, None) => format!("written: {}", r.kinds().join(", ")),
        (RunState::Pending, _) => "waiting for the model".to_owned(),
        (RunState::Running, _) => "asking the model".to_owned(),
        (RunState::Skipped, None) => "skipped".to_owned(),
    };
    outln!(
        "{}  {}  {} via {}{}  {}  {}",
        human_utc(r.at),
        r.conversation,
        r.host.as_deref().unwrap_or("-"),
        r.entry,
        r.model
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default(),
        r.scope,
        outcome
    );
    for n in &r.notes {
        outln!(
            "    {} {} ({})",
            if n.reinforced { "reinforced" } else { "wrote" },
            n.id,
            n.kind
        );
    }
    if let Some(d) = &r.detail {
        outln!("    {d}");
    }
    Ok(())
}

fn print_report(r: &CaptureReport) -> Result<()> {
    outln!(
        "captured {} into {} ({}{})",
        counted(r.added, "new message"),
        r.scope,
        counted(r.conversations.len(), "conversation"),
        if r.already > 0 {
            format!("; {} already kept", counted(r.already, "message"))
        } else {
            String::new()
        }
    );
    if r.skipped > 0 {
        outln!(
            "left out {}: tool output and system prompts (--keep-tools keeps them), empty texts",
            counted(r.skipped, "message")
        );
    }
    if r.secret > 0 {
        outln!(
            "{} look like credentials: kept, never recalled",
            counted(r.secret, "message")
        );
    }
    if r.quarantined > 0 {
        outln!(
            "{} read as instructions to an assistant: kept quarantined, never recalled",
            counted(r.quarantined, "message")
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct ConversationsArgs {
    /// Show this conversation's messages.
    id: Option<String>,
    /// The scope of the conversation (when one id is in several).
    #[arg(long)]
    scope: Option<String>,
    /// Show what was derived from the conversation (its summary, facts and the names it
    /// mentions) instead of its messages.
    #[arg(long, requires = "id")]
    facts: bool,
}

pub fn conversations(g: &Globals, a: &ConversationsArgs) -> Result<()> {
    let engine = g.location.open()?;
    let Some(id) = &a.id else {
        let all = conversations::list(&engine)?;
        if g.json {
            return print_json(&all);
        }
        if all.is_empty() {
            outln!(
                "no conversations captured: `memoria capture FILE`, or the hook (docs/conversations.md)"
            );
        }
        for c in all {
            outln!(
                "{}  {}  {}  {}",
                c.scope,
                c.id,
                counted(c.messages, "message"),
                c.last_at.map_or_else(|| "no time".to_owned(), human_utc)
            );
        }
        return Ok(());
    };
    if a.facts {
        let x = conversations::extract(&engine, id, a.scope.as_deref())?;
        if g.json {
            return print_json(&x);
        }
        match &x.summary {
            Some(s) => outln!("summary: {}", s.text),
            None => outln!("summary: none (a conversation of fewer than four messages)"),
        }
        if x.facts.is_empty() {
            outln!("facts: none stated in the first person");
        } else {
            outln!("facts:");
        }
        for f in &x.facts {
            let from = f.valid_from.map(human_utc).unwrap_or_default();
            let until = f
                .valid_to
                .map(|t| format!(" (until {}, replaced)", human_utc(t)))
                .unwrap_or_default();
            let trust = f
                .trust
                .as_deref()
                .map(|t| format!(" [{t}]"))
                .unwrap_or_default();
            outln!(
                "  [{from}] {}: {} = {}{until}{trust}",
                f.subject,
                f.attribute,
                f.value
            );
        }
        if !x.entities.is_empty() {
            let names: Vec<String> = x
                .entities
                .iter()
                .take(20)
                .map(|e| format!("{} ({})", e.name, e.kind))
                .collect();
            outln!("mentions: {}", names.join(", "));
        }
        return Ok(());
    }
    let messages = conversations::show(&engine, id, a.scope.as_deref())?;
    if g.json {
        return print_json(&messages);
    }
    for m in messages {
        let who = m
            .speaker
            .clone()
            .unwrap_or_else(|| m.role.as_str().to_owned());
        let when = m.at.map(human_utc).unwrap_or_default();
        let mark = match (m.quarantine(), m.quarantined.as_deref()) {
            (Some(id), _) => format!(
                " [quarantined: its provider's memory is hidden ({id}), never recalled until released]"
            ),
            (None, Some(d)) => {
                format!(" [quarantined: reads as instructions ({d}), never recalled]")
            }
            (None, None) => String::new(),
        };
        outln!("[{when}] {who}: {}{mark}", m.text);
    }
    Ok(())
}

/// `forget --conversation ID --purge`.
pub fn forget(g: &Globals, id: &str, scope: Option<&str>, purge: bool) -> Result<()> {
    if !purge {
        anyhow::bail!(
            "forgetting a conversation removes it and every copy for good (there is no backup): add --purge"
        );
    }
    let engine = g.location.open()?;
    let done = conversations::forget(&engine, id, scope)?;
    if g.json {
        return print_json(&done);
    }
    outln!(
        "forgot conversation {} of {} for good: {} and {} derived from them (facts, summary) are gone, with their copies in the index",
        done.conversation,
        done.scope,
        counted(done.messages, "message"),
        counted(done.derived, "item")
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct WorkingArgs {
    #[command(subcommand)]
    command: Option<WorkingCommand>,
}

#[derive(clap::Subcommand, Debug)]
pub enum WorkingCommand {
    /// Keep TEXT at hand (`-` reads standard input); recalled beside notes until it expires.
    Add {
        text: String,
        /// Hours it lasts (1 to 720).
        #[arg(long, value_name = "HOURS", default_value_t = memoria_engine::log::WORKING_TTL_HOURS)]
        ttl: u32,
        /// user, project or domain (default: the project's, else the user's).
        #[arg(long)]
        scope: Option<String>,
    },
    /// Remove a block before it expires.
    Rm {
        /// The block's key (`wm:…`), as `memoria working` lists it.
        key: String,
    },
}

/// `working`: list, add or remove blocks of working memory.
pub fn working(g: &Globals, a: &WorkingArgs) -> Result<()> {
    use memoria_engine::api::working;
    let engine = g.location.open()?;
    match &a.command {
        None => {
            let all = working::list(&engine)?;
            if g.json {
                return print_json(&all);
            }
            if all.is_empty() {
                outln!(
                    "no working memory: `memoria working add TEXT` keeps something at hand for a day"
                );
            }
            for b in all {
                outln!(
                    "{}  {}  until {}  used {}×  {}",
                    b.key,
                    b.scope,
                    human_utc(b.expires_at),
                    b.uses,
                    b.text.lines().next().unwrap_or("")
                );
            }
        }
        Some(WorkingCommand::Add { text, ttl, scope }) => {
            let text = if text == "-" {
                let mut t = String::new();
                std::io::stdin().read_to_string(&mut t)?;
                t
            } else {
                text.clone()
            };
            let b = working::add(
                &engine,
                &text,
                scope.as_deref(),
                Some(*ttl),
                memoria_engine::log::Role::User,
            )?;
            if g.json {
                return print_json(&b);
            }
            outln!(
                "kept {} in {} until {}",
                b.key,
                b.scope,
                human_utc(b.expires_at)
            );
        }
        Some(WorkingCommand::Rm { key }) => {
            working::remove(&engine, key)?;
            if g.json {
                return print_json(&serde_json::json!({"removed": key}));
            }
            outln!("removed {key}");
        }
    }
    Ok(())
}
