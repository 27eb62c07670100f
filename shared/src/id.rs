//! Note ids: the one name a note has in files, links, the index and the sync protocol.

use std::fmt;

/// Longest id accepted, in bytes (ids are ASCII).
pub const MAX_ID_LEN: usize = 128;

/// Why a string is not a valid note id. Each message says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id is empty.
    #[error("note id is empty: give a name like `pricing-layout`")]
    Empty,
    /// The id is longer than [`MAX_ID_LEN`].
    #[error("note id is {0} characters long; the limit is 128: use a shorter id")]
    TooLong(usize),
    /// The id has a character outside `[a-z0-9._-]` or does not start with `[a-z0-9]`.
    #[error(
        "note id {0:?} is invalid: use lowercase letters, digits, `.`, `_` and `-`, starting with a letter or digit"
    )]
    BadChars(String),
    /// The id contains `..`, which could climb out of the vault.
    #[error("note id {0:?} contains `..`: ids cannot point outside the vault")]
    Traversal(String),
    /// The id is a device name on Windows.
    #[error("note id {0:?} is a reserved file name on Windows: pick another id")]
    Reserved(String),
}

/// A validated note id: lowercase `[a-z0-9][a-z0-9._-]*`, at most 128 bytes, no `..`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NoteId(String);

impl NoteId {
    /// Validates `s` as a note id.
    pub fn new(s: &str) -> Result<Self, IdError> {
        validate(s)?;
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The file name of this note inside its scope folder.
    pub fn file_name(&self) -> String {
        format!("{}.md", self.0)
    }
}

impl fmt::Display for NoteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for NoteId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for NoteId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl serde::Serialize for NoteId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for NoteId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        NoteId::new(&s).map_err(serde::de::Error::custom)
    }
}

const RESERVED: &[&str] = &[
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

fn validate(s: &str) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty);
    }
    if s.len() > MAX_ID_LEN {
        return Err(IdError::TooLong(s.chars().count()));
    }
    let mut chars = s.chars();
    let first = chars.next().unwrap_or('-');
    let ok_first = first.is_ascii_lowercase() || first.is_ascii_digit();
    let ok_rest = s
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if !ok_first || !ok_rest {
        return Err(IdError::BadChars(s.to_owned()));
    }
    if s.contains("..") {
        return Err(IdError::Traversal(s.to_owned()));
    }
    let stem = s.split('.').next().unwrap_or(s);
    if RESERVED.contains(&stem) {
        return Err(IdError::Reserved(s.to_owned()));
    }
    Ok(())
}

/// Turns any name (a file name, an Obsidian link, a title) into a valid id, deterministically.
///
/// Lowercases ASCII, maps every other character to `-`, collapses runs of `-`, trims, and
/// falls back to `note-<hash>` when nothing usable is left (a name written only in CJK, say).
pub fn slugify(name: &str) -> NoteId {
    let mut out = String::with_capacity(name.len());
    for c in name.trim().chars() {
        let c = c.to_ascii_lowercase();
        let keep = c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-');
        let c = if keep { c } else { '-' };
        if (c == '-' && out.ends_with('-')) || (c == '.' && out.ends_with('.')) {
            continue;
        }
        out.push(c);
    }
    let trimmed: &str = out.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let mut id: String = trimmed.chars().take(MAX_ID_LEN).collect();
    while id.ends_with(['-', '.', '_']) {
        id.pop();
    }
    let meaningful = id.chars().filter(|c| c.is_ascii_alphanumeric()).count();
    // Names that lose most of their letters (CJK, emoji) would collide: add a short hash.
    let lossy = name.chars().filter(|c| !c.is_ascii()).count() > meaningful;
    if id.is_empty() || lossy || validate(&id).is_err() {
        let digest = crate::hash::sha256_hex(name.as_bytes());
        let prefix: String = id.chars().take(MAX_ID_LEN - 10).collect();
        let prefix = prefix.trim_end_matches(['-', '.', '_']);
        id = if prefix.is_empty() || validate(prefix).is_err() {
            format!("note-{}", &digest[..8])
        } else {
            format!("{prefix}-{}", &digest[..8])
        };
    }
    NoteId(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_ids() {
        for ok in [
            "a",
            "pricing-borderless-3fa",
            "2024-01-01",
            "a.b_c-d",
            &"x".repeat(128),
        ] {
            assert!(NoteId::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_invalid_ids() {
        assert_eq!(NoteId::new(""), Err(IdError::Empty));
        assert!(matches!(
            NoteId::new(&"x".repeat(129)),
            Err(IdError::TooLong(129))
        ));
        for bad in ["Foo", "-a", ".a", "a/b", "a\\b", "a b", "é", "_a"] {
            assert!(
                matches!(NoteId::new(bad), Err(IdError::BadChars(_))),
                "{bad}"
            );
        }
        assert!(matches!(NoteId::new("a..b"), Err(IdError::Traversal(_))));
        assert!(matches!(NoteId::new("con"), Err(IdError::Reserved(_))));
        assert!(matches!(NoteId::new("nul.txt"), Err(IdError::Reserved(_))));
    }

    #[test]
    fn slugify_makes_valid_ids() {
        assert_eq!(slugify("My Note").as_str(), "my-note");
        assert_eq!(
            slugify("  Pricing: Cards / Fills!  ").as_str(),
            "pricing-cards-fills"
        );
        assert_eq!(slugify("../../etc/passwd").as_str(), "etc-passwd");
        assert_eq!(slugify("2024-05-01").as_str(), "2024-05-01");
        let cjk = slugify("定价卡片");
        assert!(cjk.as_str().starts_with("note-"), "{cjk}");
        assert_ne!(slugify("定价卡片"), slugify("定价表格"));
        assert!(NoteId::new(slugify(&"ab ".repeat(100)).as_str()).is_ok());
        assert!(NoteId::new(slugify("CON").as_str()).is_ok());
    }
}
