//! What a machine keeps through a change of the account key made on another machine: an edit
//! it had not synced yet goes up under the new key as a clean upload (never a conflict), both
//! when it follows the rotation at its next sync and when the rotation locked it out and it is
//! unlocked again; and a locked-out machine says it is locked, and how to unlock it.

use memoria_tests::sync_fixture::{Backend, Device};

use super::{
    NOTES, PASSPHRASE, account_keys, assert_notes_alike, encrypted_pair, envelopes_all_under,
    error_code, objects, rotate,
};
use crate::sync_e2e::{World, json};

/// `b` adds a line to the third of [`NOTES`] and does not sync; the note's id and new text.
fn edit_without_syncing(b: &Device) -> (&'static str, String) {
    let (id, _, _, body) = NOTES[2];
    let edited = format!("{body}a line written on b before the key changed\n");
    b.ok(&["edit", id, "--body", &edited]);
    (id, edited)
}

/// The edit `b` made went up cleanly: `said` (the output of the pass that sent it) uploaded
/// that one note and held nothing back, no conflict waits on `b`, and once `a` syncs both hold
/// every note alike, the edited one with its new line, all under the account key now on the
/// server.
fn edit_went_up(w: &World, a: &Device, b: &Device, said: &str, (id, edited): &(&str, String)) {
    assert!(
        said.contains("user: uploaded 1, downloaded +0 ~0 -0, merged 0, held back 0"),
        "{said}"
    );
    assert_eq!(json(&b.ok(&["--json", "conflicts"])), json("[]"));
    a.ok(&["sync", "now"]);
    let note = a.note(id).unwrap();
    assert!(note.contains(edited.trim_end()), "{note}");
    assert_notes_alike(a, b);
    let (kid, _) = account_keys(&objects(w));
    assert!(envelopes_all_under(&objects(w), &kid) >= NOTES.len());
}

#[test]
fn e2ee_an_edit_not_synced_when_another_machine_rotates_the_key_uploads_under_the_new_key() {
    let (w, f, a, b, _) = encrypted_pair(Backend::Fs);
    let edit = edit_without_syncing(&b);
    let (out, _) = rotate(&a, &f, None, &[]);
    assert_eq!(out["complete"], true, "{out}");
    assert_eq!(out["lockedOut"], false, "{out}");

    let said = b.ok(&["sync", "now"]);
    edit_went_up(&w, &a, &b, &said, &edit);
}

#[test]
fn e2ee_a_machine_locked_out_by_a_rotation_says_so_and_keeps_its_edit_through_unlocking() {
    let (w, f, a, b, _) = encrypted_pair(Backend::Fs);
    let edit = edit_without_syncing(&b);
    let unlocked = json(&b.ok(&["--json", "sync", "status"]));
    assert_eq!(unlocked["encrypted"], true, "{unlocked}");
    assert_eq!(unlocked["encryptionLocked"], false, "{unlocked}");
    let (out, recovery) = rotate(&a, &f, None, &["--lock-out"]);
    assert_eq!(out["complete"], true, "{out}");
    assert_eq!(out["lockedOut"], true, "{out}");

    // Its next pass finds the key it holds replaced: nothing synced, its edit still here.
    let err = b.fails(&["--json", "sync", "now"]);
    assert_eq!(error_code(&err), "e2ee_locked", "{err}");
    assert!(b.note(edit.0).unwrap().contains(edit.1.trim_end()));

    // From then on it says it is locked, why, and what unlocks it.
    let status = json(&b.ok(&["--json", "sync", "status"]));
    assert_eq!(status["encrypted"], false, "{status}");
    assert_eq!(status["encryptionLocked"], true, "{status}");
    let said = b.ok(&["sync", "status"]);
    assert!(said.contains("locked"), "{said}");
    assert!(said.contains("changed on another machine"), "{said}");
    assert!(said.contains("memoria sync unlock"), "{said}");
    // Nor does it turn encryption off or set a new passphrase with the key it holds.
    let before = objects(&w);
    let err = b.fails(&["--json", "sync", "decrypt", "--yes"]);
    assert_eq!(error_code(&err), "e2ee_locked", "{err}");
    let new = f.passphrase("a passphrase set from a locked-out machine");
    let err = b.fails(&[
        "--json",
        "sync",
        "passphrase",
        "--from-this-machine",
        "--yes",
        "--new-passphrase-file",
        &new,
    ]);
    assert_eq!(error_code(&err), "e2ee_locked", "{err}");
    assert_eq!(objects(&w), before, "nothing was written to the store");

    // The new recovery key unlocks it; the edit goes up under the new key, no conflict.
    let said = b.ok(&["sync", "unlock", "--recovery-key", &recovery]);
    let status = json(&b.ok(&["--json", "sync", "status"]));
    assert_eq!(status["encrypted"], true, "{status}");
    assert_eq!(status["encryptionLocked"], false, "{status}");
    edit_went_up(&w, &a, &b, &said, &edit);
}

#[test]
fn e2ee_notes_gone_from_a_machine_that_follows_a_rotation_are_not_deleted_without_asking() {
    let (w, f, a, b, _) = encrypted_pair(Backend::Fs);
    // Two of the three notes are gone from b's folder (a folder wiped, say), not synced.
    for (id, ..) in &NOTES[..2] {
        std::fs::remove_file(b.home.join("memory/user").join(format!("{id}.md"))).unwrap();
    }
    let (out, _) = rotate(&a, &f, None, &[]);
    assert_eq!(out["complete"], true, "{out}");

    // So many deletions at once wait for the user under the new key as under the old one.
    let err = b.fails(&["sync", "now"]);
    assert!(err.contains("memoria sync confirm"), "{err}");
    let status = json(&b.ok(&["--json", "sync", "status"]));
    assert!(!status["scopes"][0]["pending"].is_null(), "{status}");
    a.ok(&["sync", "now"]);
    for (id, ..) in &NOTES[..2] {
        assert!(a.note(id).is_some(), "{id} was deleted from the cloud");
    }
    // Declined, they come back, under the new key.
    b.ok(&["sync", "cancel"]);
    b.ok(&["sync", "now"]);
    assert_notes_alike(&a, &b);
    let (kid, _) = account_keys(&objects(&w));
    assert!(envelopes_all_under(&objects(&w), &kid) >= NOTES.len());
}

/// A long-running process (`memoria watch`) started on a machine before it was unlocked holds
/// no key; once `sync unlock` ran beside it, its next pass takes the key up and syncs the scope
/// encrypted, keeping the base, so a later rotation still finds the scope synced under the old
/// key and an edit made since merges cleanly.
#[test]
fn e2ee_a_process_started_before_the_unlock_keeps_the_base_through_a_later_rotation() {
    let (w, f, a, _b, _) = encrypted_pair(Backend::Fs);
    let c = w.device("c", &a.token);
    let mut watch = c.spawn(&["--json", "watch"]);
    c.ok(&[
        "sync",
        "unlock",
        "--passphrase-file",
        &f.passphrase(PASSPHRASE),
    ]);
    // A note written beside the watcher: its pass, the first since the unlock, sends it.
    std::fs::write(
        c.home.join("memory/user/written-beside-the-watcher.md"),
        "---\n{\"id\":\"written-beside-the-watcher\",\"summary\":\"Beside\",\"tags\":[]}\n---\nsent by the watcher\n",
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while a.note("written-beside-the-watcher").is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the watcher never sent the note"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
        a.ok(&["sync", "now"]);
    }
    watch.kill().unwrap();
    watch.wait().unwrap();

    let edit = edit_without_syncing(&c);
    let (out, _) = rotate(&a, &f, None, &[]);
    assert_eq!(out["complete"], true, "{out}");
    let said = c.ok(&["sync", "now"]);
    edit_went_up(&w, &a, &c, &said, &edit);
}
