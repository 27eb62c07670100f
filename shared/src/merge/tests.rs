use expect_test::{Expect, expect};
use proptest::prelude::*;

use super::*;
use crate::NoteId;
use crate::note::NoteType;

const LIMIT: usize = 128 * 1024;

/// A note from a compact spec: `summary|type|tag,tag|body` (type may be empty; `\n` in the body).
fn n(spec: &str) -> Note {
    let mut parts = spec.splitn(4, '|');
    let summary = parts.next().unwrap();
    let ty = parts.next().unwrap_or("");
    let tags = parts.next().unwrap_or("");
    let body = parts.next().unwrap_or("");
    let mut note = Note::new(NoteId::new("n").unwrap(), summary, body);
    note.note_type = (!ty.is_empty()).then(|| NoteType::from_name(ty));
    note.tags = tags
        .split(',')
        .filter(|t| !t.is_empty())
        .map(String::from)
        .collect();
    note
}

fn render(o: &MergeOutcome) -> String {
    match o {
        MergeOutcome::Clean(None) => "clean: deleted".into(),
        MergeOutcome::Clean(Some(n)) => format!(
            "clean: {}|{}|{}|{}",
            n.summary,
            n.note_type.as_ref().map(|t| t.as_str()).unwrap_or(""),
            n.tags.join(","),
            n.body.replace('\n', "⏎")
        ),
        MergeOutcome::Conflict(k) => format!("conflict: {k:?}"),
    }
}

/// Checks `merge(base, ours, theirs)` and that swapping the sides gives the same outcome.
fn check(base: Option<&str>, ours: Option<&str>, theirs: Option<&str>, expect: Expect) {
    let (b, o, t) = (base.map(n), ours.map(n), theirs.map(n));
    let got = merge(b.as_ref(), o.as_ref(), t.as_ref(), LIMIT);
    let swapped = merge(b.as_ref(), t.as_ref(), o.as_ref(), LIMIT);
    assert_eq!(render(&got), render(&swapped), "merge is not symmetric");
    expect.assert_eq(&render(&got));
}

#[test]
fn one_sided_changes_copy() {
    check(
        Some("s||a|x\n"),
        Some("s||a|x\n"),
        Some("s||a|x\ny\n"),
        expect!["clean: s||a|x⏎y⏎"],
    );
    check(
        Some("s||a|x\n"),
        Some("s||a|x\n"),
        None,
        expect!["clean: deleted"],
    );
    check(None, None, Some("s|||new\n"), expect!["clean: s|||new⏎"]);
    check(
        None,
        Some("s|||same\n"),
        Some("s|||same\n"),
        expect!["clean: s|||same⏎"],
    );
    check(Some("s|||x\n"), None, None, expect!["clean: deleted"]);
}

#[test]
fn both_sided_changes_merge_by_field() {
    // Summary from the side that changed it, type from the other, body edits far apart.
    check(
        Some("old|user||l1\nl2\nl3\nl4\nl5\n"),
        Some("new summary|user||L1\nl2\nl3\nl4\nl5\n"),
        Some("old|feedback||l1\nl2\nl3\nl4\nL5\n"),
        expect!["clean: new summary|feedback||L1⏎l2⏎l3⏎l4⏎L5⏎"],
    );
    // Tags as sets: additions from both kept, a removal by either side applied.
    check(
        Some("s||a,b,c|x"),
        Some("s||a,c,d|x"),
        Some("s||b,c,e|x"),
        expect!["clean: s||c,d,e|x"],
    );
    // Edit vs delete keeps the edit.
    check(
        Some("s|||x\n"),
        Some("s|||x edited\n"),
        None,
        expect!["clean: s|||x edited⏎"],
    );
}

#[test]
fn conflicts() {
    check(
        Some("s|||x"),
        Some("a|||x"),
        Some("b|||x"),
        expect!["conflict: [Summary]"],
    );
    check(
        Some("s|user||x"),
        Some("s|feedback||x"),
        Some("s|reference||x"),
        expect!["conflict: [Type]"],
    );
    check(
        None,
        Some("s|||one\n"),
        Some("s|||two\n"),
        expect!["conflict: [NoBase]"],
    );
    // Same line.
    check(
        Some("s|||a\nb\nc\n"),
        Some("s|||a\nB1\nc\n"),
        Some("s|||a\nB2\nc\n"),
        expect!["conflict: [Body]"],
    );
    // Two insertions at the same place.
    check(
        Some("s|||a\nc\n"),
        Some("s|||a\nx\nc\n"),
        Some("s|||a\ny\nc\n"),
        expect!["conflict: [Body]"],
    );
    // Several reasons at once are all reported.
    check(
        Some("s|||a\n"),
        Some("x|||b\n"),
        Some("y|||c\n"),
        expect!["conflict: [Summary, Body]"],
    );
}

#[test]
fn adjacent_line_edits_conflict_where_diffy_would_merge() {
    // diffy merges edits to neighbouring lines cleanly (its `myers_diffy_vs_git` test); git and
    // Memoria call that a conflict, because neighbouring lines usually say one thing together.
    check(
        Some("s|||line 1\nline 2\nline 3\nline 4\n"),
        Some("s|||line 1\nline two\nline 3\nline 4\n"),
        Some("s|||line 1\nline 2\nline three\nline 4\n"),
        expect!["conflict: [Body]"],
    );
    // One line of distance apart is fine.
    check(
        Some("s|||line 1\nline 2\nline 3\nline 4\n"),
        Some("s|||line one\nline 2\nline 3\nline 4\n"),
        Some("s|||line 1\nline 2\nline three\nline 4\n"),
        expect!["clean: s|||line one⏎line 2⏎line three⏎line 4⏎"],
    );
    // An append at the end next to an edit of the last line conflicts too.
    check(
        Some("s|||a\nb\n"),
        Some("s|||a\nB\n"),
        Some("s|||a\nb\nc\n"),
        expect!["conflict: [Body]"],
    );
}

#[test]
fn the_same_change_on_both_sides_merges() {
    check(
        Some("s|||a\nb\nc\n"),
        Some("s|||a\nB\nc\nd\n"),
        Some("s|||a\nB\nc\n"),
        expect!["clean: s|||a⏎B⏎c⏎d⏎"],
    );
}

#[test]
fn repeated_lines_merge_without_a_panic() {
    // similar's compacted Myers diff put these hunks out of order (a panic, found by the
    // convergence soak at seed 3380).
    assert_eq!(merge_lines("b\nc\nc\nd\n", "d\n", "d\nd\n"), None);
    check(
        Some("s|||b\nc\nc\nd\n"),
        Some("s|||b\nc\nc\nd\n"),
        Some("s|||d\nd\n"),
        expect!["clean: s|||d⏎d⏎"],
    );
}

#[test]
fn oversized_merge_is_a_conflict() {
    let base = n("s|||a\nb\nc\n");
    let mut o = base.clone();
    o.body = format!("{}\nb\nc\n", "x".repeat(70_000));
    let mut t = base.clone();
    t.body = format!("a\nb\n{}\n", "y".repeat(70_000));
    assert_eq!(
        merge(Some(&base), Some(&o), Some(&t), LIMIT),
        MergeOutcome::Conflict(vec![ConflictKind::TooLarge])
    );
}

#[test]
fn metadata_merges_symmetrically() {
    let mut b = n("s|||x\n");
    b.created_at = Some(10);
    b.importance = Some(0.5);
    let mut o = b.clone();
    o.updated_at = Some(30);
    o.trust = Some(crate::Trust::Owner);
    o.extra.insert("ours".into(), "1".into());
    o.importance = Some(0.9);
    let mut t = b.clone();
    t.updated_at = Some(20);
    t.created_at = Some(5);
    t.trust = Some(crate::Trust::Peer);
    t.extra.insert("theirs".into(), "2".into());
    t.body = "x\ny\n".into();
    let MergeOutcome::Clean(Some(m)) = merge(Some(&b), Some(&o), Some(&t), LIMIT) else {
        panic!()
    };
    assert_eq!((m.created_at, m.updated_at), (Some(5), Some(30)));
    assert_eq!(m.trust, Some(crate::Trust::Peer), "trust only goes down");
    assert_eq!(m.importance, Some(0.9));
    assert_eq!(m.extra.len(), 2);
    assert_eq!(m.body, "x\ny\n");
    assert_eq!(
        merge(Some(&b), Some(&t), Some(&o), LIMIT),
        MergeOutcome::Clean(Some(m))
    );
}

/// A metadata-only change is a change: a note quarantined (or archived, or re-linked) on one
/// side merges with a body edit on the other, and neither undoes the other.
#[test]
fn metadata_only_changes_are_changes_and_merge_with_edits() {
    use crate::note::{Relation, RelationKind, Status, Trust};
    let mut b = n("s|||one\n");
    b.trust = Some(Trust::Owner);
    let mut quarantined = b.clone();
    quarantined.trust = Some(Trust::Quarantined);
    // Changed on one side only (the metadata): that side, whichever side it is.
    assert_eq!(
        merge(Some(&b), Some(&quarantined), Some(&b), LIMIT),
        MergeOutcome::Clean(Some(quarantined.clone()))
    );
    assert_eq!(
        merge(Some(&b), Some(&b), Some(&quarantined), LIMIT),
        MergeOutcome::Clean(Some(quarantined.clone()))
    );
    // Quarantined here, body edited there: both kept.
    let mut edited = b.clone();
    edited.body = "one\ntwo\n".into();
    for (o, t) in [(&quarantined, &edited), (&edited, &quarantined)] {
        let MergeOutcome::Clean(Some(m)) = merge(Some(&b), Some(o), Some(t), LIMIT) else {
            panic!("should merge")
        };
        assert_eq!(m.trust, Some(Trust::Quarantined));
        assert_eq!(m.body, "one\ntwo\n");
    }
    // Both changed the same fields differently: the stated rules, symmetric.
    let mut o = b.clone();
    o.trust = Some(Trust::Peer);
    o.status = Some(Status::Archived);
    o.importance = Some(0.2);
    o.relations = vec![Relation {
        target: "x".into(),
        kind: RelationKind::Relates,
    }];
    let mut t = b.clone();
    t.trust = Some(Trust::Derived);
    t.status = Some(Status::Consolidated);
    t.importance = Some(0.8);
    t.relations = vec![Relation {
        target: "y".into(),
        kind: RelationKind::Supersedes,
    }];
    let m = merge(Some(&b), Some(&o), Some(&t), LIMIT);
    assert_eq!(m, merge(Some(&b), Some(&t), Some(&o), LIMIT));
    let MergeOutcome::Clean(Some(m)) = m else {
        panic!("metadata never conflicts")
    };
    assert_eq!(m.trust, Some(Trust::Peer), "the lower trust");
    // A peer's words rank below ingested text: peer is the lower of the two.
    let (mut p, mut i) = (b.clone(), b.clone());
    p.trust = Some(Trust::Peer);
    i.trust = Some(Trust::Ingested);
    for (x, y) in [(&p, &i), (&i, &p)] {
        let MergeOutcome::Clean(Some(m)) = merge(Some(&b), Some(x), Some(y), LIMIT) else {
            panic!("metadata never conflicts")
        };
        assert_eq!(m.trust, Some(Trust::Peer));
    }
    assert_eq!(m.status, Some(Status::Archived), "the further along");
    assert_eq!(m.importance, Some(0.8));
    let targets: Vec<&str> = m.relations.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(targets, ["x", "y"], "relations as sets");
}

/// A body of unique lines (`b0`, `b1`, …) and a side derived from it by deleting, replacing and
/// inserting uniquely named lines, so every line's origin is known.
fn edited(base: &[String], ops: &[(usize, u8)], tag: &str) -> Vec<String> {
    let mut out: Vec<String> = base.to_vec();
    for (k, &(at, op)) in ops.iter().enumerate() {
        if out.is_empty() {
            out.push(format!("{tag}{k}"));
            continue;
        }
        let at = at % (out.len() + 1);
        match op % 3 {
            0 => out.insert(at, format!("{tag}{k}")),
            1 if at < out.len() => {
                out.remove(at);
            }
            _ if at < out.len() => out[at] = format!("{tag}{k}"),
            _ => out.push(format!("{tag}{k}")),
        }
    }
    out
}

fn body(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn merge_with_an_unchanged_side_is_the_changed_side(
        n_base in 0usize..12,
        ops in prop::collection::vec((0usize..20, 0u8..3), 0..6),
        summary in "[a-z]{1,5}",
    ) {
        let base_lines: Vec<String> = (0..n_base).map(|i| format!("b{i}")).collect();
        let b = n(&format!("s||t|{}", body(&base_lines)));
        let mut x = n(&format!("{summary}||t,u|{}", body(&edited(&base_lines, &ops, "x"))));
        x.importance = Some(0.25);
        prop_assert_eq!(merge(Some(&b), Some(&x), Some(&b), LIMIT), MergeOutcome::Clean(Some(x.clone())));
        prop_assert_eq!(merge(Some(&b), Some(&b), Some(&x), LIMIT), MergeOutcome::Clean(Some(x.clone())));
        prop_assert_eq!(merge_lines(&b.body, &x.body, &b.body), Some(x.body.clone()));
    }

    #[test]
    fn merges_are_symmetric_and_lose_no_line(
        n_base in 0usize..15,
        ops_x in prop::collection::vec((0usize..20, 0u8..3), 0..5),
        ops_y in prop::collection::vec((0usize..20, 0u8..3), 0..5),
    ) {
        let base_lines: Vec<String> = (0..n_base).map(|i| format!("b{i}")).collect();
        let x = edited(&base_lines, &ops_x, "x");
        let y = edited(&base_lines, &ops_y, "y");
        let (bb, bx, by) = (body(&base_lines), body(&x), body(&y));
        let xy = merge_lines(&bb, &bx, &by);
        let yx = merge_lines(&bb, &by, &bx);
        prop_assert_eq!(&xy, &yx);
        if let Some(m) = xy {
            let lines: Vec<&str> = m.lines().collect();
            // Every line either side added is there, exactly once.
            for l in x.iter().chain(y.iter()).filter(|l| !l.starts_with('b')) {
                prop_assert_eq!(lines.iter().filter(|m| **m == l.as_str()).count(), 1, "{} lost in {:?}", l, m);
            }
            // A base line survives exactly when neither side removed it.
            for l in &base_lines {
                let kept = x.contains(l) && y.contains(l);
                prop_assert_eq!(lines.contains(&l.as_str()), kept, "{} in {:?}", l, m);
            }
        }
    }

    #[test]
    fn merges_of_repeated_lines_never_panic_and_are_symmetric(
        b in prop::collection::vec("[a-d]", 0..7),
        x in prop::collection::vec("[a-d]", 0..7),
        y in prop::collection::vec("[a-d]", 0..7),
    ) {
        let (bb, bx, by) = (body(&b), body(&x), body(&y));
        let xy = merge_lines(&bb, &bx, &by);
        prop_assert_eq!(&xy, &merge_lines(&bb, &by, &bx));
        prop_assert_eq!(merge_lines(&bb, &bx, &bb), Some(bx.clone()));
    }

    #[test]
    fn tag_merge_is_a_set_merge(
        b in prop::collection::btree_set("[a-e]", 0..5),
        o in prop::collection::btree_set("[a-e]", 0..5),
        t in prop::collection::btree_set("[a-e]", 0..5),
    ) {
        let v = |s: &std::collections::BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>();
        let m = merge_tags(&v(&b), &v(&o), &v(&t));
        prop_assert_eq!(&m, &merge_tags(&v(&b), &v(&t), &v(&o)));
        for tag in o.union(&t) {
            let added = !b.contains(tag);
            let removed = b.contains(tag) && !(o.contains(tag) && t.contains(tag));
            prop_assert_eq!(m.contains(tag), added || !removed);
        }
    }
}

/// splitmix64: the random cases of the differential runs, the same on every run.
struct Mix(u64);

impl Mix {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// One random edit of `lines`: a line inserted, deleted or replaced, drawn from `alphabet`.
fn one_edit(rng: &mut Mix, lines: &mut Vec<String>, alphabet: &[&str]) {
    let word = alphabet[rng.below(alphabet.len())].to_owned();
    let at = rng.below(lines.len() + 1);
    match rng.below(3) {
        0 => lines.insert(at, word),
        1 if at < lines.len() => {
            lines.remove(at);
        }
        _ if at < lines.len() => lines[at] = word,
        _ => lines.push(word),
    }
}

/// What a three-way merge tool says about one case: clean with a text, or a conflict.
fn git_merge_file(dir: &std::path::Path, base: &str, ours: &str, theirs: &str) -> Option<String> {
    let (b, o, t) = (dir.join("base"), dir.join("ours"), dir.join("theirs"));
    std::fs::write(&b, base).unwrap();
    std::fs::write(&o, ours).unwrap();
    std::fs::write(&t, theirs).unwrap();
    let out = std::process::Command::new("git")
        .arg("merge-file")
        .arg("-p")
        .args([&o, &b, &t])
        .output()
        .expect("git merge-file (git must be installed for this test)");
    match out.status.code() {
        Some(0) => Some(String::from_utf8(out.stdout).unwrap()),
        Some(c) if c > 0 => None,
        _ => panic!(
            "git merge-file failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// Clean merges of one tool over the convergent cases: right ones and wrong ones.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    right: usize,
    wrong: usize,
}

impl Tally {
    fn count(&mut self, merged: Option<&str>, right: &str) {
        match merged {
            Some(m) if m == right => self.right += 1,
            Some(_) => self.wrong += 1,
            None => {}
        }
    }
}

/// Clean merges, ours and git's, in 3,000 convergent cases over `alphabet`: one machine made
/// an edit, the other the same edit and one more, so the only right clean answer is the second
/// machine's text (anything else must be a conflict).
fn convergent_merges(seed: u64, alphabet: &[&str]) -> (Tally, Tally) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Mix(seed);
    let (mut ours, mut git) = (Tally::default(), Tally::default());
    let mut cases = 0;
    while cases < 3000 {
        let mut base: Vec<String> = Vec::new();
        for _ in 0..rng.below(14) {
            base.push(alphabet[rng.below(alphabet.len())].to_owned());
        }
        let mut one = base.clone();
        one_edit(&mut rng, &mut one, alphabet);
        let mut two = one.clone();
        one_edit(&mut rng, &mut two, alphabet);
        // Each edit changes something, and the second does not undo the first (the second
        // machine's text back at the base is an unchanged side, whose merge is the other).
        if one == base || two == one || two == base {
            continue;
        }
        cases += 1;
        let (bb, b1, b2) = (body(&base), body(&one), body(&two));
        let merged = merge_lines(&bb, &b1, &b2);
        assert_eq!(merged, merge_lines(&bb, &b2, &b1), "symmetric");
        ours.count(merged.as_deref(), &b2);
        git.count(git_merge_file(dir.path(), &bb, &b1, &b2).as_deref(), &b2);
    }
    (ours, git)
}

#[test]
fn convergent_edits_never_merge_wrong_with_note_like_lines() {
    let alphabet = [
        "",
        "",
        "---",
        "- [ ] todo",
        "- [x] done",
        "- item",
        "## Notes",
        "text",
        "more text",
    ];
    let (ours, git) = convergent_merges(1, &alphabet);
    println!("note-like, 3000 convergent cases: memoria {ours:?}, git merge-file {git:?}");
    assert_eq!(ours.wrong, 0, "memoria {ours:?}, git {git:?}");
}

#[test]
fn convergent_edits_never_merge_wrong_with_a_repetitive_alphabet() {
    let (ours, git) = convergent_merges(2, &["a", "b", "a", ""]);
    println!("repetitive, 3000 convergent cases: memoria {ours:?}, git merge-file {git:?}");
    assert_eq!(ours.wrong, 0, "memoria {ours:?}, git {git:?}");
}
