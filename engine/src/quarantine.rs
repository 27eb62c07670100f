//! Quarantining a provider's memory: when a host or a model wrote things it should not have
//! (it ran without its isolation, it answered from another tool's memory), everything it
//! said — and everything derived from that — is hidden from every door at once, and can be
//! brought back exactly as it was.
//!
//! A selection names one or more hosts and/or models (several of one kind: any of them; hosts
//! and models both: a message must match both) and optionally a time range. It takes:
//! - the messages of the visible scopes the provider wrote (an assistant's replies and its
//!   tools' output; a message without a host or model counts as its conversation's) — never
//!   the person's own, nor other people's pasted in;
//! - every fact and summary with at least one such message among its sources (a summary that
//!   also quotes the person's messages included): never more trusted than its lowest source;
//! - the notes a model wrote (`origin: {via: capture, host, model, conversation}` in their
//!   frontmatter, or `{via: promotion, model}` for a promoted fact it phrased) by that provider
//!   in that range, or captured from one of those conversations.
//!
//! Applying marks the messages with the log's one "held back" mark (`quarantine:<id>`), lowers
//! the derived items to trust `quarantined` (recall, search, the recall block, the hook's
//! injection, agents' search and expand, promotion and review read none of them) and moves the
//! notes out of the vault into `$MEMORIA_HOME/quarantine/<id>/`, so no index, search, review,
//! consolidation or sync sees them. Each item's label before the change is kept with the
//! quarantine; releasing puts back exactly those labels and each note at its own path (or,
//! when a new file took that path, beside it as `<name>-restored.md`). What the poison gate
//! marked stays marked. Applying the same selection again finds nothing left and records
//! nothing. Every apply and release goes into the audit log (`memoria_store::audit`).
//!
//! Only the person does this: the API has it, the MCP server does not.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use memoria_shared::note::{FileContext, Note};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::log::{DerivedKind, QuarantineRecord, Role};
use crate::project::Scope;
use crate::vault::Engine;

/// The audit log's module for these actions.
const AUDIT_MODULE: &str = "memory";

/// Which provider's memory a quarantine takes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Selection {
    /// Hosts (`claude-code`, `openclaw`, a transcript's `host`): any of them.
    pub hosts: Vec<String>,
    /// Models: any of them.
    pub models: Vec<String>,
    /// Only what was said (a note: created) at or after this time, in ms since the epoch.
    pub since: Option<i64>,
    /// Only what was said (a note: created) at or before this time, in ms since the epoch.
    pub until: Option<i64>,
}

impl Selection {
    fn check(&self) -> Result<()> {
        let named = |v: &[String]| v.iter().any(|s| !s.trim().is_empty());
        if !named(&self.hosts) && !named(&self.models) {
            return Err(Error::Invalid(
                "a quarantine names at least one host or model: name the provider whose memory to hide".into(),
            ));
        }
        if let (Some(a), Some(b)) = (self.since, self.until)
            && a > b
        {
            return Err(Error::Invalid(
                "the quarantine's range ends before it starts: give a start before its end".into(),
            ));
        }
        Ok(())
    }

    /// Whether something written by `host`'s `model` at `at` is the provider's.
    fn takes(&self, host: Option<&str>, model: Option<&str>, at: Option<i64>) -> bool {
        let any = |names: &[String], value: Option<&str>| {
            let names: Vec<&str> = names
                .iter()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .collect();
            names.is_empty()
                || value.is_some_and(|v| names.iter().any(|n| n.eq_ignore_ascii_case(v.trim())))
        };
        let within = match at {
            Some(at) => self.since.is_none_or(|s| at >= s) && self.until.is_none_or(|u| at <= u),
            None => self.since.is_none() && self.until.is_none(),
        };
        any(&self.hosts, host) && any(&self.models, model) && within
    }
}

/// How much a quarantine takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Counts {
    pub messages: usize,
    pub facts: usize,
    pub summaries: usize,
    /// Notes a model captured.
    pub notes: usize,
    /// The conversations those come from.
    pub conversations: usize,
}

impl Counts {
    fn is_empty(&self) -> bool {
        self.messages + self.facts + self.summaries + self.notes == 0
    }
}

/// A captured note a quarantine moved aside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MovedNote {
    pub scope: String,
    pub id: String,
    /// Its path in its scope's folder.
    pub rel_path: String,
    /// Its file while quarantined, relative to the home.
    pub kept_at: String,
}

/// What a release did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Release {
    pub id: String,
    /// Messages whose mark was taken off.
    pub messages: usize,
    /// Facts and summaries given back the trust they had.
    pub derived: usize,
    /// Conversations derived again (their items had been derived again meanwhile).
    pub rederived: usize,
    /// Notes back at their own path.
    pub notes: usize,
    /// Notes back beside their path (a new file had taken it): `(rel_path, restored_as)`.
    pub renamed: Vec<(String, String)>,
    /// Notes whose quarantined file was gone (removed by hand): their paths.
    pub missing: Vec<String>,
    /// Notes that could not be put back (a disk error): `(rel_path, why)`. Their file stays in
    /// the quarantine folder (`kept_at` in the history).
    pub failed: Vec<(String, String)>,
}

/// A quarantine, as the history lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Quarantine {
    pub id: String,
    pub created_at: i64,
    pub selection: Selection,
    pub counts: Counts,
    pub notes: Vec<MovedNote>,
    pub released_at: Option<i64>,
    pub release: Option<Release>,
}

/// What applying found and did: `id` is `None` when nothing was left to quarantine.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    pub id: Option<String>,
    pub counts: Counts,
}

/// A captured note found by a selection.
struct Captured {
    scope: Scope,
    id: String,
    rel_path: String,
    path: PathBuf,
    bytes: Vec<u8>,
}

/// What a selection takes now.
struct Plan {
    messages: Vec<String>,
    derived: Vec<String>,
    notes: Vec<Captured>,
    counts: Counts,
}

/// How a note a model wrote names it in its `origin`: captured from a conversation, or a
/// promoted fact the model phrased.
const MODEL_WRITTEN: [&str; 2] = ["capture", "promotion"];

/// The provenance of a note a model wrote (`origin` with `via: capture` or `via: promotion`):
/// host, model, conversation (a promotion names only its model).
fn captured_origin(note: &Note) -> Option<(Option<String>, Option<String>, Option<String>)> {
    let origin = note.origin.as_ref()?.as_object()?;
    let via = origin.get("via").and_then(|v| v.as_str())?;
    if !MODEL_WRITTEN.contains(&via) {
        return None;
    }
    let field = |k: &str| {
        origin.get(k).and_then(|v| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
    };
    Some((field("host"), field("model"), field("conversation")))
}

fn plan(engine: &Engine, sel: &Selection) -> Result<Plan> {
    sel.check()?;
    let visible: Vec<Scope> = engine.visible_scopes();
    let keys: HashSet<String> = visible.iter().map(|s| s.key()).collect();
    let log = engine.log()?;
    let mut messages = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    let mut conversations: BTreeSet<(String, String)> = BTreeSet::new();
    for m in log.message_marks()? {
        // The person's own words, and other people's, are never the provider's.
        let provider = matches!(m.role, Role::Assistant | Role::Tool);
        if !provider
            || m.quarantined.is_some()
            || !keys.contains(&m.scope)
            || !sel.takes(m.host.as_deref(), m.model.as_deref(), Some(m.at))
        {
            continue;
        }
        conversations.insert((m.scope.clone(), m.conversation.clone()));
        taken.insert(m.key.clone());
        messages.push(m.key);
    }
    let mut counts = Counts {
        messages: messages.len(),
        ..Counts::default()
    };
    let mut derived = Vec::new();
    for d in log.derived_links()? {
        if d.trust.as_deref() == Some("quarantined")
            || !keys.contains(&d.scope)
            || !d.sources.iter().any(|s| taken.contains(s))
        {
            continue;
        }
        match d.kind {
            DerivedKind::Fact => counts.facts += 1,
            DerivedKind::Summary => counts.summaries += 1,
        }
        derived.push(d.key);
    }
    drop(log);
    let mut notes = Vec::new();
    for scope in &visible {
        for row in engine.index().files(&scope.key())? {
            if row.error.is_some() {
                continue;
            }
            let Ok(bytes) = std::fs::read(&row.path) else {
                continue;
            };
            let Ok(text) = std::str::from_utf8(&bytes) else {
                continue;
            };
            if !text.contains("origin") {
                continue;
            }
            let ctx = FileContext {
                relative_path: &row.rel_path,
            };
            let Ok(note) = Note::parse(text, ctx) else {
                continue;
            };
            let Some((host, model, conversation)) = captured_origin(&note) else {
                continue;
            };
            let from_taken = conversation
                .as_ref()
                .is_some_and(|c| conversations.contains(&(scope.key(), c.clone())));
            let at = note.created_at.or(note.updated_at);
            if !from_taken && !sel.takes(host.as_deref(), model.as_deref(), at) {
                continue;
            }
            if let Some(c) = conversation {
                conversations.insert((scope.key(), c));
            }
            notes.push(Captured {
                scope: scope.clone(),
                id: row.id.clone(),
                rel_path: row.rel_path.clone(),
                path: PathBuf::from(&row.path),
                bytes,
            });
        }
    }
    counts.notes = notes.len();
    counts.conversations = conversations.len();
    Ok(Plan {
        messages,
        derived,
        notes,
        counts,
    })
}

/// What `sel` would quarantine now, changing nothing.
pub fn preview(engine: &Engine, sel: &Selection) -> Result<Counts> {
    Ok(plan(engine, sel)?.counts)
}

/// The folder a quarantine keeps its notes in.
fn kept_dir(engine: &Engine, id: &str) -> PathBuf {
    engine.home().root().join("quarantine").join(id)
}

fn new_id(now_ms: i64) -> String {
    let day = crate::backup::human_utc(now_ms);
    let date: String = day.chars().filter(char::is_ascii_digit).take(14).collect();
    format!("q{date}-{}", crate::fsx::random_hex(3))
}

fn audit(engine: &Engine, action: &str, detail: serde_json::Value) -> Result<()> {
    memoria_store::audit::record(
        engine.home().root(),
        &memoria_store::audit::AuditEntry {
            at: engine.now_ms(),
            action: action.to_owned(),
            module: AUDIT_MODULE.to_owned(),
            detail,
        },
    )
}

fn json<T: Serialize>(v: &T) -> Result<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| Error::Internal(format!("encoding a quarantine: {e}")))
}

/// Quarantines what `sel` takes now (see the module's documentation). Nothing left to take:
/// nothing is recorded and the answer's id is `None`.
pub fn apply(engine: &mut Engine, sel: &Selection) -> Result<Applied> {
    let plan = plan(engine, sel)?;
    if plan.counts.is_empty() {
        return Ok(Applied {
            id: None,
            counts: plan.counts,
        });
    }
    let now = engine.now_ms();
    let id = new_id(now);
    let mut record = QuarantineRecord {
        id: id.clone(),
        created_at: now,
        released_at: None,
        selection: json(sel)?,
        counts: json(&plan.counts)?,
        notes: serde_json::json!([]),
        released: None,
    };
    engine
        .log()?
        .quarantine(&record, &plan.messages, &plan.derived)?;
    // The notes go after the log's marks: a note moved is recorded below; one that changed
    // since it was read stays where it is.
    let dir = kept_dir(engine, &id);
    let mut moved: Vec<MovedNote> = Vec::new();
    let mut outcome = Ok(());
    for (n, note) in plan.notes.iter().enumerate() {
        match move_aside(engine, &dir, n, note) {
            Ok(Some(m)) => moved.push(m),
            Ok(None) => {}
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    let mut counts = plan.counts;
    counts.notes = moved.len();
    record.notes = json(&moved)?;
    record.counts = json(&counts)?;
    engine
        .log()?
        .set_quarantine_result(&id, &record.counts, &record.notes)?;
    audit(
        engine,
        "memory.quarantine.apply",
        serde_json::json!({ "id": id, "selection": sel, "counts": counts }),
    )?;
    outcome?;
    engine.sync_recall_later()?;
    Ok(Applied {
        id: Some(id),
        counts,
    })
}

/// Moves one captured note into the quarantine's folder: copied there first, then removed
/// from the vault only if it still holds what was read. `None`: it changed meanwhile and stays.
fn move_aside(
    engine: &mut Engine,
    dir: &Path,
    n: usize,
    note: &Captured,
) -> Result<Option<MovedNote>> {
    crate::fsx::private_dir(dir)?;
    let name = note
        .path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| format!("{}.md", note.id));
    let kept = dir.join(format!("{n:04}-{name}"));
    crate::fsx::write_atomic(&kept, &note.bytes)?;
    crate::fsx::private_file(&kept)?;
    let _lock = engine.lock_scope(&note.scope)?;
    let removed = engine.swap_note_file(
        &note.scope,
        &note.id,
        &note.rel_path,
        Some(&note.bytes),
        None,
        None,
    )?;
    if !removed {
        let _ = std::fs::remove_file(&kept);
        return Ok(None);
    }
    let kept_at = kept
        .strip_prefix(engine.home().root())
        .unwrap_or(&kept)
        .to_string_lossy()
        .replace('\\', "/");
    Ok(Some(MovedNote {
        scope: note.scope.key(),
        id: note.id.clone(),
        rel_path: note.rel_path.clone(),
        kept_at,
    }))
}

/// Releases quarantine `id`: every label it changed is put back as it was, every note it
/// moved goes back to its path (beside it, as `<name>-restored.md`, when a new file took it).
/// A quarantine unknown or already released is refused.
pub fn release(engine: &mut Engine, id: &str) -> Result<Release> {
    let record = engine
        .log()?
        .quarantine_record(id)?
        .ok_or_else(|| Error::QuarantineNotFound(id.to_owned()))?;
    let moved: Vec<MovedNote> = serde_json::from_value(record.notes.clone()).unwrap_or_default();
    // Every scope a note goes back to must be reachable from here before anything changes.
    for m in &moved {
        let scope = Scope::from_key(&m.scope)?;
        if !engine.visible_scopes().contains(&scope) {
            return Err(Error::Invalid(format!(
                "quarantine {id} moved notes of {}, which is not visible from here: release it from that project's folder",
                m.scope
            )));
        }
    }
    let now = engine.now_ms();
    let logged = engine
        .log()?
        .release_quarantine(id, now, &serde_json::json!({}))?;
    for (scope, conversation) in &logged.rederive {
        crate::capture::extract::derive_conversation(engine, scope, conversation, None)?;
    }
    let mut out = Release {
        id: id.to_owned(),
        messages: logged.messages,
        derived: logged.derived,
        rederived: logged.rederive.len(),
        ..Release::default()
    };
    // The log's labels are back already: a note that cannot be put back is reported and the
    // others still go back.
    for m in &moved {
        if let Err(e) = put_back(engine, m, &mut out) {
            out.failed.push((m.rel_path.clone(), e.to_string()));
        }
    }
    let _ = std::fs::remove_dir(kept_dir(engine, id));
    engine.log()?.set_quarantine_released(id, &json(&out)?)?;
    audit(
        engine,
        "memory.quarantine.release",
        serde_json::json!({
            "id": id,
            "messages": out.messages,
            "derived": out.derived,
            "notes": out.notes + out.renamed.len(),
            "missing": out.missing.len(),
            "failed": out.failed.len(),
        }),
    )?;
    engine.sync_recall_later()?;
    Ok(out)
}

/// The path beside `rel` a restored note takes when `rel` is taken: `<name>-restored.md`,
/// then `<name>-restored-2.md`, …
fn restored_name(rel: &str, n: usize) -> String {
    let (stem, ext) = match rel.rsplit_once('.') {
        Some((s, e)) if !e.contains('/') => (s, format!(".{e}")),
        _ => (rel, String::new()),
    };
    if n == 1 {
        format!("{stem}-restored{ext}")
    } else {
        format!("{stem}-restored-{n}{ext}")
    }
}

fn put_back(engine: &mut Engine, m: &MovedNote, out: &mut Release) -> Result<()> {
    let kept = engine.home().root().join(&m.kept_at);
    let bytes = match std::fs::read(&kept) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            out.missing.push(m.rel_path.clone());
            return Ok(());
        }
        Err(e) => return Err(Error::io("read", &kept)(e)),
    };
    let scope = Scope::from_key(&m.scope)?;
    let dir = engine.scope_dir(&scope)?;
    let _lock = engine.lock_scope(&scope)?;
    let mut rel = m.rel_path.clone();
    for n in 1.. {
        let abs = dir.join(&rel);
        if let Some(parent) = abs.parent() {
            std::fs::create_dir_all(parent).map_err(Error::io("create folder", parent))?;
        }
        if crate::fsx::create_new(&abs, &bytes)? {
            engine.index_file(&scope, &abs, &rel)?;
            break;
        }
        rel = restored_name(&m.rel_path, n);
    }
    if rel == m.rel_path {
        out.notes += 1;
    } else {
        out.renamed.push((m.rel_path.clone(), rel));
    }
    std::fs::remove_file(&kept).map_err(Error::io("remove", &kept))?;
    Ok(())
}

/// The hosts and models that wrote provider messages (an assistant's, a tool's) in the
/// visible scopes: `(kind, name, messages not held back)`, by kind and name.
pub fn providers(engine: &Engine) -> Result<Vec<(&'static str, String, usize)>> {
    let keys: HashSet<String> = engine.visible_scopes().iter().map(|s| s.key()).collect();
    let mut found: std::collections::BTreeMap<(&'static str, String), usize> = Default::default();
    for m in engine.log()?.message_marks()? {
        if !matches!(m.role, Role::Assistant | Role::Tool) || !keys.contains(&m.scope) {
            continue;
        }
        let open = usize::from(m.quarantined.is_none());
        for (kind, name) in [("host", &m.host), ("model", &m.model)] {
            if let Some(name) = name {
                *found.entry((kind, name.clone())).or_default() += open;
            }
        }
    }
    Ok(found.into_iter().map(|((k, n), c)| (k, n, c)).collect())
}

/// Every quarantine, the latest first.
pub fn history(engine: &Engine) -> Result<Vec<Quarantine>> {
    Ok(engine
        .log()?
        .quarantines()?
        .into_iter()
        .map(|r| Quarantine {
            id: r.id,
            created_at: r.created_at,
            selection: serde_json::from_value(r.selection).unwrap_or_default(),
            counts: serde_json::from_value(r.counts).unwrap_or_default(),
            notes: serde_json::from_value(r.notes).unwrap_or_default(),
            released_at: r.released_at,
            release: r.released.and_then(|v| serde_json::from_value(v).ok()),
        })
        .collect())
}

#[cfg(test)]
mod tests;
