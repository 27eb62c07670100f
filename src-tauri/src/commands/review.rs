//! The Review page (待整理): the review queue, dismissing a finding, and merging the notes of a
//! same-topic finding — a plan with its draft, then an apply of the text the person settled
//! on; consolidation — the last pass, a preview of one now, and its apply; and the facts said
//! in enough captured conversations to become notes, and their promotion. The shapes are the
//! API's (`Finding`, `MergePlan`, `Merged`, `Dismissed`, `LastConsolidation`,
//! `ConsolidationPlan`, `Consolidation`, `Promotion`, `Promoted`).

use memoria_engine::Engine;
use memoria_engine::api;
use memoria_engine::api::conversations::{self, Promoted, Promotion};
use memoria_engine::api::hygiene::{
    self, ConsolidateQuery, Consolidation, ConsolidationPlan, Dismissed, DraftKind,
    LastConsolidation, MergeChoice, MergePlan, Merged, Review, ReviewQuery,
};
use memoria_shared::note::Trust;
use serde::{Deserialize, Serialize};
use tauri::State;

use crate::{Shell, UiError};

/// The queue as the page shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReviewQueue {
    #[serde(flatten)]
    pub review: Review,
    /// A chat model is configured, so 生成合并建议 can ask it for a draft.
    pub model_configured: bool,
}

/// An apply: the notes, the plan the person saw, the text they settled on, who drafted the
/// text it started from, and a trust they chose for the merged note (shown beside the one
/// its sources give it; absent unless they changed it).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MergeRequest {
    pub ids: Vec<String>,
    pub scope: Option<String>,
    pub plan_id: String,
    pub summary: String,
    pub body: String,
    #[serde(default)]
    pub drafted_by: DraftKind,
    #[serde(default)]
    pub trust: Option<Trust>,
}

pub fn queue(engine: &Engine) -> Result<ReviewQueue, UiError> {
    Ok(ReviewQueue {
        review: hygiene::review(engine, &ReviewQuery::default())?,
        model_configured: hygiene::model_configured(engine)?,
    })
}

/// Plans the merge again with the manual draft (no model is asked: the text is the person's),
/// refuses it with `changed_since` unless it is the plan they saw, then applies it.
pub fn apply(engine: &mut Engine, req: &MergeRequest) -> Result<Merged, UiError> {
    let plan = hygiene::merge_plan(engine, &req.ids, req.scope.as_deref(), DraftKind::Manual)?;
    hygiene::check_plan(&plan, &req.plan_id)?;
    let choice = MergeChoice {
        drafted_by: req.drafted_by,
        trust: req.trust,
    };
    Ok(hygiene::merge_apply(
        engine,
        &plan,
        &req.summary,
        &req.body,
        choice,
    )?)
}

/// The last consolidation pass on this machine, whether the app runs the daily one (Settings),
/// and when the next falls due.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidationStatus {
    pub last: Option<LastConsolidation>,
    pub daily: bool,
    pub next_due_at: i64,
}

pub fn consolidation_status(engine: &Engine) -> Result<ConsolidationStatus, UiError> {
    Ok(ConsolidationStatus {
        last: hygiene::last_consolidation(engine)?,
        daily: super::settings::load(&api::folders(engine).home).daily_consolidation(),
        next_due_at: hygiene::consolidation_due_at(engine)?,
    })
}

/// The facts ready to become notes: still current, stated in several captured conversations of
/// a visible scope, never promoted before; the most stated first.
pub fn promotions(engine: &Engine) -> Result<Vec<Promotion>, UiError> {
    Ok(conversations::promotions(engine)?)
}

/// Writes the fact `key` names into a note of its scope through the derive path: as trusted
/// as the least trusted message that stated it, naming them all. `not_found` once it is no
/// longer ready (replaced, promoted already, forgotten with its conversations).
pub fn promote(engine: &mut Engine, key: &str) -> Result<Promoted, UiError> {
    Ok(conversations::promote(engine, key)?)
}

#[tauri::command]
pub async fn review_queue(shell: State<'_, Shell>) -> Result<ReviewQueue, UiError> {
    shell.read(queue).await
}

#[tauri::command]
pub async fn review_dismiss(
    shell: State<'_, Shell>,
    finding_id: String,
) -> Result<Dismissed, UiError> {
    shell
        .call(move |e| Ok(hygiene::dismiss(e, &finding_id)?))
        .await
}

#[tauri::command]
pub async fn merge_plan(
    shell: State<'_, Shell>,
    ids: Vec<String>,
    scope: Option<String>,
    draft: DraftKind,
) -> Result<MergePlan, UiError> {
    shell
        .read(move |e| Ok(hygiene::merge_plan(e, &ids, scope.as_deref(), draft)?))
        .await
}

#[tauri::command]
pub async fn merge_apply(
    shell: State<'_, Shell>,
    request: MergeRequest,
) -> Result<Merged, UiError> {
    shell.call(move |e| apply(e, &request)).await
}

#[tauri::command]
pub async fn consolidation_last(shell: State<'_, Shell>) -> Result<ConsolidationStatus, UiError> {
    shell.read(consolidation_status).await
}

/// What a pass now would fold, writing nothing.
#[tauri::command]
pub async fn consolidation_preview(shell: State<'_, Shell>) -> Result<ConsolidationPlan, UiError> {
    shell
        .read(|e| {
            Ok(hygiene::consolidation_preview(
                e,
                &ConsolidateQuery::default(),
            )?)
        })
        .await
}

/// Applies the preview the person confirmed; a cluster whose notes changed since is skipped.
#[tauri::command]
pub async fn consolidation_apply(
    shell: State<'_, Shell>,
    plan: ConsolidationPlan,
) -> Result<Consolidation, UiError> {
    shell
        .call(move |e| Ok(hygiene::consolidation_apply(e, plan)?))
        .await
}

#[tauri::command]
pub async fn review_promotions(shell: State<'_, Shell>) -> Result<Vec<Promotion>, UiError> {
    shell.read(promotions).await
}

#[tauri::command]
pub async fn review_promote(shell: State<'_, Shell>, key: String) -> Result<Promoted, UiError> {
    shell.call(move |e| promote(e, &key)).await
}

#[cfg(test)]
mod tests {
    use memoria_engine::api::backups;
    use memoria_engine::api::conversations::CaptureRequest;
    use memoria_engine::{NewNote, OpenOptions};

    use super::*;

    fn engine(tmp: &tempfile::TempDir) -> Engine {
        Engine::open(OpenOptions::without_model(tmp.path())).unwrap()
    }

    fn add(engine: &mut Engine, summary: &str, body: &str) -> String {
        engine
            .add(NewNote {
                summary: summary.into(),
                body: body.into(),
                ..Default::default()
            })
            .unwrap()
            .id
    }

    #[test]
    fn a_same_topic_finding_is_merged_and_a_stale_plan_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = engine(&tmp);
        let a = add(
            &mut engine,
            "Pricing cards use filled backgrounds, never borders",
            "On the landing page the pricing cards use filled backgrounds and never borders.",
        );
        let b = add(
            &mut engine,
            "Pricing cards: filled backgrounds, not borders",
            "The landing page pricing cards use filled backgrounds, never borders.",
        );
        let q = queue(&engine).unwrap();
        assert!(!q.model_configured);
        let json = serde_json::to_value(&q).unwrap();
        assert_eq!(json["modelConfigured"], false);
        let finding = &json["findings"][0];
        assert_eq!(finding["kind"], "same_topic", "{json}");
        assert!(finding["lexical"].is_number());
        let mut ids: Vec<String> = q.review.findings[0]
            .notes
            .iter()
            .map(|n| n.id.clone())
            .collect();
        ids.sort();
        let mut want = vec![a.clone(), b.clone()];
        want.sort();
        assert_eq!(ids, want);

        let plan = hygiene::merge_plan(&engine, &ids, Some("user"), DraftKind::Manual).unwrap();
        let req = |plan_id: &str| MergeRequest {
            ids: ids.clone(),
            scope: Some("user".into()),
            plan_id: plan_id.into(),
            summary: "Pricing cards have fills, not borders".into(),
            body: "Filled backgrounds, never borders.\n".into(),
            drafted_by: DraftKind::Manual,
            trust: None,
        };
        let stale = apply(&mut engine, &req("plan-000000000000")).unwrap_err();
        assert_eq!(stale.code, "changed_since");
        let merged = apply(&mut engine, &req(&plan.plan_id)).unwrap();
        assert_eq!(merged.kept.id, plan.kept_id);
        assert_eq!(merged.deleted, plan.deleted_ids);
        assert_eq!(merged.backups.len(), 2, "{merged:?}");
        let listed = backups::list(&engine, 10).unwrap();
        assert!(listed.iter().all(|b| b.reason == "merge"), "{listed:?}");
        assert!(queue(&engine).unwrap().review.findings.is_empty());
        let again = apply(&mut engine, &req(&plan.plan_id)).unwrap_err();
        assert_eq!(again.code, "not_found", "{again:?}");
    }

    #[test]
    fn a_merge_request_reads_the_contract_shape() {
        let r: MergeRequest = serde_json::from_value(serde_json::json!({
            "ids": ["a", "b"], "scope": null, "planId": "plan-1", "summary": "s", "body": "b"
        }))
        .unwrap();
        assert_eq!((r.plan_id.as_str(), r.scope), ("plan-1", None));
        let d: DraftKind = serde_json::from_value(serde_json::json!("model")).unwrap();
        assert_eq!(d, DraftKind::Model);
    }

    #[test]
    fn a_consolidation_preview_crosses_to_the_window_and_back_and_the_pass_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = engine(&tmp);
        let status = consolidation_status(&engine).unwrap();
        assert_eq!((status.last, status.daily), (None, true));
        let body = "Each client gets 100 requests a minute at the API gateway, token bucket.";
        let ids: Vec<String> = (0..3)
            .map(|_| add(&mut engine, "Rate limit", body))
            .collect();
        let plan = hygiene::consolidation_preview(&engine, &ConsolidateQuery::default()).unwrap();
        assert_eq!(plan.clusters.len(), 1, "{plan:#?}");
        // The window gets the plan as JSON and sends it back to apply.
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!(json["clusters"][0]["basis"], "similar", "{json}");
        let back: ConsolidationPlan = serde_json::from_value(json).unwrap();
        assert_eq!(back, plan);
        let done = hygiene::consolidation_apply(&mut engine, back).unwrap();
        assert_eq!(done.applied.len(), 1);
        let status = serde_json::to_value(consolidation_status(&engine).unwrap()).unwrap();
        let folded = &status["last"]["folded"][0];
        assert_eq!(
            folded["intoId"],
            done.applied[0].into.id.as_str(),
            "{status}"
        );
        let mut sources: Vec<String> = serde_json::from_value(folded["sources"].clone()).unwrap();
        sources.sort();
        let mut want = ids.clone();
        want.sort();
        assert_eq!(sources, want);
        assert_eq!(status["last"]["daily"], false);
        assert!(status["nextDueAt"].is_number());
    }

    #[test]
    fn a_fact_said_in_three_conversations_is_listed_promoted_once_and_then_gone() {
        let tmp = tempfile::tempdir().unwrap();
        let mut engine = engine(&tmp);
        assert_eq!(promotions(&engine).unwrap(), []);
        for (n, conversation) in ["monday", "wednesday", "friday"].iter().enumerate() {
            let line = serde_json::json!({
                "conversation": conversation, "id": "1", "role": "user", "speaker": "Ana",
                "time": format!("2024-05-{:02}T09:00:00Z", 6 + 2 * n),
                "text": "my team name is Heron",
            });
            let report = conversations::capture_text(
                &engine,
                &format!("{line}\n"),
                &CaptureRequest::default(),
            )
            .unwrap();
            assert_eq!(report.added, 1);
        }
        let ready = promotions(&engine).unwrap();
        assert_eq!(ready.len(), 1, "{ready:?}");
        let json = serde_json::to_value(&ready[0]).unwrap();
        assert_eq!(json["text"], "Ana's team name is Heron", "{json}");
        assert_eq!(json["scope"], "user");
        assert_eq!(
            json["conversations"],
            serde_json::json!(["monday", "wednesday", "friday"])
        );
        assert_eq!(json["sources"].as_array().unwrap().len(), 3);
        assert!(json["firstAt"].as_i64() < json["lastAt"].as_i64(), "{json}");
        // The person's own words: the note gets full trust.
        assert_eq!(json["trust"], serde_json::Value::Null);

        let key = ready[0].key.clone();
        let done = serde_json::to_value(promote(&mut engine, &key).unwrap()).unwrap();
        assert_eq!(
            (&done["scope"], &done["summary"], &done["sources"]),
            (
                &serde_json::json!("user"),
                &serde_json::json!("Ana's team name is Heron"),
                &serde_json::json!(3)
            ),
            "{done}"
        );
        let id = done["id"].as_str().unwrap();
        let (_, row) = engine.resolve(id, None).unwrap();
        assert_eq!(row.summary, "Ana's team name is Heron");
        assert_eq!(promotions(&engine).unwrap(), []);
        let again = promote(&mut engine, &key).unwrap_err();
        assert_eq!(again.code, "not_found", "{again:?}");
    }
}
