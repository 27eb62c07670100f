//! End-to-end encrypted sync between real machines (homes driven through the `memoria` CLI)
//! and the real `memoria-sync`: turning encryption on re-uploads a plaintext-synced vault and
//! removes the plaintext from the server, after which no summary word, id, tag, body line or
//! plaintext content hash is anywhere in the server's store; machines unlock with the
//! passphrase or the recovery key and still three-way merge; a tampered, swapped, truncated or
//! rolled-back object is refused naming the note with nothing written; a wrong passphrase or
//! recovery key writes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64ct::{Base64, Encoding};
use memoria_shared::ContentHash;
use memoria_shared::hash::sha256_hex;
use memoria_shared::note::{FileContext, Note};
use memoria_sync_server::store::s3::S3Store;
use memoria_sync_server::store::{ObjectStore, StoreUrl, get_opt};
use memoria_tests::project_folder;
use memoria_tests::sync_fixture::{Backend, Device};
use serde_json::Value;

use crate::sync_e2e::{World, body_lines, json, world};

const PASSPHRASE: &str = "correct horse battery staple";

/// Notes whose every word is rare enough to be found only where the note leaked.
const NOTES: &[(&str, &str, &str, &str)] = &[
    (
        "pricing-borderless-zebra",
        "Quixotic marmalade pricing",
        "heliotrope,umbrellabird",
        "the aubergine protocol sings at dawn\nsecond line of xylophonic notes\n",
    ),
    (
        "family-zanzibar-ledger",
        "Grandmother Philippa oncology visit",
        "cardamom",
        "appointment at the Vantablack clinic\nbring the periwinkle folder\n",
    ),
    (
        "money-quetzal-offshore",
        "Quetzal offshore savings plan",
        "tamarind,fjordland",
        "transfer nine hundred krugerrands\n",
    ),
];

struct Files {
    dir: PathBuf,
}

impl Files {
    fn passphrase(&self, text: &str) -> String {
        let p = self
            .dir
            .join(format!("pass-{}", sha256_hex(text.as_bytes())));
        std::fs::write(&p, format!("{text}\n")).unwrap();
        p.display().to_string()
    }
}

fn files(w: &World) -> Files {
    let dir = w.root.join("secrets");
    std::fs::create_dir_all(&dir).unwrap();
    Files { dir }
}

fn add_notes(d: &Device) {
    for (id, summary, tags, body) in NOTES {
        d.ok(&[
            "add",
            "--id",
            id,
            "--summary",
            summary,
            "--body",
            body,
            "--tags",
            tags,
        ]);
    }
}

/// Every note of [`NOTES`] reads the same on `a` and `b`.
fn assert_notes_alike(a: &Device, b: &Device) {
    for (id, ..) in NOTES {
        assert_eq!(a.note(id), b.note(id), "{id}");
    }
}

/// Every file of the store under `dir`, with its bytes.
fn store_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// What must never reach the server of the notes on `d`: ids, summary words, tags, body lines
/// and both forms of the content hash.
fn secrets_of(d: &Device) -> Vec<String> {
    let mut out = Vec::new();
    for (id, summary, tags, body) in NOTES {
        out.push(id.to_string());
        out.extend(id.split('-').filter(|w| w.len() > 4).map(str::to_owned));
        out.extend(
            summary
                .split(' ')
                .filter(|w| w.len() > 4)
                .map(str::to_owned),
        );
        out.extend(tags.split(',').map(str::to_owned));
        out.extend(body.lines().map(str::to_owned));
        let text = d.note(id).unwrap_or_else(|| panic!("{id} on {:?}", d.home));
        let note = Note::parse(
            &text,
            FileContext {
                relative_path: &format!("{id}.md"),
            },
        )
        .unwrap();
        out.push(ContentHash::of_synced_note(&note).as_str().to_owned());
        out.push(ContentHash::of_note(&note).as_str().to_owned());
    }
    out
}

/// Every object of the server's store, by its key: the files of a filesystem store as they
/// are on disk, the objects of an S3 bucket as the bucket gives them.
fn stored_objects(w: &World, backend: Backend) -> BTreeMap<String, Vec<u8>> {
    match backend {
        Backend::Fs => store_files(&store_dir(w))
            .into_iter()
            .map(|(p, b)| (p.display().to_string(), b))
            .collect(),
        Backend::S3 => {
            let Ok(StoreUrl::S3(loc)) = w.server.store.parse::<StoreUrl>() else {
                panic!("not an s3 store: {}", w.server.store)
            };
            let store = S3Store::new(loc, "test", "test", None);
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(async {
                let mut out = BTreeMap::new();
                for key in store.list("").await.unwrap() {
                    if let Some(o) = get_opt(&store, &key).await.unwrap() {
                        out.insert(key, o.bytes);
                    }
                }
                out
            })
        }
    }
}

fn assert_no_leak(objects: &BTreeMap<String, Vec<u8>>, secrets: &[String]) {
    assert!(
        objects.keys().any(|k| k.contains("/objects/")),
        "{objects:?}"
    );
    for (key, bytes) in objects {
        let text = format!("{key}\n{}", String::from_utf8_lossy(bytes)).to_lowercase();
        for s in secrets {
            assert!(
                !text.contains(&s.to_lowercase()),
                "{s:?} is in {key} on the server"
            );
        }
    }
}

fn error_code(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON error in {stderr}"));
    json(line)["error"]["code"].as_str().unwrap().to_owned()
}

/// Two machines of one account: `a` synced in plaintext, then turned encryption on; `b`
/// unlocked with the passphrase.
fn encrypted_pair(backend: Backend) -> (World, Files, Device, Device, String) {
    let w = world(backend, &[]);
    let f = files(&w);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    let b = w.device("b", &token);
    add_notes(&a);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    let rec = f.dir.join("recovery.txt");
    let out = a.ok(&[
        "sync",
        "encrypt",
        "--passphrase-file",
        &f.passphrase(PASSPHRASE),
        "--recovery-file",
        &rec.display().to_string(),
    ]);
    let recovery = std::fs::read_to_string(&rec).unwrap().trim().to_owned();
    assert!(out.contains(&recovery), "{out}");
    assert_eq!(recovery.len(), 56 + 13, "{recovery}");
    // A machine without the key neither reads nor writes the encrypted scope.
    let err = b.fails(&["--json", "sync", "now"]);
    assert_eq!(error_code(&err), "e2ee_locked", "{err}");
    let err = b.fails(&["sync", "now"]);
    assert!(err.contains("memoria sync unlock"), "{err}");
    b.ok(&[
        "sync",
        "unlock",
        "--passphrase-file",
        &f.passphrase(PASSPHRASE),
    ]);
    (w, f, a, b, recovery)
}

fn store_dir(w: &World) -> PathBuf {
    w.root.join("store")
}

#[test]
fn e2ee_fs_store_holds_no_plaintext_and_machines_converge() {
    no_plaintext_on_the_server(Backend::Fs);
}

#[test]
fn e2ee_s3_store_holds_no_plaintext_and_machines_converge() {
    no_plaintext_on_the_server(Backend::S3);
}

/// A project that first syncs after encryption was turned on: its id never reaches the
/// server either.
const PROJECT: &str = "zeppelin-archive-project";
const PROJECT_NOTE: (&str, &str, &str) = (
    "project-mandolin-roadmap",
    "Mandolin roadmap milestones",
    "the gyroscope milestone slips a fortnight\n",
);

/// A folder `name` under the world's root that is a worktree of [`PROJECT`].
fn project_dir(w: &World, name: &str) -> String {
    project_folder(&w.root.join(name), PROJECT)
}

fn no_plaintext_on_the_server(backend: Backend) {
    let (w, f, a, b, recovery, _pa, pb) = encrypted_pair_with_a_project(backend);
    let (pid, psummary, pbody) = PROJECT_NOTE;
    assert_notes_alike(&a, &b);
    assert_project_note_in(&pb);
    // Both sides edit, both sync, all agree.
    a.ok(&[
        "edit",
        NOTES[0].0,
        "--body",
        "the aubergine protocol sings at dawn\nedited on a\n",
    ]);
    b.add("newt-from-b", "Newt", "n\n");
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    a.ok(&["sync", "now"]);
    assert_eq!(a.note(NOTES[0].0), b.note(NOTES[0].0));
    assert!(a.note("newt-from-b").is_some());
    let status = a.ok(&["sync", "status"]);
    assert!(status.contains("end-to-end encrypted"), "{status}");

    let mut secrets = secrets_of(&a);
    secrets.push("newt-from-b".into());
    secrets.extend([PROJECT, pid, psummary, pbody.trim()].map(str::to_owned));
    secrets.extend(["zeppelin", "mandolin", "gyroscope"].map(str::to_owned));
    assert_no_leak(&stored_objects(&w, backend), &secrets);

    // A third machine unlocks with the recovery key and gets every note.
    let c = w.device("c", &a.token);
    c.ok(&["sync", "unlock", "--recovery-key", &recovery]);
    assert_notes_alike(&a, &c);
    drop(f);
}

#[test]
fn e2ee_wrong_passphrase_or_recovery_key_writes_nothing() {
    let (w, f, a, _b, recovery) = encrypted_pair(Backend::Fs);
    let c = w.device("c", &a.token);
    // What a refusal must leave as it was: the home's sync state and its notes.
    let kept = |d: &Device| {
        let mut all = store_files(&d.home.join("sync"));
        if d.home.join("memory").exists() {
            all.extend(store_files(&d.home.join("memory")));
        }
        all
    };
    let before = kept(&c);
    let err = c.fails(&[
        "--json",
        "sync",
        "unlock",
        "--passphrase-file",
        &f.passphrase("correct horse battery stapler"),
    ]);
    assert_eq!(error_code(&err), "wrong_passphrase", "{err}");
    let other = memoria_shared::e2ee::RecoveryKey::from_bytes([7; 32]).to_text();
    let err = c.fails(&["--json", "sync", "unlock", "--recovery-key", &other]);
    assert_eq!(error_code(&err), "wrong_passphrase", "{err}");
    // One symbol mistyped: caught by the checksum before anything is tried.
    let typo: String = recovery
        .chars()
        .enumerate()
        .map(|(i, ch)| match (i, ch) {
            (0, '0') => '1',
            (0, _) => '0',
            _ => ch,
        })
        .collect();
    let err = c.fails(&["--json", "sync", "unlock", "--recovery-key", &typo]);
    assert_eq!(error_code(&err), "invalid_input", "{err}");
    assert_eq!(kept(&c), before, "nothing written on a refusal");
    let status: Value = json(&c.ok(&["--json", "sync", "status"]));
    assert_eq!(status["encrypted"], false, "{status}");
    // Turning encryption on again from another machine is refused too.
    let err = c.fails(&[
        "--json",
        "sync",
        "encrypt",
        "--passphrase-file",
        &f.passphrase("another long passphrase"),
    ]);
    assert_eq!(error_code(&err), "exists", "{err}");
}

/// Changing the passphrase rewraps the account key without uploading a note again: a new
/// machine unlocks with the new passphrase and not the old, the recovery key still unlocks and
/// also resets a forgotten passphrase, machines already unlocked keep syncing, and a wrong
/// current passphrase changes nothing.
#[test]
fn e2ee_passphrase_change_rewraps_the_key_and_uploads_nothing() {
    let (w, f, a, b, recovery) = encrypted_pair(Backend::Fs);
    let store = store_dir(&w);
    let notes_only = |files: BTreeMap<PathBuf, Vec<u8>>| -> BTreeMap<PathBuf, Vec<u8>> {
        files
            .into_iter()
            .filter(|(p, _)| p.components().any(|c| c.as_os_str() == "objects"))
            .collect()
    };
    let stored = notes_only(store_files(&store));
    assert!(!stored.is_empty(), "the notes' revision files in the store");
    let new = "a different passphrase, longer";
    let err = a.fails(&[
        "--json",
        "sync",
        "passphrase",
        "--passphrase-file",
        &f.passphrase("not the passphrase at all"),
        "--new-passphrase-file",
        &f.passphrase(new),
    ]);
    assert_eq!(error_code(&err), "wrong_passphrase", "{err}");
    a.ok(&[
        "sync",
        "passphrase",
        "--passphrase-file",
        &f.passphrase(PASSPHRASE),
        "--new-passphrase-file",
        &f.passphrase(new),
    ]);
    assert_eq!(
        notes_only(store_files(&store)),
        stored,
        "no note was uploaded again"
    );

    let c = w.device("c", &a.token);
    let err = c.fails(&[
        "--json",
        "sync",
        "unlock",
        "--passphrase-file",
        &f.passphrase(PASSPHRASE),
    ]);
    assert_eq!(
        error_code(&err),
        "wrong_passphrase",
        "the old passphrase: {err}"
    );
    c.ok(&["sync", "unlock", "--passphrase-file", &f.passphrase(new)]);
    let d = w.device("d", &a.token);
    d.ok(&["sync", "unlock", "--recovery-key", &recovery]);

    // A forgotten passphrase is replaced with the recovery key.
    let newer = "the newest passphrase of all";
    d.ok(&[
        "sync",
        "passphrase",
        "--recovery-key",
        &recovery,
        "--new-passphrase-file",
        &f.passphrase(newer),
    ]);
    let e = w.device("e", &a.token);
    e.ok(&["sync", "unlock", "--passphrase-file", &f.passphrase(newer)]);

    // Machines unlocked before keep syncing with each other.
    a.add(
        "after-rewrap",
        "After the rewrap",
        "written after the passphrase changed",
    );
    a.ok(&["sync", "now"]);
    for d in [&b, &c, &e] {
        d.ok(&["sync", "now"]);
    }
    assert!(
        e.note("after-rewrap").is_some(),
        "the note reached a machine unlocked anew"
    );
    assert!(
        b.note("after-rewrap").is_some(),
        "the note reached a machine unlocked before"
    );
}

#[test]
fn e2ee_merges_different_lines_and_conflicts_on_the_same_line() {
    let (_w, _f, a, b, _) = encrypted_pair(Backend::Fs);
    let ten = body_lines(10, "m");
    a.add("doc", "Doc", &ten);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert_eq!(a.note("doc"), b.note("doc"));
    a.ok(&[
        "edit",
        "doc",
        "--body",
        &ten.replace("m line 2\n", "m line 2 (a)\n"),
    ]);
    b.ok(&[
        "edit",
        "doc",
        "--body",
        &ten.replace("m line 8\n", "m line 8 (b)\n"),
    ]);
    a.ok(&["sync", "now"]);
    let out = b.ok(&["sync", "now"]);
    assert!(out.contains("merged 1"), "{out}");
    a.ok(&["sync", "now"]);
    let merged = a.note("doc").unwrap();
    assert!(
        merged.contains("m line 2 (a)") && merged.contains("m line 8 (b)"),
        "{merged}"
    );
    assert_eq!(a.note("doc"), b.note("doc"));

    // The same line on both: a conflict, as without encryption.
    let now = merged.split("\n---\n").nth(1).unwrap().to_owned();
    a.ok(&[
        "edit",
        "doc",
        "--body",
        &now.replace("m line 5\n", "m line 5 (a)\n"),
    ]);
    b.ok(&[
        "edit",
        "doc",
        "--body",
        &now.replace("m line 5\n", "m line 5 (b)\n"),
    ]);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    let conflicts = json(&b.ok(&["--json", "conflicts"]));
    let list = conflicts
        .as_array()
        .unwrap_or_else(|| panic!("{conflicts}"));
    assert_eq!(list.len(), 1, "{conflicts}");
    assert!(list[0].to_string().contains("doc"), "{conflicts}");
    assert!(b.note("doc").unwrap().contains("m line 5 (b)"));
}

/// The envelope file split into its header and sealed bytes.
fn read_envelope(text: &str) -> (Value, Vec<u8>) {
    let rest = text.strip_prefix("---\n").unwrap();
    let (header, b64) = rest.split_once("\n---\n").unwrap();
    (json(header), Base64::decode_vec(b64).unwrap())
}

fn write_envelope(mut header: Value, sealed: &[u8]) -> String {
    header["sum"] = Value::String(sha256_hex(sealed));
    format!(
        "---\n{}\n---\n{}",
        serde_json::to_string(&header).unwrap(),
        Base64::encode_string(sealed)
    )
}

/// The user scope's manifest entries, by opaque id.
fn manifest(store: &Path) -> (PathBuf, Value) {
    let path = store.join("users/alice/memory/manifest.json");
    let m = json(&std::fs::read_to_string(&path).unwrap());
    (path, m)
}

fn object_path(store: &Path, id: &str, rev: &str) -> PathBuf {
    store.join(format!("users/alice/memory/objects/{id}/{rev}.md"))
}

/// The opaque id of the live note whose revision `a`'s last pass uploaded for `id`: the one
/// entry that changed between two reads of the manifest around `change`.
fn changed_entry(store: &Path, change: impl FnOnce()) -> (String, String, String) {
    let rev = |m: &Value| -> BTreeMap<String, (String, String)> {
        m["notes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["deleted"] != true)
            .map(|e| {
                (
                    e["id"].as_str().unwrap().to_owned(),
                    (
                        e["revision"].as_str().unwrap().to_owned(),
                        e["hash"].as_str().unwrap().to_owned(),
                    ),
                )
            })
            .collect()
    };
    let before = rev(&manifest(store).1);
    change();
    let after = rev(&manifest(store).1);
    let changed: Vec<_> = after
        .into_iter()
        .filter(|(id, r)| before.get(id) != Some(r))
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    let (id, (rev, hash)) = changed.into_iter().next().unwrap();
    (id, rev, hash)
}

#[test]
fn e2ee_tampered_swapped_truncated_or_rolled_back_objects_are_refused_naming_the_note() {
    let (w, _f, a, b, _) = encrypted_pair(Backend::Fs);
    let store = store_dir(&w);
    let target = NOTES[1].0;
    let edit = |d: &Device, text: &str| {
        d.ok(&["edit", target, "--body", text]);
    };
    // v2 reaches both machines; v3 is uploaded by `a` and its object then tampered with
    // before `b` takes it.
    let (opaque, rev2, hash2) = changed_entry(&store, || {
        edit(&a, "version two\n");
        a.ok(&["sync", "now"]);
    });
    b.ok(&["sync", "now"]);
    let (same, rev3, _) = changed_entry(&store, || {
        edit(&a, "version three\n");
        a.ok(&["sync", "now"]);
    });
    assert_eq!(same, opaque);
    let (other_id, other_rev, _) = {
        let (_, m) = manifest(&store);
        let e = m["notes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] != opaque.as_str() && e["deleted"] != true)
            .unwrap()
            .clone();
        (
            e["id"].as_str().unwrap().to_owned(),
            e["revision"].as_str().unwrap().to_owned(),
            (),
        )
    };
    let v3_path = object_path(&store, &opaque, &rev3);
    let v3 = std::fs::read_to_string(&v3_path).unwrap();
    let b_before = b.note(target).unwrap();
    assert!(b_before.contains("version two"));

    let refused = |what: &str, want: &str, kept: &str| {
        let err = b.fails(&["--json", "sync", "now"]);
        assert_eq!(error_code(&err), "corrupt_reply", "{what}: {err}");
        assert!(
            err.contains(target),
            "{what}: the error names the note: {err}"
        );
        assert!(err.contains(want), "{what}: {err}");
        assert_eq!(b.note(target).unwrap(), kept, "{what}: nothing written");
    };

    // A bit flipped in the ciphertext, its checksum redone so the server passes it on.
    let (header, mut sealed) = read_envelope(&v3);
    sealed[40] ^= 1;
    std::fs::write(&v3_path, write_envelope(header.clone(), &sealed)).unwrap();
    refused("bit flip", "does not authenticate", &b_before);

    // Truncated, the checksum redone.
    let (_, sealed) = read_envelope(&v3);
    std::fs::write(
        &v3_path,
        write_envelope(header.clone(), &sealed[..sealed.len() - 20]),
    )
    .unwrap();
    refused("truncation", "does not authenticate", &b_before);

    // Another note's ciphertext under this note's id and hash.
    let other = std::fs::read_to_string(object_path(&store, &other_id, &other_rev)).unwrap();
    let (_, other_sealed) = read_envelope(&other);
    std::fs::write(&v3_path, write_envelope(header.clone(), &other_sealed)).unwrap();
    refused("swap", "does not authenticate", &b_before);

    // Put right, `b` takes version three.
    std::fs::write(&v3_path, &v3).unwrap();
    b.ok(&["sync", "now"]);
    let b_v3 = b.note(target).unwrap();
    assert!(b_v3.contains("version three"));

    // The older genuine version served again as the current one (the manifest rewritten to
    // name it): authentic, but older than what `b` took.
    let (mpath, mut m) = manifest(&store);
    let genuine = std::fs::read(&mpath).unwrap();
    let generation = m["generation"].as_u64().unwrap() + 1;
    m["generation"] = generation.into();
    m["changed"][&opaque] = generation.into();
    for e in m["notes"].as_array_mut().unwrap() {
        if e["id"] == opaque.as_str() {
            e["revision"] = rev2.clone().into();
            e["hash"] = hash2.clone().into();
        }
    }
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
    refused("rollback", "older version", &b_v3);

    // Put right: the manifest as it was, then the next version from `a`.
    std::fs::write(&mpath, genuine).unwrap();
    b.ok(&["sync", "now"]);
    edit(&a, "version four\n");
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert_eq!(a.note(target), b.note(target));
}

/// A plaintext commit `changes` to `scope` straight to the server: its status and JSON body.
fn plaintext_commit(url: &str, token: &str, scope: &str, id: &str) -> (u16, Value) {
    let (file, hash) = memoria_tests::sync_server::note_file(id, "Plain", "plain words\n");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let r = reqwest::Client::new()
            .post(format!("{url}/v1/memory/commit"))
            .bearer_auth(token)
            .json(&serde_json::json!({"scope": scope, "changes": [{
                "id": id, "op": "put", "baseRevision": null,
                "body": file, "hash": hash.as_str(),
            }]}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    })
}

/// In an account with encryption on, no client writes plaintext into a scope the server has
/// never held: a client that does not know encryption is refused with `scope_encrypted` and
/// nothing is stored, and a machine not unlocked is `e2ee_locked` for a new project too. A
/// machine that holds the key creates the project encrypted (it marks the scope first), and an
/// account without encryption creates scopes in plaintext as before.
#[test]
fn e2ee_account_never_gets_a_new_plaintext_scope() {
    let w = world(Backend::Fs, &[]);
    let f = files(&w);
    let token = w.server.token("alice");
    let a = w.device("a", &token);
    add_notes(&a);
    a.ok(&["sync", "now"]);
    a.ok(&[
        "sync",
        "encrypt",
        "--passphrase-file",
        &f.passphrase(PASSPHRASE),
    ]);
    let store = store_dir(&w);
    let before = store_files(&store);

    let (status, body) = plaintext_commit(&w.server.url, &token, "project:brand-new", "plain");
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "scope_encrypted", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("a new scope is only ever created encrypted"),
        "{body}"
    );
    assert_eq!(store_files(&store), before, "nothing stored");

    // The current client on a machine not unlocked: its new project is refused the same way.
    let b = w.device("b", &token);
    let pb = project_dir(&w, "b-proj");
    b.add_to_project(&pb, "plain-project-note", "Plain", "x\n");
    let out = b.run(&["--json", "--project", &pb, "sync", "now"]);
    assert!(!out.status.success());
    let passes = json(&String::from_utf8_lossy(&out.stdout));
    let project = passes
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["scope"] == format!("project:{PROJECT}"))
        .unwrap_or_else(|| panic!("no pass of the project: {passes}"));
    assert_eq!(project["error"]["code"], "e2ee_locked", "{passes}");
    assert_eq!(store_files(&store), before, "nothing stored");

    // The machine holding the key creates the project encrypted.
    let pa = project_dir(&w, "a-proj");
    a.add_to_project(&pa, "plain-project-note", "Plain", "x\n");
    a.ok(&["--project", &pa, "sync", "now"]);
    let created: Vec<String> = store_files(&store)
        .into_keys()
        .filter(|p| !before.contains_key(p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        created.iter().any(|p| p.contains("/objects/")),
        "{created:?}"
    );
    assert!(
        created.iter().all(|p| !p.contains(PROJECT)),
        "only the opaque project: {created:?}"
    );

    // An account without encryption is unaffected.
    let bob = w.server.token("bob");
    let (status, body) = plaintext_commit(&w.server.url, &bob, "project:brand-new", "plain");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["applied"][0]["id"], "plain", "{body}");
}

/// Every object of the world's store, whichever it is.
fn objects(w: &World) -> BTreeMap<String, Vec<u8>> {
    let backend = match w.server.store.parse::<StoreUrl>() {
        Ok(StoreUrl::S3(_)) => Backend::S3,
        _ => Backend::Fs,
    };
    stored_objects(w, backend)
}

/// The key id the account's passphrase blob on the server wraps, and the blobs themselves.
fn account_keys(objects: &BTreeMap<String, Vec<u8>>) -> (String, Value) {
    let (path, bytes) = objects
        .iter()
        .find(|(p, _)| p.ends_with("e2ee/keys.json"))
        .expect("the account's keys in the store");
    let keys = json(&String::from_utf8_lossy(bytes));
    let pass = json(keys["passphrase"].as_str().unwrap());
    let kid = pass["kid"].as_str().unwrap().to_owned();
    assert_eq!(kid.len(), 16, "{path:?}: {keys}");
    (kid, keys)
}

/// The files of the store that name `kid`: every envelope under it, a mark, a blob.
fn files_naming(objects: &BTreeMap<String, Vec<u8>>, kid: &str) -> Vec<String> {
    objects
        .iter()
        .filter(|(_, b)| String::from_utf8_lossy(b).contains(kid))
        .map(|(p, _)| p.clone())
        .collect()
}

/// Every envelope in the store is under `kid`; how many there are.
fn envelopes_all_under(objects: &BTreeMap<String, Vec<u8>>, kid: &str) -> usize {
    let mut n = 0;
    for (p, b) in objects {
        let text = String::from_utf8_lossy(b);
        if p.contains("/objects/") && text.contains("\"e2ee\":") {
            let (header, _) = read_envelope(&text);
            assert_eq!(header["kid"], kid, "{p:?} is under another key");
            n += 1;
        }
    }
    n
}

fn rotate(d: &Device, f: &Files, project: Option<&str>, extra: &[&str]) -> (Value, String) {
    let rec = f.dir.join(format!("rec-{}", rand_name()));
    let pass = f.passphrase(PASSPHRASE);
    let rec_s = rec.display().to_string();
    let mut args: Vec<&str> = Vec::new();
    if let Some(p) = project {
        args.extend(["--project", p]);
    }
    args.extend([
        "--json",
        "sync",
        "rotate-key",
        "--passphrase-file",
        &pass,
        "--recovery-file",
        &rec_s,
    ]);
    args.extend(extra);
    let out = d.run(&args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let recovery = std::fs::read_to_string(&rec).unwrap().trim().to_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (json(&stdout), recovery)
}

fn rand_name() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::SeqCst).to_string()
}

/// `a` and `b` still three-way merge: a note `doc` of ten lines `tag line N` written on `a`,
/// its line 2 edited on `a` and its line 8 on `b`, merges on `b` and both end with both edits.
fn edits_to_different_lines_merge(a: &Device, b: &Device, tag: &str) {
    let ten = body_lines(10, tag);
    a.add("doc", "Doc", &ten);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    let (two, eight) = (format!("{tag} line 2\n"), format!("{tag} line 8\n"));
    let (two_a, eight_b) = (format!("{tag} line 2 (a)\n"), format!("{tag} line 8 (b)\n"));
    a.ok(&["edit", "doc", "--body", &ten.replace(&two, &two_a)]);
    b.ok(&["edit", "doc", "--body", &ten.replace(&eight, &eight_b)]);
    a.ok(&["sync", "now"]);
    let merged = b.ok(&["sync", "now"]);
    assert!(merged.contains("merged 1"), "{merged}");
    a.ok(&["sync", "now"]);
    let doc = a.note("doc").unwrap();
    assert_eq!(Some(&doc), b.note("doc").as_ref());
    assert!(doc.contains(&two_a) && doc.contains(&eight_b), "{doc}");
}

/// [`PROJECT_NOTE`] is in the worktree `dir`'s notes, its body whole.
fn assert_project_note_in(dir: &str) {
    let (pid, _, pbody) = PROJECT_NOTE;
    let note = std::fs::read_to_string(Path::new(dir).join(format!("MEMORY/{pid}.md"))).unwrap();
    assert!(note.contains(pbody.trim()), "{note}");
}

/// [`encrypted_pair`] with a project each machine has a worktree of (`pa` on a, `pb` on b)
/// and [`PROJECT_NOTE`] written on a and synced to both.
fn encrypted_pair_with_a_project(
    backend: Backend,
) -> (World, Files, Device, Device, String, String, String) {
    let (w, f, a, b, recovery) = encrypted_pair(backend);
    let (pa, pb) = (project_dir(&w, "a-proj"), project_dir(&w, "b-proj"));
    let (pid, psummary, pbody) = PROJECT_NOTE;
    a.add_to_project(&pa, pid, psummary, pbody);
    a.ok(&["--project", &pa, "sync", "now"]);
    b.ok(&["--project", &pb, "sync", "now"]);
    (w, f, a, b, recovery, pa, pb)
}

#[test]
fn e2ee_rotating_the_key_re_encrypts_everything_and_other_machines_follow_fs() {
    rotation_between_two_machines(Backend::Fs);
}

#[test]
fn e2ee_rotating_the_key_re_encrypts_everything_and_other_machines_follow_s3() {
    rotation_between_two_machines(Backend::S3);
}

fn rotation_between_two_machines(backend: Backend) {
    let (w, f, a, b, old_recovery, pa, pb) = encrypted_pair_with_a_project(backend);
    let (old_kid, _) = account_keys(&objects(&w));
    assert!(envelopes_all_under(&objects(&w), &old_kid) > NOTES.len());

    // A wrong passphrase changes nothing anywhere.
    let before = objects(&w);
    let err = a.fails(&[
        "--json",
        "sync",
        "rotate-key",
        "--passphrase-file",
        &f.passphrase("not the passphrase at all"),
    ]);
    assert_eq!(error_code(&err), "wrong_passphrase", "{err}");
    assert_eq!(objects(&w), before, "nothing was written to the store");

    let (out, recovery) = rotate(&a, &f, Some(&pa), &[]);
    assert_eq!(out["complete"], true, "{out}");
    assert_eq!(out["lockedOut"], false, "{out}");
    assert_eq!(out["recoveryKey"], recovery.as_str(), "{out}");
    let (new_kid, keys) = account_keys(&objects(&w));
    assert_eq!(out["kid"], new_kid.as_str(), "{out}");
    assert_ne!(new_kid, old_kid);
    assert!(keys.get("previous").is_none(), "the rotation ended: {keys}");
    // Nothing under the old key is left: no envelope, no mark, no blob names it.
    assert_eq!(files_naming(&objects(&w), &old_kid), Vec::<String>::new());
    assert!(envelopes_all_under(&objects(&w), &new_kid) > NOTES.len());

    // The other machine follows at its next sync, with nothing lost, and they still merge.
    b.ok(&["sync", "now"]);
    b.ok(&["--project", &pb, "sync", "now"]);
    assert_notes_alike(&a, &b);
    assert_project_note_in(&pb);
    edits_to_different_lines_merge(&a, &b, "r");
    assert_eq!(files_naming(&objects(&w), &old_kid), Vec::<String>::new());

    // The new recovery key unlocks a new machine; the old one no longer does.
    let c = w.device("c", &a.token);
    let err = c.fails(&["--json", "sync", "unlock", "--recovery-key", &old_recovery]);
    assert_eq!(error_code(&err), "wrong_passphrase", "{err}");
    c.ok(&["sync", "unlock", "--recovery-key", &recovery]);
    assert_eq!(a.note("doc"), c.note("doc"));
}

/// Whether any file of the store is an envelope, a scope's encryption mark or the account's
/// wrapped keys.
fn encrypted_leftovers(objects: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    objects
        .iter()
        .filter(|(p, b)| {
            let text = String::from_utf8_lossy(b);
            p.ends_with("e2ee/keys.json")
                || text.contains("\"e2ee\":")
                || text.contains("\"e2eeOff\":")
        })
        .map(|(p, _)| p.clone())
        .collect()
}

#[test]
fn e2ee_turning_encryption_off_puts_plaintext_back_and_removes_every_envelope_fs() {
    turning_off_between_two_machines(Backend::Fs);
}

#[test]
fn e2ee_turning_encryption_off_puts_plaintext_back_and_removes_every_envelope_s3() {
    turning_off_between_two_machines(Backend::S3);
}

fn turning_off_between_two_machines(backend: Backend) {
    let (w, _f, a, b, _, pa, pb) = encrypted_pair_with_a_project(backend);
    let (_, _, pbody) = PROJECT_NOTE;
    // A note only the cloud and b hold: a's last encrypted pass brings it before anything goes.
    b.add("written-on-b", "Written on b", "the ocelot line\n");
    b.ok(&["sync", "now"]);

    // Without a terminal to ask on, nothing changes unless --yes says so.
    let before = objects(&w);
    let err = a.fails(&["sync", "decrypt"]);
    assert!(err.contains("--yes"), "{err}");
    assert_eq!(objects(&w), before, "nothing was written to the store");

    let out = json(&a.ok(&["--project", &pa, "--json", "sync", "decrypt", "--yes"]));
    assert_eq!(out["complete"], true, "{out}");
    assert_eq!(
        encrypted_leftovers(&objects(&w)),
        Vec::<String>::new(),
        "no envelope, mark or wrapped key is left"
    );
    assert!(a.note("written-on-b").is_some());
    let text: String = objects(&w)
        .values()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    for line in [
        "the ocelot line",
        "transfer nine hundred krugerrands",
        pbody.trim(),
    ] {
        assert!(text.contains(line), "{line:?} is back in plaintext");
    }
    let status = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(status["encrypted"], false, "{status}");
    assert_eq!(status["encryptionEnded"], false, "{status}");

    // The other machine goes back to plaintext at its next sync, nothing lost.
    b.ok(&["sync", "now"]);
    b.ok(&["--project", &pb, "sync", "now"]);
    let status = json(&b.ok(&["--json", "sync", "status"]));
    assert_eq!(status["encrypted"], false, "{status}");
    assert_eq!(status["encryptionEnded"], true, "{status}");
    let said = b.ok(&["sync", "status"]);
    assert!(said.contains("encryption was turned off"), "{said}");
    assert_notes_alike(&a, &b);
    assert_eq!(a.note("written-on-b"), b.note("written-on-b"));
    assert_project_note_in(&pb);

    // And they keep syncing, in plaintext.
    edits_to_different_lines_merge(&a, &b, "p");
    assert_eq!(encrypted_leftovers(&objects(&w)), Vec::<String>::new());
    let text: String = objects(&w)
        .values()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    assert!(text.contains("p line 8 (b)"), "the merge is in plaintext");
}

/// How many notes [`encrypted_pair_with_bulk_notes`] adds: enough that a pass re-encrypting
/// or decrypting them takes long enough to be killed midway.
const BULK: usize = 60;

/// [`encrypted_pair`] on a filesystem store with [`BULK`] more notes written straight into
/// `a`'s user folder, synced to both machines.
fn encrypted_pair_with_bulk_notes() -> (World, Files, Device, Device) {
    let (w, f, a, b, _) = encrypted_pair(Backend::Fs);
    let dir = a.home.join("memory/user");
    for i in 0..BULK {
        std::fs::write(
            dir.join(format!("bulk-note-{i}.md")),
            format!(
                "---\n{{\"id\":\"bulk-note-{i}\",\"summary\":\"Bulk note {i}\",\"tags\":[]}}\n---\nline {i}\n"
            ),
        )
        .unwrap();
    }
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    (w, f, a, b)
}

/// The path of the account's wrapped keys in the world's filesystem store.
fn keys_file(w: &World) -> String {
    objects(w)
        .into_keys()
        .find(|p| p.ends_with("e2ee/keys.json"))
        .unwrap()
}

/// Starts `memoria ARGS` on `d` and kills it as soon as the account's keys hold `mark`: the
/// pass it began is cut off at whatever step it had reached.
fn kill_once_the_keys_say(w: &World, d: &Device, args: &[&str], mark: &str) {
    let keys = keys_file(w);
    let mut child = d.spawn(args);
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&keys).is_ok_and(|t| t.contains(mark)) {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "memoria {args:?} never wrote {mark} into the keys"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Every note of [`NOTES`] and every bulk note reads the same on `a` and `b`.
fn assert_all_notes_alike(a: &Device, b: &Device) {
    for i in 0..BULK {
        let id = format!("bulk-note-{i}");
        assert!(b.note(&id).is_some(), "{id}");
        assert_eq!(a.note(&id), b.note(&id), "{id}");
    }
    assert_notes_alike(a, b);
}

#[test]
fn e2ee_a_rotation_left_halfway_is_finished_by_running_it_again_and_locks_out_the_old_key() {
    let (w, f, a, b, _, pa, pb) = encrypted_pair_with_a_project(Backend::Fs);
    let (old_kid, _) = account_keys(&objects(&w));

    // Run where only the user scope is visible: the project stays under the old key.
    let (out, first_recovery) = rotate(&a, &f, None, &["--lock-out"]);
    assert_eq!(out["complete"], false, "{out}");
    assert_eq!(out["lockedOut"], true, "{out}");
    let (new_kid, keys) = account_keys(&objects(&w));
    assert!(keys.get("previous").is_some(), "under way: {keys}");
    assert!(keys.get("successor").is_none(), "locked out: {keys}");
    assert!(!files_naming(&objects(&w), &old_kid).is_empty());

    // The machine holding only the old key is locked out of what moved, its notes untouched.
    let notes_of_b = store_files(&b.home.join("memory/user"));
    let err = b.fails(&["--json", "sync", "now"]);
    assert_eq!(error_code(&err), "e2ee_locked", "{err}");
    assert_eq!(store_files(&b.home.join("memory/user")), notes_of_b);
    // What has not moved yet it still syncs: a project note written there now is not lost.
    let late = Path::new(&pb).join("MEMORY/late-project-note.md");
    std::fs::write(
        &late,
        "---\n{\"id\":\"late-project-note\",\"summary\":\"Late\",\"tags\":[]}\n---\nwritten before the move\n",
    )
    .unwrap();
    let out = b.run(&["--project", &pb, "sync", "now"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("project:{PROJECT}: uploaded 1")),
        "{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Run again where the project is visible: the rotation under way is finished, with a
    // new recovery key.
    let (out, recovery) = rotate(&a, &f, Some(&pa), &["--lock-out"]);
    assert_eq!(out["complete"], true, "{out}");
    assert_eq!(out["kid"], new_kid.as_str(), "the same rotation: {out}");
    assert_ne!(recovery, first_recovery);
    let (_, keys) = account_keys(&objects(&w));
    assert!(keys.get("previous").is_none(), "{keys}");
    assert_eq!(files_naming(&objects(&w), &old_kid), Vec::<String>::new());
    assert!(
        Path::new(&pa).join("MEMORY/late-project-note.md").exists(),
        "the note written under the old key was carried over"
    );

    // Only the latest recovery key unlocks.
    let err = b.fails(&[
        "--json",
        "sync",
        "unlock",
        "--recovery-key",
        &first_recovery,
    ]);
    assert_eq!(error_code(&err), "wrong_passphrase", "{err}");
    b.ok(&["sync", "unlock", "--recovery-key", &recovery]);
    b.ok(&["--project", &pb, "sync", "now"]);
    assert_notes_alike(&a, &b);
    assert_project_note_in(&pb);
    assert_eq!(files_naming(&objects(&w), &old_kid), Vec::<String>::new());
}

#[test]
fn e2ee_a_rotation_killed_midway_resumes_and_no_machine_loses_a_note() {
    let (w, f, a, b) = encrypted_pair_with_bulk_notes();
    let (old_kid, _) = account_keys(&objects(&w));
    kill_once_the_keys_say(
        &w,
        &a,
        &[
            "sync",
            "rotate-key",
            "--passphrase-file",
            &f.passphrase(PASSPHRASE),
        ],
        "\"previous\"",
    );

    // Whatever step the kill interrupted, the next sync of the machine that began it finishes
    // the rotation, and the other machine follows.
    a.ok(&["sync", "now"]);
    let (_, keys) = account_keys(&objects(&w));
    assert!(keys.get("previous").is_none(), "finished: {keys}");
    b.ok(&["sync", "now"]);
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    assert_eq!(files_naming(&objects(&w), &old_kid), Vec::<String>::new());
    assert_all_notes_alike(&a, &b);
    let (new_kid, _) = account_keys(&objects(&w));
    assert_ne!(new_kid, old_kid);
    assert!(envelopes_all_under(&objects(&w), &new_kid) >= BULK + NOTES.len());
}

#[test]
fn e2ee_turning_off_left_halfway_is_finished_by_other_machines_syncing() {
    let (w, _f, a, b, _, pa, pb) = encrypted_pair_with_a_project(Backend::Fs);

    // Only the user scope is visible: the project stays encrypted for now.
    let out = json(&a.ok(&["--json", "sync", "decrypt", "--yes"]));
    assert_eq!(out["complete"], false, "{out}");
    let (_, keys) = account_keys(&objects(&w));
    assert!(keys["off"].is_string(), "{keys}");
    let status = a.ok(&["sync", "status"]);
    assert!(status.contains("being turned off"), "{status}");

    // The other machine learns it from the user scope, then takes the project back itself.
    b.ok(&["sync", "now"]);
    b.add_to_project(&pb, "late-note", "Late", "written while turning off\n");
    b.ok(&["--project", &pb, "sync", "now"]);
    assert_eq!(
        encrypted_leftovers(&objects(&w)),
        Vec::<String>::new(),
        "nothing encrypted is left once no scope is"
    );
    let status = json(&b.ok(&["--json", "sync", "status"]));
    assert_eq!(status["encrypted"], false, "{status}");

    // The first machine finishes in plaintext too, with everything.
    a.ok(&["--project", &pa, "sync", "now"]);
    let status = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(status["encrypted"], false, "{status}");
    assert!(Path::new(&pa).join("MEMORY/late-note.md").exists());
    assert_notes_alike(&a, &b);
    assert_eq!(encrypted_leftovers(&objects(&w)), Vec::<String>::new());
}

#[test]
fn e2ee_a_server_cannot_turn_encryption_off_on_its_own() {
    let (w, _f, a, _b, _) = encrypted_pair(Backend::Fs);
    let store = store_dir(&w);
    a.add("after-the-fake", "Written after", "the pangolin password\n");
    let keys_path = keys_file(&w);
    let (path, mut m) = manifest(&store);
    m.as_object_mut().unwrap().remove("e2ee");
    std::fs::write(&path, m.to_string()).unwrap();
    let leaked = |store: &Path| {
        store_files(store).into_iter().any(|(_, b)| {
            let t = String::from_utf8_lossy(&b);
            t.contains("pangolin") || t.contains("after-the-fake")
        })
    };
    // The scope unmarked and "off" with a blob that is not the account key's own proof.
    let (_, mut keys) = account_keys(&objects(&w));
    keys["off"] = keys["recovery"].clone();
    std::fs::write(&keys_path, keys.to_string()).unwrap();
    let err = a.fails(&["--json", "sync", "now"]);
    assert_eq!(error_code(&err), "server_error", "{err}");
    assert!(!leaked(&store), "nothing went up in plaintext");
    // The keys simply gone.
    std::fs::remove_file(&keys_path).unwrap();
    let err = a.fails(&["--json", "sync", "now"]);
    assert_eq!(error_code(&err), "server_error", "{err}");
    assert!(!leaked(&store), "nothing went up in plaintext");
    let status = json(&a.ok(&["--json", "sync", "status"]));
    assert_eq!(status["encrypted"], true, "the key is kept: {status}");
}

#[test]
fn e2ee_turning_off_killed_midway_is_finished_by_the_next_sync() {
    let (w, _f, a, b) = encrypted_pair_with_bulk_notes();
    kill_once_the_keys_say(&w, &a, &["sync", "decrypt", "--yes"], "\"off\"");

    // Both machines' next syncs finish it, whatever step the kill interrupted.
    a.ok(&["sync", "now"]);
    b.ok(&["sync", "now"]);
    a.ok(&["sync", "now"]);
    assert_eq!(encrypted_leftovers(&objects(&w)), Vec::<String>::new());
    for d in [&a, &b] {
        let status = json(&d.ok(&["--json", "sync", "status"]));
        assert_eq!(status["encrypted"], false, "{status}");
    }
    assert_all_notes_alike(&a, &b);
    let text: String = objects(&w)
        .values()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    assert!(
        text.contains(&format!("line {}", BULK - 1)),
        "the notes are back in plaintext"
    );
}

mod key_change;
mod lost_passphrase;
