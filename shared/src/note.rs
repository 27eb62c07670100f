//! The note file: Markdown with a JSON frontmatter block (valid YAML, so Obsidian reads it).
//!
//! ```text
//! ---
//! {"id":"pricing-borderless-3fa","summary":"Pricing cards use fills, not borders","type":"feedback","tags":["design"],"createdAt":1789000000000,"updatedAt":1789000000000}
//! ---
//! Cards are separated by fill and whitespace. See [[pricing-layout-a91]].
//! ```
//!
//! Reading is lenient (YAML frontmatter, no frontmatter, unknown keys, foreign `type` values,
//! values of a known key that Memoria cannot read); writing is strict and always produces the
//! JSON form above. Unknown keys and unreadable values survive a rewrite unchanged.
//!
//! A file is only a parse error when its metadata block cannot be read at all (bad syntax, no
//! closing line, YAML that uses anchors or exceeds the size limits) or its `id` is not a valid
//! id: the id is the note's identity, and guessing one could merge two notes into one.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::id::{IdError, NoteId, slugify};

/// Longest summary derived from a body's first line, in characters.
pub const DERIVED_SUMMARY_CHARS: usize = 280;

/// Frontmatter keys this crate understands; everything else is kept in [`Note::extra`].
const KNOWN_KEYS: &[&str] = &[
    "id",
    "summary",
    "type",
    "tags",
    "createdAt",
    "updatedAt",
    "trust",
    "origin",
    "importance",
    "source",
    "status",
    "relations",
    "project",
    "projectType",
];

/// What kind of memory a note holds. Foreign values (from an Obsidian vault, say) are kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NoteType {
    User,
    Feedback,
    Project,
    Reference,
    Domain,
    /// A value Memoria does not assign meaning to; preserved as written.
    Other(String),
}

impl NoteType {
    /// The five types Memoria gives meaning to.
    pub const KNOWN: [NoteType; 5] = [
        NoteType::User,
        NoteType::Feedback,
        NoteType::Project,
        NoteType::Reference,
        NoteType::Domain,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            NoteType::User => "user",
            NoteType::Feedback => "feedback",
            NoteType::Project => "project",
            NoteType::Reference => "reference",
            NoteType::Domain => "domain",
            NoteType::Other(s) => s,
        }
    }

    /// Reads any string; the five known names map to their variants.
    pub fn from_name(s: &str) -> Self {
        NoteType::KNOWN
            .into_iter()
            .find(|t| t.as_str() == s)
            .unwrap_or_else(|| NoteType::Other(s.to_owned()))
    }

    /// Reads one of the five known names, or says which ones exist.
    pub fn parse_known(s: &str) -> Result<Self, String> {
        match Self::from_name(s) {
            NoteType::Other(_) => Err(format!(
                "unknown note type {s:?}: use one of user, feedback, project, reference, domain"
            )),
            t => Ok(t),
        }
    }

    /// The type implied by a note's folder (`feedback/x.md` → feedback), for files without
    /// frontmatter. Plural folder names count too (`references/`).
    pub fn from_folder(relative_path: &str) -> Option<Self> {
        let parts: Vec<&str> = relative_path.split(['/', '\\']).collect();
        let folders = &parts[..parts.len().saturating_sub(1)];
        folders.iter().rev().find_map(|f| {
            let f = f.to_ascii_lowercase();
            let f = f.strip_suffix('s').unwrap_or(&f);
            match Self::from_name(f) {
                NoteType::Other(_) => None,
                t => Some(t),
            }
        })
    }
}

impl fmt::Display for NoteType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for NoteType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for NoteType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(NoteType::from_name(&String::deserialize(d)?))
    }
}

/// How far a note is trusted. Trust can only be lowered, never raised, by later writers.
/// Ordered lowest first, as recall weighs them: a quarantined note is never recalled, a peer's
/// words rank below ingested text, and both below what an agent derived and the owner's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    Quarantined,
    Peer,
    Ingested,
    Derived,
    Owner,
}

/// Who vouches for a note's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    UserConfirmed,
    AgentInferred,
}

/// A note's life-cycle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Working,
    Consolidated,
    Archived,
}

/// The kind of a typed link between notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RelationKind {
    Achieves,
    Closes,
    Supersedes,
    Relates,
}

/// A typed link to another note.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Relation {
    pub target: String,
    pub kind: RelationKind,
}

/// One note, as held in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub id: NoteId,
    pub summary: String,
    pub note_type: Option<NoteType>,
    pub tags: Vec<String>,
    /// Milliseconds since the epoch.
    pub created_at: Option<i64>,
    pub updated_at: Option<i64>,
    pub trust: Option<Trust>,
    pub origin: Option<Value>,
    /// 0..=1.
    pub importance: Option<f64>,
    pub source: Option<Source>,
    pub status: Option<Status>,
    pub relations: Vec<Relation>,
    pub project: Option<String>,
    pub project_type: Option<String>,
    /// Frontmatter keys Memoria does not know, in file order, and values of known keys it could
    /// not read (`status: draft`), under their own key; all written back unchanged. A kept value
    /// is written in its key's place while the typed field still holds what was read from it.
    pub extra: Map<String, Value>,
    /// Everything after the frontmatter, byte for byte.
    pub body: String,
}

/// Why a file could not be read as a note. The file itself is never rewritten while broken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// The opening `---` has no closing `---` line.
    #[error(
        "frontmatter starts with `---` but has no closing `---` line: add one after the metadata"
    )]
    Unclosed,
    /// The JSON between the `---` lines is not valid.
    #[error("frontmatter is not valid JSON ({0}): fix the metadata block at the top of the file")]
    Json(String),
    /// The YAML between the `---` lines is not valid or not a mapping.
    #[error("frontmatter is not valid YAML ({0}): fix the metadata block at the top of the file")]
    Yaml(String),
    /// The YAML uses anchors or aliases, or holds more nodes or nesting than a note's metadata
    /// needs. Aliases are refused because expanding them lets a few hundred bytes stand for
    /// billions of values.
    #[error(
        "frontmatter YAML is refused ({0}): write the metadata without anchors (&) or aliases (*)"
    )]
    YamlLimit(String),
    /// A known key holds a value of the wrong shape.
    #[error("frontmatter field `{field}` is invalid ({reason})")]
    Field { field: &'static str, reason: String },
    /// The frontmatter `id` is not a valid id.
    #[error("frontmatter field `id`: {0}")]
    Id(IdError),
}

/// What the file system says about a note file, for files that carry no id of their own.
#[derive(Debug, Clone, Copy)]
pub struct FileContext<'a> {
    /// Path relative to the scope folder, with `/` separators (`feedback/cards.md`).
    pub relative_path: &'a str,
}

impl FileContext<'_> {
    fn stem(&self) -> &str {
        let name = self
            .relative_path
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or(self.relative_path);
        name.strip_suffix(".md")
            .or_else(|| name.strip_suffix(".markdown"))
            .unwrap_or(name)
    }

    /// The id a file without an `id` field gets: its file name, made valid.
    pub fn derived_id(&self) -> NoteId {
        slugify(self.stem())
    }
}

impl Note {
    /// A new note with just the required parts.
    pub fn new(id: NoteId, summary: impl Into<String>, body: impl Into<String>) -> Self {
        Note {
            id,
            summary: summary.into(),
            note_type: None,
            tags: Vec::new(),
            created_at: None,
            updated_at: None,
            trust: None,
            origin: None,
            importance: None,
            source: None,
            status: None,
            relations: Vec::new(),
            project: None,
            project_type: None,
            extra: Map::new(),
            body: body.into(),
        }
    }

    /// The content hash sync compares.
    pub fn content_hash(&self) -> crate::ContentHash {
        crate::ContentHash::of_note(self)
    }

    /// `[[links]]` in the body, as written (before `|` or `#`), in order, without repeats.
    pub fn links(&self) -> Vec<String> {
        links_in(&self.body)
    }

    /// The other names the note answers to, as Obsidian writes them in the frontmatter:
    /// `aliases` (a list, or one name) and `alias`. Links and search use them.
    pub fn aliases(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for key in ["aliases", "alias"] {
            match self.extra.get(key) {
                Some(Value::String(s)) => out.push(s.trim().to_owned()),
                Some(Value::Array(a)) => out.extend(a.iter().filter_map(|v| match v {
                    Value::String(s) => Some(s.trim().to_owned()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })),
                _ => {}
            }
        }
        out.retain(|a| !a.is_empty());
        out.dedup();
        out
    }

    /// Reads a note file. `ctx` supplies the id and type for files that do not carry them.
    pub fn parse(text: &str, ctx: FileContext<'_>) -> Result<Note, ParseError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        match split_frontmatter(text)? {
            None => {
                let mut note = Note::new(ctx.derived_id(), derive_summary(text, ctx), text);
                note.note_type = NoteType::from_folder(ctx.relative_path);
                Ok(note)
            }
            Some((front, body)) => {
                let map = if front.trim_start().starts_with('{') {
                    match serde_json::from_str::<Value>(front) {
                        Ok(Value::Object(m)) => m,
                        Ok(_) => return Err(ParseError::Json("not an object".into())),
                        Err(e) => return Err(ParseError::Json(e.to_string())),
                    }
                } else {
                    yaml_to_map(front)?
                };
                from_map(map, body, ctx)
            }
        }
    }

    /// Writes the note in its canonical file form: `---\n{json}\n---\n{body}`.
    pub fn serialize(&self) -> String {
        // A value kept from the file goes back in its key's place while the typed field still
        // holds what was read from it; once a writer sets the field, the field wins.
        let kept = |key: &str, unchanged: &dyn Fn(&Value) -> bool| {
            self.extra.get(key).filter(|raw| unchanged(raw)).cloned()
        };
        let mut m = Map::new();
        m.insert("id".into(), Value::String(self.id.to_string()));
        let summary = kept("summary", &|raw| read_summary(raw).0 == self.summary)
            .unwrap_or_else(|| Value::String(self.summary.clone()));
        m.insert("summary".into(), summary);
        let note_type = kept("type", &|raw| read_type(raw).0 == self.note_type).or_else(|| {
            self.note_type
                .as_ref()
                .map(|t| Value::String(t.as_str().to_owned()))
        });
        if let Some(t) = note_type {
            m.insert("type".into(), t);
        }
        let tags = kept("tags", &|raw| read_tags(raw).0 == self.tags)
            .unwrap_or_else(|| Value::from(self.tags.clone()));
        m.insert("tags".into(), tags);
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.to_owned(), v);
            }
        };
        put(
            "createdAt",
            kept("createdAt", &|raw| read_time(raw).0 == self.created_at)
                .or_else(|| self.created_at.map(Value::from)),
        );
        put(
            "updatedAt",
            kept("updatedAt", &|raw| read_time(raw).0 == self.updated_at)
                .or_else(|| self.updated_at.map(Value::from)),
        );
        put(
            "trust",
            kept("trust", &|raw| read_trust(raw).0 == self.trust)
                .or_else(|| self.trust.map(to_value)),
        );
        put("origin", self.origin.clone());
        put(
            "importance",
            kept("importance", &|raw| {
                read_importance(raw).0 == self.importance
            })
            .or_else(|| self.importance.map(Value::from)),
        );
        put(
            "source",
            kept("source", &|raw| read_enum(raw).0 == self.source)
                .or_else(|| self.source.map(to_value)),
        );
        put(
            "status",
            kept("status", &|raw| read_enum(raw).0 == self.status)
                .or_else(|| self.status.map(to_value)),
        );
        put(
            "relations",
            kept("relations", &|raw| read_relations(raw).0 == self.relations)
                .or_else(|| (!self.relations.is_empty()).then(|| to_value(&self.relations))),
        );
        put(
            "project",
            kept("project", &|raw| read_string(raw).0 == self.project)
                .or_else(|| self.project.clone().map(Value::String)),
        );
        put(
            "projectType",
            kept("projectType", &|raw| {
                read_string(raw).0 == self.project_type
            })
            .or_else(|| self.project_type.clone().map(Value::String)),
        );
        for (k, v) in &self.extra {
            if !KNOWN_KEYS.contains(&k.as_str()) {
                m.insert(k.clone(), v.clone());
            }
        }
        let json = serde_json::to_string(&Value::Object(m)).unwrap_or_default();
        format!("---\n{json}\n---\n{}", self.body)
    }
}

fn to_value<T: Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Splits `---\n<front>\n---\n<body>`; `Ok(None)` when the file has no frontmatter.
fn split_frontmatter(text: &str) -> Result<Option<(&str, &str)>, ParseError> {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok(None);
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare == "---" || bare == "..." {
            let front = &rest[..offset];
            let body = &rest[offset + line.len()..];
            return Ok(Some((front, body)));
        }
        offset += line.len();
    }
    Err(ParseError::Unclosed)
}

fn derive_summary(body: &str, ctx: FileContext<'_>) -> String {
    let line = body
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty() && *l != "---" && !l.starts_with("```"));
    let line = line.unwrap_or_else(|| ctx.stem());
    line.chars().take(DERIVED_SUMMARY_CHARS).collect()
}

/// How a known key's value was read: the typed value, and whether it is exact (the typed value
/// writes back the same JSON). An inexact read stays in [`Note::extra`] so nothing is lost.
type Read<T> = (T, bool);

fn read_string(v: &Value) -> Read<Option<String>> {
    match v {
        Value::String(s) => (Some(s.clone()), true),
        _ => (None, false),
    }
}

/// A summary that is not text reads as its JSON text (`42` → `"42"`).
fn read_summary(v: &Value) -> Read<String> {
    match v {
        Value::String(s) => (s.clone(), true),
        other => (serde_json::to_string(other).unwrap_or_default(), false),
    }
}

fn read_type(v: &Value) -> Read<Option<NoteType>> {
    match v {
        Value::String(s) => (Some(NoteType::from_name(s)), true),
        _ => (None, false),
    }
}

/// Tags as a list of strings, or YAML's `tags: a, b`. Any other shape reads every string and
/// number found in it, so a `contains-secrets` tag is honoured however it is written.
fn read_tags(v: &Value) -> Read<Vec<String>> {
    fn collect(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Number(n) => out.push(n.to_string()),
            Value::Bool(b) => out.push(b.to_string()),
            Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
            Value::Object(o) => o.iter().for_each(|(k, x)| {
                out.push(k.clone());
                collect(x, out);
            }),
            Value::Null => {}
        }
    }
    match v {
        // YAML often writes `tags: a, b` or `tags: a`.
        Value::String(s) => (
            s.split([',', ' '])
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(String::from)
                .collect(),
            true,
        ),
        Value::Array(a) if a.iter().all(Value::is_string) => (
            a.iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect(),
            true,
        ),
        other => {
            let mut out = Vec::new();
            collect(other, &mut out);
            out.retain(|t| !t.trim().is_empty());
            (out, false)
        }
    }
}

fn read_time(v: &Value) -> Read<Option<i64>> {
    match v.as_i64() {
        Some(t) => (Some(t), true),
        None => (None, false),
    }
}

/// A trust value Memoria does not know reads as quarantined: it may come from a newer version or
/// another tool and mean anything, including less trust than any value known here, so it must
/// never rank above the lowest known trust nor reach an agent until someone sets a known value.
fn read_trust(v: &Value) -> Read<Option<Trust>> {
    match serde_json::from_value(v.clone()) {
        Ok(t) => (Some(t), true),
        Err(_) => (Some(Trust::Quarantined), false),
    }
}

fn read_importance(v: &Value) -> Read<Option<f64>> {
    match v.as_f64() {
        Some(i) if (0.0..=1.0).contains(&i) => (Some(i), true),
        _ => (None, false),
    }
}

fn read_enum<T: serde::de::DeserializeOwned>(v: &Value) -> Read<Option<T>> {
    match serde_json::from_value(v.clone()) {
        Ok(t) => (Some(t), true),
        Err(_) => (None, false),
    }
}

/// Relations that can be read are kept as typed relations; the rest stay as written.
fn read_relations(v: &Value) -> Read<Vec<Relation>> {
    match v {
        Value::Array(a) => {
            let good: Vec<Relation> = a
                .iter()
                .filter_map(|r| serde_json::from_value(r.clone()).ok())
                .collect();
            let exact = good.len() == a.len();
            (good, exact)
        }
        _ => (Vec::new(), false),
    }
}

fn from_map(
    mut m: Map<String, Value>,
    body: &str,
    ctx: FileContext<'_>,
) -> Result<Note, ParseError> {
    /// Reads a known key. An exact read removes it from the map; an inexact one leaves the value
    /// in place, where it becomes part of `extra` and is written back as it was.
    fn take<T>(m: &mut Map<String, Value>, key: &str, read: fn(&Value) -> Read<T>) -> Option<T> {
        match m.get(key) {
            None => None,
            Some(Value::Null) => {
                m.shift_remove(key);
                None
            }
            Some(v) => {
                let (t, exact) = read(v);
                if exact {
                    m.shift_remove(key);
                }
                Some(t)
            }
        }
    }
    let id = match m.shift_remove("id") {
        None | Some(Value::Null) => ctx.derived_id(),
        Some(Value::String(s)) => NoteId::new(&s).map_err(ParseError::Id)?,
        Some(other) => {
            return Err(ParseError::Field {
                field: "id",
                reason: format!("{other} is not text"),
            });
        }
    };
    let summary =
        take(&mut m, "summary", read_summary).unwrap_or_else(|| derive_summary(body, ctx));
    let note_type = match take(&mut m, "type", read_type) {
        Some(t) => t,
        None => NoteType::from_folder(ctx.relative_path),
    };
    let tags = take(&mut m, "tags", read_tags).unwrap_or_default();
    let created_at = take(&mut m, "createdAt", read_time).flatten();
    let updated_at = take(&mut m, "updatedAt", read_time).flatten();
    let trust = take(&mut m, "trust", read_trust).flatten();
    let origin = m.shift_remove("origin").filter(|v| !v.is_null());
    let importance = take(&mut m, "importance", read_importance).flatten();
    let source = take(&mut m, "source", read_enum).flatten();
    let status = take(&mut m, "status", read_enum).flatten();
    let relations = take(&mut m, "relations", read_relations).unwrap_or_default();
    let project = take(&mut m, "project", read_string).flatten();
    let project_type = take(&mut m, "projectType", read_string).flatten();
    Ok(Note {
        id,
        summary,
        note_type,
        tags,
        created_at,
        updated_at,
        trust,
        origin,
        importance,
        source,
        status,
        relations,
        project,
        project_type,
        extra: m,
        body: body.to_owned(),
    })
}

/// Most YAML nodes (scalars, lists, mappings) a frontmatter may hold.
pub const YAML_MAX_NODES: usize = 10_000;
/// Deepest nesting of lists and mappings a YAML frontmatter may have.
pub const YAML_MAX_DEPTH: usize = 32;

/// Reads YAML frontmatter from the parser's events, so nothing is ever expanded: anchors and
/// aliases are refused, and the node count and depth are capped while reading.
fn yaml_to_map(front: &str) -> Result<Map<String, Value>, ParseError> {
    use yaml_rust2::Yaml;
    use yaml_rust2::parser::{Event, Parser};
    use yaml_rust2::scanner::TScalarStyle;

    enum Key {
        Waiting,
        Named(String),
        /// A list or mapping used as a key: the entry is left out.
        Skip,
    }
    enum Frame {
        List(Vec<Value>),
        Mapping(Map<String, Value>, Key),
    }
    fn scalar(v: String, style: TScalarStyle, tag: Option<yaml_rust2::parser::Tag>) -> Value {
        let typed = match &tag {
            None => true,
            Some(t) => {
                t.handle == "tag:yaml.org,2002:"
                    && matches!(t.suffix.as_str(), "bool" | "int" | "float" | "null")
            }
        };
        let y = if style == TScalarStyle::Plain && typed {
            Yaml::from_str(&v)
        } else {
            Yaml::String(v)
        };
        match y {
            Yaml::Real(s) => s
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number)
                .unwrap_or(Value::String(s)),
            Yaml::Integer(i) => Value::from(i),
            Yaml::String(s) => Value::String(s),
            Yaml::Boolean(b) => Value::Bool(b),
            _ => Value::Null,
        }
    }
    let limit = |what: String| Err(ParseError::YamlLimit(what));

    if front.trim().is_empty() {
        return Ok(Map::new());
    }
    let mut parser = Parser::new_from_str(front);
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Value> = None;
    let mut nodes = 0usize;
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| ParseError::Yaml(e.to_string()))?;
        let anchor = match &event {
            Event::Scalar(_, _, a, _) | Event::SequenceStart(a, _) | Event::MappingStart(a, _) => {
                *a
            }
            _ => 0,
        };
        if anchor != 0 {
            return limit(format!("an anchor on line {}", mark.line()));
        }
        let value = match event {
            Event::StreamEnd | Event::DocumentEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart => continue,
            Event::Alias(_) => return limit(format!("an alias on line {}", mark.line())),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                nodes += 1;
                if stack.len() >= YAML_MAX_DEPTH {
                    return limit(format!("nesting deeper than {YAML_MAX_DEPTH} levels"));
                }
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::List(Vec::new())
                } else {
                    Frame::Mapping(Map::new(), Key::Waiting)
                });
                if nodes > YAML_MAX_NODES {
                    return limit(format!("more than {YAML_MAX_NODES} values"));
                }
                continue;
            }
            Event::Scalar(v, style, _, tag) => {
                nodes += 1;
                if nodes > YAML_MAX_NODES {
                    return limit(format!("more than {YAML_MAX_NODES} values"));
                }
                if let Some(Frame::Mapping(_, key @ Key::Waiting)) = stack.last_mut() {
                    // Keys are kept as written (`1.50:` stays `1.50`).
                    *key = Key::Named(v);
                    continue;
                }
                scalar(v, style, tag)
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Frame::List(a)) => Value::Array(a),
                Some(Frame::Mapping(m, _)) => Value::Object(m),
                None => return Err(ParseError::Yaml("unbalanced YAML".into())),
            },
        };
        match stack.last_mut() {
            None => root = Some(value),
            Some(Frame::List(a)) => a.push(value),
            Some(Frame::Mapping(m, key)) => match std::mem::replace(key, Key::Waiting) {
                Key::Waiting => *key = Key::Skip,
                Key::Named(k) => {
                    m.insert(k, value);
                }
                Key::Skip => {}
            },
        }
    }
    match root {
        Some(Value::Object(m)) => Ok(m),
        None | Some(Value::Null) => Ok(Map::new()),
        Some(_) => Err(ParseError::Yaml(
            "the frontmatter is not a key: value mapping".into(),
        )),
    }
}

/// The lines of `body` outside fenced code blocks (the fence lines themselves left out). A
/// fence is three or more backticks or tildes; it closes at a line of at least as many of the
/// same character and nothing else.
pub fn lines_outside_fences(body: &str) -> impl Iterator<Item = &str> {
    let mut fence: Option<(char, usize)> = None;
    body.lines().filter(move |line| {
        let trimmed = line.trim_start();
        let run = |c: char| trimmed.chars().take_while(|&x| x == c).count();
        match fence {
            Some((c, n)) => {
                if run(c) >= n && trimmed.trim_start_matches(c).trim().is_empty() {
                    fence = None;
                }
                false
            }
            None => match ['`', '~'].into_iter().find(|&c| run(c) >= 3) {
                Some(c) => {
                    fence = Some((c, run(c)));
                    false
                }
                None => true,
            },
        }
    })
}

/// File extensions of attachments: what Obsidian embeds or opens rather than reads as a note.
/// A `[[diagram.png]]` or `![[doc.pdf]]` names a file, not a note, so it is no note link.
pub const ATTACHMENT_EXTENSIONS: &[&str] = &[
    "png",
    "jpg",
    "jpeg",
    "gif",
    "bmp",
    "svg",
    "webp",
    "avif",
    "heic",
    "tif",
    "tiff",
    "ico",
    "pdf",
    "mp3",
    "wav",
    "m4a",
    "ogg",
    "oga",
    "flac",
    "3gp",
    "aac",
    "opus",
    "mp4",
    "mov",
    "mkv",
    "webm",
    "ogv",
    "avi",
    "canvas",
    "base",
    "excalidraw",
    "csv",
    "zip",
    "txt",
    "json",
    "html",
    "docx",
    "xlsx",
    "pptx",
    "odt",
    "epub",
];

/// Whether a link target names an attachment (its last path part ends in one of
/// [`ATTACHMENT_EXTENSIONS`], in any case) rather than a note.
pub fn is_attachment(target: &str) -> bool {
    let name = target.rsplit(['/', '\\']).next().unwrap_or(target).trim();
    name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && ATTACHMENT_EXTENSIONS
                .iter()
                .any(|e| e.eq_ignore_ascii_case(ext))
    })
}

/// `[[target]]`, `[[target|alias]]` and `[[target#heading]]` links outside code, as written.
/// An embed of a note (`![[target]]`) is a link too; a link or embed naming an attachment
/// ([`is_attachment`]) is not.
pub fn links_in(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in lines_outside_fences(body) {
        // Drop inline code spans before looking for links.
        let mut plain = String::with_capacity(line.len());
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(start) = rest.find("[[") {
            let after = &rest[start + 2..];
            let Some(end) = after.find("]]") else { break };
            let inner = &after[..end];
            let target = inner.split(['|', '#']).next().unwrap_or("").trim();
            if !target.is_empty() && !is_attachment(target) && !out.iter().any(|t| t == target) {
                out.push(target.to_owned());
            }
            rest = &after[end + 2..];
        }
    }
    out
}

#[cfg(test)]
mod tests;
