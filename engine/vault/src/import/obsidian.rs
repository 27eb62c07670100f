//! What a folder of Markdown means beyond each file's text, read the way Obsidian reads a
//! vault: which note or attachment each link names, the tags written inline, the dates in the
//! frontmatter, the aliases a note answers to.
//!
//! Links are resolved as Obsidian resolves them (a path from the vault's root, a path relative
//! to the linking note, a partial path or a bare note name — the shortest unique path — and,
//! failing those, a note's alias; case-insensitive) and rewritten to what they name in Memoria:
//! a note's id, keeping the heading or block and showing the words the link showed; an
//! attachment's copy in the scope folder. A link that already names its note's id, and one
//! that names nothing in the folder, is left as written. Code (fenced blocks, inline spans) is
//! never read or changed.
//!
//! Everything here is pure: the caller lists the folder and writes the results.

use std::collections::HashMap;

use memoria_shared::note::is_attachment;
use memoria_shared::slugify;
use serde_json::{Map, Value};

use crate::backup::day_ms;

/// The files of a folder being imported, by the names links may use for them.
#[derive(Default)]
pub struct Names {
    /// Note files' paths (as in the folder, `/` separated, `.md` or `.markdown` kept).
    notes: Vec<String>,
    /// Lowercased path without the Markdown extension → note.
    note_by_path: HashMap<String, usize>,
    /// Lowercased file name without the extension → notes with it.
    note_by_name: HashMap<String, Vec<usize>>,
    /// Lowercased alias → notes that answer to it.
    note_by_alias: HashMap<String, Vec<usize>>,
    /// Attachments' paths (every other file of the folder).
    files: Vec<String>,
    file_by_path: HashMap<String, usize>,
    file_by_name: HashMap<String, Vec<usize>>,
}

/// What a link names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A note file, by its path in the folder.
    Note(String),
    /// An attachment, by its path in the folder.
    File(String),
}

fn strip_md(path: &str) -> &str {
    path.strip_suffix(".md")
        .or_else(|| path.strip_suffix(".markdown"))
        .or_else(|| {
            let lower = path.to_ascii_lowercase();
            if lower.ends_with(".md") {
                Some(&path[..path.len() - 3])
            } else if lower.ends_with(".markdown") {
                Some(&path[..path.len() - 9])
            } else {
                None
            }
        })
        .unwrap_or(path)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn folder_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// `a/./b/../c` → `a/c`; `None` when it climbs out of the folder.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

impl Names {
    /// Adds a note file and the aliases it answers to.
    pub fn add_note(&mut self, rel: &str, aliases: &[String]) {
        let i = self.notes.len();
        self.notes.push(rel.to_owned());
        let key = strip_md(rel).to_lowercase();
        self.note_by_path.entry(key.clone()).or_insert(i);
        self.note_by_name
            .entry(file_name(&key).to_owned())
            .or_default()
            .push(i);
        for a in aliases {
            let a = a.trim().to_lowercase();
            if !a.is_empty() {
                self.note_by_alias.entry(a).or_default().push(i);
            }
        }
    }

    /// Adds an attachment: any file that is not a note.
    pub fn add_file(&mut self, rel: &str) {
        let i = self.files.len();
        self.files.push(rel.to_owned());
        let key = rel.to_lowercase();
        self.file_by_path.entry(key.clone()).or_insert(i);
        self.file_by_name
            .entry(file_name(&key).to_owned())
            .or_default()
            .push(i);
    }

    /// Of several files a name fits, the one Obsidian picks: in the linking note's folder,
    /// else the one nearest the root, else the first by path.
    fn best(&self, paths: &[String], found: &[usize], from: &str) -> Option<usize> {
        let here = folder_of(from).to_lowercase();
        found.iter().copied().min_by_key(|&i| {
            let p = &paths[i];
            (
                folder_of(p).to_lowercase() != here,
                p.matches('/').count(),
                p.clone(),
            )
        })
    }

    fn note(&self, key: &str, from: &str, relative: bool) -> Option<usize> {
        if relative
            && let Some(p) = normalize(&format!("{}/{key}", folder_of(from)))
            && let Some(&i) = self.note_by_path.get(&p.to_lowercase())
        {
            return Some(i);
        }
        let key = normalize(key)?.to_lowercase();
        // A path names its file from the root; a bare name is looked up by name below.
        if key.contains('/')
            && let Some(&i) = self.note_by_path.get(&key)
        {
            return Some(i);
        }
        let found: Vec<usize> = self
            .note_by_name
            .get(file_name(&key))?
            .iter()
            .copied()
            .filter(|&i| {
                let p = strip_md(&self.notes[i]).to_lowercase();
                p == key || p.ends_with(&format!("/{key}"))
            })
            .collect();
        self.best(&self.notes, &found, from)
    }

    fn file(&self, key: &str, from: &str, relative: bool) -> Option<usize> {
        if relative
            && let Some(p) = normalize(&format!("{}/{key}", folder_of(from)))
            && let Some(&i) = self.file_by_path.get(&p.to_lowercase())
        {
            return Some(i);
        }
        let key = normalize(key)?.to_lowercase();
        // A path names its file from the root; a bare name is looked up by name below.
        if key.contains('/')
            && let Some(&i) = self.file_by_path.get(&key)
        {
            return Some(i);
        }
        let found: Vec<usize> = self
            .file_by_name
            .get(file_name(&key))?
            .iter()
            .copied()
            .filter(|&i| {
                let p = self.files[i].to_lowercase();
                p == key || p.ends_with(&format!("/{key}"))
            })
            .collect();
        self.best(&self.files, &found, from)
    }

    /// What `link` (a link's target, without heading or display text) names, seen from the
    /// note at `from`. `markdown`: a `[text](path)` link, whose path is relative to the linking
    /// note first, as Markdown reads it; a wikilink's is from the folder's root unless it
    /// starts with `./` or `../`.
    pub fn resolve(&self, link: &str, from: &str, markdown: bool) -> Option<Target> {
        let link = link.trim().replace('\\', "/");
        let relative = markdown || link.starts_with("./") || link.starts_with("../");
        let link = link.trim_start_matches('/');
        if link.is_empty() {
            return None;
        }
        let note = |key: &str| {
            self.note(strip_md(key), from, relative)
                .map(|i| Target::Note(self.notes[i].clone()))
        };
        let file = |key: &str| {
            self.file(key, from, relative)
                .map(|i| Target::File(self.files[i].clone()))
        };
        let lower = link.to_ascii_lowercase();
        let by_name = if lower.ends_with(".md") || lower.ends_with(".markdown") {
            note(link)
        } else if is_attachment(link) {
            file(link).or_else(|| note(link))
        } else {
            note(link).or_else(|| file(link))
        };
        by_name.or_else(|| {
            let found = self.note_by_alias.get(&link.to_lowercase())?;
            self.best(&self.notes, found, from)
                .map(|i| Target::Note(self.notes[i].clone()))
        })
    }
}

/// What a link is rewritten to.
pub enum Rewrite {
    /// A note, by its id.
    Note(String),
    /// An attachment, by its path from the note (the note lies at the scope folder's root).
    File(String),
}

/// A wikilink as found in a note: its target, heading or block (`#…`, kept as written), the
/// text it shows, and whether it is an embed.
struct Link<'a> {
    target: &'a str,
    fragment: Option<&'a str>,
    display: Option<&'a str>,
    embed: bool,
}

/// Rewrites the links of `body`: each one `resolve` maps is replaced by what it names; the
/// others are left as written. `resolve` gets the link's target and whether it is a Markdown
/// link.
pub fn rewrite_links(body: &str, mut resolve: impl FnMut(&str, bool) -> Option<Rewrite>) -> String {
    let mut out = String::with_capacity(body.len());
    for_text(body, &mut out, &mut |text, out, in_table| {
        rewrite_text(text, out, in_table, &mut resolve);
    });
    out
}

fn rewrite_text(
    text: &str,
    out: &mut String,
    in_table: bool,
    resolve: &mut impl FnMut(&str, bool) -> Option<Rewrite>,
) {
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < text.len() {
        let embed = bytes[i] == b'!';
        let at = i + usize::from(embed);
        if text[at..].starts_with("[[")
            && let Some(end) = text[at + 2..].find("]]")
        {
            let inner = &text[at + 2..at + 2 + end];
            let whole_end = at + 2 + end + 2;
            match wikilink(inner, embed).and_then(|l| {
                let r = resolve(l.target, false)?;
                written_wikilink(&l, r, in_table)
            }) {
                Some(new) => out.push_str(&new),
                None => out.push_str(&text[i..whole_end]),
            }
            i = whole_end;
            continue;
        }
        if text[at..].starts_with('[')
            && let Some((label, dest, len)) = markdown_link(&text[at..])
        {
            let whole_end = at + len;
            let new = markdown_target(dest).and_then(|(target, fragment, tail)| {
                let r = resolve(&target, true)?;
                Some(match r {
                    Rewrite::Note(id) => {
                        let fragment = fragment.map(|f| format!("#{f}")).unwrap_or_default();
                        let sep = if in_table { "\\|" } else { "|" };
                        if label.trim().is_empty() {
                            format!("{}[[{id}{fragment}]]", if embed { "!" } else { "" })
                        } else {
                            format!(
                                "{}[[{id}{fragment}{sep}{label}]]",
                                if embed { "!" } else { "" }
                            )
                        }
                    }
                    Rewrite::File(path) => format!(
                        "{}[{label}]({}{}{tail})",
                        if embed { "!" } else { "" },
                        encode_path(&path),
                        fragment.map(|f| format!("#{f}")).unwrap_or_default()
                    ),
                })
            });
            match new {
                Some(new) => out.push_str(&new),
                None => out.push_str(&text[i..whole_end]),
            }
            i = whole_end;
            continue;
        }
        let ch = text[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
}

fn wikilink(inner: &str, embed: bool) -> Option<Link<'_>> {
    let (rest, display) = match inner.find('|') {
        Some(p) => (&inner[..p], Some(&inner[p + 1..])),
        None => (inner, None),
    };
    // In a table the `|` is written `\|`.
    let rest = rest.strip_suffix('\\').unwrap_or(rest);
    let (target, fragment) = match rest.find('#') {
        Some(p) => (&rest[..p], Some(&rest[p + 1..])),
        None => (rest, None),
    };
    let target = target.trim();
    (!target.is_empty()).then_some(Link {
        target,
        fragment,
        display,
        embed,
    })
}

fn written_wikilink(l: &Link<'_>, r: Rewrite, in_table: bool) -> Option<String> {
    let bang = if l.embed { "!" } else { "" };
    let sep = if in_table { "\\|" } else { "|" };
    let fragment = l.fragment.map(|f| format!("#{f}")).unwrap_or_default();
    match r {
        Rewrite::Note(id) => {
            if slugify(l.target).as_str() == id.as_str() {
                return None; // it names its note already
            }
            let shown = match l.display {
                Some(d) => d.to_owned(),
                None => format!("{}{fragment}", l.target),
            };
            Some(format!("{bang}[[{id}{fragment}{sep}{shown}]]"))
        }
        Rewrite::File(path) => {
            if path == l.target.replace('\\', "/") {
                return None;
            }
            let shown = l.display.map(|d| format!("{sep}{d}")).unwrap_or_default();
            Some(format!("{bang}[[{path}{fragment}{shown}]]"))
        }
    }
}

/// `[label](dest)` at the start of `s`: the label, the destination and the length taken.
fn markdown_link(s: &str) -> Option<(&str, &str, usize)> {
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            '\n' => return None,
            _ => {}
        }
    }
    let close = close?;
    let rest = s[close + 1..].strip_prefix('(')?;
    let end = match rest.strip_prefix('<') {
        Some(inner) => {
            let gt = inner.find('>')?;
            1 + gt + inner[gt..].find(')')?
        }
        None => rest.find(')')?,
    };
    Some((&s[1..close], &rest[..end], close + 2 + end + 1))
}

/// A Markdown link's destination read as a path in the folder (`<a b.md>`, `a%20b.md`), its
/// `#heading`, and what follows the path (a title, as written). `None` for a URL or an anchor
/// in the note.
fn markdown_target(dest: &str) -> Option<(String, Option<String>, &str)> {
    let dest = dest.trim();
    let (path, tail) = if let Some(inner) = dest.strip_prefix('<') {
        let end = inner.find('>')?;
        (&inner[..end], &inner[end + 1..])
    } else {
        let end = dest.find(char::is_whitespace).unwrap_or(dest.len());
        (&dest[..end], &dest[end..])
    };
    let scheme = path.split_once(':').is_some_and(|(s, _)| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    });
    if path.is_empty() || path.starts_with('#') || scheme {
        return None;
    }
    let decoded = percent_decode(path)?;
    Some(match decoded.split_once('#') {
        Some((p, f)) => (p.to_owned(), Some(f.to_owned()), tail),
        None => (decoded, None, tail),
    })
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = (b[i] == b'%')
            .then(|| s.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// A path as a Markdown link destination: spaces and the characters that end one escaped.
fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            ' ' => out.push_str("%20"),
            '(' => out.push_str("%28"),
            ')' => out.push_str("%29"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '#' => out.push_str("%23"),
            c => out.push(c),
        }
    }
    out
}

/// Calls `text` for each stretch of `body` outside code (fenced blocks and inline code spans,
/// which are copied to `out` as they are), with whether the stretch is on a table row.
fn for_text(body: &str, out: &mut String, text: &mut dyn FnMut(&str, &mut String, bool)) {
    let mut fence: Option<(char, usize)> = None;
    for line in body.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let run = |c: char| trimmed.chars().take_while(|&x| x == c).count();
        if let Some((c, n)) = fence {
            out.push_str(line);
            if run(c) >= n && trimmed.trim_start_matches(c).trim().is_empty() {
                fence = None;
            }
            continue;
        }
        if let Some(c) = ['`', '~'].into_iter().find(|&c| run(c) >= 3) {
            fence = Some((c, run(c)));
            out.push_str(line);
            continue;
        }
        let in_table = trimmed.starts_with('|');
        // Inline code spans: a run of backticks up to the next run of the same length.
        let mut rest = line;
        loop {
            let Some(open) = rest.find('`') else {
                text(rest, out, in_table);
                break;
            };
            let n = rest[open..].chars().take_while(|&c| c == '`').count();
            let after = &rest[open + n..];
            let close = find_run(after, n);
            text(&rest[..open], out, in_table);
            match close {
                Some(c) => {
                    out.push_str(&rest[open..open + n + c + n]);
                    rest = &rest[open + n + c + n..];
                }
                None => {
                    out.push_str(&rest[open..open + n]);
                    rest = after;
                }
            }
        }
    }
}

/// Where a run of exactly `n` backticks starts in `s`.
fn find_run(s: &str, n: usize) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'`' {
            let len = b[i..].iter().take_while(|&&c| c == b'`').count();
            if len == n {
                return Some(i);
            }
            i += len;
        } else {
            i += 1;
        }
    }
    None
}

/// The tags written inline in `body` (`#tag`, `#nested/tag`), as Obsidian reads them: a `#`
/// at the start of a line or after a space, then letters, digits, `_`, `-` and `/`, with at
/// least one character that is not a digit. Not in code, not a heading (`# Title`), not a
/// URL's fragment or a link's heading. Each once, as first written.
pub fn inline_tags(body: &str) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    let mut sink = String::new();
    for_text(body, &mut sink, &mut |text, seen, _| {
        // What came before this stretch: code just closed counts, as any character does.
        let mut prev = seen.chars().next_back().unwrap_or('\n');
        seen.push_str(text);
        for (i, c) in text.char_indices() {
            if c == '#' && prev.is_whitespace() {
                let tag: String = text[i + 1..]
                    .chars()
                    .take_while(|&c| c.is_alphanumeric() || matches!(c, '_' | '-' | '/'))
                    .collect();
                let tag = tag.trim_end_matches('/');
                if tag.chars().any(|c| !c.is_ascii_digit() && c != '/')
                    && !tag.starts_with('/')
                    && !tags.iter().any(|t| t.to_lowercase() == tag.to_lowercase())
                {
                    tags.push(tag.to_owned());
                }
            }
            prev = c;
        }
    });
    tags
}

/// Frontmatter keys that say when a note was written, compared without case, spaces, `_` or
/// `-`; earlier ones win.
const CREATED_KEYS: &[&str] = &[
    "created",
    "createdat",
    "createdon",
    "creationdate",
    "datecreated",
    "date",
];
/// Frontmatter keys that say when a note last changed.
const UPDATED_KEYS: &[&str] = &[
    "updated",
    "updatedat",
    "updatedon",
    "modified",
    "modifiedat",
    "modifiedon",
    "lastmodified",
    "datemodified",
    "lastmod",
];

/// The creation and update times the frontmatter's own keys give (`created: 2024-01-02`,
/// `updated: 2024-03-01T10:30`, …), in milliseconds since the epoch; keys whose value is not
/// a date are left alone.
pub fn frontmatter_times(extra: &Map<String, Value>) -> (Option<i64>, Option<i64>) {
    let norm = |k: &str| -> String {
        k.chars()
            .filter(|c| !matches!(c, ' ' | '_' | '-'))
            .flat_map(char::to_lowercase)
            .collect()
    };
    let find = |keys: &[&str]| {
        keys.iter().find_map(|want| {
            extra
                .iter()
                .filter(|(k, _)| norm(k) == *want)
                .find_map(|(_, v)| v.as_str().and_then(parse_time))
        })
    };
    (find(CREATED_KEYS), find(UPDATED_KEYS))
}

/// `2024-01-02`, `2024-01-02T10:30`, `2024-01-02 10:30:15.250`, with an optional `Z` or
/// `±HH:MM` offset, in milliseconds since the epoch; a time without an offset is read as UTC.
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let num = |t: &str| -> Option<i64> {
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .then(|| t.parse().ok())
            .flatten()
    };
    let date = s.get(..10)?;
    let (y, m, d) = (
        num(date.get(..4)?)?,
        num(date.get(5..7)?)?,
        num(date.get(8..10)?)?,
    );
    if date.as_bytes()[4] != b'-'
        || date.as_bytes()[7] != b'-'
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&d)
        || !(1970..=9999).contains(&y)
    {
        return None;
    }
    let mut ms = day_ms(y, m, d);
    let rest = &s[10..];
    if rest.is_empty() {
        return Some(ms);
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (clock, offset) = match rest.find(['Z', 'z', '+', '-']) {
        Some(p) => (&rest[..p], Some(&rest[p..])),
        None => (rest, None),
    };
    let clock = clock.trim();
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut parts = hms.split(':');
    let h = num(parts.next()?)?;
    let mi = num(parts.next()?)?;
    let sec = parts.next().map_or(Some(0), num)?;
    if parts.next().is_some() || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let frac_ms = if frac.is_empty() {
        0
    } else {
        let digits: String = frac.chars().chain("000".chars()).take(3).collect();
        num(&digits)?
    };
    ms += ((h * 60 + mi) * 60 + sec) * 1000 + frac_ms;
    match offset {
        None => {}
        Some(o) if o.eq_ignore_ascii_case("z") => {}
        Some(o) => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let o = o[1..].replace(':', "");
            let (oh, om) = (
                num(o.get(..2)?)?,
                num(o.get(2..).filter(|m| !m.is_empty()).unwrap_or("00"))?,
            );
            if oh > 14 || om > 59 {
                return None;
            }
            ms -= sign * (oh * 60 + om) * 60_000;
        }
    }
    Some(ms)
}

#[cfg(test)]
mod tests;
