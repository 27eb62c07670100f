//! Cloud sync end to end: several `MEMORIA_HOME`s driven through the `memoria` CLI against the
//! real `memoria-sync` binary on loopback. Every scenario runs twice, over the filesystem store
//! (`sync_e2e::fs::…`) and over the S3 store on moto (`sync_e2e::s3::…`).

use memoria_tests::project_folder;
use memoria_tests::sync_fixture::{Backend, Device, SyncServer};
use serde_json::Value;
use tempfile::TempDir;

/// One test per scenario and store: `fs::NAME` and `s3::NAME` call `NAME(Backend)`.
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod fs {
            $(#[test]
            fn $name() {
                super::$name(super::Backend::Fs)
            })*
        }
        mod s3 {
            $(#[test]
            fn $name() {
                super::$name(super::Backend::S3)
            })*
        }
    };
}

on_both_stores!(
    two_devices_merge_edits_tags_and_edit_vs_delete,
    three_devices_converge_on_concurrent_edits,
    same_line_edits_conflict_and_resolve_each_way,
    off_blocks_everything_and_survives_login,
    pinning_pauses_a_scope_on_account_change,
    tombstone_expiry_deletes_unchanged_and_conflicts_edited,
    vanished_folders_pause_and_delete_nothing_anywhere,
    mass_deletes_wait_for_confirmation_in_both_directions,
    two_worktrees_of_one_project_keep_their_own_base,
    unreadable_note_files_are_held_back_not_deleted,
    secret_notes_stay_on_this_machine_unless_included,
    a_fresh_clone_without_a_notes_folder_gets_the_projects_notes,
    one_scope_turned_off_stays_here_and_comes_back_when_turned_on,
);

pub(crate) struct World {
    _tmp: TempDir,
    pub server: SyncServer,
    pub root: std::path::PathBuf,
}

pub(crate) fn world(backend: Backend, env: &[(&str, &str)]) -> World {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let server = SyncServer::start(backend, &root, env);
    World {
        _tmp: tmp,
        server,
        root,
    }
}

impl World {
    /// A new home signed in to the server.
    pub fn device(&self, name: &str, token: &str) -> Device {
        self.device_via(name, token, &self.server.url)
    }

    /// A new home signed in to `url` (the server, or a proxy in front of it).
    pub fn device_via(&self, name: &str, token: &str, url: &str) -> Device {
        let home = self.root.join(name);
        std::fs::create_dir_all(&home).unwrap();
        let d = Device::new(home, token);
        d.login(url);
        d
    }
}

pub(crate) fn body_lines(n: usize, tag: &str) -> String {
    (1..=n).map(|i| format!("{tag} line {i}\n")).collect()
}

pub(crate) fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn show(d: &Device, id: &str) -> Value {
    json(&d.ok(&["--json", "show", id]))
}

fn two_devices_merge_edits_tags_and_edit_vs_delete(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let b = w.device("b", &token);
    let ten = body_lines(10, "x");
    a.ok(&[
        "add",
        "--id",
        "doc",
        "--summary",
        "Doc",
        "--body",
        &ten,
        "--tags",
        "keep,drop",
    ]);
    a.add("other", "Other", "o\n");
    a.add("gone", "Gone", "g\n");
    a.ok(&["sync", "now"]);
    let out = b.ok(&["sync", "now"]);
    assert!(out.contains("+3"), "{out}");
    assert_eq!(a.note("doc"), b.note("doc"));

    // Concurrent edits: different lines of one note, tags on both sides, different notes.
    let a_body = ten.replace("x line 2\n", "x line 2 (from a)\n");
    let b_body = ten.replace("x line 8\n", "x line 8 (from b)\n");
    a.ok(&[
        "edit",
        "doc",
        "--body",
        &a_body,
        "--tags",
        "keep,drop,a-tag",
    ]);
    b.ok(&["edit", "doc", "--body", &b_body, "--tags", "keep,b-tag"]);
    b.ok(&["edit", "other", "--summary", "Other, edited on b"]);
    // Edit vs delete keeps the edit.
    a.ok(&["forget", "gone", "--confirm"]);
    b.ok(&["edit", "gone", "--body", "g, edited\n"]);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    a.ok(&["sync", "now"]);

    for d in [&a, &b] {
        let doc = show(d, "doc");
        let body = doc["body"].as_str().unwrap_or_else(|| panic!("{doc}"));
        assert!(
            body.contains("x line 2 (from a)") && body.contains("x line 8 (from b)"),
            "{body}"
        );
        let mut tags: Vec<&str> = doc["tags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        tags.sort();
        assert_eq!(
            tags,
            ["a-tag", "b-tag", "keep"],
            "removal of `drop` applied"
        );
        assert_eq!(show(d, "other")["summary"], "Other, edited on b");
        assert!(show(d, "gone")["body"].as_str().unwrap().contains("edited"));
    }
    assert_eq!(a.note("doc"), b.note("doc"));
    // The merge backed both versions up on the machine that merged.
    let backups = json(&b.ok(&["--json", "backups"]));
    assert!(
        backups
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["reason"] == "merge"),
        "{backups}"
    );
    let status = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(status["on"], true);
    assert!(status["lastSyncedMs"].as_i64().is_some(), "{status}");
    assert!(status["scopes"][0]["lastError"].is_null(), "{status}");
}

fn three_devices_converge_on_concurrent_edits(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let devices = [
        w.device("a", &token),
        w.device("b", &token),
        w.device("c", &token),
    ];
    let [a, b, c] = &devices;
    let twelve = body_lines(12, "s");
    a.add("shared", "S", &twelve);
    a.add("doomed", "D", "d\n");
    for d in &devices {
        d.ok(&["sync", "now"]);
    }
    // Offline on each machine: a different line of one note, a note of its own, a delete.
    for (i, d) in devices.iter().enumerate() {
        let line = format!("s line {}\n", 2 + 4 * i);
        let body = twelve.replace(&line, &format!("s line {} (edited on {i})\n", 2 + 4 * i));
        d.ok(&["edit", "shared", "--body", &body]);
        let own = format!("own-{i}");
        d.add(&own, &own, "mine\n");
    }
    c.ok(&["forget", "doomed", "--confirm"]);
    // Sync in an order where each machine merges over the others' commits.
    for d in [b, c, a, b, c] {
        d.ok(&["sync", "now"]);
    }
    for d in &devices {
        let body = show(d, "shared")["body"].as_str().unwrap().to_owned();
        for i in 0..3 {
            assert!(body.contains(&format!("(edited on {i})")), "{body}");
        }
        for i in 0..3 {
            assert!(d.note(&format!("own-{i}")).is_some());
        }
        assert!(d.note("doomed").is_none());
        assert_eq!(json(&d.ok(&["--json", "conflicts"])), serde_json::json!([]));
    }
    assert_eq!(a.note("shared"), b.note("shared"));
    assert_eq!(b.note("shared"), c.note("shared"));
}

fn same_line_edits_conflict_and_resolve_each_way(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let b = w.device("b", &token);
    let ids = [
        "k-local", "k-cloud", "k-both", "k-merged", "adjacent", "quiet",
    ];
    for id in ids {
        a.add(id, id, "one\ntwo\nthree\n");
    }
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    for id in &ids[..4] {
        a.ok(&["edit", id, "--body", "one\nTWO from a\nthree\n"]);
        b.ok(&["edit", id, "--body", "one\nTWO from b\nthree\n"]);
    }
    // Adjacent lines: diffy would merge this cleanly, git (and we) call it a conflict.
    a.ok(&["edit", "adjacent", "--body", "one\nTWO a\nthree\n"]);
    b.ok(&["edit", "adjacent", "--body", "one\ntwo\nTHREE b\n"]);
    b.ok(&["edit", "quiet", "--body", "one\ntwo\nthree\nfour\n"]);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    let conflicts = json(&b.ok(&["--json", "conflicts"]));
    let mut listed: Vec<&str> = conflicts
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        ["adjacent", "k-both", "k-cloud", "k-local", "k-merged"]
    );
    // A conflict holds back only its own note.
    a.ok(&["sync", "now"]);
    assert!(a.note("quiet").unwrap().contains("four"));

    // One conflict reads as diffs from the last synced version (plain when piped), and
    // `resolve` without a choice names the flags that choose.
    let shown = b.ok(&["conflicts", "k-local"]);
    for want in [
        "--- last synced",
        "+++ this machine",
        "+++ the cloud",
        "-two",
        "+TWO from b",
        "+TWO from a",
        "memoria resolve k-local --keep",
    ] {
        assert!(shown.contains(want), "{want:?} missing from:\n{shown}");
    }
    assert!(!shown.contains('\x1b'), "no color codes into a pipe");
    let out = b.run(&["conflicts", "quiet"]);
    assert!(!out.status.success());
    let out = b.run(&["resolve", "k-local"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--keep local") && err.contains("--merged-file"),
        "{err}"
    );

    b.ok(&["resolve", "k-local", "--keep", "local"]);
    b.ok(&["resolve", "k-cloud", "--keep", "cloud"]);
    let both = json(&b.ok(&["--json", "resolve", "k-both", "--keep", "both"]));
    let new_id = both["newId"].as_str().unwrap().to_owned();
    let merged = w.root.join("merged.md");
    std::fs::write(&merged, "one\nTWO from a and b\nthree\n").unwrap();
    b.ok(&[
        "resolve",
        "k-merged",
        "--merged-file",
        merged.to_str().unwrap(),
    ]);
    b.ok(&["resolve", "adjacent", "--keep", "cloud"]);
    assert_eq!(json(&b.ok(&["--json", "conflicts"])), serde_json::json!([]));
    b.ok(&["sync", "now"]);
    a.ok(&["sync", "now"]);

    for d in [&a, &b] {
        let body = |id: &str| show(d, id)["body"].as_str().unwrap().to_owned();
        assert_eq!(body("k-local"), "one\nTWO from b\nthree\n");
        assert_eq!(body("k-cloud"), "one\nTWO from a\nthree\n");
        assert_eq!(body("k-both"), "one\nTWO from b\nthree\n");
        assert_eq!(body(&new_id), "one\nTWO from a\nthree\n");
        assert_eq!(body("k-merged"), "one\nTWO from a and b\nthree\n");
        assert_eq!(body("adjacent"), "one\nTWO a\nthree\n");
    }
    // What was set aside is backed up.
    let backups = json(&b.ok(&["--json", "backups"]));
    let set_aside = backups
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["reason"] == "conflict-set-aside")
        .count();
    assert!(set_aside >= 4, "{backups}");
}

fn off_blocks_everything_and_survives_login(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    a.add("n", "N", "n\n");
    a.ok(&["sync", "off"]);
    let err = a.fails(&["sync", "now"]);
    assert!(err.contains("cloud sync is off"), "{err}");
    a.login(&w.server.url);
    let err = a.fails(&["sync", "now"]);
    assert!(err.contains("cloud sync is off"), "{err}");
    assert_eq!(json(&a.ok(&["--json", "sync", "status"]))["on"], false);
    // Nothing reached the server.
    let b = w.device("b", &token);
    b.ok(&["sync", "now"]);
    assert!(b.note("n").is_none());
    a.ok(&["sync", "on"]);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert!(b.note("n").is_some());
}

fn pinning_pauses_a_scope_on_account_change(backend: Backend) {
    let w = world(backend, &[]);
    let alice = w.server.token("alice");
    let bob = w.server.token("bob");
    let mut a = w.device("a", &alice);
    a.add("n", "N", "n\n");
    a.ok(&["sync", "now"]);
    a.token = bob.clone();
    a.login(&w.server.url);
    let err = a.fails(&["sync", "now"]);
    assert!(
        err.contains("sync of user is paused") && err.contains("alice"),
        "{err}"
    );
    let status = json(&a.ok(&["--json", "sync", "status"]));
    assert!(
        status["scopes"][0]["lastError"]
            .as_str()
            .unwrap()
            .starts_with("user: "),
        "{status}"
    );
    // Bob's account received nothing.
    let b = w.device("b", &bob);
    b.ok(&["sync", "now"]);
    assert!(b.note("n").is_none());
}

fn tombstone_expiry_deletes_unchanged_and_conflicts_edited(backend: Backend) {
    // Tombstones expire at once, as if the returning machine had been away past the window.
    let w = world(backend, &[("MEMORIA_SYNC_QUOTAS__TOMBSTONE_DAYS", "0")]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let b = w.device("b", &token);
    a.add("plain", "P", "p\n");
    a.add("edited", "E", "e\n");
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    b.ok(&["forget", "plain", "--confirm"]);
    b.ok(&["forget", "edited", "--confirm"]);
    // Every note of the scope at once: the user confirms first.
    let err = b.fails(&["sync", "now"]);
    assert!(err.contains("delete 2 of the 2 synced notes"), "{err}");
    b.ok(&["sync", "confirm"]);
    b.ok(&["sync", "now"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    a.ok(&["edit", "edited", "--body", "e, edited while away\n"]);
    a.ok(&["sync", "now"]);
    assert!(
        a.note("plain").is_none(),
        "unchanged note that vanished is deleted"
    );
    assert!(a.note("edited").is_some(), "edited note is kept");
    let conflicts = json(&a.ok(&["--json", "conflicts"]));
    assert_eq!(conflicts[0]["id"], "edited");
    assert_eq!(conflicts[0]["reason"]["reason"], "vanished-while-edited");
    a.ok(&["resolve", "edited", "--keep", "local"]);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert!(b.note("edited").unwrap().contains("edited while away"));
    assert!(b.note("plain").is_none());
}

fn has_note(dir: &std::path::Path, id: &str) -> bool {
    dir.join(format!("{id}.md")).is_file()
}

/// The `sync status --json` entry of `scope`.
fn scope_status(status: &Value, scope: &str) -> Value {
    status["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["scope"] == scope)
        .unwrap_or_else(|| panic!("no {scope} in {status}"))
        .clone()
}

fn vanished_folders_pause_and_delete_nothing_anywhere(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let b = w.device("b", &token);
    let pa = project_folder(&w.root.join("a-proj"), "shared-proj");
    let pb = project_folder(&w.root.join("b-proj"), "shared-proj");
    for i in 1..=3 {
        let (n, p) = (format!("n{i}"), format!("p{i}"));
        a.add(&n, &n, "n\n");
        a.add_to_project(&pa, &p, &p, "p\n");
    }
    a.ok(&["--project", &pa, "sync", "now"]);
    b.ok(&["--project", &pb, "sync", "now"]);
    let b_memory = std::path::Path::new(&pb).join("MEMORY");
    for i in 1..=3 {
        assert!(b.note(&format!("n{i}")).is_some());
        assert!(has_note(&b_memory, &format!("p{i}")));
    }

    // On A both folders go away: a moved home folder, a checkout without MEMORY/.
    let a_user = a.home.join("memory/user");
    let a_memory = std::path::Path::new(&pa).join("MEMORY");
    std::fs::rename(&a_user, a.home.join("user-elsewhere")).unwrap();
    std::fs::rename(
        &a_memory,
        std::path::Path::new(&pa).join("MEMORY-elsewhere"),
    )
    .unwrap();
    let err = a.fails(&["--project", &pa, "sync", "now"]);
    assert!(err.contains("is missing; nothing was synced"), "{err}");
    assert!(err.contains("MEMORY"), "{err}");
    assert!(
        err.contains("is not the folder last synced") && err.contains("3 of the 3"),
        "{err}"
    );
    b.ok(&["--project", &pb, "sync", "now"]);
    for i in 1..=3 {
        assert!(b.note(&format!("n{i}")).is_some(), "B lost user note n{i}");
        assert!(
            has_note(&b_memory, &format!("p{i}")),
            "B lost project note p{i}"
        );
    }

    // A's status says why, naming the scope and the folder.
    let status = json(&a.ok(&["--json", "--project", &pa, "sync", "status"]));
    let user = scope_status(&status, "user");
    assert_eq!(user["pending"]["reason"], "folder-replaced", "{status}");
    assert_eq!(
        user["pending"]["localDeletes"],
        serde_json::json!(["n1", "n2", "n3"])
    );
    let project = scope_status(&status, "project:shared-proj");
    let e = project["lastError"].as_str().unwrap();
    assert!(e.contains("MEMORY is missing"), "{e}");
    let human = a.ok(&["--project", &pa, "sync", "status"]);
    assert!(human.contains("waiting for you"), "{human}");

    // Cancel restores the user notes from the last sync; MEMORY/ comes back by hand.
    a.ok(&["--project", &pa, "sync", "cancel", "--scope", "user"]);
    for i in 1..=3 {
        assert!(a.note(&format!("n{i}")).is_some());
    }
    std::fs::rename(
        std::path::Path::new(&pa).join("MEMORY-elsewhere"),
        &a_memory,
    )
    .unwrap();
    let out = a.ok(&["--project", &pa, "sync", "now"]);
    assert_eq!(
        out.matches("uploaded 0, downloaded +0 ~0 -0").count(),
        2,
        "{out}"
    );
    b.ok(&["--project", &pb, "sync", "now"]);
    for i in 1..=3 {
        assert!(b.note(&format!("n{i}")).is_some());
        assert!(has_note(&b_memory, &format!("p{i}")));
    }
}

fn mass_deletes_wait_for_confirmation_in_both_directions(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let b = w.device("b", &token);
    let ids: Vec<String> = (0..8).map(|i| format!("m{i}")).collect();
    for id in &ids {
        a.add(id, id, "m\n");
    }
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    let forget_five = |d: &memoria_tests::sync_fixture::Device| {
        for id in &ids[..5] {
            d.ok(&["forget", id, "--confirm"]);
        }
    };

    // Local deletes: A waits, nothing reaches B.
    forget_five(&a);
    let err = a.fails(&["sync", "now"]);
    assert!(
        err.contains("delete 5 of the 8 synced notes everywhere")
            && err.contains("nothing was synced"),
        "{err}"
    );
    b.ok(&["sync", "now"]);
    assert!(ids.iter().all(|id| b.note(id).is_some()));
    a.ok(&["sync", "confirm"]);
    let out = a.ok(&["sync", "now"]);
    assert!(out.contains("uploaded 5"), "{out}");

    // Cloud deletes: B waits too; cancelling keeps B's notes and sends them back up.
    let err = b.fails(&["sync", "now"]);
    assert!(err.contains("delete 5 of the 8 synced notes here"), "{err}");
    let status = json(&b.ok(&["--json", "sync", "status"]));
    let pending = &scope_status(&status, "user")["pending"];
    assert_eq!(pending["reason"], "many-deletes", "{status}");
    assert_eq!(
        pending["cloudDeletes"].as_array().unwrap().len(),
        5,
        "{status}"
    );
    assert!(ids.iter().all(|id| b.note(id).is_some()));
    b.ok(&["sync", "cancel"]);
    b.ok(&["sync", "now"]);
    a.ok(&["sync", "now"]);
    assert!(ids.iter().all(|id| a.note(id).is_some()), "A got them back");

    // Confirmed on both machines: deleted everywhere, B's copies backed up.
    forget_five(&a);
    a.fails(&["sync", "now"]);
    a.ok(&["sync", "confirm"]);
    a.ok(&["sync", "now"]);
    b.fails(&["sync", "now"]);
    b.ok(&["sync", "confirm", "--scope", "user"]);
    let out = b.ok(&["sync", "now"]);
    assert!(out.contains("-5"), "{out}");
    for d in [&a, &b] {
        assert!(ids[..5].iter().all(|id| d.note(id).is_none()));
        assert!(ids[5..].iter().all(|id| d.note(id).is_some()));
    }
    let backups = json(&b.ok(&["--json", "backups"]));
    let downloads = backups
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["reason"] == "sync-download")
        .count();
    assert!(downloads >= 5, "{backups}");
    // Nothing waits any more.
    let status = json(&b.ok(&["--json", "sync", "status"]));
    assert!(
        scope_status(&status, "user")["pending"].is_null(),
        "{status}"
    );
    let err = b.fails(&["sync", "confirm"]);
    assert!(err.contains("no sync of any scope waits"), "{err}");
}

fn two_worktrees_of_one_project_keep_their_own_base(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let w1 = project_folder(&w.root.join("wt1"), "one-repo");
    let w2 = project_folder(&w.root.join("wt2"), "one-repo");
    let m1 = std::path::Path::new(&w1).join("MEMORY");
    let m2 = std::path::Path::new(&w2).join("MEMORY");
    let add = |wt: &str, id: &str| a.add_to_project(wt, id, id, "x\n");
    add(&w1, "w1-a");
    add(&w1, "w1-b");
    a.ok(&["--project", &w1, "sync", "now"]);
    // The second worktree claims the same project id: nothing is read or synced from it until
    // the user pairs it, and then it syncs the same cloud project against a base of its own.
    let err = a.fails(&["--project", &w2, "sync", "now"]);
    assert!(err.contains("claims project one-repo"), "{err}");
    a.ok(&["projects", "pair", &w2]);
    // A branch without w1's notes, with a note of its own.
    add(&w2, "w2-c");
    a.ok(&["--project", &w2, "sync", "now"]);
    // Nothing left w1, nothing was deleted.
    assert!(has_note(&m1, "w1-a") && has_note(&m1, "w1-b"));
    a.ok(&["--project", &w1, "sync", "now"]);
    for m in [&m1, &m2] {
        for id in ["w1-a", "w1-b", "w2-c"] {
            assert!(has_note(m, id), "{id} missing in {}", m.display());
        }
    }
    // Each folder syncs against its own base: an edit in one reaches the other, and so does a
    // delete someone chose; neither pass reverts or deletes the other's notes.
    a.ok(&[
        "--project",
        &w1,
        "edit",
        "w1-a",
        "--body",
        "edited in wt1\n",
    ]);
    a.ok(&["--project", &w1, "sync", "now"]);
    let out = a.ok(&["--project", &w2, "sync", "now"]);
    assert!(out.contains("~1"), "{out}");
    let text = std::fs::read_to_string(m2.join("w1-a.md")).unwrap();
    assert!(text.contains("edited in wt1"), "{text}");
    a.ok(&["--project", &w2, "forget", "w2-c", "--confirm"]);
    a.ok(&["--project", &w2, "sync", "now"]);
    a.ok(&["--project", &w1, "sync", "now"]);
    assert!(!has_note(&m1, "w2-c"));
    let text = std::fs::read_to_string(m1.join("w1-a.md")).unwrap();
    assert!(text.contains("edited in wt1"), "{text}");
    assert!(has_note(&m1, "w1-b") && has_note(&m2, "w1-b"));
}

fn unreadable_note_files_are_held_back_not_deleted(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let b = w.device("b", &token);
    for id in ["u1", "u2", "u3"] {
        a.add(id, id, "u\n");
    }
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    // Two files that exist but cannot be read, whoever runs this (root reads through any
    // permission): u1 becomes a symbolic link whose target is gone (what an evicted
    // cloud-drive file or a git-annex file without its content is), u2 a named pipe.
    let dir = a.home.join("memory/user");
    let u1 = dir.join("u1.md");
    let kept = a.home.join("u1-kept.md");
    std::fs::rename(&u1, &kept).unwrap();
    std::os::unix::fs::symlink(a.home.join("evicted/u1.md"), &u1).unwrap();
    let u2 = dir.join("u2.md");
    let u2_text = std::fs::read(&u2).unwrap();
    std::fs::remove_file(&u2).unwrap();
    let st = std::process::Command::new("mkfifo")
        .arg(&u2)
        .status()
        .unwrap();
    assert!(st.success());

    let out = json(&a.ok(&["--json", "sync", "now"]));
    let report = &out[0]["report"];
    assert_eq!(report["uploaded"], 0, "{out}");
    let held: Vec<(String, String)> = serde_json::from_value(report["heldBack"].clone()).unwrap();
    for (id, file) in [("u1", "u1.md"), ("u2", "u2.md")] {
        let (_, why) = held
            .iter()
            .find(|(h, _)| h == id)
            .unwrap_or_else(|| panic!("{id} not held back: {out}"));
        assert!(
            why.contains(file) && why.contains("cannot be read"),
            "{why}"
        );
    }
    b.ok(&["sync", "now"]);
    for id in ["u1", "u2", "u3"] {
        assert!(b.note(id).is_some(), "B lost {id}");
    }
    let status = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(
        scope_status(&status, "user")["heldBack"],
        serde_json::json!(["u1", "u2"])
    );

    // Readable again: nothing to do, nothing held back.
    std::fs::remove_file(&u1).unwrap();
    std::fs::rename(&kept, &u1).unwrap();
    std::fs::remove_file(&u2).unwrap();
    std::fs::write(&u2, u2_text).unwrap();
    let out = a.ok(&["sync", "now"]);
    assert!(out.contains("uploaded 0, downloaded +0 ~0 -0"), "{out}");
    let status = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(
        scope_status(&status, "user")["heldBack"],
        serde_json::json!([])
    );
}

/// Whether `needle` appears in any file under `dir`.
fn store_holds(dir: &std::path::Path, needle: &str) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
            {
                return true;
            }
        }
    }
    false
}

fn secret_notes_stay_on_this_machine_unless_included(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let b = w.device("b", &token);
    a.ok(&[
        "add",
        "--id",
        "s1",
        "--summary",
        "S",
        "--body",
        "zebra-lemon-quartz\n",
        "--tags",
        "contains-secrets",
    ]);
    a.add("plain", "P", "p\n");
    // Written by hand, untagged: the guard's match keeps it here just the same.
    std::fs::write(
        a.home.join("memory/user/vpn.md"),
        "# VPN\nvpn password: walrus-otter-77\n",
    )
    .unwrap();
    // A file that does not parse is held back whatever it holds.
    std::fs::write(
        a.home.join("memory/user/broken.md"),
        "---\nsummary: [unclosed\n---\ndb password: heron-fig-31\n",
    )
    .unwrap();
    a.add("later", "L", "first version\n");
    let out = json(&a.ok(&["--json", "sync", "now"]));
    let report = &out[0]["report"];
    assert_eq!(report["uploaded"], 2, "{out}");
    let held: Vec<(String, String)> = serde_json::from_value(report["heldBack"].clone()).unwrap();
    let held_ids: Vec<&str> = held.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(held_ids, ["broken", "s1", "vpn"], "{out}");
    assert!(
        held[1..]
            .iter()
            .all(|(_, why)| why.contains("contains-secrets")),
        "{out}"
    );
    b.ok(&["sync", "now"]);
    assert!(b.note("plain").is_some() && b.note("later").is_some());
    assert!(b.note("s1").is_none() && b.note("vpn").is_none() && b.note("broken").is_none());
    if let Some(store) = w.server.store.strip_prefix("fs:") {
        let store = std::path::Path::new(store);
        assert!(!store_holds(store, "zebra-lemon-quartz"));
        assert!(!store_holds(store, "walrus-otter-77"));
        assert!(!store_holds(store, "heron-fig-31"));
    }

    // A note that gains the tag after it was synced: the cloud keeps the version it has (no
    // delete another machine would apply), the new text stays here, and nothing reverts it.
    a.ok(&[
        "edit",
        "later",
        "--body",
        "second version, wombat-secret\n",
        "--tags",
        "contains-secrets",
    ]);
    a.ok(&["sync", "now"]);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert!(b.note("later").unwrap().contains("first version"));
    assert!(a.note("later").unwrap().contains("wombat-secret"));
    assert!(a.note("s1").is_some());
    if let Some(store) = w.server.store.strip_prefix("fs:") {
        assert!(!store_holds(std::path::Path::new(store), "wombat-secret"));
    }

    // Turned on: they go up.
    let out = a.ok(&["sync", "on", "--include-secrets"]);
    assert!(out.contains("uploaded too"), "{out}");
    assert_eq!(
        json(&a.ok(&["--json", "sync", "status"]))["includeSecrets"],
        true
    );
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert!(b.note("s1").unwrap().contains("zebra-lemon-quartz"));
    assert!(b.note("later").unwrap().contains("wombat-secret"));
}

/// A fresh clone of a project whose `MEMORY/` this machine never had (git keeps no empty
/// folder, and a clone may hold no notes yet): its first sync brings the project's notes.
/// Once it has synced, the folder going missing pauses sync as always.
fn a_fresh_clone_without_a_notes_folder_gets_the_projects_notes(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let (a, b) = (w.device("a", &token), w.device("b", &token));
    let pa = project_folder(&w.root.join("clone-a"), "shared-repo");
    a.add_to_project(&pa, "p1", "p1", "x\n");
    a.ok(&["--project", &pa, "sync", "now"]);
    let pb = w.root.join("clone-b");
    std::fs::create_dir_all(pb.join(".memoria")).unwrap();
    std::fs::write(
        pb.join(".memoria/project.json"),
        "{\"id\": \"shared-repo\"}\n",
    )
    .unwrap();
    let pb = pb.to_string_lossy().into_owned();
    b.ok(&["--project", &pb, "sync", "now"]);
    let memory = std::path::Path::new(&pb).join("MEMORY");
    assert!(has_note(&memory, "p1"), "the clone got the project's note");
    std::fs::rename(&memory, w.root.join("moved-away")).unwrap();
    let err = b.fails(&["--project", &pb, "sync", "now"]);
    assert!(err.contains("is missing"), "{err}");
    a.ok(&["--project", &pa, "sync", "now"]);
    assert!(has_note(
        std::path::Path::new(&pa).join("MEMORY").as_path(),
        "p1"
    ));
}

/// Turning one scope's sync off on a machine keeps its notes there (nothing sent or received,
/// `sync now` succeeds and says so), leaves sync as a whole on, and turning it on again syncs
/// what was written meanwhile.
fn one_scope_turned_off_stays_here_and_comes_back_when_turned_on(backend: Backend) {
    let w = world(backend, &[]);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let b = w.device("b", &token);
    a.add("n1", "First", "one\n");
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert!(b.note("n1").is_some());

    let off = json(&a.ok(&["--json", "sync", "off", "--scope", "user"]));
    assert_eq!(off, serde_json::json!({"scope": "user", "enabled": false}));
    a.add("n2", "Second", "two\n");
    let passes = json(&a.ok(&["--json", "sync", "now"]));
    assert_eq!(passes[0]["scope"], "user", "{passes}");
    assert_eq!(passes[0]["off"], true, "{passes}");
    assert!(passes[0]["error"].is_null(), "{passes}");
    assert!(
        a.ok(&["sync", "now"])
            .contains("user: turned off on this machine")
    );
    let st = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(st["on"], true, "{st}");
    assert_eq!(st["scopes"][0]["enabled"], false, "{st}");
    assert_eq!(st["scopes"][0]["on"], false, "{st}");
    assert!(
        a.ok(&["sync", "status"])
            .contains("turned off on this machine")
    );
    b.ok(&["sync", "now"]);
    assert!(b.note("n2").is_none(), "a turned-off scope sent a note");

    a.ok(&["sync", "on", "--scope", "user"]);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert!(b.note("n2").is_some());
    let st = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(st["scopes"][0]["enabled"], true, "{st}");
    // A scope that is not one of this machine's synced scopes is refused, changing nothing.
    let e = a.fails(&["sync", "off", "--scope", "domain"]);
    assert!(!e.is_empty());
}
