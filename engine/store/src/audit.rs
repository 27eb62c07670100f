//! The audit log: what the person did to whole parts of their memory (a quarantine applied or
//! released), one JSON line per action in `$MEMORIA_HOME/audit.jsonl` (0600), never synced and
//! never rewritten. An entry names the action, the module it belongs to and what it touched
//! (ids and counts), never a note's or a message's text.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsx;

/// One action of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// When, in ms since the epoch.
    pub at: i64,
    /// What was done, dotted (`memory.quarantine.apply`).
    pub action: String,
    /// The part of Memoria it belongs to (`memory`).
    pub module: String,
    /// What it touched: ids and counts.
    pub detail: serde_json::Value,
}

/// Where the audit log of the home at `root` lives.
pub fn audit_path(root: &Path) -> PathBuf {
    root.join("audit.jsonl")
}

/// Appends `entry` to the audit log of the home at `root` (one line, written whole).
pub fn record(root: &Path, entry: &AuditEntry) -> Result<()> {
    let path = audit_path(root);
    let mut line = serde_json::to_vec(entry)
        .map_err(|e| Error::Internal(format!("encoding an audit entry: {e}")))?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(Error::io("open", &path))?;
    fsx::private_file(&path)?;
    // One write of the whole line: appends from several processes never interleave inside it.
    file.write_all(&line).map_err(Error::io("write", &path))?;
    file.sync_all().map_err(Error::io("write", &path))?;
    Ok(())
}

/// The audit log's entries, oldest first; a line that does not parse (a write cut short) is
/// passed over.
pub fn entries(root: &Path) -> Result<Vec<AuditEntry>> {
    let path = audit_path(root);
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read", &path)(e)),
    };
    let mut out = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(Error::io("read", &path))?;
        if let Ok(entry) = serde_json::from_str(&line) {
            out.push(entry);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_appended_private_and_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        assert!(entries(dir.path()).unwrap().is_empty());
        let entry = |n: i64| AuditEntry {
            at: n,
            action: "memory.quarantine.apply".into(),
            module: "memory".into(),
            detail: serde_json::json!({ "id": n }),
        };
        record(dir.path(), &entry(1)).unwrap();
        // A line cut short by a crash is passed over; what follows it is still read.
        std::fs::OpenOptions::new()
            .append(true)
            .open(audit_path(dir.path()))
            .unwrap()
            .write_all(b"{\"at\": 2, \"act\n")
            .unwrap();
        record(dir.path(), &entry(3)).unwrap();
        assert_eq!(entries(dir.path()).unwrap(), vec![entry(1), entry(3)]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(audit_path(dir.path()))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
