//! memoria-engine: everything that runs on a user's machine — the vault of Markdown notes, the
//! SQLite index, backups, the credential guard, import/export and the file watcher (recall,
//! sync client and MCP server join as their issues land). The binary `memoria` is a thin CLI
//! over [`Engine`]. No GUI dependencies; plain Rust types out, JSON only at the CLI boundary.

pub mod agent;
pub mod backup;
pub mod doctor;
pub mod error;
pub mod fsx;
pub mod guard;
pub mod home;
pub mod hook;
pub mod import;
pub mod index;
pub mod mcp;
pub mod project;
pub mod recall;
pub mod scan;
pub mod search;
pub mod sync;
pub mod vault;
pub mod watch;

pub use error::{Error, ErrorBody, ErrorCode, Result};
pub use project::{Project, Scope};
pub use vault::{Engine, Limits, NewNote, NoteEdit, NoteView, OpenOptions, ScopeChoice, Written};

/// A count with its noun for people to read: "1 note", "3 notes", "0 notes".
pub fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counted_uses_the_singular_for_one_only() {
        assert_eq!(super::counted(0, "note"), "0 notes");
        assert_eq!(super::counted(1, "note"), "1 note");
        assert_eq!(super::counted(2, "session"), "2 sessions");
    }
}
