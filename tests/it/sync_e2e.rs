//! Cloud sync end to end: several `MEMORIA_HOME`s driven through the `memoria` CLI against the
//! real `memoria-sync` binary on loopback. Every scenario runs twice, over the filesystem store
//! (`sync_e2e::fs::…`) and over the S3 store on moto (`sync_e2e::s3::…`).

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
        d.ok(&["sync", "login", "--server", url, "--token", token]);
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
    a.ok(&[
        "add",
        "--id",
        "other",
        "--summary",
        "Other",
        "--body",
        "o\n",
    ]);
    a.ok(&["add", "--id", "gone", "--summary", "Gone", "--body", "g\n"]);
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
    a.ok(&["add", "--id", "shared", "--summary", "S", "--body", &twelve]);
    a.ok(&["add", "--id", "doomed", "--summary", "D", "--body", "d\n"]);
    for d in &devices {
        d.ok(&["sync", "now"]);
    }
    // Offline on each machine: a different line of one note, a note of its own, a delete.
    for (i, d) in devices.iter().enumerate() {
        let line = format!("s line {}\n", 2 + 4 * i);
        let body = twelve.replace(&line, &format!("s line {} (edited on {i})\n", 2 + 4 * i));
        d.ok(&["edit", "shared", "--body", &body]);
        let own = format!("own-{i}");
        d.ok(&["add", "--id", &own, "--summary", &own, "--body", "mine\n"]);
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
        a.ok(&[
            "add",
            "--id",
            id,
            "--summary",
            id,
            "--body",
            "one\ntwo\nthree\n",
        ]);
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
    a.ok(&["add", "--id", "n", "--summary", "N", "--body", "n\n"]);
    a.ok(&["sync", "off"]);
    let err = a.fails(&["sync", "now"]);
    assert!(err.contains("cloud sync is off"), "{err}");
    a.ok(&[
        "sync",
        "login",
        "--server",
        &w.server.url,
        "--token",
        &token,
    ]);
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
    a.ok(&["add", "--id", "n", "--summary", "N", "--body", "n\n"]);
    a.ok(&["sync", "now"]);
    a.token = bob.clone();
    a.ok(&["sync", "login", "--server", &w.server.url, "--token", &bob]);
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
    a.ok(&["add", "--id", "plain", "--summary", "P", "--body", "p\n"]);
    a.ok(&["add", "--id", "edited", "--summary", "E", "--body", "e\n"]);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    b.ok(&["forget", "plain", "--confirm"]);
    b.ok(&["forget", "edited", "--confirm"]);
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
