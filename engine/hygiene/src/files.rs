//! The relative file paths a note's text names: Markdown link targets (`[text](docs/a.md)`)
//! and code spans that look like a path (`` `src/lib.rs` ``: a slash, and a last part with an
//! extension or a trailing slash). Fenced code blocks are skipped, as are URLs, anchors,
//! absolute and home-relative paths.

use std::path::{Component, Path, PathBuf};

/// How a path was written, which decides what it is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefKind {
    /// A Markdown link: relative to the note's folder, as Markdown renders it.
    Link,
    /// A code span: relative to the project's root, as people write paths in a repository.
    Code,
}

/// The paths named in `body`, each once, in order.
pub fn file_refs(body: &str) -> Vec<(String, RefKind)> {
    let mut out: Vec<(String, RefKind)> = Vec::new();
    let mut push = |p: &str, kind| {
        let p = p.strip_prefix("./").unwrap_or(p);
        if !p.is_empty() && !out.iter().any(|(q, _)| q == p) {
            out.push((p.to_owned(), kind));
        }
    };
    for line in memoria_shared::note::lines_outside_fences(body) {
        let mut prose = String::with_capacity(line.len());
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 1 {
                if looks_like_path(part) {
                    push(part, RefKind::Code);
                }
            } else {
                prose.push_str(part);
                prose.push(' ');
            }
        }
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find([')', ' ']).unwrap_or(after.len());
            let target = after[..end].trim_matches(['<', '>']);
            let target = target.split(['#', '?']).next().unwrap_or("");
            if is_relative_target(target) {
                push(target, RefKind::Link);
            }
            rest = &after[end..];
        }
    }
    out
}

fn is_relative_target(t: &str) -> bool {
    !t.is_empty()
        && !t.contains(':')
        && !t.starts_with('/')
        && !t.starts_with('~')
        && !t.starts_with('\\')
}

fn looks_like_path(s: &str) -> bool {
    if !is_relative_target(s)
        || !s.contains('/')
        || s.starts_with('-')
        || !s
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
    {
        return false;
    }
    if s.ends_with('/') {
        return true;
    }
    let last = s.rsplit('/').next().unwrap_or("");
    match last.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && (1..=8).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
        }
        None => false,
    }
}

/// `rel` joined to `base` with `.` and `..` resolved by hand; `None` when it leaves `root`
/// (a path outside the project is not the project's to check).
fn inside(root: &Path, base: &Path, rel: &str) -> Option<PathBuf> {
    let mut out = base.to_path_buf();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            _ => return None,
        }
    }
    out.starts_with(root).then_some(out)
}

/// Whether a path a note in `note_dir` names exists in the project at `root`. A Markdown link
/// is tried against the note's folder, then the root; a code span against the root, then the
/// note's folder. `None`: the path leaves the project, so it is not checked.
pub fn exists_in_project(root: &Path, note_dir: &Path, path: &str, kind: RefKind) -> Option<bool> {
    let bases = match kind {
        RefKind::Link => [note_dir, root],
        RefKind::Code => [root, note_dir],
    };
    let candidates: Vec<PathBuf> = bases.iter().filter_map(|b| inside(root, b, path)).collect();
    if candidates.is_empty() {
        return None;
    }
    Some(
        candidates
            .iter()
            .any(|p| std::fs::symlink_metadata(p).is_ok()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_path_like_code_spans_are_found_and_the_rest_is_not() {
        let body = "See [the guide](docs/guide.md#setup) and `src/lib.rs`, not `cargo test`,\n\
            not [site](https://example.com), not `origin/main`, not `/etc/hosts`,\n\
            not [top](#top), but `assets/` and [up](../README.md).\n\
            ```\nnot/in/a/fence.rs\n`also/not.rs`\n```\n";
        assert_eq!(
            file_refs(body),
            [
                ("src/lib.rs".to_owned(), RefKind::Code),
                ("docs/guide.md".to_owned(), RefKind::Link),
                ("assets/".to_owned(), RefKind::Code),
                ("../README.md".to_owned(), RefKind::Link),
            ]
        );
    }

    #[test]
    fn paths_resolve_inside_the_project_only() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("MEMORY")).unwrap();
        std::fs::write(root.join("README.md"), "x").unwrap();
        let notes = root.join("MEMORY");
        assert_eq!(
            exists_in_project(root, &notes, "../README.md", RefKind::Link),
            Some(true)
        );
        assert_eq!(
            exists_in_project(root, &notes, "README.md", RefKind::Code),
            Some(true)
        );
        assert_eq!(
            exists_in_project(root, &notes, "gone.md", RefKind::Code),
            Some(false)
        );
        assert_eq!(
            exists_in_project(root, &notes, "../../outside.md", RefKind::Link),
            None
        );
    }
}
