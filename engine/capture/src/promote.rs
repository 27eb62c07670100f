//! Promotion: a fact that keeps coming back becomes a durable note.
//!
//! A current fact (not replaced) that its subject stated in [`PROMOTE_AFTER`] or more
//! conversations of a scope is ready for promotion: the review lists it, and a person promotes
//! it (`memoria promote KEY`, the app's Review page). The note is written through the one
//! derive path (`memoria_derive::commit`), its sources being every message that stated the
//! fact, so it is never more trusted nor less private than they are and names them under
//! `derivedFrom`. A promoted fact is not proposed again.

use std::collections::BTreeMap;

use memoria_derive::{Author, Derived, Origin, labels};
use memoria_shared::NoteId;
use memoria_shared::note::Note;
use memoria_store::log::DerivedItem;
use memoria_store::{Error, Result, Scope};
use memoria_vault::vault::Engine;
use serde::Serialize;

use crate::extract::attribute_shown;

/// Conversations a fact must be stated in to be proposed for promotion.
pub const PROMOTE_AFTER: usize = 3;

/// A fact ready to become a note.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Promotion {
    /// Stable while the fact is: the key of its latest statement.
    pub key: String,
    pub scope: String,
    pub subject: String,
    pub attribute: String,
    pub value: String,
    /// How it reads.
    pub text: String,
    /// The conversations that stated it, the earliest first.
    pub conversations: Vec<String>,
    /// Every message that stated it, the earliest first.
    pub sources: Vec<String>,
    /// When it was first and last stated.
    pub first_at: Option<i64>,
    pub last_at: Option<i64>,
    /// The trust the note would get (`None`: the person's own words).
    pub trust: Option<String>,
}

/// The facts of `scopes` ready for promotion: stated, still current, in [`PROMOTE_AFTER`] or
/// more conversations, never promoted before. The most stated first.
pub fn candidates(engine: &Engine, scopes: &[Scope]) -> Result<Vec<Promotion>> {
    let keys: Vec<String> = scopes.iter().map(Scope::key).collect();
    let log = engine.log()?;
    let mut groups: BTreeMap<(String, String, String, String), Vec<DerivedItem>> = BTreeMap::new();
    for f in log.current_facts()? {
        if !keys.contains(&f.scope) {
            continue;
        }
        let (Some(subject), Some(attribute), Some(value)) = (&f.subject, &f.attribute, &f.value)
        else {
            continue;
        };
        groups
            .entry((
                f.scope.clone(),
                subject.clone(),
                attribute.clone(),
                value.to_lowercase(),
            ))
            .or_default()
            .push(f);
    }
    let mut out = Vec::new();
    for ((scope, subject, attribute, value), facts) in groups {
        let mut conversations: Vec<String> = Vec::new();
        for f in &facts {
            if !conversations.contains(&f.conversation) {
                conversations.push(f.conversation.clone());
            }
        }
        if conversations.len() < PROMOTE_AFTER
            || log
                .promoted_to(&scope, (&subject, &attribute, &value))?
                .is_some()
        {
            continue;
        }
        let last = facts.last().expect("a group has a fact");
        let sources: Vec<String> = facts.iter().flat_map(|f| f.sources.clone()).collect();
        let mut origins = Vec::new();
        for s in &sources {
            if let Some(m) = log.get(s)? {
                origins.push(Origin::of_message(&m));
            }
        }
        let l = labels(&origins, None, Author::Person);
        out.push(Promotion {
            key: last.key.clone(),
            scope,
            subject,
            attribute: attribute_shown(&attribute).to_owned(),
            value: last.value.clone().unwrap_or_default(),
            text: last.text.clone(),
            conversations,
            sources,
            first_at: facts.first().and_then(|f| f.at),
            last_at: last.at,
            trust: l
                .trust
                .and_then(|t| serde_json::to_value(t).ok())
                .and_then(|v| v.as_str().map(str::to_owned)),
        });
    }
    out.sort_by(|a, b| {
        b.conversations
            .len()
            .cmp(&a.conversations.len())
            .then_with(|| a.key.cmp(&b.key))
    });
    Ok(out)
}

/// A note promoted from a fact.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Promoted {
    pub scope: String,
    pub id: String,
    pub summary: String,
    /// The messages it names as its sources.
    pub sources: usize,
}

/// Promotes the candidate whose key is `key` (see [`candidates`]) into a durable note of its
/// scope, written through the derive path.
pub fn promote(engine: &mut Engine, key: &str) -> Result<Promoted> {
    let c = candidates(engine, &engine.visible_scopes())?
        .into_iter()
        .find(|c| c.key == key)
        .ok_or_else(|| {
            Error::NotFound(format!(
                "no fact {key} ready for promotion here: it is replaced, promoted already, stated in fewer than {PROMOTE_AFTER} conversations, or not visible"
            ))
        })?;
    let scope = Scope::from_key(&c.scope)?;
    let mut origins = Vec::new();
    let mut said = Vec::new();
    {
        let log = engine.log()?;
        for s in &c.sources {
            if let Some(m) = log.get(s)? {
                said.push(format!(
                    "- {} ({}): “{}”",
                    memoria_vault::said::who(&m),
                    m.at.map(memoria_store::backup::human_date)
                        .unwrap_or_else(|| m.conversation.clone()),
                    m.text.lines().next().unwrap_or("").trim()
                ));
                origins.push(Origin::of_message(&m));
            }
        }
    }
    let id = free_id(engine, &scope, &c.text)?;
    let mut note = Note::new(
        id.clone(),
        c.text.clone(),
        format!(
            "{}.\n\nStated in {} conversations:\n\n{}\n",
            c.text,
            c.conversations.len(),
            said.join("\n")
        ),
    );
    note.created_at = Some(engine.now_ms());
    note.updated_at = note.created_at;
    note.tags = vec!["promoted".to_owned()];
    memoria_derive::commit(
        engine,
        &scope,
        vec![Derived {
            note: note.clone(),
            over: None,
            sources: origins,
            author: Author::Person,
            chosen_trust: None,
        }],
        Vec::new(),
    )?;
    let attribute = promoted_attribute(engine, &c)?;
    let now = engine.now_ms();
    engine.log()?.mark_promoted(
        &c.scope,
        (&c.subject, &attribute, &c.value.to_lowercase()),
        id.as_str(),
        now,
    )?;
    Ok(Promoted {
        scope: c.scope,
        id: id.to_string(),
        summary: c.text,
        sources: c.sources.len(),
    })
}

/// The attribute as the log keys it (a multi-valued one keeps its mark).
fn promoted_attribute(engine: &Engine, c: &Promotion) -> Result<String> {
    Ok(engine
        .log()?
        .derived_item(&c.key)?
        .and_then(|d| d.attribute)
        .unwrap_or_else(|| c.attribute.clone()))
}

/// An id for a note about `text` that no note of `scope` has.
pub(crate) fn free_id(engine: &Engine, scope: &Scope, text: &str) -> Result<NoteId> {
    let base = memoria_shared::id::slugify(text);
    let base: String = base.as_str().chars().take(48).collect();
    let base = base.trim_end_matches(['-', '.', '_']).to_owned();
    for n in 1..100 {
        let candidate = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let id = NoteId::new(&candidate)?;
        if engine.resolve(id.as_str(), Some(scope)).is_err() {
            return Ok(id);
        }
    }
    Err(Error::Exists(base))
}
