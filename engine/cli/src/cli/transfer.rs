//! `import` and `export`.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use memoria_engine::api::transfer;
use memoria_engine::counted;
use memoria_engine::guard::SECRETS_TAG;

use super::{Globals, outln, print_json};

#[derive(Args, Debug)]
pub struct ImportArgs {
    dir: PathBuf,
    #[arg(long)]
    scope: Option<String>,
}

pub fn import(g: &Globals, a: &ImportArgs) -> Result<()> {
    let mut engine = g.location.open()?;
    let bar = indicatif::ProgressBar::new(0);
    if !std::io::stderr().is_terminal() || g.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let report = transfer::import(&mut engine, &a.dir, a.scope.as_deref(), &mut |p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(p.file);
    })?;
    bar.finish_and_clear();
    if g.json {
        return print_json(&report);
    }
    outln!(
        "{} files: {} added, {} updated, {} unchanged, {} skipped (into {})",
        report.files,
        report.added,
        report.updated,
        report.unchanged,
        report.skipped.len(),
        report.scope
    );
    if report.flagged_secrets > 0 {
        let n = report.flagged_secrets;
        let (verb, holds) = if n == 1 {
            ("looks", "it contains")
        } else {
            ("look", "they contain")
        };
        outln!(
            "{} {verb} like {holds} secrets: kept, tagged `{SECRETS_TAG}`, never recalled",
            counted(n, "note")
        );
    }
    if report.attachments > 0 {
        outln!(
            "{} the notes embed or link copied beside them, into attachments/",
            counted(report.attachments, "attachment")
        );
    }
    for k in &report.kept_edited {
        outln!(
            "kept your edits in {}: its source {} changed too, and its new text is in {}",
            k.id,
            k.path,
            k.beside
        );
    }
    for s in &report.skipped {
        outln!("skipped {}: {}", s.path, s.reason);
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    dir: PathBuf,
}

pub fn export(g: &Globals, a: &ExportArgs) -> Result<()> {
    let report = transfer::export(&g.location.open()?, &a.dir)?;
    if g.json {
        return print_json(&report);
    }
    outln!(
        "exported {} to {}",
        counted(report.files, "note"),
        report.dir
    );
    if report.private_left_out > 0 {
        outln!(
            "left out {} that agents never see (quarantined, holding secrets or not parseable); `memoria doctor` lists them",
            counted(report.private_left_out, "private note")
        );
    }
    Ok(())
}
