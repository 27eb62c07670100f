//! `doctor`: the health check, and `--rebuild`.

use anyhow::Result;
use clap::Args;
use memoria_engine::api::doctor::{self, DoctorReport, DoctorRequest};
use memoria_engine::counted;
use memoria_engine::guard::SECRETS_TAG;

use super::{Globals, outln, print_json};

/// The one command that installs the semantic model.
pub const INSTALL_MODEL: &str = "memoria model install";

#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// Delete the index and rebuild it from the notes (usage counts restart from zero).
    #[arg(long)]
    rebuild: bool,
}

pub fn run(g: &Globals, a: &DoctorArgs) -> Result<()> {
    let report = doctor::doctor(&g.location, DoctorRequest { rebuild: a.rebuild })?;
    if g.json {
        print_json(&report)?;
    } else {
        print(&report)?;
    }
    // A script (or CI) learns from the exit code that something needs fixing.
    if !report.ok {
        return Err(super::ProblemsFound.into());
    }
    Ok(())
}

fn print(r: &DoctorReport) -> Result<()> {
    outln!("home:     {}", r.home);
    outln!("index:    {} ({})", r.index, r.index_integrity);
    outln!("recall files: {}", r.recall_integrity);
    outln!(
        "backups:  {} ({} KiB) in {}; kept {}{}",
        r.backups,
        r.backups_bytes.div_ceil(1024),
        r.backups_dir,
        match r.backup_policy.max_age_days {
            0 => "without an age limit".to_owned(),
            d => format!("{d} days"),
        },
        match r.backup_policy.max_total_mb {
            0 => String::new(),
            mb => format!(", at most {mb} MiB"),
        }
    );
    if r.backups_pruned > 0 {
        outln!(
            "          removed {} past the policy",
            counted(r.backups_pruned, "old backup")
        );
    }
    let c = &r.conversations;
    outln!(
        "conversations: {} of {} ({} KiB on disk) in {}; kept {}{}",
        counted(c.stats.messages, "message"),
        counted(c.stats.conversations, "conversation"),
        c.stats.file_bytes.div_ceil(1024),
        c.path,
        match c.policy.max_age_days {
            0 => "without an age limit".to_owned(),
            d => format!("{d} days"),
        },
        match c.policy.max_total_mb {
            0 => String::new(),
            mb => format!(", at most {mb} MiB"),
        }
    );
    if c.removed > 0 {
        outln!(
            "          removed {} past the policy",
            counted(c.removed, "old message")
        );
    }
    match (&r.recall, &r.recall_error) {
        (Some(s), _) if r.semantic_model => {
            outln!(
                "recall:   model {} ({}, {} with vectors)",
                s.model_id,
                counted(s.documents, "note"),
                s.documents_with_vectors
            );
            let waiting = s.documents.saturating_sub(s.documents_with_vectors);
            if waiting > 0 {
                outln!(
                    "          {} still to embed: search finds them by their words until the app, `memoria watch` or `memoria mcp` has embedded them in the background",
                    counted(waiting, "note")
                );
            }
        }
        (Some(s), _) => {
            outln!(
                "recall:   hash embedder: no semantic model is installed, so search matches words, not meaning. Install it with `{INSTALL_MODEL}`."
            );
            // The reason names what is missing; the install command is said once, above.
            let reason = s.fallback_reason.as_deref().unwrap_or("not configured");
            let reason = reason
                .split_once("; install the model")
                .map_or(reason, |(r, _)| r);
            outln!("          ({reason})");
        }
        (None, Some(e)) => outln!("recall:   ! {e}"),
        (None, None) => {}
    }
    match &r.sync {
        None => outln!("sync:     not signed in"),
        Some(s) => match (&s.token, &s.token_error) {
            (Some(_), _) if s.token_refused() => {
                outln!(
                    "sync:     ! signed in to {}, but the server refuses the token (revoked, or issued by another server)",
                    s.server
                );
                outln!(
                    "          an admin creates a new one (`memoria-sync token create --user NAME`); then `memoria sync login --server {} --token TOKEN`",
                    s.server
                );
            }
            (Some(place), _) => {
                let check = s
                    .token_check
                    .as_deref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default();
                outln!(
                    "sync:     signed in to {}; the token is in {place}{check}",
                    s.server
                )
            }
            (None, e) => {
                outln!(
                    "sync:     ! signed in to {}, but {}",
                    s.server,
                    e.as_deref().unwrap_or("no token is kept on this machine")
                );
                outln!(
                    "          sign in again: `memoria sync login --server {}`",
                    s.server
                );
            }
        },
    }
    match &r.project {
        Some(p) => outln!(
            "project:  {} ({}, type {})",
            p.root,
            p.scope,
            p.project_type.as_deref().unwrap_or("-")
        ),
        None => outln!("project:  none here"),
    }
    for s in &r.scopes {
        let watched = if s.watched { ", watched" } else { "" };
        outln!(
            "{}: {}, {} in {}{watched}",
            s.scope,
            counted(s.notes, "note"),
            counted(s.files_on_disk, "file"),
            s.dir
        );
        for b in &s.broken {
            outln!("  ! {} ({}): {}", b.path, b.id, b.error);
        }
        for n in &s.secrets {
            match (n.rule, n.line) {
                (Some(rule), Some(line)) => outln!(
                    "  {} ({}): looks like it holds a secret ({rule}, line {line}); agents never see it",
                    n.path,
                    n.id
                ),
                _ => outln!(
                    "  {} ({}): tagged {SECRETS_TAG}; agents never see it",
                    n.path,
                    n.id
                ),
            }
        }
        for d in &s.duplicate_ids {
            outln!("  ! id `{d}` is claimed by more than one file: rename one");
        }
        if s.leftover_temp_files > 0 {
            outln!(
                "  {} leftover temp files from interrupted writes (removed after 10 minutes)",
                s.leftover_temp_files
            );
        }
    }
    outln!(
        "{}",
        match (r.ok, r.semantic_model) {
            (true, true) => "all good",
            (true, false) =>
                "no problems found, but recall runs without a semantic model (see above)",
            (false, _) => "problems found (see above)",
        }
    );
    Ok(())
}
