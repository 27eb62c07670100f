//! `memoria quarantine`: hide a provider's memory from every door, and bring it back.

use anyhow::Result;
use clap::{Args, Subcommand};
use memoria_engine::api::quarantine::{self, Counts, Selection};
use memoria_engine::backup::human_utc;

use super::{Globals, outln, print_json};

#[derive(Subcommand, Debug)]
pub enum QuarantineCommand {
    /// Count what a quarantine of these providers would hide; nothing changes.
    Preview(SelectionArgs),
    /// Hide these providers' messages, what was derived from them and the notes they captured
    /// from every search, recall and agent; the notes move to the home's quarantine folder.
    Apply(SelectionArgs),
    /// Bring a quarantine's memory back, with exactly the trust and paths it had.
    Release {
        /// The quarantine's id, as `memoria quarantine list` shows it.
        id: String,
    },
    /// Every quarantine, the latest first.
    List,
    /// The audit log: each quarantine applied and released, the latest first.
    Audit,
}

#[derive(Args, Debug)]
pub struct SelectionArgs {
    /// A host whose memory to hide (`claude-code`, a transcript's `host`); repeat for several.
    #[arg(long = "host", value_name = "HOST")]
    hosts: Vec<String>,
    /// A model whose memory to hide; repeat for several. With --host too, both must match.
    #[arg(long = "model", value_name = "MODEL")]
    models: Vec<String>,
    /// Only what was said on or after this date (YYYY-MM-DD, a whole UTC day, or RFC 3339).
    #[arg(long, value_name = "DATE")]
    since: Option<String>,
    /// Only what was said on or before this date (YYYY-MM-DD, the whole UTC day, or RFC 3339).
    #[arg(long, value_name = "DATE")]
    until: Option<String>,
}

/// A date argument in ms; a plain date's end is the day's last millisecond.
fn date_arg(flag: &str, value: Option<&str>, end_of_day: bool) -> Result<Option<i64>> {
    let Some(v) = value else { return Ok(None) };
    let ms = memoria_engine::backup::time_to_ms(v).ok_or_else(|| {
        anyhow::anyhow!("--{flag} {v:?} is not a date: give YYYY-MM-DD or 2024-05-08T13:56:00Z")
    })?;
    let plain_day = v.trim().len() == 10;
    Ok(Some(if end_of_day && plain_day {
        ms + 86_400_000 - 1
    } else {
        ms
    }))
}

impl SelectionArgs {
    fn selection(&self) -> Result<Selection> {
        Ok(Selection {
            hosts: self.hosts.clone(),
            models: self.models.clone(),
            since: date_arg("since", self.since.as_deref(), false)?,
            until: date_arg("until", self.until.as_deref(), true)?,
        })
    }
}

fn counts_line(c: &Counts) -> String {
    format!(
        "{} messages, {} facts, {} summaries, {} captured notes, from {} conversations",
        c.messages, c.facts, c.summaries, c.notes, c.conversations
    )
}

fn selection_line(s: &Selection) -> String {
    let mut parts = Vec::new();
    if !s.hosts.is_empty() {
        parts.push(format!("host {}", s.hosts.join(", ")));
    }
    if !s.models.is_empty() {
        parts.push(format!("model {}", s.models.join(", ")));
    }
    if let Some(t) = s.since {
        parts.push(format!("since {}", human_utc(t)));
    }
    if let Some(t) = s.until {
        parts.push(format!("until {}", human_utc(t)));
    }
    parts.join(", ")
}

pub fn run(g: &Globals, command: &QuarantineCommand) -> Result<()> {
    match command {
        QuarantineCommand::Preview(a) => {
            let engine = g.location.open()?;
            let counts = quarantine::preview(&engine, &a.selection()?)?;
            if g.json {
                return print_json(&counts);
            }
            outln!("would hide {}", counts_line(&counts));
            outln!("nothing changed: `memoria quarantine apply` with the same options hides them");
        }
        QuarantineCommand::Apply(a) => {
            let mut engine = g.location.open()?;
            let applied = quarantine::apply(&mut engine, &a.selection()?)?;
            if g.json {
                return print_json(&applied);
            }
            match &applied.id {
                Some(id) => {
                    outln!("quarantine {id}: hid {}", counts_line(&applied.counts));
                    outln!("`memoria quarantine release {id}` brings them back as they were");
                }
                None => outln!("nothing left to quarantine for these providers"),
            }
        }
        QuarantineCommand::Release { id } => {
            let mut engine = g.location.open()?;
            let r = quarantine::release(&mut engine, id)?;
            if g.json {
                return print_json(&r);
            }
            outln!(
                "released {id}: {} messages, {} facts and summaries, {} notes back in place",
                r.messages,
                r.derived,
                r.notes
            );
            for (from, to) in &r.renamed {
                outln!("  {from} was taken by a newer file: restored as {to}");
            }
            for path in &r.missing {
                outln!("  {path} was gone from the quarantine folder: not restored");
            }
            for (path, why) in &r.failed {
                outln!(
                    "  {path} could not be put back ({why}): its file stays in the quarantine folder"
                );
            }
        }
        QuarantineCommand::List => {
            let all = quarantine::history(&g.location.open()?)?;
            if g.json {
                return print_json(&all);
            }
            if all.is_empty() {
                outln!("no quarantines");
            }
            for q in all {
                let state = match q.released_at {
                    Some(t) => format!("released {}", human_utc(t)),
                    None => "active".to_owned(),
                };
                outln!(
                    "{}  {}  {}  [{state}]",
                    q.id,
                    human_utc(q.created_at),
                    selection_line(&q.selection)
                );
                outln!("    {}", counts_line(&q.counts));
            }
        }
        QuarantineCommand::Audit => {
            let all = quarantine::audit(&g.location.open()?)?;
            if g.json {
                return print_json(&all);
            }
            if all.is_empty() {
                outln!("the audit log is empty");
            }
            for e in all {
                outln!(
                    "{}  {}  {}  {}",
                    human_utc(e.at),
                    e.module,
                    e.action,
                    e.detail
                );
            }
        }
    }
    Ok(())
}
