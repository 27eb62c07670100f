//! Merging notes of one scope into one: a plan (the notes as they are, with their hashes, the
//! id kept and a draft) that a person reads and edits, then an apply that keeps the oldest id,
//! deletes the others, points every `[[deleted-id]]` of the scope at the kept id and backs up
//! every note it changes or deletes. An apply is refused when any note of the plan changed
//! since: the person merged what they saw, or nothing.

use std::collections::HashMap;
use std::path::PathBuf;

use memoria_shared::slugify;
use serde::{Deserialize, Serialize};

use super::model;
use crate::config;
use crate::error::{Error, Result};
use crate::guard::SECRETS_TAG;
use crate::index::IndexedNote;
use crate::project::Scope;
use crate::vault::{Engine, Written, with_final_newline};
use memoria_derive::model::ModelSettings;
use memoria_derive::{self, Author, Derived, Labels, Origin, Planned, Write};
use memoria_shared::note::Trust;

/// Who writes the draft.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DraftKind {
    /// Every original under its summary as a heading, oldest first.
    #[default]
    Manual,
    /// The configured chat model's merge (`model.url`).
    Model,
}

/// A note of a plan, as it was when the plan was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeSource {
    pub id: String,
    pub summary: String,
    pub tags: Vec<String>,
    /// The content hash the apply checks.
    pub hash: String,
    pub created_at: Option<i64>,
    pub updated_at: Option<i64>,
    pub path: String,
    pub body: String,
    /// Its trust as the plan read it (`None`: none written, the person's own).
    #[serde(default)]
    pub trust: Option<Trust>,
    /// Whether it holds a secret (tagged, or marked by the credential guard).
    #[serde(default)]
    pub secret: bool,
}

impl DraftKind {
    /// Who wrote a draft of this kind.
    pub fn author(self) -> Author {
        match self {
            DraftKind::Manual => Author::Person,
            DraftKind::Model => Author::Model,
        }
    }
}

/// The merged note as proposed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeDraft {
    pub kind: DraftKind,
    pub summary: String,
    pub body: String,
}

/// A note outside the merge whose links the apply rewrites.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkingNote {
    pub id: String,
    pub summary: String,
}

/// What [`merge_plan`] proposes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MergePlan {
    /// Names this plan: the scope, the notes and their hashes. Planning again over unchanged
    /// notes gives the same id.
    pub plan_id: String,
    pub scope: String,
    /// The oldest note's id, which the merged note keeps.
    pub kept_id: String,
    /// The ids deleted by the apply.
    pub deleted_ids: Vec<String>,
    /// The notes merged, oldest first.
    pub sources: Vec<MergeSource>,
    /// The tags of the merged note: every source's, in order, once (`contains-secrets` when a
    /// source holds a secret).
    pub tags: Vec<String>,
    /// The labels the merged note gets from its sources and its draft: the lowest trust,
    /// whether it holds a secret. A person may set another trust in the apply, by choice.
    pub labels: Labels,
    pub draft: MergeDraft,
    /// Notes of the scope that link to a deleted id (their links will name the kept id).
    pub relinked: Vec<LinkingNote>,
}

/// What [`merge_apply`] did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Merged {
    pub kept: Written,
    pub deleted: Vec<String>,
    /// Notes whose `[[links]]` now name the kept id.
    pub relinked: Vec<String>,
    /// Notes that link to a deleted id but do not parse, so were left as they are.
    pub not_relinked: Vec<String>,
    /// A backup of every note changed or deleted.
    pub backups: Vec<String>,
}

/// Age order: created, else updated, else never; ties by id.
pub fn age_key(s: &MergeSource) -> (i64, String) {
    (
        s.created_at.or(s.updated_at).unwrap_or(i64::MAX),
        s.id.clone(),
    )
}

pub fn source_of(row: &IndexedNote) -> Result<MergeSource> {
    if let Some(reason) = &row.error {
        return Err(Error::Broken {
            id: row.id.clone(),
            path: PathBuf::from(&row.path),
            reason: reason.clone(),
        });
    }
    Ok(MergeSource {
        id: row.id.clone(),
        summary: row.summary.clone(),
        tags: row
            .tags
            .iter()
            .filter(|t| *t != SECRETS_TAG)
            .cloned()
            .collect(),
        hash: row.hash.clone().unwrap_or_default(),
        created_at: row.created_at,
        updated_at: row.updated_at,
        path: row.path.clone(),
        body: row.body.clone(),
        trust: memoria_derive::trust_of(row.trust.as_deref()),
        secret: row.tags.iter().any(|t| t == SECRETS_TAG),
    })
}

/// The manual draft: every original under its summary as a heading, oldest first.
pub fn manual_draft(sources: &[MergeSource]) -> MergeDraft {
    let body = sources
        .iter()
        .map(|s| format!("## {}\n\n{}\n", s.summary, s.body.trim()))
        .collect::<Vec<_>>()
        .join("\n");
    MergeDraft {
        kind: DraftKind::Manual,
        summary: sources[0].summary.clone(),
        body,
    }
}

/// Rewrites `[[target]]`, `[[target|alias]]` and `[[target#heading]]` whose target names a
/// key of `to` (as the index names link targets) to its value. Code spans and fenced blocks
/// are left alone, as they hold no links. `None`: nothing to rewrite.
pub fn rewrite_links(body: &str, to: &HashMap<String, String>) -> Option<String> {
    let mut out = String::with_capacity(body.len());
    let mut changed = false;
    let mut in_fence = false;
    for line in body.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            out.push_str(line);
            continue;
        }
        if in_fence {
            out.push_str(line);
            continue;
        }
        for (i, part) in line.split('`').enumerate() {
            if i > 0 {
                out.push('`');
            }
            if i % 2 == 1 {
                out.push_str(part);
                continue;
            }
            let mut rest = part;
            while let Some(start) = rest.find("[[") {
                out.push_str(&rest[..start + 2]);
                let after = &rest[start + 2..];
                let Some(end) = after.find("]]") else {
                    rest = after;
                    continue;
                };
                let inner = &after[..end];
                let cut = inner.find(['|', '#']).unwrap_or(inner.len());
                let target = inner[..cut].trim();
                match to.get(slugify(target).as_str()) {
                    Some(new) if !target.is_empty() => {
                        out.push_str(new);
                        out.push_str(&inner[cut..]);
                        changed = true;
                    }
                    _ => out.push_str(inner),
                }
                rest = &after[end..];
            }
            out.push_str(rest);
        }
    }
    changed.then_some(out)
}

/// The model settings, or the error naming the setting when none is configured.
fn model_settings(engine: &Engine) -> Result<ModelSettings> {
    ModelSettings::load(engine.home())?.ok_or(Error::NoModelConfigured)
}

/// Whether a chat model is configured for drafts (`model.url`).
pub fn model_configured(engine: &Engine) -> Result<bool> {
    Ok(config::get(engine.home(), "model.url")?.value.is_some())
}

/// The draft of `sources` (oldest first) of the kind asked for: the manual draft, or the
/// configured model's (an error when none is configured or it fails). The caller keeps notes
/// holding secrets from the model.
pub fn draft(engine: &Engine, sources: &[MergeSource], kind: DraftKind) -> Result<MergeDraft> {
    Ok(match kind {
        DraftKind::Manual => manual_draft(sources),
        DraftKind::Model => {
            let settings = model_settings(engine)?;
            let notes: Vec<(String, String)> = sources
                .iter()
                .map(|s| (s.summary.clone(), s.body.clone()))
                .collect();
            let (summary, body) = model::draft(&settings, &notes)?;
            MergeDraft {
                kind: DraftKind::Model,
                summary,
                body,
            }
        }
    })
}

/// Plans merging `ids` (two or more notes of one scope; `scope` narrows where they are
/// looked up) with a draft of the kind asked for.
pub fn merge_plan(
    engine: &Engine,
    ids: &[String],
    scope: Option<&Scope>,
    draft: DraftKind,
) -> Result<MergePlan> {
    if ids.len() < 2 {
        return Err(Error::Invalid(
            "a merge needs two or more notes: name every note to merge".into(),
        ));
    }
    let mut found: Vec<(Scope, IndexedNote)> = Vec::new();
    for id in ids {
        let (s, row) = engine.resolve(id, scope)?;
        if found.iter().any(|(fs, r)| fs == &s && r.id == row.id) {
            return Err(Error::Invalid(format!(
                "note `{}` is named twice: name each note to merge once",
                row.id
            )));
        }
        if let Some((first, _)) = found.first()
            && first != &s
        {
            return Err(Error::Invalid(format!(
                "`{}` is in {} and `{}` in {}: only notes of one scope can be merged",
                found[0].1.id, first, row.id, s
            )));
        }
        found.push((s, row));
    }
    let scope = found[0].0.clone();
    let rows: Vec<IndexedNote> = found.into_iter().map(|(_, r)| r).collect();
    let mut sources = rows.iter().map(source_of).collect::<Result<Vec<_>>>()?;
    sources.sort_by_key(age_key);
    let kept_id = sources[0].id.clone();
    let deleted_ids: Vec<String> = sources[1..].iter().map(|s| s.id.clone()).collect();
    let mut tags: Vec<String> = Vec::new();
    for s in &sources {
        for t in &s.tags {
            if !tags.contains(t) {
                tags.push(t.clone());
            }
        }
    }
    let origins: Vec<Origin> = rows.iter().map(Origin::of).collect();
    if origins.iter().any(|o| o.secret) && !tags.iter().any(|t| t == SECRETS_TAG) {
        tags.push(SECRETS_TAG.to_owned());
    }
    if draft == DraftKind::Model {
        model_settings(engine)?;
        if let Some(o) = origins.iter().find(|o| o.secret) {
            return Err(Error::Invalid(format!(
                "note `{}` looks like it holds a secret, so it is not sent to a model: use the manual draft",
                o.id
            )));
        }
        if let Some(o) = origins.iter().find(|o| o.trust == Some(Trust::Quarantined)) {
            return Err(Error::Invalid(format!(
                "note `{}` is quarantined (it may hold instructions meant for a model), so it is not sent to a model: use the manual draft",
                o.id
            )));
        }
    }
    let labels = memoria_derive::labels(&origins, None, draft.author());
    let draft = self::draft(engine, &sources, draft)?;
    let key = scope.key();
    let mut relinked: Vec<LinkingNote> = Vec::new();
    for d in &deleted_ids {
        for (_, id) in engine.index().backlinks(std::slice::from_ref(&key), d)? {
            if sources.iter().any(|s| s.id == id) || relinked.iter().any(|l| l.id == id) {
                continue;
            }
            let summary = engine
                .index()
                .find(&key, &id)?
                .first()
                .map(|r| r.summary.clone())
                .unwrap_or_default();
            relinked.push(LinkingNote { id, summary });
        }
    }
    let mut fingerprint = key.clone();
    for s in &sources {
        fingerprint.push_str(&format!("\n{}\n{}", s.id, s.hash));
    }
    let plan_id = format!(
        "plan-{}",
        &memoria_shared::hash::sha256_hex(fingerprint.as_bytes())[..12]
    );
    Ok(MergePlan {
        plan_id,
        scope: key,
        kept_id,
        deleted_ids,
        sources,
        tags,
        labels,
        draft,
        relinked,
    })
}

/// What the person settled on in the step that applies a merge, beyond the text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MergeChoice {
    /// Who wrote the draft the text started from: a model's draft makes the merged note at most
    /// `derived`.
    pub drafted_by: DraftKind,
    /// A trust the person chose for the merged note, shown to them as a change from the
    /// plan's `labels.trust`; `None`: the labels' rule alone.
    pub trust: Option<Trust>,
}

/// Applies `plan` with the merged `summary` and `body` the person settled on. Refused
/// (`changed_since`) when any source changed or went since the plan; nothing is written then.
/// The kept note is written through the derive path ([`memoria_derive::commit`]): its labels come from
/// every source as it is now, and with sync on the merge is committed to the cloud first.
pub fn merge_apply(
    engine: &mut Engine,
    plan: &MergePlan,
    summary: &str,
    body: &str,
    choice: MergeChoice,
) -> Result<Merged> {
    let scope = Scope::from_key(&plan.scope)?;
    if !engine.visible_scopes().contains(&scope) {
        return Err(Error::ScopeNotVisible {
            scope: plan.scope.clone(),
            reason: format!("scope {scope} is not visible from here"),
        });
    }
    let kept_source = plan
        .sources
        .iter()
        .find(|s| s.id == plan.kept_id)
        .ok_or_else(|| Error::Invalid("the plan's kept note is not one of its notes".into()))?;
    let mut others: Vec<&str> = plan
        .sources
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| *id != plan.kept_id)
        .collect();
    let mut deleted: Vec<&str> = plan.deleted_ids.iter().map(String::as_str).collect();
    others.sort_unstable();
    deleted.sort_unstable();
    if others.is_empty() || others != deleted {
        return Err(Error::Invalid(
            "the plan's deleted notes are not its notes other than the kept one: plan the merge again".into(),
        ));
    }
    let to: HashMap<String, String> = plan
        .deleted_ids
        .iter()
        .map(|d| (d.clone(), plan.kept_id.clone()))
        .collect();
    let body = with_final_newline(rewrite_links(body, &to).unwrap_or_else(|| body.to_owned()));
    let _lock = engine.lock_scope(&scope)?;
    engine.rescan_scope(&scope)?;
    let key = scope.key();
    // Every source as it is now, checked against the plan before anything is written.
    let mut current = Vec::new();
    for s in &plan.sources {
        let changed = || Error::MergeSourceChanged { id: s.id.clone() };
        let row = engine
            .index()
            .find(&key, &s.id)?
            .into_iter()
            .next()
            .ok_or_else(changed)?;
        let (note, bytes) = engine.load_writable(&row).map_err(|e| match e {
            Error::Broken { .. } => changed(),
            other => other,
        })?;
        if note.content_hash().as_str() != s.hash {
            return Err(changed());
        }
        current.push((row, note, bytes));
    }
    let (kept_row, mut kept_note, kept_bytes) = current
        .iter()
        .find(|(r, _, _)| r.id == kept_source.id)
        .cloned()
        .expect("the kept note is a source");
    let kept_read = Planned::new(kept_row.clone(), kept_bytes, &kept_note);
    kept_note.summary = summary.trim().to_owned();
    kept_note.body = body;
    kept_note.tags = plan.tags.clone();
    kept_note.updated_at = Some(engine.now_ms());
    // The labels come from the sources as they are now, never from the plan's copy.
    let merged = Derived {
        note: kept_note,
        over: Some(kept_read),
        sources: current.iter().map(|(r, _, _)| Origin::of(r)).collect(),
        author: choice.drafted_by.author(),
        chosen_trust: choice.trust,
    };
    // Every write, in order: the kept note, links elsewhere in the scope, then the deletions,
    // so a failure midway leaves every source's content in place or in a backup.
    let mut writes: Vec<Write> = Vec::new();
    let (mut relinked, mut not_relinked) = (Vec::new(), Vec::new());
    let mut linking: Vec<String> = Vec::new();
    for d in &plan.deleted_ids {
        for (_, id) in engine.index().backlinks(std::slice::from_ref(&key), d)? {
            if !plan.deleted_ids.contains(&id) && id != plan.kept_id && !linking.contains(&id) {
                linking.push(id);
            }
        }
    }
    for id in linking {
        let Some(row) = engine.index().find(&key, &id)?.into_iter().next() else {
            continue;
        };
        let Ok((mut note, bytes)) = engine.load_writable(&row) else {
            not_relinked.push(id);
            continue;
        };
        let Some(new_body) = rewrite_links(&note.body, &to) else {
            continue;
        };
        let over = Planned::new(row, bytes, &note);
        note.body = new_body;
        note.updated_at = Some(engine.now_ms());
        writes.push(Write::Replace {
            over,
            new: Box::new(note),
        });
        relinked.push(id);
    }
    for (row, note, bytes) in current.iter().filter(|(r, _, _)| r.id != plan.kept_id) {
        writes.push(Write::Delete(Planned::new(
            row.clone(),
            bytes.clone(),
            note,
        )));
    }
    drop(_lock);
    let backups = memoria_derive::commit(engine, &scope, vec![merged], writes)?;
    let deleted = plan
        .sources
        .iter()
        .filter(|s| s.id != plan.kept_id)
        .map(|s| s.id.clone())
        .collect();
    Ok(Merged {
        kept: Written {
            scope: key,
            id: kept_row.id.clone(),
            path: kept_row.path.clone(),
        },
        deleted,
        relinked,
        not_relinked,
        backups,
    })
}
