//! What agents may do with memory, as plain Rust: search, expand, remember, forget. The MCP
//! server (and later other agent front ends) are thin layers over these functions. Scope is the
//! engine's — fixed when it was opened — never an argument here.
//!
//! Never returned to, changed or forgotten by an agent: files that do not parse, quarantined
//! notes and notes tagged `contains-secrets` (see [`recallable`]).

use std::collections::HashMap;

use memoria_shared::note::{NoteType, Relation, Source};
use memoria_shared::slugify;
use serde::Serialize;
use serde_json::Value;

use crate::backup::BackupReason;
use crate::error::{Error, Result};
use crate::index::IndexedNote;
use crate::vault::{Engine, NewNote, NoteEdit};
use memoria_store::log::LogMessage;

/// Longest snippet returned per hit, in characters.
pub const SNIPPET_CHARS: usize = 280;
/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;

/// A search as an agent asks it.
#[derive(Debug, Clone, Default)]
pub struct AgentQuery {
    /// One to five phrasings; results are fused.
    pub queries: Vec<String>,
    pub limit: usize,
    pub types: Vec<String>,
    pub tags: Vec<String>,
    /// Milliseconds since the epoch, inclusive.
    pub created_after: Option<i64>,
    pub created_before: Option<i64>,
}

/// One search result.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentHit {
    /// `vt:<user|project|domain>/<note id>`; pass it to `memory_expand`.
    pub id: String,
    pub summary: String,
    pub snippet: String,
    /// The ranking score: only its order means something.
    pub score: f64,
    /// How likely the note is to answer the question, 0 to 1, comparable across questions;
    /// absent without the semantic model. With several phrasings, the best of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relevance: Option<f64>,
    /// `[CONFIRMED]`, `[INFERRED]`, `[INGESTED]` or `[PEER]`.
    pub trust: &'static str,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub note_type: Option<String>,
    pub tags: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<i64>,
    /// Set when the hit is a message of a captured conversation rather than a note.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub said: Option<Said>,
    /// For a fact or summary derived from a conversation: the messages it came from, in
    /// order (each opens with `memory_expand`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
}

/// Where and when a message was said, by whom.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Said {
    pub conversation: String,
    pub speaker: String,
    pub role: memoria_store::log::Role,
    /// Milliseconds since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
    /// The day, as a person reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

impl Said {
    fn of(m: &LogMessage) -> Said {
        Said {
            conversation: m.conversation.clone(),
            speaker: crate::said::who(m),
            role: m.role,
            at: m.at,
            date: m.at.map(crate::backup::human_date),
        }
    }
}

/// A message next to the one expanded.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SaidLine {
    pub id: String,
    pub said: Said,
    pub text: String,
}

/// The label an agent sees for a message, by its author.
fn message_trust_label(role: memoria_store::log::Role) -> &'static str {
    match crate::said::trust_of_role(role) {
        memoria_shared::Trust::Owner => "[CONFIRMED]",
        memoria_shared::Trust::Derived => "[INFERRED]",
        memoria_shared::Trust::Ingested => "[INGESTED]",
        _ => "[PEER]",
    }
}

/// A message hit as an agent sees it, unless the query's filters leave it out.
/// A block of working memory opened: its text, who wrote it, until when; the opening counts
/// as a use.
fn expand_working(engine: &Engine, key: &str) -> Result<Expanded> {
    let b = engine.visible_working(key)?;
    engine.log()?.use_working(key)?;
    Ok(Expanded {
        id: b.key.clone(),
        scope: b.scope.clone(),
        frontmatter: serde_json::json!({
            "type": crate::recall::WORKING_TYPE,
            "role": b.role,
            "createdAt": b.created_at,
            "expiresAt": b.expires_at,
            "uses": b.uses + 1,
        }),
        body: b.text.clone(),
        links: Vec::new(),
        backlinks: Vec::new(),
        trust: message_trust_label(b.role),
        around: Vec::new(),
    })
}

/// The label an agent sees for a fact or summary: its sources' lowest trust, as the derive
/// path labelled it.
fn derived_trust_label(d: &memoria_store::log::DerivedItem) -> &'static str {
    match (d.trust.as_deref(), d.inferred) {
        (Some("peer"), _) => "[PEER]",
        (Some("ingested"), _) => "[INGESTED]",
        (Some(_), _) | (None, true) => "[INFERRED]",
        (None, false) => "[CONFIRMED]",
    }
}

/// A hit from the conversation log (a message, a fact or summary, a working block) as an
/// agent gets it, or `None` when it is not visible here, holds a secret, or the query's filters
/// leave it out: its type, no tag asked for (none has tags), and the time it was said or
/// written within the range asked for.
fn said_hit(
    engine: &Engine,
    key: &str,
    score: f64,
    relevance: Option<f64>,
    q: &AgentQuery,
) -> Option<AgentHit> {
    let mut hit = AgentHit {
        id: key.to_owned(),
        summary: String::new(),
        snippet: String::new(),
        score: (score * 1e4).round() / 1e4,
        relevance,
        trust: "",
        note_type: None,
        tags: Vec::new(),
        updated_at: None,
        said: None,
        sources: Vec::new(),
    };
    let (kind, text) = if crate::said::is_message_key(key) {
        let m = engine.visible_message(key).ok()?;
        hit.summary = crate::said::heading(&m);
        hit.trust = message_trust_label(m.role);
        hit.updated_at = m.at;
        hit.said = Some(Said::of(&m));
        (crate::said::MESSAGE_TYPE, m.text)
    } else if crate::said::is_derived_key(key) {
        let d = engine.visible_derived(key).ok()?;
        hit.summary = crate::said::derived_heading(&d);
        hit.trust = derived_trust_label(&d);
        hit.updated_at = d.at;
        hit.sources = d.sources;
        (d.kind.as_str(), d.text)
    } else {
        let b = engine.visible_working(key).ok()?;
        hit.summary = crate::said::working_heading(&b);
        hit.trust = message_trust_label(b.role);
        hit.updated_at = Some(b.created_at);
        (crate::recall::WORKING_TYPE, b.text)
    };
    let at = hit.updated_at.unwrap_or(0);
    let passes = (q.types.is_empty() || q.types.iter().any(|t| t == kind))
        && q.tags.is_empty()
        && q.created_after.is_none_or(|a| at >= a)
        && q.created_before.is_none_or(|b| at <= b);
    if !passes {
        return None;
    }
    hit.note_type = Some(kind.to_owned());
    hit.snippet = snippet(&text, &q.queries);
    Some(hit)
}

pub use crate::index::recallable;

/// The label an agent sees for how far to trust a note.
pub fn trust_label(row: &IndexedNote) -> &'static str {
    match (row.trust.as_deref(), row.source.as_deref()) {
        (Some("peer"), _) => "[PEER]",
        (Some("ingested"), _) => "[INGESTED]",
        (_, Some("agent_inferred")) => "[INFERRED]",
        _ => "[CONFIRMED]",
    }
}

/// Finds the note an agent names; a note it may not see is refused as if it were absent from its
/// view, with a message that sends the agent to the user.
fn resolve_visible(engine: &Engine, reference: &str) -> Result<(crate::Scope, IndexedNote)> {
    let (scope, row) = engine.resolve(reference, None)?;
    if !recallable(&row) {
        return Err(Error::Quarantined { id: row.id });
    }
    Ok((scope, row))
}

fn check_query(q: &str) -> Result<()> {
    if q.trim().is_empty() {
        return Err(Error::Invalid(
            "a query is empty: give words to look for".into(),
        ));
    }
    if q.len() > MAX_QUERY_BYTES {
        return Err(Error::TooLong {
            field: "query",
            len: q.len(),
            limit: MAX_QUERY_BYTES,
            unit: "bytes",
            fix: "ask with fewer words",
        });
    }
    Ok(())
}

/// Searches the visible scopes. Several phrasings are fused by reciprocal rank.
pub fn search(engine: &mut Engine, q: &AgentQuery) -> Result<Vec<AgentHit>> {
    if q.queries.is_empty() || q.queries.len() > 5 {
        return Err(Error::Invalid(format!(
            "give 1 to 5 queries, not {}",
            q.queries.len()
        )));
    }
    for query in &q.queries {
        check_query(query)?;
    }
    let limit = q.limit.clamp(1, 50);
    let pool = (limit * 5).max(50);
    // Several phrasings: reciprocal-rank fusion of their hybrid rankings.
    let mut fused: HashMap<(String, String), f64> = HashMap::new();
    let mut relevance: HashMap<(String, String), f64> = HashMap::new();
    for query in &q.queries {
        let opts = crate::recall::SearchOptions {
            limit: pool,
            ..Default::default()
        };
        for (rank, hit) in engine.hybrid_search(query, opts)?.into_iter().enumerate() {
            let single = if q.queries.len() == 1 {
                hit.score
            } else {
                1.0 / (60.0 + rank as f64 + 1.0)
            };
            if let Some(r) = hit.relevance {
                let best = relevance
                    .entry((hit.scope.clone(), hit.id.clone()))
                    .or_insert(r);
                *best = best.max(r);
            }
            *fused.entry((hit.scope, hit.id)).or_insert(0.0) += single;
        }
    }
    let mut hits = Vec::new();
    for ((scope_key, id), score) in fused {
        if crate::said::is_said_key(&id) {
            let relevance = relevance.get(&(scope_key.clone(), id.clone())).copied();
            hits.extend(said_hit(engine, &id, score, relevance, q));
            continue;
        }
        let Some(row) = engine.index().find(&scope_key, &id)?.into_iter().next() else {
            continue;
        };
        if !recallable(&row) {
            continue;
        }
        if !q.types.is_empty() && !row.note_type.as_ref().is_some_and(|t| q.types.contains(t)) {
            continue;
        }
        if !q.tags.iter().all(|t| row.tags.contains(t)) {
            continue;
        }
        let created = row.created_at.unwrap_or(0);
        if q.created_after.is_some_and(|a| created < a)
            || q.created_before.is_some_and(|b| created > b)
        {
            continue;
        }
        let relevance = relevance.get(&(scope_key.clone(), id.clone())).copied();
        let scope = crate::Scope::from_key(&scope_key)?;
        hits.push(AgentHit {
            relevance,
            id: Engine::reference(&scope, &row.id),
            summary: row.summary.clone(),
            snippet: snippet(&row.body, &q.queries),
            score: (score * 1e4).round() / 1e4,
            trust: trust_label(&row),
            note_type: row.note_type.clone(),
            tags: row.tags.clone(),
            updated_at: row.updated_at,
            said: None,
            sources: Vec::new(),
        });
    }
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    hits.truncate(limit);
    Ok(hits)
}

/// The part of `body` around the first word of the queries it contains (else its start), on
/// one line, at most [`SNIPPET_CHARS`] long.
pub fn snippet(body: &str, queries: &[String]) -> String {
    clip(
        &snippet_for(body, queries).replace('\n', " "),
        SNIPPET_CHARS,
    )
}

/// The part of `body` around the first word of the queries it contains, else its start.
fn snippet_for(body: &str, queries: &[String]) -> String {
    let lower = body.to_lowercase();
    let at = queries
        .iter()
        .flat_map(|q| q.split(|c: char| !c.is_alphanumeric()))
        .filter(|w| w.chars().count() >= 3)
        .filter_map(|w| lower.find(&w.to_lowercase()))
        .min()
        .filter(|&i| lower.len() == body.len() && body.is_char_boundary(i))
        .unwrap_or(0);
    let start = body[..at]
        .char_indices()
        .rev()
        .nth(80)
        .map(|(i, _)| i)
        .unwrap_or(0);
    let prefix = if start > 0 { "…" } else { "" };
    format!("{prefix}{}", &body[start..])
}

fn clip(s: &str, chars: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= chars {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(chars - 1).collect();
    out.push('…');
    out
}

/// A link from a note, and whether its target exists.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Link {
    pub target: String,
    pub exists: bool,
}

/// A whole note for an agent.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Expanded {
    pub id: String,
    pub scope: String,
    /// Every frontmatter field, as in the file.
    pub frontmatter: Value,
    pub body: String,
    pub links: Vec<Link>,
    pub backlinks: Vec<String>,
    pub trust: &'static str,
    /// For a message: the conversation around it, in order, the message itself included;
    /// for a fact or summary: the messages it came from.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub around: Vec<SaidLine>,
}

/// Messages shown on each side of an expanded message.
pub const AROUND_MESSAGES: usize = 3;

fn expand_message(engine: &Engine, key: &str) -> Result<Expanded> {
    let m = engine.visible_message(key)?;
    let around = engine
        .log()?
        .around(key, AROUND_MESSAGES, AROUND_MESSAGES)?
        .into_iter()
        .filter(|n| !n.held_back())
        .map(|n| SaidLine {
            id: n.key.clone(),
            said: Said::of(&n),
            text: n.text,
        })
        .collect();
    Ok(Expanded {
        id: m.key.clone(),
        scope: m.scope.clone(),
        frontmatter: serde_json::to_value(Said::of(&m)).unwrap_or(Value::Null),
        body: m.text.clone(),
        links: Vec::new(),
        backlinks: Vec::new(),
        trust: message_trust_label(m.role),
        around,
    })
}

/// A fact or summary opened: its text, what it is, and the messages it came from.
fn expand_derived(engine: &Engine, key: &str) -> Result<Expanded> {
    let d = engine.visible_derived(key)?;
    let mut around = Vec::new();
    {
        let log = engine.log()?;
        for source in &d.sources {
            if let Some(m) = log.get(source)?
                && !m.held_back()
            {
                around.push(SaidLine {
                    id: m.key.clone(),
                    said: Said::of(&m),
                    text: m.text,
                });
            }
        }
    }
    Ok(Expanded {
        id: d.key.clone(),
        scope: d.scope.clone(),
        frontmatter: serde_json::json!({
            "type": d.kind.as_str(),
            "conversation": d.conversation,
            "subject": d.subject,
            "attribute": d.attribute.as_deref().map(|a| a.trim_end_matches('+')),
            "value": d.value,
            "at": d.at,
            "validTo": d.valid_to,
            "sources": d.sources,
        }),
        body: d.text.clone(),
        links: Vec::new(),
        backlinks: Vec::new(),
        trust: derived_trust_label(&d),
        around,
    })
}

/// Opens a note by its recall id (or plain id).
pub fn expand(engine: &mut Engine, reference: &str) -> Result<Expanded> {
    // A message as search names it (`msg:…`) or as the recall block does (`vt:user/msg:…`).
    let bare = reference
        .strip_prefix("vt:")
        .and_then(|r| r.split_once('/'))
        .map_or(reference, |(_, id)| id);
    if crate::said::is_message_key(bare) {
        return expand_message(engine, bare);
    }
    if crate::said::is_derived_key(bare) {
        return expand_derived(engine, bare);
    }
    if crate::said::is_working_key(bare) {
        return expand_working(engine, bare);
    }
    let (scope, row) = resolve_visible(engine, reference)?;
    let view = engine.show(reference, Some(&scope))?;
    let note = view.note.ok_or_else(|| Error::Broken {
        id: row.id.clone(),
        path: row.path.clone().into(),
        reason: row.error.clone().unwrap_or_default(),
    })?;
    let text = note.serialize();
    let frontmatter: Value =
        serde_json::from_str(text.lines().nth(1).unwrap_or("{}")).unwrap_or(Value::Null);
    let links = note
        .links()
        .iter()
        .map(|l| Link {
            target: l.clone(),
            exists: engine.resolve(slugify(l).as_str(), None).is_ok(),
        })
        .collect();
    let backlinks = view
        .backlinks
        .iter()
        .map(|(s, id)| crate::Scope::from_key(s).map(|s| Engine::reference(&s, id)))
        .collect::<Result<_>>()?;
    Ok(Expanded {
        id: Engine::reference(&scope, &row.id),
        scope: scope.key(),
        frontmatter,
        body: note.body,
        links,
        backlinks,
        trust: trust_label(&row),
        around: Vec::new(),
    })
}

/// A note an agent wants to keep.
#[derive(Debug, Clone, Default)]
pub struct Remember {
    pub summary: String,
    pub body: String,
    pub note_type: Option<NoteType>,
    pub tags: Vec<String>,
    /// Update this note (after a backup); or create it with this id.
    pub id: Option<String>,
    pub importance: Option<f64>,
    pub source: Option<Source>,
    pub relations: Vec<Relation>,
}

/// A note close to the one remembered.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Related {
    pub id: String,
    pub summary: String,
}

/// What `remember` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Remembered {
    pub id: String,
    pub scope: String,
    pub created: bool,
    /// The backup of the version an update replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    pub related: Vec<Related>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub likely_duplicate: Option<Related>,
    /// `[[links]]` and relation targets that name no visible note.
    pub missing_links: Vec<String>,
}

/// Writes a note (or updates one, backing it up first) and reports what it relates to.
pub fn remember(engine: &mut Engine, r: Remember) -> Result<Remembered> {
    for rel in &r.relations {
        if rel.target.trim().is_empty() || rel.target.len() > 200 {
            return Err(Error::Invalid("a relation target must be a note id".into()));
        }
    }
    let existing = match &r.id {
        Some(id) => match resolve_visible(engine, id) {
            Ok(found) => Some(found),
            Err(Error::NotFound(_)) => None,
            Err(e) => return Err(e),
        },
        None => None,
    };
    let source = r.source.or(Some(Source::AgentInferred));
    let (written, created, backup) = match existing {
        Some((scope, row)) => {
            let edit = NoteEdit {
                summary: Some(r.summary.clone()),
                body: Some(r.body.clone()),
                tags: Some(r.tags.clone()),
                note_type: r.note_type.clone(),
                importance: r.importance,
                source,
                relations: Some(r.relations.clone()),
            };
            let (w, taken) = engine.edit_with_backup(
                &row.id,
                Some(&scope),
                edit,
                Some(BackupReason::AgentUpdate),
            )?;
            (w, false, taken.map(|b| b.backup_id))
        }
        None => {
            let w = engine.add(NewNote {
                summary: r.summary.clone(),
                body: r.body.clone(),
                note_type: r.note_type.clone(),
                tags: r.tags.clone(),
                scope: None,
                id: r.id.clone(),
                importance: r.importance,
                source,
                relations: r.relations.clone(),
            })?;
            (w, true, None)
        }
    };
    let scope = crate::Scope::from_key(&written.scope)?;
    let me = Engine::reference(&scope, &written.id);
    let probe: String = format!(
        "{} {}",
        r.summary,
        r.body.chars().take(400).collect::<String>()
    );
    let related: Vec<AgentHit> = search(
        engine,
        &AgentQuery {
            queries: vec![clip(&probe, 1000)],
            limit: 6,
            ..Default::default()
        },
    )
    .unwrap_or_default()
    .into_iter()
    .filter(|h| h.id != me)
    .take(5)
    .collect();
    let likely_duplicate = related
        .iter()
        .find(|h| word_overlap(&h.summary, &r.summary) >= 0.6)
        .map(|h| Related {
            id: h.id.clone(),
            summary: h.summary.clone(),
        });
    let mut missing_links = Vec::new();
    let targets = memoria_shared::note::links_in(&r.body)
        .into_iter()
        .chain(r.relations.iter().map(|x| x.target.clone()));
    for t in targets {
        if engine.resolve(slugify(&t).as_str(), None).is_err() && !missing_links.contains(&t) {
            missing_links.push(t);
        }
    }
    Ok(Remembered {
        id: me,
        scope: written.scope,
        created,
        backup,
        related: related
            .into_iter()
            .map(|h| Related {
                id: h.id,
                summary: h.summary,
            })
            .collect(),
        likely_duplicate,
        missing_links,
    })
}

/// Share of distinct words two summaries have in common (Jaccard).
fn word_overlap(a: &str, b: &str) -> f64 {
    let words = |s: &str| -> std::collections::HashSet<String> {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(|w| w.to_lowercase())
            .collect()
    };
    let (a, b) = (words(a), words(b));
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    a.intersection(&b).count() as f64 / a.union(&b).count() as f64
}

/// What `forget` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forgotten {
    pub id: String,
    pub backup_id: String,
    /// The scope it was removed from (for sync; agents see it in `id`).
    #[serde(skip)]
    pub scope: crate::Scope,
}

/// Removes a note after a backup. Refused without `confirm`.
pub fn forget(engine: &mut Engine, reference: &str, confirm: bool) -> Result<Forgotten> {
    if !confirm {
        return Err(Error::ConfirmationRequired(
            "forget needs confirm: true; ask the user first (a backup is kept either way)".into(),
        ));
    }
    let (scope, row) = resolve_visible(engine, reference)?;
    let meta = engine.forget(&row.id, Some(&scope))?;
    Ok(Forgotten {
        id: Engine::reference(&scope, &row.id),
        backup_id: meta.backup_id,
        scope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{OpenOptions, Project};

    fn engine_in(home: &std::path::Path, project: Option<&std::path::Path>) -> Engine {
        Engine::open(OpenOptions {
            project_dir: project.map(|p| p.to_path_buf()),
            ..OpenOptions::without_model(home)
        })
        .unwrap()
    }

    #[test]
    fn relation_targets_pass_the_guard() {
        let tmp = tempfile::tempdir().unwrap();
        let mut e = engine_in(&tmp.path().join("home"), None);
        let err = remember(
            &mut e,
            Remember {
                summary: "Links to a secret".into(),
                body: "body".into(),
                relations: vec![Relation {
                    target: "password: hunter22xyz".into(),
                    kind: memoria_shared::note::RelationKind::Relates,
                }],
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                Error::Secret {
                    field: "relations",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn remember_search_expand_forget() {
        let tmp = tempfile::tempdir().unwrap();
        let proj = Project::init(&tmp.path().join("p"), None).unwrap();
        let mut e = engine_in(&tmp.path().join("home"), Some(&proj.root));
        let r = remember(
            &mut e,
            Remember {
                summary: "Release trains leave on Tuesdays".into(),
                body: "See [[deploy-policy]] and [[missing-note]].".into(),
                tags: vec!["ops".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert!(r.created && r.id.starts_with("vt:project/"), "{r:?}");
        assert_eq!(r.missing_links, vec!["deploy-policy", "missing-note"]);
        let again = remember(
            &mut e,
            Remember {
                summary: "Release trains leave on Tuesdays".into(),
                body: "dup".into(),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            again.likely_duplicate.as_ref().map(|d| d.id.as_str()),
            Some(r.id.as_str())
        );

        let hits = search(
            &mut e,
            &AgentQuery {
                queries: vec!["release trains".into()],
                limit: 5,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].trust, "[INFERRED]");
        let filtered = search(
            &mut e,
            &AgentQuery {
                queries: vec!["release".into(), "tuesday".into()],
                tags: vec!["ops".into()],
                limit: 5,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(filtered.len(), 1);
        let x = expand(&mut e, &r.id).unwrap();
        assert_eq!(x.frontmatter["source"], "agent_inferred");
        assert_eq!(x.links.len(), 2);

        // Update with a backup first.
        let updated = remember(
            &mut e,
            Remember {
                id: Some(r.id.clone()),
                summary: "Release trains leave on Wednesdays".into(),
                body: "changed".into(),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(!updated.created);
        let backup = updated.backup.unwrap();
        assert_eq!(e.backups(5).unwrap()[0].reason, "agent-update");
        assert_eq!(e.backups(5).unwrap()[0].backup_id, backup);

        assert!(matches!(
            forget(&mut e, &r.id, false),
            Err(Error::ConfirmationRequired(_))
        ));
        let f = forget(&mut e, &r.id, true).unwrap();
        assert_eq!(f.id, r.id);
        assert!(matches!(expand(&mut e, &r.id), Err(Error::NotFound(_))));
    }

    #[test]
    fn secrets_and_quarantine_are_never_shown() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let mut e = engine_in(&home, None);
        e.add(NewNote {
            summary: "visible zebra".into(),
            ..Default::default()
        })
        .unwrap();
        drop(e);
        let dir = home.join("memory/user");
        std::fs::write(
            dir.join("q.md"),
            "---\n{\"id\":\"q\",\"summary\":\"zebra q\",\"trust\":\"quarantined\"}\n---\nzebra\n",
        )
        .unwrap();
        std::fs::write(dir.join("s.md"), "---\n{\"id\":\"s\",\"summary\":\"zebra s\",\"tags\":[\"contains-secrets\"]}\n---\nzebra\n").unwrap();
        let mut e = engine_in(&home, None);
        let hits = search(
            &mut e,
            &AgentQuery {
                queries: vec!["zebra".into()],
                limit: 10,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert!(matches!(
            expand(&mut e, "q"),
            Err(Error::Quarantined { .. })
        ));
        assert!(matches!(
            expand(&mut e, "vt:user/s"),
            Err(Error::Quarantined { .. })
        ));
        let big = "x".repeat(MAX_QUERY_BYTES + 1);
        assert!(
            search(
                &mut e,
                &AgentQuery {
                    queries: vec![big],
                    limit: 1,
                    ..Default::default()
                }
            )
            .is_err()
        );
        assert!(
            search(
                &mut e,
                &AgentQuery {
                    queries: vec![],
                    limit: 1,
                    ..Default::default()
                }
            )
            .is_err()
        );
    }
}
