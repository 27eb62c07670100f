//! `backups` and `restore`.

use anyhow::Result;
use clap::Args;
use memoria_engine::api::backups;
use memoria_engine::backup::human_utc;

use super::{Globals, outln, print_json};

#[derive(Args, Debug)]
pub struct BackupsArgs {
    #[arg(long, default_value_t = 50)]
    limit: usize,
}

pub fn list(g: &Globals, a: &BackupsArgs) -> Result<()> {
    let engine = g.location.open()?;
    let rows = backups::list(&engine, a.limit)?;
    if g.json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        outln!("no backups");
        return Ok(());
    }
    let policy = backups::policy(&engine);
    outln!(
        "backups are kept {} days and {} MiB in all (0: no limit; change with `memoria config set backups.maxAgeDays DAYS` or `backups.maxTotalMb MIB`)",
        policy.max_age_days,
        policy.max_total_mb
    );
    for b in &rows {
        outln!(
            "{}  {:<18} {:<12} {}  {}",
            b.backup_id,
            b.reason,
            b.scope,
            b.note_id,
            human_utc(b.created_at)
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    backup_id: String,
}

pub fn restore(g: &Globals, a: &RestoreArgs) -> Result<()> {
    let r = backups::restore(&mut g.location.open()?, &a.backup_id)?;
    if g.json {
        return print_json(&r);
    }
    if r.unchanged {
        outln!("{} already matches the backup; nothing changed", r.id);
    } else {
        outln!("restored {} into {} ({})", r.id, r.scope, r.path);
        if let Some(b) = &r.replaced_backup {
            outln!("the version it replaced is in backup {b}");
        }
    }
    Ok(())
}
