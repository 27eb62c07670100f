//! Consolidation, the "sleep" pass: clusters of recent `working` notes of one scope that say
//! the same thing fold into one consolidated note, and a note that `closes` a goal takes in the
//! goal's `achieves` notes. The originals are never deleted: they get `status: consolidated`
//! (ranked below what replaced them), each is backed up before it changes, and the
//! consolidated note lists them as `[[id]]` links under "Consolidated from", its provenance.
//!
//! A pass is planned from the index (no note changes) and applied per cluster; a cluster whose
//! notes changed since the plan is skipped, whole. The daily pass ([`consolidate_if_due`]) runs
//! at most once per [`INTERVAL_MS`] on this machine, recorded in
//! `$MEMORIA_HOME/review/consolidation.json` (never synced).
//!
//! Similarity is the cosine of the notes' cached first-passage vectors (no model runs here),
//! at or above [`COSINE_CUT`]; a note without a vector pairs by the same-topic rule's word
//! overlap alone ([`super::topic::LEXICAL_ALONE`]). The cut was chosen on SciFact
//! (`scripts/consolidation-study.py`): the same-topic study's near-duplicate variants against
//! related-but-distinct documents, embedded by the engine's e5-small model. It is the lowest
//! cut above every related pair's cosine, so a consolidation folds rewordings of one note and
//! leaves notes that are merely on one subject alone. `docs/BENCHMARKS.md` has the figures.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use memoria_shared::note::{Note, Status};
use memoria_shared::{NoteId, slugify};
use serde::{Deserialize, Serialize};

use super::merge::{self, DraftKind, MergeDraft, MergeSource};
use super::topic;
use crate::error::{Error, Result};
use crate::fsx;
use crate::index::IndexedNote;
use crate::project::Scope;
use crate::vault::{Engine, Written, with_final_newline};
use memoria_derive::{self, Derived, Labels, Origin, Planned, Write};

/// The cosine of two notes' vectors at or above which they are one cluster's (unless the
/// setting or the caller says otherwise).
pub const COSINE_CUT: f32 = 0.96;
/// The fewest notes a similarity cluster folds.
pub const MIN_CLUSTER: usize = 3;
/// Only notes created or edited within this many days are consolidated by similarity.
pub const MAX_AGE_DAYS: u32 = 7;
/// The daily pass runs at most once in this many milliseconds.
pub const INTERVAL_MS: i64 = 86_400_000;
const DAY_MS: i64 = 86_400_000;
/// The heading of the consolidated note's provenance list.
pub const PROVENANCE_HEADING: &str = "## Consolidated from";

/// Why notes are one cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "basis",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum ClusterBasis {
    /// Recent working notes that say the same thing; the weakest linking pair's signals.
    Similar {
        /// The least cosine of a pair that links the cluster (`None`: linked by words alone).
        cosine: Option<f32>,
        /// The least word overlap (Jaccard) of such a pair.
        lexical: f64,
    },
    /// A note closed a goal: it takes in the goal's `achieves` notes.
    Goal { goal_id: String, closing_id: String },
}

/// A cluster as planned: its notes as they were, and the note it folds into.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidationCluster {
    /// Names the cluster: its scope, notes and their hashes. Planning again over unchanged
    /// notes gives the same id.
    pub cluster_id: String,
    pub scope: String,
    #[serde(flatten)]
    pub basis: ClusterBasis,
    /// The notes that become `consolidated`, oldest first.
    pub sources: Vec<MergeSource>,
    /// The note the cluster folds into: a new note's id (similarity), or the closing note's
    /// (a goal), whose text the draft replaces.
    pub into_id: String,
    /// Whether `into_id` is a new note.
    pub new_note: bool,
    /// The consolidated note's text, its provenance list included.
    pub draft: MergeDraft,
    pub tags: Vec<String>,
    /// The labels the consolidated note gets from its sources (computed again from the notes
    /// as they are when the cluster is applied).
    #[serde(default)]
    pub labels: Labels,
}

/// What a pass would do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidationPlan {
    pub clusters: Vec<ConsolidationCluster>,
    /// The cosine cut in force.
    pub threshold: f32,
    pub min_size: usize,
    pub max_age_days: u32,
    /// Recent working notes considered for similarity clusters.
    pub candidates: usize,
    /// Whether cached vectors were there to compare (else words only).
    pub vectors: bool,
}

/// A cluster applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsolidatedCluster {
    pub cluster_id: String,
    /// The consolidated note.
    pub into: Written,
    /// The notes now `consolidated`.
    pub sources: Vec<String>,
}

/// A cluster left as it was, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedCluster {
    pub cluster_id: String,
    pub reason: String,
}

/// What a pass did (or, on a dry run, would do: nothing applied).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Consolidation {
    pub plan: ConsolidationPlan,
    pub dry_run: bool,
    pub applied: Vec<ConsolidatedCluster>,
    pub skipped: Vec<SkippedCluster>,
    /// A backup of every note changed.
    pub backups: Vec<String>,
}

/// How a pass runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsolidateQuery {
    /// user, project or domain; `None`: every visible scope.
    pub scope: Option<String>,
    /// The cosine cut; `None`: [`COSINE_CUT`].
    pub threshold: Option<f32>,
    /// The fewest notes of a similarity cluster; `None`: [`MIN_CLUSTER`].
    pub min_size: Option<usize>,
    /// Days within which a note was created or edited; `None`: [`MAX_AGE_DAYS`].
    pub max_age_days: Option<u32>,
    /// Who writes the drafts; `None`: the configured model when there is one, else manual.
    pub draft: Option<DraftKind>,
    /// Plan only: write nothing.
    pub dry_run: bool,
}

fn is_working(row: &IndexedNote) -> bool {
    matches!(row.status.as_deref(), None | Some("working"))
}

/// Whether a note may be folded automatically: never a quarantined one, nor one holding a
/// secret (the review still shows them as same-topic findings, for a person to act on).
fn foldable(row: &IndexedNote) -> bool {
    Origin::of(row).kept_from_automatic().is_none()
}

/// The connected components of `n` notes over `pairs` (i, j, cosine, lexical) with at least
/// `min_size` members, each with its weakest pair's signals, by first member.
fn clusters_of(
    n: usize,
    pairs: &[(usize, usize, Option<f32>, f64)],
    min_size: usize,
) -> Vec<(Vec<usize>, Option<f32>, f64)> {
    let mut uf: Vec<usize> = (0..n).collect();
    fn root(uf: &mut [usize], mut i: usize) -> usize {
        while uf[i] != i {
            uf[i] = uf[uf[i]];
            i = uf[i];
        }
        i
    }
    for &(i, j, _, _) in pairs {
        let (x, y) = (root(&mut uf, i), root(&mut uf, j));
        if x != y {
            uf[x.max(y)] = x.min(y);
        }
    }
    let mut groups: BTreeMap<usize, (Vec<usize>, Option<f32>, f64)> = BTreeMap::new();
    for i in 0..n {
        let r = root(&mut uf, i);
        groups.entry(r).or_insert((Vec::new(), None, 1.0)).0.push(i);
    }
    for &(i, _, c, l) in pairs {
        let r = root(&mut uf, i);
        if let Some(g) = groups.get_mut(&r) {
            g.1 = match (g.1, c) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            g.2 = g.2.min(l);
        }
    }
    groups
        .into_values()
        .filter(|g| g.0.len() >= min_size.max(2))
        .collect()
}

/// The deterministic or the model's draft of `sources` (oldest first), with the provenance
/// list of `provenance` appended.
fn draft_of(
    engine: &Engine,
    sources: &[MergeSource],
    provenance: &[&MergeSource],
    kind: DraftKind,
) -> Result<MergeDraft> {
    // A cluster with a note that is quarantined or holds a secret gets the manual draft:
    // nothing of it goes to a model.
    let private = sources
        .iter()
        .any(|s| s.secret || s.trust == Some(memoria_shared::note::Trust::Quarantined));
    let kind = if private { DraftKind::Manual } else { kind };
    let mut d = merge::draft(engine, sources, kind)?;
    let mut body = d.body.trim_end().to_owned();
    body.push_str("\n\n");
    body.push_str(PROVENANCE_HEADING);
    body.push_str("\n\n");
    for s in provenance {
        body.push_str(&format!("- [[{}]] {}\n", s.id, s.summary));
    }
    d.body = body;
    Ok(d)
}

fn union_tags(sources: &[MergeSource]) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    for s in sources {
        for t in &s.tags {
            if !tags.contains(t) {
                tags.push(t.clone());
            }
        }
    }
    tags
}

fn cluster_id(scope: &str, into: &str, sources: &[MergeSource]) -> String {
    let mut fingerprint = format!("{scope}\n{into}");
    for s in sources {
        fingerprint.push_str(&format!("\n{}\n{}", s.id, s.hash));
    }
    format!(
        "fold-{}",
        &memoria_shared::hash::sha256_hex(fingerprint.as_bytes())[..12]
    )
}

/// The id of a new consolidated note: its summary's first words and the sources' fingerprint,
/// so a plan names the same id every time.
fn new_id(summary: &str, sources: &[MergeSource]) -> Result<NoteId> {
    let mut fingerprint = String::new();
    for s in sources {
        fingerprint.push_str(&format!("{}\n", s.id));
    }
    let tail = &memoria_shared::hash::sha256_hex(fingerprint.as_bytes())[..6];
    let words: Vec<&str> = summary.split_whitespace().take(6).collect();
    let base: String = slugify(&words.join(" "))
        .as_str()
        .chars()
        .take(48)
        .collect();
    let base = base.trim_end_matches(['-', '.', '_']);
    let id = if base.is_empty() {
        format!("consolidated-{tail}")
    } else {
        format!("{base}-{tail}")
    };
    Ok(NoteId::new(&id)?)
}

/// Plans a pass over `scopes`: goal clusters first, then similarity clusters of the recent
/// working notes not in one, by scope.
pub fn plan(engine: &Engine, scopes: &[Scope], q: &ConsolidateQuery) -> Result<ConsolidationPlan> {
    let threshold = q.threshold.unwrap_or(COSINE_CUT);
    if !(threshold.is_finite() && (-1.0..=1.0).contains(&threshold)) {
        return Err(Error::Invalid(format!(
            "the similarity threshold {threshold} is not a cosine: give a number from -1 to 1, such as {COSINE_CUT}"
        )));
    }
    let min_size = q.min_size.unwrap_or(MIN_CLUSTER);
    if min_size < 2 {
        return Err(Error::Invalid(
            "a cluster needs at least two notes: give a minimum size of 2 or more".into(),
        ));
    }
    let max_age_days = q.max_age_days.unwrap_or(MAX_AGE_DAYS);
    let kind = match q.draft {
        Some(k) => k,
        None if super::merge::model_configured(engine)? => DraftKind::Model,
        None => DraftKind::Manual,
    };
    let keys: Vec<String> = scopes.iter().map(Scope::key).collect();
    let rows = engine.index().notes_with_bodies(&keys)?;
    // One parsable file per id, as the review takes them.
    let mut by_key: HashMap<(String, String), &IndexedNote> = HashMap::new();
    for r in rows.iter().filter(|r| r.error.is_none()) {
        by_key.entry((r.scope.clone(), r.id.clone())).or_insert(r);
    }
    let mut clusters = Vec::new();
    let mut taken: HashSet<(String, String)> = HashSet::new();

    // Goals: a note that closes a goal takes in the goal's achieves notes not folded yet.
    let relations = engine.index().relations(&keys)?;
    let mut achieves: HashMap<(String, String), Vec<String>> = HashMap::new();
    for (scope, id, kind, target) in &relations {
        if kind == "achieves" {
            achieves
                .entry((scope.clone(), target.clone()))
                .or_default()
                .push(id.clone());
        }
    }
    for (scope, closing, kind_name, goal) in &relations {
        if kind_name != "closes" {
            continue;
        }
        let Some(closing_row) = by_key.get(&(scope.clone(), closing.clone())) else {
            continue;
        };
        if !foldable(closing_row) {
            continue;
        }
        if taken.contains(&(scope.clone(), closing.clone())) {
            continue;
        }
        let members: Vec<&IndexedNote> = achieves
            .get(&(scope.clone(), goal.clone()))
            .into_iter()
            .flatten()
            .filter(|id| *id != closing && *id != goal)
            .filter_map(|id| by_key.get(&(scope.clone(), id.clone())).copied())
            .filter(|r| {
                is_working(r) && foldable(r) && !taken.contains(&(r.scope.clone(), r.id.clone()))
            })
            .collect();
        if members.is_empty() {
            continue;
        }
        let mut sources = members
            .iter()
            .map(|r| merge::source_of(r))
            .collect::<Result<Vec<_>>>()?;
        sources.sort_by_key(merge::age_key);
        let closing_source = merge::source_of(closing_row)?;
        let mut text = vec![closing_source.clone()];
        text.extend(sources.iter().cloned());
        let provenance: Vec<&MergeSource> = sources.iter().collect();
        let mut draft = draft_of(engine, &text, &provenance, kind)?;
        let origins: Vec<Origin> = members
            .iter()
            .chain([closing_row])
            .map(|r| Origin::of(r))
            .collect();
        draft.summary = closing_source.summary.clone();
        let mut all = vec![closing_source.clone()];
        all.extend(sources.iter().cloned());
        for r in members.iter().chain([closing_row]) {
            taken.insert((r.scope.clone(), r.id.clone()));
        }
        clusters.push(ConsolidationCluster {
            cluster_id: cluster_id(scope, closing, &all),
            scope: scope.clone(),
            basis: ClusterBasis::Goal {
                goal_id: goal.clone(),
                closing_id: closing.clone(),
            },
            tags: union_tags(&all),
            labels: memoria_derive::labels(&origins, None, draft.kind.author()),
            sources,
            into_id: closing.clone(),
            new_note: false,
            draft,
        });
    }

    // Similarity: recent working notes, by scope.
    let now = engine.now_ms();
    let since = now - i64::from(max_age_days) * DAY_MS;
    let mut candidates: Vec<&IndexedNote> = by_key
        .values()
        .copied()
        .filter(|r| {
            is_working(r)
                && foldable(r)
                && !taken.contains(&(r.scope.clone(), r.id.clone()))
                && r.updated_at
                    .or(r.created_at)
                    .unwrap_or(r.mtime_ns / 1_000_000)
                    >= since
        })
        .collect();
    // By scope and trust: a similarity cluster never mixes trust levels, so folding never
    // lowers a note's trust to a neighbour's.
    candidates.sort_by(|a, b| (&a.scope, &a.trust, &a.id).cmp(&(&b.scope, &b.trust, &b.id)));
    let hashes: Vec<String> = candidates.iter().filter_map(|r| r.recall_hash()).collect();
    let vectors = super::cached_vectors(engine, &hashes)?;
    let words: Vec<_> = candidates
        .iter()
        .map(|r| topic::note_words(&r.summary, &r.tags, &r.body))
        .collect();
    let vector_of = |r: &IndexedNote| r.recall_hash().and_then(|h| vectors.get(&h));
    let mut pairs = Vec::new();
    for i in 0..candidates.len() {
        for j in i + 1..candidates.len() {
            let (a, b) = (candidates[i], candidates[j]);
            if a.scope != b.scope || a.trust != b.trust {
                break;
            }
            let shared = words[i].intersection(&words[j]).count();
            let union = words[i].len() + words[j].len() - shared;
            let lexical = if union == 0 {
                0.0
            } else {
                shared as f64 / union as f64
            };
            let cosine = match (vector_of(a), vector_of(b)) {
                (Some(x), Some(y)) if x.len() == y.len() => {
                    Some(x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>())
                }
                _ => None,
            };
            let linked = match cosine {
                Some(c) => c >= threshold,
                None => lexical >= topic::LEXICAL_ALONE,
            };
            if linked {
                pairs.push((i, j, cosine, lexical));
            }
        }
    }
    for (members, cosine, lexical) in clusters_of(candidates.len(), &pairs, min_size) {
        let rows: Vec<&IndexedNote> = members.iter().map(|&i| candidates[i]).collect();
        let mut sources = rows
            .iter()
            .map(|r| merge::source_of(r))
            .collect::<Result<Vec<_>>>()?;
        sources.sort_by_key(merge::age_key);
        let provenance: Vec<&MergeSource> = sources.iter().collect();
        let draft = draft_of(engine, &sources, &provenance, kind)?;
        let into = new_id(&draft.summary, &sources)?;
        let scope = rows[0].scope.clone();
        let origins: Vec<Origin> = rows.iter().map(|r| Origin::of(r)).collect();
        clusters.push(ConsolidationCluster {
            cluster_id: cluster_id(&scope, into.as_str(), &sources),
            scope,
            basis: ClusterBasis::Similar { cosine, lexical },
            tags: union_tags(&sources),
            labels: memoria_derive::labels(&origins, None, draft.kind.author()),
            sources,
            into_id: into.to_string(),
            new_note: true,
            draft,
        });
    }
    Ok(ConsolidationPlan {
        clusters,
        threshold,
        min_size,
        max_age_days,
        candidates: candidates.len(),
        vectors: !vectors.is_empty(),
    })
}

/// One note of a cluster as it is now, checked against the plan.
struct Current {
    row: IndexedNote,
    note: Note,
    bytes: Vec<u8>,
}

impl Current {
    fn planned(&self) -> Planned {
        Planned::new(self.row.clone(), self.bytes.clone(), &self.note)
    }
}

/// The cluster's notes as they are now, or the reason to skip it: one changed or went since
/// the plan, or may no longer be folded automatically.
fn current_sources(
    engine: &Engine,
    key: &str,
    sources: &[&MergeSource],
) -> Result<std::result::Result<Vec<Current>, String>> {
    let mut out = Vec::new();
    for s in sources {
        let Some(row) = engine.index().find(key, &s.id)?.into_iter().next() else {
            return Ok(Err(format!("note `{}` is gone since the plan", s.id)));
        };
        let (note, bytes) = match engine.load_writable(&row) {
            Ok(x) => x,
            Err(Error::Broken { .. }) => {
                return Ok(Err(format!("note `{}` no longer parses", s.id)));
            }
            Err(e) => return Err(e),
        };
        if note.content_hash().as_str() != s.hash {
            return Ok(Err(format!("note `{}` changed since the plan", s.id)));
        }
        // Labels can change without the text: the notes as they are now decide.
        if let Some(why) = Origin::of(&row).kept_from_automatic() {
            return Ok(Err(why));
        }
        out.push(Current { row, note, bytes });
    }
    Ok(Ok(out))
}

/// The consolidated note of `c`, as the derive path takes it: a new note, or the closing note
/// with the draft's text; its sources are every note whose text it holds.
fn consolidated_note(
    engine: &Engine,
    c: &ConsolidationCluster,
    sources: &[Current],
    into: Option<&Current>,
) -> Result<Derived> {
    let importance = sources
        .iter()
        .chain(into)
        .map(|s| {
            s.note
                .importance
                .unwrap_or(super::decay::DEFAULT_IMPORTANCE)
        })
        .fold(0.0f64, f64::max);
    let mut note = match into {
        Some(i) => i.note.clone(),
        None => {
            let mut n = Note::new(NoteId::new(&c.into_id)?, "", "");
            n.created_at = Some(engine.now_ms());
            let first = sources[0].note.note_type.clone();
            if sources.iter().all(|s| s.note.note_type == first) {
                n.note_type = first;
            }
            n
        }
    };
    note.summary = c.draft.summary.trim().to_owned();
    note.body = with_final_newline(c.draft.body.clone());
    note.tags = c.tags.clone();
    note.importance = Some((importance * 1.1).min(1.0));
    note.updated_at = Some(engine.now_ms());
    Ok(Derived {
        note,
        over: into.map(Current::planned),
        sources: sources
            .iter()
            .chain(into)
            .map(|s| Origin::of(&s.row))
            .collect(),
        author: c.draft.kind.author(),
        chosen_trust: None,
    })
}

/// Refuses a plan that names a scope not visible from here or a similarity cluster whose id
/// is not its notes' (a plan from a front end is checked as one planned here), before
/// anything is written.
fn check_plan(engine: &Engine, plan: &ConsolidationPlan) -> Result<()> {
    let visible = engine.visible_scopes();
    for c in &plan.clusters {
        let scope = Scope::from_key(&c.scope)?;
        if !visible.contains(&scope) {
            return Err(Error::ScopeNotVisible {
                scope: c.scope.clone(),
                reason: format!("scope {scope} is not visible from here"),
            });
        }
        if c.sources.is_empty() {
            return Err(Error::Invalid(format!(
                "cluster {} names no notes: plan the consolidation again",
                c.cluster_id
            )));
        }
        if c.new_note && cluster_id(&c.scope, &c.into_id, &c.sources) != c.cluster_id {
            return Err(Error::Invalid(format!(
                "cluster {} is not the cluster of its notes: plan the consolidation again",
                c.cluster_id
            )));
        }
    }
    Ok(())
}

/// What became of one cluster.
enum Outcome {
    Applied(ConsolidatedCluster, Vec<String>),
    Skipped(String),
}

/// Applies `plan`: per cluster, the consolidated note written through the derive path and each
/// source marked `consolidated`, every changed note backed up. A cluster whose notes changed
/// since the plan, or that cannot be written (its text trips the credential guard, is too
/// long, another device changed a note), is skipped with its reason, whole, and the others go
/// on. A plan naming a scope not visible from here is refused before anything is written.
pub fn apply(engine: &mut Engine, plan: ConsolidationPlan) -> Result<Consolidation> {
    check_plan(engine, &plan)?;
    let mut applied = Vec::new();
    let mut skipped = Vec::new();
    let mut backups = Vec::new();
    for c in &plan.clusters {
        let reason = match apply_cluster(engine, c) {
            Ok(Outcome::Applied(done, taken)) => {
                applied.push(done);
                backups.extend(taken);
                continue;
            }
            Ok(Outcome::Skipped(reason)) => reason,
            Err(e) => e.to_string(),
        };
        skipped.push(SkippedCluster {
            cluster_id: c.cluster_id.clone(),
            reason,
        });
    }
    Ok(Consolidation {
        plan,
        dry_run: false,
        applied,
        skipped,
        backups,
    })
}

fn apply_cluster(engine: &mut Engine, c: &ConsolidationCluster) -> Result<Outcome> {
    let scope = Scope::from_key(&c.scope)?;
    let lock = engine.lock_scope(&scope)?;
    engine.rescan_scope(&scope)?;
    let mut wanted: Vec<&MergeSource> = c.sources.iter().collect();
    let closing;
    if !c.new_note {
        // The closing note is checked too: its text is replaced by the draft.
        let row = engine
            .index()
            .find(&c.scope, &c.into_id)?
            .into_iter()
            .next();
        closing = row.map(|r| merge::source_of(&r)).transpose()?;
        let Some(s) = &closing else {
            return Ok(Outcome::Skipped(format!(
                "note `{}` is gone since the plan",
                c.into_id
            )));
        };
        let mut all = vec![s.clone()];
        all.extend(c.sources.iter().cloned());
        if cluster_id(&c.scope, &c.into_id, &all) != c.cluster_id {
            return Ok(Outcome::Skipped(format!(
                "note `{}` changed since the plan",
                c.into_id
            )));
        }
        wanted.push(s);
    }
    let mut current = match current_sources(engine, &c.scope, &wanted)? {
        Ok(x) => x,
        Err(reason) => return Ok(Outcome::Skipped(reason)),
    };
    let into = if c.new_note { None } else { current.pop() };
    let merged = consolidated_note(engine, c, &current, into.as_ref())?;
    drop(lock);
    let into_written = match &into {
        Some(i) => Written {
            scope: scope.key(),
            id: i.row.id.clone(),
            path: i.row.path.clone(),
        },
        None => Written {
            scope: scope.key(),
            id: merged.note.id.to_string(),
            path: engine
                .scope_dir(&scope)?
                .join(merged.note.id.file_name())
                .to_string_lossy()
                .into_owned(),
        },
    };
    let marks: Vec<Write> = current
        .iter()
        .map(|s| {
            let mut n = s.note.clone();
            n.status = Some(Status::Consolidated);
            Write::Replace {
                over: s.planned(),
                new: Box::new(n),
            }
        })
        .collect();
    let taken = memoria_derive::commit(engine, &scope, vec![merged], marks)?;
    Ok(Outcome::Applied(
        ConsolidatedCluster {
            cluster_id: c.cluster_id.clone(),
            into: into_written,
            sources: current.iter().map(|s| s.row.id.clone()).collect(),
        },
        taken,
    ))
}

/// A cluster a pass folded, as the last pass's record keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FoldedCluster {
    pub cluster_id: String,
    pub scope: String,
    /// The consolidated note.
    pub into_id: String,
    /// Its summary.
    pub summary: String,
    /// Whether the consolidated note is new (a similarity cluster) or the note that closed a
    /// goal.
    pub new_note: bool,
    /// The goal closed, for a goal cluster.
    pub goal_id: Option<String>,
    /// The notes now `consolidated`, oldest first.
    pub sources: Vec<String>,
}

/// What the last consolidation pass on this machine did: the daily pass's, or one applied on
/// request (`memoria consolidate`, the app's "Consolidate now"). Kept beside the daily
/// pass's time, machine-local and never synced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastConsolidation {
    /// When it ran, by the engine's clock (ms).
    pub at: i64,
    /// The daily pass (else one asked for).
    pub daily: bool,
    pub folded: Vec<FoldedCluster>,
    /// Goals whose `achieves` notes were taken in by the note that closed them.
    pub goals_closed: Vec<String>,
    pub skipped: Vec<SkippedCluster>,
    /// Backups written, one per note changed.
    pub backups: usize,
    /// Why the pass stopped, when it failed; what it did before is above.
    pub error: Option<String>,
}

impl LastConsolidation {
    /// The record of `done`, run at `at`.
    pub fn of(done: &Consolidation, at: i64, daily: bool) -> LastConsolidation {
        let by_id: HashMap<&str, &ConsolidationCluster> = done
            .plan
            .clusters
            .iter()
            .map(|c| (c.cluster_id.as_str(), c))
            .collect();
        let folded: Vec<FoldedCluster> = done
            .applied
            .iter()
            .map(|a| {
                let planned = by_id.get(a.cluster_id.as_str());
                FoldedCluster {
                    cluster_id: a.cluster_id.clone(),
                    scope: a.into.scope.clone(),
                    into_id: a.into.id.clone(),
                    summary: planned
                        .map(|c| c.draft.summary.trim().to_owned())
                        .unwrap_or_default(),
                    new_note: planned.is_none_or(|c| c.new_note),
                    goal_id: planned.and_then(|c| match &c.basis {
                        ClusterBasis::Goal { goal_id, .. } => Some(goal_id.clone()),
                        ClusterBasis::Similar { .. } => None,
                    }),
                    sources: a.sources.clone(),
                }
            })
            .collect();
        LastConsolidation {
            at,
            daily,
            goals_closed: folded.iter().filter_map(|f| f.goal_id.clone()).collect(),
            folded,
            skipped: done.skipped.clone(),
            backups: done.backups.len(),
            error: None,
        }
    }

    /// Whether the pass changed any note.
    pub fn changed_anything(&self) -> bool {
        !self.folded.is_empty()
    }
}

/// When the daily pass last ran on this machine, and what the last pass did.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Marker {
    last_pass_at: Option<i64>,
    #[serde(default)]
    last: Option<LastConsolidation>,
}

fn marker_path(engine: &Engine) -> PathBuf {
    engine
        .home()
        .root()
        .join("review")
        .join("consolidation.json")
}

fn read_marker(engine: &Engine) -> Result<Marker> {
    let path = marker_path(engine);
    match std::fs::read(&path) {
        // A damaged marker only means the pass runs once more.
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).unwrap_or_default()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Marker::default()),
        Err(e) => Err(Error::io("read", &path)(e)),
    }
}

fn write_marker(engine: &Engine, marker: &Marker) -> Result<()> {
    let path = marker_path(engine);
    if let Some(dir) = path.parent() {
        fsx::private_dir(dir)?;
    }
    let bytes = serde_json::to_vec_pretty(marker).map_err(|e| {
        Error::Internal(format!("the consolidation marker does not serialize: {e}"))
    })?;
    fsx::write_atomic(&path, &bytes)
}

/// What the last consolidation pass on this machine did (`None`: none ran, or its record is
/// unreadable).
pub fn last_consolidation(engine: &Engine) -> Result<Option<LastConsolidation>> {
    Ok(read_marker(engine)?.last)
}

/// Keeps `last` as the last pass's record; the daily pass's time stays as it is.
pub fn record(engine: &Engine, last: LastConsolidation) -> Result<()> {
    let mut marker = read_marker(engine)?;
    marker.last = Some(last);
    write_marker(engine, &marker)
}

/// When the next daily pass falls due, by the engine's clock (ms): now when none ran.
pub fn next_due(engine: &Engine) -> Result<i64> {
    Ok(match read_marker(engine)?.last_pass_at {
        Some(last) if last <= engine.now_ms() => last + INTERVAL_MS,
        // A pass recorded in the future (the clock was set back) is not waited for.
        _ => engine.now_ms(),
    })
}

/// How a note was replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplacedHow {
    /// Folded into a consolidated note (`status: consolidated`, listed in its provenance).
    Consolidated,
    /// Another note of its scope `supersedes` it.
    Superseded,
}

/// A note ranked below the note that replaced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Replacement {
    pub scope: String,
    /// The replaced note.
    pub id: String,
    /// The note that replaced it (for a consolidated note whose consolidated note is gone,
    /// none).
    pub by: Option<String>,
    pub how: ReplacedHow,
}

/// Whether `body`'s provenance list names `id`.
fn provenance_names(body: &str, id: &str) -> bool {
    body.split(PROVENANCE_HEADING)
        .nth(1)
        .is_some_and(|list| list.contains(&format!("[[{id}]]")))
}

/// Every note of `scopes` that was replaced: consolidated ones with the note whose provenance
/// names them, superseded ones with the note that supersedes them. A note both consolidated
/// and superseded is listed once, as consolidated. By scope and id.
pub fn replacements(engine: &Engine, scopes: &[Scope]) -> Result<Vec<Replacement>> {
    let keys: Vec<String> = scopes.iter().map(Scope::key).collect();
    let index = engine.index();
    let mut out: BTreeMap<(String, String), Replacement> = BTreeMap::new();
    let rows = index.list(&crate::index::ListFilter {
        scopes: keys.clone(),
        ..Default::default()
    })?;
    // The bodies of the notes linking to a consolidated note, read once each: a consolidated
    // note lists several originals.
    let mut bodies: HashMap<(String, String), Option<String>> = HashMap::new();
    for r in rows
        .iter()
        .filter(|r| r.error.is_none() && r.status.as_deref() == Some("consolidated"))
    {
        let mut by = None;
        for (scope, id) in index.backlinks(std::slice::from_ref(&r.scope), &r.id)? {
            let key = (scope, id);
            let body = match bodies.get(&key) {
                Some(b) => b,
                None => {
                    let b = index
                        .find(&key.0, &key.1)?
                        .into_iter()
                        .find(|n| n.error.is_none())
                        .map(|n| n.body);
                    bodies.entry(key.clone()).or_insert(b)
                }
            };
            if body.as_deref().is_some_and(|b| provenance_names(b, &r.id)) {
                by = Some(key.1);
                break;
            }
        }
        out.insert(
            (r.scope.clone(), r.id.clone()),
            Replacement {
                scope: r.scope.clone(),
                id: r.id.clone(),
                by,
                how: ReplacedHow::Consolidated,
            },
        );
    }
    let ids: HashSet<(&str, &str)> = rows
        .iter()
        .filter(|r| r.error.is_none())
        .map(|r| (r.scope.as_str(), r.id.as_str()))
        .collect();
    for (scope, by, kind, target) in index.relations(&keys)? {
        if kind != "supersedes" || by == target || !ids.contains(&(scope.as_str(), target.as_str()))
        {
            continue;
        }
        out.entry((scope.clone(), target.clone()))
            .or_insert(Replacement {
                scope,
                id: target,
                by: Some(by),
                how: ReplacedHow::Superseded,
            });
    }
    Ok(out.into_values().collect())
}

/// A pass: planned, then applied unless `q.dry_run`.
pub fn consolidate(
    engine: &mut Engine,
    scopes: &[Scope],
    q: &ConsolidateQuery,
) -> Result<Consolidation> {
    let plan = plan(engine, scopes, q)?;
    if q.dry_run {
        return Ok(Consolidation {
            plan,
            dry_run: true,
            applied: Vec::new(),
            skipped: Vec::new(),
            backups: Vec::new(),
        });
    }
    apply(engine, plan)
}

/// The daily pass: runs when none ran on this machine in the last [`INTERVAL_MS`] (by the
/// engine's clock), else does nothing (`None`). The time is recorded before the pass, so a
/// pass that fails is not retried until the next interval; the pass's result (or its error)
/// is recorded after it, for [`last_consolidation`].
pub fn consolidate_if_due(
    engine: &mut Engine,
    scopes: &[Scope],
    q: &ConsolidateQuery,
) -> Result<Option<Consolidation>> {
    let now = engine.now_ms();
    let mut marker = read_marker(engine)?;
    if let Some(last) = marker.last_pass_at
        && (0..INTERVAL_MS).contains(&(now - last))
    {
        return Ok(None);
    }
    marker.last_pass_at = Some(now);
    write_marker(engine, &marker)?;
    match consolidate(engine, scopes, q) {
        Ok(done) => {
            if !done.dry_run {
                record(engine, LastConsolidation::of(&done, now, true))?;
            }
            Ok(Some(done))
        }
        Err(e) => {
            record(
                engine,
                LastConsolidation {
                    at: now,
                    daily: true,
                    folded: Vec::new(),
                    goals_closed: Vec::new(),
                    skipped: Vec::new(),
                    backups: 0,
                    error: Some(e.to_string()),
                },
            )?;
            Err(e)
        }
    }
}
