//! The note file: Markdown with a JSON frontmatter block (valid YAML, so Obsidian reads it).
//!
//! ```text
//! ---
//! {"id":"pricing-borderless-3fa","summary":"Pricing cards use fills, not borders","type":"feedback","tags":["design"],"createdAt":1789000000000,"updatedAt":1789000000000}
//! ---
//! Cards are separated by fill and whitespace. See [[pricing-layout-a91]].
//! ```
//!
//! Reading is lenient (YAML frontmatter, no frontmatter, unknown keys, foreign `type` values);
//! writing is strict and always produces the JSON form above. Unknown keys survive a rewrite.

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    Quarantined,
    Ingested,
    Peer,
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
    /// Frontmatter keys Memoria does not know, in file order; written back unchanged.
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
        let mut m = Map::new();
        m.insert("id".into(), Value::String(self.id.to_string()));
        m.insert("summary".into(), Value::String(self.summary.clone()));
        if let Some(t) = &self.note_type {
            m.insert("type".into(), Value::String(t.as_str().to_owned()));
        }
        m.insert("tags".into(), Value::from(self.tags.clone()));
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.to_owned(), v);
            }
        };
        put("createdAt", self.created_at.map(Value::from));
        put("updatedAt", self.updated_at.map(Value::from));
        put("trust", self.trust.map(to_value));
        put("origin", self.origin.clone());
        put("importance", self.importance.map(Value::from));
        put("source", self.source.map(to_value));
        put("status", self.status.map(to_value));
        put(
            "relations",
            (!self.relations.is_empty()).then(|| to_value(&self.relations)),
        );
        put("project", self.project.clone().map(Value::String));
        put("projectType", self.project_type.clone().map(Value::String));
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

fn from_map(
    mut m: Map<String, Value>,
    body: &str,
    ctx: FileContext<'_>,
) -> Result<Note, ParseError> {
    fn field<T: serde::de::DeserializeOwned>(
        m: &mut Map<String, Value>,
        key: &'static str,
    ) -> Result<Option<T>, ParseError> {
        match m.shift_remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => serde_json::from_value(v)
                .map(Some)
                .map_err(|e| ParseError::Field {
                    field: key,
                    reason: e.to_string(),
                }),
        }
    }
    let id = match field::<String>(&mut m, "id")? {
        Some(s) => NoteId::new(&s).map_err(ParseError::Id)?,
        None => ctx.derived_id(),
    };
    let summary = field::<String>(&mut m, "summary")?.unwrap_or_else(|| derive_summary(body, ctx));
    let note_type =
        field::<NoteType>(&mut m, "type")?.or_else(|| NoteType::from_folder(ctx.relative_path));
    let tags = match m.shift_remove("tags") {
        None | Some(Value::Null) => Vec::new(),
        // YAML often writes `tags: a, b` or `tags: a`.
        Some(Value::String(s)) => s
            .split([',', ' '])
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(String::from)
            .collect(),
        Some(v) => serde_json::from_value(v).map_err(|e| ParseError::Field {
            field: "tags",
            reason: e.to_string(),
        })?,
    };
    let importance: Option<f64> = field(&mut m, "importance")?;
    if let Some(i) = importance
        && !(0.0..=1.0).contains(&i)
    {
        return Err(ParseError::Field {
            field: "importance",
            reason: format!("{i} is outside 0..1"),
        });
    }
    Ok(Note {
        id,
        summary,
        note_type,
        tags,
        created_at: field(&mut m, "createdAt")?,
        updated_at: field(&mut m, "updatedAt")?,
        trust: field(&mut m, "trust")?,
        origin: m.shift_remove("origin").filter(|v| !v.is_null()),
        importance,
        source: field(&mut m, "source")?,
        status: field(&mut m, "status")?,
        relations: field(&mut m, "relations")?.unwrap_or_default(),
        project: field(&mut m, "project")?,
        project_type: field(&mut m, "projectType")?,
        extra: m,
        body: body.to_owned(),
    })
}

fn yaml_to_map(front: &str) -> Result<Map<String, Value>, ParseError> {
    use yaml_rust2::{Yaml, YamlLoader};
    fn conv(y: &Yaml) -> Value {
        match y {
            Yaml::Real(s) => s
                .parse::<f64>()
                .map(Value::from)
                .unwrap_or_else(|_| Value::String(s.clone())),
            Yaml::Integer(i) => Value::from(*i),
            Yaml::String(s) => Value::String(s.clone()),
            Yaml::Boolean(b) => Value::Bool(*b),
            Yaml::Array(a) => Value::Array(a.iter().map(conv).collect()),
            Yaml::Hash(h) => {
                let mut m = Map::new();
                for (k, v) in h {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        Yaml::Integer(i) => i.to_string(),
                        Yaml::Real(s) => s.clone(),
                        Yaml::Boolean(b) => b.to_string(),
                        _ => continue,
                    };
                    m.insert(key, conv(v));
                }
                Value::Object(m)
            }
            Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => Value::Null,
        }
    }
    if front.trim().is_empty() {
        return Ok(Map::new());
    }
    let docs = YamlLoader::load_from_str(front).map_err(|e| ParseError::Yaml(e.to_string()))?;
    match docs.first().map(conv) {
        Some(Value::Object(m)) => Ok(m),
        None | Some(Value::Null) => Ok(Map::new()),
        Some(_) => Err(ParseError::Yaml(
            "the frontmatter is not a key: value mapping".into(),
        )),
    }
}

/// `[[target]]`, `[[target|alias]]` and `[[target#heading]]` links outside code, as written.
pub fn links_in(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_fence = false;
    for line in body.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
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
            if !target.is_empty() && !out.iter().any(|t| t == target) {
                out.push(target.to_owned());
            }
            rest = &after[end + 2..];
        }
    }
    out
}

#[cfg(test)]
mod tests;
