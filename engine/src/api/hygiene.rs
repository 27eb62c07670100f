//! The review queue (待整理) and merging: findings of the visible notes, dismissing one
//! against its notes' current versions, a merge planned, drafted and applied, and the
//! archive tier (notes whose importance decayed below the threshold), and consolidation
//! (clusters of recent working notes folded into one, previewed or applied).

use super::scope_arg;
use crate::error::Result;
use crate::hygiene;
use crate::project::Scope;
use crate::vault::Engine;

pub use crate::derive::{Author, Labels};
pub use crate::hygiene::consolidate::{
    COSINE_CUT, ClusterBasis, ConsolidateQuery, ConsolidatedCluster, Consolidation,
    ConsolidationCluster, ConsolidationPlan, FoldedCluster, LastConsolidation, MAX_AGE_DAYS,
    MIN_CLUSTER, ReplacedHow, Replacement, SkippedCluster,
};
pub use crate::hygiene::decay::{ARCHIVE_BELOW, DecayRule, HALF_LIFE_DAYS};
pub use crate::hygiene::merge::{
    DraftKind, LinkingNote, MergeChoice, MergeDraft, MergePlan, MergeSource, Merged,
};
pub use crate::hygiene::{
    Archive, ArchivedNote, Dismissed, Finding, FindingDetail, FindingKind, FindingNote, Review,
    ReviewQuery, TOO_LONG_CHARS, UNUSED_DAYS,
};

/// The scopes a query names: one, or every visible scope.
fn scopes(engine: &Engine, scope: Option<&str>) -> Result<Vec<Scope>> {
    Ok(match scope_arg(engine, scope)? {
        Some(s) => vec![s],
        None => engine.visible_scopes(),
    })
}

/// The review queue: every finding of the scope (or of every visible scope) that no
/// dismissal holds for. Computed locally. The recall index is brought in step first (the notes
/// it lacks, or lacks vectors for, are embedded), so every recallable note has its vector when
/// the embedding model is installed and the answer never depends on what an earlier command
/// embedded; without the model (or for a note recall never
/// holds: quarantined, or holding a secret) the same-topic rule judges by words, and
/// [`Review::vectors`] says whether it had vectors at all.
pub fn review(engine: &Engine, q: &ReviewQuery) -> Result<Review> {
    let unused_days = match q.unused_days {
        Some(d) => d,
        None => crate::config::unused_days(engine.home())?,
    };
    let recall = engine.shared_recall()?;
    engine.sync_recall(&mut |_, _| {})?;
    // Opening recall with a model whose vectors are not all cached embeds them in the
    // background: the review waits for them rather than judge some pairs by words alone.
    recall.index.wait_for_vectors();
    hygiene::review(
        engine,
        &scopes(engine, q.scope.as_deref())?,
        unused_days,
        q.include_dismissed,
    )
}

/// Dismisses a finding of the visible notes until one of its notes changes.
pub fn dismiss(engine: &Engine, finding_id: &str) -> Result<Dismissed> {
    hygiene::dismiss(engine, &engine.visible_scopes(), finding_id.trim())
}

/// Whether a chat model is configured for merge drafts (`model.url`): a front end offers the
/// model's draft (生成合并建议) only then.
pub fn model_configured(engine: &Engine) -> Result<bool> {
    Ok(crate::config::get(engine.home(), "model.url")?
        .value
        .is_some())
}

/// The archive tier of the scope (user, project or domain; `None`: every visible scope):
/// notes whose importance decayed below the threshold (`decay.archiveBelow`), left out of
/// recall and search unless asked for. A use or an edit brings a note back.
pub fn archived(engine: &Engine, scope: Option<&str>) -> Result<Archive> {
    hygiene::archived(engine, &scopes(engine, scope)?)
}

/// Plans merging two or more notes of one scope: the notes with their hashes, the kept id
/// (the oldest note's) and a draft, manual or from the configured model.
pub fn merge_plan(
    engine: &Engine,
    ids: &[String],
    scope: Option<&str>,
    draft: DraftKind,
) -> Result<MergePlan> {
    let scope = scope_arg(engine, scope)?;
    hygiene::merge::merge_plan(engine, ids, scope.as_ref(), draft)
}

/// Refused (`changed_since`) unless `plan` (planned just now) is the plan `expected` names:
/// the notes are as they were when that plan was shown.
pub fn check_plan(plan: &MergePlan, expected: &str) -> Result<()> {
    if plan.plan_id == expected.trim() {
        Ok(())
    } else {
        Err(crate::Error::MergePlanChanged {
            plan: expected.trim().to_owned(),
        })
    }
}

/// Applies a plan with the summary and body settled on: keeps the oldest id, deletes the
/// others, relinks the scope and backs up every note it changes. The merged note is labelled
/// from its sources (the lowest trust, `contains-secrets` if any holds one, its provenance);
/// `choice` says who drafted the text and any trust the person chose. Refused with
/// `changed_since` when a note of the plan changed since.
pub fn merge_apply(
    engine: &mut Engine,
    plan: &MergePlan,
    summary: &str,
    body: &str,
    choice: MergeChoice,
) -> Result<Merged> {
    hygiene::merge::merge_apply(engine, plan, summary, body, choice)
}

/// Plans a consolidation pass without writing anything: the clusters of recent working notes
/// that say the same thing, and the goals a note closed, each with its draft.
pub fn consolidation_preview(engine: &Engine, q: &ConsolidateQuery) -> Result<ConsolidationPlan> {
    hygiene::consolidate::plan(engine, &scopes(engine, q.scope.as_deref())?, q)
}

/// Applies a preview: per cluster, writes the consolidated note and marks its sources
/// `consolidated` (backed up, never deleted). A cluster whose notes changed since the preview
/// is skipped and reported.
/// The pass is recorded as the last one ([`last_consolidation`]).
pub fn consolidation_apply(engine: &mut Engine, plan: ConsolidationPlan) -> Result<Consolidation> {
    let at = engine.now_ms();
    let done = hygiene::consolidate::apply(engine, plan)?;
    hygiene::consolidate::record(engine, LastConsolidation::of(&done, at, false))?;
    Ok(done)
}

/// A consolidation pass now: planned and, unless `q.dry_run`, applied and recorded as the
/// last one.
pub fn consolidate(engine: &mut Engine, q: &ConsolidateQuery) -> Result<Consolidation> {
    let scopes = scopes(engine, q.scope.as_deref())?;
    let at = engine.now_ms();
    let done = hygiene::consolidate::consolidate(engine, &scopes, q)?;
    if !done.dry_run {
        hygiene::consolidate::record(engine, LastConsolidation::of(&done, at, false))?;
    }
    Ok(done)
}

/// What the last consolidation pass on this machine did (the daily pass's, or one applied on
/// request): when, what it folded into what, the goals it closed, what it skipped and why.
/// `None` until one ran.
pub fn last_consolidation(engine: &Engine) -> Result<Option<LastConsolidation>> {
    hygiene::consolidate::last_consolidation(engine)
}

/// When the next daily pass falls due on this machine, by the engine's clock (ms).
pub fn consolidation_due_at(engine: &Engine) -> Result<i64> {
    hygiene::consolidate::next_due(engine)
}

/// The daily pass: [`consolidate`] when none ran on this machine in the last day (by the
/// engine's clock), else nothing (`None`).
pub fn consolidate_if_due(
    engine: &mut Engine,
    q: &ConsolidateQuery,
) -> Result<Option<Consolidation>> {
    let scopes = scopes(engine, q.scope.as_deref())?;
    hygiene::consolidate::consolidate_if_due(engine, &scopes, q)
}

/// The notes of the scope (or of every visible scope) that were replaced and rank below what
/// replaced them: consolidated notes with their consolidated note, superseded notes with the
/// note that supersedes them. A front end dims them and links to the replacement.
pub fn replacements(engine: &Engine, scope: Option<&str>) -> Result<Vec<Replacement>> {
    hygiene::consolidate::replacements(engine, &scopes(engine, scope)?)
}
