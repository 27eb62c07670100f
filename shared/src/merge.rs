//! Three-way merge of one note: the heart of sync's promise that no edit is lost silently.
//!
//! Given the note as last synced (`base`), this machine's version (`ours`) and the cloud's
//! (`theirs`) — each possibly absent (never synced, or deleted) — [`merge`] returns either a
//! clean result or a conflict the user resolves. Rules (PRODUCT §8):
//! - unchanged → keep; changed on one side → take that side (including a delete);
//! - changed on both → summary and type from the side that changed them; tags as sets (additions
//!   from either side kept, removals from either side applied); bodies merged by lines;
//! - edit vs delete keeps the edit;
//! - metadata that syncs (trust, importance, source, status, relations) is part of what "changed"
//!   means (the sync form of the content hash): from the side that changed it; when both did,
//!   trust takes the lower, status the further along its life cycle, relations merge as sets
//!   like tags, and importance and source the larger value;
//! - anything else is a conflict: two different summaries or types, edits on the same or
//!   adjacent lines (stricter than diffy, which merges adjacent edits that git would refuse), a
//!   merged body over the size limit, or both sides having the note with no base.
//!
//! The function is pure and symmetric: swapping `ours` and `theirs` gives the same outcome.

use std::ops::Range;

use serde_json::Map;
use similar::algorithms::{Capture, Replace, diff_slices};
use similar::{Algorithm, DiffTag};

use crate::note::{Note, Relation, Status};

/// Why a note could not be merged automatically.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictKind {
    /// Both sides have the note and there is no last-synced copy to compare with.
    NoBase,
    /// Both sides changed the summary, differently.
    Summary,
    /// Both sides changed the type, differently.
    Type,
    /// Both sides changed the same or adjacent lines of the body.
    Body,
    /// The merged body is over the size limit.
    TooLarge,
}

/// The result of a three-way merge.
// One outcome per note, short-lived: boxing the note would only add noise at every use.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum MergeOutcome {
    /// Merged cleanly: the note to keep, or `None` when it stays deleted.
    Clean(Option<Note>),
    /// Needs a person; every reason found is listed.
    Conflict(Vec<ConflictKind>),
}

/// Merges one note. `max_body_bytes` is the server's per-body limit.
pub fn merge(
    base: Option<&Note>,
    ours: Option<&Note>,
    theirs: Option<&Note>,
    max_body_bytes: usize,
) -> MergeOutcome {
    let same = |a: Option<&Note>, b: Option<&Note>| match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            crate::ContentHash::of_synced_note(a) == crate::ContentHash::of_synced_note(b)
        }
        _ => false,
    };
    if same(ours, theirs) {
        // Same content; metadata (times, trust, unknown keys) still merges deterministically.
        return MergeOutcome::Clean(match (base, ours, theirs) {
            (_, Some(o), Some(t)) => Some(merge_meta(base, o, t, o)),
            _ => None,
        });
    }
    // Changed on one side only: that side's content, with metadata merged.
    if base.is_some() && same(base, ours) {
        return MergeOutcome::Clean(
            theirs.map(|t| ours.map_or_else(|| t.clone(), |o| merge_meta(base, o, t, t))),
        );
    }
    if base.is_some() && same(base, theirs) {
        return MergeOutcome::Clean(
            ours.map(|o| theirs.map_or_else(|| o.clone(), |t| merge_meta(base, o, t, o))),
        );
    }
    match (base, ours, theirs) {
        // One side has a note the other never had (or the base is gone): copy it.
        (None, Some(n), None) | (None, None, Some(n)) => MergeOutcome::Clean(Some(n.clone())),
        (None, Some(_), Some(_)) => MergeOutcome::Conflict(vec![ConflictKind::NoBase]),
        // Edit vs delete keeps the edit.
        (Some(_), Some(n), None) | (Some(_), None, Some(n)) => MergeOutcome::Clean(Some(n.clone())),
        (Some(b), Some(o), Some(t)) => merge_both(b, o, t, max_body_bytes),
        (_, None, None) => MergeOutcome::Clean(None),
    }
}

fn merge_both(b: &Note, o: &Note, t: &Note, max_body_bytes: usize) -> MergeOutcome {
    let mut kinds = Vec::new();
    let summary = pick(&b.summary, &o.summary, &t.summary).cloned();
    if summary.is_none() {
        kinds.push(ConflictKind::Summary);
    }
    let note_type = pick(&b.note_type, &o.note_type, &t.note_type).cloned();
    if note_type.is_none() {
        kinds.push(ConflictKind::Type);
    }
    let body = merge_lines(&b.body, &o.body, &t.body);
    match &body {
        None => kinds.push(ConflictKind::Body),
        Some(body) if body.len() > max_body_bytes => kinds.push(ConflictKind::TooLarge),
        Some(_) => {}
    }
    if !kinds.is_empty() {
        return MergeOutcome::Conflict(kinds);
    }
    let mut merged = merge_meta(Some(b), o, t, o);
    merged.summary = summary.unwrap_or_default();
    merged.note_type = note_type.unwrap_or_default();
    merged.tags = merge_tags(&b.tags, &o.tags, &t.tags);
    merged.body = body.unwrap_or_default();
    MergeOutcome::Clean(Some(merged))
}

/// The value from the side that changed it; `None` when both changed it differently.
fn pick<'a, T: PartialEq>(b: &'a T, o: &'a T, t: &'a T) -> Option<&'a T> {
    if o == t || t == b {
        Some(o)
    } else if o == b {
        Some(t)
    } else {
        None
    }
}

/// Tags as sets: additions from either side kept, removals from either side applied.
/// Order: ours first, then theirs' additions — sorted, so the result is symmetric.
pub fn merge_tags(b: &[String], o: &[String], t: &[String]) -> Vec<String> {
    let has = |v: &[String], x: &String| v.contains(x);
    let mut out: Vec<String> = Vec::new();
    for x in o.iter().chain(t.iter()) {
        let keep = if has(b, x) {
            has(o, x) && has(t, x)
        } else {
            true
        };
        if keep && !out.contains(x) {
            out.push(x.clone());
        }
    }
    out.sort();
    out
}

/// Every metadata field from the side that changed it; when both changed it: created = earliest,
/// updated = latest, trust = the lower (trust only goes down), status = the further along
/// (working, consolidated, archived), relations as sets (like tags), anything else the larger
/// value, so that the result is symmetric.
fn merge_meta(b: Option<&Note>, o: &Note, t: &Note, content: &Note) -> Note {
    let mut n = content.clone();
    let bf = |f: fn(&Note) -> Option<i64>| b.map(f);
    n.created_at = choose_by(
        bf(|n| n.created_at).as_ref(),
        &o.created_at,
        &t.created_at,
        |x, y| [*x, *y].into_iter().flatten().min(),
    );
    n.updated_at = choose_by(
        bf(|n| n.updated_at).as_ref(),
        &o.updated_at,
        &t.updated_at,
        |x, y| [*x, *y].into_iter().flatten().max(),
    );
    n.trust = choose_by(b.map(|b| &b.trust), &o.trust, &t.trust, |x, y| {
        match (x, y) {
            (Some(x), Some(y)) => Some(*x.min(y)),
            (x, y) => x.or(*y),
        }
    });
    n.origin = choose(b.map(|b| &b.origin), &o.origin, &t.origin);
    n.importance = choose(b.map(|b| &b.importance), &o.importance, &t.importance);
    n.source = choose(b.map(|b| &b.source), &o.source, &t.source);
    n.status = choose_by(b.map(|b| &b.status), &o.status, &t.status, |x, y| {
        let stage = |s: &Option<Status>| match s {
            None => 0,
            Some(Status::Working) => 1,
            Some(Status::Consolidated) => 2,
            Some(Status::Archived) => 3,
        };
        if stage(x) >= stage(y) { *x } else { *y }
    });
    n.relations = choose_by(
        b.map(|b| &b.relations),
        &o.relations,
        &t.relations,
        |x, y| merge_relations(b.map_or(&[][..], |b| &b.relations), x, y),
    );
    n.project = choose(b.map(|b| &b.project), &o.project, &t.project);
    n.project_type = choose(b.map(|b| &b.project_type), &o.project_type, &t.project_type);
    let empty = Map::new();
    let be = b.map(|b| &b.extra).unwrap_or(&empty);
    let mut keys: Vec<&String> = o.extra.keys().chain(t.extra.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut extra = Map::new();
    for k in keys {
        if let Some(v) = choose(Some(&be.get(k)), &o.extra.get(k), &t.extra.get(k)) {
            extra.insert(k.clone(), v.clone());
        }
    }
    n.extra = extra;
    n
}

/// Relations as sets, like [`merge_tags`]: additions from either side kept, removals from
/// either side applied; ordered by target, then kind, so the result is symmetric.
fn merge_relations(b: &[Relation], o: &[Relation], t: &[Relation]) -> Vec<Relation> {
    let mut out: Vec<Relation> = Vec::new();
    for r in o.iter().chain(t) {
        let keep = !b.contains(r) || (o.contains(r) && t.contains(r));
        if keep && !out.contains(r) {
            out.push(r.clone());
        }
    }
    out.sort_by_key(|r| (r.target.clone(), format!("{:?}", r.kind)));
    out
}

/// The value from the side that changed it; when both changed it differently, the larger by
/// its debug form (arbitrary, but the same whichever side is "ours").
fn choose<T: PartialEq + Clone + std::fmt::Debug>(b: Option<&T>, o: &T, t: &T) -> T {
    choose_by(b, o, t, |o, t| {
        if format!("{o:?}") >= format!("{t:?}") {
            o.clone()
        } else {
            t.clone()
        }
    })
}

fn choose_by<T: PartialEq + Clone>(b: Option<&T>, o: &T, t: &T, both: impl Fn(&T, &T) -> T) -> T {
    if o == t || Some(t) == b {
        o.clone()
    } else if Some(o) == b {
        t.clone()
    } else {
        both(o, t)
    }
}

/// A change to the base: base lines `old` replaced by the side's lines `new`.
#[derive(Debug, Clone, PartialEq)]
struct Hunk {
    old: Range<usize>,
    new: Range<usize>,
}

/// The side's changes to the base, in order, as `algorithm` aligns them. Not
/// `similar::capture_diff_slices`: its `Compact` step (similar 2.7.0) can return ops out of
/// order when lines repeat (base `b c c d`, side `d d` gives an insert at base line 1 after an
/// equal run at line 3).
fn hunks(algorithm: Algorithm, base: &[&str], side: &[&str]) -> Vec<Hunk> {
    let mut capture = Replace::new(Capture::new());
    let Ok(()) = diff_slices(algorithm, &mut capture, base, side);
    let mut out: Vec<Hunk> = Vec::new();
    for op in capture.into_inner().into_ops() {
        let (tag, old, new) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            continue;
        }
        match out.last_mut() {
            // A delete right next to an insert is one change.
            Some(last) if last.old.end == old.start && last.new.end == new.start => {
                last.old.end = old.end;
                last.new.end = new.end;
            }
            _ => out.push(Hunk { old, new }),
        }
    }
    out
}

/// Which way [`slide`] moves each change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slide {
    Up,
    Down,
}

/// The same changes, each moved as far as it goes in one direction through the equal lines
/// around it. Within a run of repeated lines a change can sit at several places and still
/// describe the same edit; a diff picks one, and two diffs of the same edit may pick
/// differently.
fn slide(hunks: &[Hunk], base: &[&str], side: &[&str], way: Slide) -> Vec<Hunk> {
    let mut out = hunks.to_vec();
    match way {
        Slide::Up => {
            for i in 0..out.len() {
                let floor = if i == 0 { 0 } else { out[i - 1].old.end + 1 };
                let h = &mut out[i];
                while h.old.start > floor
                    && h.new.start > 0
                    && (h.old.is_empty() || base[h.old.start - 1] == base[h.old.end - 1])
                    && (h.new.is_empty() || side[h.new.start - 1] == side[h.new.end - 1])
                {
                    h.old = h.old.start - 1..h.old.end - 1;
                    h.new = h.new.start - 1..h.new.end - 1;
                }
            }
        }
        Slide::Down => {
            for i in (0..out.len()).rev() {
                let ceiling = match out.get(i + 1) {
                    Some(next) => next.old.start.saturating_sub(1),
                    None => base.len(),
                };
                let h = &mut out[i];
                while h.old.end < ceiling
                    && h.new.end < side.len()
                    && (h.old.is_empty() || base[h.old.start] == base[h.old.end])
                    && (h.new.is_empty() || side[h.new.start] == side[h.new.end])
                {
                    h.old = h.old.start + 1..h.old.end + 1;
                    h.new = h.new.start + 1..h.new.end + 1;
                }
            }
        }
    }
    out
}

/// Line-based three-way merge. `None` when both sides changed the same or adjacent lines
/// (two insertions at the same place count too), unless they made the very same change.
///
/// A clean result is checked before it is returned: where lines repeat (blank lines,
/// separators, checklist items), one edit has several equally short descriptions, and a
/// change both sides made, described at different places, would be applied twice (or a line
/// both kept would be dropped). So the merge is made from several descriptions of each side's
/// changes — as two diff algorithms align them, and each slid as far up and as far down as it
/// goes, in every pairing of the two sides — and it is clean only when every one of them is
/// clean and gives the same text.
pub fn merge_lines(base: &str, ours: &str, theirs: &str) -> Option<String> {
    if ours == theirs || theirs == base {
        return Some(ours.to_owned());
    }
    if ours == base {
        return Some(theirs.to_owned());
    }
    let b: Vec<&str> = base.split_inclusive('\n').collect();
    let o: Vec<&str> = ours.split_inclusive('\n').collect();
    let t: Vec<&str> = theirs.split_inclusive('\n').collect();
    let mut agreed: Option<String> = None;
    for algorithm in [Algorithm::Myers, Algorithm::Patience] {
        let (ho, ht) = (hunks(algorithm, &b, &o), hunks(algorithm, &b, &t));
        let (ou, od) = (
            slide(&ho, &b, &o, Slide::Up),
            slide(&ho, &b, &o, Slide::Down),
        );
        let (tu, td) = (
            slide(&ht, &b, &t, Slide::Up),
            slide(&ht, &b, &t, Slide::Down),
        );
        let placed = [(&ho, &ht), (&ou, &tu), (&od, &td), (&ou, &td), (&od, &tu)];
        for (ho, ht) in placed {
            let merged = merge_hunks(&b, (ho, &o), (ht, &t))?;
            match &agreed {
                Some(a) if *a != merged => return None,
                Some(_) => {}
                None => agreed = Some(merged),
            }
        }
    }
    agreed
}

/// The base with both sides' changes applied; `None` when changes of the two sides touch
/// (overlap or are adjacent) and are not the very same change.
fn merge_hunks(b: &[&str], ours: (&[Hunk], &[&str]), theirs: (&[Hunk], &[&str])) -> Option<String> {
    let ho: Vec<(&Hunk, &[&str])> = ours.0.iter().map(|h| (h, ours.1)).collect();
    let ht: Vec<(&Hunk, &[&str])> = theirs.0.iter().map(|h| (h, theirs.1)).collect();
    let mut out = String::new();
    let (mut i, mut j, mut pos) = (0, 0, 0);
    loop {
        let (hunk, side) = match (ho.get(i), ht.get(j)) {
            (None, None) => break,
            (Some(x), Some(y)) => {
                let touch = x.0.old.start <= y.0.old.end && y.0.old.start <= x.0.old.end;
                if touch {
                    // The very same change on both sides is fine; anything else conflicts.
                    if x.0.old != y.0.old || x.1[x.0.new.clone()] != y.1[y.0.new.clone()] {
                        return None;
                    }
                    i += 1;
                    j += 1;
                    *x
                } else if x.0.old.start < y.0.old.start {
                    i += 1;
                    *x
                } else {
                    j += 1;
                    *y
                }
            }
            (Some(x), None) => {
                i += 1;
                *x
            }
            (None, Some(y)) => {
                j += 1;
                *y
            }
        };
        if hunk.old.start < pos {
            // Hunks out of order would be a diff bug; never guess, let the user decide.
            return None;
        }
        b[pos..hunk.old.start].iter().for_each(|l| out.push_str(l));
        side[hunk.new.clone()].iter().for_each(|l| out.push_str(l));
        pos = hunk.old.end;
    }
    b[pos..].iter().for_each(|l| out.push_str(l));
    Some(out)
}

#[cfg(test)]
mod tests;
