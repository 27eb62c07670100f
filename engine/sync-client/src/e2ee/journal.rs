//! The changes to a scope's `e2ee.json` since it was last written whole: `e2ee.log` beside it,
//! one JSON line per note whose versions changed (the later line for a note wins). A pass that
//! uploads or takes one note appends one line instead of writing every note's versions again;
//! the file is folded into `e2ee.json` once it holds as many lines as that has notes.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{SyncError, SyncResult};
use crate::fsx;

/// Appended lines of one scope's state.
#[derive(Debug)]
pub(super) struct Journal {
    path: PathBuf,
    lines: usize,
    /// Its whole lines as they are on disk.
    text: String,
}

impl Journal {
    /// The journal beside `state` (the scope's `e2ee.json`), what it holds, and whether its
    /// last line was cut short by a crash (then it must be folded in before anything is
    /// appended, so no new line joins the cut one).
    pub(super) fn open<T: DeserializeOwned>(state: &Path) -> SyncResult<(Journal, Vec<T>, bool)> {
        let path = state.with_extension("log");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(crate::Error::io("read", &path)(e).into()),
        };
        // A line is whole once its newline is written: the append writes it last, and syncs
        // before anything relies on the line.
        let (whole, torn) = match text.rfind('\n') {
            Some(end) => (&text[..=end], end + 1 < text.len()),
            None => ("", !text.is_empty()),
        };
        let items = whole
            .lines()
            .map(|l| {
                serde_json::from_str(l).map_err(|e| SyncError::State {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
            })
            .collect::<SyncResult<Vec<T>>>()?;
        let lines = items.len();
        let text = whole.to_owned();
        Ok((Journal { path, lines, text }, items, torn))
    }

    /// Lines it holds.
    pub(super) fn len(&self) -> usize {
        self.lines
    }

    /// Its whole lines.
    pub(super) fn text(&self) -> &str {
        &self.text
    }

    /// Appends `items`, one line each, in one write, and syncs them to disk.
    pub(super) fn append<T: Serialize>(&mut self, items: &[T]) -> SyncResult<()> {
        let mut text = String::new();
        for item in items {
            let line = serde_json::to_string(item).map_err(|e| {
                crate::Error::Internal(format!("encoding {}: {e}", self.path.display()))
            })?;
            text.push_str(&line);
            text.push('\n');
        }
        let io = |op| crate::Error::io(op, &self.path);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(io("open"))?;
        fsx::private_file(&self.path)?;
        file.write_all(text.as_bytes()).map_err(io("write"))?;
        file.sync_data().map_err(io("write"))?;
        self.lines += items.len();
        self.text.push_str(&text);
        Ok(())
    }

    /// Empties it, once what it held is in the state file.
    pub(super) fn clear(&mut self) -> SyncResult<()> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(crate::Error::io("remove", &self.path)(e).into()),
        }
        self.lines = 0;
        self.text.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use memoria_shared::e2ee::{AccountKey, opaque_note_id};
    use memoria_shared::protocol::{
        Applied, Change, ChangeOp, CommitRequest, CommitResponse, Quotas,
    };
    use memoria_shared::{Note, NoteId};

    use super::super::ScopeCrypt;
    use super::*;

    fn crypt(root: &Path) -> ScopeCrypt {
        let keys = AccountKey::from_bytes([9; 32]).derive();
        ScopeCrypt::open(keys, "alice", &memoria_shared::protocol::Scope::User, root).unwrap()
    }

    fn put(id: &str, body: &str) -> Change {
        let note = Note::new(NoteId::new(id).unwrap(), format!("About {id}"), body);
        Change {
            id: note.id.clone(),
            op: ChangeOp::Put,
            body: Some(note.serialize()),
            hash: None,
            base_revision: None,
        }
    }

    /// Seals and applies a commit of `changes` the way a pass does (the server's reply
    /// faked: one revision per change).
    fn commit(c: &mut ScopeCrypt, changes: Vec<Change>, now_ms: u64) {
        let req = CommitRequest {
            scope: memoria_shared::protocol::Scope::User,
            changes,
            commit_id: None,
        };
        let sealed = c.seal_commit(&req, now_ms).unwrap();
        let resp = CommitResponse {
            protocol_version: memoria_shared::PROTOCOL_VERSION,
            quotas: Quotas::default(),
            storage_quotas: None,
            manifest_version: "v".into(),
            applied: sealed
                .changes
                .iter()
                .map(|ch| Applied {
                    id: ch.id.clone(),
                    revision: "r".into(),
                })
                .collect(),
            generation: None,
        };
        c.open_commit(&req, resp).unwrap();
    }

    fn log_lines(root: &Path) -> usize {
        std::fs::read_to_string(root.join("e2ee.log"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    #[test]
    fn a_commit_appends_its_notes_versions_and_a_reopen_reads_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut c = crypt(root);
        c.set_marked().unwrap();
        let state_len = |root: &Path| std::fs::metadata(root.join("e2ee.json")).unwrap().len();
        let before = state_len(root);
        commit(&mut c, vec![put("a", "one\n"), put("b", "two\n")], 1_000);
        // The state file is not written again: the versions are appended, two lines when
        // sealed (numbers taken) and two when applied.
        assert_eq!(state_len(root), before);
        assert_eq!(log_lines(root), 4);
        let known = |c: &ScopeCrypt, id: &str| {
            let k = &c.file.notes[id];
            (k.seq, k.sealed, k.hash.clone())
        };
        let a = known(&c, "a");
        assert_eq!((a.0, a.1), (1_000, 1_000));
        let again = crypt(root);
        assert!(again.marked());
        assert_eq!(known(&again, "a"), a);
        assert_eq!(known(&again, "b"), known(&c, "b"));
        // The next version of a note is numbered above the one recorded in the log.
        let mut c = again;
        commit(&mut c, vec![put("a", "one, edited\n")], 1_000);
        assert_eq!(known(&c, "a").0, 1_001);
        assert_eq!(known(&crypt(root), "a").0, 1_001);
    }

    #[test]
    fn the_log_is_folded_into_the_state_file_once_it_is_long() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut c = crypt(root);
        c.set_marked().unwrap();
        let mut now = 1_000;
        for _ in 0..(super::super::FOLD_AT / 2 + 1) {
            now += 1;
            commit(&mut c, vec![put("a", &format!("{now}\n"))], now);
        }
        // Never more lines than the fold allows; everything still reads back.
        assert!(
            log_lines(root) <= super::super::FOLD_AT,
            "{}",
            log_lines(root)
        );
        assert_eq!(crypt(root).file.notes["a"].seq, now);
        // A pass's upload of many notes leaves up to a line each (as many as the scope has
        // notes); the next pass folds them in when it opens the scope, and reads the same.
        let lines: Vec<super::super::Line> = (0..100)
            .map(|i| super::super::Line {
                id: format!("n{i}"),
                known: super::super::Known {
                    seq: 7,
                    hash: "h".into(),
                    sealed: 7,
                },
            })
            .collect();
        let (mut j, _, _) = Journal::open::<super::super::Line>(&root.join("e2ee.json")).unwrap();
        j.append(&lines).unwrap();
        assert!(log_lines(root) > super::super::FOLD_AT);
        let c = crypt(root);
        assert_eq!(log_lines(root), 0);
        assert_eq!((c.file.notes["n99"].seq, c.file.notes["a"].seq), (7, now));
        assert_eq!(crypt(root).file.notes["n99"].seq, 7);
    }

    #[test]
    fn a_line_cut_short_is_passed_over_and_folded_in_before_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut c = crypt(root);
        c.set_marked().unwrap();
        commit(&mut c, vec![put("a", "one\n")], 1_000);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(root.join("e2ee.log"))
            .unwrap();
        f.write_all(b"{\"id\":\"b\",\"seq\":7").unwrap();
        drop(f);
        let mut c = crypt(root);
        assert_eq!(c.file.notes["a"].seq, 1_000);
        assert!(!c.file.notes.contains_key("b"));
        // Folded in at the open: the log is gone, and what is appended next reads back.
        assert_eq!(log_lines(root), 0);
        commit(&mut c, vec![put("b", "two\n")], 2_000);
        assert_eq!(crypt(root).file.notes["b"].seq, 2_000);
        // A whole line that does not parse is damage, not a crash: an error naming the file.
        std::fs::write(root.join("e2ee.log"), "not json\n").unwrap();
        let keys = AccountKey::from_bytes([9; 32]).derive();
        let err = ScopeCrypt::open(keys, "alice", &memoria_shared::protocol::Scope::User, root)
            .err()
            .unwrap();
        assert!(err.to_string().contains("e2ee.log"), "{err}");
    }

    #[test]
    fn the_next_pass_takes_up_the_state_a_pass_left_while_the_files_hold_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut c = crypt(root);
        c.set_marked().unwrap();
        commit(&mut c, vec![put("a", "one\n")], 1_000);
        let opaque = opaque_note_id(&c.keys, &c.scope, &NoteId::new("a").unwrap());
        drop(c);
        // Taken up: the opaque id made by the commit is known without being made again.
        let c = crypt(root);
        assert_eq!(c.derived.ids.get(opaque.as_str()).unwrap(), "a");
        assert!(c.derived.unlearnt.is_empty());
        assert_eq!(c.file.notes["a"].seq, 1_000);
        drop(c);
        // Another process appends a version: the files are read again, and nothing is kept
        // of what they no longer hold.
        let line = r#"{"id":"a","seq":5000,"hash":"h","sealed":5000}"#;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(root.join("e2ee.log"))
            .unwrap();
        f.write_all(format!("{line}\n").as_bytes()).unwrap();
        drop(f);
        let c = crypt(root);
        assert_eq!(c.file.notes["a"].seq, 5_000);
        assert!(c.derived.ids.is_empty());
        drop(c);
        // The state file rewritten with the same journal: read again too.
        let mut f: serde_json::Value =
            serde_json::from_slice(&std::fs::read(root.join("e2ee.json")).unwrap()).unwrap();
        f["purged"] = true.into();
        std::fs::write(root.join("e2ee.json"), f.to_string()).unwrap();
        let c = crypt(root);
        assert!(c.purged());
        assert_eq!(c.file.notes["a"].seq, 5_000);
        drop(c);
        // Another key never takes up what this one made.
        let other = AccountKey::from_bytes([8; 32]).derive();
        let c =
            ScopeCrypt::open(other, "alice", &memoria_shared::protocol::Scope::User, root).unwrap();
        assert!(c.derived.ids.is_empty() && c.derived.to_keyed.is_empty());
        assert!(!c.marked());
    }

    #[test]
    fn every_id_a_pass_names_is_learnt_once_in_whatever_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = crypt(dir.path());
        c.learn(["b", "d"].into_iter());
        // Two sorted runs (a pass's notes, then its base), and an id out of order.
        c.learn(["a", "b", "c", "e"].into_iter().chain(["b", "d", "f", "a"]));
        let mut unlearnt = c.derived.unlearnt.clone();
        unlearnt.sort();
        assert_eq!(unlearnt, ["a", "b", "c", "d", "e", "f"]);
        c.learn(["f", "e", "d", "c", "b", "a"].into_iter());
        assert_eq!(c.derived.unlearnt.len(), 6);
        // A reply naming one of them maps back to it.
        let opaque = opaque_note_id(&c.keys, &c.scope, &NoteId::new("e").unwrap());
        assert_eq!(c.plain_id(&opaque).as_str(), "e");
        assert!(c.derived.unlearnt.is_empty());
    }

    #[test]
    fn a_state_whose_write_failed_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut c = crypt(root);
        c.set_marked().unwrap();
        commit(&mut c, vec![put("a", "one\n")], 1_000);
        // The journal cannot be written: the versions sealed stay in memory only.
        std::fs::remove_file(root.join("e2ee.log")).unwrap();
        std::fs::create_dir(root.join("e2ee.log")).unwrap();
        let req = CommitRequest {
            scope: memoria_shared::protocol::Scope::User,
            changes: vec![put("a", "two\n")],
            commit_id: None,
        };
        assert!(c.seal_commit(&req, 2_000).is_err());
        assert_eq!(c.file.notes["a"].sealed, 2_000);
        drop(c);
        std::fs::remove_dir(root.join("e2ee.log")).unwrap();
        // What the files hold: the state file as written at the mark, the lost lines gone.
        let c = crypt(root);
        assert!(!c.file.notes.contains_key("a"));
    }

    #[cfg(unix)]
    #[test]
    fn the_log_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mut c = crypt(dir.path());
        commit(&mut c, vec![put("a", "one\n")], 1_000);
        let mode = std::fs::metadata(dir.path().join("e2ee.log"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
