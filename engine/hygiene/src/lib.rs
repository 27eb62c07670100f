//! Memory hygiene: the review queue (findings a person acts on or dismisses) and merging.
//!
//! Findings are computed on this machine from the index, with no model: same topic, broken
//! link, missing file, unused and too long. Each has a stable id (its kind and its notes), and
//! a dismissal is kept in machine-local state against the notes' current content hashes, so
//! editing one of them brings the finding back. This module never changes a note by itself:
//! merging (`merge`) runs only when a front end applies a plan the person saw, through the
//! vault's write path, with backups. Consolidation (`consolidate`) is the one pass that changes
//! notes unasked, and it never deletes: originals are marked `consolidated` and backed up.

// A layer built on the vault: it may call the vault's internals (see clippy.toml).
#![allow(clippy::disallowed_methods)]

pub mod consolidate;
pub use memoria_store::decay;
mod dismiss;
pub mod files;
pub mod merge;
mod model;
pub mod topic;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use memoria_shared::hash::sha256_hex;
use memoria_shared::note::links_in;
use memoria_shared::slugify;
use serde::{Deserialize, Serialize};

// The layers below, by the paths this crate names them.
use memoria_recall as recall;
use memoria_store::{config, error, fsx, guard, home, index, project};
use memoria_vault::vault;

use crate::error::Result;
use crate::index::IndexedNote;
use crate::project::Scope;
use crate::recall::embed::HashEmbedder;
use crate::vault::Engine;

pub use dismiss::Dismissed;

/// A body longer than this many characters is a "too long" finding.
pub const TOO_LONG_CHARS: usize = 8_000;
pub use crate::config::UNUSED_DAYS;
const DAY_MS: i64 = 86_400_000;

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// 2–6 notes of one scope that say much the same: merge them or dismiss.
    SameTopic,
    /// A note links (`[[id]]`) to a note that is not visible from here.
    BrokenLink,
    /// A project note names a relative path that is not in the project.
    MissingFile,
    /// Neither recalled, opened nor edited for the configured number of days.
    Unused,
    /// A body over [`TOO_LONG_CHARS`] characters.
    TooLong,
}

impl FindingKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::SameTopic => "same_topic",
            FindingKind::BrokenLink => "broken_link",
            FindingKind::MissingFile => "missing_file",
            FindingKind::Unused => "unused",
            FindingKind::TooLong => "too_long",
        }
    }

    /// The short word that starts a finding id.
    fn id_prefix(self) -> &'static str {
        match self {
            FindingKind::SameTopic => "topic",
            FindingKind::BrokenLink => "link",
            FindingKind::MissingFile => "file",
            FindingKind::Unused => "unused",
            FindingKind::TooLong => "long",
        }
    }
}

/// A note a finding is about, as it is now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FindingNote {
    pub scope: String,
    pub id: String,
    pub summary: String,
    /// The note's content hash now: a dismissal holds for this version only.
    pub hash: String,
    pub path: String,
    /// Milliseconds since the epoch.
    pub updated_at: Option<i64>,
}

/// What was found, with the facts a front end shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum FindingDetail {
    /// The weakest pair's signals inside the group.
    SameTopic {
        /// Word overlap (Jaccard of summary, tag and body words), 0..1.
        lexical: f64,
        /// Cosine of the notes' embedding vectors, when both have one.
        cosine: Option<f32>,
    },
    /// The link targets, as the index knows them (slugged), that name no visible note.
    BrokenLink {
        targets: Vec<String>,
    },
    /// The paths as written in the note.
    MissingFile {
        paths: Vec<String>,
    },
    Unused {
        /// The last recall, opening or edit (milliseconds since the epoch).
        last_used_at: i64,
        /// Whole days since then.
        idle_days: i64,
        /// The threshold in force.
        unused_days: u32,
    },
    TooLong {
        chars: usize,
        limit: usize,
    },
}

impl FindingDetail {
    pub fn kind(&self) -> FindingKind {
        match self {
            FindingDetail::SameTopic { .. } => FindingKind::SameTopic,
            FindingDetail::BrokenLink { .. } => FindingKind::BrokenLink,
            FindingDetail::MissingFile { .. } => FindingKind::MissingFile,
            FindingDetail::Unused { .. } => FindingKind::Unused,
            FindingDetail::TooLong { .. } => FindingKind::TooLong,
        }
    }
}

/// One entry of the review queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Stable: the same kind over the same notes has the same id, on every run.
    pub id: String,
    /// The scope of the finding's notes.
    pub scope: String,
    pub notes: Vec<FindingNote>,
    /// One sentence for a person.
    pub message: String,
    #[serde(flatten)]
    pub detail: FindingDetail,
}

impl Finding {
    pub fn kind(&self) -> FindingKind {
        self.detail.kind()
    }
}

/// The review queue of a scope or of every visible scope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Review {
    /// Findings not dismissed (or all, when dismissed ones were asked for), same topic first.
    pub findings: Vec<Finding>,
    /// How many findings are hidden by a dismissal that still holds.
    pub dismissed: usize,
    /// How many notes were reviewed.
    pub notes: usize,
    /// The "unused" threshold in force.
    pub unused_days: u32,
    /// Whether the same-topic rule had embedding vectors to use (else words only).
    pub vectors: bool,
}

/// The stable id of a finding: its kind and its notes (`scope/id`, sorted).
pub fn finding_id(kind: FindingKind, notes: &[(String, String)]) -> String {
    let mut keys: Vec<String> = notes.iter().map(|(s, i)| format!("{s}/{i}")).collect();
    keys.sort();
    let text = format!("{}\n{}", kind.as_str(), keys.join("\n"));
    format!(
        "{}-{}",
        kind.id_prefix(),
        &sha256_hex(text.as_bytes())[..12]
    )
}

/// Everything the findings are computed from, gathered from the index, the recall index's
/// files and the project folder.
pub struct ReviewInput {
    /// Every note of the visible scopes, bodies included.
    pub rows: Vec<IndexedNote>,
    /// The scopes under review.
    pub scopes: Vec<String>,
    /// The project's root folder and its scope key, for "missing file".
    pub project: Option<(PathBuf, String)>,
    /// The last recall or opening of a note on this machine, by (scope, id).
    pub last_used: HashMap<(String, String), i64>,
    /// One embedding vector per note's recall hash (its content hash, with its aliases when it
    /// has any: `IndexedNote::recall_hash`), all of one model.
    pub vectors: HashMap<String, Vec<f32>>,
    pub now_ms: i64,
    pub unused_days: u32,
}

fn note_of(row: &IndexedNote) -> FindingNote {
    FindingNote {
        scope: row.scope.clone(),
        id: row.id.clone(),
        summary: row.summary.clone(),
        hash: row.hash.clone().unwrap_or_default(),
        path: row.path.clone(),
        updated_at: row.updated_at,
    }
}

fn single(row: &IndexedNote, message: String, detail: FindingDetail) -> Finding {
    Finding {
        id: finding_id(detail.kind(), &[(row.scope.clone(), row.id.clone())]),
        scope: row.scope.clone(),
        notes: vec![note_of(row)],
        message,
        detail,
    }
}

/// The findings over `input`, same topic first, then by scope and note.
pub fn compute(input: &ReviewInput) -> Vec<Finding> {
    // The notes a link can name: every visible, parsable note, by id, by file name and by
    // each of its aliases.
    let mut names: HashSet<String> = HashSet::new();
    let mut claimed: HashSet<(&str, &str)> = HashSet::new();
    let mut reviewed: Vec<&IndexedNote> = Vec::new();
    for r in &input.rows {
        names.insert(r.id.clone());
        let stem = r.rel_path.strip_suffix(".md").unwrap_or(&r.rel_path);
        names.insert(slugify(stem).to_string());
        names.extend(r.aliases.iter().map(|a| slugify(a).to_string()));
        // A second file claiming a taken id, or a file that does not parse, is left to doctor.
        if r.error.is_none() && input.scopes.contains(&r.scope) && claimed.insert((&r.scope, &r.id))
        {
            reviewed.push(r);
        }
    }
    let mut out = Vec::new();
    // A consolidated note was folded into the note that replaced it already: it is not
    // proposed for a merge again.
    let topical: Vec<&IndexedNote> = reviewed
        .iter()
        .copied()
        .filter(|r| r.status.as_deref() != Some("consolidated"))
        .collect();
    let mut vocabulary = topic::Vocabulary::default();
    let tokens: Vec<Vec<u32>> = topical
        .iter()
        .map(|r| vocabulary.note_tokens(&r.scope, &r.summary, &r.tags, &r.body))
        .collect();
    let vectors: Vec<Option<&[f32]>> = topical
        .iter()
        .map(|r| {
            r.recall_hash()
                .and_then(|h| input.vectors.get(&h))
                .map(Vec::as_slice)
        })
        .collect();
    for g in topic::groups_of(tokens, &vectors) {
        let rows: Vec<&IndexedNote> = g.members.iter().map(|&i| topical[i]).collect();
        let keys: Vec<(String, String)> = rows
            .iter()
            .map(|r| (r.scope.clone(), r.id.clone()))
            .collect();
        out.push(Finding {
            id: finding_id(FindingKind::SameTopic, &keys),
            scope: rows[0].scope.clone(),
            notes: rows.iter().map(|r| note_of(r)).collect(),
            message: format!(
                "{} notes say much the same: merge them into one, or dismiss",
                rows.len()
            ),
            detail: FindingDetail::SameTopic {
                lexical: g.weakest.lexical,
                cosine: g.weakest.cosine,
            },
        });
    }
    for r in &reviewed {
        let broken: BTreeSet<String> = links_in(&r.body)
            .iter()
            .map(|l| slugify(l).to_string())
            .filter(|t| !names.contains(t))
            .collect();
        if !broken.is_empty() {
            let list: Vec<String> = broken.into_iter().collect();
            out.push(single(
                r,
                format!(
                    "links to {} that no visible note has: {}",
                    if list.len() == 1 { "an id" } else { "ids" },
                    list.join(", ")
                ),
                FindingDetail::BrokenLink { targets: list },
            ));
        }
        if let Some((root, key)) = &input.project
            && &r.scope == key
        {
            let dir = Path::new(&r.path).parent().unwrap_or(root);
            let missing: Vec<String> = files::file_refs(&r.body)
                .into_iter()
                .filter(|(p, kind)| files::exists_in_project(root, dir, p, *kind) == Some(false))
                .map(|(p, _)| p)
                .collect();
            if !missing.is_empty() {
                out.push(single(
                    r,
                    format!(
                        "names {} not in the project: {}",
                        if missing.len() == 1 {
                            "a path"
                        } else {
                            "paths"
                        },
                        missing.join(", ")
                    ),
                    FindingDetail::MissingFile { paths: missing },
                ));
            }
        }
        let edited = r
            .updated_at
            .or(r.created_at)
            .unwrap_or(r.mtime_ns / 1_000_000);
        let used = input
            .last_used
            .get(&(r.scope.clone(), r.id.clone()))
            .copied()
            .unwrap_or(i64::MIN);
        let last = edited.max(used);
        let idle_days = (input.now_ms - last) / DAY_MS;
        if idle_days >= i64::from(input.unused_days) {
            out.push(single(
                r,
                format!("not recalled, opened or edited for {idle_days} days"),
                FindingDetail::Unused {
                    last_used_at: last,
                    idle_days,
                    unused_days: input.unused_days,
                },
            ));
        }
        let chars = r.body.chars().count();
        if chars > TOO_LONG_CHARS {
            out.push(single(
                r,
                format!(
                    "the body is {chars} characters, over {TOO_LONG_CHARS}: split it or trim it"
                ),
                FindingDetail::TooLong {
                    chars,
                    limit: TOO_LONG_CHARS,
                },
            ));
        }
    }
    out
}

/// The vectors to use: for each content hash, the first passage's vector of the one model
/// (not the hash embedder, whose vectors carry no meaning) that covers the most of them.
fn pick_vectors(found: Vec<(String, String, Vec<f32>)>) -> HashMap<String, Vec<f32>> {
    let mut per_model: HashMap<String, usize> = HashMap::new();
    for (_, model, _) in &found {
        if model != HashEmbedder::MODEL_ID {
            *per_model.entry(model.clone()).or_default() += 1;
        }
    }
    let Some(model) = per_model
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map(|(m, _)| m)
    else {
        return HashMap::new();
    };
    found
        .into_iter()
        .filter(|(_, m, _)| *m == model)
        .map(|(h, _, v)| (h, v))
        .collect()
}

/// The cached first-passage vectors of `hashes` (see [`pick_vectors`]), read from the recall
/// index's vector file directly, so no model loads; none when there is no such file.
pub fn cached_vectors(engine: &Engine, hashes: &[String]) -> Result<HashMap<String, Vec<f32>>> {
    let path = recall::default_dir(engine.home().root()).join("vectors.sqlite");
    if !path.exists() {
        return Ok(HashMap::new());
    }
    let store = recall::store::VectorStore::open(&path)?;
    Ok(pick_vectors(store.first_vectors(hashes)?))
}

/// Which findings to compute.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReviewQuery {
    /// user, project or domain; `None`: every visible scope.
    pub scope: Option<String>,
    /// Days after which a note is unused; `None`: the setting, else [`UNUSED_DAYS`].
    pub unused_days: Option<u32>,
    /// List dismissed findings too.
    pub include_dismissed: bool,
}

/// Gathers what the review reads: the index's rows of every visible scope, this
/// machine's usage (openings from the index, recalls from the recall index's documents)
/// and the cached vectors. The recall index's files are read directly, so no model loads.
fn review_input(engine: &Engine, scopes: &[Scope], unused_days: u32) -> Result<ReviewInput> {
    let visible: Vec<String> = engine.visible_scopes().iter().map(Scope::key).collect();
    let scopes: Vec<String> = scopes.iter().map(Scope::key).collect();
    let rows = engine.index().notes_with_bodies(&visible)?;
    let mut last_used: HashMap<(String, String), i64> = HashMap::new();
    let mut note_use = |scope: String, id: String, at: i64| {
        let e = last_used.entry((scope, id)).or_insert(at);
        *e = (*e).max(at);
    };
    for (s, i, at) in engine.index().last_accesses(&scopes)? {
        note_use(s, i, at);
    }
    let recall_dir = recall::default_dir(engine.home().root());
    let docs_path = recall_dir.join("docs.sqlite");
    if docs_path.exists() {
        let (docs, _) = recall::store::DocStore::open(&docs_path)?;
        for (s, i, at) in docs.last_recalls()? {
            note_use(s, i, at);
        }
    }
    let hashes: Vec<String> = rows
        .iter()
        .filter(|r| r.error.is_none() && scopes.contains(&r.scope))
        .filter_map(|r| r.recall_hash())
        .collect();
    let vectors = cached_vectors(engine, &hashes)?;
    let project = engine.project().and_then(|p| {
        let key = p.scope().key();
        scopes.contains(&key).then(|| (p.root.clone(), key))
    });
    Ok(ReviewInput {
        rows,
        scopes,
        project,
        last_used,
        vectors,
        now_ms: engine.now_ms(),
        unused_days,
    })
}

/// The review of `scopes` on `engine`: findings, dismissed ones left out unless asked for.
pub fn review(
    engine: &Engine,
    scopes: &[Scope],
    unused_days: u32,
    include_dismissed: bool,
) -> Result<Review> {
    let input = review_input(engine, scopes, unused_days)?;
    let all = compute(&input);
    let store = dismiss::DismissStore::open(engine.home())?;
    let (mut findings, mut dismissed) = (Vec::new(), 0);
    for f in all {
        if store.holds(&f) {
            dismissed += 1;
            if !include_dismissed {
                continue;
            }
        }
        findings.push(f);
    }
    Ok(Review {
        findings,
        dismissed,
        notes: input
            .rows
            .iter()
            .filter(|r| input.scopes.contains(&r.scope))
            .count(),
        unused_days,
        vectors: !input.vectors.is_empty(),
    })
}

/// A note in the archive tier: its importance decayed below the threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchivedNote {
    pub scope: String,
    pub id: String,
    pub summary: String,
    /// Its importance now (0..1), after reinforcement by its uses and decay since the last.
    pub importance: f64,
    /// The importance the note states (`None`: the default).
    pub stated_importance: Option<f64>,
    /// Recalls and openings on this machine.
    pub uses: i64,
    /// The last recall or opening on this machine (milliseconds since the epoch).
    pub last_used_at: Option<i64>,
    /// The last edit (milliseconds since the epoch).
    pub updated_at: Option<i64>,
}

/// The archive tier: notes left out of recall and search unless asked for, still listed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Archive {
    pub notes: Vec<ArchivedNote>,
    /// The importance below which a note is archived.
    pub archive_below: f64,
    /// Days after which an unused note's importance is halved.
    pub half_life_days: f64,
}

/// The archived notes of `scopes`, by the decay rule in force. This machine's uses are read
/// from the recall index's documents (so no model loads) and each note's dates and importance
/// from the index as they are now (an edit the recall index has not seen yet still brings a
/// note back); a note the recall index has never seen is not archived.
pub fn archived(engine: &Engine, scopes: &[Scope]) -> Result<Archive> {
    let rule = crate::config::decay_rule(engine.home())?;
    let keys: Vec<String> = scopes.iter().map(Scope::key).collect();
    let docs_path = recall::default_dir(engine.home().root()).join("docs.sqlite");
    let mut notes = Vec::new();
    if docs_path.exists() {
        let mut facts: HashMap<(String, String), recall::RankFacts> = HashMap::new();
        for s in engine.index().note_states()? {
            if s.recallable {
                facts.entry((s.scope, s.id)).or_insert(s.facts);
            }
        }
        let (docs, _) = recall::store::DocStore::open(&docs_path)?;
        let metas: Vec<recall::store::DocMeta> = docs
            .all_meta()?
            .into_iter()
            .filter_map(|mut m| {
                let f = facts.get(&(m.scope.clone(), m.id.clone()))?;
                m.updated_at_ms = f.updated_at_ms;
                m.trust = f.trust;
                m.importance = f.importance;
                m.evergreen = f.evergreen;
                Some(m)
            })
            .collect();
        let found = recall::archived_docs(metas, Some(&keys), &rule, engine.now_ms());
        for (m, live) in found {
            let summary = docs.get(&m.key)?.map(|d| d.summary).unwrap_or_default();
            notes.push(ArchivedNote {
                scope: m.scope,
                id: m.id,
                summary,
                importance: live,
                stated_importance: m.importance,
                uses: m.access_count,
                last_used_at: m.last_access_ms,
                updated_at: m.updated_at_ms,
            });
        }
    }
    Ok(Archive {
        notes,
        archive_below: rule.archive_below,
        half_life_days: rule.half_life_days,
    })
}

/// Dismisses a finding of the current review against its notes' current versions.
pub fn dismiss(engine: &Engine, scopes: &[Scope], finding_id: &str) -> Result<Dismissed> {
    // Only "unused" depends on the threshold; with none, every note is a candidate, so any
    // id a review showed is found.
    let input = review_input(engine, scopes, 0)?;
    let found = compute(&input).into_iter().find(|f| f.id == finding_id);
    let Some(finding) = found else {
        return Err(crate::error::Error::FindingNotFound(finding_id.to_owned()));
    };
    dismiss::DismissStore::open(engine.home())?.dismiss(&finding, engine.now_ms())
}
