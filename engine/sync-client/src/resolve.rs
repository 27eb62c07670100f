//! Resolving a recorded conflict: keep this machine, keep the cloud, keep both (the cloud's
//! version becomes a new note beside, with a fresh id), or a hand-merged text. Whatever is set
//! aside is backed up. Resolution is local and offline: it makes the conflict's cloud version
//! the note's base, so the next pass uploads the choice with that base revision (and, if the
//! cloud moved again meanwhile, merges once more).

use std::path::PathBuf;

use memoria_shared::NoteId;
use memoria_shared::note::{FileContext, Note};
use serde::Serialize;

use super::base::{BaseEntry, ScopeDir};
use super::conflict::Conflict;
use super::error::{SyncError, SyncResult};
use crate::backup::BackupReason;
use crate::project::Scope;
use crate::vault::Engine;

/// The user's choice for one conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keep {
    /// Keep this machine's version (the cloud's is backed up).
    Local,
    /// Keep the cloud's version (this machine's is backed up).
    Cloud,
    /// Keep this machine's version under its id and the cloud's as a new note beside it.
    Both,
    /// A hand-merged note file (with frontmatter) or just its body (metadata from this
    /// machine's version, else the cloud's).
    Merged(String),
}

/// What a resolution did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolved {
    pub scope: String,
    pub id: String,
    /// The new note holding the cloud's version (keep both).
    pub new_id: Option<String>,
    /// Backups of what was set aside.
    pub backups: Vec<String>,
}

/// Every recorded conflict of the synced scopes of `engine`.
pub fn list_conflicts(engine: &Engine) -> SyncResult<Vec<Conflict>> {
    let mut out = Vec::new();
    for scope in super::reconcile::synced_scopes(engine) {
        out.extend(ScopeDir::of(engine, &scope)?.conflicts()?);
    }
    Ok(out)
}

fn parse(id: &str, text: &str) -> Option<Note> {
    let rel = format!("{id}.md");
    Note::parse(
        text,
        FileContext {
            relative_path: &rel,
        },
    )
    .ok()
}

/// Resolves the conflict of note `id` (in `scope`, or the first synced scope holding one).
pub fn resolve(
    engine: &mut Engine,
    id: &str,
    scope: Option<&Scope>,
    keep: Keep,
) -> SyncResult<Resolved> {
    let mut found = None;
    for s in super::reconcile::synced_scopes(engine) {
        if scope.is_some_and(|want| want != &s) {
            continue;
        }
        let sd = ScopeDir::of(engine, &s)?;
        if let Some(c) = sd.conflict(id)? {
            found = Some((s, sd, c));
            break;
        }
    }
    let (scope, sd, _) = found.ok_or_else(|| SyncError::NoConflict(id.to_owned()))?;
    // Not while a pass (say, a watcher's coordinator) is changing the base store; the conflict
    // is read again under the lock.
    let _pass = sd.lock_pass()?;
    let c = sd
        .conflict(id)?
        .ok_or_else(|| SyncError::NoConflict(id.to_owned()))?;
    engine.refresh_scope(&scope)?;
    let row = engine.index().find(&scope.key(), id)?.into_iter().next();
    let current: Option<(String, PathBuf, String)> = match &row {
        Some(r) => {
            let text = std::fs::read_to_string(&r.path)
                .map_err(crate::Error::io("read", PathBuf::from(&r.path)))?;
            Some((r.rel_path.clone(), PathBuf::from(&r.path), text))
        }
        None => None,
    };
    let rel = current
        .as_ref()
        .map_or_else(|| format!("{id}.md"), |(rel, _, _)| rel.clone());
    let cloud = c.cloud.as_deref().and_then(|t| parse(id, t));
    let mut backups = Vec::new();
    let mut new_id = None;
    let mut set_aside = |engine: &Engine, text: &str| -> SyncResult<()> {
        let b = engine.backup_bytes(
            &scope,
            id,
            &rel,
            text.as_bytes(),
            BackupReason::ConflictSetAside,
        )?;
        backups.push(b.backup_id);
        Ok(())
    };
    let lock = engine.lock_scope(&scope)?;
    match &keep {
        Keep::Local => {
            if let Some(t) = &c.cloud {
                set_aside(engine, t)?;
            }
        }
        Keep::Cloud => {
            if let Some((_, _, text)) = &current {
                set_aside(engine, text)?;
            }
            let expected = current.as_ref().map(|(_, _, t)| t.as_bytes());
            swap_or_refuse(engine, &scope, id, &rel, expected, cloud.as_ref())?;
        }
        Keep::Both => {
            if let Some(n) = &cloud {
                let mut copy = n.clone();
                // Named after the cloud version's hash: deterministic, and unique per version.
                let hash = n.content_hash();
                let stem: String = id.chars().take(100).collect();
                let mut k = 0;
                let nid = loop {
                    let suffix = if k == 0 {
                        String::new()
                    } else {
                        format!("-{k}")
                    };
                    let candidate = format!("{stem}-cloud-{}{suffix}", &hash.as_str()[..6]);
                    let nid = NoteId::new(&candidate).map_err(crate::Error::from)?;
                    if engine.index().find(&scope.key(), nid.as_str())?.is_empty() {
                        break nid;
                    }
                    k += 1;
                };
                copy.id = nid.clone();
                engine.put_note(&scope, &nid.file_name(), &copy)?;
                new_id = Some(nid.to_string());
            }
        }
        Keep::Merged(text) => {
            let merged = if text.starts_with("---") {
                let n = parse(id, text).ok_or_else(|| {
                    SyncError::Engine(crate::Error::Invalid(
                        "the merged file's frontmatter does not parse: fix it and resolve again"
                            .into(),
                    ))
                })?;
                if n.id.as_str() != id {
                    return Err(SyncError::Engine(crate::Error::Invalid(format!(
                        "the merged file is note `{}`, not `{id}`: keep the id",
                        n.id
                    ))));
                }
                n
            } else {
                let mut n = current
                    .as_ref()
                    .and_then(|(_, _, t)| parse(id, t))
                    .or_else(|| cloud.clone())
                    .unwrap_or_else(|| {
                        Note::new(NoteId::new(id).expect("recorded ids are valid"), id, "")
                    });
                n.body = text.clone();
                n
            };
            if let Some((_, _, t)) = &current {
                set_aside(engine, t)?;
            }
            if let Some(t) = &c.cloud {
                set_aside(engine, t)?;
            }
            let expected = current.as_ref().map(|(_, _, t)| t.as_bytes());
            swap_or_refuse(engine, &scope, id, &rel, expected, Some(&merged))?;
        }
    }
    drop(lock);
    // The cloud's version becomes the base: the next pass uploads the choice on top of it.
    let mut state = sd.load_state()?;
    match (&cloud, &c.cloud_revision) {
        (Some(n), Some(rev)) => {
            let hash = memoria_shared::ContentHash::of_synced_note(n)
                .as_str()
                .to_owned();
            sd.put_body(id, &hash, c.cloud.as_deref().unwrap_or_default())?;
            state.base.insert(
                id.to_owned(),
                BaseEntry {
                    revision: rev.clone(),
                    hash,
                },
            );
        }
        _ => {
            state.base.remove(id);
        }
    }
    state.manifest_version = None;
    sd.save_state(&state)?;
    sd.remove_conflict(id)?;
    Ok(Resolved {
        scope: scope.key(),
        id: id.to_owned(),
        new_id,
        backups,
    })
}

/// Puts the chosen version in place of the file the resolution read; when another program
/// changed the file meanwhile, its version stays and the resolution is refused (nothing lost).
fn swap_or_refuse(
    engine: &mut Engine,
    scope: &Scope,
    id: &str,
    rel: &str,
    expected: Option<&[u8]>,
    new: Option<&Note>,
) -> SyncResult<()> {
    if engine.swap_note_file(scope, id, rel, expected, new, None)? {
        Ok(())
    } else {
        Err(SyncError::Engine(crate::Error::ChangedMeanwhile {
            path: engine.scope_dir(scope)?.join(rel),
        }))
    }
}
