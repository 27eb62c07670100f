//! Where things live in the object store. Every key the server touches is built here, from
//! validated ids only, so no request can name a key outside its own account.
//!
//! ```text
//! users/<user-id>/memory/                         user scope
//! users/<user-id>/projects/<project-id>/memory/   project scope
//!   manifest.json                                 replaced with ETag compare-and-swap
//!   objects/<note-id>/<revision-id>.md            immutable revisions, written create-only
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
        for bad in ["", "../x", "U", "a/b", "a b"] {
            assert!(UserId::new(bad).is_err(), "{bad}");
        }
    }
}
