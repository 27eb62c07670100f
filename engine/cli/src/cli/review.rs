//! `review` (the review queue and `review dismiss`), `merge` and `config`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use memoria_engine::api::hygiene::{self, DraftKind, FindingDetail, MergeChoice, ReviewQuery};
use memoria_engine::api::{config, conversations};
use memoria_engine::backup::human_utc;
use memoria_engine::counted;
use memoria_shared::note::Trust;

use super::{Globals, outln, print_json, read_body};

#[derive(Args, Debug)]
pub struct ReviewArgs {
    #[command(subcommand)]
    command: Option<ReviewCommand>,
    /// user, project or domain (default: every visible scope).
    #[arg(long)]
    scope: Option<String>,
    /// Days without a recall, opening or edit after which a note is unused (default: the
    /// `review.unusedDays` setting, else 90).
    #[arg(long, value_name = "DAYS")]
    unused_days: Option<u32>,
    /// List dismissed findings too.
    #[arg(long)]
    all: bool,
}

#[derive(Subcommand, Debug)]
pub enum ReviewCommand {
    /// Hide a finding until one of its notes changes.
    Dismiss {
        /// The finding's id, as `memoria review` shows it.
        finding_id: String,
    },
    /// List the archived notes: importance decayed below the threshold, so left out of
    /// recall and search (`memoria search --archived` finds them); opening or editing one
    /// brings it back.
    Archived,
    /// List the facts said in several conversations, ready to become notes; with a key,
    /// promote that one into a note (as trusted as the least trusted message that stated it);
    /// with `--auto`, have the configured chat model phrase and promote the ready ones.
    Promote {
        /// The fact's key, as `memoria review promote` lists it.
        #[arg(conflicts_with = "auto")]
        key: Option<String>,
        /// Promote the ready facts with the chat model (`model.url`), as the app's daily pass
        /// does: a fact whose answer is refused stays proposed, with the reason.
        #[arg(long)]
        auto: bool,
        /// With `--auto`: the most facts to promote (default: 5).
        #[arg(long, value_name = "N", requires = "auto")]
        limit: Option<usize>,
    },
}

/// `memoria review promote --auto`.
fn promote_auto(
    g: &Globals,
    engine: &mut memoria_engine::Engine,
    limit: Option<usize>,
) -> Result<()> {
    let run = conversations::promote_auto(engine, limit)?;
    if g.json {
        return print_json(&run);
    }
    let Some(model) = &run.model else {
        anyhow::bail!(
            "no chat model is configured, so nothing is promoted automatically: set one with `memoria config set model.url URL`, or promote a fact yourself with `memoria review promote KEY`"
        );
    };
    for p in &run.promoted {
        outln!(
            "promoted into note {} of {}: {} (from {})",
            p.id,
            p.scope,
            p.summary,
            counted(p.sources, "message")
        );
    }
    for l in &run.left {
        outln!(
            "left proposed {}  {}  {}: {}",
            l.key,
            l.scope,
            l.text,
            l.reason
        );
    }
    outln!(
        "{} by {model}, {} left proposed{}",
        counted(run.promoted.len(), "fact") + " promoted",
        run.left.len(),
        if run.waiting > 0 {
            format!(", {} beyond the limit", run.waiting)
        } else {
            String::new()
        }
    );
    Ok(())
}

fn kind_label(d: &FindingDetail) -> &'static str {
    match d {
        FindingDetail::SameTopic { .. } => "same topic",
        FindingDetail::BrokenLink { .. } => "broken link",
        FindingDetail::MissingFile { .. } => "missing file",
        FindingDetail::Unused { .. } => "unused",
        FindingDetail::TooLong { .. } => "too long",
    }
}

pub fn review(g: &Globals, a: &ReviewArgs) -> Result<()> {
    let engine = g.location.open()?;
    if let Some(ReviewCommand::Dismiss { finding_id }) = &a.command {
        let d = hygiene::dismiss(&engine, finding_id)?;
        if g.json {
            return print_json(&d);
        }
        outln!(
            "dismissed {}; it comes back when {} changes",
            d.finding_id,
            if d.notes.len() == 1 {
                "its note".to_owned()
            } else {
                "one of its notes".to_owned()
            }
        );
        return Ok(());
    }
    if let Some(ReviewCommand::Promote { key, auto, limit }) = &a.command {
        let mut engine = engine;
        if *auto {
            return promote_auto(g, &mut engine, *limit);
        }
        let Some(key) = key else {
            let ready = conversations::promotions(&engine)?;
            if g.json {
                return print_json(&ready);
            }
            outln!(
                "{} said in {} or more conversations, ready to become notes",
                counted(ready.len(), "fact"),
                conversations::PROMOTE_AFTER
            );
            for p in &ready {
                let trust = p
                    .trust
                    .as_deref()
                    .map(|t| format!(" [{t}]"))
                    .unwrap_or_default();
                outln!(
                    "{}  {}  {}  (in {}){trust}",
                    p.key,
                    p.scope,
                    p.text,
                    counted(p.conversations.len(), "conversation")
                );
                if let Some(l) = &p.auto_left {
                    outln!(
                        "    left proposed by {} on {}: {}",
                        l.model,
                        human_utc(l.at),
                        l.reason
                    );
                }
            }
            if !ready.is_empty() {
                outln!("promote one with `memoria review promote KEY`");
            }
            return Ok(());
        };
        let done = conversations::promote(&mut engine, key)?;
        if g.json {
            return print_json(&done);
        }
        outln!(
            "promoted into note {} of {}: {} (from {})",
            done.id,
            done.scope,
            done.summary,
            counted(done.sources, "message")
        );
        return Ok(());
    }
    if let Some(ReviewCommand::Archived) = &a.command {
        let archive = hygiene::archived(&engine, a.scope.as_deref())?;
        if g.json {
            return print_json(&archive);
        }
        outln!(
            "{} archived (importance below {}; it halves every {} days without a recall, opening or edit)",
            counted(archive.notes.len(), "note"),
            archive.archive_below,
            archive.half_life_days
        );
        for n in &archive.notes {
            let last = n
                .last_used_at
                .into_iter()
                .chain(n.updated_at)
                .max()
                .map(human_utc)
                .unwrap_or_else(|| "never".into());
            outln!(
                "{:<24} {}  {}  importance {:.3}, last used {last}",
                n.id,
                n.scope,
                n.summary,
                n.importance
            );
        }
        return Ok(());
    }
    let r = hygiene::review(
        &engine,
        &ReviewQuery {
            scope: a.scope.clone(),
            unused_days: a.unused_days,
            include_dismissed: a.all,
        },
    )?;
    if g.json {
        return print_json(&r);
    }
    outln!(
        "{} in {} ({} dismissed; unused after {} days; same topic by {})",
        counted(r.findings.len(), "finding"),
        counted(r.notes, "note"),
        r.dismissed,
        r.unused_days,
        if r.vectors {
            "words and vectors"
        } else {
            "words"
        }
    );
    if !r.vectors && r.notes > 1 {
        outln!(
            "  (no embedding model: notes that say the same in other words may be missed; \
             `memoria model install` adds it)"
        );
    }
    for f in &r.findings {
        let ids: Vec<&str> = f.notes.iter().map(|n| n.id.as_str()).collect();
        outln!(
            "{}  {:<12}  {}  {}",
            f.id,
            kind_label(&f.detail),
            f.scope,
            ids.join(", ")
        );
        outln!("    {}", f.message);
        if let FindingDetail::SameTopic { .. } = f.detail {
            outln!("    merge: memoria merge {}", ids.join(" "));
        }
    }
    if !r.findings.is_empty() {
        outln!("dismiss one with `memoria review dismiss FINDING_ID`");
    }
    let ready = conversations::promotions(&engine)?;
    if !ready.is_empty() {
        let left = ready.iter().filter(|p| p.auto_left.is_some()).count();
        outln!(
            "{} said in several conversations, ready to become notes{}: `memoria review promote`",
            counted(ready.len(), "fact"),
            if left > 0 {
                format!(" ({left} left by the model, with why)")
            } else {
                String::new()
            }
        );
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DraftArg {
    /// Every original under its summary as a heading.
    Manual,
    /// The configured chat model's merge (`memoria config set model.url URL`).
    Model,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The notes to merge (two or more, of one scope).
    #[arg(required = true, num_args = 2.., value_name = "ID")]
    ids: Vec<String>,
    /// user, project or domain: where to look the notes up.
    #[arg(long)]
    scope: Option<String>,
    /// Who writes the draft.
    #[arg(long, value_enum, default_value = "manual")]
    draft: DraftArg,
    /// Apply the merge: keep the oldest id, delete the others, relink, back everything up.
    #[arg(long)]
    apply: bool,
    /// With --apply: refuse unless the notes are as they were when this plan was printed.
    #[arg(long, value_name = "PLAN_ID", requires = "apply")]
    plan: Option<String>,
    /// With --apply: the merged body (a file, or `-` for standard input); default: the draft.
    #[arg(long, value_name = "FILE", requires = "apply")]
    body_file: Option<PathBuf>,
    /// With --apply: the merged summary; default: the draft's.
    #[arg(long, requires = "apply")]
    summary: Option<String>,
    /// With --apply: the merged note's trust, chosen by you instead of its sources' lowest
    /// (which the plan prints); a secret stays marked whatever you choose.
    #[arg(long, value_enum, value_name = "LEVEL", requires = "apply")]
    trust: Option<TrustArg>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TrustArg {
    Owner,
    Derived,
    Peer,
    Ingested,
    Quarantined,
}

impl From<TrustArg> for Trust {
    fn from(t: TrustArg) -> Trust {
        match t {
            TrustArg::Owner => Trust::Owner,
            TrustArg::Derived => Trust::Derived,
            TrustArg::Peer => Trust::Peer,
            TrustArg::Ingested => Trust::Ingested,
            TrustArg::Quarantined => Trust::Quarantined,
        }
    }
}

/// A trust as the plan prints it.
fn trust_name(t: Option<Trust>) -> &'static str {
    match t {
        None | Some(Trust::Owner) => "owner",
        Some(Trust::Derived) => "derived",
        Some(Trust::Peer) => "peer",
        Some(Trust::Ingested) => "ingested",
        Some(Trust::Quarantined) => "quarantined (never recalled)",
    }
}

pub fn merge(g: &Globals, a: &MergeArgs) -> Result<()> {
    let draft = match a.draft {
        DraftArg::Manual => DraftKind::Manual,
        DraftArg::Model => DraftKind::Model,
    };
    // A body given for the merge is read before the plan, so a bad file changes nothing.
    let body = match a.body_file.as_deref() {
        None => None,
        Some(p) if p.as_os_str() == "-" => read_body(Some("-"))?,
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("reading the merged body from {}", p.display()))?,
        ),
    };
    let mut engine = g.location.open()?;
    let plan = hygiene::merge_plan(&engine, &a.ids, a.scope.as_deref(), draft)?;
    if a.apply {
        if let Some(expected) = &a.plan {
            hygiene::check_plan(&plan, expected)?;
        }
        let summary = a
            .summary
            .clone()
            .unwrap_or_else(|| plan.draft.summary.clone());
        let body = body.unwrap_or_else(|| plan.draft.body.clone());
        let choice = MergeChoice {
            drafted_by: plan.draft.kind,
            trust: a.trust.map(Trust::from),
        };
        let merged = hygiene::merge_apply(&mut engine, &plan, &summary, &body, choice)?;
        if g.json {
            return print_json(&merged);
        }
        outln!(
            "merged into {} ({}); deleted {}",
            merged.kept.id,
            merged.kept.scope,
            merged.deleted.join(", ")
        );
        if !merged.relinked.is_empty() {
            outln!(
                "links now name {} in: {}",
                merged.kept.id,
                merged.relinked.join(", ")
            );
        }
        if !merged.not_relinked.is_empty() {
            outln!(
                "not relinked (the files do not parse; fix them by hand): {}",
                merged.not_relinked.join(", ")
            );
        }
        outln!(
            "{} kept: `memoria backups` lists them, `memoria restore ID` brings one back",
            counted(merged.backups.len(), "backup")
        );
        return Ok(());
    }
    if g.json {
        return print_json(&plan);
    }
    outln!(
        "{}: merge in {} keeps {} (the oldest) and deletes {}",
        plan.plan_id,
        plan.scope,
        plan.kept_id,
        plan.deleted_ids.join(", ")
    );
    for s in &plan.sources {
        outln!(
            "  {:<24} {}  (created {}; trust {}{})",
            s.id,
            s.summary,
            s.created_at
                .map(human_utc)
                .unwrap_or_else(|| "unknown".into()),
            trust_name(s.trust),
            if s.secret { "; holds a secret" } else { "" }
        );
    }
    outln!(
        "the merged note: trust {} (the lowest of its notes'; --trust sets another){}{}",
        trust_name(plan.labels.trust),
        if plan.tags.is_empty() {
            String::new()
        } else {
            format!("; tags {}", plan.tags.join(", "))
        },
        if plan.labels.secret {
            "\n  one of these notes holds a secret: the merged note is tagged contains-secrets, so it is never recalled, exported or uploaded"
        } else {
            ""
        }
    );
    if !plan.relinked.is_empty() {
        let ids: Vec<&str> = plan.relinked.iter().map(|l| l.id.as_str()).collect();
        outln!(
            "links to the deleted notes will name {} in: {}",
            plan.kept_id,
            ids.join(", ")
        );
    }
    outln!(
        "--- draft ({}), summary: {}",
        match plan.draft.kind {
            DraftKind::Manual => "manual",
            DraftKind::Model => "model",
        },
        plan.draft.summary
    );
    outln!("{}", plan.draft.body.trim_end());
    outln!("---");
    outln!(
        "apply: memoria merge {} --apply --plan {} [--body-file FILE] [--summary TEXT] [--trust LEVEL]",
        a.ids.join(" "),
        plan.plan_id
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct ConfigArgs {
    #[command(subcommand)]
    command: Option<ConfigCommand>,
}

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Print one setting's value in force.
    Get { key: String },
    /// Store a setting on this machine.
    Set { key: String, value: String },
    /// Remove a setting: back to its default.
    Unset { key: String },
}

pub fn config(g: &Globals, a: &ConfigArgs) -> Result<()> {
    let loc = &g.location;
    let values = match &a.command {
        None => config::list(loc)?,
        Some(ConfigCommand::Get { key }) => vec![config::get(loc, key)?],
        Some(ConfigCommand::Set { key, value }) => vec![config::set(loc, key, Some(value))?],
        Some(ConfigCommand::Unset { key }) => vec![config::set(loc, key, None)?],
    };
    if g.json {
        return match &a.command {
            None => print_json(&values),
            Some(_) => print_json(&values[0]),
        };
    }
    for v in &values {
        let source = match v.source {
            config::Source::Default => "default",
            config::Source::File => "config.json",
            config::Source::Env => "environment",
        };
        outln!(
            "{} = {}  ({source}; {})",
            v.key,
            v.value.as_deref().unwrap_or("(not set)"),
            v.about
        );
    }
    Ok(())
}
