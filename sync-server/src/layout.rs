//! Where things live in the object store. Every key the server touches is built here, from
//! validated ids only, so no request can name a key outside its own account.
//!
//! ```text
//! users/<user-id>/memory/                         user scope
//! users/<user-id>/projects/<project-id>/memory/   project scope
//!   manifest.json                                 replaced with ETag compare-and-swap
//!   manifest.prev.json                            the last good manifest, read when
//!                                                 manifest.json is damaged
//!   objects/<note-id>/<revision-id>.md            immutable revisions, written create-only
//! users/<user-id>/account.json                    the account's scopes and their live bytes
//! tokens/<sha256 of token>.json                   one per access token (hash only)
//! erased/<user-id>.json                           written first by erase; refuses the account
//! ```

use std::fmt;

use memoria_shared::protocol::Scope;
use memoria_shared::{IdError, NoteId};

/// A user id: the same character rules as a note id, so it is a safe path segment.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserId(String);

impl UserId {
    pub fn new(s: &str) -> Result<Self, IdError> {
        NoteId::new(s).map(|id| UserId(id.as_str().to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// All of one user's data, the prefix erase deletes.
pub fn user_prefix(user: &UserId) -> String {
    format!("users/{user}/")
}

/// The folder of one scope (ends with `/`).
pub fn scope_prefix(user: &UserId, scope: &Scope) -> String {
    match scope {
        Scope::User => format!("users/{user}/memory/"),
        Scope::Project(pid) => format!("users/{user}/projects/{pid}/memory/"),
    }
}

pub fn manifest_key(user: &UserId, scope: &Scope) -> String {
    format!("{}manifest.json", scope_prefix(user, scope))
}

/// The last good copy of the manifest at `manifest_key`, kept beside it.
pub fn manifest_copy_key(manifest_key: &str) -> String {
    match manifest_key.strip_suffix("manifest.json") {
        Some(prefix) => format!("{prefix}manifest.prev.json"),
        None => format!("{manifest_key}.prev"),
    }
}

/// The prefix of every revision file of a scope.
pub fn objects_prefix(user: &UserId, scope: &Scope) -> String {
    format!("{}objects/", scope_prefix(user, scope))
}

/// The note id and revision id of a revision file's key under [`objects_prefix`].
pub fn parse_object_key<'a>(prefix: &str, key: &'a str) -> Option<(&'a str, &'a str)> {
    let (note, file) = key.strip_prefix(prefix)?.split_once('/')?;
    Some((note, file.strip_suffix(".md")?))
}

pub fn account_key(user: &UserId) -> String {
    format!("users/{user}/account.json")
}

pub fn object_key(user: &UserId, scope: &Scope, note: &NoteId, revision: &str) -> String {
    format!("{}objects/{note}/{revision}.md", scope_prefix(user, scope))
}

pub fn token_key(token_hash: &str) -> String {
    format!("tokens/{token_hash}.json")
}

pub fn erased_key(user: &UserId) -> String {
    format!("erased/{user}.json")
}

#[cfg(test)]
mod tests {
    use super::*;
    use memoria_shared::protocol::ProjectId;

    #[test]
    fn layout_matches_the_product_spec() {
        let u = UserId::new("u-1").unwrap();
        let p = Scope::Project(ProjectId::new("p.2").unwrap());
        let n = NoteId::new("note-a").unwrap();
        assert_eq!(
            manifest_key(&u, &Scope::User),
            "users/u-1/memory/manifest.json"
        );
        assert_eq!(
            manifest_key(&u, &p),
            "users/u-1/projects/p.2/memory/manifest.json"
        );
        assert_eq!(
            object_key(&u, &p, &n, "r1"),
            "users/u-1/projects/p.2/memory/objects/note-a/r1.md"
        );
        assert!(scope_prefix(&u, &p).starts_with(&user_prefix(&u)));
        assert_eq!(
            manifest_copy_key(&manifest_key(&u, &p)),
            "users/u-1/projects/p.2/memory/manifest.prev.json"
        );
        assert_eq!(account_key(&u), "users/u-1/account.json");
        let key = object_key(&u, &p, &n, "r1");
        assert_eq!(
            parse_object_key(&objects_prefix(&u, &p), &key),
            Some(("note-a", "r1"))
        );
        assert_eq!(parse_object_key(&objects_prefix(&u, &p), "x/y.md"), None);
        for bad in ["", "../x", "U", "a/b", "a b"] {
            assert!(UserId::new(bad).is_err(), "{bad}");
        }
    }
}
