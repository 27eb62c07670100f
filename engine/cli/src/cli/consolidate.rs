//! `consolidate`: fold clusters of recent working notes, and the notes that achieved a closed
//! goal, into one consolidated note each.

use anyhow::Result;
use clap::Args;
use memoria_engine::api::hygiene::{
    self, COSINE_CUT, ClusterBasis, ConsolidateQuery, DraftKind, MAX_AGE_DAYS, MIN_CLUSTER,
};
use memoria_engine::counted;

use super::review::DraftArg;
use super::{Globals, outln, print_json};

#[derive(Args, Debug)]
pub struct ConsolidateArgs {
    /// Print the clusters and their drafts; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// The cosine of two notes' vectors from which they are one cluster's.
    #[arg(long, value_name = "COSINE", default_value_t = COSINE_CUT)]
    threshold: f32,
    /// The fewest notes a similarity cluster folds.
    #[arg(long, value_name = "N", default_value_t = MIN_CLUSTER)]
    min_size: usize,
    /// Only notes created or edited within this many days are folded by similarity.
    #[arg(long, value_name = "DAYS", default_value_t = MAX_AGE_DAYS)]
    max_age_days: u32,
    /// user, project or domain (default: every visible scope).
    #[arg(long)]
    scope: Option<String>,
    /// Who writes the consolidated notes (default: the configured model, else manual).
    #[arg(long, value_enum)]
    draft: Option<DraftArg>,
}

pub fn run(g: &Globals, a: &ConsolidateArgs) -> Result<()> {
    let q = ConsolidateQuery {
        scope: a.scope.clone(),
        threshold: Some(a.threshold),
        min_size: Some(a.min_size),
        max_age_days: Some(a.max_age_days),
        draft: a.draft.map(|d| match d {
            DraftArg::Manual => DraftKind::Manual,
            DraftArg::Model => DraftKind::Model,
        }),
        dry_run: a.dry_run,
    };
    let mut engine = g.location.open()?;
    let done = hygiene::consolidate(&mut engine, &q)?;
    if g.json {
        return print_json(&done);
    }
    let plan = &done.plan;
    outln!(
        "{} among {} (cosine from {}{}, at least {} notes, the last {} days)",
        counted(plan.clusters.len(), "cluster"),
        counted(plan.candidates, "recent working note"),
        plan.threshold,
        if plan.vectors {
            ""
        } else {
            "; no vectors cached, so by words only"
        },
        plan.min_size,
        plan.max_age_days
    );
    for c in &plan.clusters {
        let ids: Vec<&str> = c.sources.iter().map(|s| s.id.as_str()).collect();
        let why = match &c.basis {
            ClusterBasis::Similar {
                cosine: Some(cos), ..
            } => format!("similar, cosine ≥ {cos:.3}"),
            ClusterBasis::Similar { lexical, .. } => {
                format!("similar words, overlap ≥ {lexical:.2}")
            }
            ClusterBasis::Goal { goal_id, .. } => format!("achieved goal {goal_id}"),
        };
        outln!(
            "{}  {}  {} → {}{}  ({why})",
            c.cluster_id,
            c.scope,
            ids.join(", "),
            c.into_id,
            if c.new_note { " (new)" } else { "" }
        );
        if done.dry_run {
            outln!("--- draft, summary: {}", c.draft.summary);
            outln!("{}", c.draft.body.trim_end());
            outln!("---");
        }
    }
    if done.dry_run {
        if !plan.clusters.is_empty() {
            outln!("nothing written: run without --dry-run to consolidate");
        }
        return Ok(());
    }
    for c in &done.applied {
        outln!("consolidated {} into {}", c.sources.join(", "), c.into.id);
    }
    for s in &done.skipped {
        outln!("skipped {}: {}", s.cluster_id, s.reason);
    }
    if !done.backups.is_empty() {
        outln!(
            "{} kept: `memoria backups` lists them, `memoria restore ID` brings one back",
            counted(done.backups.len(), "backup")
        );
    }
    Ok(())
}
